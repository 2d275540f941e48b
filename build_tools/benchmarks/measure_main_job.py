#!/usr/bin/env python3
"""Measure the main job: wall time with a cold and a warm Inductor cache, and the A/A verdicts.

Runs ``benchtrail pipeline`` twice into one fresh store: first with an empty Inductor cache
(``TORCHINDUCTOR_CACHE_DIR`` pointing at a new folder), then again with that cache warm. The
second run compares with the first on the same commit: an A/A comparison, so every
``regressed`` or ``improved`` row is a false alarm. Prints a table.

Usage: python build_tools/benchmarks/measure_main_job.py [--presets x86_64,comp-stats]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_pipeline(presets: str, store: Path, cache: Path) -> tuple[float, Path]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "benchtrail.cli.app", "pipeline", "--benchmark-presets", presets,
                           "--store", str(store)], env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode not in (0, 2):
        sys.exit(f"pipeline failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed, Path(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="x86_64,comp-stats")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchtrail-measure-") as tmp:
        store, cache = Path(tmp, "store"), Path(tmp, "inductor-cache")
        rows = []
        for label in ("cold Inductor cache", "warm Inductor cache (A/A vs the first run)"):
            elapsed, comment_md = run_pipeline(args.presets, store, cache)
            counts = json.loads((comment_md.parents[1] / "comparison.json").read_text())["counts"]
            rows.append((label, elapsed, counts))
    print(f"main job, presets {args.presets}, {os.cpu_count()} CPUs")
    print("| run | wall time | regressed | improved | similar | new |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, elapsed, c in rows:
        print(f"| {label} | {elapsed / 60:.1f} min | {c['regressed']} | {c['improved']} | {c['similar']} | {c['new']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
