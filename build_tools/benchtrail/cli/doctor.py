"""``benchtrail doctor``: the command over the runner's machine checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.cli.options import add_command
from benchtrail.errors import EXIT_CHECK_FAILED, EXIT_OK
from benchtrail.runner.doctor import SCHEMA_VERSION, format_report, run_checks


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print the checks, write ``--json`` (never overwritten); exit 4 when one failed, else 0. Raises
    UserError when ``--json`` exists."""
    if args.json:
        jsonio.check_new(args.json)
    report = run_checks()
    print(format_report(report), end="")
    if args.json:
        print(jsonio.write_json(args.json, {"schema_version": SCHEMA_VERSION, **report}, exclusive=True))
    return EXIT_CHECK_FAILED if report["failed"] else EXIT_OK


def add_doctor_parser(subparsers: Any) -> None:
    """Declare ``doctor``."""
    p = add_command(subparsers, "doctor", cmd_doctor)
    p.add_argument(
        "--json", type=Path, metavar="FILE", help="also write the checks as JSON (never overwritten)"
    )
