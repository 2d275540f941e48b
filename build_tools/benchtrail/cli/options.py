"""What several command families of the CLI share: the project and its presets, the store rule, the
argparse parents (``--filter``, ``--benchmark-presets``, ``--metrics``, ...), values from flags or the
environment, and the trust options. The argparse types of those parents (``presets``, ``metric_names``)
live here; the other argparse types in cli/flag_values.py, evaluate-detector's in cli/detector.py.

Imports no third-party package: ``benchtrail --help`` declares every command with it.
"""

from __future__ import annotations

import argparse
import os
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from benchtrail.errors import UserError
from benchtrail.store import is_local

DEFAULT_STORE = ".benchtrail/store"
#: The environment variable that names the store when ``--store`` is left out; set but empty: no store
#: (what the reusable workflow sets when neither its ``store`` input nor the repository variable is).
STORE_ENV = "BENCHTRAIL_STORE"
STORE_HELP = (
    "store: a folder, file:///ABS/PATH or gs://BUCKET[/PREFIX] (default: $BENCHTRAIL_STORE, else "
    f"[tool.benchtrail] store, else {DEFAULT_STORE})"
)
ACCEPT_HELP = (
    "accept regressions of series whose name or id matches (repeatable; also the "
    "comma-separated BENCHMARKS_ACCEPT, which `benchtrail configure` fills from trailers)"
)

T = TypeVar("T")


# -- the project ---------------------------------------------------------------------------------


def project():
    """``[tool.benchtrail]`` of the working directory. Raises UserError for a malformed pyproject.toml."""
    from benchtrail.project import load_project

    return load_project(Path("."))


def suite():
    """The project's suite (``[tool.benchtrail] suite``, else benchtrail's own ``benchmark_suites``). Raises
    UserError when it cannot be loaded."""
    from benchtrail.project import load_suite

    return load_suite(project())


def presets(text: str) -> tuple[str, ...]:
    """argparse type: ``"x86_64,comp-stats"`` → resolved preset tuple (meta-presets expanded)."""
    from benchtrail.suite.presets import resolve_presets, split_presets

    try:
        loaded = suite()
        return resolve_presets(split_presets(text), loaded.presets, dict(loaded.meta_presets))
    except UserError as exc:
        raise ArgumentTypeError(str(exc)) from exc


def project_presets(settings: Any) -> tuple[str, ...]:
    """:func:`presets` of ``[tool.benchtrail] presets``. Raises UserError for an unknown preset, naming
    pyproject.toml and the table."""
    try:
        return presets(settings.presets)
    except ArgumentTypeError as exc:
        raise UserError(f"{settings.pyproject}: [tool.benchtrail] presets: {exc}") from exc


# -- the store ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreChoice:
    """The store a command uses: ``url`` (a folder, ``file://`` or ``gs://`` URL; None: no store) and, for
    messages, its ``source`` (``--store``, ``BENCHTRAIL_STORE``, ``<pyproject.toml>: [tool.benchtrail] store``
    or ``default``)."""

    url: str | None
    source: str


def resolve_store(flag: str | None) -> StoreChoice:
    """The one store rule (docs/store.md, "Which store"): ``--store`` (empty: none), else
    ``$BENCHTRAIL_STORE`` (set but blank: none), else ``[tool.benchtrail] store`` (relative to
    pyproject.toml's folder), else ``DEFAULT_STORE`` in the working directory. Raises UserError for a
    malformed pyproject.toml."""
    if flag is not None:
        return StoreChoice(flag.strip() or None, "--store")
    if STORE_ENV in os.environ:
        return StoreChoice(os.environ[STORE_ENV].strip() or None, STORE_ENV)
    settings = project()
    if url := settings.store:
        if (
            is_local(url)
            and not url.startswith("file://")
            and settings.root is not None
            and not Path(url).is_absolute()
        ):
            url = os.path.normpath(settings.root / url)
        return StoreChoice(url, f"{settings.pyproject}: [tool.benchtrail] store")
    return StoreChoice(DEFAULT_STORE, "default")


def optional_store(flag: str | None) -> str | None:
    """:func:`resolve_store`'s store for a command that works without one: None for none, and the default
    ``.benchtrail/store`` only when it exists."""
    choice = resolve_store(flag)
    return None if choice.source == "default" and not Path(choice.url).is_dir() else choice.url


def require_store(flag: str | None, needs: str) -> str:
    """:func:`resolve_store`'s store for a command that needs one (``needs`` names it). Raises UserError when
    the rule gives none (an empty ``--store`` or ``BENCHTRAIL_STORE``) or for a malformed pyproject.toml."""
    choice = resolve_store(flag)
    if choice.url is None:
        given = "--store is empty" if choice.source == "--store" else f"{STORE_ENV} is set but empty"
        raise UserError(
            f"{needs} needs a store, and {given}, which means no store; pass --store "
            f"(a folder, file:///ABS/PATH or gs://BUCKET[/PREFIX]), or set {STORE_ENV} to one"
            + (
                ""
                if choice.source == "--store"
                else f" or unset it to use [tool.benchtrail] store, else {DEFAULT_STORE}"
            )
        )
    return choice.url


# -- options several commands share (argparse ``parents``) --------------------------------------


def add_command(subparsers: Any, name: str, func: Callable[[argparse.Namespace], int], **kwargs: Any) -> Any:
    """``subparsers.add_parser(name, **kwargs)``, its command run by ``func(args)``."""
    parser = subparsers.add_parser(name, **kwargs)
    parser.set_defaults(func=func)
    return parser


