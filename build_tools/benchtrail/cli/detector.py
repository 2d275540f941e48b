"""``benchtrail evaluate-detector``: the command over :mod:`benchtrail.detector.evaluate`.

Declaring it imports neither numpy nor scipy (``benchtrail --help`` declares every command); running it
imports the evaluation, which needs both, and torch in its workers.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchtrail.cli.options import (ROUND_SAMPLES, comparisons, detector_modes, percent_deltas, percentage,
                                    samples_per_side, whole_number)

def add_evaluate_detector_parser(subparsers: Any) -> None:
    """Declare ``benchtrail evaluate-detector`` on ``subparsers`` (from ``add_subparsers``); it calls
    :func:`cmd_evaluate_detector`."""
    p = subparsers.add_parser("evaluate-detector")
    p.add_argument("--aa", type=comparisons, default=300, metavar="N",
                   help="A/A comparisons per mode (default 300)")
    p.add_argument("--ab", type=comparisons, default=100, metavar="N",
                   help="A/B comparisons per δ per mode (default 100)")
    p.add_argument("--deltas", type=percent_deltas, default=(1.0, 2.0, 5.0, 10.0), metavar="P[,P...]",
                   help="injected extra work, percent of a call (default 1,2,5,10)")
    p.add_argument("--samples", type=samples_per_side, default=30, metavar="N",
                   help=f"samples per side, a multiple of the round size {ROUND_SAMPLES} (default 30)")
    p.add_argument("--max-samples", type=samples_per_side, default=120, metavar="N",
                   help="most samples per side of the sequential modes (paired, duet), a multiple of "
                        f"{ROUND_SAMPLES} and at least --samples (default 120)")
    p.add_argument("--modes", type=detector_modes, metavar="M[,M...]",
                   help="modes to run: stored-baseline, paired, duet (default all "
                        "three, duet only where this process may use 2 CPUs)")
    p.add_argument("--seed", type=whole_number(0, "a whole number >= 0"), default=0,
                   help="seed of the arm assignment and orders (default 0)")
    p.add_argument("--output", type=Path, default=Path("detector.json"),
                   help="JSON file to write; never overwritten (default detector.json)")
    p.add_argument("--rejudge", type=Path, metavar="DETECTOR_JSON",
                   help="measure nothing: judge the samples of an earlier output again (with "
                        "--threshold-pct)")
    p.add_argument("--threshold-pct", type=percentage, metavar="PCT",
                   help="benchtrail's threshold in percent (default: the shipped thresholds table's rule)")
    p.add_argument("--noise", action="store_true",
                   help="run a bounded background load beside the measurement (one "
                        "process, 50%% busy, streaming over 256 MiB): the figures of a busy runner")
    p.set_defaults(func=cmd_evaluate_detector)


def cmd_evaluate_detector(args: argparse.Namespace) -> int:
    """``benchtrail evaluate-detector``: print the setup, the expected duration and the table; write
    the JSON. Exit 0.

    Raises:
        UserError: ``--output`` exists or cannot be written; ``--rejudge`` of a file that lacks a field or
            has one of the wrong shape, or with ``--modes`` or ``--noise``; ``--max-samples`` below
            ``--samples``; duet mode on a machine that lets this process use fewer than 2 CPUs.
    """
    from benchtrail.detector.evaluate import SCHEMA_VERSION, EvalConfig, evaluate, format_table, rejudge
    from benchtrail.errors import UserError
    from benchtrail.jsonio import check_new, read_json, write_json

    check_new(args.output)
    if args.rejudge:
        measuring = [flag for flag, given in (("--modes", args.modes), ("--noise", args.noise)) if given]
        if measuring:
            raise UserError(f"--rejudge measures nothing; {' and '.join(measuring)} would not apply: leave "
                            f"{'them' if len(measuring) > 1 else 'it'} out, or drop --rejudge to measure")
        doc = read_json(args.rejudge, kind="evaluate-detector output", supported=SCHEMA_VERSION)
        try:
            doc = rejudge(doc, args.threshold_pct if args.threshold_pct is not None
                          else doc["setup"]["threshold_pct"])
        except (KeyError, TypeError, ValueError) as exc:  # a field missing or of the wrong shape
            raise UserError(f"{args.rejudge}: not an evaluate-detector output that can be judged again "
                            f"(docs/schemas/detector.schema.json): {type(exc).__name__}: {exc}") from None
    else:
        from benchtrail.detector.load import Load

        if args.max_samples < args.samples:
            raise UserError(f"--max-samples {args.max_samples} is fewer than --samples {args.samples}")
        config = EvalConfig(aa=args.aa, ab=args.ab, deltas_pct=args.deltas, samples=args.samples,
                            seed=args.seed, threshold_pct=args.threshold_pct,
                            noise=Load() if args.noise else None, max_samples=args.max_samples,
                            **({"modes": args.modes} if args.modes else {}))
        doc = evaluate(config, report=print)
    print(format_table(doc), end="")
    print(write_json(args.output, doc, exclusive=True))
    return 0
