"""``export``, ``compile``, ``run``, ``pipeline``, ``ab``, ``explain``, ``dump-cmds``: run benchmarks, explain
a run. Declaring them imports no torch; running compile, run, pipeline or ab does."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchtrail.cli.compare import add_result_arguments, exit_code, show_result
from benchtrail.cli.flag_values import positive_seconds, whole_number
from benchtrail.cli.options import (
    FILTER_PARENT,
    METRICS_PARENT,
    PRESETS_PARENT,
    QUARANTINE_PARENT,
    STORE_HELP,
    THRESHOLDS_PARENT,
    accept_globs,
    add_any_origin_argument,
    add_command,
    presets,
    require_store,
    resolve_store,
    suite,
)
from benchtrail.errors import EXIT_BENCHMARKS_FAILED, EXIT_OK, UserError

#: The run stage's noise re-run setting, said in --help; 10% is the statistics' ``NOISE_RERUN``, written
#: out here so that the CLI's start imports no numpy or scipy.
NOISE_RERUN_HELP = (
    "A case whose samples' IQR/median is above 10% runs once more; "
    "BENCHTRAIL_NOISE_RERUN=0 turns that off (1, unset or empty: on), recorded as "
    "run.noise_rerun in the results (docs/statistics.md)."
)

#: What ``--gate-metric`` takes, and its environment fallback.
GATE_METRICS = ("latency", "instructions")
GATE_METRIC_ENV = "BENCHTRAIL_GATE_METRIC"
GATE_PARENT = argparse.ArgumentParser(add_help=False)
GATE_PARENT.add_argument(
    "--gate-metric",
    choices=GATE_METRICS,
    help="what gates a countable CPU case (eager, export): latency, its wall time; instructions, its "
    "instruction count (counted: --metrics defaults to latency,instructions; needs valgrind), its wall "
    "time reported, not gated, as on a device marked count_instructions; a case without a count "
    f"(Inductor, or --metrics latency) keeps wall time gating (default: ${GATE_METRIC_ENV}, else "
    "latency)",
)


def gate_metric(args: argparse.Namespace) -> tuple[str, tuple[str, ...]]:
    """``(gate metric, metrics)``: ``--gate-metric``, else ``$BENCHTRAIL_GATE_METRIC``, else latency;
    ``--metrics``, else latency, with instructions when they gate. Raises UserError for another value of the
    variable, naming it and the allowed ones."""
    value = args.gate_metric or os.environ.get(GATE_METRIC_ENV, "").strip() or "latency"
    if value not in GATE_METRICS:
        raise UserError(
            f"{GATE_METRIC_ENV}={value!r}: allowed: {', '.join(GATE_METRICS)}, unset or empty "
            "(latency); what gates a countable CPU case (--gate-metric)"
        )
    return value, args.metrics or ("latency", *(("instructions",) if value == "instructions" else ()))


def add_stage_parsers(subparsers: Any) -> None:
    """Declare ``export``, ``compile`` and ``run``."""
    p = add_command(subparsers, "export", cmd_export, parents=[PRESETS_PARENT, FILTER_PARENT])
    p.add_argument("kind", choices=("execution", "compilation"))
    p.add_argument("--shard-count", type=whole_number(1), default=1, help="shards per device (default 1)")
    p.add_argument("--output", type=Path, help="output file, or - for stdout (default: ./<kind>.json)")
    p.add_argument(
        "--format",
        choices=("benchtrail", "seed"),
        default="benchtrail",
        help="execution only, with --output -: seed prints {<device>: {host_environment, "
        "architecture, run_configs}}, unsharded and without schema_version, the shape IREE's "
        "export script printed for the seed's `jq 'flatten | map(.run_configs) | ...'` "
        "(default: benchtrail, the export `benchtrail run` reads)",
    )

    p = add_command(subparsers, "compile", cmd_compile)
    p.add_argument("--run-configs", type=Path, required=True, help="compilation export (compilation.json)")
    p.add_argument("--output-dir", type=Path, required=True, help="run directory to write modules/ into")
    p.add_argument(
        "--device-name", required=True, help="this runner's device name, recorded with the statistics"
    )
    p.add_argument(
        "--architecture", choices=("cpu", "cuda"), default="cpu", help="modules to compile (default cpu)"
    )
    p.add_argument("--module-id", action="append", help="compile only this module (repeatable)")

    p = add_command(
        subparsers,
        "run",
        cmd_run,
        parents=[FILTER_PARENT, METRICS_PARENT, GATE_PARENT],
        epilog=NOISE_RERUN_HELP,
    )
    p.add_argument("--run-configs", type=Path, required=True, help="execution export (execution.json)")
    p.add_argument(
        "--device-name",
        required=True,
        help="device to run (a key of the export's devices); a CUDA device on a machine where "
        "torch sees no GPU is refused before its first case (exit 1)",
    )
    p.add_argument("--shard-index", type=whole_number(0), help="shard to run (default: all shards)")
    p.add_argument("--benchmark-id", action="append", help="run only this run config id (repeatable)")
    p.add_argument(
        "--modules-dir",
        type=Path,
        help="run directory holding modules/<name>/ (export and AOTInductor artifacts); a case "
        "whose module failed to compile or was not compiled there is recorded failed, "
        "not run",
    )
    p.add_argument("--output", type=Path, required=True, help="results file to write")
    p.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="resume a run stage that stopped part-way: keep the cases its journal "
        "(<output>.partial.jsonl) holds, run the rest",
    )


def add_pipeline_parsers(subparsers: Any) -> None:
    """Declare ``pipeline`` and ``ab``."""
    p = add_command(
        subparsers,
        "pipeline",
        cmd_pipeline,
        epilog=NOISE_RERUN_HELP,
        parents=[
            PRESETS_PARENT,
            FILTER_PARENT,
            METRICS_PARENT,
            GATE_PARENT,
            THRESHOLDS_PARENT,
            QUARANTINE_PARENT,
        ],
    )
    p.add_argument("--store", help=STORE_HELP)
    add_any_origin_argument(p)
    p.add_argument(
        "--base-commit", help="baseline commit (default: the merge-base rule in README's Baseline section)"
    )
    p.add_argument(
        "--recheck",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="re-check regressions against the baseline commit in paired A/B runs (default on)",
    )
    add_result_arguments(
        p,
        fail_on_help="exit 3 when a regression is not accepted: a confirmed one when "
        "the re-check ran (as CI's gate), else any",
    )

    p = add_command(subparsers, "ab", cmd_ab, parents=[THRESHOLDS_PARENT])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--benchmark-presets", type=presets, metavar="P[,P...]", help="cases to run paired")
    which.add_argument(
        "--recheck",
        type=Path,
        metavar="COMPARISON",
        help="re-check the suspects of this comparison.json: unconfirmed "
        "regressions, improvements, and inconclusive rows beyond their threshold",
    )
    p.add_argument(
        "--base-ref",
        help="base commit or ref, checked out in a git worktree (with --recheck: "
        "default the comparison's base commit)",
    )
    p.add_argument("--benchmark-id", action="append", help="only this run config id (repeatable)")
    p.add_argument(
        "--device-name", help="with --recheck: re-check only this device's rows (the runner's own)"
    )
    p.add_argument(
        "--output-dir", type=Path, required=True, help="folder for results, comparison.json, comment/"
    )
    p.add_argument(
        "--min-rounds",
        type=whole_number(1),
        help="rounds always run, one worker per arm each (default: the run config's processes)",
    )
    p.add_argument(
        "--max-rounds",
        type=whole_number(1),
        help="rounds at most per case (default: none; a case runs until its interval decides, "
        "within --budget-s)",
    )
    p.add_argument(
        "--budget-s",
        type=positive_seconds,
        default=60.0,
        help="no new round starts after this many seconds of a case; the sequential looks spend "
        "the 1%% false-alarm rate over it (default 60)",
    )
    p.add_argument(
        "--total-budget-s",
        type=positive_seconds,
        metavar="S",
        help="with --recheck: suspects are re-checked largest change first, no case starts once S "
        "seconds have passed since the re-check began, and each gets "
        "at most the time left as its --budget-s; rows not reached stay "
        "unconfirmed (default: no limit)",
    )
    p.add_argument(
        "--seed", type=whole_number(0), default=0, help="seeds arm order and bootstrap (default 0)"
    )
    p.add_argument(
        "--duet",
        choices=("auto", "on", "off"),
        default="auto",
        help="run both arms at once, each pinned to its own CPUs, samples "
        "started together and the CPUs swapped every round, for CPU cases whose arms' "
        "workers both can and where the CPUs hold both arms' threads; auto: only on 4 "
        "CPUs or more (default auto)",
    )
    add_result_arguments(
        p,
        accept_help="accept regressions of matching series (with --recheck: those "
        "the re-check finds, with the comma-separated BENCHMARKS_ACCEPT too)",
    )


def add_explain_parsers(subparsers: Any) -> None:
    """Declare ``explain`` and ``dump-cmds``."""
    run = argparse.ArgumentParser(add_help=False)
    run.add_argument(
        "--run",
        help="run directory: a folder, or a store URL ending in /runs/<id>/<attempt>/ "
        "such as gs://bucket/runs/123/1/ (default: the "
        "newest run of the local store: --store, else $BENCHTRAIL_STORE, else "
        "[tool.benchtrail] store, else .benchtrail/store)",
    )
    run.add_argument(
        "--store",
        help="with no --run: the store whose newest run is explained (a folder or "
        "file:///ABS/PATH; default: $BENCHTRAIL_STORE, else "
        "[tool.benchtrail] store, else .benchtrail/store)",
    )
    p = add_command(subparsers, "explain", cmd_explain, parents=[run])
    p.add_argument(
        "benchmark_id",
        help="the benchmark's exact name (as the PR comment's reproduce line gives it), or its "
        "id: run config id, module id, <module id>-<metric>, or a 6+ character id prefix",
    )
    add_command(subparsers, "dump-cmds", cmd_dump_cmds, parents=[run])


def _run_info(run_configs: Path) -> dict:
    """The results' ``run``: a new run id and attempt, and the presets the export ``run_configs`` was made for
    (none for older exports)."""
    from benchtrail.pipeline.job import new_run_id
    from benchtrail.suite.export import load_presets

    run_id, attempt = new_run_id()
    return {"run_id": run_id, "attempt": attempt, "presets": list(load_presets(run_configs))}


def _filtered_suite(args: argparse.Namespace):
    """The project's suite narrowed by ``--filter`` (all of it without one)."""
    from benchtrail.suite.filters import check_selects, compile_filter, filter_suite

    loaded = suite()
    if args.filter is None:
        return loaded
    loaded = filter_suite(loaded, compile_filter(args.filter))
    check_selects(loaded, args.benchmark_presets, args.filter)
    return loaded


