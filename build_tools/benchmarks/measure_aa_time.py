#!/usr/bin/env python3
"""Measure the main job's A/A time, re-check included, of this checkout against an earlier commit.

Checks ``--base-ref`` out in a temporary git worktree, then runs ``benchtrail pipeline --benchmark-presets
PRESETS`` alternately with that commit's code and this checkout's, each into its own fresh store: one
seeding run each, then ``--runs`` measured runs each, every one compared with the previous run of its own
commit (an A/A comparison whose suspects the pipeline re-checks in paired runs). Alternating puts both in the
same spells of the machine. Prints a row per pair (wall seconds, re-check seconds, the verdicts of the
execution rows) and the medians with their ratio.

Usage: python build_tools/benchmarks/measure_aa_time.py --base-ref 4f888d2 [--runs 6] [--presets smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

CLI = "import sys; from benchtrail.cli import main; sys.exit(main())"


def pipeline(checkout: Path, presets: str, store: Path) -> tuple[float, float, str]:
    """One main job with ``checkout``'s code; (wall s, re-check s, execution verdicts with their marks as
    ``2 similar, 1 regressed (unconfirmed)``)."""
    env = {**os.environ, "PYTHONPATH": f"{checkout / 'build_tools'}{os.pathsep}{checkout}"}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", CLI, "pipeline", "--benchmark-presets", presets, "--store",
                           str(store)], cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode not in (0, 2):
        sys.exit(f"pipeline in {checkout} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    run_dir = (checkout / proc.stdout.strip().splitlines()[-1]).parents[1]
    stages = json.loads((run_dir / "timings.json").read_text())["stages_s"]
    rows = json.loads((run_dir / "comparison.json").read_text())["rows"]
    verdicts = Counter(r["verdict"] + (f" ({r['mark']})" if r.get("mark") else "") for r in rows
                       if r["kind"] == "execution")
    return wall, stages.get("recheck", 0.0), ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-ref", required=True, help="the earlier commit (e.g. the one before a change)")
    parser.add_argument("--runs", type=int, default=6, help="measured A/A runs of each (default 6)")
    parser.add_argument("--presets", default="smoke", help="presets of the main job (default smoke)")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="benchtrail-aa-time-") as tmp:
        old = Path(tmp, "base")
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), args.base_ref], cwd=here,
                       check=True)
        try:
            sides = {"base": old, "head": here}
            stores = {name: Path(tmp, f"store-{name}") for name in sides}
            for name, checkout in sides.items():  # the seeding runs: no baseline yet
                pipeline(checkout, args.presets, stores[name])
            print(f"| pair | {args.base_ref} s (re-check) | this checkout s (re-check) | this checkout's "
                  "verdicts |")
            print("|---:|---:|---:|---|")
            walls: dict[str, list[float]] = {"base": [], "head": []}
            for k in range(1, args.runs + 1):
                got = {name: pipeline(checkout, args.presets, stores[name]) for name,
                       checkout in sides.items()}
                for name in sides:
                    walls[name].append(got[name][0])
                (bw, br, _), (hw, hr, verdicts) = got["base"], got["head"]
                print(f"| {k} | {bw:.1f} ({br:.1f}) | {hw:.1f} ({hr:.1f}) | {verdicts} |", flush=True)
            base, head = statistics.median(walls["base"]), statistics.median(walls["head"])
            print(f"| median | {base:.1f} | {head:.1f} | ratio {head / base:.2f} |")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=here, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
