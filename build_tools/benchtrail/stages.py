"""Each stage as a function from input files to output files (what ``benchtrail <stage>`` runs).

The stages talk only through these files, so any stage can be rerun alone from downloaded
artifacts. Each function returns the path of its main output.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchtrail import jsonio

from benchtrail.runner import recheck as confirm
from benchtrail.runner.ab import Arm, Policy, base_worktree, resolve_ref, run_pairs
from benchtrail.compare.comment import render
from benchtrail.compare.verdicts import Unreported, compare, comparison_to_dict, load_comparison, mark_regressions
from benchtrail.runner.compile_modules import compile_modules
from benchtrail.git import state as git_state
from benchtrail.runner.environment import collect_environment, torch_version
from benchtrail.errors import UserError
from benchtrail.suite.export import (export_compilation, export_execution, load_compilation, load_execution,
                               seed_execution)
from benchtrail.progress import console, track
from benchtrail.results.io import load_results_paths, write_documents, write_results
from benchtrail.results.schema import ResultsFile
from benchtrail.store import Store
from benchtrail.runner.run_cases import Journal, run_cases
from benchtrail.runner.recheck import suspects
from benchtrail.suite.definitions import Architecture, RunConfig, Suite
from benchtrail.suite.names import slug
from benchtrail.markup import rich_text
from benchtrail.compare.thresholds import default_thresholds_path, load_thresholds



def export_object(suite: Suite, kind: str, presets: tuple[str, ...], shard_count: int = 1,
                  seed: bool = False) -> dict[str, Any]:
    """The ``execution`` or ``compilation`` export for ``presets``; with ``seed``, the seed-shaped
    execution export (``benchtrail.suite.export.seed_execution``: no ``schema_version``, unsharded).

    Raises:
        UserError: ``seed`` with a compilation export or more than one shard.
    """
    if seed:
        if kind != "execution":
            raise UserError("--format seed is for execution exports; a compilation export has one shape")
        if shard_count != 1:
            raise UserError(f"--format seed writes each device's run configs unsharded; drop --shard-count "
                            f"{shard_count}")
        return seed_execution(suite, presets)
    if kind == "execution":
        return export_execution(suite, presets, shard_count)
    return export_compilation(suite, presets)


def write_export(suite: Suite, kind: str, presets: tuple[str, ...], output: Path, shard_count: int = 1) -> Path:
    """Write the ``execution`` or ``compilation`` export for ``presets`` to ``output``."""
    return jsonio.write_json(output, export_object(suite, kind, presets, shard_count), exclusive=True)


def _only(items: tuple, ids: list[str] | None, what: str, source: Path) -> tuple:
    """``items`` whose id is in ``ids`` (all when ``ids`` is None).

    Raises:
        UserError: an id is not in ``source``.
    """
    if ids is None:
        return items
    missing = sorted(set(ids) - {i.id for i in items})
    if missing:
        raise UserError(f"{what} {', '.join(missing)} not in {source}; see `benchtrail dump-cmds`")
    return tuple(i for i in items if i.id in set(ids))


def compile_stage(run_configs: Path, output_dir: Path, device_name: str, architecture: Architecture,
                  run: dict[str, Any], module_ids: list[str] | None = None,
                  repo: Path = Path(".")) -> tuple[Path | None, bool]:
    """Compile the modules of a compilation export that target ``architecture`` into ``output_dir``.

    Writes ``modules/<slug(module)>/`` for each and ``results/compilation-<slug(device_name)>.json`` with the
    compilation series, recorded under ``device_name`` (the runner that compiled them) and the
    commit of ``repo``. Returns (that results file, or None when no module targets ``architecture``;
    whether all compiled).
    """
    gens, dirs, sampling = load_compilation(run_configs)
    gens = tuple(g for g in _only(gens, module_ids, "module id", run_configs) if g.target_architecture is architecture)
    output = output_dir / "results" / f"compilation-{slug(device_name)}.json"
    if not gens:
        return None, True
    jsonio.check_new(output, *(output_dir / dirs[g.id] for g in gens))
    commit, dirty = git_state(repo)
    with track("compile", len(gens)) as report:
        records = compile_modules(gens, dirs, output_dir, torch_version(), device_name, sampling, report)
    results = ResultsFile(commit, dirty, run, collect_environment(threads=torch.get_num_threads()), tuple(records))
    return write_results(output, results), all(r.status == "ok" for r in records)


def check_cuda(device_name: str, rcs: tuple[RunConfig, ...]) -> None:
    """Refuse, before the first case, the run configs of ``rcs`` that need CUDA when torch sees no GPU.

    Raises:
        UserError: one message naming each such run config and why none can run here.
    """
    cuda = sorted(rc.name for rc in rcs if rc.target_device.architecture is Architecture.CUDA)
    if not cuda or torch.cuda.is_available():
        return
    why = (f"this torch ({torch.__version__}) is built without CUDA" if torch.version.cuda is None else
           f"torch (CUDA {torch.version.cuda}) sees no GPU here")
    raise UserError(f"device {device_name} needs CUDA and {why}, so none of its {len(cuda)} selected run config(s) "
                    f"can run on this machine: {', '.join(cuda)}. Nothing was run (a CUDA case never runs on the "
                    "CPU instead); run them on a CUDA runner")


def run_stage(run_configs: Path, device_name: str, shard_index: int | None, output: Path,
              run: dict[str, Any], benchmark_ids: list[str] | None = None,
              modules_dir: Path | None = None, repo: Path = Path("."), resume: bool = False,
              name_filter: str | None = None, refuse_without_cuda: bool = False) -> tuple[Path, bool]:
    """Run one device's shard (all shards when ``shard_index`` is None) of an execution export;
    only the run configs in ``benchmark_ids`` when given. Export and AOTInductor modules are
    loaded from ``<modules_dir>/modules/<module name>/`` (the run directory the compile stage wrote);
    a case whose module failed to compile, or has no folder or artifact there, is recorded ``failed``
    without starting a worker (``run_stage.module_problem``), and the other cases run as usual.

    Writes the results file to ``output`` and one flattened document per benchmark to
    ``<output's folder>/docs/``, recording the commit of ``repo``. Returns (results path, whether
    every case is ok). ``name_filter`` (``--filter``) keeps the cases whose name or id it finds.

    Each finished case is appended to the journal ``<output>.partial.jsonl`` as it finishes, and the
    journal is removed once the results file is written. With ``resume`` (``--continue``) the cases
    a journal holds (same run config id and content hash) are kept, not run again.

    A CUDA device on a machine where torch sees no GPU: with ``refuse_without_cuda`` (``benchtrail
    run``) nothing is run or written (:func:`check_cuda`); without it every case is recorded
    ``failed`` by its worker, none run on the CPU.

    Raises:
        UserError: the device or shard is not in the export; a journal exists and ``resume`` is not set;
            ``refuse_without_cuda`` and the device needs CUDA that this machine lacks.
    """
    devices = load_execution(run_configs)
    if device_name not in devices:
        raise UserError(f"device {device_name!r} is not in {run_configs}; devices there: "
                        f"{', '.join(sorted(devices)) or 'none'}")
    shards = devices[device_name]
    if shard_index is not None and shard_index not in shards:
        raise UserError(f"shard {shard_index} of device {device_name!r} is not in {run_configs}; "
                        f"shards: {sorted(shards)}")
    chosen = [shard_index] if shard_index is not None else sorted(shards)
    rcs = _only(tuple(rc for i in chosen for rc in shards[i]), benchmark_ids, "benchmark id", run_configs)
    if name_filter is not None:
        from benchtrail.suite.filters import compile_filter

        pattern = compile_filter(name_filter)
        rcs = tuple(rc for rc in rcs if pattern.search(rc.name) or pattern.search(rc.id))
        if not rcs:
            raise UserError(f"--filter {name_filter!r} matches no case of device {device_name!r} in {run_configs}")
    if refuse_without_cuda:
        check_cuda(device_name, rcs)
    jsonio.check_new(output)
    journal = Journal(output.with_name(output.name + ".partial.jsonl"))
    finished = journal.load(rcs, torch_version()) if resume else journal.refuse_stale()
    if any(rc.target_device.architecture is Architecture.CUDA for rc in rcs) and not torch.cuda.is_available():
        console.print(f"[bold red]device {rich_text(device_name)} needs CUDA and torch sees no GPU here[/]: every case "
                      "will fail; none is run on the CPU instead")
    threads = rcs[0].target_device.threads if rcs else torch.get_num_threads()
    commit, dirty = git_state(repo)
    environment = collect_environment(threads)  # before measuring: it holds the runner checks (doctor)
    if finished:
        console.print(f"--continue: {len(finished)} of {len(rcs)} cases finished earlier ({journal.path}); "
                      "running the rest")
    todo = tuple(rc for rc in rcs if rc.id not in finished)
    with track(f"run {device_name}", len(todo)) as report:
        new = run_cases(todo, torch_version(), report, modules_dir, on_record=journal.append)
    by_id = {**finished, **{r.id: r for r in new}}
    records = [by_id[rc.id] for rc in rcs]
    run = dict(run, device_name=device_name, shard_index=shard_index, shard_count=len(shards))
    results = ResultsFile(commit, dirty, run, environment, tuple(records))
    path = write_results(output, results)
    write_documents(output.parent / "docs", results)
    journal.remove()
    return path, all(r.status == "ok" for r in records)


def unreported(head: list[Path], head_files: list[ResultsFile], skipped_devices: tuple[str, ...] = ()
               ) -> tuple[tuple[Unreported, ...], list[dict[str, Any]] | None]:
    """What the head run directories' execution exports (``<dir>/run-configs/execution.json``) expect
    and the head results lack: ``(run configs with no record, shards that did not report)``.

    A shard reported when ``<dir>/results/<slug(device)>-<index>.json`` exists or a head results file says it
    ran it (``run.device_name`` and ``run.shard_index``, or ``shard_index`` null: every shard). The
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
                if not reported and shard not in missing:
                    missing.append(shard)
                why = ("reported without it (it was run with --filter or --benchmark-id)" if reported else
                       "did not report (its job failed, timed out or was cancelled)")
                for rc in rcs:
                    if rc.id not in recorded and rc.id not in lacking:
                        gen = rc.module_generation_config
                        lacking[rc.id] = Unreported(rc.id, rc.name, device, gen.name, gen.compile_config.name,
                                                    f"no result: shard {index} of device {device} {why}")
    return tuple(lacking.values()), missing


