"""The measuring wing of the pipeline: the export, compile, run, count and paired A/B stages, and the
re-check. Each stage goes from input files to output files and returns its main output's path. Imports
torch; the report stages do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from benchtrail import jsonio
from benchtrail.compare.document import load_comparison
from benchtrail.compare.rules import Rules
from benchtrail.errors import UserError
from benchtrail.git import state as git_state
from benchtrail.markup import rich_text
from benchtrail.pipeline.checked_export import checked_export
from benchtrail.pipeline.report_stages import comment_stage, compare_stage
from benchtrail.progress import console, progress_bar
from benchtrail.results.io import load_results_paths, write_documents, write_results
from benchtrail.results.schema import ResultsFile
from benchtrail.runner.ab import Policy, paired_arms, run_pairs, write_paired
from benchtrail.runner.compile_modules import compile_modules
from benchtrail.runner.count_cases import count_cases, valgrind_version
from benchtrail.runner.environment import collect_environment, torch_version
from benchtrail.runner.recheck import recheck
from benchtrail.runner.run_cases import Journal, countable, noise_rerun_enabled, run_cases
from benchtrail.suite.definitions import Architecture, RunConfig, Suite
from benchtrail.suite.export import load_compilation, load_execution
from benchtrail.suite.filters import compile_filter
from benchtrail.suite.names import slug


def write_export(
    suite: Suite, kind: str, presets: tuple[str, ...], output: Path, name_filter: str | None = None
) -> Path:
    """Write the ``execution`` or ``compilation`` export for ``presets`` (one shard a device) to ``output``.
    Raises UserError as the checked export does."""
    return jsonio.write_json(
        output, checked_export(suite, kind, presets, name_filter=name_filter), exclusive=True
    )


def _only(items: tuple, ids: list[str] | None, what: str, source: Path) -> tuple:
    """``items`` whose id is in ``ids`` (all when None). Raises UserError for an id not in ``source``."""
    if ids is None:
        return items
    if missing := sorted(set(ids) - {i.id for i in items}):
        raise UserError(f"{what} {', '.join(missing)} not in {source}; see `benchtrail dump-cmds`")
    return tuple(i for i in items if i.id in ids)


def compile_stage(
    run_configs: Path,
    output_dir: Path,
    device_name: str,
    architecture: Architecture,
    run: dict[str, Any],
    module_ids: list[str] | None = None,
    repo: Path = Path("."),
) -> tuple[Path | None, bool]:
    """Compile the modules of a compilation export that target ``architecture`` into ``output_dir``
    (``modules/<slug(module)>/``, ``results/compilation-<slug(device_name)>.json``). Returns (that results
    file, None when no module targets ``architecture``; whether all compiled)."""
    gens, dirs, sampling, tasks = load_compilation(run_configs)
    gens = tuple(
        g for g in _only(gens, module_ids, "module id", run_configs) if g.target_architecture is architecture
    )
    output = output_dir / "results" / f"compilation-{slug(device_name)}.json"
    if not gens:
        return None, True
    jsonio.check_new(output, *(output_dir / dirs[g.id] for g in gens))
    commit, dirty = git_state(repo)
    with progress_bar("compile", len(gens)) as report:
        records = compile_modules(
            gens, dirs, output_dir, torch_version(), device_name, sampling, report, tasks
        )
    results = ResultsFile(commit, dirty, run, collect_environment(torch.get_num_threads()), tuple(records))
    return write_results(output, results), all(r.status == "ok" for r in records)


def _cases(
    run_configs: Path,
    device_name: str,
    shard_index: int | None,
    benchmark_ids: list[str] | None,
    name_filter: str | None,
) -> tuple[tuple[RunConfig, ...], int]:
    """The cases of one device's shard (None: all) that ``benchmark_ids`` and ``name_filter`` keep, and its
    shard count. Raises UserError when the device or shard is not in the export or the filter keeps none."""
    devices = load_execution(run_configs)
    if device_name not in devices:
        raise UserError(
            f"device {device_name!r} is not in {run_configs}; devices there: "
            f"{', '.join(sorted(devices)) or 'none'}"
        )
    shards = devices[device_name]
    if shard_index is not None and shard_index not in shards:
        raise UserError(
            f"shard {shard_index} of device {device_name!r} is not in {run_configs}; shards: {sorted(shards)}"
        )
    chosen = [shard_index] if shard_index is not None else sorted(shards)
    rcs = _only(tuple(rc for i in chosen for rc in shards[i]), benchmark_ids, "benchmark id", run_configs)
    if name_filter is not None:
        pattern = compile_filter(name_filter)
        rcs = tuple(rc for rc in rcs if pattern.search(rc.name) or pattern.search(rc.id))
        if not rcs:
            raise UserError(
                f"--filter {name_filter!r} matches no case of device {device_name!r} in {run_configs}"
            )
    return rcs, len(shards)


def counting_devices(
    run_configs: Path | tuple[RunConfig, ...],
    metrics: tuple[str, ...],
    device_name: str | None = None,
    gate_metric: str = "latency",
) -> set[str]:
    """The devices of an export (its path or run configs) whose countable cases the count stage counts (of
    ``device_name`` only, when given): all with ``instructions`` in ``metrics``, else those marked
    ``count_instructions``. Raises UserError when there are some and valgrind is missing."""
    rcs = (
        run_configs
        if isinstance(run_configs, tuple)
        else tuple(rc for shards in load_execution(run_configs).values() for s in shards.values() for rc in s)
    )
    devices = {
        rc.target_device for rc in rcs if countable(rc) and device_name in (None, rc.target_device.name)
    }
    counted = {d.name for d in devices if "instructions" in metrics or d.count_instructions}
    if counted and "instructions" in metrics and gate_metric == "instructions":
        valgrind_version("or gate on wall time: --gate-metric latency (BENCHTRAIL_GATE_METRIC)")
    elif counted and "instructions" in metrics:
        valgrind_version()
    elif counted:
        valgrind_version(
            f"or run on another runner: the suite marks {', '.join(sorted(counted))} "
            "count_instructions, so its CPU cases are counted whatever --metrics says"
        )
    return counted


def count_stage(
    run_configs: Path,
    device_name: str,
    shard_index: int | None,
    output: Path,
    run: dict[str, Any],
    benchmark_ids: list[str] | None = None,
    modules_dir: Path | None = None,
    repo: Path = Path("."),
    name_filter: str | None = None,
) -> tuple[Path, bool]:
    """Count the instructions per call of the CPU cases of one device's shard, chosen as :func:`run_stage`
    does, into ``<output stem>.instructions.json`` beside ``output`` (callgrind files under ``callgrind/``
    there). Returns (its path, whether every case was counted). Raises UserError as :func:`run_stage`, or
    without valgrind."""
    rcs, shard_count = _cases(run_configs, device_name, shard_index, benchmark_ids, name_filter)
    path = output.with_name(f"{output.stem}.instructions.json")
    jsonio.check_new(path)
    commit, dirty = git_state(repo)
    environment = collect_environment(1)
    native = sum(rc.target_device.architecture is Architecture.CPU and not countable(rc) for rc in rcs)
    if native:
        console.print(
            f"count {rich_text(device_name)}: {native} Inductor-compiled case{'s' * (native != 1)} "
            "not counted (kernels built for this CPU, -march=native: README, Instruction counts)"
        )
    with progress_bar(f"count {device_name}", sum(map(countable, rcs))) as report:
        records = count_cases(rcs, torch_version(), output.parent, modules_dir, report)
    run = dict(
        run, device_name=device_name, shard_index=shard_index, shard_count=shard_count, metric="instructions"
    )
    write_results(path, ResultsFile(commit, dirty, run, environment, tuple(records)))
    return path, all(r.status == "ok" for r in records)


def run_stage(
    run_configs: Path,
    device_name: str,
    shard_index: int | None,
    output: Path,
    run: dict[str, Any],
    benchmark_ids: list[str] | None = None,
    modules_dir: Path | None = None,
    repo: Path = Path("."),
    resume: bool = False,
    name_filter: str | None = None,
    refuse_without_cuda: bool = False,
    gate_metric: str = "latency",
) -> tuple[Path, bool]:
    """Run one device's shard (None: all shards) of an execution export, the cases ``benchmark_ids`` and
    ``name_filter`` keep; write the results file to ``output`` and a flattened document a benchmark under
    ``docs/`` beside it. Returns (results path, whether every case is ok).

    Export and AOTInductor modules load from ``<modules_dir>/modules/<module name>/``; a case whose module
    is missing or failed is recorded ``failed`` without a worker. Finished cases go to the journal
    ``<output>.partial.jsonl``, kept by ``resume`` (``--continue``), removed once the results are written.
    A CUDA device without a GPU: ``refuse_without_cuda`` raises, else every case is recorded ``failed``
    (never run on the CPU). A case noisier than 10% runs once more unless ``BENCHTRAIL_NOISE_RERUN=0``.
    ``gate_metric`` ``instructions``: countable cases' records say they gate on their counts.

    Raises: UserError when the device or shard is not in the export, a journal exists without ``resume``,
    CUDA is refused, or ``BENCHTRAIL_NOISE_RERUN`` is bad.
    """
    rcs, shard_count = _cases(run_configs, device_name, shard_index, benchmark_ids, name_filter)
    cuda = torch.cuda.is_available()
    no_gpu = (
        []
        if cuda
        else sorted(
            rc.name
            for rc in rcs  # the CUDA cases, when torch sees no GPU
            if rc.target_device.architecture is Architecture.CUDA
        )
    )
    if refuse_without_cuda and no_gpu:  # one message naming each case and why none can run here
        why = (
            f"this torch ({torch.__version__}) is built without CUDA"
            if torch.version.cuda is None
            else f"torch (CUDA {torch.version.cuda}) sees no GPU here"
        )
        raise UserError(
            f"device {device_name} needs CUDA and {why}, so none of its {len(no_gpu)} selected "
            f"run config(s) can run on this machine: {', '.join(no_gpu)}. Nothing was run (a "
            "CUDA case never runs on the CPU instead); run them on a CUDA runner"
        )
    rerun = noise_rerun_enabled()  # a bad BENCHTRAIL_NOISE_RERUN stops the stage before it writes anything
    jsonio.check_new(output)
    journal = Journal(output.with_name(output.name + ".partial.jsonl"))
    finished = journal.load(rcs, torch_version()) if resume else journal.refuse_stale()
    if no_gpu:
        console.print(
            f"[bold red]device {rich_text(device_name)} needs CUDA and torch sees no GPU here[/]: "
            "every case is recorded failed without starting a worker; none is run on the CPU "
            "instead"
        )
    commit, dirty = git_state(repo)
    # Before measuring: it holds the runner checks (doctor).
    environment = collect_environment(rcs[0].target_device.threads if rcs else torch.get_num_threads())
    if finished:
        console.print(
            f"--continue: {len(finished)} of {len(rcs)} cases finished earlier ({journal.path}); "
            "running the rest"
        )
    todo = tuple(rc for rc in rcs if rc.id not in finished)
    with progress_bar(f"run {device_name}", len(todo)) as report:
        new = run_cases(
            todo,
            torch_version(),
            report,
            modules_dir,
            on_record=journal.append,
            cuda=cuda,
            rerun=rerun,
            gate_instructions=gate_metric == "instructions",
        )
    by_id = finished | {r.id: r for r in new}
    records = tuple(by_id[rc.id] for rc in rcs)
    run = dict(
        run, device_name=device_name, shard_index=shard_index, shard_count=shard_count, noise_rerun=rerun
    )
    results = ResultsFile(commit, dirty, run, environment, records)
    path = write_results(output, results)
    write_documents(output.parent / "docs", results)
    journal.remove()
    return path, all(r.status == "ok" for r in records)


def ab_stage(
    repo: Path,
    base_ref: str,
    run_configs: tuple[RunConfig, ...],
    output_dir: Path,
    rules: Rules,
    policy: Policy,
) -> Path:
    """Run ``run_configs`` paired, ``base_ref`` against ``repo``'s working tree, writing
    ``results/{base,head}.json``, ``comparison.json`` and ``comment/`` under ``output_dir``; returns
    comment.md.
    Raises UserError for an unknown ref, a failing ``git worktree`` or outputs that exist."""
    outputs = [output_dir / "results" / f"{side}.json" for side in ("base", "head")]
    jsonio.check_new(*outputs, output_dir / "comparison.json")
    with paired_arms(repo, base_ref) as arms, progress_bar("paired A/B", len(run_configs)) as report:
        records = run_pairs(run_configs, arms, rules.thresholds, policy, torch_version(), report)
    write_paired(
        outputs,
        arms,
        records,
        run_configs[0].target_device.threads if run_configs else torch.get_num_threads(),
        git_state(repo)[1],
    )
    baseline = {"mode": "paired", "commit": arms[0].commit, "reason": f"--base-ref {base_ref}"}
    comparison = compare_stage(
        outputs[:1], outputs[1:], output_dir / "comparison.json", rules, baseline, paired=True
    )
    return comment_stage(comparison, output_dir / "comment")


def recheck_run(comparison: Path, repo: Path, suite: Suite, rules: Rules, policy: Policy) -> None:
    """Re-check the suspects of the run's ``comparison`` (paired samples in ``ab/``, profiles beside it) and
    rewrite it in place when any was. Raises UserError for a bad comparison file, and as the re-check."""
    before = load_comparison(comparison)
    after = recheck(before, repo, suite, rules, policy, comparison.parent / "ab", comparison.parent)
    if after is not before:
        jsonio.write_json(comparison, after.document)


def recheck_stage(
    comparison: Path,
    output_dir: Path,
    repo: Path,
    suite: Suite,
    rules: Rules,
    policy: Policy,
    base_ref: str | None = None,
    device_name: str | None = None,
) -> tuple[Path, bool]:
    """``benchtrail ab --recheck``: re-check ``comparison``'s suspected regressions (of ``device_name`` only,
    when given), writing ``comparison.json``, the paired samples (``results/ab-base.json``, ``ab-head.json``),
    profiles and ``comment/`` under ``output_dir``. Returns (comment.md, whether both arms of every paired
    case run now were ok). Raises UserError for a bad comparison file, existing outputs, no base commit, an
    unknown ref or a failing ``git worktree``."""
    obj = load_comparison(comparison)
    jsonio.check_new(output_dir / "comparison.json")
    updated = recheck(
        obj, repo, suite, rules, policy, output_dir / "results", output_dir, base_ref, device_name
    )
    path = jsonio.write_json(output_dir / "comparison.json", updated.document, exclusive=True)
    paired = [
        p for p in (output_dir / "results" / f"ab-{side}.json" for side in ("base", "head")) if p.exists()
    ]
    ok = all(b.status == "ok" for f in load_results_paths(paired) for b in f.benchmarks)
    return comment_stage(path, output_dir / "comment"), ok
