#!/usr/bin/env python3
"""Seed-compatible export: ``export_benchmark_config.py execution --benchmark_preset=x86_64,cuda``.

A thin wrapper over ``benchtrail export``; it writes the same JSON.
"""

from __future__ import annotations

import argparse
import sys

from benchtrail.cli import ExitOneArgumentParser as ArgumentParser
from benchtrail.cli import main as benchtrail_main


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])  # exits 1 on bad flags, like benchtrail
    parser.add_argument("kind", choices=("execution", "compilation"))
    parser.add_argument("--benchmark_preset", required=True, help="comma-separated presets")
    parser.add_argument("--shard_count", default="1", help="shards per device")
    parser.add_argument("--output", default=None, help="output file (default ./<kind>.json)")
    args = parser.parse_args(argv)
    forwarded = ["export", args.kind, "--benchmark-presets", args.benchmark_preset, "--shard-count", args.shard_count]
    if args.output:
        forwarded += ["--output", args.output]
    return benchtrail_main(forwarded)


if __name__ == "__main__":
    sys.exit(main())
