"""The job runner of the workflow harness (``tests/helpers/workflow_harness.py``): ``RunExecution``
executes one run.

``Harness.run`` sets up a run and hands it to ``RunExecution``, which checks a called workflow's
permissions, orders the jobs by ``needs``, evaluates every ``if:``, expands a matrix, and runs
each step: ``run:`` steps in bash (with ``step_timeouts`` faults), ``uses:`` steps and the install
step through the stand-ins (``tests/helpers/workflow_standins.py``). ``load_workflow`` reads a workflow
file; ``WorkflowLoadError`` is what GitHub reports for a workflow that cannot run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tests.helpers.actions_expressions import condition, interpolate, to_string
from tests.helpers.workflow_results import JobResult, RunResult
from tests.helpers.workflow_standins import StepResult, action, install

if TYPE_CHECKING:
    from tests.helpers.workflow_harness import Harness

ROOT = Path(__file__).resolve().parents[2]
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


class WorkflowLoadError(Exception):
    """What GitHub reports when a workflow file is invalid for the event (no job runs)."""


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


class RunExecution:
    """The execution of one run (and of the workflows it calls)."""

    def __init__(self, harness: Harness, result: RunResult, base: Path, event_path: Path,
                 github: dict[str, Any],
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
                        name = next(k for k, v in PERMISSION_LEVELS.items() if v == _granted(allowed, scope))
                        want = next(k for k, v in PERMISSION_LEVELS.items() if v == level)
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
            started = datetime.now(UTC)
            environment = interpolate(job.get("environment"), context) or ""
            if isinstance(environment, dict):
                environment = environment.get("name") or ""
            environment = to_string(environment).strip()
            if not condition(job.get("if", "success()"), context, status):
                results[job_id] = JobResult("skipped")
            elif "uses" in job:
                results[job_id] = self.call(job, job_id, context, top, prefix)
            elif environment and not self.h.may_deploy(environment, self.github):
                refused = (f"Branch \"{self.github['ref_name']}\" is not allowed to deploy to {environment} due "
                           "to environment protection rules.")
                results[job_id] = JobResult("failure", steps=[StepResult("environment", "failure", "failure",
                                                                         log=refused)])
            else:
                mine = {**secrets, **self.h.environment_secrets(environment)} if environment else secrets
                results[job_id] = self.job(wf, job, prefix + job_id, dict(context, secrets=mine), inputs,
                                           mine,
                                           job_context, oidc=self.oidc(job, top, allowed))
            results[job_id].environment = environment or None
            results[job_id].continue_on_error = _continues(job, context)
            if self.h.github_server is not None and "uses" not in job:
                # as GitHub's jobs API names it: "<caller job> / <name>"
                shown = str(job.get("name") or job_id)
                self.h.github_server.add_job(
                    self.h.repository, self.result.run_id, self.result.attempt,
                    " / ".join([*prefix.split("/")[:-1], shown if "${{" not in shown else job_id]),
                    results[job_id].result, started, datetime.now(UTC))
            self.result.jobs[prefix + job_id] = results[job_id]
        return "failure" if any(r.result == "failure" and not r.continue_on_error for r in results.values()) \
            else "success"

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
            return JobResult("failure",
                             steps=[StepResult("matrix", "failure", "failure", log="empty matrix")])
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
        context = dict(context, github=dict(context["github"]), runner=dict(context["runner"]), steps={},
                       env={},
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
                "ACTIONS_ID_TOKEN_REQUEST_URL": "https://pipelines.actions.githubusercontent.invalid/"
                f"{run_id}/"
                                                f"idtoken/{slug}?api-version=2.0",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": f"oidc-request-token-{run_id}-{slug}"}
        out.runs_on = interpolate(job.get("runs-on"), context)
        if job.get("concurrency"):
            group = job["concurrency"]["group"] if isinstance(job["concurrency"],
                                                              dict) else job["concurrency"]
            out.concurrency = to_string(interpolate(group, context)).strip()
        defaults = {**((wf.get("defaults") or {}).get("run") or {}),
                    **((job.get("defaults") or {}).get("run") or {})}
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
            if result.outcome == "failure" and not _continues(step, context):
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
        files = {n: temp / f"{n.lower()}-{len(job.steps)}" for n in ("GITHUB_OUTPUT", "GITHUB_ENV",
                                                                     "GITHUB_PATH",
                                                                    "GITHUB_STEP_SUMMARY")}
        for f in files.values():
            f.write_text("")
        process_env = self.process_env(workspace, temp, step_env, files, job.runner_env)
        if "uses" in step:
            result = action(self, step, name,
                            interpolate(step.get("with") or {}, dict(context, env=step_env)),
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
        if result.outcome == "failure" and _continues(step, context):
            result.conclusion = "success"
        return result

    def process_env(self, workspace: Path, temp: Path, step_env: dict[str, str],
                    files: dict[str, Path], runner_env: dict[str, str] | None = None) -> dict[str, str]:
        g = self.github
        # BENCHTRAIL_NOISE_RERUN and AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL as a self-hosted runner's .env
        # file would set them (tests/conftest.py sets both)
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "TZ", "BENCHTRAIL_NOISE_RERUN",
                                          "AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL") if k in os.environ}
        env.update({
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace),
            "RUNNER_TEMP": str(temp),
            "GITHUB_EVENT_NAME": g["event_name"], "GITHUB_EVENT_PATH": str(self.event_path),
            "GITHUB_REPOSITORY": g["repository"], "GITHUB_REPOSITORY_OWNER": g["repository_owner"],
            "GITHUB_SHA": g["sha"], "GITHUB_REF": g["ref"], "GITHUB_REF_NAME": g["ref_name"],
            "GITHUB_HEAD_REF": g["head_ref"], "GITHUB_BASE_REF": g["base_ref"], "GITHUB_RUN_ID": g["run_id"],
            "GITHUB_RUN_ATTEMPT": g["run_attempt"], "GITHUB_SERVER_URL": g["server_url"],
            "GITHUB_API_URL": g["api_url"], "GITHUB_WORKFLOW": g["workflow"],
            "GITHUB_WORKFLOW_REF": g["workflow_ref"], "GITHUB_WORKFLOW_SHA": g["workflow_sha"],
            "RUNNER_OS": "Linux", **(runner_env or {}),
            **{k: str(v) for k, v in files.items()},
        })
        env.update(self.h.env)
        env.update(step_env)
        return env

    def shell(self, step: dict[str, Any], name: str, key: str, context: dict[str, Any],
              step_env: dict[str, str],
              defaults: dict[str, Any], workspace: Path, temp: Path,
              process_env: dict[str, str]) -> StepResult:
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
        if any(f"{job_key}/{name}".endswith(fault) or f"{key}/{name}".endswith(fault)
               for fault in self.step_timeouts):
            assert minutes is not None, f"step {name!r} and its job declare no timeout-minutes"
            timeout = TIMEOUT_FAULT_S
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
        if timeout is not None:  # a fault: timed out, even where the step ended within TIMEOUT_FAULT_S
            return StepResult(name, "failure", "failure",
                              log=log + f"\n##[error]The action '{name}' has timed out "
                                                                    f"after {minutes} minutes.")
        outcome = "success" if proc.returncode == 0 else "failure"
        return StepResult(name, outcome, outcome, log=log + ("" if proc.returncode == 0
                                                             else f"\n##[error]exit code {proc.returncode}"))


def _continues(step: dict[str, Any], context: dict[str, Any]) -> bool:
    """A step's ``continue-on-error``, its expression evaluated (``${{ github.event_name == 'pull_request' }}``)."""
    value = interpolate(step.get("continue-on-error", False), context)
    return value is True or str(value).lower() == "true"


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

