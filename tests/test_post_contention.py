"""``benchtrail post`` under contention: rate limits waited out or handed to the job summary, and racing posters."""

from __future__ import annotations

import itertools
import re
import threading
from pathlib import Path

import pytest
import yaml

from benchtrail.cli.github import cmd_post
from benchtrail.errors import UserError
from benchtrail.github.post import (
    MAX_RETRIES,
    RATE_LIMIT_MAX_WAIT_S,
    RETRY_BUDGET_S,
    SECONDARY_RATE_LIMIT_WAIT_S,
    post_comment,
)
from benchtrail.jsonio import write_json
from tests.helpers.comment_posts import COMMENTS, HEAD, PR, REPO, TOKEN, cli_args, make_comment, post
from tests.helpers.github_server import BOT

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gh(github_server):
    github_server.add_pull(REPO, PR, HEAD)
    return github_server


# -- rate limits: waits are recorded (``sleep=waits.append``), in seconds, instead of slept -------

SECONDARY = "You have exceeded a secondary rate limit"


def test_the_documented_bounds():
    assert (RATE_LIMIT_MAX_WAIT_S, SECONDARY_RATE_LIMIT_WAIT_S, MAX_RETRIES) == (90.0, 60.0, 2)
    assert RETRY_BUDGET_S == 300.0


def test_the_retry_budget_is_at_most_a_third_of_the_post_jobs_timeout():
    """The rest of the job's time is for checkout, install, download and the requests themselves."""
    path = ROOT / ".github/workflows/post_benchmark_comment.yml"
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert workflow["jobs"]["post"]["timeout-minutes"] == 15
    assert 3 * RETRY_BUDGET_S <= 60 * workflow["jobs"]["post"]["timeout-minutes"]


@pytest.mark.parametrize("kind, headers, times, waits", [
    ("secondary-rate-limit", {}, 2, [1.0, 1.0]),  # 403 with Retry-After: 1, twice
    ("secondary-rate-limit", {"Retry-After": "90"}, 1, [90.0]),  # exactly the cap is still waited
    ("secondary-rate-limit-429", {"Retry-After": "30"}, 1, [30.0]),
    # no Retry-After: GitHub's "at least a minute"
    ("secondary-rate-limit", {"Retry-After": None}, 1, [60.0]),
    ("secondary-rate-limit-429", {}, 2, [60.0, 60.0]),
], ids=["403-retry-after-1-twice", "403-retry-after-at-cap", "429-retry-after-30", "403-no-retry-after",
        "429-no-retry-after-twice"])
def test_rate_limit_within_the_cap_is_waited_out_then_posts(gh, kind, headers, times, waits):
    gh.fail("POST", COMMENTS, kind, times=times, headers=headers)
    slept: list[float] = []
    result = post(gh, make_comment(), sleep=slept.append)
    assert result.action == "created"
    assert slept == waits
    status = 429 if kind.endswith("429") else 403
    assert [r.status for r in gh.calls("POST", COMMENTS)] == [status] * times + [201]
    assert [c["body"] for c in gh.issue_comments(REPO, PR)] == [make_comment()["body"]]


@pytest.mark.parametrize("method, path, kind, headers, kwargs, reason", [
    ("POST", COMMENTS, "secondary-rate-limit", {"Retry-After": "91"}, {},
     f"HTTP 403: {SECONDARY}.*; retrying needs a wait of 91 s, longer than the 90 s benchtrail waits at most"),
    ("POST", COMMENTS, "secondary-rate-limit-429", {"Retry-After": "3"}, {"max_wait_s": 2},
     f"HTTP 429: {SECONDARY}.*; retrying needs a wait of 3 s, longer than the 2 s benchtrail waits at most"),
    ("POST", COMMENTS, "secondary-rate-limit", {"Retry-After": None}, {"secondary_wait_s": 120},
     f"HTTP 403: {SECONDARY}.*; retrying needs a wait of 120 s, longer than the 90 s"),
    ("POST", COMMENTS, "primary-rate-limit", {}, {},  # X-RateLimit-Reset in 2100
     r"HTTP 403: API rate limit exceeded for installation ID 1\.; retrying needs a wait of \d+ s, longer than"),
    ("GET", f"/repos/{REPO}/pulls/{PR}", "unavailable", {}, {},  # Retry-After: 3600
     "HTTP 503: Service Unavailable; retrying needs a wait of 3600 s, longer than the 90 s"),
], ids=["retry-after-91", "429-over-a-smaller-cap", "secondary-wait-over-cap", "primary-reset-in-2100",
        "503-retry-after-3600"])
