"""``ab``: paired A/B runs of base and head on this machine, or a re-check of a comparison's suspects.
Declaring it imports no torch; running it does."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchtrail.cli.compare import add_result_arguments, exit_code, show_result
from benchtrail.cli.flag_values import positive_seconds, whole_number
from benchtrail.cli.options import THRESHOLDS_PARENT, accept_globs, add_command, presets, suite
from benchtrail.errors import UserError


def add_ab_parser(subparsers: Any) -> None:
    """Declare ``ab``."""
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
