#!/usr/bin/env python3
"""Measure `benchtrail track`'s change-point detection on simulated series (docs/tracking.md).

Each line of the table is ``--series`` simulated series of ``n`` per-commit medians with run-to-run
noise of 2% (multiplicative: ``100 × (1 + 0.02 ε)``, ε standard normal or Student-t with 3 degrees
of freedom, unscaled: heavier tails and a √3 larger spread), run through :func:`benchtrail.history.track.track` itself on built ``History`` objects, with and
without the bottom-up merge of weak change points (``merge_weak``). Columns:

* ``no change: any change point`` / ``an issue``: the share of flat series where track reports a
  change point / files an issue (a false alarm);
* ``+5% step`` / ``+10% step``: the share of series with a step at the middle commit where track
  files an issue at exactly that commit;
* ``+10% step, 2-run burst``: the same +10% step, with a two-run ×2 burst of load (both runs twice as
  slow) at a random place at least 2 commits from the step: what a shared CI runner does to a history;
* ``x2 step, its first 2 runs x1.5 more``: a doubling whose first two runs a burst of load slows by half
  again (an overshoot: the series steps up and does not come back down to where it was).

Usage: ``python build_tools/benchmarks/measure_track.py [--series 500] [--seed 0]`` (about a minute).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchtrail.compare.rules import load_thresholds
from benchtrail.history.series import CommitRun, History, Point, Series
from benchtrail.history.track import track

THRESHOLDS = load_thresholds()
NOISE = 0.02


def _sha(i: int) -> str:
    return f"{i:040x}"


def _history(medians: np.ndarray) -> History:
    n = len(medians)
    points = tuple(Point(_sha(i), f"run-{i}", 1, float(m), 0.0, float(m), float(m), 30, "ok", float(m),
                         float(m),
                         None) for i, m in enumerate(medians))
    series = Series("s", "s.eager.inference-bs1.c2-standard-16", "execution", "latency", "us",
                    "c2-standard-16",
                    ("x86_64",), "eager", "inference", points)
    commits = tuple(CommitRun(_sha(i), f"run-{i}", 1) for i in range(n))
    return History("main", _sha(n - 1), "sim", commits, (series,))


def _noise(rng: np.random.Generator, n: int, dist: str) -> np.ndarray:
    eps = rng.standard_normal(n) if dist == "normal" else rng.standard_t(3, n)
    return np.maximum(1.0 + NOISE * eps, 0.5)


def _outcome(medians: np.ndarray, at: int | None, merge: bool) -> tuple[bool, bool, bool]:
    """(any change point, any issue, an issue at exactly commit ``at``)."""
    report = track(_history(medians), THRESHOLDS, merge_weak=merge)
    cps = report.change_points
    exact = at is not None and any(cp.issue and cp.head_commit == _sha(at) for cp in cps)
    return bool(cps), any(cp.issue for cp in cps), exact


def measure(n: int, dist: str, series: int, seed: int) -> dict[str, tuple[float, float]]:
    """Shares (merged, PELT alone) for each column, over ``series`` series of ``n`` points."""
    rng = np.random.default_rng(seed)
    counts = {key: np.zeros(2) for key in ("any", "issue", "step5", "step10", "burst", "overshoot")}
    at = n // 2
    for _ in range(series):
        flat = 100.0 * _noise(rng, n, dist)
        ramp = np.where(np.arange(n) >= at, 1.0, 0.0)
        step5 = 100.0 * (1 + 0.05 * ramp) * _noise(rng, n, dist)
        step10 = 100.0 * (1 + 0.10 * ramp) * _noise(rng, n, dist)
        burst = 100.0 * (1 + 0.10 * ramp) * _noise(rng, n, dist)
        where = [i for i in range(n - 1) if i + 1 < at - 1 or i > at + 1]
        b = int(rng.choice(where))
        burst[b:b + 2] *= 2.0
        overshoot = 100.0 * (1 + ramp) * _noise(rng, n, dist)
        overshoot[at:at + 2] *= 1.5
        for k, merge in enumerate((True, False)):
            any_cp, issue, _ = _outcome(flat, None, merge)
            counts["any"][k] += any_cp
            counts["issue"][k] += issue
            counts["step5"][k] += _outcome(step5, at, merge)[2]
            counts["step10"][k] += _outcome(step10, at, merge)[2]
            counts["burst"][k] += _outcome(burst, at, merge)[2]
            counts["overshoot"][k] += _outcome(overshoot, at, merge)[2]
    return {key: (float(v[0]) / series, float(v[1]) / series) for key, v in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=500, help="simulated series per line (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{args.series} series per line, {NOISE:.0%} run-to-run noise, seed {args.seed}; "
          "each cell: with the bottom-up merge (PELT alone)\n")
    print("| series | no change: any change point | no change: an issue | +5% step: issue at its exact "
          "commit "
          "| +10% step: issue at its exact commit | +10% step, 2-run ×2 burst: issue at its exact commit "
          "| ×2 step, its first 2 runs ×1.5 more: issue at its exact commit |")
    print("|---|---|---|---|---|---|---|")
    for dist in ("normal", "Student-t 3"):
        for n in (12, 30):
            shares = measure(n, dist, args.series, args.seed)
            cells = " | ".join(f"{a:.1%} ({b:.1%})" for a, b in (shares[k] for k in
                                                                  ("any", "issue", "step5", "step10", "burst",
                                                                   "overshoot")))
            print(f"| {n} points, {dist} | {cells} |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
