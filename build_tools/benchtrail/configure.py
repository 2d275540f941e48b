"""The setup job's selection: which presets a GitHub event asks for, and from where.

Sources, by event:

* ``pull_request``: ``benchmarks:`` trailers of ``<title>\\n\\n<body>`` (``trailers.py``) and labels
  named ``benchmarks:<preset>``. ``PR_TITLE``, ``PR_BODY`` and ``PR_LABELS`` (a JSON list of label
  names) override the event payload when set. For ``edited`` events the previous body
  (``changes.body.from``) is parsed too, and nothing runs when the selection did not change.
* ``push`` to the repository's default branch: the ``default`` meta-preset.
* ``workflow_dispatch``: the ``benchmark-presets`` input (or ``BENCHMARK_PRESETS_INPUT``).

The body is read from the event file, never from the command line: one environment variable
holds at most 128 KiB on Linux, and a PR body may be larger.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError
from benchtrail.suite.presets import resolve_presets, split_presets
from benchtrail.trailers import accepted_regressions, benchmark_presets

LABEL_PREFIX = "benchmarks:"
SAFE_ACCEPT = re.compile(r"^[A-Za-z0-9._*?\[\]-]+$")
DEFAULT_META_PRESET = "default"


@dataclass(frozen=True)
class Selection:
    """What to benchmark: resolved presets and, per requested name, where it came from."""

    presets: tuple[str, ...]
    sources: tuple[tuple[str, str], ...] = ()  # (requested name, "trailer" | "label" | "default" | "input")
    skipped_reason: str | None = None
    notes: tuple[str, ...] = field(default=())
    accept: tuple[str, ...] = ()  # series names or globs from benchmarks-accept: trailers

    @property
    def has_benchmarks(self) -> bool:
        return bool(self.presets) and self.skipped_reason is None


def _resolve(requested: list[tuple[str, str]], known: tuple[str, ...], meta: Mapping[str, tuple[str, ...]],
             where: str) -> tuple[str, ...]:
    try:
        return resolve_presets([name for name, _ in requested], known, meta) if requested else ()
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def pr_requests(title: str | None, body: str | None, labels: list[str]) -> tuple[list[tuple[str, str]], bool]:
    """``([(preset, source)], trailer_found)`` from a PR's trailers and ``benchmarks:<preset>`` labels."""
    from_trailer = benchmark_presets(title, body)
    requested = [(p, "trailer") for p in from_trailer or []]
    for label in labels:
        if label.lower().startswith(LABEL_PREFIX):
            requested += [(p, "label") for p in split_presets(label[len(LABEL_PREFIX):])]
    seen: dict[str, str] = {}
    for name, source in requested:
        seen.setdefault(name, source)
    return list(seen.items()), from_trailer is not None


def select(event_name: str, payload: Mapping[str, Any], env: Mapping[str, str], known: tuple[str, ...],
           meta: Mapping[str, tuple[str, ...]]) -> Selection:
    """Decide the presets for one event.

    Raises:
        UserError: an unknown preset (named, with the valid ones and a close match), or a
            malformed ``PR_LABELS``.
    """
    if event_name in ("pull_request", "pull_request_target"):
        pr = dict(payload.get("pull_request") or {})
        if int(env.get("GITHUB_RUN_ATTEMPT", "1") or 1) > 1 and env.get("GITHUB_TOKEN") and pr.get("number"):
            pr.update(fetch_current_pr(env, int(pr["number"])))
        title = env.get("PR_TITLE", pr.get("title"))
        body = env.get("PR_BODY", pr.get("body"))
        for field, value in (("title", title), ("body", body)):
            if value is not None and not isinstance(value, str):
                raise UserError(f"the PR {field} in the event payload must be text or null, got {value!r:.60}")
        labels = _labels(env, pr)
        requested, trailer_found = pr_requests(title, body, labels)
        accept = tuple(accepted_regressions(title, body))
        for item in accept:
            if not SAFE_ACCEPT.match(item):
                raise UserError(f"benchmarks-accept item {item!r}: use series names or globs of letters, digits "
                                "and . _ - * ? [ ]")
        presets = _resolve(requested, known, meta, "PR description")
        notes = () if trailer_found else ("no `benchmarks:` trailer in the last paragraph of the PR description",)
        if payload.get("action") == "edited" and "body" in (payload.get("changes") or {}):
            old_body = (payload["changes"]["body"] or {}).get("from")
            old_title = ((payload["changes"].get("title") or {}).get("from")) or title
            try:
                before = _resolve(pr_requests(old_title, old_body, labels)[0], known, meta, "previous PR description")
            except UserError:
                before = None
            accept_before = tuple(accepted_regressions(old_title, old_body))
            if before == presets and accept_before == accept:
                return Selection(presets, tuple(requested), "the edit did not change the benchmark selection", notes,
                                 accept)
        return Selection(presets, tuple(requested), None, notes, accept)
    if event_name == "push":
        default_branch = (payload.get("repository") or {}).get("default_branch")
        if default_branch and payload.get("ref") == f"refs/heads/{default_branch}":
            if DEFAULT_META_PRESET not in meta:
                return Selection((), (), "push to the default branch, but the suite has no 'default' meta-preset "
                                         "and [tool.benchtrail] sets no presets: nothing to run")
            return Selection(tuple(meta[DEFAULT_META_PRESET]), ((DEFAULT_META_PRESET, "default"),))
        return Selection((), (), f"push to {payload.get('ref')}, not to the default branch")
    if event_name == "workflow_dispatch":
        text = env.get("BENCHMARK_PRESETS_INPUT", (payload.get("inputs") or {}).get("benchmark-presets", ""))
        requested = [(p, "input") for p in split_presets(text or "")]
        return Selection(_resolve(requested, known, meta, "workflow_dispatch input"), tuple(requested))
    return Selection((), (), f"event {event_name!r} does not run benchmarks")


