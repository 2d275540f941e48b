"""The static site of a store's history for GitHub Pages (``benchtrail pages``, docs/history.md).

One folder that works from any URL: the dashboard pages and PNGs with plotly.js beside them, and
``index.html`` listing the pages, the stored runs the history drew and the commits walked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchtrail import jsonio
from benchtrail.compare.comment_header import verdict_line
from benchtrail.compare.document import load_comparison
from benchtrail.errors import UserError
from benchtrail.git import short_sha
from benchtrail.history.dashboard import write_dashboard
from benchtrail.history.plots import plot_history_png
from benchtrail.history.series import History
from benchtrail.markup import html_text
from benchtrail.store import Store

#: An empty file that keeps GitHub Pages from running Jekyll on a site published from a branch.
NO_JEKYLL = ".nojekyll"
_HEADLINE = "### benchtrail: "


@dataclass(frozen=True)
class StoredRun:
    """A stored run the history drew: ``stored_at`` is the pointer's (UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``),
    ``verdicts`` the counts line of its ``comparison.json`` (``1 regression (1 unconfirmed), 0
    improvements, 12 similar``), None without one readable."""

    commit: str
    run_id: str
    attempt: int
    stored_at: str
    presets: tuple[str, ...]
    devices: tuple[str, ...]
    verdicts: str | None


def drawn_runs(history: History) -> dict[str, set[tuple[str, int]]]:
    """``{commit: {(run id, attempt), ...}}``: each commit's run and every run a point of it holds."""
    runs: dict[str, set[tuple[str, int]]] = {
        c.commit: {(c.run_id, c.attempt)}
        for c in history.commits
        if c.run_id is not None and c.attempt is not None
    }
    for series in history.series:
        for point in series.points:
            runs.setdefault(point.commit, set()).update((r.run_id, r.attempt) for r in point.runs)
    return runs


def verdicts(run_dir: Path) -> str | None:
    """The comment's counts line for ``run_dir/comparison.json``, no heading; None without one readable."""
    try:
        comparison = load_comparison(run_dir / "comparison.json")
    except UserError:
        return None
    return verdict_line(comparison).removeprefix(_HEADLINE)


def stored_runs(store: Store, history: History) -> list[StoredRun]:
    """The runs ``history`` drew, newest first, from their pointers in ``store`` (one listing per commit);
    UserError when the store cannot be read."""
    drawn = drawn_runs(history)
    found = []
    for commit in reversed([c.commit for c in history.commits if c.commit in drawn]):
        for p in reversed(store.pointers(commit)):  # oldest first by stored_at
            key = (p.get("run_id"), p.get("attempt"))
            if key in drawn[commit]:
                run_id, attempt = key
                found.append(
                    StoredRun(
                        commit,
                        run_id,
                        attempt,
                        str(p.get("stored_at") or ""),
                        tuple(map(str, p.get("presets") or ())),
                        tuple(map(str, p.get("devices") or ())),
                        verdicts(store.run_dir(run_id, attempt)),
                    )
                )
    return found


def _time(stored_at: str) -> str:
    """``2026-12-05T14:55:14.123456Z`` as ``2026-12-05 14:55 UTC``; anything else as it is."""
    if len(stored_at) >= 16 and stored_at[10] == "T" and stored_at.endswith("Z"):
        return f"{stored_at[:10]} {stored_at[11:16]} UTC"
    return stored_at or "—"


def runs_html(runs: list[StoredRun]) -> str:
    """The index's table of stored runs, newest first."""
    cells = ("commit", "run", "stored", "presets", "devices", "verdicts")
    rows = "".join(
        f'<tr class="run"><td><code>{short_sha(r.commit)}</code></td>'
        f"<td>{html_text(f'{r.run_id}/{r.attempt}')}</td><td>{html_text(_time(r.stored_at))}</td>"
        f"<td>{html_text(', '.join(r.presets) or '—')}</td><td>{html_text(', '.join(r.devices) or '—')}</td>"
        f"<td>{html_text(r.verdicts or 'no comparison')}</td></tr>\n"
        for r in runs
    )
    return (
        f"<h2>Stored runs (newest first)</h2>\n<p>{len(runs)} run(s) of the commits below.</p>\n"
        "<table><tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr>\n" + rows + "</table>\n"
    )


def write_site(store: Store, history: History, out_dir: Path, repo: Path | None = Path(".")) -> Path:
    """Write ``index.html`` (returned), a page and PNG(s) per page group, ``plotly.min.js`` (about 4.9 MB)
    and an empty ``.nojekyll``; ``repo`` gives commit dates and subjects.

    Raises UserError when a file exists or cannot be written, or the store cannot be read.
    """
    runs = stored_runs(store, history)
    jsonio.check_new(Path(out_dir) / NO_JEKYLL)
    images = plot_history_png(history, out_dir)
    index = write_dashboard(history, out_dir, images=images, repo=repo, extra=runs_html(runs))
    jsonio.write_text_atomic(Path(out_dir) / NO_JEKYLL, "", exclusive=True)
    return index
