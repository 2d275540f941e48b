"""The comment stage: render comparison.json as the PR comment (Markdown) and its JSON form.

Only strings are returned; posting is separate (as IREE's ``post_benchmark_comment.py``). comment.md fits
a GitHub comment, rows cut and counted when needed; full.md holds every row. Here: the sections (tables,
folded by kind), the footer's links and the checks of the options behind them; the header's lines are in
``comment_header``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from benchtrail.compare.callgrind import render_functions
from benchtrail.compare.comment_header import (
    baseline_gaps,
    context_line,
    missing_shards_line,
    note_line,
    recheck_line,
    runner_checks_line,
    trust_lines,
    verdict_line,
)
from benchtrail.compare.comment_size import (
    MAX_COMMENT_BYTES,
    MAX_COMMENT_CHARS,
    Block,
    body_size,
    cut_to_fit,
    fits,
)
from benchtrail.compare.compiler_summary import render_markdown, rows_from_json
from benchtrail.compare.document import INCONCLUSIVE, Comparison, Json, Row
from benchtrail.compare.profile_diff import render_profile
from benchtrail.compare.tables import (
    CHANGES,
    Notes,
    compilation_table,
    display_name,
    estimate,
    instruction_rows,
    series_table,
)
from benchtrail.errors import UserError
from benchtrail.markup import code_span
from benchtrail.store import FORMS, browser_link, fetch_command, is_local, remote, split_run_url

#: Version history of comment.json:
#:   1 — first version.
#:   2 — notes: the ``benchtrail comment --note`` lines, as given.
SCHEMA_VERSION = 2
MARKER_PREFIX = "<!-- benchtrail:comment"


def marker(head: Json) -> str:
    """The hidden marker a poster uses to find and edit our earlier comment."""
    run = head.get("run") or {}
    return f"{MARKER_PREFIX} run={run.get('run_id', 'local')} attempt={run.get('attempt', 1)} -->"


_LINK_UNSAFE = re.compile(r"[\s`<>\"'|\\]")


def check_comment_options(
    run_url: str | None, dashboard: str | None, artifacts_url: str | None, notes: Sequence[str]
) -> None:
    """Check the comment's links and notes. Raises UserError, naming the flag, for a ``--run-url`` neither
    a run's URL in a remote store (``FORMS``) nor a folder path (or with spaces, quotes or backticks);
    ``--dashboard`` without ``--run-url`` or not a relative path inside the run; an ``--artifacts-url``
    not an ``http(s)://`` URL; an empty ``--note``."""
    if run_url is not None:
        runs = " or ".join(f"{form}/runs/<id>/<attempt>/" for form in FORMS.values())
        if not run_url or _LINK_UNSAFE.search(run_url):  # spaces: _LINK_UNSAFE
            raise UserError(
                f"--run-url {run_url!r}: allowed: a run's store URL ({runs}) or a folder path, "
                "without spaces, quotes, backticks, '<', '>', '|' or '\\'"
            )
        if ("://" in run_url or not is_local(run_url)) and not (remote(run_url) and split_run_url(run_url)):
            raise UserError(
                f"--run-url {run_url!r}: a store URL must be a run's URL, {runs} (e.g. "
                "gs://bucket/runs/123/1/); for a local run give its folder path"
            )
    if dashboard is not None:
        if run_url is None:
            raise UserError(
                f"--dashboard {dashboard!r} is a path relative to the run, so it needs --run-url "
                "(the run's store URL or folder)"
            )
        # an empty part: empty, a leading '/', '//' or '://'; spaces: _LINK_UNSAFE
        if _LINK_UNSAFE.search(dashboard) or any(p in ("", ".", "..") for p in dashboard.split("/")):
            raise UserError(
                f"--dashboard {dashboard!r}: allowed: a relative path inside the run, such as "
                "dashboard/index.html (no '..', no leading '/', no spaces or quotes)"
            )
    if artifacts_url is not None:
        if not re.match(r"^https?://[^/\s]+", artifacts_url) or _LINK_UNSAFE.search(artifacts_url):
            raise UserError(
                f"--artifacts-url {artifacts_url!r}: allowed: the https:// URL of the GitHub "
                "Actions run's page, e.g. https://github.com/OWNER/REPO/actions/runs/123, "
                "without spaces or quotes"
            )
    for note in notes:
        if not note.strip():
            raise UserError("--note '': a note needs text, e.g. --note '⚠ the run could not be stored: …'")


