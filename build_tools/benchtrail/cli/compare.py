"""``benchtrail compare`` and ``comment``: head results against a baseline, then the PR comment. Neither
imports torch; ``compare --store`` finds the baseline in a store, and one that cannot be read only warns."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchtrail.cli.options import (
    ACCEPT_HELP,
    QUARANTINE_PARENT,
    THRESHOLDS_PARENT,
    accept_globs,
    add_any_origin_argument,
    add_command,
    add_trust_arguments,
    optional_store,
)
from benchtrail.errors import EXIT_BENCHMARKS_FAILED, EXIT_OK, EXIT_REGRESSION, UserError

if TYPE_CHECKING:
    from benchtrail.compare.document import Row

#: The default of ``comment --pages-url``: the URL of the store's GitHub Pages site (the workflow sets it).
PAGES_ENV = "BENCHTRAIL_PAGES_URL"


def add_compare_parsers(subparsers: Any) -> None:
    """Declare ``compare`` and ``comment``."""
    p = add_command(subparsers, "compare", cmd_compare, parents=[THRESHOLDS_PARENT, QUARANTINE_PARENT])
    p.add_argument(
        "--base",
        type=Path,
        action="append",
        default=[],
        help="baseline results file or run dir (repeatable; none: every series is new)",
    )
    p.add_argument(
        "--head", type=Path, action="append", required=True, help="head results file or run dir (repeatable)"
    )
    p.add_argument(
        "--store",
        help="find the baseline run in this store (README's Baseline "
        "rule) instead of --base; a store that cannot be read (outage, missing "
        "bucket, no credentials) only warns: the comparison has no baseline "
        "(BENCHTRAIL_STORE_DEADLINE_S caps GCS retries). Without --base and "
        "--store: $BENCHTRAIL_STORE (empty: no store), else [tool.benchtrail] "
        "store, else .benchtrail/store when it exists",
    )
    add_any_origin_argument(p)
    p.add_argument("--base-commit", help="with --store: the baseline commit (default: the Baseline rule)")
    p.add_argument(
        "--base-branch",
        metavar="BRANCH",
        help="with --store: the branch the head merges into (a PR's base "
        "branch, the pushed branch for a push): baselines come from its merge base with HEAD "
        "(default: the default branch)",
    )
    add_trust_arguments(p)
    p.add_argument("--output", type=Path, default=Path("comparison.json"))
    add_result_arguments(p)

    p = add_command(subparsers, "comment", cmd_comment)
    p.add_argument("--comparison", type=Path, required=True)
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument(
        "--run-url",
        metavar="URL",
        help="the run's store URL (gs://BUCKET/PREFIX/runs/<id>/<attempt>/) or folder: adds the "
        "`gcloud storage cp -r` and `benchtrail explain <id> --run URL` lines",
    )
    p.add_argument(
        "--dashboard",
        metavar="PATH",
        help="the dashboard's index.html relative to --run-url (e.g. "
        "dashboard/index.html), linked (https://storage.cloud.google.com/... "
        "for gs://); needs --run-url",
    )
    p.add_argument(
        "--artifacts-url",
        metavar="URL",
        help="the GitHub Actions run's page, linked as its artifacts for readers without bucket access",
    )
    p.add_argument(
        "--note",
        action="append",
        metavar="TEXT",
        help="a line near the top of the comment, shown as plain text (repeatable), e.g. "
        "'⚠ the run could not be stored: ...'",
    )
    p.add_argument(
        "--pages-url",
        metavar="URL",
        help="the store's dashboard on GitHub Pages (`benchtrail pages`), e.g. "
        f"https://OWNER.github.io/REPO/, linked (default: ${PAGES_ENV}; empty: none)",
    )


def add_result_arguments(
    parser: argparse.ArgumentParser,
    accept_help: str = ACCEPT_HELP,
    fail_on_help: str = "exit 3 when a regression is not accepted",
) -> None:
    """Declare ``--accept``, ``--fail-on``, ``--json`` and ``--all`` (``compare``, ``pipeline``, ``ab``)."""
    parser.add_argument("--accept", action="append", metavar="GLOB", help=accept_help)
    parser.add_argument("--fail-on", choices=("regressed",), help=fail_on_help)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print comparison.json to stdout instead of the table and the output path "
        "(the path goes to stderr)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="list every row in the table, not only the regressed, improved and new ones",
    )


def show_result(comparison: Path, main_output: Path, args: argparse.Namespace) -> tuple[Row, ...]:
    """Print the table (``--all``: every row), then ``main_output`` last, for scripts; with ``--json`` the
    comparison.json text alone on stdout and ``main_output`` on stderr. Raises UserError when ``comparison``
    is not a readable comparison.json."""
    from benchtrail.compare.document import load_comparison
    from benchtrail.compare.terminal import render_table, stdout_style

    loaded = load_comparison(comparison)
    if args.json:  # the file as written, one JSON document and nothing else
        sys.stdout.write(comparison.read_text(encoding="utf-8"))
        print(f"benchtrail: wrote {main_output}", file=sys.stderr)
    else:
        sys.stdout.write(render_table(loaded, *stdout_style(), all_rows=args.all))
        print(main_output)
    return loaded.rows


def exit_code(
    args: argparse.Namespace,
    rows: Sequence[Row],
    ok: bool = True,
    hint: str = "",
    rule: Literal["confirmed", "any"] = "any",
) -> int:
    """3 with ``--fail-on regressed`` when ``rule`` fails a regression of ``rows`` not accepted (named on
    stderr, ``hint`` ending the line), else 0 when ``ok``, else 2."""
    from benchtrail.compare.gate import check

    failing = [r.name for r in check(rows, rule=rule).failing] if args.fail_on else []
    if failing:
        print(
            f"benchtrail: {len(failing)} {'confirmed ' * (rule == 'confirmed')}regression(s) not accepted: "
            f"{', '.join(failing[:10])}{hint}",
            file=sys.stderr,
        )
        return EXIT_REGRESSION
    return EXIT_OK if ok else EXIT_BENCHMARKS_FAILED


def _store_failures() -> tuple[type[BaseException], ...]:
    """What an unreadable store raises: ``StoreError``, and google-api-core, google-auth and requests errors
    should one escape the store's handling (``StoreError`` alone without the gcs extra)."""
    from benchtrail.errors import StoreError

    try:
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from requests import RequestException
    except ModuleNotFoundError:
        return (StoreError,)
    return StoreError, GoogleAPIError, GoogleAuthError, RequestException


