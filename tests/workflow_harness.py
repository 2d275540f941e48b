"""Execute a GitHub Actions workflow file for one event, here, as GitHub's runners would.

What it does as GitHub does: job order from ``needs``; every job- and step-level ``if:`` (with
``success()``, ``failure()``, ``always()``, ``cancelled()`` and ``needs.<job>.result``); every
``${{ }}`` (``tests/actions_expressions.py``); workflow, job and step ``env``; ``defaults.run``
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
REST stand-in, ``tests/github_server.py``) each run registers itself there as a workflow run
attempt: ``in_progress`` when it starts, ``completed`` with its conclusion when it ends, with its
event, head branch (the PR's head ref, else the branch of ``ref``), head SHA and workflow path.

Stand-ins, each named here and nothing else: ``actions/checkout`` (a git fetch from the test's
repository, or benchtrail's own source for ``repository: */benchtrail``), ``actions/setup-python``
(nothing: the test's interpreter), the artifact actions (folders under the run),
``google-github-actions/auth`` (as the real action: Workload Identity Federation needs the job's
OIDC variables, a key needs none; it writes a credentials file into the workspace, exports its
variables to later steps and records itself in ``RunResult.auth``; the GCS emulator ignores the
credentials) and the step named ``Install benchtrail`` (the test's own environment: ``.venv``
links to it, or to a folder whose ``bin/benchtrail`` runs each command in a fork of a process that
has benchtrail and torch imported already, ``tests/cli_server.py``).

Faults a test may inject: ``step_timeouts`` names steps (``"<job id>/<step name>"``, or
``"<job id>-<matrix index>/<step name>"`` for one instance of a matrix job) that hit a
``timeout-minutes`` at once: the step's own, else its job's (the job's runner stops there, as when
it dies); a step whose job declares neither cannot be given one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from tests.actions_expressions import condition, interpolate, to_string
from tests.workflow_standins import StepResult, action, install

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
PERMISSION_LEVELS = {"none": 0, "read": 1, "write": 2}
INSTALL_STEP = "Install benchtrail"
#: Seconds a step named in ``step_timeouts`` runs before it is killed; it times out even when it ends sooner
#: (a fast machine ran a one-case shard in 0.4 s), as the fault says.
TIMEOUT_FAULT_S = 0.5


def load_workflow(path: Path) -> dict[str, Any]:
    """The workflow file as a dict; PyYAML reads the key ``on`` as True, so it is renamed back."""
    data = yaml.safe_load(path.read_text())
    if True in data:
        data["on"] = data.pop(True)
    return data


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
    #: "project_id", "credentials_file", "oidc_request_url"}``.
    auth: list[dict[str, Any]] = field(default_factory=list)

    @property
    def conclusion(self) -> str:
        results = [j.result for j in self.jobs.values()]
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


class WorkflowLoadError(Exception):
    """What GitHub reports when a workflow file is invalid for the event (no job runs)."""


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
    #: ``bin/benchtrail`` is a client of ``tests/cli_server.py``.
    venv: Path = Path(sys.prefix)
    #: The GitHub REST stand-in (``tests.github_server.GitHubServer``) where each run registers itself.
    github_server: Any = None

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
        if self.github_server is not None:
            head_branch = pull.get("head", {}).get("ref", "") if event_name == "pull_request" else github["ref_name"]
            self.github_server.add_workflow_run(
                self.repository, run_id, attempt, event=event_name, head_branch=head_branch, head_sha=sha,
                path=workflow_path, status="in_progress", conclusion=None, name=github["workflow"],
                run_started_at=datetime.now(timezone.utc))
        run = _Run(self, result, base, event_path, github, step_timeouts, fork)
        try:
            run.workflow(wf, inputs or {}, {} if fork else self.secrets, prefix="",
                         job_context={"workflow_repository": self.repository, "workflow_sha": sha},
                         allowed=None)
        except WorkflowLoadError as exc:
            result.error = str(exc)
        if self.github_server is not None:
            self.github_server.update_workflow_run(self.repository, run_id, attempt, status="completed",
                                                   conclusion=result.conclusion, updated_at=datetime.now(timezone.utc))
        return result

    def _project_file(self, sha: str, name: str) -> Path:
        """``.github/workflows/<name>`` as it is at ``sha`` of the project (a workflow runs its own commit's file)."""
        text = subprocess.run(["git", "show", f"{sha}:.github/workflows/{name}"], cwd=self.repo, check=True,
                              capture_output=True, text=True).stdout
        out = self.work / "workflow-files" / sha[:12] / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        return out

    def workflow_run_payload(self, run: RunResult, workflow_name: str, default_branch: str = "main") -> dict[str, Any]:
        """The ``workflow_run`` event GitHub sends when ``run`` completes."""
        pr = run.payload.get("pull_request") or {}
        return {
            "action": "completed",
            "workflow_run": {
                "id": run.run_id, "name": workflow_name, "event": run.event_name, "head_sha": run.sha,
                "path": f".github/workflows/{Path(run.workflow).name}",
                "head_branch": (pr.get("head") or {}).get("ref", "main"), "run_attempt": run.attempt,
                "conclusion": run.conclusion, "status": "completed",
                "head_repository": {"full_name": ((pr.get("head") or {}).get("repo") or {}).get(
                    "full_name", self.repository)},
                "pull_requests": [{"number": pr["number"]}] if pr else [],
            },
            "repository": {"full_name": self.repository, "default_branch": default_branch},
        }


def _level(value: str) -> int:
    return PERMISSION_LEVELS[value]


def _permissions(spec: Any) -> dict[str, int] | None:
    """A ``permissions:`` value as scope -> level; None when it is absent (inherit)."""
    if spec is None:
        return None
    if spec == "read-all":
        return {"*": 1}
    if spec == "write-all":
        return {"*": 2}
    return {scope: _level(level) for scope, level in (spec or {}).items()}


def _granted(perms: dict[str, int], scope: str) -> int:
    return perms.get(scope, perms.get("*", 0))


class _Run:
    """The execution of one run (and of the workflows it calls)."""

    def __init__(self, harness: Harness, result: RunResult, base: Path, event_path: Path, github: dict[str, Any],
                 step_timeouts: tuple[str, ...], fork: bool = False) -> None:
        self.h, self.result, self.base, self.event_path = harness, result, base, event_path
        self.github, self.step_timeouts, self.fork = github, set(step_timeouts), fork

    # -- workflows and jobs -----------------------------------------------------------------------

    def workflow(self, wf: dict[str, Any], inputs: dict[str, Any], secrets: dict[str, str], prefix: str,
                 job_context: dict[str, str], allowed: dict[str, int] | None) -> str:
        jobs = wf["jobs"]
        top = _permissions(wf.get("permissions"))
        if allowed is not None:  # a called workflow: check every job before any runs
            for job_id, job in jobs.items():
                asked = _permissions(job.get("permissions"))
                asked = asked if asked is not None else (top if top is not None else {"*": 0})
                for scope, level in asked.items():
                    if level > _granted(allowed, scope):
                        name = [k for k, v in PERMISSION_LEVELS.items() if v == _granted(allowed, scope)][0]
                        want = [k for k, v in PERMISSION_LEVELS.items() if v == level][0]
                        raise WorkflowLoadError(
                            f"The nested job '{job_id}' is requesting '{scope}: {want}', but is only allowed "
                            f"'{scope}: {name}'.")
        results: dict[str, JobResult] = {}
        for job_id in _topological(jobs):
            job = jobs[job_id]
            needs = _needs(job)
            ancestors = _ancestors(jobs, job_id)
            status = {"success": all(results[a].result == "success" for a in ancestors),
                      "failure": any(results[a].result == "failure" for a in ancestors),
                      "always": True, "cancelled": False}
            context = self.context(inputs, secrets, job_context,
                                   needs={n: {"result": results[n].result, "outputs": results[n].outputs}
                                          for n in needs})
            if not condition(job.get("if", "success()"), context, status):
                results[job_id] = JobResult("skipped")
            elif "uses" in job:
                results[job_id] = self.call(job, job_id, context, top, prefix)
            else:
                results[job_id] = self.job(wf, job, prefix + job_id, context, inputs, secrets, job_context,
                                           oidc=self.oidc(job, top, allowed))
            self.result.jobs[prefix + job_id] = results[job_id]
        return "failure" if any(r.result == "failure" for r in results.values()) else "success"

    def call(self, job: dict[str, Any], job_id: str, context: dict[str, Any], top: dict[str, int] | None,
             prefix: str) -> JobResult:
        uses = job["uses"]
        m = re.fullmatch(r"(?P<repo>[\w.-]+/[\w.-]+)/\.github/workflows/(?P<file>[\w.-]+)@(?P<ref>\S+)", uses)
        if not m or not m["repo"].endswith("/benchtrail"):
            raise WorkflowLoadError(f"the harness calls only benchtrail's workflows, not {uses!r}")
        called = load_workflow(WORKFLOWS / m["file"])
        spec = (called.get("on") or {}).get("workflow_call")
        if spec is None:
            raise WorkflowLoadError(f"{uses}: the workflow has no workflow_call trigger")
        declared = spec.get("inputs") or {}
        given = interpolate(job.get("with") or {}, context)
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise WorkflowLoadError(f"{uses}: invalid input(s) {unknown}; declared: {sorted(declared)}")
        inputs = {}
        for name, decl in declared.items():
            if name in given:
                value = given[name]
                if decl.get("type") == "number":
                    value = float(value) if value not in ("", None) else None
                elif decl.get("type") == "boolean":
                    value = value if isinstance(value, bool) else str(value).lower() == "true"
                inputs[name] = value
            elif decl.get("required"):
                raise WorkflowLoadError(f"{uses}: input {name!r} is required")
            else:
                inputs[name] = decl.get("default")
        secrets_spec = spec.get("secrets") or {}
        passed = interpolate(job.get("secrets") or {}, context)
        if passed == "inherit":
            raise WorkflowLoadError("secrets: inherit is not used by benchtrail's callers")
        unknown = sorted(set(passed) - set(secrets_spec))
        if unknown:
            raise WorkflowLoadError(f"{uses}: secret(s) {unknown} are not declared by the called workflow")
        allowed = _permissions(job.get("permissions"))
        allowed = allowed if allowed is not None else (top if top is not None else {"*": 2})
        result = self.workflow(called, inputs, passed, prefix + job_id + "/",
                               {"workflow_repository": m["repo"], "workflow_sha": m["ref"]}, allowed)
        return JobResult(result)

    def oidc(self, job: dict[str, Any], top: dict[str, int] | None, allowed: dict[str, int] | None) -> bool:
        """Whether the runner gives this job the OIDC request variables: its effective permissions
        (its own, else the workflow's, capped by the calling job's in a called workflow) grant
        ``id-token: write`` and the run is not a fork's pull_request. Without any ``permissions``
        the repository default applies, which never includes ``id-token``."""
        asked = _permissions(job.get("permissions"))
        asked = asked if asked is not None else top
        if asked is None:
            return False
        capped = _granted(asked, "id-token") if allowed is None else min(_granted(asked, "id-token"),
                                                                            _granted(allowed, "id-token"))
        return capped >= PERMISSION_LEVELS["write"] and not self.fork

    def context(self, inputs: dict[str, Any], secrets: dict[str, str], job_context: dict[str, str],
                **extra: Any) -> dict[str, Any]:
        return {"github": dict(self.github), "inputs": inputs, "secrets": secrets, "vars": self.h.vars,
                "job": dict(job_context), "runner": {"os": "Linux", "arch": "X64"}, "env": {},
                "matrix": {}, "steps": {}, "needs": {}, **extra}

    def job(self, wf: dict[str, Any], job: dict[str, Any], key: str, context: dict[str, Any],
            inputs: dict[str, Any], secrets: dict[str, str], job_context: dict[str, str],
            oidc: bool = False) -> JobResult:
        matrix_spec = interpolate(((job.get("strategy") or {}).get("matrix")) or {}, context)
        combos = list(matrix_spec.get("include") or []) if matrix_spec else [{}]
        if matrix_spec and not combos:
            return JobResult("failure", steps=[StepResult("matrix", "failure", "failure", log="empty matrix")])
        results = [self.instance(wf, job, f"{key}-{i}", dict(context, matrix=combo), secrets, oidc)
                   for i, combo in enumerate(combos)]
        merged = JobResult("failure" if any(r.result == "failure" for r in results) else "success")
        for r in results:
            merged.outputs.update({k: v for k, v in r.outputs.items() if v != ""})
            merged.steps += r.steps
            merged.summary += r.summary
            merged.runner_env.update(r.runner_env)
        merged.runs_on, merged.concurrency = results[-1].runs_on, results[-1].concurrency
        return merged

    def instance(self, wf: dict[str, Any], job: dict[str, Any], key: str, context: dict[str, Any],
                 secrets: dict[str, str], oidc: bool = False) -> JobResult:
        context = dict(context, github=dict(context["github"]), runner=dict(context["runner"]), steps={}, env={},
                       job_timeout_minutes=job.get("timeout-minutes"))
        slug = re.sub(r"[^\w.-]+", "_", key)
        workspace, temp = self.base / slug / "workspace", self.base / slug / "temp"
        workspace.mkdir(parents=True)
        temp.mkdir(parents=True)
        context["github"]["workspace"] = str(workspace)
        context["runner"]["temp"] = str(temp)
        env: dict[str, str] = {}
        for scope in (wf.get("env") or {}, job.get("env") or {}):
            for name, value in scope.items():
                context["env"] = dict(env)
                env[name] = to_string(interpolate(value, context))
        context["env"] = dict(env)
        out = JobResult("success")
        if oidc:
            run_id = self.github["run_id"]
            out.runner_env = {
                "ACTIONS_ID_TOKEN_REQUEST_URL": f"https://pipelines.actions.githubusercontent.invalid/{run_id}/"
                                                f"idtoken/{slug}?api-version=2.0",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": f"oidc-request-token-{run_id}-{slug}"}
        out.runs_on = interpolate(job.get("runs-on"), context)
        if job.get("concurrency"):
            group = job["concurrency"]["group"] if isinstance(job["concurrency"], dict) else job["concurrency"]
            out.concurrency = to_string(interpolate(group, context)).strip()
        defaults = {**((wf.get("defaults") or {}).get("run") or {}), **((job.get("defaults") or {}).get("run") or {})}
        failed = False
        for index, step in enumerate(job.get("steps") or []):
            name = step.get("name") or step.get("uses") or f"step {index}"
            status = {"success": not failed, "failure": failed, "always": True, "cancelled": False}
            context["env"] = dict(env)
            if not condition(step.get("if", "success()"), context, status):
                result = StepResult(name, "skipped", "skipped")
            else:
                start = time.monotonic()
                result = self.step(step, name, key, context, env, defaults, workspace, temp, out)
                result.seconds = time.monotonic() - start
            if result.outcome == "failure" and not step.get("continue-on-error"):
                failed = True
            out.steps.append(result)
            if step.get("id"):
                context["steps"][step["id"]] = {"outputs": result.outputs, "outcome": result.outcome,
                                                "conclusion": result.conclusion}
        out.result = "failure" if failed else "success"
        out.outputs = {k: to_string(interpolate(v, context)) for k, v in (job.get("outputs") or {}).items()}
        return out

    # -- steps ------------------------------------------------------------------------------------

    def step(self, step: dict[str, Any], name: str, key: str, context: dict[str, Any], env: dict[str, str],
             defaults: dict[str, Any], workspace: Path, temp: Path, job: JobResult) -> StepResult:
        step_env = dict(env)
        for k, v in (step.get("env") or {}).items():
            step_env[k] = to_string(interpolate(v, dict(context, env=step_env)))
        files = {n: temp / f"{n.lower()}-{len(job.steps)}" for n in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH",
                                                                    "GITHUB_STEP_SUMMARY")}
        for f in files.values():
            f.write_text("")
        process_env = self.process_env(workspace, temp, step_env, files, job.runner_env)
        if "uses" in step:
            result = action(self, step, name, interpolate(step.get("with") or {}, dict(context, env=step_env)),
                            workspace, env=process_env, job_key=key, github_env=files["GITHUB_ENV"])
        elif name == INSTALL_STEP:
            result = install(self, step, name, workspace, defaults, context, step_env, files)
        else:
            result = self.shell(step, name, key, context, step_env, defaults, workspace, temp, process_env)
        outputs = _read_pairs(files["GITHUB_OUTPUT"])
        result.outputs.update(outputs)
        for k, v in _read_pairs(files["GITHUB_ENV"]).items():
            env[k] = v
        job.summary += files["GITHUB_STEP_SUMMARY"].read_text()
        if result.outcome == "failure" and step.get("continue-on-error"):
            result.conclusion = "success"
        return result

    def process_env(self, workspace: Path, temp: Path, step_env: dict[str, str],
                    files: dict[str, Path], runner_env: dict[str, str] | None = None) -> dict[str, str]:
        g = self.github
        # BENCHTRAIL_NOISE_RERUN and AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL as a self-hosted runner's .env file
        # would set them (tests/conftest.py sets both)
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "TZ", "BENCHTRAIL_NOISE_RERUN",
                                          "AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL") if k in os.environ}
        env.update({
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
            "GITHUB_EVENT_NAME": g["event_name"], "GITHUB_EVENT_PATH": str(self.event_path),
            "GITHUB_REPOSITORY": g["repository"], "GITHUB_REPOSITORY_OWNER": g["repository_owner"],
            "GITHUB_SHA": g["sha"], "GITHUB_REF": g["ref"], "GITHUB_REF_NAME": g["ref_name"],
            "GITHUB_HEAD_REF": g["head_ref"], "GITHUB_BASE_REF": g["base_ref"], "GITHUB_RUN_ID": g["run_id"],
            "GITHUB_RUN_ATTEMPT": g["run_attempt"], "GITHUB_SERVER_URL": g["server_url"],
            "GITHUB_API_URL": g["api_url"], "GITHUB_WORKFLOW": g["workflow"],
            "GITHUB_WORKFLOW_REF": g["workflow_ref"], "GITHUB_WORKFLOW_SHA": g["workflow_sha"], "RUNNER_OS": "Linux",
            **(runner_env or {}),
            **{k: str(v) for k, v in files.items()},
        })
        env.update(self.h.env)
        env.update(step_env)
        return env

    def shell(self, step: dict[str, Any], name: str, key: str, context: dict[str, Any], step_env: dict[str, str],
              defaults: dict[str, Any], workspace: Path, temp: Path, process_env: dict[str, str]) -> StepResult:
        script = to_string(interpolate(step["run"], dict(context, env=step_env)))
        wd = interpolate(step.get("working-directory") or defaults.get("working-directory") or ".",
                         dict(context, env=step_env))
        cwd = workspace / wd
        path = temp / f"step-{abs(hash((key, name)))}.sh"
        path.write_text(script)
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=cwd,
                                env=process_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        timeout, minutes = None, step.get("timeout-minutes", context.get("job_timeout_minutes"))
        job_key = key.rsplit("-", 1)[0]
        if any(f"{job_key}/{name}".endswith(fault) or f"{key}/{name}".endswith(fault) for fault in self.step_timeouts):
            assert minutes is not None, f"step {name!r} and its job declare no timeout-minutes"
            timeout = TIMEOUT_FAULT_S
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
        if timeout is not None:  # a fault: timed out, even where the step ended within TIMEOUT_FAULT_S
            return StepResult(name, "failure", "failure", log=log + f"\n##[error]The action '{name}' has timed out "
                                                                    f"after {minutes} minutes.")
        outcome = "success" if proc.returncode == 0 else "failure"
        return StepResult(name, outcome, outcome, log=log + ("" if proc.returncode == 0
                                                             else f"\n##[error]exit code {proc.returncode}"))


def _read_pairs(path: Path) -> dict[str, str]:
    """``key=value`` and ``key<<DELIMITER`` … ``DELIMITER`` lines, as $GITHUB_OUTPUT and $GITHUB_ENV hold."""
    pairs, lines, i = {}, path.read_text().splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            pairs[key] = "\n".join(lines[i + 1:end])
            i = end + 1
            continue
        if "=" in line:
            key, value = line.split("=", 1)
            pairs[key] = value
        i += 1
    return pairs


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def _ancestors(jobs: dict[str, Any], job_id: str) -> set[str]:
    seen: set[str] = set()
    todo = _needs(jobs[job_id])
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += _needs(jobs[n])
    return seen


def _topological(jobs: dict[str, Any]) -> list[str]:
    order: list[str] = []
    while len(order) < len(jobs):
        ready = [j for j in jobs if j not in order and all(n in order for n in _needs(jobs[j]))]
        if not ready:
            raise WorkflowLoadError(f"a cycle in needs among {sorted(set(jobs) - set(order))}")
        order += ready[:1]
    return order


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
