"""A benchmark comment posted to a pull request of the local GitHub server: the repository, PR, head
commit and token the post tests use, a comment document, the post itself, and ``benchtrail post``'s
parsed arguments."""

from __future__ import annotations

import argparse

from benchtrail.cli.github import add_post_parser
from benchtrail.compare import comment as comment_stage
from benchtrail.github.post import post_comment

REPO = "pytorch-labs/benchtrail-demo"
PR = 7
HEAD = "a1b2c3d4" * 5
TOKEN = "ghs_test"
COMMENTS = rf"/repos/{REPO}/issues/{PR}/comments"


def make_comment(run_id: str = "101", attempt: int = 1,
                 text: str = "### benchtrail: 0 regressions\n") -> dict:
    marker = comment_stage.marker({"run": {"run_id": run_id, "attempt": attempt}})
    body = f"{text}\nArtifacts: `gcloud storage cp -r gs://bucket/runs/{run_id}/{attempt}/ .`\n{marker}\n"
    return {"schema_version": 1, "marker": marker, "verdict": text.strip(), "counts": {},
            "head_commit": HEAD, "base_commit": "9" * 40, "body": body}


def post(server, comment: dict, **kwargs):
    kwargs.setdefault("run_head_sha", HEAD)
    return post_comment(comment, repo=REPO, pr_number=PR, token=TOKEN, base_url=server.url, **kwargs)


def cli_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchtrail")
    add_post_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["post", *argv])
