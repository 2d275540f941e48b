"""``benchtrail upload`` and ``fetch``: move a run directory to and from a store. Each prints its main output
last: the run's store URL, the local run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchtrail.cli.flag_values import deadline_seconds, run_id, store_attempt
from benchtrail.cli.options import DEFAULT_STORE, add_command, require_store
from benchtrail.errors import EXIT_OK

#: Help of ``--store`` (upload and fetch name the remote kind first).
RUN_STORE_HELP = (
    "store: gs://BUCKET[/PREFIX], file://PATH or a folder (default: $BENCHTRAIL_STORE, else "
    f"[tool.benchtrail] store, else {DEFAULT_STORE})"
)


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=RUN_STORE_HELP)
    p.add_argument("--run-id", type=run_id, required=True, help="run id (GITHUB_RUN_ID in Actions)")
    p.add_argument(
        "--attempt", type=store_attempt, required=True, help="attempt number (GITHUB_RUN_ATTEMPT in Actions)"
    )
    p.add_argument(
        "--pattern",
        action="append",
        dest="patterns",
        metavar="GLOB",
        help="only files matching GLOB, relative to the run directory "
        "(repeatable; '*' stays in one folder, '**' spans folders; e.g. 'results/*.json', "
        "'modules/<name>/**'; default: all)",
    )
    p.add_argument(
        "--deadline",
        type=deadline_seconds,
        default=600.0,
        metavar="SECONDS",
        help="give up retrying transient GCS errors after this long (default 600; "
        "BENCHTRAIL_STORE_DEADLINE_S, when set, caps it)",
    )


def add_upload_parser(subparsers: Any) -> None:
    """Declare ``upload``."""
    p = add_command(subparsers, "upload", cmd_upload)
    p.add_argument(
        "--run-dir", type=Path, required=True, help="local folder whose files become the run's files"
    )
    _run_arguments(p)
    p.add_argument(
        "--write-pointer",
        action="store_true",
        help="after the upload, write the commit pointer that makes this run a baseline candidate "
        "(commit, devices and torch version from the run's results files)",
    )


def add_fetch_parser(subparsers: Any) -> None:
    """Declare ``fetch``."""
    p = add_command(subparsers, "fetch", cmd_fetch)
    _run_arguments(p)
    p.add_argument("--dest", type=Path, required=True, help="local folder that receives the run's files")


def _opened(args: argparse.Namespace, command: str) -> tuple[Any, tuple[str, ...]]:
    """The store of ``upload`` or ``fetch``, opened, and the ``--pattern`` globs (default: every file)."""
    from benchtrail.store import ALL_FILES, open_store

    return open_store(require_store(args.store, f"benchtrail {command}")), tuple(args.patterns or ALL_FILES)


def cmd_upload(args: argparse.Namespace) -> int:
    """Print the count of files stored and the run's total, then the run's store URL."""
    from benchtrail.store.pointer import check_own_pointer, pointer_info

    store, patterns = _opened(args, "upload")
    info = pointer_info(args.run_dir) if args.write_pointer else None  # bad results fail before the upload
    run = args.run_id, args.attempt
    count = store.upload_run(args.run_dir, *run, deadline_s=args.deadline, patterns=patterns)
    total = len(store.run_files(*run, deadline_s=args.deadline))
    print(
        f"{count} file(s) of {args.run_dir} stored in run {args.run_id}/{args.attempt}, which holds {total}"
    )
    if info is not None:
        commit = info.pop("commit")
        url = store.write_pointer(commit, *run, info)
        print(f"pointer {url}")
        check_own_pointer(store, commit, *run, info, url)
    print(store.run_url(*run))
    return EXIT_OK


def cmd_fetch(args: argparse.Namespace) -> int:
    """Print the local run directory last."""
    from benchtrail.store.pointer import names_run

    store, patterns = _opened(args, "fetch")
    dest = store.fetch_run(args.run_id, args.attempt, args.dest, patterns, deadline_s=args.deadline)
    if not names_run(store, dest, args.run_id, args.attempt):
        print(
            f"benchtrail: warning: run {args.run_id}/{args.attempt} is incomplete: no "
            "commit pointer names it (its writer was interrupted or failed before it stored it in full); "
            "it is never read as a baseline",
            file=sys.stderr,
        )
    print(dest)
    return EXIT_OK
