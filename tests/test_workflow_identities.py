"""Who holds which identity: only the poster may set commit statuses (the required ``benchtrail/gate``);
the store jobs pick federation, a key or the runner's own credentials, the postsubmit identity only for
postsubmit runs, and a pull request's jobs hold only the presubmit one (docs/store.md, docs/workflows.md)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.helpers.actions_expressions import condition, interpolate
from tests.helpers.workflow_checks import (
    AUTH_ACTION,
    KEY_STEP,
    ROOT,
    WIF_STEP,
    WORKFLOW_FILES,
    WORKFLOWS,
    read_workflow,
)


def test_only_the_poster_workflow_may_write_statuses():
    """The required `benchtrail/gate` status: only the poster (default-branch code, no PR code run) sets it,
    in benchtrail's workflows, the adoption example's callers and `benchtrail init`'s templates."""
    files = [*WORKFLOWS.glob("*.yml"), *(ROOT / "docs" / "examples").rglob(".github/workflows/*.yml"),
             *(ROOT / "build_tools" / "benchtrail" / "data" / "init").glob("*.yml.template")]
    granted = set()
    for path in files:
        text = path.read_text()
        for field, value in (("{pin_comment}", ""), ("{pin_note}", ""), ("{repository}", "o/b"),
                             ("{commit}", "0")):
            text = text.replace(field, value)
        for job_id, job in yaml.safe_load(text)["jobs"].items():
            if (job.get("permissions") or {}).get("statuses") == "write":
                granted.add((path.relative_to(ROOT).as_posix(), job_id))
            assert (job.get("permissions") or {}).get("statuses") in (None, "write"), (path, job_id)
    assert granted == {(".github/workflows/post_benchmark_comment.yml", "gate"),
                       ("docs/examples/adopting-classes/.github/workflows/post_benchmark_comment.yml",
                        "post"),
                       ("build_tools/benchtrail/data/init/post_benchmark_comment.yml.template", "post")}
    assert read_workflow("post_benchmark_comment.yml")["jobs"]["gate"]["permissions"] == {
        "actions": "read", "contents": "read", "pull-requests": "read", "statuses": "write"}


def test_a_pull_requests_jobs_hold_only_the_presubmit_identity():
    """Every value that names the postsubmit identity (service account, key, environment, store root) gives a
    ``pull_request`` run the presubmit one, even one whose setup claims ``postsubmit``; and no job a pull
    request reaches may write contents."""
    post = {"BENCHTRAIL_POSTSUBMIT_SERVICE_ACCOUNT": "POST-SA",
            "BENCHTRAIL_PRESUBMIT_SERVICE_ACCOUNT": "pre-sa",
            "BENCHTRAIL_POSTSUBMIT_STORE_CREDENTIALS": "POST-KEY", "BENCHTRAIL_STORE_CREDENTIALS": "pre-key"}
    context = {"github": {"event_name": "pull_request", "ref": "refs/heads/main",
                          "repository": "octo/project",
                          "event": {"pull_request": {"head": {"repo": {"full_name": "octo/project"}}},
                                    "repository": {"default_branch": "main"}}},
               "needs": {"setup": {"outputs": {"postsubmit": "true"}}}, "vars": post, "secrets": post,
               "inputs": {}, "env": {}}
    checked = 0
    for name in ("benchmark.yml", "post_benchmark_comment.yml", "ci.yml"):
        for job_id, job in read_workflow(name)["jobs"].items():
            assert (job.get("permissions") or {}).get("contents") != "write", (name, job_id)
            for text in _strings(job):
                if "postsubmit" in text.lower() and "${{" in text:
                    value = str(interpolate(text, context))
                    assert "POST-" not in value and "benchtrail-postsubmit" not in value, (name, job_id, text,
                                                                                           value)
                    checked += 1
    assert checked >= 4  # the service account, the key, the environment and the store root


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _store_auth(name: str, job_id: str, event: str = "push", ref: str = "refs/heads/main", fork: bool = False,
                provider: str = "projects/1/locations/global/workloadIdentityPools/github/providers/repo",
                key: str = "", post_key: str = "") -> tuple[str, str | None, str | None]:
    """(BENCHTRAIL_STORE_AUTH, the service account, the credentials_json) of a store job for one event,
    through the harness's expression evaluator. GitHub passes a fork's PR run no secrets; setup's
    ``postsubmit`` output is what ``benchtrail configure`` decides for the event; ``post_key`` is the
    postsubmit environment's secret, visible only to a job in that environment (a postsubmit run)."""
    from benchtrail.github.selection import postsubmit_branch

    job = read_workflow(name)["jobs"][job_id]
    postsubmit = event in ("push", "workflow_dispatch") and postsubmit_branch(
        {"ref": ref, "repository": {"default_branch": "main"}}, {})
    repo = "octo/project"
    pull = {"head": {"repo": {"full_name": "fork/project" if fork
                              else repo}}} if event == "pull_request" else None
    context = {"github": {"event_name": event, "ref": ref, "repository": repo,
                          "event": {"pull_request": pull, "repository": {"default_branch": "main"}}},
               "vars": {"BENCHTRAIL_STORE": "gs://bucket/prefix", "BENCHTRAIL_WIF_PROVIDER": provider,
                        "BENCHTRAIL_POSTSUBMIT_SERVICE_ACCOUNT": "post@proj.iam.gserviceaccount.com",
                        "BENCHTRAIL_PRESUBMIT_SERVICE_ACCOUNT": "pre@proj.iam.gserviceaccount.com",
                        "BENCHTRAIL_TRACKER_SERVICE_ACCOUNT": "tracker@proj.iam.gserviceaccount.com"},
               "secrets": {} if fork or not key else {"BENCHTRAIL_STORE_CREDENTIALS": key,
                                                      **({"BENCHTRAIL_POSTSUBMIT_STORE_CREDENTIALS": post_key}
                                                         if post_key and postsubmit else {})}, "inputs": {},
               "needs": {"setup": {"outputs": {"postsubmit": "true" if postsubmit else ""}}}}
    mode = interpolate(job["env"]["BENCHTRAIL_STORE_AUTH"], context)
    context["env"] = {"BENCHTRAIL_STORE": "gs://bucket/prefix", "BENCHTRAIL_STORE_AUTH": mode}
    steps = {step.get("name"): step for step in job["steps"]}
    ran = {n: condition(steps[n]["if"], context, {"success": True, "failure": False, "always": True,
                                                  "cancelled": False}) for n in (WIF_STEP, KEY_STEP)}
    assert not all(ran.values())
    assert ran[WIF_STEP] == (mode == "federation") and ran[KEY_STEP] == (mode == "key")
    account = interpolate(steps[WIF_STEP]["with"]["service_account"], context) if ran[WIF_STEP] else None
    credentials = interpolate(steps[KEY_STEP]["with"]["credentials_json"], context) if ran[KEY_STEP] else None
    return mode, account, credentials