def cmd_export(args: argparse.Namespace) -> int:
    """Write the export (or print it with ``--output -``)."""
    from benchtrail import jsonio
    from benchtrail.pipeline.export import checked_export

    output = args.output or Path(f"{args.kind}.json")
    to_file, seed = str(output) != "-", args.format == "seed"
    if seed and to_file:
        raise UserError(
            "--format seed prints to stdout only (pass --output -): every file benchtrail writes "
            "has a root schema_version, which the seed's shape cannot hold"
        )
    if to_file:
        jsonio.check_new(output)  # before the suite is read
    text = jsonio.dumps(
        checked_export(
            _filtered_suite(args),
            args.kind,
            args.benchmark_presets,
            args.shard_count,
            seed=seed,
            name_filter=args.filter,
        )
    )
    if to_file:
        print(jsonio.write_text_atomic(output, text, exclusive=True))
    else:  # the JSON alone, for a pipe (progress and messages go to stderr)
        sys.stdout.write(text)
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    """Print the statistics file's path; exit 2 when a module failed, else 0."""
    from benchtrail.pipeline.measure_stages import compile_stage
    from benchtrail.suite.definitions import Architecture

    path, ok = compile_stage(
        args.run_configs,
        args.output_dir,
        args.device_name,
        Architecture(args.architecture),
        _run_info(args.run_configs),
        args.module_id,
    )
    if path is None:
        print(f"benchtrail: no module in {args.run_configs} targets {args.architecture}", file=sys.stderr)
        return EXIT_OK
    print(path)
    return EXIT_OK if ok else EXIT_BENCHMARKS_FAILED


