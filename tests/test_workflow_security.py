"""The workflows against DESIGN.md's security rules: zizmor, permissions, pins, untrusted text, credentials."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.workflow_checks import (
    AUTH_ACTION,
    KEY_STEP,
    WIF_STEP,
    WORKFLOW_FILES,
    WORKFLOWS,
    benchtrail_args,
    caller_jobs,
    describe_findings,
    evaluate_condition,
    joined_lines,
    read_example_workflow,
    read_workflow,
    steps_of,
    triggers_of,
    zizmor_findings,
)

#: Workflows triggered by ``workflow_run`` (default-branch code only), each with a suppressed
#: zizmor dangerous-triggers finding and a reason.
WORKFLOW_RUN_FILES = ("post_benchmark_comment.yml", "track_regressions.yml")
# `owner/repo[/path]@<40 hex> # vX.Y.Z`, the form Dependabot keeps up to date.
PINNED_USES = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+\s*$")
# Untrusted PR text that must never be expanded by `${{ }}` inside a `run:` block.
PR_TEXT_EXPRESSIONS = re.compile(
    r"\$\{\{[^}]*(github\.event\.pull_request\.(body|title|head\.ref|head\.label)|github\.head_ref"
    r"|github\.event\.(issue|comment|review)\.|github\.event\.workflow_run\.(head_branch|display_title))"
)


# -- zizmor -----------------------------------------------------------------------------------


def test_zizmor_finds_nothing_of_high_severity():
    findings, _ = zizmor_findings(WORKFLOWS)
    high = [f for f in findings if f["determinations"]["severity"] == "High"]
    assert describe_findings(high) == []
    # The poster's workflow_run trigger is suppressed inline, so it is not reported as a finding.
    assert "dangerous-triggers" not in {f["ident"] for f in findings}


def test_zizmor_reports_no_findings_at_all():
    findings, _ = zizmor_findings(WORKFLOWS)
    assert describe_findings(findings) == []


@pytest.mark.parametrize("name", WORKFLOW_RUN_FILES)
def test_the_only_zizmor_suppressions_are_the_workflow_run_triggers(tmp_path, name):
    suppressions = [(path.name, line.split("# zizmor:", 1)[1].strip())
                    for path in sorted(WORKFLOWS.glob("*.yml"))
                    for line in path.read_text().splitlines() if "# zizmor:" in line]
    assert sorted(n for n, _ in suppressions) == sorted(WORKFLOW_RUN_FILES)
    (text,) = [t for n, t in suppressions if n == name]
    assert re.fullmatch(r"ignore\[dangerous-triggers\] \S.{10,}", text), text  # with a reason
    # Without the comment zizmor does flag the trigger: the suppression is doing real work.
    unsuppressed = tmp_path / name
    unsuppressed.write_text(re.sub(r" *# zizmor:.*", "", (WORKFLOWS / name).read_text()))
    findings, _ = zizmor_findings(unsuppressed)
    assert [(f["ident"], f["determinations"]["severity"]) for f in findings] == [("dangerous-triggers",
                                                                                  "High")]


# -- permissions ----------------------------------------------------------------------------------


def test_top_level_permissions_grant_nothing_or_read_only():
    assert read_workflow("benchmark.yml")["permissions"] == {}
    assert read_workflow("post_benchmark_comment.yml")["permissions"] == {}
    assert read_workflow("track_regressions.yml")["permissions"] == {}
    assert read_workflow("ci.yml")["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_every_job_declares_its_own_permissions(name):
    for job_id, job in read_workflow(name)["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"{name}: job {job_id} lacks a permissions map"


def test_only_the_poster_and_the_tracker_may_write_the_poster_to_prs_the_tracker_to_issues():
    # `id-token: write` writes nothing: it lets a job ask GitHub for an OIDC token (the store's
    # keyless credentials); test_id_token_write_is_granted_exactly_to_the_jobs_that_touch_the_store.
    writes = sorted(
        (name, job_id, scope)
        for name in WORKFLOW_FILES
        for job_id, job in read_workflow(name)["jobs"].items()
        for scope, access in job["permissions"].items()
        if access != "read" and scope != "id-token"
    )
    # The pages job deploys the git store's dashboard to GitHub Pages: it writes no code, PR or issue.
    assert writes == [("benchmark.yml", "pages", "pages"),
                      ("post_benchmark_comment.yml", "gate", "statuses"),
                      ("post_benchmark_comment.yml", "post", "pull-requests"),
                      ("track_regressions.yml", "track", "issues")]
    assert read_workflow("track_regressions.yml")["jobs"]["track"]["permissions"] == {
        "actions": "read", "contents": "read", "id-token": "write", "issues": "write"}
    assert read_workflow("post_benchmark_comment.yml")["jobs"]["post"]["permissions"] == {
        "actions": "read", "contents": "read", "pull-requests": "write"}


def test_benchmark_jobs_read_contents_at_most():
    jobs = read_workflow("benchmark.yml")["jobs"]
    assert {job_id: job["permissions"] for job_id, job in jobs.items()} == {
        "setup": {"contents": "read", "pull-requests": "read"},  # a re-run re-reads the PR's trailer
        "compile": {"contents": "read"},
        "compile-cuda": {"contents": "read"},
        "execute": {"contents": "read"},
        # Trusted baselines: compare and dashboard read the workflow runs that stored them; the
        # store's keyless credentials (Workload Identity Federation) need the job's OIDC token.
        "process": {"actions": "read", "contents": "read", "id-token": "write"},
        # The history of a git: store on GitHub Pages: deploy-pages needs the OIDC token and pages: write.
        "pages": {"actions": "read", "contents": "read", "pages": "write", "id-token": "write"},
        "summary": {},
    }


# -- actions are pinned ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_every_uses_is_pinned_by_a_full_commit_sha_with_its_version(name):
    lines = [line for line in (WORKFLOWS / name).read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:",
                                                                                      line)]
    assert lines, name
    for line in lines:
        assert PINNED_USES.match(line), f"{name}: not pinned by SHA with a `# vX.Y.Z` comment: {line.strip()}"
    parsed = [step["uses"] for _, step in steps_of(read_workflow(name)) if "uses" in step]
    assert len(parsed) == len(lines)
    assert all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses) for uses in parsed), parsed


def test_each_action_is_pinned_to_one_sha_everywhere():
    pins: dict[str, set[str]] = {}
    for name in WORKFLOW_FILES:
        for _, step in steps_of(read_workflow(name)):
            if "uses" in step:
                action, sha = step["uses"].split("@")
                pins.setdefault(action, set()).add(sha)
    assert {action: len(shas) for action, shas in pins.items()} == {
        "actions/checkout": 1, "actions/setup-python": 1, "actions/upload-artifact": 1,
        "actions/download-artifact": 1, "google-github-actions/auth": 1, "actions/upload-pages-artifact": 1,
        "actions/deploy-pages": 1}


# -- untrusted text -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_no_run_block_expands_pr_text(name):
    for job_id, step in steps_of(read_workflow(name)):
        run = step.get("run", "")
        assert "${{ github.event.pull_request.body" not in run, (name, job_id)
        assert "${{ github.event.pull_request.title" not in run, (name, job_id)
        assert "head_ref" not in run, (name, job_id)
        assert not PR_TEXT_EXPRESSIONS.search(run), (name, job_id, run)


def test_benchmark_and_poster_run_blocks_expand_no_expressions_at_all():
    # Everything a script needs arrives through `env:`; then no value can become shell code.
    for name in ("benchmark.yml", "post_benchmark_comment.yml"):
        for job_id, step in steps_of(read_workflow(name)):
            assert "${{" not in step.get("run", ""), (name, job_id, step.get("name"))


def test_configure_reads_the_pr_from_the_event_file_only():
    steps = {step.get("id"): step for _, step in steps_of(read_workflow("benchmark.yml")) if step.get("id")}
    configure = steps["configure"]
    assert configure["run"].strip() == ('.venv/bin/benchtrail configure --error-comment '
                                        '"$RUNNER_TEMP/selection-error"')
    # The token (read-only: the setup job holds contents and pull-requests read) re-reads the PR on a re-run.
    assert configure["env"] == {"BENCHMARK_PRESETS_INPUT": "${{ inputs.benchmark-presets }}",
                                "BENCHTRAIL_RELEASE_BRANCHES": "${{ vars.BENCHTRAIL_RELEASE_BRANCHES }}",
                                "GITHUB_TOKEN": "${{ github.token }}"}


def test_every_checkout_drops_its_credentials():
    """Every checkout but one drops its credentials: the process job's of a postsubmit run with a git: store
    keeps the deploy key (an environment secret of benchtrail-postsubmit), which pushes to the data branch."""
    kept = []
    for name in WORKFLOW_FILES:
        for job_id, step in steps_of(read_workflow(name)):
            if step.get("uses", "").startswith("actions/checkout@"):
                if step["with"]["persist-credentials"] is not False:
                    kept.append((name, job_id, step["with"]["persist-credentials"], step["with"]["ssh-key"]))
    writer = "env.POSTSUBMIT == 'true' && startsWith(env.BENCHTRAIL_STORE, 'git:')"
    assert kept == [("benchmark.yml", "process", f"${{{{ {writer} }}}}",
                     f"${{{{ {writer} && secrets.BENCHTRAIL_DEPLOY_KEY || '' }}}}")]
    process = read_workflow("benchmark.yml")["jobs"]["process"]
    assert " ".join(process["environment"].split()) == (
        "${{ (github.event_name == 'push' || github.event_name == 'workflow_dispatch') && "
        "needs.setup.outputs.postsubmit == 'true' && 'benchtrail-postsubmit' || '' }}")


# -- the poster -----------------------------------------------------------------------------------


def test_the_poster_runs_default_branch_code_on_untrusted_data():
    job = read_workflow("post_benchmark_comment.yml")["jobs"]["post"]
    assert job["if"] == ("github.event.workflow_run.event == 'pull_request' && github.event.action == "
                         "'completed'")
    steps = job["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    download = next(s for s in steps if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"] == {
        "pattern": "comment",
        "merge-multiple": True,
        "path": "${{ runner.temp }}/benchmark-comment",  # outside the checkout: cannot replace our code
        "run-id": "${{ github.event.workflow_run.id }}",
        "github-token": "${{ github.token }}",
    }
    post = steps[-1]
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert '--head-sha "$HEAD_SHA"' in post["run"]
    assert ".venv/bin/benchtrail post --comment" in post["run"]
    # The artifact's own head SHA must agree with the one GitHub reports.
    assert '[ "$artifact_sha" != "$HEAD_SHA" ]' in post["run"]


def test_the_comment_artifact_holds_comment_json_and_pr_json():
    process = read_workflow("benchmark.yml")["jobs"]["process"]
    by_name = {step.get("name"): step for step in process["steps"]}
    prepare = by_name["Prepare the comment artifact"]
    assert prepare["env"] == {"PR_NUMBER": "${{ github.event.pull_request.number }}",
                              "HEAD_SHA": "${{ github.event.pull_request.head.sha }}",
                              "RECHECK_OUTCOME": "${{ steps.recheck.outcome }}"}
    assert "comment-artifact/comment.json" in prepare["run"] and "comment-artifact/pr.json" in prepare["run"]
    upload = by_name["Upload the comment artifact"]
    assert upload["with"]["name"] == "comment" and upload["with"]["path"] == "comment-artifact/"


def test_pr_json_written_by_the_process_job_passes_the_posters_checks(tmp_path):
    """Run the process job's jq line and the poster's jq checks on the file it writes."""
    if shutil.which("jq") is None:
        pytest.skip("the jq executable is not installed")
    prepare = next(step for _, step in steps_of(read_workflow("benchmark.yml"))
                   if step.get("name") == "Prepare the comment artifact")
    write_line = next(line for line in joined_lines(prepare["run"]) if line.startswith("jq -n"))
    sha = "0123456789abcdef0123456789abcdef01234567"
    env = {"PR_NUMBER": "42", "HEAD_SHA": sha, "PATH": "/usr/bin:/bin"}
    (tmp_path / "comment-artifact").mkdir()
    subprocess.run(["bash", "-c", write_line], cwd=tmp_path, env=env, check=True)
    pr = json.loads((tmp_path / "comment-artifact/pr.json").read_text())
    assert pr == {"schema_version": 1, "pr_number": 42, "head_sha": sha}
    post = read_workflow("post_benchmark_comment.yml")["jobs"]["post"]["steps"][-1]["run"]
    checks = [line.split("=", 1)[1].strip()[2:-1] for line in post.splitlines() if "=$(jq -er" in line]
    assert len(checks) == 2
    outputs = [subprocess.run(["bash", "-c", c], cwd=tmp_path, env={**env, "COMMENT_DIR": "comment-artifact"},
                              capture_output=True, text=True) for c in checks]
    assert [(o.returncode, o.stdout.strip()) for o in outputs] == [(0, "42"), (0, sha)]
    # A forged number or SHA is refused (jq -e exits non-zero).
    (tmp_path / "comment-artifact/pr.json").write_text('{"pr_number": "42; rm -rf /", "head_sha": "HEAD"}')
    refused = [subprocess.run(["bash", "-c", c], cwd=tmp_path, env={**env, "COMMENT_DIR": "comment-artifact"},
                              capture_output=True, text=True) for c in checks]
    assert [(o.returncode != 0, o.stdout.strip()) for o in refused] == [(True, ""), (True, "")]


# -- the store's authentication -------------------------------------------------------------------



def _touches_store(job: dict[str, Any]) -> bool:
    return any("--store" in step.get("run", "") for step in job.get("steps", []))


def test_id_token_write_is_granted_exactly_to_the_jobs_that_touch_the_store():
    granted, touching = set(), set()
    for name in WORKFLOW_FILES:
        workflow = read_workflow(name)
        assert "id-token" not in workflow["permissions"], name  # never for a whole workflow
        for job_id, job in workflow["jobs"].items():
            assert job["permissions"].get("id-token", "none") in ("none", "write"), (name, job_id)
            if job["permissions"].get("id-token") == "write":
                granted.add((name, job_id))
            if job_id == "pages":  # reads a git: store only; its token serves deploy-pages
                assert "startsWith(inputs.store || vars.BENCHTRAIL_STORE || 'git:', 'git:')" in job["if"]
                assert [s["uses"].split("@")[0] for s in job["steps"] if "deploy" in s.get("uses", "")] == [
                    "actions/deploy-pages"]
                granted.discard((name, job_id))
            elif _touches_store(job):
                touching.add((name, job_id))
                auth = [step for step in job["steps"] if step.get("uses", "").startswith(AUTH_ACTION)]
                assert [step["name"] for step in auth] == [WIF_STEP, KEY_STEP], (name, job_id)
    # A caller grants it only to the job whose called workflow has a store job.
    for name, job_id, job, called in caller_jobs():
        assert read_example_workflow(name)["permissions"] == {}
        if job["permissions"].get("id-token") == "write":
            granted.add((f"example/{name}", job_id))
        if any(_touches_store(called_job) for called_job in read_workflow(called)["jobs"].values()):
            touching.add((f"example/{name}", job_id))
    assert touching == {("benchmark.yml", "process"), ("track_regressions.yml", "track"),
                        ("example/benchmarks.yml", "benchmark")}
    assert granted == touching


def test_the_auth_stand_in_needs_an_oidc_token_for_federation_and_exports_the_credentials_file(tmp_path):
    """tests/helpers/workflow_standins.py's google-github-actions/auth, as the harness runs it."""
    from types import SimpleNamespace

    from tests.helpers.workflow_standins import AUTH_OIDC_WARNING, google_auth

    run = SimpleNamespace(result=SimpleNamespace(auth=[]))
    workspace, github_env = tmp_path / "ws", tmp_path / "github_env"
    workspace.mkdir()
    (workspace / "README.md").write_text("checked out\n")
    provider = "projects/1/locations/global/workloadIdentityPools/github/providers/repo"
    wif = {"workload_identity_provider": provider, "service_account": "pre@proj-1.iam.gserviceaccount.com"}
    oidc = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.invalid/idtoken?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-token"}
    github_env.write_text("")
    # No OIDC variables (no `id-token: write`, or a fork's PR): the action's own error.
    refused = google_auth(run, "auth", wif, workspace, {}, "benchmark/process-0", github_env)
    assert refused.outcome == "failure" and refused.log.endswith(AUTH_OIDC_WARNING)
    assert github_env.read_text() == "" and run.result.auth == [] and not list(workspace.glob("gha-creds-*"))
    both = google_auth(run, "auth", {**wif, "credentials_json": "{}"}, workspace, oidc, "process-0",
                       github_env)
    assert both.outcome == "failure" and 'exactly one of "workload_identity_provider"' in both.log
    done = google_auth(run, "auth", wif, workspace, oidc, "benchmark/process-0", github_env)
    assert done.outcome == "success", done.log
    (creds,) = workspace.glob("gha-creds-*.json")
    assert re.fullmatch(r"gha-creds-[0-9a-f]{16}\.json", creds.name)
    config = json.loads(creds.read_text())
    assert config["type"] == "external_account" and config["audience"] == f"//iam.googleapis.com/{provider}"
    assert config["credential_source"]["url"].startswith(oidc["ACTIONS_ID_TOKEN_REQUEST_URL"] + "&audience=")
    assert config["service_account_impersonation_url"].endswith(
        "/serviceAccounts/pre@proj-1.iam.gserviceaccount.com:generateAccessToken")
    exported = dict(line.split("=", 1) for line in github_env.read_text().splitlines())
    assert {exported[k] for k in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE",
                                  "GOOGLE_GHA_CREDS_PATH")} == {str(creds)}
    assert exported["GOOGLE_CLOUD_PROJECT"] == "proj-1"  # from the service account's e-mail
    assert run.result.auth[0]["job"] == "benchmark/process"
    assert run.result.auth[0]["method"] == "workload_identity_federation"
    # A key needs no OIDC token.
    key = ('{"type": "service_account", "project_id": "proj-2", "client_email": '
           '"k@proj-2.iam.gserviceaccount.com"}')
    github_env.write_text("")
    keyed = google_auth(run, "auth", {"credentials_json": key}, workspace, {}, "track-0", github_env)
    assert keyed.outcome == "success", keyed.log
    assert [(a["job"], a["method"], a["service_account"]) for a in run.result.auth[1:]] == [
        ("track", "credentials_json", "k@proj-2.iam.gserviceaccount.com")]
    exported = dict(line.split("=", 1) for line in github_env.read_text().splitlines())
    assert json.loads(Path(exported["GOOGLE_APPLICATION_CREDENTIALS"]).read_text()) == json.loads(key)
    assert exported["GOOGLE_CLOUD_PROJECT"] == "proj-2"


