"""The report wing of the pipeline: the compare, comment, dashboard and distribution (strip plots) stages,
reading and writing a run directory's files (``comparison.json``, ``comment/``, ``dashboard/``,
``distributions/``). Torch-free."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.compare.baseline import BaselineSet
from benchtrail.compare.callgrind import Locate, with_functions
from benchtrail.compare.comment import render
from benchtrail.compare.compiler_summary import compiler_summary, rows_to_json
from benchtrail.compare.document import Row, comparison_to_dict, load_comparison
from benchtrail.compare.notes import mark_regressions
from benchtrail.compare.rules import Rules, unmatched_quarantine
from benchtrail.compare.scope import (
    exported_filter,
    in_selection,
    key_mismatches,
    unreported,
    unusable_baselines,
)
from benchtrail.compare.verdicts import compare
from benchtrail.errors import UserError, missing_extra
from benchtrail.markup import rich_text
from benchtrail.progress import console
from benchtrail.results.io import load_results_paths
from benchtrail.results.schema import ResultsFile
from benchtrail.store import Store
from benchtrail.store.base import ASSETS_FROM_RUN
from benchtrail.suite.names import slug


def report_baselines(found: BaselineSet) -> None:
    """Say which baseline run each device got, which runs were ignored and why, or that there is none."""
    for b in found.runs:
        console.print(
            f"baseline: {b.commit[:12]} ({rich_text(b.reason)}), run {b.run_id}/{b.attempt} for "
            f"{rich_text(', '.join(b.devices))}"
        )
    for i in found.ignored:
        console.print(
            f"[yellow]ignored run {i.run_id}/{i.attempt}[/] of {i.commit[:12]}: {rich_text(i.reason)}"
        )
    for device, why in sorted(found.lacking.items()):
        console.print(f"no baseline for {rich_text(device)}: {rich_text(why)}; its series are new")


def compare_stage(
    base: list[Path],
    head: list[Path],
    output: Path,
    rules: Rules | None = None,
    baseline: dict[str, Any] | None = None,
    paired: bool = False,
    skipped_devices: tuple[str, ...] = (),
    base_results: list[ResultsFile] | None = None,
    any_origin: bool = False,
    store: Store | None = None,
) -> Path:
    """Compare head results with base results (files or run directories) by ``rules`` (default: the shipped
    ones) into ``comparison.json``. ``base_results``: loaded baseline records, one run a device, so maybe of
    several commits. Devices whose baseline key differs (``any_origin``: CI and local may be compared) or
    whose baseline cannot be read get ``not-comparable`` rows; base series outside the head's selection are
    left out; a head run directory's export gives a ``failed`` row per run config without a record and
    ``missing_shards`` (``skipped_devices`` excepted). ``paired``: a paired A/B run (regressions
    ``confirmed``). Each confirmed instruction regression gets its per-function diff, the base's callgrind
    file fetched from ``store`` when needed."""
    jsonio.check_new(output)
    rules = rules or Rules.load()
    base_files = load_results_paths(base) + list(base_results or [])
    head_files = load_results_paths(head)
    base_files = in_selection(base_files, head_files, exported_filter(head))
    mismatched = key_mismatches(base_files, head_files, any_origin)
    for device, why in sorted(mismatched.items()):
        console.print(
            f"[yellow]{rich_text(device)} is not compared[/]: its baseline was measured "
            f"differently ({rich_text(why)})"
        )
    lacking, missing_shards = unreported(head, head_files, skipped_devices)
    if lacking:
        shown = ", ".join(f"{m['device_name']}-{m['shard_index']}" for m in missing_shards)
        console.print(
            f"[yellow]{len(lacking)} run config(s) of the head run's export have no result[/] and "
            f"are failed rows; {len(missing_shards)} shard(s) did not report"
            + (f": {shown}" if shown else "")
        )
    rows = mark_regressions(
        compare(base_files, head_files, rules.thresholds, lacking, mismatched, bool(base_results)),
        rules,
        paired,
    )
    rows, unusable = unusable_baselines(rows, baseline)
    rows = with_functions(rows, callgrind_locator(base, head, baseline, store))
    for device, reason in sorted(unusable.items()):
        console.print(f"[yellow]{rich_text(device)} is not compared[/]: {rich_text(reason)}")
    for entry in unmatched_quarantine(rules.quarantine, [(r.name, r.id) for r in rows]):
        console.print(
            f"[yellow]quarantine entry {rich_text(repr(entry.match))} matches no series[/] of this comparison"
        )
    document = comparison_to_dict(rows, base_files, head_files, rules.source, baseline, missing_shards)
    # Runs with compiled cases beside eager ones: the comment's compiler summary.
    if summary := compiler_summary(head_files, base_files or None):
        document["compiler_summary"] = rows_to_json(summary)
    return jsonio.write_json(output, document, exclusive=True)


def _run_dirs(paths: list[Path]) -> list[Path]:
    """The folders a results path's ``details.callgrind`` may be relative to: a run directory and its
    ``results/`` (the counting pass writes beside its results file), a file's folder and the run above it."""
    return [
        d
        for p in paths
        for d in (
            [p, p / "results"]
            if p.is_dir()
            else [p.parent.parent, p.parent]
            if p.parent.name == "results"
            else [p.parent]
        )
    ]


