"""The required gate, the commit status ``benchtrail/gate`` (docs/workflows.md, "The gate"), through the
workflow harness's story (``tests/helpers/harness_story.py``): a confirmed regression fails it and no edit
or label clears it, an accept edit passes it unmeasured, a fork's PR waits, a new trailer makes it
pending, a process job that dies fails it. These tests run after ``test_workflow_harness.py``'s (the
story's h4 chapters come after its late poster)."""

from __future__ import annotations

import re

import pytest

from tests.helpers.git import git
from tests.helpers.harness_story import BODY, CHAIN, PR_NUMBER, REPOSITORY, row_of

pytestmark = pytest.mark.e2e


def test_a_confirmed_regression_fails_the_gate_status_which_no_edit_or_label_clears(story):
    run, poster = story.failures
    assert run.job("process").result == "success" and poster.conclusion == "success", poster.describe()
    assert re.search(r"regressed · confirmed", row_of(story.comments["failures"], CHAIN))
    states = story.edits_on_h1
    failed = ("failure", f"1 confirmed regression: {CHAIN} (failure, run {run.run_id}/1)")
    assert states["compared"] == failed
    # A title-only edit measures nothing; a label other than safe-to-benchmark starts no job at all.
    assert states["title"] == failed and states["label"] == failed
    target = story.github.statuses[(REPOSITORY, story.heads[0])][-1]["target_url"]
    assert target.startswith(f"https://github.com/{REPOSITORY}/pull/{PR_NUMBER}#issuecomment-"), target


def test_a_benchmarks_accept_edit_passes_the_gate_without_measuring_again(story):
    run, _ = story.failures
    accept_run, poster = story.edits_on_h1["accept_run"]
    assert accept_run.job("setup").outputs["has-benchmarks"] == "false", accept_run.describe()
    assert accept_run.job("compile").result == "skipped"
    gate = poster.job("post/gate")
    assert gate.step("Find a comparison to gate again").outputs["regate-run"] == f"{run.run_id}/1", gate.log
    assert story.edits_on_h1["accepted"] == (
        "success", f"no confirmed regression; 1 accepted (success, run {run.run_id}/1)")


def test_a_fork_pr_without_the_label_waits_for_a_maintainer(story):
    story.baseline
    head = git(story.repo, "commit-tree", f"{story.main}^{{tree}}", "-p", story.main, "-m", "from a fork")
    git(story.repo, "update-ref", "refs/heads/fork-pr", head)
    story.github.add_pull(REPOSITORY, 2, head, title="Fork PR", body=BODY, head_repo="someone/my-project",
                          head_ref="faster")
    run, _poster = story.edit(head, action="opened", number=2, head_repo="someone/my-project")
    setup = run.job("setup")
    assert setup.outputs["has-benchmarks"] == "false" and run.job("compile").result == "skipped", run.describe()
    assert "waiting for a maintainer to add the `safe-to-benchmark` label" in setup.summary
    assert story.gate(head) == ("pending",
                                "waiting for a maintainer to add the safe-to-benchmark label (a fork's PR)")


def test_adding_a_trailer_makes_the_gate_pending_until_its_runs_comparison(story):
    chapter = story.fixed
    bare_run, _ = chapter["bare"]
    assert bare_run.job("setup").outputs["has-benchmarks"] == "false"
    assert chapter["bare_gate"] == ("success", "no benchmarks selected")  # h4 never selected benchmarks
    run, _ = chapter["run"]
    assert chapter["requested_gate"] == ("pending", f"run {run.run_id}/1 running; no result yet")
    assert chapter["gate"] == ("success", f"no confirmed regression (success, run {run.run_id}/1)")
    verdict = row_of(story.comments["fixed"], CHAIN).split(" | ")[-1]
    assert verdict.startswith(("similar", "inconclusive")), verdict  # fast again: no regression, in any case


def test_a_process_job_that_fails_fails_the_gate_with_the_reason(story):
    rerun, poster = story.process_dies
    assert rerun.job("process").result == "failure" and poster.conclusion == "success", poster.describe()
    assert story.gate(story.heads[3]) == (
        "failure", f"no comparison: the benchmark run ended 'failure' before comparing (failure, run "
                   f"{rerun.run_id}/2)")