def check_pages_url(url: str | None, source: str = "--pages-url") -> None:
    """Check the Pages dashboard's URL. Raises UserError, naming ``source``, when it is not an
    ``http(s)://`` URL or holds spaces, quotes, backticks, ``<``, ``>``, ``|`` or ``\\``."""
    if url is not None and (not re.match(r"^https?://[^/\s]+", url) or _LINK_UNSAFE.search(url)):
        raise UserError(
            f"{source} {url!r}: allowed: the https:// URL of the GitHub Pages site that "
            "`benchtrail pages` built, e.g. https://OWNER.github.io/REPO/, without spaces or "
            "quotes"
        )


def artifact_lines(run_url: str, rows: Sequence[Row], dashboard: str | None) -> list[str]:
    """Copy-pasteable lines: the dashboard, fetching the run's artifacts, and explaining the worst row (the
    largest confirmed regression, else the largest regression, else the first row)."""
    lines = []
    if dashboard:
        link = browser_link(f"{run_url.rstrip('/')}/{dashboard}")
        # a local path in code: nothing links or mangles it
        lines.append(f"Dashboard (history by commit): {link if link.startswith('https://') else f'`{link}`'}")
    lines.append(f"Artifacts: `{fetch_command(run_url)}`")
    if rows:
        worst = min(rows, key=lambda r: (r.verdict != "regressed", r.mark != "confirmed", -(r.change or 0)))
        command = f"benchtrail explain {shlex.quote(worst.name)} --run {run_url}"
        lines.append(f"Reproduce: {code_span(command)}")
    return lines


#: The folded sections of comment.md, in order, and the rows each holds (those no table above shows).
#: The cut priority (``Block.priority``) of the first folded section; the others follow in ``FOLDED``'s order.
FOLDED_PRIORITY = 4
FOLDED: tuple[tuple[str, Callable[[Row], bool]], ...] = (
    ("Unconfirmed changes", lambda r: r.verdict in CHANGES and r.mark in (None, "unconfirmed")),
    ("Inconclusive", lambda r: r.verdict in INCONCLUSIVE),
    ("Failed or not comparable", lambda r: r.verdict in ("failed", "not-comparable")),
    ("Too few samples", lambda r: r.verdict == "insufficient-samples"),
    ("Accepted or quarantined", lambda r: r.verdict in CHANGES),
    ("New or removed", lambda r: r.verdict in ("new", "removed")),
    ("Similar", lambda r: True),
)


def confirmed(row: Row) -> bool:
    """Whether an execution row goes into the confirmed-changes table: a change marked ``confirmed``, or
    unmarked and never re-checked; never a row a bounded re-check did not reach."""
    if row.verdict not in CHANGES or row.recheck == "not-reached":
        return False
    return row.mark == "confirmed" or (row.mark is None and not row.ab)


def sections(rows: Sequence[Row], one_device: bool) -> list[Block]:
    """The sections of comment.md, each row in exactly one: confirmed changes and changed compilation
    statistics (shown), the rest folded in ``<details>`` by kind (``FOLDED``); each table followed by the
    legend of the reasons it first refers to."""
    notes, instructions = Notes(), instruction_rows(rows)
    changes = sorted(
        (r for r in rows if r.kind == "execution" and confirmed(r)),
        key=lambda r: (r.verdict != "regressed", -abs(estimate(r).change or 0)),
    )

    table = (
        series_table(changes, notes, one_device, instructions)
        if changes
        else ["No confirmed regression or improvement.", ""]
    )
    blocks = [
        Block(
            ["#### Confirmed regressions and improvements", *table[:2]],
            table[2:],
            ["", *notes.legend()] if changes else [],
            0,
        )
    ]
    changed = [r for r in rows if r.kind == "compilation" and r.verdict not in ("similar", "new", "removed")]
    if changed:
        table = compilation_table(changed)
        blocks.append(Block(["#### Compilation statistics", *table[:2]], table[2:], [""], 1))
    shown = {id(r) for r in changes + changed}
    left = [r for r in rows if id(r) not in shown]
    for priority, (name, belongs) in enumerate(FOLDED, start=FOLDED_PRIORITY):
        group = [r for r in left if belongs(r)]
        left = [r for r in left if not belongs(r)]
        if group:
            table = series_table(group, notes, one_device, instructions)
            summary = f"<details><summary>{name}: {len(group)} series</summary>"
            blocks.append(
                Block([summary, "", *table[:2]], table[2:], ["", *notes.legend(), "</details>", ""], priority)
            )
    return blocks


