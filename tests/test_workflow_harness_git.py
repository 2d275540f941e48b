"""Issue 45's first "Done when" through the workflow harness (``tests/helpers/harness_git_story.py``): a
repository with no GCS settings and no runner labels stores its push runs in its own data branch from jobs
on ``ubuntu-latest``; a PR compares against it, gets one comment with the Pages link and the
``benchtrail/gate`` status, and writes nothing to the branch; a run forged into the branch is not a
baseline; two pushes whose writes race both land (docs/workflows.md, "The git store and GitHub-hosted
runners"; docs/store.md, "Trusted baselines")."""

from __future__ import annotations

import json

import pytest

from tests.helpers.harness_git_story import DATA, PAGES_URL, running_git_story
from tests.helpers.harness_story import GATE, PR_NUMBER, REPOSITORY

pytestmark = pytest.mark.e2e
HOSTED = ["ubuntu-latest"]


@pytest.fixture(scope="module")
def git_story(tmp_path_factory, story):
    """The git story, on the CLI stand-in of the GCS story (``story``, tests/conftest.py)."""
    with running_git_story(tmp_path_factory.mktemp("harness-git"), story.harness.venv) as git_story:
        yield git_story


def _comparison(run) -> dict:
    return json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())


def test_a_push_to_main_stores_its_run_in_the_data_branch_from_github_hosted_runners(git_story):
    run = git_story.baseline
    assert run.conclusion == "success", run.describe()
    setup = run.job("setup")
    assert (setup.outputs["hosted"], setup.outputs["postsubmit"]) == ("true", "true")
    jobs = ("compile", "execute", "process")  # (setup, pages and summary always run there)
    assert {job: run.job(job).runs_on for job in jobs} == dict.fromkeys(jobs, HOSTED)
    # Only the postsubmit process job enters the environment of the deploy key and checks out with it.
    process = run.job("process")
    assert process.environment == "benchtrail-postsubmit"
    assert [(a["job"], a["method"]) for a in run.auth] == [("benchmark/process", "ssh-key")]
    assert process.step("Use the deploy key for the data branch").outcome == "success"
    url = process.step("Store the run").outputs["run-url"]
    assert url == f"git:file://{git_story.origin}#{DATA}/runs/{run.run_id}/1/", url  # origin, resolved
    files = git_story.data_files()
    assert f"commits/{git_story.main}/{run.run_id}-1.json" in files
    mine = [f for f in files if f.startswith(f"runs/{run.run_id}/1/")]
    assert f"runs/{run.run_id}/1/comment/comment.md" in mine and any("/results/" in f for f in mine), mine
    # modules/ and the dashboard stay out of the branch; the note names the artifacts that hold them.
    assert not [f for f in mine if f.split("/")[3] in ("modules", "dashboard")], mine
    (note,) = [f for f in mine if f.split("/")[3] == "not-stored"]
    text = git_story.data("show", f"{DATA}:{note}")
    artifacts = "`run-compilation-laptop (modules/), benchmark-report (dashboard/)`"
    assert f"{artifacts} of workflow run {run.run_id}" in text, text
    assert run.job("pages").continue_on_error  # its outcome: the last test


def test_a_pr_compares_against_the_data_branch_gets_one_comment_and_the_gate_and_writes_nothing(git_story):
    push = git_story.baseline
    run, poster = git_story.first_pr
    assert run.conclusion == "success" and poster.conclusion == "success", run.describe() + poster.describe()
    baseline = _comparison(run)["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(push.run_id), git_story.main), baseline
    process = run.job("process")
    assert process.runs_on == HOSTED and process.environment is None and run.auth == []
    assert process.step("Use the deploy key for the data branch").outcome == "skipped"
    assert process.step("Store the run").outcome == "skipped"
    assert not [f for f in git_story.first_pr_files if f.startswith(f"runs/{run.run_id}/")]
    assert run.job("pages").result == "skipped"
    body = git_story.comments["h1"]  # the PR's one bot comment right after h1's run (snapshot)
    assert PAGES_URL in body, body
    state, description = git_story.gate(git_story.heads[0])
    assert state == "success" and f"run {run.run_id}/1" in description, (state, description)
    statuses = git_story.github.statuses[(REPOSITORY, git_story.heads[0])]
    assert {s["context"] for s in statuses} == {GATE}
    comment_url = f"https://github.com/{REPOSITORY}/pull/{PR_NUMBER}#issuecomment-"
    assert statuses[-1]["target_url"].startswith(comment_url)


def test_a_run_forged_into_the_data_branch_is_not_the_baseline(git_story):
    chapter = git_story.forged
    forged = chapter["forged_run"]
    assert f"commits/{git_story.main}/{forged}-1.json" in chapter["files"]  # it landed: no ruleset here
    run, _ = chapter["run"]
    baseline = _comparison(run)["baseline"]
    genuine = git_story.baseline.run_id
    assert (baseline["run_id"], baseline["commit"]) == (str(genuine), git_story.main), baseline
    reasons = {i["run_id"]: i["reason"] for i in baseline["ignored"]}
    assert reasons[str(forged)].startswith(f"run {forged}/1"), reasons
    assert "no such run attempt of commit" in reasons[str(forged)] or "pull_request" in reasons[str(forged)]


def test_two_pushes_finishing_together_both_land(git_story):
    chapter = git_story.two_pushes
    for run in chapter["runs"]:
        assert run.conclusion == "success", run.describe()
    for run, sha in zip(chapter["runs"], chapter["shas"], strict=True):
        assert f"commits/{sha}/{run.run_id}-1.json" in chapter["files"]
        assert any(f.startswith(f"runs/{run.run_id}/1/results/") for f in chapter["files"])
    # The hook held the first write until the second came: both were built on one tip, one was refused
    # and rebuilt on the other's, never forced (every logged push moves the branch from a tip it had).
    olds = [old for old, _ in chapter["log"]]
    assert len(olds) != len(set(olds)), chapter["log"]
    assert set(git_story.data("rev-list", DATA).splitlines()) <= {new for _, new in chapter["log"]}


def test_the_pages_job_deploys_the_postsubmit_runs_its_own_included_and_never_fails_a_run(git_story):
    """The pages job runs inside its push's run, still in progress: the reader trusts its own run once its
    process job succeeded, so the first push's site already shows that push's run."""
    first = git_story.baseline
    runs = [first, *git_story.two_pushes["runs"]]
    for run in runs:
        pages = run.job("pages")
        assert run.conclusion == "success" and pages.result == "success", pages.log
        assert pages.runs_on == "ubuntu-latest"
        (deployed,) = run.pages
        assert deployed["page_url"] == PAGES_URL
        index = (deployed["site"] / "index.html").read_text()
        assert f"<td>{first.run_id}/1</td>" in index and f"<td>{run.run_id}/1</td>" in index, index
