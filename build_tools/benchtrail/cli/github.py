"""``benchtrail configure``, ``post``, ``gate-status`` and ``runner-labels``: presets from a GitHub event,
comment.json on the PR, the ``benchtrail/gate`` commit status, the runners' ``runs-on`` labels. None imports
torch."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchtrail.cli.flag_values import commit_sha, positive_seconds, pr_number, repo_name, run_key
from benchtrail.cli.options import (
    add_command,
    api_url,
    from_env,
    github_token,
    project,
    project_presets,
    suite,
)
from benchtrail.errors import EXIT_OK, UserError
from benchtrail.github.configure import configure, read_event
from benchtrail.github.post import (
    DEFAULT_API_URL,
    DEFAULT_COMMENT_AUTHOR,
    RETRY_BUDGET_S,
    load_comment,
    make_client,
    post_comment,
)


def add_configure_parser(subparsers: Any) -> None:
    """Declare ``configure``."""
    p = add_command(subparsers, "configure", cmd_configure)
    p.add_argument(
        "--error-comment",
        type=Path,
        metavar="DIR",
        help="also append selection-error=true|false to $GITHUB_OUTPUT; when a PR's selection is "
        "invalid (an unknown preset, a bad benchmarks-accept item, malformed PR_LABELS) "
        "write DIR/comment.json and DIR/comment.md, a PR comment naming the error for "
        "`benchtrail post`, then fail as without it (exit 1)",
    )


def cmd_configure(args: argparse.Namespace) -> int:
    """Append the selection to ``$GITHUB_OUTPUT`` and the job summary. Raises UserError for an invalid
    selection, event or project."""
    loaded, settings = suite(), project()
    meta = dict(loaded.meta_presets)
    if "default" not in meta and settings.presets:  # what a push to the default branch runs
        meta["default"] = project_presets(settings)
    configure(os.environ, loaded.presets, meta, args.error_comment)
    return EXIT_OK


def _author(args: argparse.Namespace) -> str:
    return args.comment_author or os.environ.get("BENCHTRAIL_COMMENT_AUTHOR") or DEFAULT_COMMENT_AUTHOR


def add_post_parser(subparsers: Any) -> None:
    """Declare ``post``."""
    p = add_command(subparsers, "post", cmd_post)
    p.add_argument("--comment", type=Path, required=True, help="comment.json written by `benchtrail comment`")
    p.add_argument("--repo", type=repo_name, help="OWNER/NAME (default: $GITHUB_REPOSITORY)")
    p.add_argument("--pr", type=pr_number, help="PR number (default: $BENCHTRAIL_PR_NUMBER)")
    p.add_argument(
        "--head-sha",
        type=commit_sha,
        help="head commit the run measured; nothing is posted if the PR moved on "
        "(default: $BENCHTRAIL_HEAD_SHA)",
    )
    p.add_argument(
        "--api-url",
        help=f"GitHub API URL, for GitHub Enterprise (default: $GITHUB_API_URL or {DEFAULT_API_URL})",
    )
    p.add_argument(
        "--comment-author",
        help="login whose comments are ours (default: $BENCHTRAIL_COMMENT_AUTHOR "
        f"or {DEFAULT_COMMENT_AUTHOR}); a token that comments as another "
        "login (a GitHub App's) warns and names it",
    )
    p.add_argument(
        "--retry-budget",
        type=positive_seconds,
        default=RETRY_BUDGET_S,
        metavar="SECONDS",
        help="seconds that all retries after rate limits and server errors may take together, at "
        "most the job's timeout; once spent the comment goes to the job summary "
        f"(default {RETRY_BUDGET_S:g})",
    )
    p.add_argument("--dry-run", action="store_true", help="read and decide, but write nothing")


def cmd_post(args: argparse.Namespace) -> int:
    """Exit 0 when posted, skipped or written to the job summary instead. Raises UserError for a bad comment
    file, a missing repository, PR, head SHA or token, or a failed post."""
    result = post_comment(
        load_comment(args.comment),
        repo=from_env(args.repo, "--repo", "GITHUB_REPOSITORY", repo_name),
        pr_number=from_env(args.pr, "--pr", "BENCHTRAIL_PR_NUMBER", pr_number),
        run_head_sha=from_env(args.head_sha, "--head-sha", "BENCHTRAIL_HEAD_SHA", commit_sha),
        token=github_token(),
        base_url=api_url(args.api_url),
        dry_run=args.dry_run,
        author=_author(args),
        retry_budget_s=args.retry_budget,
    )
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    for warning in result.warnings + ((result.message,) if result.action == "fallback-summary" else ()):
        print(("::warning title=benchtrail post::" if in_actions else "warning: ") + warning, file=sys.stderr)
    print(f"{result.action}: {result.message}")
    return EXIT_OK


def add_runner_labels_parser(subparsers: Any) -> None:
    """Declare ``runner-labels``."""
    p = add_command(subparsers, "runner-labels", cmd_runner_labels)
    p.add_argument(
        "--device",
        metavar="NAME",
        help="print only this device's labels (a JSON list) instead of the project's whole table",
    )
    p.add_argument(
        "--architecture",
        choices=("cpu", "cuda"),
        default="cpu",
        help="with --device: its architecture, the second default label (default cpu)",
    )


def cmd_runner_labels(args: argparse.Namespace) -> int:
    """Print the labels as one line of compact JSON (a ``$GITHUB_OUTPUT`` value). Raises UserError for a
    malformed pyproject.toml."""
    import json

    from benchtrail.github.runner_labels import device_labels, project_labels

    settings = project()
    print(
        json.dumps(
            project_labels(settings)
            if args.device is None
            else device_labels(settings, args.device, args.architecture),
            separators=(",", ":"),
        )
    )
    return EXIT_OK


def add_gate_status_parser(subparsers: Any) -> None:
    """Declare ``gate-status``."""
    p = add_command(subparsers, "gate-status", cmd_gate_status)
    p.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="the run's `comment` artifact (comparison.json, comment.json); absent: none uploaded",
    )
    p.add_argument(
        "--regate-report",
        type=Path,
        metavar="DIR",
        help="the `comment` artifact of the run `--plan` named (--regate-run): its comparison is "
        "gated again with the PR's current benchmarks-accept items",
    )
    p.add_argument("--regate-run", type=run_key, metavar="ID/ATTEMPT", help="the run --plan named")
    p.add_argument(
        "--plan",
        action="store_true",
        help="set nothing: print regate-run-id=<run id> and regate-run=<id>/<attempt> (both empty "
        "when there is none), also appended to $GITHUB_OUTPUT when set: the run whose "
        "artifact --regate-report needs",
    )
    p.add_argument(
        "--event",
        type=Path,
        metavar="FILE",
        help="the workflow_run event payload (default: $GITHUB_EVENT_PATH)",
    )
    p.add_argument("--api-url", help=f"GitHub API URL (default: $GITHUB_API_URL or {DEFAULT_API_URL})")
    p.add_argument(
        "--comment-author",
        help="login whose statuses and comments are ours (default: "
        f"$BENCHTRAIL_COMMENT_AUTHOR or {DEFAULT_COMMENT_AUTHOR})",
    )


def cmd_gate_status(args: argparse.Namespace) -> int:
    """Print the status set (with ``--plan``, the run to re-gate). Raises UserError for no token or event, an
    event that is not a PR's workflow_run, or a GitHub error."""
    import github
    import requests

    from benchtrail.github import gate_status

    env = {**os.environ, "GITHUB_EVENT_NAME": "workflow_run"}
    if args.event is not None:
        env["GITHUB_EVENT_PATH"] = str(args.event)
    _, payload = read_event(env)
    head = gate_status.head_from_event(payload)
    base_url, author = api_url(args.api_url), _author(args)
    completed = payload["workflow_run"].get("conclusion") if payload.get("action") == "completed" else None
    if completed == "action_required":  # a fork's run waiting for a maintainer's approval: not over
        completed = None
    try:
        repo = make_client(github_token("commit statuses"), base_url).get_repo(head.repo)
        if args.plan:
            run = gate_status.regate_run(repo, head, author)
            line = (
                f"regate-run-id={run[0]}\nregate-run={run[0]}/{run[1]}\n"
                if run
                else "regate-run-id=\nregate-run=\n"
            )
            if env.get("GITHUB_OUTPUT"):
                with open(env["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
                    f.write(line)
            print(line, end="")
            return EXIT_OK
        report = args.report if args.report and args.report.is_dir() else None
        regate = None
        if args.regate_report and args.regate_report.is_dir():
            if args.regate_run is None:
                raise UserError("--regate-report needs --regate-run ID/ATTEMPT (the run `--plan` named)")
            regate = (args.regate_report, args.regate_run)
        state, description = gate_status.update_status(
            repo, head, completed=completed or None, report=report, regate=regate, author=author
        )
    except github.GithubException as exc:
        raise UserError(
            f"GitHub API error setting {gate_status.CONTEXT} on {head.sha[:12]}: HTTP {exc.status} {exc.data}"
        ) from exc
    except requests.exceptions.RequestException as exc:
        raise UserError(f"cannot reach the GitHub API at {base_url} ({exc}); check --api-url") from exc
    print(f"{gate_status.CONTEXT}: {state}: {description}")
    return EXIT_OK
