"""``benchtrail gate`` and ``dashboard``, run after the comparison; ``gate`` never imports torch."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchtrail.cli.flag_values import attempt, max_commits, path_argument
from benchtrail.cli.options import (
    ACCEPT_HELP,
    STORE_HELP,
    accept_globs,
    add_command,
    add_trust_arguments,
    open_trusted,
    require_store,
)
from benchtrail.errors import EXIT_OK, EXIT_REGRESSION, UserError


def add_ci_parsers(subparsers: Any) -> None:
    """Declare ``gate`` and ``dashboard``."""
    p = add_command(subparsers, "gate", cmd_gate)
    p.add_argument(
        "--comparison",
        type=path_argument,
        required=True,
        metavar="FILE",
        help="comparison.json, after the paired re-check (`benchtrail ab --recheck`)",
    )
    p.add_argument("--accept", action="append", metavar="GLOB", help=ACCEPT_HELP)

    p = add_command(subparsers, "dashboard", cmd_dashboard)
    p.add_argument("--store", help=STORE_HELP + "; holds the earlier runs (only read)")
    p.add_argument(
        "--run-dir",
        type=path_argument,
        required=True,
        metavar="DIR",
        help="the run directory: its results/*.json are the newest point; dashboard/ is written there",
    )
    p.add_argument("--run-id", required=True, metavar="ID", help="the run's id (GITHUB_RUN_ID in CI)")
    p.add_argument("--attempt", type=attempt, required=True, metavar="N", help="the run's attempt (from 1)")
    p.add_argument(
        "--max-commits",
        type=max_commits,
        default=30,
        metavar="N",
        help="draw at most N first-parent commits, this run's included (default 30)",
    )
    add_trust_arguments(p)


def cmd_gate(args: argparse.Namespace) -> int:
    """Print a line per failing row, then the summary; exit 3 when one fails, else 0. Raises UserError for an
    unreadable or malformed comparison file."""
    from benchtrail.compare import gate
    from benchtrail.compare.document import load_comparison

    result = gate.check(load_comparison(args.comparison).rows, accept_globs(args.accept))
    for row in result.failing:
        print(gate.failing_line(row))
    print(gate.summary_line(result))
    return EXIT_OK if result.passed else EXIT_REGRESSION


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Draw the history of ``--run-dir``'s commit (git at ``.``, the store), this run newest, into its
    ``dashboard/``; print index.html's path. With no history to draw (no repository, an unknown commit, no
    usable store) say why on stderr and exit 0: the dashboard never fails a run. Raises UserError for a bad
    ``--run-id``, or a ``--run-dir`` without results, with several commits' results or holding one already."""
    from rich.markup import escape

    from benchtrail.git import is_repository, resolve_commit
    from benchtrail.progress import console
    from benchtrail.results.io import load_results_paths
    from benchtrail.store.base import check_id

    check_id(args.run_id, "--run-id")
    out = args.run_dir / "dashboard"
    if out.exists():
        raise UserError(
            f"--run-dir {args.run_dir} holds {out.name}/ already; benchtrail never overwrites "
            "(draw it into a new run directory)"
        )
    commits = sorted({f.commit for f in load_results_paths([args.run_dir])})
    if len(commits) != 1:
        raise UserError(
            f"--run-dir {args.run_dir}: its results files come from {len(commits)} commits "
            f"({', '.join(c[:12] for c in commits)}); a run holds one commit's results"
        )
    here = Path(".").resolve()
    try:
        if not is_repository(here):
            raise UserError(
                f"{here} is not a git repository; run `benchtrail dashboard` in the repository's working tree"
            )
        if resolve_commit(here, commits[0]) is None:
            raise UserError(
                f"the run's commit {commits[0][:12]} is not in the git repository at {here} (a "
                "shallow clone without it, or another repository)"
            )
        store, trust = open_trusted(args, require_store(args.store, "benchtrail dashboard"))
    except UserError as exc:  # no history to draw: say why, and never fail the run for it
        console.print(f"[yellow]no dashboard[/]: {escape(str(exc))}")
        return EXIT_OK
    from benchtrail.pipeline.report_stages import dashboard_stage

    index = dashboard_stage(
        store, Path("."), commits[0], args.run_id, args.attempt, args.run_dir, args.max_commits, trust
    )
    if index is not None:
        print(index)
    return EXIT_OK
