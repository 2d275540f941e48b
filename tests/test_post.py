"""``benchtrail post``: PyGithub itself against a local server speaking GitHub's REST shapes."""

from __future__ import annotations

import argparse
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchtrail.compare import comment as comment_stage
from benchtrail.compare.verdicts import compare
from benchtrail.compare.document import comparison_to_dict
from benchtrail.errors import UserError
from benchtrail.cli.github import add_post_parser, cmd_post
from benchtrail.github.post import (
    DETAILS_DROPPED_NOTE,
    GITHUB_MAX_COMMENT_CHARS,
    MAX_RETRIES,
    RATE_LIMIT_MAX_WAIT_S,
    SECONDARY_RATE_LIMIT_WAIT_S,
    TRUNCATED_NOTE,
    fit_body,
    is_newer,
    parse_marker,
    post_comment,
)
from benchtrail.jsonio import write_json
from benchtrail.compare.rules import load_thresholds
from tests.github_server import BOT
from tests.records import record, results

REPO = "pytorch-labs/benchtrail-demo"
PR = 7
HEAD = "a1b2c3d4" * 5
TOKEN = "ghs_test"
COMMENTS = rf"/repos/{REPO}/issues/{PR}/comments"


def make_comment(run_id: str = "101", attempt: int = 1, text: str = "### benchtrail: 0 regressions\n") -> dict:
    marker = comment_stage.marker({"run": {"run_id": run_id, "attempt": attempt}})
    body = f"{text}\nArtifacts: `gcloud storage cp -r gs://bucket/runs/{run_id}/{attempt}/ .`\n{marker}\n"
    return {"schema_version": 1, "marker": marker, "verdict": text.strip(), "counts": {},
            "head_commit": HEAD, "base_commit": "9" * 40, "body": body}


def post(server, comment: dict, **kwargs):
    kwargs.setdefault("run_head_sha", HEAD)
    return post_comment(comment, repo=REPO, pr_number=PR, token=TOKEN, base_url=server.url, **kwargs)


@pytest.fixture
def gh(github_server):
    github_server.add_pull(REPO, PR, HEAD)
    return github_server


def test_creates_comment_when_none_is_ours(gh):
    gh.add_comment(REPO, PR, "LGTM")
    comment = make_comment()
    result = post(gh, comment)
    assert result.action == "created"
    comments = gh.issue_comments(REPO, PR)
    assert [c["body"] for c in comments] == ["LGTM", comment["body"]]
    assert comments[1]["user"]["login"] == BOT["login"]
    assert result.comment_id == comments[1]["id"]
    assert len(gh.calls("POST", COMMENTS)) == 1 and gh.calls("PATCH") == []
    assert gh.calls("GET")[0].headers["authorization"] == f"token {TOKEN}"


def test_updates_our_comment_in_place_when_it_is_on_page_two(gh):
    for i in range(150):
        gh.add_comment(REPO, PR, f"human comment {i}")
    ours = gh.add_comment(REPO, PR, make_comment(run_id="100")["body"], user=BOT)
    for i in range(5):
        gh.add_comment(REPO, PR, f"later comment {i}")
    comment = make_comment(run_id="101")
    result = post(gh, comment)
    assert (result.action, result.comment_id) == ("updated", ours)
    assert gh.comments[ours]["body"] == comment["body"]
    assert len(gh.issue_comments(REPO, PR)) == 156
    pages = gh.calls("GET", COMMENTS)
    assert [(r.query.get("per_page"), r.query.get("page")) for r in pages] == [(["100"], None), (["100"], ["2"])]
    assert [r.path for r in gh.writes()] == [f"/repos/{REPO}/issues/comments/{ours}"]


@pytest.mark.parametrize("existing, ours, action", [
    (("200", 1), ("101", 1), "skipped-stale-run"),  # a newer run already commented
    (("101", 2), ("101", 1), "skipped-stale-run"),  # a newer attempt of the same run
    (("99", 1), ("101", 1), "updated"),  # 99 < 101 numerically, although "99" > "101" as text
    (("101", 1), ("101", 1), "updated"),  # the same run posting again (a rerun of the post job)
    (("101", 1), ("101", 3), "updated"),
])
def test_comment_from_newer_run_is_never_overwritten(gh, existing, ours, action):
    old = make_comment(*existing)
    old_id = gh.add_comment(REPO, PR, old["body"], user=BOT)
    result = post(gh, make_comment(*ours))
    assert (result.action, result.comment_id) == (action, old_id)
    assert gh.calls("POST") == []
    assert len(gh.calls("PATCH")) == (action == "updated")
    assert gh.comments[old_id]["body"] == (old if action != "updated" else make_comment(*ours))["body"]


def test_marker_in_someone_elses_comment_is_not_ours(gh):
    """Anyone can paste a marker with a huge run id; it must not suppress or capture our comment."""
    fake = gh.add_comment(REPO, PR, make_comment(run_id="999999999999")["body"])
    result = post(gh, make_comment())
    assert result.action == "created"
    assert gh.comments[fake]["body"] == make_comment(run_id="999999999999")["body"]
    assert len(gh.issue_comments(REPO, PR)) == 2