def key_mismatches(base: list[ResultsFile], head: list[ResultsFile]) -> dict[str, str]:
    """``{device: what differs}`` for the devices of both sides whose baseline keys differ
    (``benchtrail.results.baseline_key.difference``: GPU model, torch version, method version)."""
    from benchtrail.results.baseline_key import difference, keys_of_results

    base_keys, head_keys = keys_of_results(base), keys_of_results(head)
    found = {d: difference(base_keys[d], head_keys[d]) for d in head_keys if d in base_keys}
    return {d: why for d, why in found.items() if why}


def in_selection(base: list[ResultsFile], head: list[ResultsFile]) -> list[ResultsFile]:
    """``base`` without the records that the head lacks and that lie outside the head run's presets
    (``run.presets`` of the head files; a record's own ``presets``, else its run's): a series the head
    did not select is not ``removed``, and a series the head has is always compared, whatever its
    presets are called now. Unchanged when the head files name no presets (plain results files)."""
    import dataclasses

    wanted = {p for f in head for p in f.run.get("presets") or ()}
    if not wanted:
        return base
    in_head = {b.id for f in head for b in f.benchmarks}
    kept = []
    for f in base:
        run_presets = set(f.run.get("presets") or ())
        records = tuple(b for b in f.benchmarks if b.id in in_head or not (set(b.presets) or run_presets) or
                        (set(b.presets) or run_presets) & wanted)
        if records:
            kept.append(dataclasses.replace(f, benchmarks=records))
    return kept