def test_wait_beyond_the_cap_goes_to_the_job_summary_at_once(gh, tmp_path, method, path, kind, headers,
                                                             kwargs,
                                                             reason):
    gh.fail(method, path, kind, times=100, headers=headers)
    summary = tmp_path / "summary.md"
    slept: list[float] = []
    result = post(gh, make_comment(), summary_path=summary, sleep=slept.append, **kwargs)
    assert result.action == "fallback-summary" and result.comment_id is None
    assert re.search(reason, result.message), result.message
    assert slept == [] and len(gh.calls(method, path)) == 1  # asked once, never waited, never retried
    text = summary.read_text(encoding="utf-8")
    assert re.search(reason, text) and make_comment()["body"] in text
    assert gh.issue_comments(REPO, PR) == []


@pytest.mark.parametrize("kind, headers, waits, status", [
    ("secondary-rate-limit", {}, [1.0, 1.0], 403),
    ("secondary-rate-limit", {"Retry-After": None}, [60.0, 60.0], 403),
    ("secondary-rate-limit-429", {}, [60.0, 60.0], 429),
], ids=["403-retry-after-1", "403-no-retry-after", "429-no-retry-after"])
def test_rate_limit_outlasting_the_retries_goes_to_the_job_summary(gh, tmp_path, kind, headers, waits,
                                                                   status):
    gh.fail("POST", COMMENTS, kind, times=100, headers=headers)
    summary = tmp_path / "summary.md"
    slept: list[float] = []
    result = post(gh, make_comment(), summary_path=summary, sleep=slept.append)
    assert result.action == "fallback-summary"
    assert slept == waits and len(gh.calls("POST", COMMENTS)) == 1 + MAX_RETRIES
    # GitHub's own message survives the retries, and the reason says they ran out.
    assert f"HTTP {status}: {SECONDARY}" in result.message and "still rate limited after 2 retries" in result.message
    assert make_comment()["body"] in summary.read_text(encoding="utf-8")


@pytest.mark.parametrize("method, path, times, action, calls", [
    # GETs are retried (waits 0 s, then 1 s); the re-list after create
    ("GET", COMMENTS, 2, "created", 3 + 1),
    ("PATCH", None, 1, "updated", 2),
    ("POST", COMMENTS, 1, "fallback-summary", 1),  # never: the comment may have been created
], ids=["get", "patch", "post"])
def test_server_error_without_retry_after_is_retried_except_a_post(gh, tmp_path, method, path, times, action,
                                                                   calls):
    if method == "PATCH":
        ours = gh.add_comment(REPO, PR, make_comment(run_id="100")["body"], user=BOT)
        path = f"/repos/{REPO}/issues/comments/{ours}"
    gh.fail(method, path, "unavailable", times=times, headers={"Retry-After": None})
    slept: list[float] = []
    result = post(gh, make_comment(), summary_path=tmp_path / "summary.md", sleep=slept.append)
    assert result.action == action
    assert [r.status for r in gh.calls(method, path)][:times] == [503] * times
    assert len(gh.calls(method, path)) == calls
    assert slept == [1.0] * (times - 1)


# -- racing posters: the server holds requests (``gh.hold``) so the interleaving is exact ----------


class Poster(threading.Thread):
    """``post_comment`` in a thread; ``result`` is its PostResult, or the exception it raised."""

    def __init__(self, gh, comment: dict):
        super().__init__(daemon=True)
        self.gh, self.comment, self.result = gh, comment, None

    def run(self) -> None:
        try:
            self.result = post(self.gh, self.comment)
        except BaseException as exc:
            self.result = exc

    def outcome(self):
        self.join(timeout=60)
        assert not self.is_alive() and not isinstance(self.result, BaseException), self.result
        return self.result


def race(gh, comments: list[dict], create_order: list[int], relist_after_all_creates: bool = False):
    """Start one poster per comment; every one lists the PR's comments (finding none of ours) before
    any creates one; the creates then happen in ``create_order``. With ``relist_after_all_creates``
    every poster's re-list waits until all have created. Returns the posters' PostResults."""
    n = len(comments)
    creates = gh.hold("POST", COMMENTS, times=n)
    relists = gh.hold("GET", COMMENTS, skip=n, times=n if relist_after_all_creates else 0)
    posters = []
    for i, comment in enumerate(comments):
        posters.append(Poster(gh, comment))
        posters[-1].start()
        creates.wait_arrived(i + 1)  # poster i listed, found nothing, and waits to create
    for k, i in enumerate(create_order):
        creates.release(i)
        if relist_after_all_creates:
            relists.wait_arrived(k + 1)  # created; its re-list waits
        else:
            posters[i].outcome()
    relists.release()
    return [p.outcome() for p in posters]


@pytest.mark.parametrize("create_order, relist_after_all_creates", [
    ([0, 1], False),
    ([1, 0], False),
    ([0, 1], True),
    ([0, 1, 2], False),
    ([2, 0, 1], False),
    ([1, 2, 0], True),
], ids=["2-in-order", "2-reversed", "2-both-create-before-relisting", "3-in-order", "3-last-first",
        "3-all-create-before-relisting"])
