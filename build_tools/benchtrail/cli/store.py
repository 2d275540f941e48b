"""``benchtrail upload`` and ``benchtrail fetch``: move a run directory to and from a store.

``cli.build_parser`` declares them with ``add_upload_parser(sub)`` and ``add_fetch_parser(sub)``.
Both print the path of their main output last: the run's store URL for ``upload``, the local run
directory for ``fetch``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError
from benchtrail.store import open_store
from benchtrail.store.base import ALL_FILES, check_id

STORE_HELP = "store: gs://BUCKET[/PREFIX], file://PATH or a folder"


def _run_id(text: str) -> str:
    try:
        return check_id(text, "run id")
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _attempt(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected an attempt number (a whole number from 1), got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return value


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help=STORE_HELP)
    p.add_argument("--run-id", type=_run_id, required=True, help="run id (GITHUB_RUN_ID in Actions)")
    p.add_argument("--attempt", type=_attempt, required=True, help="attempt number (GITHUB_RUN_ATTEMPT in Actions)")
    p.add_argument("--pattern", action="append", dest="patterns", metavar="GLOB",
                   help="only files matching GLOB, relative to the run directory (repeatable; '*' stays in one "
                        "folder, '**' spans folders; e.g. 'results/*.json', 'modules/<name>/**'; default: all)")
    p.add_argument("--deadline", type=_seconds, default=600.0, metavar="SECONDS",
                   help="give up retrying transient GCS errors after this long (default 600; "
                        "BENCHTRAIL_STORE_DEADLINE_S, when set, caps it)")


def add_upload_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Declare ``benchtrail upload`` on ``subparsers`` (from ``add_subparsers``); it calls ``cmd_upload``."""
    p = subparsers.add_parser("upload", help="upload a run directory into a store (create-only, never overwrites)")
    p.add_argument("--run-dir", type=Path, required=True, help="local folder whose files become the run's files")
    _run_arguments(p)
    p.add_argument("--write-pointer", action="store_true",
                   help="after the upload, write the commit pointer that makes this run a baseline candidate "
                        "(commit, devices and torch version from the run's results files)")
    p.set_defaults(func=cmd_upload)
    return p


def add_fetch_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Declare ``benchtrail fetch`` on ``subparsers``; it calls ``cmd_fetch``."""
    p = subparsers.add_parser("fetch", help="download a run's files (or some of them) from a store")
    _run_arguments(p)
    p.add_argument("--dest", type=Path, required=True, help="local folder that receives the run's files")
    p.set_defaults(func=cmd_fetch)
    return p


def pointer_info(run_dir: Path) -> dict[str, Any]:
    """The commit pointer's fields for a run directory, from its ``results/*.json``: commit, dirty,
    presets, devices, torch version, ``baseline_keys`` (``benchtrail.results.baseline_key``, one per device
    and key), ``results`` (the results file names, relative to the run directory: all a baseline
    lookup fetches) and the time. What ``benchtrail pipeline`` and ``upload --write-pointer`` write.

    Raises:
        UserError: no results files, or files of several commits or torch versions.
    """
    import datetime

    from benchtrail.results.baseline_key import keys_of_results
    from benchtrail.results.io import load_results_paths

    run_dir = Path(run_dir)
    paths = sorted((run_dir / "results").glob("*.json")) if (run_dir / "results").is_dir() else []
    files = load_results_paths([run_dir])
    commits = {f.commit for f in files}
    versions = {f.environment.get("torch_version") for f in files}
    if len(commits) != 1 or len(versions) != 1:
        raise UserError(f"{run_dir}: a pointer needs results of one commit and one torch version; found commits "
                        f"{sorted(commits)} and torch versions {sorted(map(str, versions))}")
    presets = sorted({p for f in files for p in f.run.get("presets", [])})
    keys = sorted(k for ks in keys_of_results(files).values() for k in ks)
    return {"commit": commits.pop(), "dirty": any(f.dirty for f in files), "presets": presets,
            "devices": sorted({b.device_name for f in files for b in f.benchmarks}),
            "torch_version": versions.pop(), "baseline_keys": [k.to_dict() for k in keys],
            "results": [p.relative_to(run_dir).as_posix() for p in paths],
            "created": datetime.datetime.now(datetime.UTC).isoformat()}


def cmd_upload(args: argparse.Namespace) -> int:
    """``benchtrail upload``: prints the count, then the run's store URL. Exit 0, or UserError."""
    store = open_store(args.store)
    patterns = tuple(args.patterns or ALL_FILES)
    info = pointer_info(args.run_dir) if args.write_pointer else None  # bad results fail before the upload
    count = store.upload_run(args.run_dir, args.run_id, args.attempt, deadline_s=args.deadline, patterns=patterns)
    print(f"{count} file(s) of {args.run_dir} stored in run {args.run_id}/{args.attempt}")
    if info is not None:
        commit = info.pop("commit")
        print(f"pointer {store.write_pointer(commit, args.run_id, args.attempt, info)}")
    print(store.run_url(args.run_id, args.attempt))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """``benchtrail fetch``: prints the local run directory last. Exit 0, or UserError."""
    store = open_store(args.store)
    patterns = tuple(args.patterns or ALL_FILES)
    print(store.fetch_run(args.run_id, args.attempt, args.dest, patterns, deadline_s=args.deadline))
    return 0