def cmd_run(args: argparse.Namespace) -> int:
    """Print the results files' paths (with instructions, the counted one too); exit 2 when a case failed,
    else 0."""
    from benchtrail.pipeline.measure_stages import count_stage, counting, run_stage

    cases = (args.run_configs, args.device_name, args.shard_index)
    chosen = {"benchmark_ids": args.benchmark_id, "modules_dir": args.modules_dir, "name_filter": args.filter}
    gate, metrics = gate_metric(args)
    count = counting(args.run_configs, metrics, args.device_name, gate)  # no valgrind: refused now
    run = _run_info(args.run_configs)  # one run: the counted results file shares the run id
    path, ok = run_stage(
        *cases, args.output, run, **chosen, resume=args.resume, refuse_without_cuda=True, gate_metric=gate
    )
    print(path)
    if count:
        path, counted = count_stage(*cases, args.output, run, **chosen)
        print(path)
        ok &= counted
    return EXIT_OK if ok else EXIT_BENCHMARKS_FAILED


def cmd_pipeline(args: argparse.Namespace) -> int:
    """Print the comparison's table, then the comment's path (``--json``: the comparison); exit 3 with
    ``--fail-on regressed`` for a regression not accepted (only confirmed ones when the re-check ran, as CI's
    gate), 2 when a case failed, else 0. Raises UserError when the store resolves to none, for a bad
    ``BENCHTRAIL_GATE_METRIC``, and what the pipeline raises."""
    store = require_store(args.store, "benchtrail pipeline (it writes its run into a store)")
    gate, metrics = gate_metric(args)
    from benchtrail.compare.rules import Rules
    from benchtrail.pipeline.job import run_pipeline  # imports torch: after the cheap checks

    result = run_pipeline(
        _filtered_suite(args),
        args.benchmark_presets,
        store,
        args.base_commit,
        Rules.load(args.thresholds, accept_globs(args.accept), args.quarantine),
        recheck=args.recheck,
        any_origin=args.baseline_any_origin,
        name_filter=args.filter,
        metrics=metrics,
        gate_metric=gate,
    )
    return exit_code(
        args,
        show_result(result.run_dir / "comparison.json", result.comment_md, args),
        result.all_ok,
        rule="confirmed" if result.rechecked else "any",
    )


