"""The setup job's step (``benchtrail configure``): reads the GitHub event, selects its presets
(github/selection.py) and writes what the workflow and people read: the ``$GITHUB_OUTPUT`` lines, the
job-summary section and, for a PR's invalid selection, the selection-error comment (comment.json and
comment.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError
from benchtrail.git import FULL_SHA
from benchtrail.github.selection import (
    POSTSUBMIT_EVENTS,
    PR_EVENTS,
    Env,
    Json,
    Meta,
    Names,
    Selection,
    SelectionError,
    payload_value,
    postsubmit_branch,
    select,
)

#: The selection-error comment's verdict (its heading after ``benchtrail: ``).
SELECTION_ERROR_VERDICT = "no benchmarks ran — the benchmark selection in the PR description is invalid"
#: Characters of the error shown in the selection-error comment (stderr gets all of it).
MAX_ERROR_CHARS = 4_000


def read_event(env: Env) -> tuple[str, dict[str, Any]]:
    """``(GITHUB_EVENT_NAME, payload)``, empty without ``GITHUB_EVENT_PATH`` (except PR and push events).

    Raises UserError when ``GITHUB_EVENT_NAME`` is unset or the event file is unreadable or not JSON.
    """
    name = env.get("GITHUB_EVENT_NAME")
    if not name:
        raise UserError("GITHUB_EVENT_NAME is not set; set it (e.g. pull_request) and GITHUB_EVENT_PATH")
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        if name in (*PR_EVENTS, "push"):
            raise UserError(f"GITHUB_EVENT_PATH is not set; a {name} event needs its payload file")
        return name, {}
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the event payload GITHUB_EVENT_PATH={path}: {exc}") from exc
    if not isinstance(payload, dict):
        raise UserError(f"the event payload {path} must be a JSON object, got {type(payload).__name__}")
    return name, payload


def outputs(selection: Selection, postsubmit: bool = False) -> str:
    """``$GITHUB_OUTPUT`` lines; ``postsubmit=true`` only for a run that stores baselines."""
    return (
        f"benchmark-presets={','.join(selection.presets)}\n"
        f"has-benchmarks={'true' if selection.has_benchmarks else 'false'}\n"
        f"benchmarks-accept={','.join(selection.accept)}\n" + ("postsubmit=true\n" if postsubmit else "")
    )


def summary(selection: Selection) -> str:
    """The job-summary section: what was selected and from where."""
    from benchtrail.markup import code_span

    lines = ["### benchtrail: benchmark selection", ""]
    if selection.sources:
        lines += [
            "| requested | from |",
            "|---|---|",
            *(f"| {code_span(n, in_table=True)} | {s} |" for n, s in selection.sources),
            "",
            f"Presets: {', '.join(f'`{p}`' for p in selection.presets)}",
        ]
    lines += [f"- {note}" for note in selection.notes]
    if selection.accept:
        globs = ", ".join(map(code_span, selection.accept))
        lines.append(f"Accepted regressions (`benchmarks-accept:`): {globs}")
    if selection.skipped_reason:
        lines.append(f"No benchmarks run: {selection.skipped_reason}.")
    elif not selection.presets:
        lines.append("No benchmarks run: nothing was selected.")
    return "\n".join(lines) + "\n"


def selection_error_comment(error: str, env: Env, payload: Json) -> dict[str, Any]:
    """comment.json for an invalid selection: ``error`` (at most ``MAX_ERROR_CHARS``), how to fix it, and
    this run's marker (``GITHUB_RUN_ID``, ``GITHUB_RUN_ATTEMPT``; ``local`` and 1 when unset).

    Raises UserError when ``GITHUB_RUN_ID`` holds white space or ``GITHUB_RUN_ATTEMPT`` is not ≥ 1.
    """
    from benchtrail.compare.comment import SCHEMA_VERSION, marker
    from benchtrail.compare.document import count_rows
    from benchtrail.compare.tables import plain

    run_id = env.get("GITHUB_RUN_ID", "").strip() or "local"
    attempt = env.get("GITHUB_RUN_ATTEMPT", "").strip() or "1"
    if any(c.isspace() for c in run_id):
        raise UserError(f"GITHUB_RUN_ID={run_id!r}: expected a run id without white space")
    if not attempt.isdigit() or int(attempt) < 1:
        raise UserError(f"GITHUB_RUN_ATTEMPT={attempt!r}: expected a whole number from 1")
    hidden = marker({"run": {"run_id": run_id, "attempt": int(attempt)}})
    text = " ".join(error.split())
    body = (
        "\n".join(
            [
                f"### benchtrail: {SELECTION_ERROR_VERDICT}",
                "",
                plain(text[:MAX_ERROR_CHARS]) + ("…" if len(text) > MAX_ERROR_CHARS else ""),
                "",
                "To fix it, edit the `benchmarks:` line at the bottom of the PR description (or its "
                "`benchmarks-accept:` line, or the `benchmarks:<preset>` label); saving the description runs "
                "the selection again. Grammar: docs/trailers.md in benchtrail.",
                hidden,
            ]
        )
        + "\n"
    )
    head = payload_value(payload, "pull_request", "head", "sha")
    return {
        "schema_version": SCHEMA_VERSION,
        "marker": hidden,
        "verdict": SELECTION_ERROR_VERDICT,
        "counts": count_rows([]),
        "notes": [],
        "head_commit": head.lower() if isinstance(head, str) and FULL_SHA.fullmatch(head) else None,
        "base_commit": None,
        "body": body,
    }


def _emit(env: Env, output_lines: str, summary_text: str) -> None:
    """Append to ``$GITHUB_OUTPUT`` (else stdout) and ``$GITHUB_STEP_SUMMARY`` (else stderr)."""
    for var, text, unset in (
        ("GITHUB_OUTPUT", output_lines, sys.stdout),
        ("GITHUB_STEP_SUMMARY", summary_text, sys.stderr),
    ):
        if not env.get(var):
            unset.write(text)
            continue
        try:
            with open(env[var], "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise UserError(f"cannot append to {var}={env[var]}: {exc.strerror}") from exc


def configure(env: Env, known: Names, meta: Meta, error_comment: Path | None = None) -> Selection:
    """Select presets for the event and append the outputs and the summary.

    With ``error_comment`` (a folder), a PR's invalid selection also writes ``comment.json`` and
    ``comment.md`` there and ``selection-error=true``, then raises all the same.
    Raises SelectionError for an invalid selection; UserError when the event or environment is
    malformed or an output cannot be written (an existing comment file included).
    """
    event_name, payload = read_event(env)
    try:
        selection = select(event_name, payload, env, known, meta)
    except SelectionError as exc:
        if error_comment is not None and event_name in PR_EVENTS:
            from benchtrail import jsonio

            comment = selection_error_comment(str(exc), env, payload)
            json_path, md_path = error_comment / "comment.json", error_comment / "comment.md"
            try:
                jsonio.check_new(json_path, md_path)
                jsonio.write_json(json_path, comment, exclusive=True)
                jsonio.write_text_atomic(md_path, comment["body"], exclusive=True)
            except UserError as write_error:
                raise UserError(
                    f"{exc} (and the selection-error comment was not written: {write_error})"
                ) from exc
            _emit(env, "has-benchmarks=false\nselection-error=true\n", comment["body"])
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(
            f"the {event_name} event payload ({env.get('GITHUB_EVENT_PATH')}) or the PR_* / "
            f"GITHUB_RUN_ATTEMPT variables are malformed: {type(exc).__name__}: {exc}"
        ) from exc
    postsubmit = event_name in POSTSUBMIT_EVENTS and postsubmit_branch(payload, env)
    _emit(
        env,
        outputs(selection, postsubmit) + ("selection-error=false\n" if error_comment is not None else ""),
        summary(selection),
    )
    return selection
