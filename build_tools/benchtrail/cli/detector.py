"""``benchtrail evaluate-detector`` over the detector's latency and instruction-count evaluations, and the
argparse types of its flags. Declaring it imports neither numpy nor scipy; running it needs both, and torch
in its workers."""

from __future__ import annotations

import argparse
import math
from argparse import ArgumentTypeError
from pathlib import Path
from typing import Any

from benchtrail.cli.flag_values import whole_number
from benchtrail.cli.options import add_command

#: ``--aa`` and ``--ab`` of ``evaluate-detector``: comparisons, from 1.
comparisons = whole_number(1, "a whole number of comparisons >= 1", show_number=True)


#: Samples per round of the detector, copied from detector/rules.py, which imports scipy at load time;
#: tests/test_cli_startup.py checks that the two agree.
ROUND_SAMPLES = 10
#: The detector evaluation's modes, copied from detector/evaluate.py, which imports numpy at load time;
#: tests/test_cli_startup.py checks that the two agree.
MODES = ("stored-baseline", "paired", "duet")


def samples_per_side(text: str) -> int:
    """argparse type: samples per side, a positive multiple of the round size (``ROUND_SAMPLES``)."""
    value = int(text) if text.isdigit() else -1
    if value < ROUND_SAMPLES or value % ROUND_SAMPLES:
        raise ArgumentTypeError(
            f"samples per side must be a multiple of the round size "
            f"{ROUND_SAMPLES} (10, 20, 30, ...), got {text!r}"
        )
    return value