def _stored_baseline(args: argparse.Namespace) -> tuple[list | None, dict | None]:
    """Baseline results and comparison.json's baseline for ``compare --store``: each head device's nearest
    trusted baseline run, fetched. An unreadable store (an outage past ``BENCHTRAIL_STORE_DEADLINE_S``, a
    missing bucket, no credentials) warns on stderr and gives ``(None, {reason, store, store_error})``: every
    row is new (or failed). Raises UserError for head results of several commits, a malformed store URL or
    deadline, a bad ``--trust`` set-up, a ``--base-branch`` that is no branch, or a ``--base-commit`` with no
    trusted run."""
    from benchtrail.compare.baseline import fetch_baselines, find_baselines
    from benchtrail.github.trust import trust_from_options
    from benchtrail.pipeline.report_stages import report_baselines
    from benchtrail.results.baseline_key import keys_of_results
    from benchtrail.results.io import load_results_paths
    from benchtrail.store import open_store

    head = load_results_paths(args.head)
    commits = {f.commit for f in head}
    if len(commits) != 1:
        raise UserError(
            f"--store: the head results come from {len(commits)} commits; compare one commit's run"
        )
    trust = trust_from_options(args.trust, args.store, args.trusted_workflow)
    try:
        store = open_store(args.store)
        found = find_baselines(
            store,
            Path("."),
            commits.pop(),
            keys_of_results(head),
            trust,
            base_branch=args.base_branch,
            explicit=args.base_commit,
            any_origin=args.baseline_any_origin,
        )
        files, found = fetch_baselines(store, found)
    except _store_failures() as exc:
        message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        print(
            f"benchtrail: warning: the store {args.store} could not be read, so this comparison has no "
            f"baseline (every row is new or failed): {message}",
            file=sys.stderr,
        )
        return None, {
            "reason": f"the store could not be read: {message}",
            "store": args.store,
            "store_error": message,
        }
    report_baselines(found)
    return files, found.to_dict()


def cmd_compare(args: argparse.Namespace) -> int:
    """Write comparison.json, print its table then its path (``--json``: the comparison); exit 3 with
    ``--fail-on regressed`` when a regression is not accepted, else 0. Without ``--base`` the baseline comes
    from ``resolve_store``'s store, if any (none: every row is new). Raises UserError for unreadable results,
    thresholds or quarantine, ``--base`` with ``--store``, or a bad store set-up."""
    from benchtrail.compare.rules import Rules
    from benchtrail.pipeline.report_stages import compare_stage

    baseline = base_results = None
    if args.base and args.store:
        raise UserError("--base and --store both name a baseline; pass one")
    args.store = None if args.base else optional_store(args.store)
    if args.store:
        base_results, baseline = _stored_baseline(args)
    path = compare_stage(
        args.base,
        args.head,
        args.output,
        Rules.load(args.thresholds, accept_globs(args.accept), args.quarantine),
        baseline,
        base_results=base_results,
        any_origin=args.baseline_any_origin,
    )
    return exit_code(
        args,
        show_result(path, path, args),
        hint=". Accept one with a `benchmarks-accept: <series name or glob>` trailer.",
    )


def cmd_comment(args: argparse.Namespace) -> int:
    """Render the comparison as the PR comment into ``--output-dir``; print the main output's path. Raises
    UserError for bad options or an unreadable comparison."""
    from benchtrail.compare.comment import check_comment_options, check_pages_url
    from benchtrail.pipeline.report_stages import comment_stage

    options = (args.run_url, args.dashboard, args.artifacts_url, tuple(args.note or ()))
    check_comment_options(*options)
    given = args.pages_url is not None
    pages_url = (args.pages_url if given else os.environ.get(PAGES_ENV, "")).strip() or None
    check_pages_url(pages_url, "--pages-url" if given else PAGES_ENV)
    print(comment_stage(args.comparison, args.output_dir, *options, pages_url=pages_url))
    return EXIT_OK