def compare_stage(base: list[Path], head: list[Path], output: Path, thresholds: Path | None,
                  baseline: dict[str, Any] | None = None, accept: list[str] | None = None, paired: bool = False,
                  recheck: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                  quarantine: Path | None = None, skipped_devices: tuple[str, ...] = (),
                  base_results: list[ResultsFile] | None = None) -> Path:
    """Compare head results with base results (files or run directories); write ``comparison.json``.

    ``base_results`` are baseline records already loaded (``benchtrail.compare.baseline.fetch_baselines``:
    each device's own baseline run, so they may come from several commits), used with ``base``.
    Devices whose baseline key differs from the head's (``benchtrail.results.baseline_key``) are not compared
    (their rows are ``not-comparable``, saying what differs), and baseline series outside the head
    run's presets are left out (a ``comp-stats`` run does not call every ``x86_64`` series removed).
    Devices whose stored baseline run exists but cannot be read (``baseline.lacking`` says
    ``baseline incompatible: schema N (...)`` or ``baseline unreadable: ...``; ``benchtrail.compare.baseline``)
    get ``not-comparable`` rows with that reason instead of ``new`` ones.

    ``accept`` holds globs over series names or ids whose regressions are accepted; ``paired`` says
    the samples come from a paired A/B run (regressions are ``confirmed``); ``recheck`` may update
    the comparison before it is written (``benchtrail.runner.recheck``); ``quarantine`` is the quarantine
    file (default: the shipped one): its series are reported but never gate, and an entry that
    matches no series is printed as a warning.

    A head run directory with an execution export (``run-configs/execution.json``) is checked
    against it (:func:`unreported`): each run config without a record is a ``failed`` row saying
    which shard did not report, and ``missing_shards`` lists the shards without results (devices in
    ``skipped_devices`` excepted); without an export ``missing_shards`` is null.
    """
    from benchtrail.compare.quarantine import load_quarantine, unmatched

    jsonio.check_new(output)
    entries = load_quarantine(quarantine)
    base_files = (load_results_paths(base) if base else []) + list(base_results or [])
    head_files = load_results_paths(head)
    base_files = in_selection(base_files, head_files)
    mismatched = key_mismatches(base_files, head_files)
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
    for entry in unmatched(entries, [(r.name, r.id) for r in rows]):
        console.print(f"[yellow]quarantine entry {rich_text(repr(entry.match))} matches no series[/] of this "
                      "comparison")
    source = str(thresholds or default_thresholds_path())
    comparison = comparison_to_dict(rows, base_files, head_files, source, baseline, missing_shards)
    if recheck is not None:
        comparison = recheck(comparison)
    return jsonio.write_json(output, comparison, exclusive=True)


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