def why_blocks(rows: Sequence[Row], run_url: str | None) -> list[Block]:
    """ "Why it got slower", folded: each confirmed regression's profile diff (trace links under a store
    ``run_url``, via ``browser_link``; else run-relative paths), then each confirmed instruction
    regression's per-function diff."""
    link = (
        (lambda path: browser_link(f"{run_url.rstrip('/')}/{path}")) if run_url and remote(run_url) else None
    )
    blocks = []
    for tool, field, render in (
        ("torch.profiler", "profile", lambda f: render_profile(f, link)),
        ("callgrind", "functions", render_functions),
    ):
        regressed = [
            r for r in rows if r.verdict == "regressed" and r.mark == "confirmed" and getattr(r, field)
        ]
        if regressed:
            lines = [f"<details><summary>Why it got slower ({tool}): {len(regressed)} series</summary>", ""]
            for row in regressed:
                lines += [code_span(display_name(row, True)), "", render(getattr(row, field)), ""]
            blocks.append(Block(lines, [], ["</details>", ""], 2))
    return blocks


def compiler_summary_blocks(comparison: Comparison) -> list[Block]:
    """The compiler summary of comparison.json, when it has one."""
    data = comparison.document.get("compiler_summary")
    if not data:
        return []
    table = render_markdown(rows_from_json(data, "comparison.json: compiler_summary"))
    return [Block(["#### Compiler summary", *table.splitlines()], [], [""], 3)]


def render(
    comparison: Comparison,
    run_url: str | None = None,
    dashboard: str | None = None,
    artifacts_url: str | None = None,
    notes: Sequence[str] = (),
    *,
    max_chars: int = MAX_COMMENT_CHARS,
    max_bytes: int = MAX_COMMENT_BYTES,
    pages_url: str | None = None,
) -> tuple[str, str, Json]:
    """``(comment.md, full.md, comment.json object)`` of a comparison; a row of an older schema shows what it
    has (its p value without a q value).

    ``run_url`` (a store URL or a folder) adds the fetch and ``benchtrail explain`` lines, with ``dashboard``
    (index.html's path under the run) a history link; ``artifacts_url`` (the Actions run's page) and
    ``pages_url`` (``benchtrail pages``'s site) add links; each of ``notes`` a plain line under the context
    line. comment.md holds at most ``max_chars`` code points and ``max_bytes`` UTF-8 bytes, rows cut from
    the folded ``Similar`` section up and counted; full.md is the whole body. Names lose the device suffix
    when the execution rows have one device.
    """
    rows = comparison.rows
    one_device = len({r.device_name for r in rows if r.kind == "execution"}) <= 1
    headline, hidden = verdict_line(comparison), marker(comparison.head)
    top = [
        line
        for line in (
            headline,
            context_line(comparison),
            *map(note_line, notes),
            missing_shards_line(comparison),
            *trust_lines(comparison),
            runner_checks_line(comparison),
            baseline_gaps(comparison),
            recheck_line(rows, one_device),
        )
        if line is not None
    ] + [""]
    blocks = sections(rows, one_device)
    blocks[1:1] = [*why_blocks(rows, run_url), *compiler_summary_blocks(comparison)]
    footer = [f"Dashboard on GitHub Pages (every stored run, by commit): {pages_url}"] if pages_url else []
    footer += artifact_lines(run_url, rows, dashboard) if run_url else []
    if artifacts_url:  # where readers without bucket access download the run: its page's artifacts section
        fragment = "" if "#" in artifacts_url else "#artifacts"
        footer.append(f"Actions artifacts of this run: {artifacts_url}{fragment}")
    footer.append(hidden)
    whole = top + [line for b in blocks for line in (*b.before, *b.rows, *b.after)] + footer
    limits = (max_chars, max_bytes)
    lines = whole if fits(body_size(whole), limits) else cut_to_fit(top, blocks, footer, len(rows), limits)
    body = "\n".join(lines) + "\n"
    return (
        body,
        "\n".join(whole) + "\n",
        {
            "schema_version": SCHEMA_VERSION,
            "marker": hidden,
            "verdict": headline,
            "counts": comparison.counts,
            "head_commit": comparison.head.get("commit"),
            "base_commit": comparison.base.get("commit"),
            "notes": list(notes),
            "body": body,
        },
    )
