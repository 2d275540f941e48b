#!/usr/bin/env python3
"""Measure how long ``benchtrail --help`` and ``benchtrail compare --help`` take, each in fresh processes.

Runs each command ``--runs`` times (default 10) as the console script does (``python -c "from
benchtrail.cli import main; ..."`` with this interpreter, so it works without the script on PATH),
one after the other, and prints a markdown table: command, median, min and max wall-clock seconds
per process (interpreter start-up included), plus the target. Issue 17's target: under 1 s each.

Usage: python build_tools/benchmarks/measure_cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

TARGET_S = 1.0
COMMANDS = (["--help"], ["compare", "--help"])
#: What the ``benchtrail`` console script runs.
SCRIPT = "import sys; from benchtrail.cli import main; sys.argv[0] = 'benchtrail'; sys.exit(main())"


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def time_once(argv: list[str]) -> float:
    """Wall-clock seconds of one fresh ``benchtrail <argv>`` process.

    Raises:
        RuntimeError: the command exited non-zero (its stderr tail in the message).
    """
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", SCRIPT, *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE,
                          text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"benchtrail {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=10,
                        help="fresh processes per command (default 10)")
    args = parser.parse_args(argv)
    time_once(["--help"])  # warm the file-system cache and the bytecode once, not measured
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{args.runs} fresh processes per command\n")
    print("| command | median (s) | min (s) | max (s) | under 1 s |")
    print("|---|---:|---:|---:|---|")
    worst = 0.0
    for command in COMMANDS:
        times = [time_once(command) for _ in range(args.runs)]
        median = statistics.median(times)
        worst = max(worst, median)
        print(f"| `benchtrail {' '.join(command)}` | {median:.3f} | {min(times):.3f} | {max(times):.3f} | "
              f"{'yes' if median < TARGET_S else 'no'} |")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