def comment_stage(comparison: Path, output_dir: Path, run_url: str | None = None,
                  dashboard: str | None = None, artifacts_url: str | None = None,
                  notes: tuple[str, ...] = ()) -> Path:
    """Render ``comparison.json`` into ``comment.md``, ``full.md`` and ``comment.json``; return comment.md.

    ``dashboard`` is the dashboard's index.html relative to ``run_url`` (linked from the comment);
    ``artifacts_url`` the GitHub Actions run's page; ``notes`` lines shown near the top
    (``benchtrail.compare.comment.render``).

    Raises:
        UserError: a bad comparison file, or an output file that exists already.
    """
    obj = load_comparison(comparison)
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
    (``benchtrail.github.trust.Trust``; default: every run) decides which stored runs are drawn.
    """
    from benchtrail.history.dashboard import write_dashboard
    from benchtrail.history.collect import collect_history
    from benchtrail.history.plots import plot_history_png

    try:
        history = collect_history(store, repo, commit, max_commits,
                                  pending=(run_id, attempt, load_results_paths([run_dir])), trust=trust)
    except UserError as exc:
        from rich.markup import escape

        console.print(f"[yellow]no dashboard[/]: {escape(str(exc))}")  # the message may hold [brackets]
        return None
    out = run_dir / "dashboard"
    return write_dashboard(history, out, images=plot_history_png(history, out))


def _arm(repo: Path, name: str) -> Arm:
    commit, _ = git_state(repo)
    return Arm(name, commit, repo.resolve())


def ab_stage(repo: Path, base_ref: str, run_configs: tuple[RunConfig, ...], output_dir: Path,
             thresholds: Path | None, policy: Policy, accept: list[str] | None = None) -> Path:
    """Run ``run_configs`` paired, base commit ``base_ref`` against the working tree of ``repo``.

    Writes ``results/base.json`` and ``results/head.json`` (the paired samples), ``comparison.json``
    (regressions ``confirmed``) and ``comment/`` under ``output_dir``; returns comment.md.

    Raises:
        UserError: an unknown ref, a failing ``git worktree``, outputs that exist already.
    """
    outputs = [output_dir / "results" / f"{side}.json" for side in ("base", "head")]
    jsonio.check_new(*outputs, output_dir / "comparison.json")
    rules = load_thresholds(thresholds)
    head = _arm(repo, "head")
    commit = resolve_ref(repo, base_ref)
    with base_worktree(repo, commit) as root:
        base = Arm("base", commit, root)
        with track("paired A/B", len(run_configs)) as report:
            records = run_pairs(run_configs, (base, head), rules, policy, torch_version(), report)
    threads = run_configs[0].target_device.threads if run_configs else torch.get_num_threads()
    run = {"mode": "paired", "base_commit": base.commit, "head_commit": head.commit}
    for arm, path, recs in zip((base, head), outputs, records):
        write_results(path, ResultsFile(arm.commit, arm is head and git_state(repo)[1], run,
                                        collect_environment(threads), tuple(recs)))
    comparison = compare_stage([outputs[0]], [outputs[1]], output_dir / "comparison.json", thresholds,
                               {"mode": "paired", "commit": base.commit, "reason": f"--base-ref {base_ref}"},
                               accept, paired=True)
    return comment_stage(comparison, output_dir / "comment")


def baseline_commit(comparison: dict[str, Any], device_name: str | None = None) -> str | None:
    """The commit a re-check runs against: ``device_name``'s own baseline (``baseline.devices``, comparison
    version 6) when it has one, else the baseline's (or the base results') commit; None without one."""
    baseline = comparison.get("baseline") or {}
    own = (baseline.get("devices") or {}).get(device_name) if device_name else None
    return (own or {}).get("commit") or baseline.get("commit") or (comparison.get("base") or {}).get("commit")


def recheck_with(repo: Path, suite: Suite, thresholds: Path | None, policy: Policy, keep: Path | None = None,
                 base_ref: str | None = None, device_name: str | None = None,
                 accept: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``recheck`` for :func:`compare_stage`: paired A/B runs of its suspected regressions (of
    ``device_name`` only, when given) against ``base_ref`` (default: the comparison's base commit),
    on this machine, largest change first; ``policy.total_budget_s`` (seconds) counts from the start
    of the re-check, the base worktree's checkout included; a regression found now that an ``accept``
    glob matches is marked ``accepted`` (``benchtrail.runner.recheck.recheck``)."""
    import time

    rules = load_thresholds(thresholds)

    def recheck(comparison: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        if not suspects(comparison, device_name):
            return comparison
        ref = base_ref or baseline_commit(comparison, device_name)
        if not ref:
            raise UserError("the comparison has no base commit to re-check against; pass --base-ref")
        by_id = {rc.id: rc for rc in suite.run_configs}
        head = _arm(repo, "head")
        commit = resolve_ref(repo, ref)
        with base_worktree(repo, commit) as root:
            base = Arm("base", commit, root)
            with track("re-check in paired A/B", len(suspects(comparison, device_name))) as report:
                return confirm.recheck(comparison, by_id, base, head, rules, policy, torch_version(), report, keep,
                                       device_name, started, accept)

    return recheck


def recheck_stage(comparison: Path, output_dir: Path, repo: Path, suite: Suite, thresholds: Path | None,
                  policy: Policy, base_ref: str | None = None, device_name: str | None = None,
                  accept: tuple[str, ...] = ()) -> tuple[Path, bool]:
    """Re-check the suspected regressions of ``comparison`` (of ``device_name`` only, when given;
    ``benchtrail.runner.recheck``, with the ``accept`` globs); write the updated ``comparison.json``, the paired samples
    (``results/ab-base.json``, ``results/ab-head.json``, when a case ran) and ``comment/`` under
    ``output_dir``.

    Returns (comment.md, whether both arms of every paired case run now were ok: False when an arm
    of a re-check failed; True when there was nothing to re-check). Rows that were ``failed`` in
    ``comparison`` itself do not count.

    Raises:
        UserError: a bad comparison file, outputs that exist already, no base commit to re-check
            against, an unknown ref or a failing ``git worktree``.
    """
    obj = load_comparison(comparison)
    jsonio.check_new(output_dir / "comparison.json")
    updated = recheck_with(repo, suite, thresholds, policy, output_dir / "results", base_ref, device_name,
                           accept)(obj)
    path = jsonio.write_json(output_dir / "comparison.json", updated, exclusive=True)
    paired = [p for p in (output_dir / "results" / f"ab-{side}.json" for side in ("base", "head")) if p.exists()]
    ok = all(b.status == "ok" for f in load_results_paths(paired) for b in f.benchmarks)
    return comment_stage(path, output_dir / "comment"), ok