# -- post-merge tracking ---------------------------------------------------------------------------


def test_the_tracker_runs_track_only_after_a_successful_push_run_of_the_default_branch():
    workflow = read_workflow("track_regressions.yml")
    assert triggers_of(workflow) == {"workflow_run": {"workflows": ["benchmark"], "types": ["completed"]}}
    job = workflow["jobs"]["track"]
    assert job["runs-on"] == "ubuntu-latest"  # no self-hosted runner: it measures nothing
    assert job["concurrency"] == {"group": "track-regressions", "cancel-in-progress": False}

    def runs(event, conclusion, branch, store="gs://bucket/main"):
        return evaluate_condition(job["if"], {
            "github.event.workflow_run.event": event, "github.event.workflow_run.conclusion": conclusion,
            "github.event.workflow_run.head_branch": branch, "github.event.repository.default_branch": "main",
            "vars.BENCHTRAIL_STORE": store})

    assert runs("push", "success", "main")
    assert not runs("pull_request", "success", "main")  # PR runs never reach the issue token
    assert not runs("push", "failure", "main")
    assert not runs("push", "success", "topic")
    assert not runs("push", "success", "main", store="")
    checkout = job["steps"][0]
    assert checkout["with"] == {"ref": "${{ github.event.workflow_run.head_sha }}", "fetch-depth": 0,
                                "persist-credentials": False}
    step = next(s for s in job["steps"] if "benchtrail track" in s.get("run", ""))
    args = benchtrail_args(step["run"], {"BENCHTRAIL_STORE": "gs://bucket/main", "HEAD_SHA": "a" * 40,
                                         "GITHUB_REPOSITORY": "owner/benchtrail", "RUNNER_TEMP": "/tmp"})
    assert args.func.__name__ == "cmd_track" and args.post
    assert (args.store, args.ref, args.repo_name) == ("gs://bucket/main", "a" * 40, "owner/benchtrail")
    # Trusted runs: those of the workflow that triggered this run (benchmark.yml), per GitHub's record.
    assert step["env"] == {"GITHUB_TOKEN": "${{ github.token }}",
                           "HEAD_SHA": "${{ github.event.workflow_run.head_sha }}",
                           "BENCHTRAIL_TRUSTED_WORKFLOW": "${{ github.event.workflow_run.path }}"}
    # The issue token reaches this step only, the key only the fallback auth step (no other step).
    assert [st.get("name") for st in job["steps"] if "github.token" in str(st)] == [step["name"]]
    assert [st.get("name") for st in job["steps"] if "secrets." in str(st)] == [KEY_STEP]
    names = [st.get("name") for st in job["steps"]]
    assert names.index(WIF_STEP) < names.index(KEY_STEP) < names.index(step["name"])
