"""Who holds which identity: only the poster may set commit statuses (the required ``benchtrail/gate``),
and a pull request's jobs hold only the presubmit store identity (docs/store.md, docs/workflows.md)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.actions_expressions import interpolate
from tests.workflow_checks import ROOT, WORKFLOWS, _load


def test_only_the_poster_workflow_may_write_statuses():
    """The required `benchtrail/gate` status: only the poster (default-branch code, no PR code run) sets it,
    in benchtrail's workflows, the adoption example's callers and `benchtrail init`'s templates."""
    files = [*WORKFLOWS.glob("*.yml"), *(ROOT / "docs" / "examples").rglob(".github/workflows/*.yml"),
             *(ROOT / "build_tools" / "benchtrail" / "data" / "init").glob("*.yml.template")]
    granted = set()
    for path in files:
        text = path.read_text()
        for field, value in (("{pin_comment}", ""), ("{pin_note}", ""), ("{repository}", "o/b"), ("{commit}", "0")):
            text = text.replace(field, value)
        for job_id, job in yaml.safe_load(text)["jobs"].items():
            if (job.get("permissions") or {}).get("statuses") == "write":
                granted.add((path.relative_to(ROOT).as_posix(), job_id))
            assert (job.get("permissions") or {}).get("statuses") in (None, "write"), (path, job_id)
    assert granted == {(".github/workflows/post_benchmark_comment.yml", "gate"),
                       ("docs/examples/adopting-classes/.github/workflows/post_benchmark_comment.yml", "post"),
                       ("build_tools/benchtrail/data/init/post_benchmark_comment.yml.template", "post")}
    assert _load("post_benchmark_comment.yml")["jobs"]["gate"]["permissions"] == {
        "actions": "read", "contents": "read", "pull-requests": "read", "statuses": "write"}


def test_a_pull_requests_jobs_hold_only_the_presubmit_identity():
    """Every value that names the postsubmit identity (service account, key, environment, store root) gives a
    ``pull_request`` run the presubmit one, even one whose setup claims ``postsubmit``; and no job a pull
    request reaches may write contents."""
    post = {"BENCHTRAIL_POSTSUBMIT_SERVICE_ACCOUNT": "POST-SA", "BENCHTRAIL_PRESUBMIT_SERVICE_ACCOUNT": "pre-sa",
            "BENCHTRAIL_POSTSUBMIT_STORE_CREDENTIALS": "POST-KEY", "BENCHTRAIL_STORE_CREDENTIALS": "pre-key"}
    context = {"github": {"event_name": "pull_request", "ref": "refs/heads/main", "repository": "octo/project",
                          "event": {"pull_request": {"head": {"repo": {"full_name": "octo/project"}}},
                                    "repository": {"default_branch": "main"}}},
               "needs": {"setup": {"outputs": {"postsubmit": "true"}}}, "vars": post, "secrets": post,
               "inputs": {}, "env": {}}
    checked = 0
    for name in ("benchmark.yml", "post_benchmark_comment.yml", "ci.yml"):
        for job_id, job in _load(name)["jobs"].items():
            assert (job.get("permissions") or {}).get("contents") != "write", (name, job_id)
            for text in _strings(job):
                if "postsubmit" in text.lower() and "${{" in text:
                    value = str(interpolate(text, context))
                    assert "POST-" not in value and "benchtrail-postsubmit" not in value, (name, job_id, text, value)
                    checked += 1
    assert checked >= 4  # the service account, the key, the environment and the store root


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []
