"""What a run of the workflow harness (``tests/helpers/workflow_harness.py``) returns: ``RunResult`` and
``JobResult``.

A run's jobs (a called workflow's as ``<caller job>/<job>``), each with its steps (``StepResult``,
``tests/helpers/workflow_standins.py``), outputs, summary and logs, the run's artifacts folder and its
conclusion as GitHub computes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.workflow_standins import StepResult


@dataclass
class JobResult:
    result: str  # success | failure | skipped | cancelled
    outputs: dict[str, str] = field(default_factory=dict)
    steps: list[StepResult] = field(default_factory=list)
    runs_on: Any = None
    concurrency: str | None = None
    summary: str = ""
    #: Variables the runner adds to every step of this job beyond the usual ones (the OIDC request pair).
    runner_env: dict[str, str] = field(default_factory=dict)
    #: The job's ``continue-on-error``: its failure does not fail the run.
    continue_on_error: bool = False
    #: The deployment environment the job entered (``environment:``), or None.
    environment: str | None = None

    def step(self, name: str) -> StepResult:
        """The step called ``name`` (the last one, in a matrix job)."""
        found = [s for s in self.steps if s.name == name]
        assert found, f"no step {name!r}; steps: {[s.name for s in self.steps]}"
        return found[-1]

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name} [{s.outcome}, {s.seconds:.1f} s]\n{s.log}" for s in self.steps)


@dataclass
class RunResult:
    """One workflow run: its jobs (a called workflow's jobs as ``<caller job>/<job>``) and artifacts."""

    workflow: str
    event_name: str
    payload: dict[str, Any]
    sha: str
    run_id: int
    attempt: int
    artifacts: Path
    jobs: dict[str, JobResult] = field(default_factory=dict)
    error: str | None = None  # a workflow that fails to load runs no job
    #: One entry per successful google-github-actions/auth step: ``{"job", "method"
    #: ("workload_identity_federation" | "credentials_json"), "service_account", "provider",
    #: "project_id", "credentials_file", "oidc_request_url"}``; an actions/checkout with an ``ssh-key``:
    #: ``{"job", "instance", "method": "ssh-key", "key_file"}``.
    auth: list[dict[str, Any]] = field(default_factory=list)
    #: What deploy-pages deployed: ``{"job", "site" (the unpacked github-pages artifact), "page_url"}``.
    pages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def conclusion(self) -> str:
        results = [j.result for j in self.jobs.values()
                   if not (j.continue_on_error and j.result == "failure")]
        if self.error or "failure" in results:
            return "failure"
        return "cancelled" if "cancelled" in results else "success"

    def job(self, suffix: str) -> JobResult:
        """The job whose id is ``suffix`` or ends with ``/suffix``."""
        found = [j for k, j in self.jobs.items() if k == suffix or k.endswith("/" + suffix)]
        assert len(found) == 1, f"job {suffix!r}: found {len(found)} in {list(self.jobs)}"
        return found[0]

    def describe(self) -> str:
        """Every job's result and its steps' logs (for assertion messages)."""
        parts = [f"run {self.run_id} ({self.workflow}, {self.event_name}): {self.conclusion}"
                 + (f"; error: {self.error}" if self.error else "")]
        for job_id, job in self.jobs.items():
            parts.append(f"== {job_id}: {job.result}\n{job.log[-6000:]}")
        return "\n".join(parts)
