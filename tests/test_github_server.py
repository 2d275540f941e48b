"""The workflow runs of the local GitHub REST stand-in (``tests/github_server.py``), read through PyGithub."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from github import Auth, Github, GithubException


def _repo(server, full_name: str = "octo/repo"):
    return Github(base_url=server.url, auth=Auth.Token("ghs_test"), retry=None).get_repo(full_name)


def test_a_run_attempt_reads_as_pygithubs_workflow_run(github_server):
    github_server.add_repo("octo/repo", default_branch="trunk")
    github_server.add_workflow_run("octo/repo", 42, 1, event="push", head_branch="trunk", head_sha="a" * 40,
                                   path=".github/workflows/benchmarks.yml", run_started_at="2026-12-01T18:00:00Z",
                                   updated_at=datetime(2026, 12, 1, 18, 5, tzinfo=timezone.utc))
    github_server.add_workflow_run("octo/repo", 42, 2, event="push", head_branch="trunk", head_sha="a" * 40,
                                   path=".github/workflows/benchmarks.yml", status="in_progress", conclusion=None,
                                   run_started_at="2026-12-01T19:00:00Z")
    repo = _repo(github_server)
    assert repo.default_branch == "trunk"
    latest = repo.get_workflow_run(42)
    assert (latest.run_attempt, latest.status, latest.conclusion) == (2, "in_progress", None)
    first = latest.get_attempt(1)
    assert (first.event, first.head_branch, first.head_sha, first.path, first.status, first.conclusion) == (
        "push", "trunk", "a" * 40, ".github/workflows/benchmarks.yml", "completed", "success")
    assert (first.run_started_at, first.updated_at) == (datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc),
                                                         datetime(2026, 12, 1, 18, 5, tzinfo=timezone.utc))
    assert first.run_attempt == 1 and first.repository.full_name == "octo/repo"
    # The run's created_at is its first attempt's start, for every attempt.
    assert latest.created_at == first.created_at == first.run_started_at
    github_server.update_workflow_run("octo/repo", 42, 2, status="completed", conclusion="failure",
                                      updated_at="2026-12-01T19:10:00Z")
    second = repo.get_workflow_run(42).get_attempt(2)
    assert (second.status, second.conclusion, second.updated_at) == (
        "completed", "failure", datetime(2026, 12, 1, 19, 10, tzinfo=timezone.utc))


@pytest.mark.parametrize("run_id, attempt", [(7, None), (42, 3)])
def test_an_unknown_run_or_attempt_is_not_found(github_server, run_id, attempt):
    github_server.add_workflow_run("octo/repo", 42, 1, event="pull_request", head_branch="topic",
                                   head_sha="b" * 40, path=".github/workflows/benchmarks.yml")
    repo = _repo(github_server)
    assert repo.default_branch == "main"
    with pytest.raises(GithubException) as caught:
        run = repo.get_workflow_run(run_id)
        run.get_attempt(attempt)
    assert caught.value.status == 404 and caught.value.data["message"] == "Not Found"
    assert "workflow-runs" in caught.value.data["documentation_url"]