def fetch_current_pr(env: Mapping[str, str], number: int) -> dict[str, Any]:
    """The PR's current title, body and labels through PyGithub (a re-run sees an edited trailer).

    Uses ``GITHUB_TOKEN``, ``GITHUB_REPOSITORY`` and ``GITHUB_API_URL`` (default api.github.com).

    Raises:
        UserError: the PR cannot be read (the message names the repository and PR).
    """
    import github

    from benchtrail.github.post import make_client

    repo = env.get("GITHUB_REPOSITORY", "")
    client = make_client(env["GITHUB_TOKEN"], env.get("GITHUB_API_URL", "https://api.github.com"))
    try:
        pull = client.get_repo(repo).get_pull(number)
        return {"title": pull.title, "body": pull.body, "labels": [{"name": label.name} for label in pull.labels]}
    except github.GithubException as exc:
        raise UserError(f"cannot re-read PR {repo}#{number} for this re-run: HTTP {exc.status}") from exc


def _labels(env: Mapping[str, str], pr: Mapping[str, Any]) -> list[str]:
    if "PR_LABELS" in env:
        try:
            labels = json.loads(env["PR_LABELS"])
        except json.JSONDecodeError as exc:
            raise UserError(f"PR_LABELS must be a JSON list of label names, got {env['PR_LABELS']!r}") from exc
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise UserError(f"PR_LABELS must be a JSON list of label names, got {env['PR_LABELS']!r}")
        return labels
    return [label.get("name", "") for label in pr.get("labels") or []]


def read_event(env: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """``(GITHUB_EVENT_NAME, payload)``; a missing ``GITHUB_EVENT_PATH`` gives an empty payload.

    Raises:
        UserError: ``GITHUB_EVENT_NAME`` is unset, or the event file is unreadable or not JSON.
    """
    name = env.get("GITHUB_EVENT_NAME")
    if not name:
        raise UserError("GITHUB_EVENT_NAME is not set; set it (e.g. pull_request) and GITHUB_EVENT_PATH")
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        if name in ("pull_request", "pull_request_target", "push"):
            raise UserError(f"GITHUB_EVENT_PATH is not set; a {name} event needs its payload file")
        return name, {}
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the event payload GITHUB_EVENT_PATH={path}: {exc}") from exc
    if not isinstance(payload, dict):
        raise UserError(f"the event payload {path} must be a JSON object, got {type(payload).__name__}")
    return name, payload


def outputs(selection: Selection) -> str:
    """``$GITHUB_OUTPUT`` lines."""
    return (f"benchmark-presets={','.join(selection.presets)}\n"
            f"has-benchmarks={'true' if selection.has_benchmarks else 'false'}\n"
            f"benchmarks-accept={','.join(selection.accept)}\n")


def summary(selection: Selection) -> str:
    """The job-summary section: what was selected and from where."""
    lines = ["### benchtrail: benchmark selection", ""]
    if selection.sources:
        lines += ["| requested | from |", "|---|---|"] + [f"| `{n}` | {s} |" for n, s in selection.sources]
        lines += ["", f"Presets: {', '.join(f'`{p}`' for p in selection.presets)}"]
    lines += [f"- {note}" for note in selection.notes]
    if selection.accept:
        lines.append(f"Accepted regressions (`benchmarks-accept:`): {', '.join(f'`{a}`' for a in selection.accept)}")
    if selection.skipped_reason:
        lines.append(f"No benchmarks run: {selection.skipped_reason}.")
    elif not selection.presets:
        lines.append("No benchmarks run: nothing was selected.")
    return "\n".join(lines) + "\n"


def _append(path: str | None, text: str) -> bool:
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return True


def configure(env: Mapping[str, str], known: tuple[str, ...], meta: Mapping[str, tuple[str, ...]]) -> Selection:
    """Read the event, select presets, append outputs to ``$GITHUB_OUTPUT`` (stdout when unset) and
    the summary to ``$GITHUB_STEP_SUMMARY`` (stderr when unset)."""
    event_name, payload = read_event(env)
    try:
        selection = select(event_name, payload, env, known, meta)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"the {event_name} event payload ({env.get('GITHUB_EVENT_PATH')}) or the PR_* / "
                        f"GITHUB_RUN_ATTEMPT variables are malformed: {type(exc).__name__}: {exc}") from exc
    try:
        wrote = _append(env.get("GITHUB_OUTPUT"), outputs(selection))
    except OSError as exc:
        raise UserError(f"cannot append to GITHUB_OUTPUT={env.get('GITHUB_OUTPUT')}: {exc.strerror}") from exc
    if not wrote:
        print(outputs(selection), end="")
    if not _append(env.get("GITHUB_STEP_SUMMARY"), summary(selection)):
        print(summary(selection), end="", file=sys.stderr)
    return selection