def cmd_ab(args: argparse.Namespace) -> int:
    """Print the comparison's table, then the comment's path (``--json``: the comparison); exit 3 for a
    regression not accepted, 2 for a failed case, else 0."""
    from benchtrail.compare.rules import Rules
    from benchtrail.pipeline.job import available_architectures
    from benchtrail.pipeline.measure_stages import ab_stage, recheck_stage
    from benchtrail.runner.ab import Policy

    loaded, repo = suite(), Path(".")
    if args.min_rounds and args.max_rounds and args.min_rounds > args.max_rounds:
        raise UserError(f"--min-rounds {args.min_rounds} is more than --max-rounds {args.max_rounds}")
    policy = Policy(
        args.min_rounds, args.max_rounds, args.budget_s, args.seed, args.total_budget_s, duet=args.duet
    )
    if args.recheck:
        if args.benchmark_id:
            raise UserError(
                "--benchmark-id selects cases of --benchmark-presets; --recheck takes the "
                "comparison's unconfirmed regressions"
            )
        comment, ok = recheck_stage(
            args.recheck,
            args.output_dir,
            repo,
            loaded,
            Rules.load(args.thresholds, accept_globs(args.accept)),
            policy,
            args.base_ref,
            args.device_name,
        )
    else:
        if args.total_budget_s is not None:
            raise UserError(
                "--total-budget-s bounds a --recheck of several suspects; "
                "with --benchmark-presets every case runs (bound each with --budget-s)"
            )
        if not args.base_ref:
            raise UserError("--base-ref is required with --benchmark-presets (the commit to compare against)")
        if args.device_name:
            raise UserError(
                "--device-name selects the rows of --recheck; with "
                "--benchmark-presets pick cases with --benchmark-id"
            )
        here = available_architectures()
        rcs = tuple(
            rc
            for rc in loaded.select_run_configs(args.benchmark_presets)
            if rc.target_device.architecture in here
        )
        if args.benchmark_id:
            unknown = sorted(set(args.benchmark_id) - {rc.id for rc in rcs})
            if unknown:
                raise UserError(
                    f"--benchmark-id {', '.join(unknown)}: not a run config of presets "
                    f"{', '.join(args.benchmark_presets)} that this machine can run"
                )
            rcs = tuple(rc for rc in rcs if rc.id in args.benchmark_id)
        if not rcs:
            raise UserError(
                f"presets {', '.join(args.benchmark_presets)} select no case this machine can run"
            )
        comment = ab_stage(
            repo, args.base_ref, rcs, args.output_dir, Rules.load(args.thresholds, args.accept), policy
        )
    rows = show_result(args.output_dir / "comparison.json", comment, args)
    if not args.recheck:  # a re-check exits 2 only for a paired run of its own that failed
        ok = not any(r.verdict == "failed" for r in rows)
    return exit_code(args, rows, ok)


