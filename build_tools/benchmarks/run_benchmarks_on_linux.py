#!/usr/bin/env python3
"""Seed-compatible runner: ``run_benchmarks_on_linux.py --run_config F --output F [--shard_index I]``.

A thin wrapper over ``benchtrail run``. Without ``--device_name`` the export must hold exactly one
device, which is then run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from benchtrail.cli import ExitOneArgumentParser as ArgumentParser
from benchtrail.cli import main as benchtrail_main
from benchtrail.errors import UserError
from benchtrail.export import load_execution


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])  # exits 1 on bad flags, like benchtrail
    parser.add_argument("--run_config", required=True, help="execution export (execution.json)")
    parser.add_argument("--output", required=True, help="results file to write")
    parser.add_argument("--shard_index", default=None, help="shard to run (default: all)")
    parser.add_argument("--device_name", default=None, help="device to run (default: the export's only device)")
    parser.add_argument("--verbose", action="store_true", help="log what is run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    device = args.device_name
    if device is None:
        try:
            devices = sorted(load_execution(Path(args.run_config)))
        except UserError as exc:
            print(f"run_benchmarks_on_linux.py: error: {exc}", file=sys.stderr)
            return 1
        if len(devices) != 1:
            print(f"run_benchmarks_on_linux.py: error: {args.run_config} has devices {devices}; "
                  "pass --device_name", file=sys.stderr)
            return 1
        device = devices[0]
    forwarded = ["run", "--run-configs", args.run_config, "--device-name", device, "--output", args.output]
    if args.shard_index is not None:
        forwarded += ["--shard-index", args.shard_index]
    logging.info("benchtrail %s", " ".join(forwarded))
    return benchtrail_main(forwarded)


if __name__ == "__main__":
    sys.exit(main())
