#!/usr/bin/env python3
"""Measure the statistics of the compare stage on many series: bootstrap interval, Mann–Whitney U,
Benjamini–Hochberg, noise, minimum detectable effect and classification.

Synthetic data: ``--series`` series with ``--samples`` samples per side, log-normal with 2% spread
around a median of 100 µs; 1% of the series get a 20% slowdown on head. Times each public step of
``benchtrail.stats.inference`` alone (each validates and groups its input) and the whole pipeline,
``compare_samples`` (validates and groups once), as the best of ``--repeat`` runs. Target: the
pipeline in at most 5 s for 10,000 series × 30 samples per side with 2,000 resamples.

``--vary K`` draws each side's sample count uniformly from ``samples ± K`` instead: the work is
grouped by (n_base, n_head), so many distinct counts mean many small groups (the slow case).

Prints a markdown table (step, series, samples/side, resamples, seconds) and the verdict counts.

Usage: python build_tools/benchmarks/measure_compare_speed.py [--series 10000] [--samples 30]
       [--resamples 2000] [--repeat 3] [--vary 0]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import platform
import sys
import time
from collections.abc import Callable

import numpy as np
import scipy

from benchtrail.stats.inference import (
    benjamini_hochberg,
    bootstrap_ratio_ci,
    classify,
    compare_samples,
    mann_whitney_p,
    minimum_detectable_effect,
    noise,
)

TARGET_S = 5.0


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def make_samples(series: int, samples: int, vary: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    sides = []
    for _ in range(2):
        counts = rng.integers(max(1, samples - vary), samples + vary + 1, size=series)
        sides.append([100.0 * rng.lognormal(0.0, 0.02, size=n) for n in counts])
    for i in np.flatnonzero(rng.random(series) < 0.01):
        sides[1][i] = sides[1][i] * 1.2
    return sides[0], sides[1]


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=positive_int, default=10_000)
    parser.add_argument("--samples", type=positive_int, default=30, help="samples per side")
    parser.add_argument("--resamples", type=positive_int, default=2000)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--vary", type=int, default=0, help="sample counts vary by up to this much per side")
    args = parser.parse_args(argv)

    base, head = make_samples(args.series, args.samples, max(0, args.vary))
    r = args.resamples
    ratio, low, high = bootstrap_ratio_ci(base, head, resamples=r)
    p = mann_whitney_p(base, head)
    q = benjamini_hochberg(p)
    nb, nh = noise(base), noise(head)
    steps = [
        ("bootstrap_ratio_ci", r, lambda: bootstrap_ratio_ci(base, head, resamples=r)),
        ("mann_whitney_p", "-", lambda: mann_whitney_p(base, head)),
        ("benjamini_hochberg", "-", lambda: benjamini_hochberg(p)),
        ("noise (both sides)", "-", lambda: (noise(base), noise(head))),
        ("minimum_detectable_effect", "-", lambda: minimum_detectable_effect(base, head)),
        ("classify", "-", lambda: classify(ratio, low, high, q, nb, nh, 5.0, True)),
        ("compare_samples (whole pipeline)", r,
         lambda: compare_samples(base, head, threshold_pct=5.0, lower_is_better=True, resamples=r)),
    ]
    rows = []
    result = None
    for label, resamples, fn in steps:
        seconds, result = best_of(args.repeat, fn)
        rows.append((label, resamples, seconds))

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}; numpy {np.__version__}, scipy {scipy.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs; best of {args.repeat}")
    print()
    samples = f"{args.samples} ± {args.vary}" if args.vary > 0 else str(args.samples)
    print("| step | series | samples/side | resamples | seconds |")
    print("|---|---:|---:|---:|---:|")
    for label, resamples, seconds in rows:
        print(f"| {label} | {args.series:,} | {samples} | {resamples} | {seconds:.3f} |")
    counts = collections.Counter(zip(result.verdict.tolist(), result.outcome.tolist()))
    print()
    print("verdicts: " + ", ".join(f"{v}/{o} {c}" for (v, o), c in sorted(counts.items())))
    total = rows[-1][2]
    print(f"whole pipeline {total:.2f} s: {'within' if total <= TARGET_S else 'OVER'} the {TARGET_S:.0f} s "
          "target")
    return 0 if total <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
