"""The report wing of the pipeline: the compare, comment and dashboard stages (torch-free).

Each stage reads and writes files of a run directory (``comparison.json``, ``comment/``,
``dashboard/``), so any of them can be rerun alone from downloaded artifacts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.compare.baseline import BaselineSet
from benchtrail.compare.comment import render
from benchtrail.compare.compiler_summary import compiler_summary, rows_to_json
from benchtrail.compare.document import Comparison, build_comparison, load_comparison
from benchtrail.compare.rules import default_thresholds_path, load_quarantine, load_thresholds, unmatched_quarantine
from benchtrail.compare.verdicts import Unreported, compare, mark_regressions
from benchtrail.errors import UserError
from benchtrail.markup import rich_text
from benchtrail.progress import console
from benchtrail.results.io import load_results_paths
from benchtrail.results.schema import ResultsFile
from benchtrail.store import Store
from benchtrail.suite.export import SCHEMA_VERSION as EXPORT_VERSION
from benchtrail.suite.export import load_execution
from benchtrail.suite.names import slug


def report_baselines(found: BaselineSet) -> None:
    """Say which baseline run each device got (``benchtrail.compare.baseline.BaselineSet``), which runs were
    ignored and why, or that there is none."""
    for b in found.runs:
        console.print(f"baseline: {b.commit[:12]} ({rich_text(b.reason)}), run {b.run_id}/{b.attempt} for "
                      f"{rich_text(', '.join(b.devices))}")
    for i in found.ignored:
        console.print(f"[yellow]ignored run {i.run_id}/{i.attempt}[/] of {i.commit[:12]}: {rich_text(i.reason)}")
    for device, why in sorted(found.lacking.items()):
        console.print(f"no baseline for {rich_text(device)}: {rich_text(why)}; its series are new")


def unreported(head: list[Path], head_files: list[ResultsFile], skipped_devices: tuple[str, ...] = ()
               ) -> tuple[tuple[Unreported, ...], list[dict[str, Any]] | None]:
    """What the head run directories' execution exports (``<dir>/run-configs/execution.json``) expect
    and the head results lack: ``(run configs with no record, shards that did not report)``.

    A shard reported when ``<dir>/results/<slug(device)>-<index>.json`` exists or a head results file says it
    ran it (``run.device_name`` and ``run.shard_index``, or ``shard_index`` null: every shard); a shard
    without run configs has nothing to report (CI's job matrix gives it no job). The
    run configs of a shard that did not report get the reason ``no result: shard <i> of device <d>
    did not report (its job failed, timed out or was cancelled)``; those missing from a shard that
    reported (run with ``--filter`` or ``--benchmark-id``) say so. ``skipped_devices`` (devices the
    pipeline skipped on purpose) are left out. Returns ``((), None)`` when no head is a directory
    with an execution export (plain results files: nothing to check against).

    Raises:
        UserError: an execution export that cannot be read (``load_execution``).
    """
    exports = [Path(p) / "run-configs" / "execution.json" for p in head]
    exports = [e for e in exports if e.is_file()]
    if not exports:
        return (), None
    ran = {(f.run.get("device_name"), f.run.get("shard_index")) for f in head_files}
    recorded = {b.id for f in head_files for b in f.benchmarks}
    lacking: dict[str, Unreported] = {}
    missing: list[dict[str, Any]] = []
    for export in exports:
        results_dir = export.parent.parent / "results"
        for device, shards in sorted(load_execution(export).items()):
            if device in skipped_devices:
                continue
            for index, rcs in sorted(shards.items()):
                reported = ((results_dir / f"{slug(device)}-{index}.json").is_file() or (device, index) in ran
                            or (device, None) in ran)
                shard = {"device_name": device, "shard_index": index}
                if not reported and rcs and shard not in missing:  # an empty shard has no job (matrix.jq)
                    missing.append(shard)
                why = ("reported without it (it was run with --filter or --benchmark-id)" if reported else
                       "did not report (its job failed, timed out or was cancelled)")
                for rc in rcs:
                    if rc.id not in recorded and rc.id not in lacking:
                        gen = rc.module_generation_config
                        lacking[rc.id] = Unreported(rc.id, rc.name, device, gen.name, gen.compile_config.name,
                                                    f"no result: shard {index} of device {device} {why}")
    return tuple(lacking.values()), missing


def key_mismatches(base: list[ResultsFile], head: list[ResultsFile], any_origin: bool = False) -> dict[str, str]:
    """``{device: what differs}`` for the devices of both sides whose baseline keys differ
    (``benchtrail.results.baseline_key.difference``: GPU model, torch version, method version, origin
    unless ``any_origin``)."""
    from benchtrail.results.baseline_key import difference, keys_of_results

    base_keys, head_keys = keys_of_results(base), keys_of_results(head)
    found = {d: difference(base_keys[d], head_keys[d], any_origin=any_origin) for d in head_keys if d in base_keys}
    return {d: why for d, why in found.items() if why}


def exported_filter(head: list[Path]) -> re.Pattern[str] | None:
    """The ``--filter`` the head run directories' execution exports were made with (their ``filter``), compiled;
    None when none was (or no head has an export).

    Raises:
        UserError: an export that cannot be read, or a filter that is not a regular expression.
    """
    from benchtrail.suite.filters import compile_filter

    for path in map(Path, head):
        export = path / "run-configs" / "execution.json"
        if export.is_file():
            text = jsonio.read_json(export, kind="execution export", supported=EXPORT_VERSION).get("filter")
            if isinstance(text, str):
                return compile_filter(text)
    return None


def in_selection(base: list[ResultsFile], head: list[ResultsFile], pattern: re.Pattern[str] | None = None
                 ) -> list[ResultsFile]:
    """``base`` without the records that the head lacks and that lie outside the head run's selection: its
    presets (``run.presets`` of the head files; a record's own ``presets``, else its run's) and, when the head
    was run with ``--filter`` (``pattern``, :func:`exported_filter`), the filter (a record's name, id or
    module name it finds, as ``suite.filters.filter_suite`` selects). A series the head did not select is not
    ``removed``, and a series the head has is always compared, whatever its presets are called now.
    Unchanged when the head files name no presets (plain results files)."""
    import dataclasses

    wanted = {p for f in head for p in f.run.get("presets") or ()}
    if not wanted:
        return base
    in_head = {b.id for f in head for b in f.benchmarks}

    def chosen(b, run_presets: set[str]) -> bool:
        if pattern is not None and not any(pattern.search(t) for t in (b.name, b.id, b.module_name)):
            return False
        return not (set(b.presets) or run_presets) or bool((set(b.presets) or run_presets) & wanted)

    kept = []
    for f in base:
        run_presets = set(f.run.get("presets") or ())
        records = tuple(b for b in f.benchmarks if b.id in in_head or chosen(b, run_presets))
        if records:
            kept.append(dataclasses.replace(f, benchmarks=records))
    return kept


def compare_stage(base: list[Path], head: list[Path], output: Path, thresholds: Path | None,
                  baseline: dict[str, Any] | None = None, accept: list[str] | None = None, paired: bool = False,
                  quarantine: Path | None = None, skipped_devices: tuple[str, ...] = (),
                  base_results: list[ResultsFile] | None = None, any_origin: bool = False) -> Path:
    """Compare head results with base results (files or run directories); write ``comparison.json``.

    ``base_results`` are baseline records already loaded (``benchtrail.compare.baseline.fetch_baselines``:
    each device's own baseline run, so they may come from several commits), used with ``base``.
    Devices whose baseline key differs from the head's (``benchtrail.results.baseline_key``) are not compared
    (their rows are ``not-comparable``, saying what differs; ``any_origin``, ``--baseline-any-origin``:
    a CI run and a local one may be compared), and baseline series the head did not select are left out
    (:func:`in_selection`: outside its presets, so a ``comp-stats`` run does not call every ``x86_64`` series
    removed, or outside its ``--filter``).
    Devices whose stored baseline run exists but cannot be read (``baseline.lacking`` says
    ``baseline incompatible: schema N (...)`` or ``baseline unreadable: ...``; ``benchtrail.compare.baseline``)
    get ``not-comparable`` rows with that reason instead of ``new`` ones.

    ``accept`` holds globs over series names or ids whose regressions are accepted; ``paired`` says
    the samples come from a paired A/B run (regressions are ``confirmed``); ``quarantine`` is the quarantine
    file (default: the shipped one): its series are reported but never gate, and an entry that
    matches no series is printed as a warning.

    A head run directory with an execution export (``run-configs/execution.json``) is checked
    against it (:func:`unreported`): each run config without a record is a ``failed`` row saying
    which shard did not report, and ``missing_shards`` lists the shards without results (devices in
    ``skipped_devices`` excepted); without an export ``missing_shards`` is null.
    """
    jsonio.check_new(output)
    entries = load_quarantine(quarantine)
    base_files = (load_results_paths(base) if base else []) + list(base_results or [])
    head_files = load_results_paths(head)
    base_files = in_selection(base_files, head_files, exported_filter(head))
    mismatched = key_mismatches(base_files, head_files, any_origin)
    for device, why in sorted(mismatched.items()):
        console.print(f"[yellow]{rich_text(device)} is not compared[/]: its baseline was measured differently "
                      f"({rich_text(why)})")
    lacking, missing_shards = unreported(head, head_files, skipped_devices)
    if lacking:
        shown = ", ".join(f"{m['device_name']}-{m['shard_index']}" for m in missing_shards or ())
        console.print(f"[yellow]{len(lacking)} run config(s) of the head run's export have no result[/] and are "
                      f"failed rows; {len(missing_shards or ())} shard(s) did not report"
                      + (f": {shown}" if shown else ""))
    rules = load_thresholds(thresholds)
    rows = mark_regressions(compare(base_files, head_files, rules, lacking, mismatched, bool(base_results)),
                            accept or [], paired, entries)
    rows = _unusable_baselines(rows, baseline)
    for entry in unmatched_quarantine(entries, [(r.name, r.id) for r in rows]):
        console.print(f"[yellow]quarantine entry {rich_text(repr(entry.match))} matches no series[/] of this "
                      "comparison")
    source = str(thresholds or default_thresholds_path())
    comparison = build_comparison(rows, base_files, head_files, source, baseline, missing_shards)
    document = comparison.to_dict()
    summary = compiler_summary(head_files, base_files or None)
    if summary:  # runs with compiled cases beside eager ones: the comment's compiler summary
        document["compiler_summary"] = rows_to_json(summary)
    return jsonio.write_json(output, document, exclusive=True)


def _unusable_baselines(rows: list, baseline: dict[str, Any] | None) -> list:
    """``rows`` with each ``new`` row of a device whose baseline run cannot be used
    (``benchtrail.compare.baseline.unusable``) made ``not-comparable`` with the reason; printed once per device."""
    from dataclasses import replace

    from benchtrail.compare.baseline import unusable

    why = unusable(baseline)
    for device, reason in sorted(why.items()):
        console.print(f"[yellow]{rich_text(device)} is not compared[/]: {rich_text(reason)}")
    return [replace(r, verdict="not-comparable", reason=why[r.device_name])
            if r.verdict == "new" and r.device_name in why else r for r in rows]


def comment_stage(comparison: Path | Comparison, output_dir: Path, run_url: str | None = None,
                  dashboard: str | None = None, artifacts_url: str | None = None,
                  notes: tuple[str, ...] = ()) -> Path:
    """Render ``comparison.json`` (a path, or a :class:`Comparison` already read) into ``comment.md``,
    ``full.md`` and ``comment.json``; return comment.md.

    ``dashboard`` is the dashboard's index.html relative to ``run_url`` (linked from the comment);
    ``artifacts_url`` the GitHub Actions run's page; ``notes`` lines shown near the top
    (``benchtrail.compare.comment.render``).

    Raises:
        UserError: a bad comparison file, or an output file that exists already.
    """
    obj = comparison if isinstance(comparison, Comparison) else load_comparison(comparison)
    jsonio.check_new(output_dir / "full.md", output_dir / "comment.json", output_dir / "comment.md")
    body, full, data = render(obj, run_url, dashboard, artifacts_url, notes)
    jsonio.write_text_atomic(output_dir / "full.md", full, exclusive=True)
    jsonio.write_json(output_dir / "comment.json", data, exclusive=True)
    return jsonio.write_text_atomic(output_dir / "comment.md", body, exclusive=True)


def dashboard_stage(store: Store, repo: Path, commit: str, run_id: str, attempt: int, run_dir: Path,
                    max_commits: int = 30, trust: Any = None) -> Path | None:
    """Draw the first-parent history of ``commit`` from ``store``, this run (not stored yet) as its
    newest point, into ``<run_dir>/dashboard/``: a PNG and an HTML page per preset, one for
    compilation statistics, and ``index.html`` (``benchtrail.history.dashboard``).

    Returns index.html, or None with a message when there is no history to draw (``repo`` is not a
    git repository, or the commit is not in it): the dashboard never fails the run. ``trust``
    (``benchtrail.compare.trust.Trust``; default: every run) decides which stored runs are drawn.
    """
    from benchtrail.git import UNKNOWN_COMMIT
    from benchtrail.history.dashboard import write_dashboard
    from benchtrail.history.collect import collect_history
    from benchtrail.history.plots import plot_history_png

    if commit == UNKNOWN_COMMIT:
        console.print("[yellow]no dashboard[/]: this run has no commit (the repository has none yet, or this is "
                      "not a git checkout): commit, and the next run draws its history")
        return None
    try:
        history = collect_history(store, repo, commit, max_commits,
                                  pending=(run_id, attempt, load_results_paths([run_dir])), trust=trust)
    except UserError as exc:
        from rich.markup import escape

        console.print(f"[yellow]no dashboard[/]: {escape(str(exc))}")  # the message may hold [brackets]
        return None
    out = run_dir / "dashboard"
    return write_dashboard(history, out, images=plot_history_png(history, out, **_marks(run_dir)), repo=repo)


def _marks(run_dir: Path) -> dict[str, Any]:
    """What the plots mark from the run's ``comparison.json``, when there is one: the baseline commit and
    the ids of the confirmed regressions (``benchtrail.history.plots.history_figures``)."""
    from benchtrail.compare.document import load_comparison

    path = run_dir / "comparison.json"
    if not path.is_file():
        return {}
    try:
        comparison = load_comparison(path)
    except UserError:
        return {}
    base = comparison.document.get("base") or {}
    return {"baseline": base.get("commit"),
            "regressions": {r.id for r in comparison.rows if r.verdict == "regressed" and r.mark == "confirmed"}}


#: At most this many benchmarks of a run get a distribution plot (regressed, improved, then inconclusive rows).
MAX_DISTRIBUTIONS = 12


def distribution_stage(comparison: Path, base_results: list[ResultsFile], head: list[Path], out_dir: Path) -> list[Path]:
    """Strip plots of each changed or inconclusive execution series' base and head samples, as pytest-benchmark's
    histograms show them (``benchtrail.history.plots.distribution_figures``): ``out_dir/<slug(name)>.png``,
    one per series, regressed rows first, then improved, then inconclusive, at most :data:`MAX_DISTRIBUTIONS`;
    ``benchtrail explain`` names the file. Returns the paths written; [] with a message when none could be
    written (a plot never fails the run)."""
    from benchtrail.history.plots import distribution_figures, samples_of, save_figures
    from benchtrail.suite.names import slug

    order = {"regressed": 0, "improved": 1, "inconclusive": 2, "noisy": 2}  # noisy: comparison versions 1 to 7
    rows = sorted((r for r in load_comparison(comparison).rows if r.kind == "execution" and r.verdict in order),
                  key=lambda r: order[r.verdict])[:MAX_DISTRIBUTIONS]
    if not rows or not base_results:
        return []
    sets = {s.name: s for s in samples_of(base_results, load_results_paths(head), ids={r.id for r in rows})}
    figures = {f"{slug(r.name)}.png": distribution_figures([sets[r.name]], f"{r.verdict}: base vs head samples")[0]
               for r in rows if r.name in sets}
    try:
        return save_figures(figures, out_dir)
    except UserError as exc:
        console.print(f"[yellow]no distribution plots[/]: {rich_text(str(exc))}")
        return []
