"""Trusted baselines through the workflow harness's story (``tests/helpers/harness_story.py``; docs/store.md,
"Trusted baselines"): a release branch's push run is the baseline of PRs into it; pointers forged in a
manual run's name, or in a push run's own name during its store step, are ignored everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.harness_story import POSTSUBMIT_SA, PRESUBMIT_SA, REPOSITORY

pytestmark = pytest.mark.e2e


def test_a_push_to_a_release_branch_stores_the_baseline_of_prs_into_it(story):
    push, run = story.release
    assert push.job("setup").outputs["postsubmit"] == "true" and push.conclusion == "success", push.describe()
    (auth,) = push.auth
    assert auth["service_account"] == POSTSUBMIT_SA
    assert push.job("process").step("Store the run").outcome == "success"
    comparison = json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(push.run_id), push.sha), baseline
    assert str(push.run_id) not in {i["run_id"] for i in baseline["ignored"]}
    index = (run.artifacts / "benchmark-report" / "dashboard" / "index.html").read_text()
    # the dashboard trusts it
    assert f"<td>{push.run_id}/1</td>" in index and f"run {push.run_id}/1" not in index
    assert run.job("setup").outputs.get("postsubmit",
                                        "") == "" and run.auth[0]["service_account"] == PRESUBMIT_SA
    # The push stores under the store's root, where baselines are read; the PR under presubmit/.
    prefix = story.harness.vars["BENCHTRAIL_STORE"]
    urls = [r.job("process").step("Store the run").outputs["run-url"] for r in (push, run)]
    assert urls == [f"{prefix}/runs/{push.run_id}/1/", f"{prefix}/presubmit/runs/{run.run_id}/1/"], urls


def test_pointers_forged_in_a_manual_run_or_during_a_push_runs_store_step_are_ignored(story, tmp_path):
    chapter = story.forgeries
    dispatch, clash, run, main2 = chapter["dispatch"], chapter["clash"], chapter["run"], chapter["main2"]
    assert dispatch.job("setup").outputs["has-benchmarks"] == "false" and dispatch.conclusion == "success"
    stored = clash.job("process").step("Store the run")
    assert stored.outcome == "failure" and clash.conclusion == "failure", clash.describe()
    assert "never overwritten" in stored.log, stored.log  # the push run reports the clash
    comparison = json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(story.baseline.run_id), story.main), baseline
    reasons = {i["run_id"]: i["reason"] for i in baseline["ignored"]}
    assert reasons[str(dispatch.run_id)] == (f"run {dispatch.run_id}/1: its job 'benchmark / process (compare, "
                                             "re-check, comment)' ended skipped, not success: it stored no run")
    assert reasons[str(clash.run_id)] == f"run {clash.run_id}/1 ended with conclusion failure, not success"
    index = (run.artifacts / "benchmark-report" / "dashboard" / "index.html").read_text()
    not_used = index.split("<h2>Runs not used</h2>", 1)[1]
    assert f"run {dispatch.run_id}/1: its job" in not_used and f"run {clash.run_id}/1 ended with" in not_used
    assert f"<td>{story.baseline.run_id}/1</td>" in index and f"<td>{dispatch.run_id}/1</td>" not in index
    env = {**os.environ, "STORAGE_EMULATOR_HOST": story.emulator_url,
           "BENCHTRAIL_STAGING": str(tmp_path / "staging"),
           "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_API_URL": story.github.url,
           "GITHUB_TOKEN": "ghs_test", "BENCHTRAIL_TRUSTED_WORKFLOW": ".github/workflows/benchmarks.yml"}
    for command in (["history", "--output", str(tmp_path / "history.json")], ["track"]):
        done = subprocess.run([sys.executable, "-m", "benchtrail.cli.app", *command, "--store",
                               story.harness.vars["BENCHTRAIL_STORE"], "--repo", str(story.repo), "--ref",
                               main2],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert f"not a trusted run: run {dispatch.run_id}/1: its job" in done.stderr, (command, done.stderr)
        assert f"not a trusted run: run {clash.run_id}/1 ended with conclusion failure" in done.stderr, command
