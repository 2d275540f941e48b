"""The workflow runs of the local GitHub REST stand-in (``tests/helpers/github_server.py``), read through
PyGithub."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from github import Auth, Github, GithubException


def _repo(server, full_name: str = "octo/repo"):
    return Github(base_url=server.url, auth=Auth.Token("ghs_test"), retry=None, seconds_between_requests=None,
                  seconds_between_writes=None).get_repo(full_name)


def test_a_run_attempt_reads_as_pygithubs_workflow_run(github_server):
    github_server.add_repo("octo/repo", default_branch="trunk")
    github_server.add_workflow_run("octo/repo", 42, 1, event="push", head_branch="trunk", head_sha="a" * 40,
                                   path=".github/workflows/benchmarks.yml",
                                   run_started_at="2026-12-01T18:00:00Z",
                                   updated_at=datetime(2026, 12, 1, 18, 5, tzinfo=UTC))
    github_server.add_workflow_run("octo/repo", 42, 2, event="push", head_branch="trunk", head_sha="a" * 40,
                                   path=".github/workflows/benchmarks.yml", status="in_progress",
                                   conclusion=None,
                                   run_started_at="2026-12-01T19:00:00Z")
    repo = _repo(github_server)
    assert repo.default_branch == "trunk"
    latest = repo.get_workflow_run(42)
    assert (latest.run_attempt, latest.status, latest.conclusion) == (2, "in_progress", None)
    first = latest.get_attempt(1)
    assert (first.event, first.head_branch, first.head_sha, first.path, first.status, first.conclusion) == (
        "push", "trunk", "a" * 40, ".github/workflows/benchmarks.yml", "completed", "success")
    assert (first.run_started_at, first.updated_at) == (datetime(2026, 12, 1, 18, 0, tzinfo=UTC),
                                                         datetime(2026, 12, 1, 18, 5, tzinfo=UTC))
    assert first.run_attempt == 1 and first.repository.full_name == "octo/repo"
    # The run's created_at is its first attempt's start, for every attempt.
    assert latest.created_at == first.created_at == first.run_started_at
    github_server.update_workflow_run("octo/repo", 42, 2, status="completed", conclusion="failure",
                                      updated_at="2026-12-01T19:10:00Z")
    second = repo.get_workflow_run(42).get_attempt(2)
    assert (second.status, second.conclusion, second.updated_at) == (
        "completed", "failure", datetime(2026, 12, 1, 19, 10, tzinfo=UTC))


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


def _pull(server, number: int = 7):
    server.add_pull("octo/repo", number, "a" * 40)
    return _repo(server).get_pull(number)


def test_held_requests_are_answered_in_the_order_they_are_released(github_server):
    path = "/repos/octo/repo/issues/7/comments"
    pull = _pull(github_server)
    gate = github_server.hold("POST", path, times=2)
    created: dict[str, int] = {}

    def create(body: str) -> None:
        created[body] = pull.create_issue_comment(body).id

    threads = [threading.Thread(target=create, args=(body,), daemon=True) for body in ("first", "second")]
    for i, thread in enumerate(threads):
        thread.start()
        gate.wait_arrived(i + 1)
    assert github_server.issue_comments("octo/repo", 7) == [] and gate.held == 2
    gate.release(1)
    threads[1].join(timeout=60)
    gate.release(0)
    threads[0].join(timeout=60)
    assert created == {"second": 1001, "first": 1002}
    create("third")  # past ``times``: not held
    assert [c["body"] for c in github_server.issue_comments("octo/repo", 7)] == ["second", "first", "third"]


def test_a_gate_lets_skip_requests_through_first(github_server):
    pull = _pull(github_server)
    gate = github_server.hold("GET", "/repos/octo/repo/issues/7/comments", skip=1)
    assert list(pull.get_issue_comments()) == []  # skipped
    thread = threading.Thread(target=lambda: list(pull.get_issue_comments()), daemon=True)
    thread.start()
    gate.wait_arrived(1)
    assert [r.path for r in github_server.calls("GET",
                                                ".*/comments")] == ["/repos/octo/repo/issues/7/comments"]
    gate.release()
    thread.join(timeout=60)
    assert len(github_server.calls("GET", ".*/comments")) == 2


@pytest.mark.parametrize("kind, headers, expected", [
    ("secondary-rate-limit", {}, (403, "1", "4999")),
    ("secondary-rate-limit", {"Retry-After": "120"}, (403, "120", "4999")),
    ("secondary-rate-limit", {"Retry-After": None}, (403, None, "4999")),
    ("secondary-rate-limit-429", {}, (429, None, "4999")),
    ("primary-rate-limit", {}, (403, None, "0")),  # the kind's own value replaces the default header
])
def test_failure_headers_can_be_replaced_or_removed(github_server, kind, headers, expected):
    pull = _pull(github_server)
    github_server.fail("POST", "/repos/octo/repo/issues/7/comments", kind, headers=headers)
    with pytest.raises(GithubException) as caught:
        pull.create_issue_comment("hello")
    got = {k.lower(): v for k, v in caught.value.headers.items()}
    assert (caught.value.status, got.get("retry-after"), got["x-ratelimit-remaining"]) == expected
    assert "rate limit" in caught.value.data["message"]


def test_only_the_author_may_delete_a_comment(github_server):
    pull = _pull(github_server)
    human = github_server.add_comment("octo/repo", 7, "LGTM")
    ours = pull.create_issue_comment("bot says hi")
    with pytest.raises(GithubException) as caught:
        next(c for c in pull.get_issue_comments() if c.id == human).delete()
    assert caught.value.status == 403
    ours.delete()
    assert [c["id"] for c in github_server.issue_comments("octo/repo", 7)] == [human]
    with pytest.raises(GithubException) as caught:
        ours.delete()
    assert caught.value.status == 404
    assert [r.status for r in github_server.calls("DELETE")] == [403, 204, 404]