def callgrind_locator(
    base: list[Path], head: list[Path], baseline: dict[str, Any] | None, store: Store | None
) -> Locate:
    """Where a row's callgrind file is on each side: under a run directory of ``head`` or ``base``, else
    (base) in the device's stored baseline run fetched from ``store``, or under ``baseline.run_dir``;
    otherwise one line saying why not."""
    dirs = {"head": _run_dirs(head), "base": _run_dirs(base)}
    stored = baseline or {}

    def first(folders: list[Path], name: str) -> Path | None:
        return next((d / name for d in folders if (d / name).is_file()), None)

    def locate(row: Row, side: str) -> Path | str:
        name = getattr(row, f"{side}_details")["callgrind"]
        found = first(dirs[side], name)
        run = (stored.get("devices") or {}).get(row.device_name)
        if found or side == "head" or not run:
            return found or f"not in the {side} run directory ({', '.join(map(str, dirs[side])) or 'none'})"
        where = f"baseline run {run['run_id']}/{run['attempt']}"
        if store is None:
            primary = stored.get("run_dir") if run.get("run_id") == stored.get("run_id") else None
            found = first(_run_dirs([Path(primary)]), name) if primary else None
            return found or f"not in {where} (no store to fetch it from)"
        try:
            folder = store.fetch_run(run["run_id"], int(run["attempt"]), patterns=(name, f"results/{name}"))
        except UserError as exc:  # a store error too
            return f"could not be fetched from {where}: {' '.join(str(exc).split())[:300]}"
        return first([folder, folder / "results"], name) or f"not in {where}"

    return locate


def comment_stage(
    comparison: Path,
    output_dir: Path,
    run_url: str | None = None,
    dashboard: str | None = None,
    artifacts_url: str | None = None,
    notes: tuple[str, ...] = (),
    pages_url: str | None = None,
) -> Path:
    """Render ``comparison`` into ``comment.md``, ``full.md`` and ``comment.json``; return comment.md.
    ``dashboard``: index.html relative to ``run_url``. Raises UserError for a bad comparison file or an
    output that exists."""
    jsonio.check_new(output_dir / "full.md", output_dir / "comment.json", output_dir / "comment.md")
    body, full, data = render(
        load_comparison(comparison), run_url, dashboard, artifacts_url, notes, pages_url=pages_url
    )
    jsonio.write_text_atomic(output_dir / "full.md", full, exclusive=True)
    jsonio.write_json(output_dir / "comment.json", data, exclusive=True)
    return jsonio.write_text_atomic(output_dir / "comment.md", body, exclusive=True)


def dashboard_stage(
    store: Store,
    repo: Path,
    commit: str,
    run_id: str,
    attempt: int,
    run_dir: Path,
    max_commits: int = 30,
    trust: Any = None,
) -> Path | None:
    """Draw the first-parent history of ``commit`` from ``store``, this unstored run as its newest point,
    into ``<run_dir>/dashboard/`` (a PNG and HTML page per preset, one for compilation, ``index.html``);
    ``trust`` (None: every run) picks the stored runs drawn. Returns index.html, or None with a message
    when there is no history or no plotly: it never fails the run."""
    from benchtrail.git import UNKNOWN_COMMIT
    from benchtrail.history.collect import collect_history
    from benchtrail.history.dashboard import write_dashboard
    from benchtrail.history.plots import plot_history_png

    if commit == UNKNOWN_COMMIT:
        console.print(
            "[yellow]no dashboard[/]: this run has no commit (the repository has none yet, or this "
            "is not a git checkout): commit, and the next run draws its history"
        )
        return None
    try:
        history = collect_history(
            store,
            repo,
            commit,
            max_commits,
            pending=(run_id, attempt, load_results_paths([run_dir])),
            trust=trust,
        )
    except UserError as exc:
        console.print(f"[yellow]no dashboard[/]: {rich_text(exc)}")  # the message may hold [brackets]
        return None
    out = run_dir / "dashboard"
    images = plot_history_png(history, out, **_marks(run_dir))
    try:
        return write_dashboard(
            history, out, images=images, repo=repo, plotly_js=_store_plotly(store, run_id, attempt, run_dir)
        )
    except ModuleNotFoundError as exc:
        console.print(
            f"[yellow]no HTML dashboard[/] (PNGs only): needs {rich_text(missing_extra(exc))}", soft_wrap=True
        )
        return None


