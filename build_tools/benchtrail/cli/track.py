"""``benchtrail track`` and ``bisect-range``: change points of the first-parent history from a store;
``--post`` files issues for new regressions, ``--report`` writes the JSON report."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.cli.flag_values import repo_name, whole_number
from benchtrail.cli.history import add_walk_arguments, collect
from benchtrail.cli.options import (
    add_command,
    add_trust_arguments,
    api_url,
    from_env,
    github_token,
    require_store,
)
from benchtrail.github.post import DEFAULT_API_URL
from benchtrail.history.track import DEFAULT_NEW_WITHIN, bisect_range, format_table, report_to_dict, track


def add_track_parsers(subparsers: Any) -> None:
    """Declare ``track`` and ``bisect-range``."""
    p = add_command(subparsers, "track", cmd_track)
    add_walk_arguments(p)
    p.add_argument("--thresholds", type=Path, help="thresholds YAML (default: the shipped table)")
    p.add_argument(
        "--new-within",
        type=whole_number(1),
        default=DEFAULT_NEW_WITHIN,
        metavar="N",
        help=f"a change is new when its head is among the series' last N points "
        f"(default {DEFAULT_NEW_WITHIN})",
    )
    p.add_argument("--report", type=Path, help="write the JSON report here (never overwritten)")
    p.add_argument("--post", action="store_true", help="open or update one GitHub issue per new regression")
    p.add_argument(
        "--repo-name",
        type=repo_name,
        metavar="OWNER/NAME",
        help="with --post: the GitHub repository (default: $GITHUB_REPOSITORY)",
    )
    p.add_argument(
        "--api-url", help=f"with --post: GitHub API URL (default: $GITHUB_API_URL or {DEFAULT_API_URL})"
    )
    add_trust_arguments(p)

    p = add_command(subparsers, "bisect-range", cmd_bisect_range)
    p.add_argument("a", metavar="A", help="the last good build: a commit, branch or tag")
    p.add_argument("b", metavar="B", help="the first bad build (a descendant of A)")
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository (default .)")


def cmd_track(args: argparse.Namespace) -> int:
    """Print the change points; post issues with ``--post``; write ``--report``."""
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.github.track_issues import post_issues

    store = require_store(args.store, "benchtrail track")
    if args.report:
        jsonio.check_new(args.report)
    token = repository = None
    if args.post:
        repository = from_env(args.repo_name, "--repo-name", "GITHUB_REPOSITORY", repo_name)
        token = github_token("issues")
    thresholds = load_thresholds(args.thresholds)
    _, history = collect(args, store, repository)
    report = track(history, thresholds, new_within=args.new_within)
    print(format_table(report), end="")
    actions = []
    if args.post:
        for action in post_issues(report, repo=repository, token=token, base_url=api_url(args.api_url)):
            print(action.message)
            actions.append(asdict(action))
    if args.report:
        print(jsonio.write_json(args.report, report_to_dict(report, actions), exclusive=True))
    return 0


def cmd_bisect_range(args: argparse.Namespace) -> int:
    """Print one ``<sha> <subject>`` line per commit after A up to B, oldest first."""
    commits = bisect_range(args.repo, args.a, args.b)
    for sha, subject in commits:
        print(f"{sha} {subject}".rstrip())
    print(f"{len(commits)} first-parent commit(s) after {args.a} up to {args.b}", file=sys.stderr)
    return 0
