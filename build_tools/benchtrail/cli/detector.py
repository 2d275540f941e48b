"""``benchtrail evaluate-detector``: the command over :mod:`benchtrail.detector.evaluate`.

Declaring it imports neither numpy nor scipy (``benchtrail --help`` declares every command); running it
imports the evaluation, which needs both, and torch in its workers.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

#: Samples per round of the detector: ``benchtrail.detector.rules.ROUND_SAMPLES``, which imports scipy
#: at load time; tests/test_cli_startup.py checks that the two agree.
ROUND_SAMPLES = 10


def _count(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of comparisons >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of comparisons >= 1, got {value}")
    return value


def _samples(text: str) -> int:
    """argparse type: samples per side, a positive multiple of the round size (``ROUND_SAMPLES``)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < ROUND_SAMPLES or value % ROUND_SAMPLES:
        raise argparse.ArgumentTypeError(f"samples per side must be a multiple of the round size {ROUND_SAMPLES} "
                                         f"(10, 20, 30, ...), got {text!r}")
    return value


def _seed(text: str) -> int:
    """argparse type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _deltas(text: str) -> tuple[float, ...]:
    """argparse type: ``"1,2,5,10"`` → (1.0, 2.0, 5.0, 10.0), percent of extra work, each in (0, 1000], no repeats."""
    out = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not 0 < value <= 1000:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} in {text!r} is not a percentage in (0, 1000]; "
                                             "pass comma-separated percentages of extra work such as 1,2,5,10")
        if value in out:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} appears twice in {text!r}; list each percentage once")
        out.append(value)
    return tuple(out)


#: ``benchtrail.detector.evaluate.MODES`` (declaring the command imports no numpy).
MODES = ("stored-baseline", "paired", "duet")


def _modes(text: str) -> tuple[str, ...]:
    """argparse type: ``"paired,duet"`` → ("paired", "duet"): distinct names of :data:`MODES`."""
    out = tuple(part.strip() for part in text.split(","))
    bad = [m for m in out if m not in MODES]
    if bad or not out or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"{text!r}: expected distinct modes out of {', '.join(MODES)}, comma-separated")
    return out


def _threshold(text: str) -> float:
    """argparse type: a percentage in (0, 100)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage in (0, 100), got {text!r}")
    return value


def add_evaluate_detector_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Declare ``benchtrail evaluate-detector`` on ``subparsers`` (from ``add_subparsers``); it calls
    :func:`cmd_evaluate_detector`."""
    p = subparsers.add_parser("evaluate-detector",
                              help="measure the regression detector's false-positive and detection rates "
                                   "(a benchmark of about 15 minutes)")
    p.add_argument("--aa", type=_count, default=300, metavar="N", help="A/A comparisons per mode (default 300)")
    p.add_argument("--ab", type=_count, default=100, metavar="N", help="A/B comparisons per δ per mode (default 100)")
    p.add_argument("--deltas", type=_deltas, default=(1.0, 2.0, 5.0, 10.0), metavar="P[,P...]",
                   help="injected extra work, percent of a call (default 1,2,5,10)")
    p.add_argument("--samples", type=_samples, default=30, metavar="N",
                   help=f"samples per side, a multiple of the round size {ROUND_SAMPLES} (default 30)")
    p.add_argument("--max-samples", type=_samples, default=120, metavar="N",
                   help="most samples per side of the sequential modes (paired, duet), a multiple of "
                        f"{ROUND_SAMPLES} and at least --samples (default 120)")
    p.add_argument("--modes", type=_modes, metavar="M[,M...]",
                   help="modes to run: stored-baseline, paired, duet (default all three, duet only where this "
                        "process may use 2 CPUs)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the arm assignment and orders (default 0)")
    p.add_argument("--output", type=Path, default=Path("detector.json"),
                   help="JSON file to write; never overwritten (default detector.json)")
    p.add_argument("--rejudge", type=Path, metavar="DETECTOR_JSON",
                   help="measure nothing: judge the samples of an earlier output again (with --threshold-pct)")
    p.add_argument("--threshold-pct", type=_threshold, metavar="PCT",
                   help="benchtrail's threshold in percent (default: the shipped thresholds table's rule)")
    p.add_argument("--noise", action="store_true",
                   help="run a bounded background load beside the measurement (one process, 50%% busy, streaming "
                        "over 256 MiB): the figures of a busy runner")
    p.set_defaults(func=cmd_evaluate_detector)
    return p


def cmd_evaluate_detector(args: argparse.Namespace) -> int:
    """``benchtrail evaluate-detector``: print the setup, the expected duration and the table; write
    the JSON. Exit 0.

    Raises:
        UserError: ``--output`` exists or cannot be written; ``--rejudge`` of a file that lacks a field or
            has one of the wrong shape, or with ``--modes`` or ``--noise``; ``--max-samples`` below ``--samples``; duet
            mode on a machine that lets this process use fewer than 2 CPUs.
    """
    from benchtrail.detector.evaluate import SCHEMA_VERSION, EvalConfig, evaluate, format_table, rejudge
    from benchtrail.errors import UserError
    from benchtrail.jsonio import check_new, write_json

    check_new(args.output)
    if args.rejudge:
        from benchtrail.jsonio import read_json

        measuring = [flag for flag, given in (("--modes", args.modes), ("--noise", args.noise)) if given]
        if measuring:
            raise UserError(f"--rejudge measures nothing; {' and '.join(measuring)} would not apply: leave "
                            f"{'them' if len(measuring) > 1 else 'it'} out, or drop --rejudge to measure")
        doc = read_json(args.rejudge, kind="evaluate-detector output", supported=SCHEMA_VERSION)
        try:
            doc = rejudge(doc, args.threshold_pct if args.threshold_pct is not None else doc["setup"]["threshold_pct"])
        except (KeyError, TypeError, ValueError) as exc:  # a field missing or of the wrong shape
            raise UserError(f"{args.rejudge}: not an evaluate-detector output that can be judged again "
                            f"(docs/schemas/detector.schema.json): {type(exc).__name__}: {exc}") from None
    else:
        from benchtrail.detector.load import Load

        if args.max_samples < args.samples:
            raise UserError(f"--max-samples {args.max_samples} is fewer than --samples {args.samples}")
        config = EvalConfig(aa=args.aa, ab=args.ab, deltas_pct=args.deltas, samples=args.samples, seed=args.seed,
                            threshold_pct=args.threshold_pct, noise=Load() if args.noise else None,
                            max_samples=args.max_samples, **({"modes": args.modes} if args.modes else {}))
        doc = evaluate(config, report=print)
    print(format_table(doc), end="")
    print(write_json(args.output, doc, exclusive=True))
    return 0