def _store_plotly(store: Store, run_id: str, attempt: int, run_dir: Path) -> str | None:
    """The store's one plotly.js as a URL relative to the pages when ``run_dir`` is the store's own run
    directory and the copy could be written; else None (``plotly.min.js`` goes beside the pages)."""
    from benchtrail.history.dashboard import plotly_asset

    if run_dir.resolve() != store.run_dir(run_id, attempt).resolve():
        return None
    name, data = plotly_asset()
    try:
        store.write_asset(name, data)
    except UserError as exc:
        console.print(f"[yellow]plotly.js goes beside the dashboard[/]: {rich_text(exc)}")
        return None
    return f"../{ASSETS_FROM_RUN}/{name}"  # from <run dir>/dashboard/


def _marks(run_dir: Path) -> dict[str, Any]:
    """What the plots mark from the run's ``comparison.json``: the baseline commit, confirmed regressions."""
    try:
        comparison = load_comparison(run_dir / "comparison.json")
    except UserError:  # none, or unreadable
        return {}
    return {
        "baseline": (comparison.base or {}).get("commit"),
        "regressions": {r.id for r in comparison.rows if r.verdict == "regressed" and r.mark == "confirmed"},
    }


#: At most this many benchmarks of a run get a distribution plot (regressed, improved, then inconclusive).
MAX_DISTRIBUTIONS = 12


def distribution_stage(
    comparison: Path, base_results: list[ResultsFile], head: list[Path], out_dir: Path
) -> list[Path]:
    """Write :func:`strip_figures` as ``out_dir/<slug(name)>.png``; ``benchtrail explain`` names the file.
    Returns the paths written; [] with a message when none could be written (a plot never fails the run)."""
    from benchtrail.history.plots import save_figures

    try:
        return save_figures(strip_figures(comparison, base_results, head), out_dir)
    except UserError as exc:
        console.print(f"[yellow]no distribution plots[/]: {rich_text(exc)}")
        return []


def strip_figures(comparison: Path, base_results: list[ResultsFile], head: list[Path]) -> dict[str, Any]:
    """``{<slug(name)>.png: Figure}``: strip plots of the base and head samples that decided each changed or
    inconclusive execution series (paired ones from ``ab/`` beside ``comparison``), regressed first, at most
    :data:`MAX_DISTRIBUTIONS`, in one unit; {} without a base."""
    from benchtrail.compare.tables import change_cell, estimate
    from benchtrail.history.comparison_figures import distribution_figures, sample_units, samples_of

    order = {"regressed": 0, "improved": 1, "inconclusive": 2, "noisy": 2}  # noisy: comparison versions 1-7
    rows = sorted(
        (r for r in load_comparison(comparison).rows if r.kind == "execution" and r.verdict in order),
        key=lambda r: order[r.verdict],
    )[:MAX_DISTRIBUTIONS]
    if not rows or not base_results:
        return {}
    sets = {s.name: s for s in samples_of(base_results, load_results_paths(head), ids={r.id for r in rows})}
    ab = [comparison.parent / "ab" / f"ab-{side}.json" for side in ("base", "head")]
    ids = {r.id for r in rows if r.ab and estimate(r).paired}
    decided = (
        samples_of(*(load_results_paths([p]) for p in ab), ids=ids)
        if ids and all(p.is_file() for p in ab)
        else []
    )
    sets |= {s.name: s for s in decided}
    paired = {s.name for s in decided}
    units = sample_units(list(sets.values()))
    return {
        f"{slug(r.name)}.png": distribution_figures(
            [sets[r.name]],
            f"{r.verdict} {change_cell(r)}\n{'paired A/B' if r.name in paired else 'stored'} samples",
            units,
        )[0]
        for r in rows
        if r.name in sets
    }
