#!/usr/bin/env python3
"""Measure the suite-level A/A alert share: how often a run of one commit, compared with the
previous run of the same commit, raises an alert in the comment.

Runs ``benchtrail pipeline --benchmark-presets PRESETS`` ``--runs`` times into one fresh store, on
the commit checked out (run it in a clean clone). Run k > 1 takes run k-1 as its baseline (an
earlier run of the same commit), so each of its rows is an A/A comparison; the pipeline re-checks
suspected regressions in paired A/B runs, as CI does. A run *alerts* when its comment has a
regression that the gate would fail on (confirmed, or unconfirmed when no re-check ran); rows
cleared by the re-check and improvements are counted too. Prints a table per run and the share of
alerting runs with its 95% Clopper–Pearson interval.

Usage: python build_tools/benchmarks/measure_suite_aa.py [--runs 4] [--presets x86_64] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scipy.stats import binomtest


def run_pipeline(presets: str, store: Path) -> tuple[float, Path]:
    """One main job; returns (wall seconds, run directory)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; from benchtrail.cli import main; sys.exit(main())",
                           "pipeline", "--benchmark-presets", presets, "--store", str(store)],
                          capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode not in (0, 2):
        sys.exit(f"pipeline failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, Path(proc.stdout.strip().splitlines()[-1]).parents[1]


def summarize(run_dir: Path) -> dict:
    """Counts of one run's comparison: rows, alerts (the gate's regressions), cleared, improved, inconclusive
    (``noisy`` in comparisons before version 8), unknown."""
    rows = json.loads((run_dir / "comparison.json").read_text())["rows"]
    execution = [r for r in rows if r["kind"] == "execution"]
    return {
        "rows": len(rows),
        # stored-baseline suspects: what the comparison flagged before the paired re-check looked at it
        "suspects": sum(r.get("ab") is not None or r.get("recheck") == "not-reached"
                        or r["verdict"] in ("regressed", "improved") for r in execution),
        "alerts": [r["name"] for r in rows if r["verdict"] == "regressed" and r["mark"] != "accepted"],
        "confirmed": sum(r["mark"] == "confirmed" for r in rows),
        "cleared": sum(r.get("ab") is not None and r["verdict"] == "similar" for r in rows),
        "improved": sum(r["verdict"] == "improved" for r in rows),
        "inconclusive": sum(r["verdict"] in ("inconclusive", "noisy") for r in execution),
        "unknown": sum(r.get("outcome") == "UNKNOWN" for r in execution),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=4, help="pipeline runs (>= 2); runs - 1 A/A comparisons")
    parser.add_argument("--presets", default="x86_64")
    parser.add_argument("--store", type=Path, help="store folder (default: a temporary one)")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error(f"--runs must be at least 2, got {args.runs}")
    with tempfile.TemporaryDirectory(prefix="benchtrail-aa-") as tmp:
        store = args.store or Path(tmp, "store")
        print("| run | wall (min) | rows | stored-baseline suspects | alerts | confirmed | cleared by "
              "re-check | improved | inconclusive | UNKNOWN |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        alerting = 0
        for k in range(1, args.runs + 1):
            wall, run_dir = run_pipeline(args.presets, store)
            if k == 1:
                print(f"| 1 (baseline) | {wall / 60:.1f} | | | | | | | | |", flush=True)
                continue
            s = summarize(run_dir)
            alerting += bool(s["alerts"])
            print(f"| {k} | {wall / 60:.1f} | {s['rows']} | {s['suspects']} | {len(s['alerts'])} | "
                  f"{s['confirmed']} | {s['cleared']} | "
                  f"{s['improved']} | {s['inconclusive']} | {s['unknown']} |", flush=True)
            for name in s["alerts"]:
                print(f"|   | alert: `{name}` | | | | | | | | |", flush=True)
        n = args.runs - 1
        ci = binomtest(alerting, n).proportion_ci(confidence_level=0.95, method="exact")
        print(f"\nA/A runs of {args.presets} that raise an alert: {alerting} of {n} "
              f"({100 * alerting / n:.0f}%, 95% Clopper–Pearson interval "
              f"{100 * ci.low:.0f}–{100 * ci.high:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
