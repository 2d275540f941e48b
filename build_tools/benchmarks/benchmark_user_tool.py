#!/usr/bin/env python3
"""Seed-compatible user tool: ``benchmark_user_tool.py explain --gcs_url URL --benchmark_id ID``.

A thin wrapper over ``benchtrail explain ID --run URL``; URL is a run directory (gs:// or a folder).
"""

from __future__ import annotations

import sys

from benchtrail.cli import main as benchtrail_main
from benchtrail.cli.app import ExitOneArgumentParser as ArgumentParser


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])  # exits 1 on bad flags, like benchtrail
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("explain", help="describe a benchmark of a run and how to reproduce it")
    p.add_argument("--gcs_url", required=True, help="run directory URL, e.g. gs://bucket/runs/123/1/")
    p.add_argument("--benchmark_id", required=True, help="benchmark id (or a 6+ character prefix, or a name)")
    args = parser.parse_args(argv)
    return benchtrail_main(["explain", args.benchmark_id, "--run", args.gcs_url])


if __name__ == "__main__":
    sys.exit(main())
