"""Execute a GitHub Actions workflow file for one event, here, as GitHub's runners would.

What it does as GitHub does: job order from ``needs``; every job- and step-level ``if:`` (with
``success()``, ``failure()``, ``always()``, ``cancelled()`` and ``needs.<job>.result``); every
``${{ }}`` (``tests/helpers/actions_expressions.py``); workflow, job and step ``env``; ``defaults.run``
(shell and working directory); ``run:`` steps in ``bash --noprofile --norc -eo pipefail``; step
outputs, ``$GITHUB_ENV``, ``$GITHUB_PATH`` and ``$GITHUB_STEP_SUMMARY``; job outputs; a
``strategy.matrix`` (``include`` from ``fromJSON``); ``continue-on-error``; artifacts uploaded and
downloaded by name or pattern (``merge-multiple``, another run's with ``run-id``); reusable
workflows (``jobs.<id>.uses``, ``on.workflow_call`` inputs and secrets checked, and GitHub's
permission rule: a called job may ask for no more than the calling job has, else the whole run
fails when it loads). Each job gets a fresh workspace, as on a fresh runner.

What the runner gives each job as GitHub does: ``GITHUB_WORKFLOW_REF``
(``owner/repo/.github/workflows/<file>@<ref>``) and ``GITHUB_WORKFLOW_SHA`` name the run's top-level
workflow (the caller's, in a called workflow), and the OIDC variables ``ACTIONS_ID_TOKEN_REQUEST_URL``
and ``ACTIONS_ID_TOKEN_REQUEST_TOKEN`` exist only in a job whose effective permissions grant
``id-token: write`` (a called job: its own, capped by the calling job's) in a run that is not a
``pull_request`` from a fork; such a run also gets no secrets. With ``github_server`` (the GitHub
REST stand-in, ``tests/helpers/github_server.py``) each run registers itself there as a workflow run
attempt: ``in_progress`` when it starts, ``completed`` with its conclusion when it ends, with its
event, head branch (the PR's head ref, else the branch of ``ref``), head SHA and workflow path, and
each of its jobs when it ends (skipped ones too), named as GitHub's jobs API names them
(``<caller job> / <name>``), with its conclusion and times.

Stand-ins, each named here and nothing else: ``actions/checkout`` (a git fetch from the test's
repository, or benchtrail's own source for ``repository: */benchtrail``), ``actions/setup-python``
(nothing: the test's interpreter), the artifact actions (folders under the run),
``google-github-actions/auth`` (as the real action: Workload Identity Federation needs the job's
OIDC variables, a key needs none; it writes a credentials file into the workspace, exports its
variables to later steps and records itself in ``RunResult.auth``; the GCS emulator ignores the
credentials) and the step named ``Install benchtrail`` (the test's own environment: ``.venv``
links to it, or to a folder whose ``bin/benchtrail`` runs each command in a fork of a process that
has benchtrail and torch imported already, ``tests/helpers/cli_server.py``).

Deployment environments as GitHub has them: a job's ``environment:`` (a name or ``{name, url}``) that
``Harness.environments`` names with ``branches`` (deployment branch globs) runs only for a ``refs/heads/``
ref matching one of them (a PR's merge ref matches none), else the job fails with GitHub's message; a job
that enters it gets its ``secrets`` on top of the run's. An environment not listed has no rule and no
secret. A job's ``continue-on-error`` keeps its failure from failing the run.

Faults a test may inject: ``step_timeouts`` names steps (``"<job id>/<step name>"``, or
``"<job id>-<matrix index>/<step name>"`` for one instance of a matrix job) that hit a
``timeout-minutes`` at once: the step's own, else its job's (the job's runner stops there, as when
it dies); a step whose job declares neither cannot be given one.

The code is in four modules: this one holds ``Harness`` (a run's set-up: its event, ``github``
context and registration with the GitHub stand-in) and ``pending_survivors``;
``tests/helpers/workflow_runner.py`` the job runner (``RunExecution``), ``load_workflow`` and
``WorkflowLoadError``; ``tests/helpers/workflow_results.py`` ``RunResult`` and ``JobResult``;
``tests/helpers/workflow_standins.py`` the stand-ins.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.helpers.git import git
from tests.helpers.workflow_results import JobResult, RunResult
from tests.helpers.workflow_runner import ROOT, RunExecution, WorkflowLoadError, load_workflow

# What the tests import from here.
__all__ = ["ROOT", "Harness", "JobResult", "RunResult", "WorkflowLoadError", "load_workflow",
           "pending_survivors"]


@dataclass
class Harness:
    """Runs workflows of the project repository ``repo`` (a git repository named ``repository``).

    ``env`` is added to every step's environment (e.g. ``STORAGE_EMULATOR_HOST``); ``api_url`` is
    the GitHub REST stand-in's URL and ``github_server`` the stand-in itself, where runs register
    (optional); ``vars`` and ``secrets`` are the repository's.
    """

    repo: Path
    repository: str
    work: Path
    api_url: str
    token: str = "ghs_harness_token"
    env: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    runs: dict[int, RunResult] = field(default_factory=dict)
    next_run_id: int = 1000
    #: What the install step's ``.venv`` links to: the test's environment, or a folder whose
    #: ``bin/benchtrail`` is a client of ``tests/helpers/cli_server.py``.
    venv: Path = Path(sys.prefix)
    #: The GitHub REST stand-in (``tests.helpers.github_server.GitHubServer``) where each run registers
    #: itself.
    github_server: Any = None
    #: Deployment environments: name -> ``{"branches": [glob, ...], "secrets": {name: value}}``.
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)

    def may_deploy(self, environment: str, github: dict[str, Any]) -> bool:
        """Whether a job of the run with ``github`` context may enter ``environment`` (its deployment
        branches)."""
        rule = self.environments.get(environment)
        if rule is None or rule.get("branches") is None:
            return True
        ref = str(github["ref"])
        branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
        return branch is not None and any(fnmatch.fnmatchcase(branch, glob) for glob in rule["branches"])

    def environment_secrets(self, environment: str) -> dict[str, str]:
        return dict((self.environments.get(environment) or {}).get("secrets") or {})

    # -- runs -------------------------------------------------------------------------------------

    def run(self, workflow: str | Path, event_name: str, payload: dict[str, Any], sha: str, ref: str,
            attempt: int = 1, run_id: int | None = None, step_timeouts: tuple[str, ...] = (),
            inputs: dict[str, Any] | None = None) -> RunResult:
        """Run ``workflow`` (a path, or a file name in the project's ``.github/workflows``) for an event."""
        path = Path(workflow) if Path(workflow).is_absolute() else self._project_file(sha, workflow)
        if run_id is None:
            self.next_run_id += 1
            run_id = self.next_run_id
        base = self.work / f"run-{run_id}-{attempt}"
        base.mkdir(parents=True)
        result = RunResult(str(workflow), event_name, payload, sha, run_id, attempt, base / "artifacts")
        result.artifacts.mkdir()
        self.runs[run_id] = result
        event_path = base / "event.json"
        event_path.write_text(json.dumps(payload))
        wf = load_workflow(path)
        pull = payload.get("pull_request") or {}
        workflow_path = f".github/workflows/{Path(workflow).name}"
        github = {
            "event_name": event_name, "event": payload, "repository": self.repository,
            "repository_owner": self.repository.split("/")[0], "sha": sha, "ref": ref,
            "ref_name": ref.split("/", 2)[2] if ref.startswith("refs/") else ref,
            "run_id": str(run_id), "run_attempt": str(attempt), "server_url": "https://github.com",
            "api_url": self.api_url, "token": self.token, "actor": "octocat",
            "head_ref": pull.get("head", {}).get("ref", ""),
            "base_ref": pull.get("base", {}).get("ref", ""),
            "workflow": str(wf.get("name") or workflow_path),
            "workflow_ref": f"{self.repository}/{workflow_path}@{ref}", "workflow_sha": sha,
        }
        if inputs is None and event_name == "workflow_dispatch":
            inputs = dict(payload.get("inputs") or {})
        # GitHub passes no secrets (and no OIDC token) to a pull_request run from a fork.
        fork = event_name == "pull_request" and ((pull.get("head") or {}).get("repo") or {}).get(
            "full_name", self.repository) != self.repository
        if self.github_server is not None and (self.repository, run_id,
                                               attempt) in self.github_server.workflow_runs:
            # queued
            self.github_server.update_workflow_run(self.repository, run_id, attempt, status="in_progress")
        elif self.github_server is not None:
            head_branch = pull.get("head", {}).get("ref",
                                                   "") if event_name == "pull_request" else github["ref_name"]
            self.github_server.add_workflow_run(
                self.repository, run_id, attempt, event=event_name, head_branch=head_branch, head_sha=sha,
                path=workflow_path, status="in_progress", conclusion=None, name=github["workflow"],
                run_started_at=datetime.now(UTC))
        run = RunExecution(self, result, base, event_path, github, step_timeouts, fork)
        try:
            run.workflow(wf, inputs or {}, {} if fork else self.secrets, prefix="",
                         job_context={"workflow_repository": self.repository, "workflow_sha": sha},
                         allowed=None)
        except WorkflowLoadError as exc:
            result.error = str(exc)
        if self.github_server is not None:
            self.github_server.update_workflow_run(self.repository, run_id, attempt, status="completed",
                                                   conclusion=result.conclusion, updated_at=datetime.now(UTC))
        return result

    def _project_file(self, sha: str, name: str) -> Path:
        """``.github/workflows/<name>`` as it is at ``sha`` of the project (a workflow runs its own commit's file)."""
        text = git(self.repo, "show", f"{sha}:.github/workflows/{name}", strip=False)
        out = self.work / "workflow-files" / sha[:12] / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        return out

    def queue(self, workflow: str, event_name: str, payload: dict[str, Any], sha: str) -> RunResult:
        """A run of ``workflow`` that GitHub has requested but not started: registered ``queued`` with the
        GitHub stand-in; ``run(..., run_id=<its run_id>)`` starts it."""
        self.next_run_id += 1
        queued = RunResult(workflow, event_name, payload, sha, self.next_run_id, 1, self.work / "queued")
        pull = payload.get("pull_request") or {}
        self.github_server.add_workflow_run(
            self.repository, queued.run_id, 1, event=event_name,
            head_branch=pull.get("head", {}).get("ref", ""),
            head_sha=sha, path=f".github/workflows/{workflow}", status="queued", conclusion=None)
        return queued

    def workflow_run_payload(self, run: RunResult, workflow_name: str, default_branch: str = "main",
                             action: str = "completed") -> dict[str, Any]:
        """The ``workflow_run`` event GitHub sends when ``run`` is requested or completes (``action``).
        As on GitHub, a fork's PR is not in ``pull_requests``."""
        pr = run.payload.get("pull_request") or {}
        head_repository = ((pr.get("head") or {}).get("repo") or {}).get("full_name", self.repository)
        return {
            "action": action,
            "workflow_run": {
                "id": run.run_id, "name": workflow_name, "event": run.event_name, "head_sha": run.sha,
                "path": f".github/workflows/{Path(run.workflow).name}",
                "head_branch": (pr.get("head") or {}).get("ref", "main"), "run_attempt": run.attempt,
                "conclusion": run.conclusion if action == "completed" else None,
                "status": "completed" if action == "completed" else "queued",
                "html_url": f"https://github.com/{self.repository}/actions/runs/{run.run_id}",
                "head_repository": {"full_name": head_repository},
                "pull_requests": [{"number": pr["number"]}] if pr and head_repository == self.repository
                else [],
            },
            "repository": {"full_name": self.repository, "default_branch": default_branch},
        }


def pending_survivors(queued: list[tuple[str, str]], running: set[str]) -> list[str]:
    """GitHub's concurrency rule for runs queued one after another while ``running`` groups are busy.

    ``queued`` holds (run name, concurrency group) in queue order. In a group at most one run runs
    and one waits: a newly queued run of a busy group replaces (cancels) the one already waiting.
    Returns the names of the runs that are not cancelled, in queue order.
    """
    waiting: dict[str, str] = {}
    kept: list[str] = []
    for name, group in queued:
        if group in running:
            if group in waiting:
                kept.remove(waiting[group])
            waiting[group] = name
        else:
            running.add(group)
        kept.append(name)
    return kept
