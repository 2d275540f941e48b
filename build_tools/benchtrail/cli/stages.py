"""``export``, ``compile``, ``run``, ``pipeline``: write run configs, compile modules, run benchmarks,
the main job end to end. Declaring them imports no torch; running compile, run or pipeline does."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchtrail.cli.compare import add_result_arguments, exit_code, show_result
from benchtrail.cli.flag_values import whole_number
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
    require_store,
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


def add_pipeline_parser(subparsers: Any) -> None:
    """Declare ``pipeline``."""
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
    from benchtrail.pipeline.checked_export import checked_export

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
    from benchtrail.pipeline.measure_stages import count_stage, counting_devices, run_stage

    cases = (args.run_configs, args.device_name, args.shard_index)
    chosen = {"benchmark_ids": args.benchmark_id, "modules_dir": args.modules_dir, "name_filter": args.filter}
    gate, metrics = gate_metric(args)
    count = counting_devices(args.run_configs, metrics, args.device_name, gate)  # no valgrind: refused now
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
