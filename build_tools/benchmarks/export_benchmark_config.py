#!/usr/bin/env python3
"""Seed-compatible export: ``export_benchmark_config.py execution --benchmark_preset=x86_64,cuda``.

A thin wrapper over ``benchtrail export``. Without ``--output`` it prints the export on stdout, an
execution export in the seed's shape (``benchtrail export execution --output - --format seed``:
``{<device>: {host_environment, architecture, run_configs}}``), which the seed's jq filter reads::

    build_tools/benchmarks/export_benchmark_config.py execution --benchmark_preset=x86_64,cuda \
      | jq 'flatten | map(.run_configs) | { root_obj:(map(.root_obj) | flatten), keyed_obj_map:(map(.keyed_obj_map) | add) }' \
      > run_configs.json

With ``--output F`` it writes the file ``benchtrail export`` writes (``{schema_version, devices}``,
sharded by ``--shard_count``), which ``benchtrail run`` and ``matrix.jq`` read.
"""

from __future__ import annotations

import sys
from pathlib import Path

# this checkout's benchtrail, installed or not
if (Path(__file__).resolve().parents[1] / "benchtrail").is_dir():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchtrail.cli import main as benchtrail_main
from benchtrail.cli.app import ExitOneArgumentParser as ArgumentParser


def main(argv: list[str] | None = None) -> int:
    # exits 1 on bad flags, like benchtrail
    parser = ArgumentParser(prog="export_benchmark_config.py", description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=("execution", "compilation"))
    parser.add_argument("--benchmark_preset", required=True, help="comma-separated presets")
    parser.add_argument("--shard_count", default="1", help="shards per device")
    parser.add_argument("--output", default=None,
                        help="output file, in benchtrail's export format (default: stdout, in the seed's "
                        "shape)")
    args = parser.parse_args(argv)
    forwarded = ["export", args.kind, "--benchmark-presets", args.benchmark_preset]
    if args.output:
        return benchtrail_main([*forwarded, "--shard-count", args.shard_count, "--output", args.output])
    if args.shard_count != "1":
        parser.error("--shard_count needs --output: stdout gets each device's run configs unsharded "
                     "(the seed's shape)")
    seed = ["--format", "seed"] if args.kind == "execution" else []
    return benchtrail_main([*forwarded, "--output", "-", *seed])


if __name__ == "__main__":
    sys.exit(main())
