#!/usr/bin/env python3
"""Size of a local store after N runs of a preset (issue 43: 40 smoke runs in at most 30 MB).

Runs ``benchtrail pipeline --benchmark-presets <presets> --store <store>`` N times into a fresh store, in
the current git repository, then prints Markdown tables: the store's size after 1, 10, 20, … runs (bytes of
its files and disk usage, ``du``; per run: without the shared ``assets/``), what each part of a run directory
takes summed over the runs, and the largest files. MB = 10^6 bytes. ``--runs 0 --keep DIR`` only measures DIR.

Usage: python build_tools/benchmarks/measure_store_size.py [--runs 40] [--presets smoke] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1e6


def du(folder: Path) -> int:
    """Disk usage of ``folder`` in bytes, as ``du`` counts it; 0 when it does not exist."""
    return int(subprocess.run(["du", "-s", "--block-size=1", str(folder)], capture_output=True, text=True,
                              check=True).stdout.split()[0]) if folder.exists() else 0


def sizes(store: Path) -> tuple[int, int, int, int]:
    """(runs, bytes of the files, disk usage, disk usage without ``assets/``) of ``store``."""
    files = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    total = du(store)
    return len(list(store.glob("runs/*/*"))), files, total, total - du(store / "assets")


def part(name: str) -> str:
    """The part of the store a file belongs to: ``assets``, ``commits``, or a run's top folder or file."""
    parts = name.split("/")
    return parts[0] if parts[0] != "runs" else "/".join(parts[3:5]) if parts[3] == "modules" else parts[3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--presets", default="smoke")
    parser.add_argument("--keep", type=Path, help="the store's folder (default: a temporary one, removed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchtrail-store-size-") as tmp:
        store = args.keep or Path(tmp) / "store"
        benchtrail = Path(sys.executable).with_name("benchtrail")
        rows, seconds = [], []
        for i in range(1, args.runs + 1):
            start = time.monotonic()
            subprocess.run([str(benchtrail), "pipeline", "--benchmark-presets", args.presets, "--store",
                            str(store)],
                           check=True, stdout=subprocess.DEVNULL)
            seconds.append(time.monotonic() - start)
            print(f"run {i}/{args.runs}: {seconds[-1]:.0f} s", file=sys.stderr, flush=True)
            if i in (1, args.runs) or i % 10 == 0:
                rows.append(sizes(store))
        if not rows:
            rows.append(sizes(store))
        print(f"`python build_tools/benchmarks/measure_store_size.py --runs {args.runs} --presets "
              f"{args.presets}`"
              f" — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"{sum(seconds) / max(1, len(seconds)):.0f} s a run\n")
        print("| runs | store MB (files) | store MB (du) | MB per run (du, no assets) "
              "|\n|---:|---:|---:|---:|")
        for runs, files, total, shared_out in rows:
            print(f"| {runs} | {files / MB:.1f} | {total / MB:.1f} | {shared_out / MB / runs:.2f} |")
        files = {p.relative_to(store).as_posix(): p.stat().st_size for p in store.rglob("*") if p.is_file()}
        parts = collections.Counter()
        for name, size in files.items():
            parts[part(name)] += size
        print("\n| part (all runs) | MB | share |\n|---|---:|---:|")
        for name, size in parts.most_common():
            print(f"| `{name}` | {size / MB:.2f} | {size / sum(files.values()):.0%} |")
        print("\n| largest files | MB |\n|---|---:|")
        for name, size in sorted(files.items(), key=lambda f: -f[1])[:5]:
            print(f"| `{name}` | {size / MB:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