def _number(text: str) -> float:
    """``float(text)``, or NaN (which no range holds) for text that is not a number."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def percentage(text: str) -> float:
    """argparse type: a percentage in (0, 100)."""
    value = _number(text)
    if not 0 < value < 100:
        raise ArgumentTypeError(f"expected a percentage in (0, 100), got {text!r}")
    return value


def percent_deltas(text: str) -> tuple[float, ...]:
    """argparse type: ``"1,2,5,10"`` → (1.0, 2.0, 5.0, 10.0), distinct percents of extra work in (0, 1000]."""
    out = []
    for part in text.split(","):
        value = _number(part)
        if not 0 < value <= 1000:
            raise ArgumentTypeError(
                f"{part.strip()!r} in {text!r} is not a percentage in (0, 1000]; pass "
                "comma-separated percentages of extra work such as 1,2,5,10"
            )
        if value in out:
            raise ArgumentTypeError(f"{part.strip()!r} appears twice in {text!r}; list each percentage once")
        out.append(value)
    return tuple(out)


def detector_modes(text: str) -> tuple[str, ...]:
    """argparse type: ``"paired,duet"`` → ("paired", "duet"): distinct names of :data:`MODES`."""
    out = tuple(part.strip() for part in text.split(","))
    if not set(out) <= set(MODES) or len(set(out)) != len(out):
        raise ArgumentTypeError(
            f"{text!r}: expected distinct modes out of {', '.join(MODES)}, comma-separated"
        )
    return out


def add_evaluate_detector_parser(subparsers: Any) -> None:
    """Declare ``evaluate-detector``."""
    p = add_command(subparsers, "evaluate-detector", cmd_evaluate_detector)
    p.add_argument(
        "--metric",
        choices=("latency", "instructions"),
        help="latency: wall time in three modes (default); instructions: counted under "
        "valgrind/callgrind by a pool of processes (docs/detector.md)",
    )
    p.add_argument(
        "--aa", type=comparisons, default=300, metavar="N", help="A/A comparisons per mode (default 300)"
    )
    p.add_argument(
        "--ab",
        type=comparisons,
        default=100,
        metavar="N",
        help="A/B comparisons per δ per mode (default 100)",
    )
    p.add_argument(
        "--deltas",
        type=percent_deltas,
        metavar="P[,P...]",
        help="injected extra work, percent of a call (default 1,2,5,10; instructions: 2 x and "
        "1/2 x the threshold, and these besides)",
    )
    p.add_argument(
        "--processes",
        type=whole_number(5),
        metavar="N",
        help="instructions: counting processes in the pool, at least 5 (default 6)",
    )
    p.add_argument(
        "--samples",
        type=samples_per_side,
        metavar="N",
        help=f"samples per side, a multiple of the round size {ROUND_SAMPLES} (default 30)",
    )
    p.add_argument(
        "--max-samples",
        type=samples_per_side,
        metavar="N",
        help="most samples per side of the sequential modes (paired, duet), a multiple of "
        f"{ROUND_SAMPLES} and at least --samples (default 120)",
    )
    p.add_argument(
        "--modes",
        type=detector_modes,
        metavar="M[,M...]",
        help="modes to run: stored-baseline, paired, duet (default all "
        "three, duet only where this process may use 2 CPUs)",
    )
    p.add_argument(
        "--seed",
        type=whole_number(0, "a whole number >= 0"),
        default=0,
        help="seed of the arm assignment and orders (default 0)",
    )
    p.add_argument(
        "--output",
        type=Path,
        default=Path("detector.json"),
        help="JSON file to write; never overwritten (default detector.json)",
    )
    p.add_argument(
        "--rejudge",
        type=Path,
        metavar="DETECTOR_JSON",
        help="measure nothing: judge the samples of an earlier output again (with --threshold-pct)",
    )
    p.add_argument(
        "--threshold-pct",
        type=percentage,
        metavar="PCT",
        help="benchtrail's threshold in percent (default: the shipped thresholds table's rule)",
    )
    p.add_argument(
        "--noise",
        action="store_true",
        help="run a bounded background load beside the measurement (one "
        "process, 50%% busy, streaming over 256 MiB): the figures of a busy runner",
    )


def _given(args: argparse.Namespace, *flags: str) -> list[str]:
    """Those of ``flags`` given (every value given is truthy)."""
    return [flag for flag in flags if getattr(args, flag[2:].replace("-", "_"))]


def cmd_evaluate_detector(args: argparse.Namespace) -> int:
    """Print the setup, the expected duration and the table; write the JSON. Raises UserError for an
    ``--output`` that exists or cannot be written, a ``--rejudge`` file missing a field or misshapen (or with
    an option that measures), ``--max-samples`` below ``--samples``, duet with fewer than 2 usable CPUs, an
    option of the other metric, or ``--metric instructions`` without valgrind."""
    from benchtrail.detector import count_evaluation
    from benchtrail.detector.background_load import Load
    from benchtrail.detector.evaluate import SCHEMA_VERSION, EvalConfig, evaluate, format_table, rejudge
    from benchtrail.errors import UserError
    from benchtrail.jsonio import check_new, read_json, write_json

    check_new(args.output)
    counted = args.metric == "instructions"
    wrong = _given(args, "--modes", "--samples", "--max-samples") if counted else _given(args, "--processes")
    if wrong:
        raise UserError(
            f"{' and '.join(wrong)} {'do' if len(wrong) > 1 else 'does'} not apply to --metric "
            f"{args.metric or 'latency'}: leave {'them' if len(wrong) > 1 else 'it'} out"
        )
    noise = Load() if args.noise else None
    if args.rejudge:
        measuring = _given(args, "--modes", "--noise", "--metric", "--deltas", "--processes")
        if measuring:
            raise UserError(
                f"--rejudge measures nothing; {' and '.join(measuring)} would not apply: leave "
                f"{'them' if len(measuring) > 1 else 'it'} out, or drop --rejudge to measure"
            )
        doc = read_json(args.rejudge, kind="evaluate-detector output", supported=SCHEMA_VERSION)
        try:
            counted = doc["setup"].get("metric") == "instructions"
            doc = (count_evaluation.rejudge if counted else rejudge)(
                doc, args.threshold_pct or doc["setup"]["threshold_pct"]
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a field missing or misshapen
            raise UserError(
                f"{args.rejudge}: not an evaluate-detector output that can be judged again "
                f"(docs/schemas/detector.schema.json): {type(exc).__name__}: {exc}"
            ) from None
    elif counted:
        doc = count_evaluation.evaluate_counts(
            count_evaluation.CountConfig(
                aa=args.aa,
                ab=args.ab,
                deltas_pct=args.deltas or (),
                seed=args.seed,
                threshold_pct=args.threshold_pct,
                noise=noise,
                **({"processes": args.processes} if args.processes else {}),
            ),
            report=print,
        )
    else:
        samples, max_samples = args.samples or 30, args.max_samples or 120
        if max_samples < samples:
            raise UserError(f"--max-samples {max_samples} is fewer than --samples {samples}")
        doc = evaluate(
            EvalConfig(
                aa=args.aa,
                ab=args.ab,
                deltas_pct=args.deltas or (1.0, 2.0, 5.0, 10.0),
                samples=samples,
                seed=args.seed,
                threshold_pct=args.threshold_pct,
                noise=noise,
                max_samples=max_samples,
                **({"modes": args.modes} if args.modes else {}),
            ),
            report=print,
        )
    print((count_evaluation.format_counts_table if counted else format_table)(doc), end="")
    print(write_json(args.output, doc, exclusive=True))
    return 0