def test_the_process_job_authenticates_by_federation_else_with_the_key_else_as_the_runner():
    steps = {step.get("name"): step for step in read_workflow("benchmark.yml")["jobs"]["process"]["steps"]}
    for step_name in (WIF_STEP, KEY_STEP):
        assert steps[step_name]["uses"].startswith(AUTH_ACTION), step_name
    assert set(steps[WIF_STEP]["with"]) == {"workload_identity_provider", "service_account"}
    assert steps[WIF_STEP]["with"]["workload_identity_provider"] == "${{ vars.BENCHTRAIL_WIF_PROVIDER }}"
    assert set(steps[KEY_STEP]["with"]) == {"credentials_json"}
    post, pre = "post@proj.iam.gserviceaccount.com", "pre@proj.iam.gserviceaccount.com"
    # Federation: the postsubmit account for pushes and manual runs of the default and release branches only.
    assert _store_auth("benchmark.yml", "process") == ("federation", post, None)
    assert _store_auth("benchmark.yml", "process", ref="refs/heads/release-1.2") == ("federation", post, None)
    assert _store_auth("benchmark.yml", "process", "workflow_dispatch") == ("federation", post, None)
    assert _store_auth("benchmark.yml", "process", "workflow_dispatch", "refs/heads/topic") == ("federation",
                                                                                                pre, None)
    assert _store_auth("benchmark.yml", "process", "pull_request", "refs/pull/7/merge") == ("federation", pre,
                                                                                            None)
    # A labelled fork PR: no OIDC token and no secrets, so no auth step (the runner's own credentials).
    assert _store_auth("benchmark.yml", "process", "pull_request", "refs/pull/7/merge", fork=True,
                       key="{}") == ("runner", None, None)
    # The key only without a provider; neither: the runner's own credentials.
    key = '{"type": "service_account"}'
    assert _store_auth("benchmark.yml", "process", provider="", key=key) == ("key", None, key)
    assert _store_auth("benchmark.yml", "process", provider="", key="") == ("runner", None, None)
    assert _store_auth("benchmark.yml", "process", key=key)[0] == "federation"
    # Two keys: the postsubmit one for postsubmit runs only (it lives in the `benchtrail-postsubmit`
    # environment).
    assert _store_auth("benchmark.yml", "process", provider="", key=key, post_key="POST") == ("key", None,
                                                                                              "POST")
    assert _store_auth("benchmark.yml", "process", "pull_request", "refs/pull/7/merge", provider="", key=key,
                       post_key="POST") == ("key", None, key)
    # The auth steps follow every checkout (a checkout would remove the credentials file) and
    # precede every step that reads or writes the store; the hand-written key file is gone.
    names = list(steps)
    checkouts = [i for i,
                 step in enumerate(steps.values()) if step.get("uses", "").startswith("actions/checkout@")]
    store_steps = [i for i, step in enumerate(steps.values()) if "--store" in step.get("run", "")]
    assert max(checkouts) < names.index(WIF_STEP) < names.index(KEY_STEP) < min(store_steps)
    assert not any("GOOGLE_APPLICATION_CREDENTIALS" in step.get("run", "") for step in steps.values())
    # No other job sees a secret.
    for name in WORKFLOW_FILES:
        for job_id, job in read_workflow(name)["jobs"].items():
            text = yaml.safe_dump(job)
            if (name, job_id) not in (("benchmark.yml", "process"), ("track_regressions.yml", "track")):
                assert "secrets." not in text, (name, job_id)


def test_the_tracker_reads_the_store_as_the_tracker_account_or_with_the_key():
    tracker = "tracker@proj.iam.gserviceaccount.com"
    assert _store_auth("track_regressions.yml", "track", "workflow_run") == ("federation", tracker, None)
    assert _store_auth("track_regressions.yml", "track", "workflow_run", provider="", key="k") == ("key",
                                                                                                   None, "k")
    assert _store_auth("track_regressions.yml", "track", "workflow_run", provider="") == ("runner", None,
                                                                                          None)