def test_changed_head_sha_posts_nothing(gh):
    gh.add_comment(REPO, PR, make_comment(run_id="100")["body"], user=BOT)
    result = post(gh, make_comment(), run_head_sha="f" * 40)
    assert result.action == "skipped-head-changed"
    assert gh.writes() == []
    assert gh.calls("GET", COMMENTS) == []  # decided from the PR alone


def test_oversized_body_drops_details_then_keeps_marker_last(gh):
    top = "### benchtrail: 3 regressions\n\n" + "| regressed row |\n" * 2_000  # 34k characters
    details = "<details><summary>All series</summary>\n\n" + "| row |\n" * 8_000 + "\n</details>\n"  # 64k
    comment = make_comment(text=top + "\n" + details)
    assert len(comment["body"]) > 100_000
    result = post(gh, comment)
    assert result.action == "created"
    body = gh.issue_comments(REPO, PR)[0]["body"]
    assert len(body) <= GITHUB_MAX_COMMENT_CHARS
    assert "<details>" not in body and DETAILS_DROPPED_NOTE in body and TRUNCATED_NOTE not in body
    assert body.startswith(top)
    assert body.endswith("Artifacts: `gcloud storage cp -r gs://bucket/runs/101/1/ .`\n" + comment["marker"] + "\n")


def test_oversized_body_without_details_is_truncated_with_pointer_to_full_report(gh):
    comment = make_comment(text="### benchtrail\n" + "| a long table row of twenty-nine |\n" * 3_000)
    result = post(gh, comment)
    body = gh.issue_comments(REPO, PR)[0]["body"]
    assert result.action == "created"
    assert GITHUB_MAX_COMMENT_CHARS - 200 < len(body) <= GITHUB_MAX_COMMENT_CHARS
    assert TRUNCATED_NOTE in body and "full.md" in body
    assert body.splitlines()[-1] == comment["marker"]
    assert parse_marker(body) == ("101", 1)


def test_fit_body_leaves_a_small_body_alone():
    comment = make_comment()
    assert fit_body(comment["body"], comment["marker"]) == comment["body"]


def test_fit_body_on_rendered_comment_drops_the_details_table_and_keeps_the_footer():
    rows = [record(f"model{i:04d}", [100.0 + i % 7 + j / 10 for j in range(5)]) for i in range(300)]  # with spread
    comparison = comparison_to_dict(compare([results(*rows, commit="b" * 40)], [results(*rows, commit="c" * 40)],
                                            load_thresholds()),
                                    [results(*rows, commit="b" * 40)], [results(*rows, commit="c" * 40)],
                                    "thresholds.yaml", {"reason": "merge base"})
    body, _, data = comment_stage.render(comparison, run_url="gs://bucket/runs/r1/1/")
    assert fit_body(body, data["marker"]) == body
    limit = body.index("<details>") + 1_000
    fitted = fit_body(body, data["marker"], limit=limit)
    assert len(fitted) <= limit and "<details>" not in fitted and DETAILS_DROPPED_NOTE in fitted
    assert fitted.startswith(body[: body.index("<details>")])
    assert fitted.endswith("Artifacts: `gcloud storage cp -r gs://bucket/runs/r1/1/ .`\n"
                           f"Reproduce: `benchtrail explain {rows[0].name} --run gs://bucket/runs/r1/1/`\n"
                           + data["marker"] + "\n")


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(["row\n", "\n", "<details>\n", "</details>\n", "x" * 300, "Artifacts: a\n"]),
                      max_size=60),
       limit=st.integers(min_value=1_200, max_value=4_000))
def test_fit_body_always_fits_and_ends_with_the_marker(parts, limit):
    marker = make_comment()["marker"]
    fitted = fit_body("".join(parts) + marker + "\n", marker, limit=limit)
    assert len(fitted) <= limit
    assert fitted.endswith(marker + "\n") and fitted.splitlines()[-1] == marker and fitted.count(marker) == 1


def test_is_newer_compares_run_ids_as_numbers_and_does_not_mix_local_and_ci_ids():
    assert is_newer(("1000", 1), ("999", 5))
    assert not is_newer(("999", 5), ("1000", 1))
    assert is_newer(("local-20260102T000000Z-aaaa", 1), ("local-20260101T000000Z-ffff", 1))
    assert not is_newer(("local-20990101T000000Z-aaaa", 1), ("5", 1))
    assert not is_newer(("5", 1), ("local-20990101T000000Z-aaaa", 1))


def _cli_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchtrail")
    add_post_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["post", *argv])


@pytest.fixture
def comment_file(tmp_path) -> Path:
    return write_json(tmp_path / "comment" / "comment.json", make_comment())