def add_any_origin_argument(parser: Any) -> None:
    """Declare ``--baseline-any-origin``: lift only the origin part (CI or local) of the baseline key."""
    parser.add_argument(
        "--baseline-any-origin",
        action="store_true",
        help="let a run made outside CI be the baseline of a CI run, and the reverse (by "
        "default a run is compared only with runs of its own origin, CI or local, since "
        "the same device name may name another machine); the rest of the baseline key "
        "(device, GPU model, torch version, method version) still applies",
    )


def _parent(*flags: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A parser holding one option, for argparse's ``parents``."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(*flags, **kwargs)
    return parent


#: ``--filter REGEX`` (export, run, pipeline).
FILTER_PARENT = _parent(
    "--filter",
    metavar="REGEX",
    help="only run configs (and modules) whose name or id this regular expression finds, "
    "e.g. 'resnet18|gpt2' or 'inductor.*backward'",
)
#: ``--benchmark-presets`` (export, pipeline); None when left out (``[tool.benchtrail] presets`` fills it).
PRESETS_PARENT = _parent(
    "--benchmark-presets",
    type=presets,
    metavar="P[,P...]",
    help="presets or meta-presets, comma- or space-separated (e.g. x86_64,comp-stats; "
    "default: presets of [tool.benchtrail] in pyproject.toml)",
)
#: What ``--metrics`` takes: wall time always; instruction counts under callgrind.
METRIC_NAMES = ("latency", "instructions")


def metric_names(text: str) -> tuple[str, ...]:
    """argparse type: ``"latency,instructions"`` → names of :data:`METRIC_NAMES`, latency always first."""
    out = tuple(dict.fromkeys(part.strip() for part in text.split(",")))
    if not set(out) <= set(METRIC_NAMES):
        empty = "an empty metric between commas; " if "" in out else ""
        raise ArgumentTypeError(
            f"{text!r}: {empty}expected metrics out of {', '.join(METRIC_NAMES)}, comma-separated"
        )
    return ("latency", *(m for m in out if m != "latency"))


#: ``--metrics`` (run, pipeline).
METRICS_PARENT = _parent(
    "--metrics",
    type=metric_names,
    metavar="M[,M...]",
    help="what to measure: latency (wall time, always) and instructions (instructions "
    "per call under valgrind's callgrind, CPU cases; needs valgrind); a device the "
    "suite marks count_instructions is counted anyway (default: latency; with "
    "--gate-metric instructions, latency,instructions)",
)
#: ``--thresholds FILE`` (compare, pipeline, ab).
THRESHOLDS_PARENT = _parent(
    "--thresholds",
    type=Path,
    help="thresholds YAML (default: [tool.benchtrail] thresholds, else the shipped table)",
)
#: ``--quarantine FILE`` (compare, pipeline).
QUARANTINE_PARENT = _parent(
    "--quarantine",
    type=Path,
    help="quarantine YAML: flaky series reported but never gating (default: "
    "[tool.benchtrail] quarantine, else the shipped, empty list)",
)


# -- values from flags or the environment --------------------------------------------------------


def from_env(value: T | None, flag: str, env: str, parse: Callable[[str], T]) -> T:
    """``value`` when the flag was given, else ``parse($env)``. Raises UserError when neither is set or
    ``$env`` does not parse."""
    if value is not None:
        return value
    text = os.environ.get(env, "").strip()
    if not text:
        raise UserError(f"{flag} is missing: pass {flag} or set {env}")
    try:
        return parse(text)
    except ArgumentTypeError as exc:
        raise UserError(f"${env}: {exc}") from exc


def api_url(flag: str | None) -> str:
    """``--api-url`` when given, else ``$GITHUB_API_URL`` when set and not empty, else GitHub's."""
    from benchtrail.github.post import DEFAULT_API_URL

    return flag or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL


def github_token(writes: str = "issue comments") -> str:
    """``$GITHUB_TOKEN``, never a flag (a command line shows in process lists and logs). Raises UserError when
    it is unset or blank, naming what the token must be allowed to write."""
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise UserError(f"no GitHub token: set GITHUB_TOKEN to a token that may write {writes}")
    return token


def accept_globs(flags: list[str] | None) -> list[str]:
    """``--accept`` globs, then those of the comma-separated ``BENCHMARKS_ACCEPT`` (``configure`` fills it
    from trailers), stripped, empty ones dropped."""
    globs = list(flags or []) + os.environ.get("BENCHMARKS_ACCEPT", "").split(",")
    return [g.strip() for g in globs if g.strip()]


def open_trusted(args: argparse.Namespace, url: str, repository: str | None = None) -> tuple[Any, Any]:
    """The store at ``url``, opened read-only, and the ``Trust`` of ``--trust`` and ``--trusted-workflow``."""
    from benchtrail.github.trust import trust_from_options
    from benchtrail.store import open_store

    trust = trust_from_options(args.trust, url, args.trusted_workflow, repository)
    return open_store(url, read_only=True), trust


def add_trust_arguments(parser: Any) -> None:
    """Declare ``--trust`` and ``--trusted-workflow``."""
    from benchtrail.github.trust import TRUST_CHOICES

    parser.add_argument(
        "--trust",
        choices=TRUST_CHOICES,
        default="auto",
        help="which stored runs may be baselines: 'github' verifies "
        "each with the GitHub API's record of the workflow run that wrote it (a push or "
        "manual run on the default or base branch, of that commit, by the trusted "
        "workflow); 'all' trusts every run; 'auto' (default): github in GitHub Actions "
        "with a remote (gs:// or git:) store, else all",
    )
    parser.add_argument(
        "--trusted-workflow",
        metavar="PATH",
        help="with --trust github: the workflow file whose runs are trusted, e.g. "
        ".github/workflows/benchmark.yml (default: BENCHTRAIL_TRUSTED_WORKFLOW, else "
        "this run's own workflow from GITHUB_WORKFLOW_REF)",
    )
