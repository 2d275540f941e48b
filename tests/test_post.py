"""``benchtrail post``: PyGithub itself against a local server speaking GitHub's REST shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchtrail.cli.github import cmd_post
from benchtrail.compare import comment as comment_stage
from benchtrail.compare.document import Comparison, comparison_to_dict
from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.verdicts import compare
from benchtrail.errors import UserError
from benchtrail.github.post import (
    DETAILS_DROPPED_NOTE,
    GITHUB_MAX_COMMENT_CHARS,
    TRUNCATED_NOTE,
    fit_body,
    is_newer,
    parse_marker,
    post_comment,
)
from benchtrail.jsonio import write_json
from tests.helpers.comment_posts import COMMENTS, HEAD, PR, REPO, TOKEN, cli_args, make_comment, post
from tests.helpers.github_server import APP_BOT, APP_TOKEN, BOT
from tests.helpers.records import record, results


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
    assert [(r.query.get("per_page"), r.query.get("page")) for r in pages] == [(["100"], None),
                                                                               (["100"], ["2"])]
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
    assert body.endswith("Artifacts: `gcloud storage cp -r gs://bucket/runs/101/1/ .`\n" + comment["marker"]
                         + "\n")


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
    # with spread
    rows = [record(f"model{i:04d}", [100.0 + i % 7 + j / 10 for j in range(5)]) for i in range(300)]
    comparison = comparison_to_dict(compare([results(*rows, commit="b" * 40)],
                                            [results(*rows, commit="c" * 40)],
                                            load_thresholds()),
                                    [results(*rows, commit="b" * 40)], [results(*rows, commit="c" * 40)],
                                    "thresholds.yaml", {"reason": "merge base"})
    body, _, data = comment_stage.render(Comparison.of(comparison), run_url="gs://bucket/runs/r1/1/")
    assert fit_body(body, data["marker"]) == body
    limit = body.index("<details>") + 1_000
    fitted = fit_body(body, data["marker"], limit=limit)
    assert len(fitted) <= limit and "<details>" not in fitted and DETAILS_DROPPED_NOTE in fitted
    assert fitted.startswith(body[: body.index("<details>")])
    assert fitted.endswith("Artifacts: `gcloud storage cp -r gs://bucket/runs/r1/1/ .`\n"
                           f"Reproduce: `benchtrail explain {rows[0].name} --run gs://bucket/runs/r1/1/`\n"
                           + data["marker"] + "\n")


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(["row\n", "\n", "<details>\n", "</details>\n", "x" * 300,
                                       "Artifacts: a\n"]),
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
    args = cli_args(["--comment", str(comment_file), "--pr", str(PR), "--head-sha", HEAD, "--api-url",
                      gh.url])
    assert args.func(args) == 0
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n")  # appended, not overwritten
    assert make_comment()["body"] in text and "HTTP 403: Resource not accessible by integration" in text
    assert len(gh.calls("POST", COMMENTS)) == 1 and gh.issue_comments(REPO, PR) == []
    out, err = capsys.readouterr()
    assert out.startswith("fallback-summary: ") and "warning: could not post" in err


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
    args = cli_args(["--comment", str(comment_file), "--repo", REPO, "--pr", str(PR), "--head-sha", HEAD,
                      "--api-url", gh.url, "--dry-run"])
    assert cmd_post(args) == 0
    assert gh.writes() == [] and gh.issue_comments(REPO, PR) == []
    assert capsys.readouterr().out.startswith("dry-run: dry run: would create a comment")


def test_rejected_comment_is_a_user_error(gh):
    gh.fail("POST", COMMENTS, "validation")
    with pytest.raises(UserError,
                       match=r"rejected the comment \(HTTP 422: Validation Failed: Body is invalid\)"):
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
        cmd_post(cli_args(["--comment", str(comment_file)]))
    assert str(info.value) == named


# -- a GitHub App's token: the poster learns its login from the comment it creates ----------------


def post_as_app(server, comment: dict, **kwargs):
    kwargs.setdefault("run_head_sha", HEAD)
    return post_comment(comment, repo=REPO, pr_number=PR, token=APP_TOKEN, base_url=server.url, **kwargs)


def test_app_token_without_comment_author_warns_naming_the_flag_and_its_login(gh):
    result = post_as_app(gh, make_comment())
    assert result.action == "created"
    [created] = gh.issue_comments(REPO, PR)
    assert created["user"]["login"] == APP_BOT["login"] and result.comment_id == created["id"]
    assert result.warnings == (
        "this token comments as 'benchtrail-demo-app[bot]', not as 'github-actions[bot]' (--comment-author): "
        "set --comment-author benchtrail-demo-app[bot] (or "
        "BENCHTRAIL_COMMENT_AUTHOR=benchtrail-demo-app[bot], which `benchtrail gate-status` reads too); "
        "without it each run creates a comment before it finds its earlier one by that login, edits that "
        "and deletes the new one",)


def test_app_token_without_comment_author_still_ends_with_one_comment_edited_in_place(gh):
    """Every run creates (it cannot find its earlier comment by the wrong login), then finds it by
    the login of the comment it created, moves its body there and deletes the new one."""
    pasted = gh.add_comment(REPO, PR, make_comment(run_id="999999999999")["body"])  # anyone's, not ours
    first = post_as_app(gh, make_comment(run_id="101"))
    results = [post_as_app(gh, make_comment(run_id=run)) for run in ("102", "103")]
    assert first.action == "created"
    assert [(r.action, r.comment_id) for r in results] == [("deduplicated", first.comment_id)] * 2
    assert results[0].message == (
        f"found our earlier comment {first.comment_id} on PR #{PR} by 'benchtrail-demo-app[bot]', the login "
        f"of the comment {first.comment_id + 1} just created; moved this run's body there and deleted "
        f"{first.comment_id + 1}")
    assert all(r.warnings and "--comment-author benchtrail-demo-app[bot]" in r.warnings[0] for r in results)
    assert [(c["id"], c["user"]["login"], c["body"]) for c in gh.issue_comments(REPO, PR)] == [
        (pasted, "octocat", make_comment(run_id="999999999999")["body"]),
        (first.comment_id, APP_BOT["login"], make_comment(run_id="103")["body"])]


def test_app_token_with_its_comment_author_edits_in_place_without_a_warning(gh):
    first = post_as_app(gh, make_comment(run_id="101"), author=APP_BOT["login"])
    second = post_as_app(gh, make_comment(run_id="102"), author=APP_BOT["login"])
    assert (first.action, first.warnings) == ("created", ())
    assert (second.action, second.comment_id, second.warnings) == ("updated", first.comment_id, ())
    assert len(gh.calls("POST", COMMENTS)) == 1 and gh.calls("DELETE") == []
    assert [c["body"] for c in gh.issue_comments(REPO, PR)] == [make_comment(run_id="102")["body"]]


def test_app_token_that_finds_a_newer_runs_comment_late_keeps_that_body(gh):
    newer = gh.add_comment(REPO, PR, make_comment(run_id="200")["body"], user=APP_BOT)
    result = post_as_app(gh, make_comment(run_id="101"))
    assert (result.action, result.comment_id) == ("deduplicated", newer)
    assert "kept it and deleted" in result.message
    assert [c["body"] for c in gh.issue_comments(REPO, PR)] == [make_comment(run_id="200")["body"]]


def test_cli_prints_the_login_mismatch_as_a_github_actions_warning(gh, comment_file, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", APP_TOKEN)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("BENCHTRAIL_COMMENT_AUTHOR", raising=False)
    args = cli_args(["--comment", str(comment_file), "--repo", REPO, "--pr", str(PR), "--head-sha", HEAD,
                      "--api-url", gh.url])
    assert cmd_post(args) == 0
    out, err = capsys.readouterr()
    assert out.startswith("created: created comment")
    assert err.startswith("::warning title=benchtrail post::"
                          "this token comments as 'benchtrail-demo-app[bot]'")
    assert "set --comment-author benchtrail-demo-app[bot]" in err
    monkeypatch.setenv("BENCHTRAIL_COMMENT_AUTHOR", APP_BOT["login"])
    assert cmd_post(args) == 0
    out, err = capsys.readouterr()
    assert out.startswith("updated: updated comment") and err == ""