def test_read_only_token_writes_job_summary_and_exits_0(gh, comment_file, tmp_path, monkeypatch, capsys):
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    gh.fail("POST", COMMENTS, "read-only", times=5)
    args = _cli_args(["--comment", str(comment_file), "--pr", str(PR), "--head-sha", HEAD, "--api-url", gh.url])
    assert args.func(args) == 0
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n")  # appended, not overwritten
    assert make_comment()["body"] in text and "HTTP 403: Resource not accessible by integration" in text
    assert len(gh.calls("POST", COMMENTS)) == 1 and gh.issue_comments(REPO, PR) == []
    out, err = capsys.readouterr()
    assert out.startswith("fallback-summary: ") and "warning: could not post" in err


# -- rate limits: waits are recorded (``sleep=waits.append``), in seconds, instead of slept -------

SECONDARY = "You have exceeded a secondary rate limit"


def test_the_documented_bounds():
    assert (RATE_LIMIT_MAX_WAIT_S, SECONDARY_RATE_LIMIT_WAIT_S, MAX_RETRIES) == (90.0, 60.0, 2)


@pytest.mark.parametrize("kind, headers, times, waits", [
    ("secondary-rate-limit", {}, 2, [1.0, 1.0]),  # 403 with Retry-After: 1, twice
    ("secondary-rate-limit", {"Retry-After": "90"}, 1, [90.0]),  # exactly the cap is still waited
    ("secondary-rate-limit-429", {"Retry-After": "30"}, 1, [30.0]),
    ("secondary-rate-limit", {"Retry-After": None}, 1, [60.0]),  # no Retry-After: GitHub's "at least a minute"
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
def test_wait_beyond_the_cap_goes_to_the_job_summary_at_once(gh, tmp_path, method, path, kind, headers, kwargs,
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
def test_rate_limit_outlasting_the_retries_goes_to_the_job_summary(gh, tmp_path, kind, headers, waits, status):
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
    ("GET", COMMENTS, 2, "created", 3 + 1),  # GETs are retried (waits 0 s, then 1 s); the re-list after create
    ("PATCH", None, 1, "updated", 2),
    ("POST", COMMENTS, 1, "fallback-summary", 1),  # never: the comment may have been created
], ids=["get", "patch", "post"])
def test_server_error_without_retry_after_is_retried_except_a_post(gh, tmp_path, method, path, times, action, calls):
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
        except BaseException as exc:  # noqa: BLE001 - handed to the test
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


def test_dry_run_reads_and_decides_but_writes_nothing(gh, tmp_path):
    ours = gh.add_comment(REPO, PR, make_comment(run_id="100")["body"], user=BOT)
    result = post(gh, make_comment(), dry_run=True, summary_path=tmp_path / "summary.md")
    assert (result.action, result.comment_id) == ("dry-run", ours)
    assert f"would update comment {ours}" in result.message
    assert gh.writes() == [] and len(gh.calls("GET", COMMENTS)) == 1
    assert gh.comments[ours]["body"] == make_comment(run_id="100")["body"]
    assert not (tmp_path / "summary.md").exists()


def test_dry_run_through_cli_writes_nothing(gh, comment_file, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    args = _cli_args(["--comment", str(comment_file), "--repo", REPO, "--pr", str(PR), "--head-sha", HEAD,
                      "--api-url", gh.url, "--dry-run"])
    assert cmd_post(args) == 0
    assert gh.writes() == [] and gh.issue_comments(REPO, PR) == []
    assert capsys.readouterr().out.startswith("dry-run: dry run: would create a comment")


def test_rejected_comment_is_a_user_error(gh):
    gh.fail("POST", COMMENTS, "validation")
    with pytest.raises(UserError, match=r"rejected the comment \(HTTP 422: Validation Failed: Body is invalid\)"):
        post(gh, make_comment())
    assert len(gh.calls("POST", COMMENTS)) == 1


def test_unknown_pr_is_a_user_error_naming_the_flags(gh):
    with pytest.raises(UserError, match=r"PR #8 of .* not found.*--pr"):
        post_comment(make_comment(), repo=REPO, pr_number=8, run_head_sha=HEAD, token=TOKEN, base_url=gh.url)


@pytest.mark.parametrize("unset, named", [
    ("GITHUB_REPOSITORY", "--repo is missing: pass --repo or set GITHUB_REPOSITORY"),
    ("BENCHTRAIL_PR_NUMBER", "--pr is missing: pass --pr or set BENCHTRAIL_PR_NUMBER"),
    ("BENCHTRAIL_HEAD_SHA", "--head-sha is missing: pass --head-sha or set BENCHTRAIL_HEAD_SHA"),
    ("GITHUB_TOKEN", "no GitHub token: set GITHUB_TOKEN to a token that may write issue comments"),
])
def test_missing_setting_names_flag_and_env_var(comment_file, monkeypatch, unset, named):
    env = {"GITHUB_REPOSITORY": REPO, "BENCHTRAIL_PR_NUMBER": str(PR), "BENCHTRAIL_HEAD_SHA": HEAD,
           "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": "http://127.0.0.1:9"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv(unset)
    with pytest.raises(UserError) as info:
        cmd_post(_cli_args(["--comment", str(comment_file)]))
    assert str(info.value) == named
