"""The workflows, executed for real events by ``tests/helpers/workflow_harness.py``: every failure ends in
the current head's PR comment (the story: ``tests/helpers/harness_story.py``; the gate status:
``test_workflow_harness_gate.py``; trusted baselines: ``test_workflow_harness_baselines.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from google.cloud import storage

from tests.helpers.harness_story import (
    CHAIN,
    EXAMPLE,
    MIX_EAGER,
    MIX_EXPORT,
    POSTSUBMIT_SA,
    PRESUBMIT_SA,
    REPOSITORY,
    WIF_PROVIDER,
    reasons_of,
    row_of,
)
from tests.helpers.workflow_harness import ROOT, load_workflow, pending_survivors

pytestmark = pytest.mark.e2e

# -- the adoption example -------------------------------------------------------------------------


def _documented_permissions() -> dict[str, str]:
    """The permissions docs/adopting.md lists for the calling `benchmark` job."""
    text = (ROOT / "docs" / "adopting.md").read_text()
    section = text.split("### Permissions", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `([\w-]+)` \| `(read|write)` \|", section, re.MULTILINE))


def test_the_adoption_example_runs_through_workflow_call_without_pip_install(story):
    run = story.baseline
    jobs = {job_id: job.result for job_id, job in run.jobs.items()}
    assert jobs == {"benchmark": "success", "benchmark/setup": "success", "benchmark/compile": "success",
                    "benchmark/compile-cuda": "skipped", "benchmark/execute": "success",
                    "benchmark/process": "success", "benchmark/pages": "skipped",  # a gs:// store: no Pages
                    "benchmark/summary": "success"}, run.describe()
    installs = [s for job in run.jobs.values() for s in job.steps if s.name == "Install benchtrail"]
    assert installs and all(s.outputs["pip-install"] == "" for s in installs)
    caller = load_workflow(story.repo / ".github" / "workflows" / "benchmarks.yml")
    assert caller["jobs"]["benchmark"]["permissions"] == _documented_permissions()
    stored = run.job("process").step("Store the run")
    assert stored.outcome == "success" and "/runs/" in stored.outputs["run-url"], stored.log
    # Everything the run wrote is stored: each case's flattened document too (from the execute jobs).
    from google.auth.credentials import AnonymousCredentials

    bucket, prefix = story.harness.vars["BENCHTRAIL_STORE"].removeprefix("gs://").split("/", 1)
    client = storage.Client(project="test", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": story.emulator_url})
    names = [b.name.split(f"/runs/{run.run_id}/1/", 1)[1]
             for b in client.list_blobs(bucket, prefix=f"{prefix}/runs/{run.run_id}/1/")]
    docs = sorted(n.split("_")[1] for n in names if n.startswith("results/docs/bench_"))
    assert [d for d in docs if d.endswith(".laptop")] == sorted([CHAIN, MIX_EAGER, MIX_EXPORT]), names


def test_a_caller_granting_less_than_the_documented_permissions_fails_when_it_loads(story, tmp_path):
    caller = yaml.safe_load((EXAMPLE / ".github" / "workflows" / "benchmarks.yml").read_text())
    del caller["jobs"]["benchmark"]["permissions"]["pull-requests"]
    path = tmp_path / "benchmarks.yml"
    path.write_text(yaml.safe_dump(caller))
    head = story.main
    run = story.harness.run(path, "pull_request", story.pr_payload("opened", head), head, "refs/pull/1/merge")
    assert run.jobs == {} and run.error == ("The nested job 'setup' is requesting 'pull-requests: read', "
                                            "but is only allowed 'pull-requests: none'.")


# -- failures end in the current head's comment ---------------------------------------------------


def test_a_failed_case_is_a_row_of_the_current_heads_comment(story):
    run, poster = story.failures
    assert run.job("execute").result == "success", run.describe()
    assert re.search(r"\b(created|updated)\b",
                     poster.job("post/post").step("Post the comment").log), poster.describe()
    comment = story.comments["failures"]
    assert story.heads[0][:7] in comment
    assert "failed" in row_of(comment, MIX_EAGER) and "Mix is broken by this PR" in reasons_of(comment,
                                                                                               row_of(comment,
                                                                                                      MIX_EAGER))


def test_a_failed_module_compile_fails_only_its_own_run_configs(story):
    run, _ = story.failures
    assert run.job("compile").result == "success", run.describe()
    comment = story.comments["failures"]
    export = row_of(comment, MIX_EXPORT)
    assert "failed" in export and "failed to compile" in reasons_of(comment, export)
    assert "regressed" in row_of(comment, CHAIN)






def test_a_store_outage_is_reported_in_the_comment_which_is_edited(story):
    run, _poster = story.outage
    assert run.job("process").result == "success", run.describe()
    assert run.job("process").step("Store the run").outcome == "failure"
    comment = story.comments["outage"]
    assert story.heads[1][:7] in comment and story.heads[0][:7] not in comment
    assert "could not be stored" in comment and "store could not be read" in comment, comment
    assert story.gate(story.heads[1]) == ("success", f"no confirmed regression (success, run {run.run_id}/1)")


def test_a_shard_whose_runner_died_is_named_and_its_cases_are_failed_rows(story):
    run, _ = story.outage
    assert run.job("execute").result == "failure", run.describe()
    assert [s.outcome for s in run.job("execute").steps if s.name == "Run benchmarks"] == ["success",
                                                                                           "failure"]
    comment = story.comments["outage"]
    assert "Shards that did not report: laptop shard 1." in comment, comment
    assert "Job execute did not report in full (failure)" in comment
    notes = [line.split(" ", 2)[1] for line in comment.splitlines()
             if line.startswith("- [") and "shard 1 of device laptop did not report" in line]
    assert len(notes) == 1, comment  # the reason, said once
    shard_1 = [line for line in comment.splitlines() if line.startswith("| `") and notes[0] in line]
    assert shard_1 and all(re.search(r"\| failed [^|]*\|$", line) for line in shard_1), comment


def test_a_recheck_failure_leaves_regressions_unconfirmed_and_ungated(story):
    run, _ = story.recheck_timeout
    process = run.job("process")
    assert process.result == "success" and process.step("Re-check regressions in paired A/B runs").outcome == "failure"
    comment = story.comments["recheck_timeout"]
    assert story.heads[2][:7] in comment and "re-check did not finish" in comment, comment
    assert "regressed · unconfirmed" in row_of(comment, CHAIN)
    assert story.gate(story.heads[2]) == (
        "success", f"no confirmed regression; 1 unconfirmed, not gated (success, run {run.run_id}/1)")


def test_a_pointer_forged_by_a_pr_run_is_ignored_by_the_next_pr_and_by_track(story, tmp_path):
    """Before h3, a pointer for main's commit naming h1's run (its Chain 4x slower) was created in the
    store as h1's credentials allow: h3 still compares with the push run (Chain regressed, above) and
    its comment says which stored run it ignored and why; ``benchtrail track`` ignores it too."""
    run, _ = story.recheck_timeout
    h1 = story.failures[0]
    comparison = json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(story.baseline.run_id), story.main)
    assert baseline["ignored"] == [{"commit": story.main, "run_id": str(h1.run_id), "attempt": 1,
                                    "reason": f"run {h1.run_id}/1: GitHub lists no such run attempt of "
                                    "commit "
                                              f"{story.main[:12]} in {REPOSITORY} (a pointer may only name a "
                                    "run "
                                              "of its own commit)"}]
    assert "⚠ Ignored 1 stored run that is not a trusted baseline: " in story.comments["recheck_timeout"]
    env = {**os.environ, "STORAGE_EMULATOR_HOST": story.emulator_url,
           "BENCHTRAIL_STAGING": str(tmp_path / "staging"),
           "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_API_URL": story.github.url,
           "GITHUB_TOKEN": "ghs_test", "BENCHTRAIL_TRUSTED_WORKFLOW": ".github/workflows/benchmarks.yml"}
    done = subprocess.run([sys.executable, "-m", "benchtrail.cli.app", "track", "--store",
                           story.harness.vars["BENCHTRAIL_STORE"], "--repo", str(story.repo), "--ref",
                           "main"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (f"run not used: {story.main[:7]}: not a trusted run: run {h1.run_id}/1: GitHub lists no such run "
            "attempt of commit") in done.stderr


def test_a_bad_trailer_edits_the_comment_to_name_the_bad_preset(story):
    run, poster = story.bad_trailer
    assert run.job("setup").result == "failure" and run.job("compile").result == "skipped", run.describe()
    comment = story.comments["bad_trailer"]
    assert "nonsense" in comment and "smoke" in comment, comment
    assert poster.conclusion == "success", poster.describe()


def test_a_title_only_edit_selects_nothing(story):
    run, _poster = story.title_edit
    setup = run.job("setup")
    assert setup.result == "success" and setup.outputs["has-benchmarks"] == "false", run.describe()
    assert {run.job(j).result for j in ("compile", "execute", "process")} == {"skipped"}
    assert not (run.artifacts / "comment").exists()
    assert story.comments["title_edit"] == story.comments["bad_trailer"]
    # Neither the bad trailer nor the title edit compared: h3 keeps its comparison's status.
    h3_run, _ = story.recheck_timeout
    assert story.gate(story.heads[2])[1].endswith(f"(success, run {h3_run.run_id}/1)")




def test_a_late_poster_for_an_older_head_leaves_the_current_heads_comment(story):
    story.title_edit
    current = story.comments["title_edit"]
    old_run, _ = story.failures
    late = story.post(old_run)
    assert "skipped-head-changed" in late.job("post/post").step("Post the comment").log, late.describe()
    (comment,) = story.bot_comments()
    assert comment["body"] == current

    # GitHub keeps one waiting run per concurrency group and cancels it when another queues. The
    # posters of two heads are in different groups, so a late poster cannot displace the current one.
    new_run, _ = story.recheck_timeout
    groups = {name: story.post(run).job("post/post").concurrency for name,
              run in (("old", old_run), ("new", new_run))}
    assert groups["old"] != groups["new"]
    assert pending_survivors([("new", groups["new"]), ("old", groups["old"])], running={"busy"}) == ["new",
                                                                                                     "old"]


# -- keyless store credentials ----------------------------------------------------------------------


def test_only_the_process_job_gets_an_oidc_token_and_it_authenticates_by_federation(story):
    run = story.baseline
    # GitHub's runner injects the OIDC request variables only where `id-token: write` is granted.
    with_token = sorted(job_id for job_id,
                        job in run.jobs.items() if "ACTIONS_ID_TOKEN_REQUEST_URL" in job.runner_env)
    assert with_token == ["benchmark/process"], run.describe()
    (auth,) = run.auth
    assert (auth["job"], auth["method"], auth["provider"], auth["service_account"]) == (
        "benchmark/process", "workload_identity_federation", WIF_PROVIDER, POSTSUBMIT_SA)  # a push to main
    assert auth["oidc_request_url"] == run.job("process").runner_env["ACTIONS_ID_TOKEN_REQUEST_URL"]
    process = run.job("process")
    assert process.step("Authenticate to the store (Workload Identity Federation)").outcome == "success"
    assert process.step("Authenticate to the store (service-account key)").outcome == "skipped"
    assert process.step("Store the run").outcome == "success", process.log
    # GitHub's record of the run that stored the baseline: what trusted-baseline lookups check.
    record = story.github.workflow_runs[(REPOSITORY, run.run_id, run.attempt)]
    assert {k: record[k] for k in ("event", "head_branch", "head_sha", "path", "status", "conclusion")} == {
        "event": "push", "head_branch": "main", "head_sha": story.main,
        "path": ".github/workflows/benchmarks.yml",
        "status": "completed", "conclusion": "success"}



def test_a_pr_run_authenticates_as_presubmit_and_checks_the_baselines_run_record(story):
    baseline, (run, _) = story.baseline, story.failures  # the shared chapters: no new run
    (auth,) = run.auth
    assert (auth["job"], auth["method"], auth["service_account"]) == (
        "benchmark/process", "workload_identity_federation", PRESUBMIT_SA)
    # compare took the stored baseline only after reading GitHub's record of the run that wrote it: the
    # runs GitHub lists for main's commit (the latest attempt of each; no further request was needed).
    listed = [c for c in story.github.calls("GET", f"/repos/{REPOSITORY}/actions/runs")
              if c.query.get("head_sha") == [story.main]]
    assert listed and {c.status for c in listed} == {200}, story.github.calls("GET")
    compare = run.job("process").step("Compare with the stored baseline")
    assert f"run {baseline.run_id}/{baseline.attempt}" in compare.log, compare.log


# -- after the late poster: h4, the last head ------------------------------------------------------