def test_racing_posters_end_with_one_comment_the_first_created(gh, create_order, relist_after_all_creates):
    comment = make_comment()
    results = race(gh, [comment] * len(create_order), create_order, relist_after_all_creates)
    comments = gh.issue_comments(REPO, PR)
    assert [c["body"] for c in comments] == [comment["body"]]
    first = comments[0]["id"]
    assert first == 1001  # the first comment created: ids grow in creation order
    winner = create_order[0]
    assert (results[winner].action, results[winner].comment_id) == ("created", first)
    for i, result in enumerate(results):
        if i != winner:
            created = 1001 + create_order.index(i)
            assert (result.action, result.comment_id) == ("deduplicated", first)
            assert result.message == (f"another poster created comment {first} on PR #{PR} first; kept it and "
                                      f"deleted our duplicate {created}")
    assert len(gh.calls("POST", COMMENTS)) == len(create_order)
    assert len(gh.calls("DELETE")) == len(create_order) - 1 and gh.calls("PATCH") == []


@pytest.mark.parametrize("runs, body_run", [
    (["101", "102"], "102"),  # the older run created first: the newer one moves its body in
    (["102", "101"], "102"),  # the newer run created first: the older one only deletes its own
    (["101", "103", "102"], "103"),
], ids=["older-first", "newer-first", "3-runs"])
def test_racing_runs_keep_the_newest_runs_body(gh, runs, body_run):
    comments = [make_comment(run_id=r) for r in runs]
    results = race(gh, comments, list(range(len(runs))))
    assert [c["body"] for c in gh.issue_comments(REPO, PR)] == [make_comment(run_id=body_run)["body"]]
    assert results[0].action == "created"
    assert [r.comment_id for r in results] == [1001] * len(runs)
    for run, result in zip(runs[1:], results[1:]):
        took = "kept it with this run's body" if run > max(runs[: runs.index(run)]) else "kept it"
        assert result.action == "deduplicated" and took + " and deleted" in result.message


@pytest.mark.parametrize("existing", ["human-with-marker", "ours-older-run"])
def test_existing_comment_plus_racers(gh, existing):
    """A comment already on the PR: someone's with a pasted marker is ignored by both racers, who
    then race to create; an earlier run's comment of ours is edited by both and nothing is created."""
    old = make_comment(run_id="100")["body"]
    human = gh.add_comment(REPO, PR, old) if existing == "human-with-marker" else None
    ours = gh.add_comment(REPO, PR, old, user=BOT) if existing == "ours-older-run" else None
    comment = make_comment()
    if ours is None:
        results = race(gh, [comment, comment], [1, 0])
        assert [(r.action, r.comment_id) for r in results] == [("deduplicated", 1002), ("created", 1002)]
    else:
        edits = gh.hold("PATCH", f"/repos/{REPO}/issues/comments/{ours}", times=2)
        posters = [Poster(gh, comment), Poster(gh, comment)]
        for i, poster in enumerate(posters):
            poster.start()
            edits.wait_arrived(i + 1)  # both listed and found our comment before either edits it
        edits.release()
        results = [p.outcome() for p in posters]
        assert [(r.action, r.comment_id) for r in results] == [("updated", ours), ("updated", ours)]
    bodies = [(c["user"]["login"], c["body"]) for c in gh.issue_comments(REPO, PR)]
    assert bodies == ([("octocat", old), (BOT["login"], comment["body"])] if human else
                      [(BOT["login"], comment["body"])])
    if ours:
        assert gh.calls("POST", COMMENTS) == [] and gh.calls("DELETE") == []
    else:
        assert len(gh.calls("POST", COMMENTS)) == 2 and len(gh.calls("DELETE")) == 1


def test_failed_delete_of_a_duplicate_still_reports_our_comment(gh):
    gh.fail("DELETE", f"/repos/{REPO}/issues/comments/1002", "read-only")
    results = race(gh, [make_comment(), make_comment()], [0, 1])
    assert [r.action for r in results] == ["created", "created"]
    assert results[1].message == (f"created comment 1002 on PR #{PR}; could not check it for duplicates from a "
                                  "racing poster (HTTP 403: Resource not accessible by integration)")
    assert [c["id"] for c in gh.issue_comments(REPO, PR)] == [1001, 1002]


# -- one retry budget for the whole post: waits and time in requests, on a clock the test drives ---

PULL = f"/repos/{REPO}/pulls/{PR}"
RATE_LIMITED_ONCE_EACH = (("GET", PULL), ("GET", COMMENTS), ("POST", COMMENTS))


