"""``benchtrail compare-backends`` and ``convert``: one run's results for other tools (docs/interop.md). Both
read ``--results`` of ONE run and print their main output's path last: the PNG, the converted file."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from benchtrail.cli.flag_values import check_output_dir, path_argument
from benchtrail.cli.options import add_command
from benchtrail.errors import EXIT_OK
from benchtrail.interop.convert import FORMATS, KINDS

#: ``--results`` of both commands.
RESULTS = {
    "type": path_argument,
    "nargs": "+",
    "action": "extend",
    "required": True,
    "metavar": "RUN_DIR|RESULTS_FILE",
    "help": "a run directory (its results/*.json are read) or results files, "
    "all of one run (repeatable; several paths after one flag work too)",
}


def add_interop_parsers(subparsers: Any) -> None:
    """Declare ``compare-backends`` and ``convert``."""
    p = add_command(subparsers, "compare-backends", cmd_compare_backends)
    p.add_argument("--results", **RESULTS)
    p.add_argument(
        "--output-dir",
        type=path_argument,
        default=Path("."),
        help="folder for backends-<run id>-<attempt>.png (default: the current folder); "
        "an existing PNG is never overwritten",
    )

    p = add_command(subparsers, "convert", cmd_convert)
    p.add_argument(
        "--to",
        required=True,
        metavar="FORMAT",
        help=f"one of {', '.join(FORMATS)}: gab = github-action-benchmark tool "
        f"'customSmallerIsBetter', bmf = Bencher Metric Format for "
        f"`bencher run --adapter json`",
    )
    p.add_argument("--results", **RESULTS)
    p.add_argument(
        "--kind",
        default="all",
        metavar="KIND",
        help=f"which records: one of {', '.join(KINDS)} (default all: execution latency and "
        f"compilation metrics)",
    )
    p.add_argument(
        "--output", type=path_argument, required=True, help="JSON file to write; never overwritten"
    )


def cmd_compare_backends(args: argparse.Namespace) -> int:
    """Print the table, then the PNG's path. Raises UserError for no results, results of several runs, no
    execution records, or an existing PNG."""
    from benchtrail.interop.backends import compare_backends, load_one_run, render_table, speedups_figure
    from benchtrail.jsonio import check_new, write_png

    check_output_dir(args.output_dir)
    results, run = load_one_run(args.results)
    rows = compare_backends(results)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"backends-{run.run_id}-{run.attempt}")
    png = args.output_dir / f"{stem}.png"
    check_new(png)
    print(render_table(rows, run), end="")
    print(write_png(png, speedups_figure(rows, run)))
    return EXIT_OK


def cmd_convert(args: argparse.Namespace) -> int:
    """Write the document, list left-out records on stderr, print the path last. Raises UserError for an
    unknown ``--to`` or ``--kind``, bad or missing results, several runs, nothing ok to convert, or an
    existing ``--output``."""
    from benchtrail.interop.backends import load_one_run
    from benchtrail.interop.convert import check_options, convert, dumps
    from benchtrail.jsonio import check_new, write_text_atomic

    check_options(args.to, args.kind)
    check_new(args.output)
    results, _ = load_one_run(args.results)
    conversion = convert(results, args.to, args.kind)
    if conversion.left_out:
        print(f"left out {len(conversion.left_out)} record(s) that are not ok:", file=sys.stderr)
        for b in conversion.left_out:
            print(f"  {b.name} ({b.status}{': ' + b.reason if b.reason else ''})", file=sys.stderr)
    path = write_text_atomic(args.output, dumps(conversion.document), exclusive=True)
    print(f"{len(conversion.included)} series written as {args.to}")
    print(path)
    return EXIT_OK