def _run_dir(args: argparse.Namespace):
    """(local run directory, fetch) for ``--run``; ``fetch(module name)`` brings one module's files."""
    from benchtrail.runner.explain import locate_run

    if args.run:
        if args.store is not None:
            raise UserError(
                "--run names the run already; --store picks the newest run "
                "of a store when --run is left out: pass one"
            )
        return locate_run(args.run)
    store = require_store(args.store, f"benchtrail {args.command} without --run")
    source = resolve_store(args.store).source
    from benchtrail.store import is_local, open_store

    if not is_local(store):
        raise UserError(
            f"the store {store} (from {source}) is not a folder, and only a "
            "local store's newest run is found without --run; pass --run "
            "STORE/runs/<id>/<attempt>/ (the comment prints it)"
        )
    runs = sorted(open_store(store, read_only=True).root.glob("runs/*/*"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise UserError(
            f"no --run given and no run in the store {store} (from {source}); run `benchtrail "
            "pipeline` first, or pass --run"
        )
    return runs[-1], lambda name: None


def cmd_explain(args: argparse.Namespace) -> int:
    """Print how one benchmark of a run was set up and how to reproduce it."""
    from benchtrail.runner.explain import explain, load_targets, resolve

    run_dir, fetch_module = _run_dir(args)
    benchmark_id, target = resolve(load_targets(run_dir), args.benchmark_id)
    fetch_module(target.module.name)
    print(explain(benchmark_id, target, run_dir), end="")
    return EXIT_OK


def cmd_dump_cmds(args: argparse.Namespace) -> int:
    """Print the reproduce command of every benchmark of a run."""
    from benchtrail.runner.explain import dump_commands, load_targets

    run_dir, _ = _run_dir(args)
    print(dump_commands(load_targets(run_dir), run_dir), end="")
    return EXIT_OK