@pytest.mark.parametrize("budget, action, waits", [
    (180, "created", [60.0, 60.0, 60.0]),  # exactly the budget is still waited
    (150, "fallback-summary", [60.0, 60.0]),  # each wait is within the cap; together they are not
], ids=["three-waits-within", "third-wait-past-the-budget"])
def test_one_retry_budget_is_shared_by_all_requests_of_a_post(gh, tmp_path, budget, action, waits):
    for method, path in RATE_LIMITED_ONCE_EACH:
        gh.fail(method, path, "secondary-rate-limit", headers={"Retry-After": "60"})
    summary = tmp_path / "summary.md"
    slept: list[float] = []
    result = post(gh, make_comment(), summary_path=summary, sleep=slept.append, clock=lambda: sum(slept),
                  retry_budget_s=budget)
    assert result.action == action and slept == waits
    statuses = [r.status for r in gh.requests if (r.method, r.path) in RATE_LIMITED_ONCE_EACH]
    assert statuses == ([403, 200, 403, 200, 403, 201, 200]  # the last 200: the re-list after creating
                        if action == "created" else [403, 200, 403, 200, 403])
    if action == "fallback-summary":
        reason = (f"HTTP 403: {SECONDARY}.*; retrying needs a wait of 60 s, but only 30 s of the 150 s retry "
                  r"budget are left \(--retry-budget, at most the job's timeout\)")
        assert re.search(reason, result.message) and re.search(reason, summary.read_text(encoding="utf-8"))
        assert gh.issue_comments(REPO, PR) == []


def test_time_spent_in_requests_counts_against_the_retry_budget(gh, tmp_path):
    gh.fail("GET", COMMENTS, "unavailable", headers={"Retry-After": None})  # a 5xx GET: retried after 0 s
    slept: list[float] = []
    result = post(gh, make_comment(), summary_path=tmp_path / "summary.md", sleep=slept.append,
                  clock=lambda: 100.0 * len(gh.requests), retry_budget_s=250)  # each request takes 100 s
    assert result.action == "fallback-summary" and slept == []
    assert result.message.startswith("could not post the PR comment (HTTP 503: Service Unavailable; "
                                     "the 250 s retry budget is spent (--retry-budget, at most the job's "
                                     "timeout)); ")
    assert [r.path for r in gh.requests] == [f"/repos/{REPO}", PULL, COMMENTS]  # never retried


def test_connection_retries_count_against_the_retry_budget():
    slept: list[float] = []
    with pytest.raises(UserError, match=r"cannot reach the GitHub API at http://127\.0\.0\.1:9 .*--api-url"):
        post_comment(make_comment(), repo=REPO, pr_number=PR, run_head_sha=HEAD, token=TOKEN,
                     base_url="http://127.0.0.1:9", sleep=slept.append,
                     clock=itertools.count(0, 100).__next__, retry_budget_s=50)
    assert slept == []  # without the budget: 0 s, then 1 s before the third try


def test_cli_retry_budget_flag_sends_the_comment_to_the_job_summary(gh, tmp_path, monkeypatch, capsys):
    comment_file = write_json(tmp_path / "comment" / "comment.json", make_comment())
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    gh.fail("POST", COMMENTS, "secondary-rate-limit", headers={"Retry-After": "60"})
    args = cli_args(["--comment", str(comment_file), "--repo", REPO, "--pr", str(PR), "--head-sha", HEAD,
                      "--api-url", gh.url, "--retry-budget", "30"])
    assert cmd_post(args) == 0  # nothing slept: the wait is past the budget
    out, err = capsys.readouterr()
    assert out.startswith("fallback-summary: ") and "warning: could not post" in err
    assert re.search(r"retrying needs a wait of 60 s, but only \d+ s of the 30 s retry budget are left "
                     r"\(--retry-budget", summary.read_text(encoding="utf-8"))


@pytest.mark.parametrize("value", ["0", "-5", "nan", "soon"])
def test_cli_retry_budget_must_be_a_positive_number_of_seconds(value, capsys):
    with pytest.raises(SystemExit):
        cli_args(["--comment", "c.json", "--retry-budget", value])
    assert "argument --retry-budget: " in capsys.readouterr().err


@pytest.mark.parametrize("kind, status", [("secondary-rate-limit", 403), ("secondary-rate-limit-429", 429)])
def test_spent_budget_keeps_githubs_message_when_no_retry_after_names_the_wait(gh, tmp_path, kind, status):
    gh.fail("POST", COMMENTS, kind, headers={"Retry-After": None})  # GitHub's "at least a minute": 60 s
    slept: list[float] = []
    result = post(gh, make_comment(), summary_path=tmp_path / "summary.md", sleep=slept.append,
                  clock=lambda: sum(slept), retry_budget_s=30)
    assert result.action == "fallback-summary" and slept == []
    assert re.search(f"HTTP {status}: {SECONDARY}.*; retrying needs a wait of 60 s, but only 30 s of the 30 s "
                     "retry budget are left", result.message), result.message
