"""The GitHub Actions workflows: zizmor, GitHub's workflow JSON Schema, and DESIGN.md's security rules.

zizmor runs offline (no GitHub API); check-jsonschema uses its vendored copy of the SchemaStore
``github-workflow`` schema. The structure tests read the YAML with PyYAML, which parses the key
``on`` as the boolean ``True``.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import jq
import pytest
import yaml

from benchmark_suites.suite import generate
from benchtrail.cli.app import build_parser
from benchtrail.suite.export import export_execution
from tests.actions_expressions import condition, interpolate
from tests.workflow_standins import artifact_paths

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = ("benchmark.yml", "ci.yml", "post_benchmark_comment.yml", "track_regressions.yml")
#: Workflows triggered by ``workflow_run`` (default-branch code only), each with a suppressed
#: zizmor dangerous-triggers finding and a reason.
WORKFLOW_RUN_FILES = ("post_benchmark_comment.yml", "track_regressions.yml")
MATRIX_JQ = "build_tools/github_actions/matrix.jq"
# The adopting repository of docs/adopting.md: its pyproject.toml and its two workflow files.
EXAMPLE = ROOT / "docs" / "examples" / "adopting-classes"
EXAMPLE_WORKFLOWS = EXAMPLE / ".github" / "workflows"
EXAMPLE_FILES = ("benchmarks.yml", "post_benchmark_comment.yml")
# Runners GitHub hosts; every other `runs-on` is treated as self-hosted.
GITHUB_HOSTED = {"ubuntu-latest"}
# The runs-on of the compile and process jobs: labels the setup job computed (benchtrail runner-labels).
SETUP_RUNNER = "${{{{ fromJSON(needs.setup.outputs.{}-runner || '[\"benchtrail-setup-skipped\"]') }}}}"

# `owner/repo[/path]@<40 hex> # vX.Y.Z`, the form Dependabot keeps up to date.
PINNED_USES = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+\s*$")
FORK_RULE = (
    "github.event_name != 'pull_request'",
    "github.event.pull_request.head.repo.full_name == github.repository",
    "contains(github.event.pull_request.labels.*.name, 'safe-to-benchmark')",
)
# Untrusted PR text that must never be expanded by `${{ }}` inside a `run:` block.
PR_TEXT_EXPRESSIONS = re.compile(
    r"\$\{\{[^}]*(github\.event\.pull_request\.(body|title|head\.ref|head\.label)|github\.head_ref"
    r"|github\.event\.(issue|comment|review)\.|github\.event\.workflow_run\.(head_branch|display_title))"
)


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    return workflow[True]  # PyYAML (YAML 1.1) reads the key `on` as True


def _steps(workflow: dict[str, Any]):
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def _tool(name: str) -> str | None:
    """The executable ``name`` installed beside this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _zizmor(path: Path) -> tuple[list[dict[str, Any]], str]:
    """zizmor's findings on ``path`` (JSON) and its log."""
    exe = _tool("zizmor")
    if exe is None:
        pytest.skip("the zizmor executable is not installed (pip install zizmor, the test extras)")
    proc = subprocess.run([exe, "--offline", "--format", "json", str(path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    # zizmor exits 0 without findings and 10-14 with findings (by the highest severity).
    assert proc.returncode in (0, 10, 11, 12, 13, 14), f"zizmor failed ({proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout), proc.stderr


def _describe(findings: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(audit, severity, "file:line") of each finding, for assertion messages."""
    described = []
    for f in findings:
        location = f["locations"][0]
        key = next(iter(location["symbolic"]["key"].values()))
        path = key.get("verbatim_path") or key.get("given_path") if isinstance(key, dict) else str(key)
        row = location["concrete"]["location"]["start_point"]["row"] + 1
        described.append((f["ident"], f["determinations"]["severity"], f"{Path(str(path)).name}:{row}"))
    return described


# -- zizmor -----------------------------------------------------------------------------------


def test_zizmor_finds_nothing_of_high_severity():
    findings, _ = _zizmor(WORKFLOWS)
    high = [f for f in findings if f["determinations"]["severity"] == "High"]
    assert _describe(high) == []
    # The poster's workflow_run trigger is suppressed inline, so it is not reported as a finding.
    assert "dangerous-triggers" not in {f["ident"] for f in findings}


def test_zizmor_reports_no_findings_at_all():
    findings, _ = _zizmor(WORKFLOWS)
    assert _describe(findings) == []


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
    findings, _ = _zizmor(unsuppressed)
    assert [(f["ident"], f["determinations"]["severity"]) for f in findings] == [("dangerous-triggers", "High")]


# -- GitHub's workflow schema -------------------------------------------------------------------


def test_the_workflow_folder_holds_exactly_the_documented_workflows():
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == sorted(WORKFLOW_FILES)


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_workflow_matches_the_github_workflow_schema(name):
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         str(WORKFLOWS / name)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout


# -- permissions ----------------------------------------------------------------------------------


def test_top_level_permissions_grant_nothing_or_read_only():
    assert _load("benchmark.yml")["permissions"] == {}
    assert _load("post_benchmark_comment.yml")["permissions"] == {}
    assert _load("track_regressions.yml")["permissions"] == {}
    assert _load("ci.yml")["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_every_job_declares_its_own_permissions(name):
    for job_id, job in _load(name)["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"{name}: job {job_id} lacks a permissions map"


def test_only_the_poster_and_the_tracker_may_write_the_poster_to_prs_the_tracker_to_issues():
    # `id-token: write` writes nothing: it lets a job ask GitHub for an OIDC token (the store's
    # keyless credentials); test_id_token_write_is_granted_exactly_to_the_jobs_that_touch_the_store.
    writes = sorted(
        (name, job_id, scope)
        for name in WORKFLOW_FILES
        for job_id, job in _load(name)["jobs"].items()
        for scope, access in job["permissions"].items()
        if access != "read" and scope != "id-token"
    )
    assert writes == [("post_benchmark_comment.yml", "post", "pull-requests"),
                      ("track_regressions.yml", "track", "issues")]
    assert _load("track_regressions.yml")["jobs"]["track"]["permissions"] == {
        "actions": "read", "contents": "read", "id-token": "write", "issues": "write"}
    assert _load("post_benchmark_comment.yml")["jobs"]["post"]["permissions"] == {
        "actions": "read", "contents": "read", "pull-requests": "write"}


def test_benchmark_jobs_read_contents_at_most():
    jobs = _load("benchmark.yml")["jobs"]
    assert {job_id: job["permissions"] for job_id, job in jobs.items()} == {
        "setup": {"contents": "read", "pull-requests": "read"},  # a re-run re-reads the PR's trailer
        "compile": {"contents": "read"},
        "compile-cuda": {"contents": "read"},
        "execute": {"contents": "read"},
        # Trusted baselines: compare and dashboard read the workflow runs that stored them; the
        # store's keyless credentials (Workload Identity Federation) need the job's OIDC token.
        "process": {"actions": "read", "contents": "read", "id-token": "write"},
        "gate": {"contents": "read"},
        "summary": {},
    }


# -- triggers -------------------------------------------------------------------------------------


def test_no_workflow_uses_pull_request_target():
    for name in WORKFLOW_FILES:
        assert "pull_request_target" not in _triggers(_load(name)), name
        assert "pull_request_target" not in (WORKFLOWS / name).read_text(), name


def test_benchmark_triggers():
    workflow = _load("benchmark.yml")
    on = _triggers(workflow)
    assert workflow["name"] == "benchmark"  # post_benchmark_comment.yml names it
    assert on["pull_request"] == {"types": ["opened", "synchronize", "reopened", "edited", "labeled"]}
    assert on["push"] == {"branches": ["main"]}
    assert set(on["workflow_dispatch"]["inputs"]) == {"benchmark-presets"}


def test_the_poster_runs_after_the_benchmark_workflow_completes():
    on = _triggers(_load("post_benchmark_comment.yml"))
    # workflow_call: another repository's short workflow_run file calls it (docs/adopting.md).
    assert on == {"workflow_run": {"workflows": ["benchmark"], "types": ["completed"]},
                  "workflow_call": {"inputs": {"python-version": {
                      "description": "Python for benchtrail", "required": False, "default": "3.11",
                      "type": "string"}}}}


# -- self-hosted runners and the fork rule --------------------------------------------------------


def _self_hosted_jobs() -> dict[str, dict[str, Any]]:
    """Jobs that may run on a self-hosted runner: every job whose runs-on is not a GitHub-hosted
    label (labels computed by an expression count, since the project chooses them)."""
    found = {}
    for name in WORKFLOW_FILES:
        for job_id, job in _load(name)["jobs"].items():
            runs_on = job["runs-on"]
            labels = runs_on if isinstance(runs_on, list) else [runs_on]
            if not set(labels) <= GITHUB_HOSTED:
                found[f"{name}:{job_id}"] = job
    return found


def test_self_hosted_jobs_are_compile_compile_cuda_execute_and_process_with_their_labels():
    jobs = _self_hosted_jobs()
    assert sorted(jobs) == ["benchmark.yml:compile", "benchmark.yml:compile-cuda", "benchmark.yml:execute",
                            "benchmark.yml:process"]
    # Labels per device from the setup job (the project's runner-labels, else the default).
    assert jobs["benchmark.yml:compile"]["runs-on"] == SETUP_RUNNER.format("cpu")
    assert jobs["benchmark.yml:process"]["runs-on"] == SETUP_RUNNER.format("cpu")
    assert jobs["benchmark.yml:compile-cuda"]["runs-on"] == SETUP_RUNNER.format("cuda")
    assert jobs["benchmark.yml:execute"]["runs-on"] == "${{ matrix.runs_on }}"
    # Without [tool.benchtrail] runner-labels, benchtrail's own devices keep their labels.
    workflow = _load("benchmark.yml")
    assert workflow["env"]["CPU_DEVICE"] == "${{ inputs.cpu-device || 'c2-standard-16' }}"
    assert workflow["env"]["CUDA_DEVICE"] == "${{ inputs.cuda-device || 'a2-highgpu-1g' }}"


def test_every_self_hosted_job_carries_the_fork_rule():
    for key, job in _self_hosted_jobs().items():
        condition = " ".join(job["if"].split())
        for clause in FORK_RULE:
            assert clause in condition, f"{key}: `if` lacks {clause!r}: {condition}"
        assert "needs.setup.outputs.has-benchmarks == 'true'" in condition, key


def test_setup_skips_labels_that_neither_approve_nor_select():
    condition = " ".join(_load("benchmark.yml")["jobs"]["setup"]["if"].split())
    assert condition == ("github.event.action != 'labeled' || github.event.label.name == 'safe-to-benchmark' "
                         "|| startsWith(github.event.label.name, 'benchmarks:')")


# -- the matrix -----------------------------------------------------------------------------------


def test_the_setup_job_computes_the_matrix_with_matrix_jq():
    steps = {step.get("id"): step for _, step in _steps(_load("benchmark.yml")) if step.get("id")}
    # benchtrail's own matrix.jq (the caller's checkout has none), with the project's runner labels.
    assert f'jq -c --argjson labels "$LABELS" -f "$BENCHTRAIL_SRC/{MATRIX_JQ}" ' in steps["matrix"]["run"]
    assert steps["matrix"]["env"] == {"LABELS": "${{ steps.runners.outputs.labels }}"}
    assert (ROOT / MATRIX_JQ).is_file()
    setup = _load("benchmark.yml")["jobs"]["setup"]
    assert setup["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"


def test_execute_expands_the_setup_matrix_and_keeps_going():
    execute = _load("benchmark.yml")["jobs"]["execute"]
    assert execute["strategy"]["fail-fast"] is False
    assert execute["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.setup.outputs.matrix || '[]') }}"}
    assert execute["timeout-minutes"] == 180
    assert all(isinstance(job["timeout-minutes"], int)
               for name in WORKFLOW_FILES for job in _load(name)["jobs"].values())


def test_matrix_jq_gives_every_field_the_execute_job_reads():
    """The execute job reads matrix.device_name, matrix.shard.index and matrix.runs_on."""
    obj = export_execution(generate(), ("x86_64", "cuda"), shard_count=2)
    matrix = jq.compile((ROOT / MATRIX_JQ).read_text(), args={"labels": {}}).input_value(obj).first()
    assert sorted((m["device_name"], m["architecture"], m["shard"]["index"]) for m in matrix) == [
        ("a2-highgpu-1g", "cuda", 0), ("a2-highgpu-1g", "cuda", 1),
        ("c2-standard-16", "cpu", 0), ("c2-standard-16", "cpu", 1),
    ]
    text = (WORKFLOWS / "benchmark.yml").read_text()
    used = set(re.findall(r"(?<![.\w])matrix\.([a-z_]+)", text)) - {"jq"}
    assert used == {"device_name", "shard", "runs_on"}
    assert used <= set(matrix[0])


def _run_step(step: dict[str, Any], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run a step's script as Actions would (bash -e -o pipefail) in ``cwd`` (the job's working
    directory), with ``.venv/bin/benchtrail`` replaced by this interpreter's benchtrail."""
    script = step["run"].replace(".venv/bin/benchtrail", f"{sys.executable} -m benchtrail.cli.app")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("presets, has_cpu_modules, has_cuda_modules, devices", [
    ("x86_64,comp-stats", "true", "false", {"c2-standard-16"}),
    ("cuda", "false", "true", {"a2-highgpu-1g"}),
    ("x86_64,cuda,comp-stats", "true", "true", {"a2-highgpu-1g", "c2-standard-16"}),
])
def test_setup_steps_export_and_write_the_matrix_outputs(tmp_path, presets, has_cpu_modules, has_cuda_modules,
                                                         devices):
    """The setup job's export and matrix steps, run for real with the jq CLI."""
    if shutil.which("jq") is None:
        pytest.skip("the jq executable is not installed")
    workflow = _load("benchmark.yml")
    steps = {step.get("name"): step for step in workflow["jobs"]["setup"]["steps"]}
    output = tmp_path / "github_output"
    assert workflow["env"]["SHARD_COUNT"] == "${{ inputs.shard-count || 2 }}"  # 2 unless a caller says
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
           "RUN_DIR": str(tmp_path / "run"), "SHARD_COUNT": "2", "BENCHTRAIL_SRC": str(ROOT),
           "CPU_DEVICE": "c2-standard-16", "CUDA_DEVICE": "a2-highgpu-1g",
           "PRESETS": presets, "GITHUB_OUTPUT": str(output)}
    proc = _run_step(steps["Read the runner labels"], env)
    assert proc.returncode == 0, proc.stderr
    env["LABELS"] = dict(line.split("=", 1) for line in output.read_text().splitlines())["labels"]
    for name in ("Export run configs", "Compute the job matrix"):
        proc = _run_step(steps[name], env)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "run/run-configs").iterdir()) == ["compilation.json", "execution.json"]
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert sorted(outputs) == ["cpu-runner", "cuda-runner", "has-cpu-modules", "has-cuda-modules", "has-execution",
                               "labels", "matrix"]
    assert outputs["has-cpu-modules"] == has_cpu_modules
    assert outputs["has-cuda-modules"] == has_cuda_modules
    assert outputs["has-execution"] == "true"
    # benchtrail's own pyproject.toml has no runner-labels: every device keeps the default labels.
    assert json.loads(outputs["labels"]) == {}
    assert json.loads(outputs["cpu-runner"]) == ["self-hosted", "cpu", "c2-standard-16"]
    assert json.loads(outputs["cuda-runner"]) == ["self-hosted", "cuda", "a2-highgpu-1g"]
    matrix = json.loads(outputs["matrix"])
    assert {m["device_name"] for m in matrix} == devices
    assert sorted({(m["shard"]["index"], m["shard"]["count"]) for m in matrix}) == [(0, 2), (1, 2)]
    assert all(m["runs_on"] == ["self-hosted", m["architecture"], m["device_name"]] for m in matrix)
    # The job exposes each step output under the same name (the labels table only feeds the matrix).
    assert workflow["jobs"]["setup"]["outputs"] == {
        "benchmark-presets": "${{ steps.configure.outputs.benchmark-presets }}",
        "has-benchmarks": "${{ steps.configure.outputs.has-benchmarks }}",
        "benchmarks-accept": "${{ steps.configure.outputs.benchmarks-accept }}",
        "selection-error": "${{ steps.configure.outputs.selection-error }}",
        "cpu-runner": "${{ steps.runners.outputs.cpu-runner }}",
        "cuda-runner": "${{ steps.runners.outputs.cuda-runner }}",
        **{name: f"${{{{ steps.matrix.outputs.{name} }}}}" for name in outputs
           if name not in ("labels", "cpu-runner", "cuda-runner")}}


# -- compiled modules -----------------------------------------------------------------------------

RUN_DIR = "benchtrail-run"
# An Actions `if:` condition, token by token (the subset these workflows use).
_EXPR_TOKEN = re.compile(r"(?P<str>'(?:[^']|'')*')|(?P<name>[A-Za-z_][\w-]*(?:\.(?:[\w-]+|\*))*)"
                         r"|(?P<op>&&|\|\||==|!=|!|[(),])|(?P<space>\s+)")


def _evaluate(condition: str, context: dict[str, Any], cancelled: bool = False) -> bool:
    """Evaluate an ``if:`` condition; ``context`` maps each property path it reads
    (``needs.compile.result``) to its value, and a path missing from it is an error."""
    return bool(_value(condition, context, cancelled))


def _value(condition: str, context: dict[str, Any], cancelled: bool = False) -> Any:
    """The value of an expression (``a && 'x' || 'y'`` gives ``'x'`` or ``'y'``, as in Actions)."""
    functions = {"cancelled": lambda: cancelled, "contains": lambda seq, item: item in seq,
                 "startsWith": lambda text, prefix: text.startswith(prefix)}
    python, pos = [], 0
    while pos < len(condition):
        m = _EXPR_TOKEN.match(condition, pos)
        assert m, f"cannot read {condition[pos:]!r}"
        pos = m.end()
        if m["str"]:
            python.append(repr(m["str"][1:-1].replace("''", "'")))
        elif m["name"]:
            is_call = condition[pos:pos + 1] == "("
            python.append(f"_fn[{m['name']!r}]" if is_call else f"_ctx[{m['name']!r}]")
        elif m["op"]:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(m["op"], m["op"]))
        else:
            python.append(" ")
    return eval("".join(python), {"__builtins__": {}}, {"_fn": functions, "_ctx": dict(context)})


def _context(event: str = "push", fork: bool = False, labels: tuple[str, ...] = (), **needs: str) -> dict[str, Any]:
    """An `if:` context: a push (or PR) with benchmarks to run, and the given ``needs`` results."""
    context: dict[str, Any] = {
        "github.event_name": event, "github.repository": "owner/benchtrail",
        "github.event.pull_request.head.repo.full_name": "someone/benchtrail" if fork else "owner/benchtrail",
        "github.event.pull_request.labels.*.name": list(labels),
        "needs.setup.outputs.has-benchmarks": "true", "needs.setup.outputs.has-execution": "true",
    }
    context.update({f"needs.{job.replace('_', '-')}.result": result for job, result in needs.items()})
    return context


def _benchtrail_args(script: str, env: dict[str, str]):
    """The `.venv/bin/benchtrail` command of ``script``, parsed by benchtrail's own parser."""
    line = next(line for line in _joined_lines(script) if ".venv/bin/benchtrail " in line)
    words = shlex.split(line.split(".venv/bin/benchtrail ", 1)[1].split("||")[0].split(">")[0])
    return build_parser().parse_args([string.Template(word).substitute(env) for word in words])


@pytest.mark.parametrize("job_id, architecture, device, flag", [
    ("compile", "cpu", "c2-standard-16", "has-cpu-modules"),
    ("compile-cuda", "cuda", "a2-highgpu-1g", "has-cuda-modules"),
])
def test_each_compile_job_compiles_one_architecture_on_its_device(job_id, architecture, device, flag):
    job = _load("benchmark.yml")["jobs"][job_id]
    assert job["needs"] == "setup"
    assert job["runs-on"] == SETUP_RUNNER.format(architecture)
    device_env = f"{architecture.upper()}_DEVICE"
    condition = " ".join(job["if"].split())
    assert f"needs.setup.outputs.{flag} == 'true'" in condition
    assert _evaluate(condition, {**_context(), f"needs.setup.outputs.{flag}": "true"}) is True
    assert _evaluate(condition, {**_context(), f"needs.setup.outputs.{flag}": "false"}) is False
    assert _evaluate(condition, {**_context("pull_request", fork=True), f"needs.setup.outputs.{flag}": "true"}) is False
    steps = {step.get("name"): step for step in job["steps"]}
    args = _benchtrail_args(steps[f"Compile {architecture.upper()} modules"]["run"],
                            {"RUN_DIR": RUN_DIR, device_env: device})
    assert (args.func.__name__, args.run_configs, args.output_dir, args.device_name, args.architecture) == (
        "cmd_compile", Path(RUN_DIR, "run-configs/compilation.json"), Path(RUN_DIR), device, architecture)
    assert steps["Upload modules and compilation statistics"]["with"] == {
        "name": f"run-compilation-${{{{ env.{device_env} }}}}",
        "path": "${{ env.RUN_DIR }}/modules/\n${{ env.RUN_DIR }}/results/\n",
        "if-no-files-found": "error",
    }


def test_only_the_compile_jobs_compile():
    compiling = sorted(job_id for job_id, step in _steps(_load("benchmark.yml"))
                       if "benchtrail compile" in step.get("run", ""))
    assert compiling == ["compile", "compile-cuda"]


def test_execute_waits_for_both_compile_jobs_and_runs_whatever_they_did():
    """A compile job that failed or died fails only its own modules' run configs (the run stage
    reports them); the other cases still run."""
    execute = _load("benchmark.yml")["jobs"]["execute"]
    assert execute["needs"] == ["setup", "compile", "compile-cuda"]
    condition = " ".join(execute["if"].split())
    ran = {(cpu, cuda): _evaluate(condition, _context(setup="success", compile=cpu, compile_cuda=cuda))
           for cpu in ("success", "skipped", "failure", "cancelled")
           for cuda in ("success", "skipped", "failure", "cancelled")}
    assert all(ran.values())
    assert _evaluate(condition, _context(setup="failure", compile="skipped", compile_cuda="skipped")) is False
    ok = _context(setup="success", compile="success", compile_cuda="skipped")
    assert _evaluate(condition, ok, cancelled=True) is False
    assert _evaluate(condition, {**ok, "needs.setup.outputs.has-execution": "false"}) is False
    assert _evaluate(condition, {**ok, "needs.setup.outputs.has-benchmarks": ""}) is False  # setup failed
    assert _evaluate(condition, _context("pull_request", fork=True, setup="success", compile="skipped",
                                         compile_cuda="skipped")) is False
    assert _evaluate(condition, _context("pull_request", fork=True, labels=("safe-to-benchmark",), setup="success",
                                         compile="success", compile_cuda="success")) is True


def test_process_reports_whatever_the_benchmark_jobs_did():
    """Failed or dead compile and execute jobs are reported by the comment, never silence it."""
    process = _load("benchmark.yml")["jobs"]["process"]
    assert process["needs"] == ["setup", "compile", "compile-cuda", "execute"]
    condition = " ".join(process["if"].split())
    for results in (("success", "success", "success"), ("skipped", "failure", "skipped"),
                    ("failure", "skipped", "failure"), ("cancelled", "skipped", "failure")):
        assert _evaluate(condition, _context(setup="success", compile=results[0], compile_cuda=results[1],
                                             execute=results[2])), results
    assert _evaluate(condition, _context(setup="failure", compile="skipped", compile_cuda="skipped",
                                         execute="skipped")) is False
    # Nothing ran for a fork PR without the label: nothing to report.
    assert _evaluate(condition, _context("pull_request", fork=True, setup="success", compile="skipped",
                                         compile_cuda="skipped", execute="skipped")) is False
    assert _evaluate(condition, _context(setup="success", compile="success", compile_cuda="success",
                                         execute="success"), cancelled=True) is False


def test_execute_downloads_the_compiled_modules_and_runs_with_them():
    execute = _load("benchmark.yml")["jobs"]["execute"]
    steps = {step.get("name"): step for step in execute["steps"]}
    download = steps["Download compiled modules"]
    assert download["uses"].startswith("actions/download-artifact@")
    assert download["with"] == {"pattern": "run-compilation-*", "merge-multiple": True, "path": "${{ env.RUN_DIR }}"}
    # Only when a compile job ran, so the pattern matches at least one artifact.
    guard = " ".join(download["if"].split())
    outputs = ("needs.setup.outputs.has-cpu-modules", "needs.setup.outputs.has-cuda-modules")
    assert {(cpu, cuda): _evaluate(guard, dict(zip(outputs, (cpu, cuda))))
            for cpu in ("true", "false") for cuda in ("true", "false")} == {
        ("true", "true"): True, ("true", "false"): True, ("false", "true"): True, ("false", "false"): False}
    # Every compile job uploads an artifact the pattern matches.
    jobs = _load("benchmark.yml")["jobs"]
    devices = {"env.CPU_DEVICE": "c2-standard-16", "env.CUDA_DEVICE": "a2-highgpu-1g"}
    uploaded = [_expand(step["with"]["name"], devices) for job_id in ("compile", "compile-cuda")
                for step in jobs[job_id]["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploaded == ["run-compilation-c2-standard-16", "run-compilation-a2-highgpu-1g"]
    assert all(re.fullmatch(download["with"]["pattern"].replace("*", ".*"), name) for name in uploaded)
    env = {"RUN_DIR": RUN_DIR, "DEVICE_NAME": "a2-highgpu-1g", "SHARD_INDEX": "1"}
    args = _benchtrail_args(steps["Run benchmarks"]["run"], env)
    assert (args.func.__name__, args.run_configs, args.device_name, args.shard_index, args.modules_dir,
            args.output) == ("cmd_run", Path(RUN_DIR, "run-configs/execution.json"), "a2-highgpu-1g", 1,
                             Path(RUN_DIR), Path(RUN_DIR, "results/a2-highgpu-1g-1.json"))
    names = [step.get("name") or step["uses"].split("@")[0] for step in execute["steps"]]
    assert names.index("Download compiled modules") < names.index("Run benchmarks")
    # `benchtrail doctor` checks the runner before measuring (a failed check only warns).
    doctor = "Check the runner (benchtrail doctor)"
    assert (_benchtrail_args(steps[doctor]["run"], env).func.__name__ == "cmd_doctor"
            and names.index(doctor) < names.index("Run benchmarks") and "||" in steps[doctor]["run"])


def _expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: values[m.group(1)], text)


def _artifact_paths(path_input: str, workspace: Path) -> list[str]:
    """The paths inside the artifact of the files upload-artifact takes for ``path_input``."""
    return [rel for _, rel in artifact_paths(path_input, workspace)]


def test_artifacts_keep_the_run_directory_layout(tmp_path):
    """Compile and execute artifacts merge back into one run directory: modules/ and results/."""
    jobs = _load("benchmark.yml")["jobs"]
    run = tmp_path / RUN_DIR
    for rel in ("run-configs/execution.json", "run-configs/compilation.json",
                "modules/resnet18.export.cuda/model.pt2", "modules/resnet18.export.cuda/module_info.json",
                "results/compilation-a2-highgpu-1g.json", "results/compilation-c2-standard-16.json",
                "results/a2-highgpu-1g-1.json"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("{}")
    values = {"env.RUN_DIR": RUN_DIR, "matrix.device_name": "a2-highgpu-1g", "matrix.shard.index": "1"}

    def uploaded(job_id: str) -> list[str]:
        step = next(s for s in jobs[job_id]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
        return _artifact_paths(_expand(step["with"]["path"], values), tmp_path)

    # (The compile job's run directory would hold only its own statistics; the layout is the point.)
    assert uploaded("compile-cuda") == [
        "modules/resnet18.export.cuda/model.pt2", "modules/resnet18.export.cuda/module_info.json",
        "results/a2-highgpu-1g-1.json", "results/compilation-a2-highgpu-1g.json",
        "results/compilation-c2-standard-16.json"]
    # The shard uploads its own results file only, still under results/ ...
    assert uploaded("execute") == ["results/a2-highgpu-1g-1.json"]
    # ... which a plain `$RUN_DIR/results/` path would lose (that folder would become the root).
    assert _artifact_paths(f"{RUN_DIR}/results/", tmp_path)[0] == "a2-highgpu-1g-1.json"
    # process merges every run-* artifact into $RUN_DIR and compares that run directory.
    process = {step.get("name"): step for step in jobs["process"]["steps"]}
    assert process["Download run configs, modules and results"]["with"] == {
        "pattern": "run-*", "merge-multiple": True, "path": "${{ env.RUN_DIR }}"}
    compare = _benchtrail_args(process["Compare"]["run"], {"RUN_DIR": RUN_DIR})
    assert compare.head == [Path(RUN_DIR)] and compare.store is None


def test_process_compares_with_the_stored_baseline_rechecks_then_stores_the_run():
    job = _load("benchmark.yml")["jobs"]["process"]
    steps = {step.get("name"): step for step in job["steps"]}
    env = {"RUN_DIR": RUN_DIR, "BENCHTRAIL_STORE": "gs://bucket/prefix", "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2",
           "CPU_DEVICE": "c2-standard-16", "BASE_BRANCH": "release"}
    # The caller's input `store`, else the repository variable; an outage costs at most the deadline.
    assert {k: v for k, v in job["env"].items() if k != "BENCHTRAIL_STORE_AUTH"} == {
        "BENCHTRAIL_STORE": "${{ inputs.store || vars.BENCHTRAIL_STORE }}",
        "BENCHTRAIL_STORE_DEADLINE_S": "${{ vars.BENCHTRAIL_STORE_DEADLINE_S || '300' }}"}
    assert job["steps"][0]["with"]["fetch-depth"] == 0  # merge base and the base commit's worktree
    stored = steps["Compare with the stored baseline"]
    assert stored["if"] == "env.BENCHTRAIL_STORE != ''" and steps["Compare"]["if"] == "env.BENCHTRAIL_STORE == ''"
    args = _benchtrail_args(stored["run"], env)
    assert (args.func.__name__, args.store, args.head, args.output, args.base, args.base_branch) == (
        "cmd_compare", "gs://bucket/prefix", [Path(RUN_DIR)], Path(RUN_DIR, "comparison.json"), [], "release")
    # Accepted regressions either way; with a store, trusted baselines of the PR's base branch (the
    # pushed branch otherwise), checked against GitHub's record of their runs with the job's token.
    assert stored["env"] == {**steps["Compare"]["env"], "BASE_BRANCH": "${{ github.base_ref || github.ref_name }}",
                             "GITHUB_TOKEN": "${{ github.token }}"}
    assert steps["Draw the history dashboard"]["env"] == {"GITHUB_TOKEN": "${{ github.token }}"}
    args = _benchtrail_args(steps["Re-check regressions in paired A/B runs"]["run"], env)
    assert (args.func.__name__, args.recheck, args.device_name, args.output_dir) == (
        "cmd_ab", Path(RUN_DIR, "comparison.json"), "c2-standard-16", Path(RUN_DIR, "checked"))
    assert "--total-budget-s" in steps["Re-check regressions in paired A/B runs"]["run"]
    upload = steps["Store the run"]
    assert upload["if"] == "env.BENCHTRAIL_STORE != ''"
    # A PR goes on without the store; a push that cannot store its run fails (and is never a trusted baseline).
    assert upload["continue-on-error"] == "${{ github.event_name == 'pull_request' }}"
    args = _benchtrail_args(upload["run"], env)
    assert (args.func.__name__, args.run_dir, args.store, args.run_id, args.attempt, args.write_pointer) == (
        "cmd_upload", Path(RUN_DIR), "gs://bucket/prefix", "42", 2, True)
    # The comment is rendered after the store step, so it can say where the run is (or that storing
    # failed), then stored into the same run; tests/test_workflow_harness.py runs these steps.
    names = [step.get("name") for step in job["steps"]]
    assert names.index("Store the comment") > names.index("Render the comment") > names.index(
        "Store the run") > names.index("Re-check regressions in paired A/B runs") > names.index("Compare")


# -- concurrency ----------------------------------------------------------------------------------


def test_benchmark_jobs_group_per_pr_and_never_cancel_pushes():
    jobs = _load("benchmark.yml")["jobs"]
    assert "concurrency" not in _load("benchmark.yml")  # a workflow-level group would let no-op edits cancel
    for job_id in ("compile", "compile-cuda", "execute", "process"):
        concurrency = jobs[job_id]["concurrency"]
        group = concurrency["group"]
        assert "format('pr-{0}', github.event.pull_request.number)" in group, job_id
        assert "format('run-{0}', github.run_id)" in group, job_id  # pushes: a group of their own
        assert "${{ needs.setup.outputs.has-benchmarks }}" in group, job_id
        assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", job_id
        assert "needs.setup.outputs.has-benchmarks == 'true'" in jobs[job_id]["if"], job_id
    assert "${{ matrix.device_name }}-${{ matrix.shard.index }}" in jobs["execute"]["concurrency"]["group"]
    # Each job has a group of its own: compile-cuda must not cancel compile, nor the reverse.
    suffixes = {job_id: jobs[job_id]["concurrency"]["group"].rsplit("}}-", 1)[1]
                for job_id in ("compile", "compile-cuda", "process")}
    assert suffixes == {"compile": "compile", "compile-cuda": "compile-cuda", "process": "process"}


# -- actions are pinned ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_every_uses_is_pinned_by_a_full_commit_sha_with_its_version(name):
    lines = [line for line in (WORKFLOWS / name).read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert lines, name
    for line in lines:
        assert PINNED_USES.match(line), f"{name}: not pinned by SHA with a `# vX.Y.Z` comment: {line.strip()}"
    parsed = [step["uses"] for _, step in _steps(_load(name)) if "uses" in step]
    assert len(parsed) == len(lines)
    assert all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses) for uses in parsed), parsed


def test_each_action_is_pinned_to_one_sha_everywhere():
    pins: dict[str, set[str]] = {}
    for name in WORKFLOW_FILES:
        for _, step in _steps(_load(name)):
            if "uses" in step:
                action, sha = step["uses"].split("@")
                pins.setdefault(action, set()).add(sha)
    assert {action: len(shas) for action, shas in pins.items()} == {
        "actions/checkout": 1, "actions/setup-python": 1, "actions/upload-artifact": 1,
        "actions/download-artifact": 1, "google-github-actions/auth": 1}


# -- untrusted text -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_no_run_block_expands_pr_text(name):
    for job_id, step in _steps(_load(name)):
        run = step.get("run", "")
        assert "${{ github.event.pull_request.body" not in run, (name, job_id)
        assert "${{ github.event.pull_request.title" not in run, (name, job_id)
        assert "head_ref" not in run, (name, job_id)
        assert not PR_TEXT_EXPRESSIONS.search(run), (name, job_id, run)


def test_benchmark_and_poster_run_blocks_expand_no_expressions_at_all():
    # Everything a script needs arrives through `env:`; then no value can become shell code.
    for name in ("benchmark.yml", "post_benchmark_comment.yml"):
        for job_id, step in _steps(_load(name)):
            assert "${{" not in step.get("run", ""), (name, job_id, step.get("name"))


def test_configure_reads_the_pr_from_the_event_file_only():
    steps = {step.get("id"): step for _, step in _steps(_load("benchmark.yml")) if step.get("id")}
    configure = steps["configure"]
    assert configure["run"].strip() == '.venv/bin/benchtrail configure --error-comment "$RUNNER_TEMP/selection-error"'
    # The token (read-only: the setup job holds contents and pull-requests read) re-reads the PR on a re-run.
    assert configure["env"] == {"BENCHMARK_PRESETS_INPUT": "${{ inputs.benchmark-presets }}",
                                "GITHUB_TOKEN": "${{ github.token }}"}


def test_every_checkout_drops_its_credentials():
    for name in WORKFLOW_FILES:
        for job_id, step in _steps(_load(name)):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, (name, job_id)


# -- the poster -----------------------------------------------------------------------------------


def test_the_poster_runs_default_branch_code_on_untrusted_data():
    job = _load("post_benchmark_comment.yml")["jobs"]["post"]
    assert job["if"] == "github.event.workflow_run.event == 'pull_request'"
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
    process = _load("benchmark.yml")["jobs"]["process"]
    by_name = {step.get("name"): step for step in process["steps"]}
    prepare = by_name["Prepare the comment artifact"]
    assert prepare["env"] == {"PR_NUMBER": "${{ github.event.pull_request.number }}",
                              "HEAD_SHA": "${{ github.event.pull_request.head.sha }}"}
    assert "comment-artifact/comment.json" in prepare["run"] and "comment-artifact/pr.json" in prepare["run"]
    upload = by_name["Upload the comment artifact"]
    assert upload["with"]["name"] == "comment" and upload["with"]["path"] == "comment-artifact/"


def test_pr_json_written_by_the_process_job_passes_the_posters_checks(tmp_path):
    """Run the process job's jq line and the poster's jq checks on the file it writes."""
    if shutil.which("jq") is None:
        pytest.skip("the jq executable is not installed")
    prepare = next(step for _, step in _steps(_load("benchmark.yml"))
                   if step.get("name") == "Prepare the comment artifact")
    write_line = next(line for line in _joined_lines(prepare["run"]) if line.startswith("jq -n"))
    sha = "0123456789abcdef0123456789abcdef01234567"
    env = {"PR_NUMBER": "42", "HEAD_SHA": sha, "PATH": "/usr/bin:/bin"}
    (tmp_path / "comment-artifact").mkdir()
    subprocess.run(["bash", "-c", write_line], cwd=tmp_path, env=env, check=True)
    pr = json.loads((tmp_path / "comment-artifact/pr.json").read_text())
    assert pr == {"schema_version": 1, "pr_number": 42, "head_sha": sha}
    post = _load("post_benchmark_comment.yml")["jobs"]["post"]["steps"][-1]["run"]
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


def _joined_lines(script: str) -> list[str]:
    """The script's logical lines, with backslash-continued lines joined."""
    return script.replace("\\\n", " ").splitlines()


# -- reusable workflows (workflow_call) and the adopting repository's files -------------------------

# The inputs and secret another repository may pass to benchmark.yml (docs/adopting.md, "The workflow").
CALL_INPUTS = {"benchmark-presets": ("string", ""), "python-version": ("string", "3.11"),
               "working-directory": ("string", "."), "pip-install": ("string", ""), "store": ("string", ""),
               "cpu-device": ("string", "c2-standard-16"), "cuda-device": ("string", "a2-highgpu-1g"),
               "shard-count": ("number", 2)}
CALL_SECRETS = {"BENCHTRAIL_STORE_CREDENTIALS"}
# A run called from another repository: `job.workflow_*` names this file's repository and commit.
CALLED = "job.workflow_repository != '' && job.workflow_repository != github.repository"
PROJECT_FOLDER = "${{ inputs.working-directory || '.' }}"
# A caller's `uses:` of one of benchtrail's reusable workflows, pinned by a full commit SHA.
CALLER_USES = re.compile(
    r"[\w.-]+/benchtrail/\.github/workflows/(benchmark|post_benchmark_comment)\.yml@([0-9a-f]{40})")
ACCESS = {"none": 0, "read": 1, "write": 2}


def _load_example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLE_WORKFLOWS / name).read_text())


def _adopting_md_section(title: str) -> str:
    text = (ROOT / "docs" / "adopting.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_benchmark_workflow_is_callable_with_the_documented_inputs_and_secret():
    call = _triggers(_load("benchmark.yml"))["workflow_call"]
    assert {name: (spec["type"], spec["default"]) for name, spec in call["inputs"].items()} == CALL_INPUTS
    assert all(spec["required"] is False and spec["description"] for spec in call["inputs"].values())
    assert set(call["secrets"]) == CALL_SECRETS
    assert all(spec["required"] is False for spec in call["secrets"].values())
    # docs/adopting.md documents each of them.
    section = _adopting_md_section("The workflow")
    for name in (*CALL_INPUTS, *CALL_SECRETS):
        assert f"`{name}`" in section, name
    # Run by benchtrail's own events (no inputs), each input falls back to its default in the
    # expression itself; every use of it has that form.
    uses = {"benchmark-presets": "inputs.benchmark-presets }}",  # configure's, for workflow_dispatch as before
            "python-version": "inputs.python-version || '3.11' }}",
            "working-directory": "inputs.working-directory || '.' }}",
            "pip-install": "inputs.pip-install }}",  # empty: nothing more to install
            "store": "inputs.store || vars.BENCHTRAIL_STORE }}",
            "cpu-device": "inputs.cpu-device || 'c2-standard-16' }}",
            "cuda-device": "inputs.cuda-device || 'a2-highgpu-1g' }}",
            "shard-count": "inputs.shard-count || 2 }}"}
    text = (WORKFLOWS / "benchmark.yml").read_text()
    for name, use in uses.items():
        assert text.count(f"inputs.{name}") == text.count(use) > 0, name


def _install_steps(name: str) -> dict[str, list[dict[str, Any]]]:
    """Each job's steps from its first checkout up to and including "Install benchtrail"."""
    found = {}
    for job_id, job in _load(name)["jobs"].items():
        names = [step.get("name") for step in job.get("steps", [])]
        if "Install benchtrail" in names:
            found[job_id] = job["steps"][:names.index("Install benchtrail") + 1]
    return found


@pytest.mark.parametrize("name, job_ids", [
    ("benchmark.yml", ["compile", "compile-cuda", "execute", "process", "setup"]),
    ("post_benchmark_comment.yml", ["post"]),
])
def test_a_called_run_installs_benchtrail_from_the_workflows_own_commit(name, job_ids):
    steps = _install_steps(name)
    assert sorted(steps) == job_ids
    for job_id, job_steps in steps.items():
        by_name = {step.get("name"): step for step in job_steps}
        checkout = by_name["Check out benchtrail"]
        assert checkout["if"] == CALLED, job_id
        assert checkout["uses"].startswith("actions/checkout@")
        assert checkout["with"] == {"repository": "${{ job.workflow_repository }}", "ref": "${{ job.workflow_sha }}",
                                    "path": ".benchtrail-src", "persist-credentials": False}, job_id
        assert job_steps[-1]["env"]["BENCHTRAIL_CHECKOUT"] == f"${{{{ ({CALLED}) && '.benchtrail-src' || '.' }}}}"
        setup_python = next(step for step in job_steps if step.get("uses", "").startswith("actions/setup-python@"))
        assert setup_python["with"] == {"python-version": "${{ inputs.python-version || '3.11' }}"}
    # Own repository: the checkout above is skipped and benchtrail comes from the workspace; called
    # from another repository: from benchtrail's checkout. (An empty job.workflow_repository, where
    # GitHub lacks it, installs from the workspace and fails there naming the cause.)
    checkout_dir = re.fullmatch(r"\$\{\{ (.*) \}\}", job_steps[-1]["env"]["BENCHTRAIL_CHECKOUT"])[1]
    for workflow_repository, repository, called in (("owner/benchtrail", "owner/benchtrail", False),
                                                    ("owner/benchtrail", "someone/project", True),
                                                    ("", "someone/project", False)):
        context = {"job.workflow_repository": workflow_repository, "github.repository": repository}
        assert _evaluate(CALLED, context) is called
        assert _value(checkout_dir, context) == (".benchtrail-src" if called else ".")


def test_jobs_that_run_benchtrail_work_in_the_callers_project_folder():
    workflow = _load("benchmark.yml")
    folders = {job_id: job.get("defaults", {}).get("run", {}).get("working-directory")
               for job_id, job in workflow["jobs"].items()}
    assert folders == {"setup": PROJECT_FOLDER, "compile": PROJECT_FOLDER, "compile-cuda": PROJECT_FOLDER,
                       "execute": PROJECT_FOLDER, "process": PROJECT_FOLDER, "gate": None, "summary": None}
    # The run directory is absolute: `run:` steps (in the project's folder) and the artifact actions
    # (in the workspace) mean the same folder.
    assert workflow["env"]["RUN_DIR"] == "${{ github.workspace }}/benchtrail-run"
    prepare = next(step for _, step in _steps(workflow) if step.get("name") == "Prepare the comment artifact")
    assert prepare["working-directory"] == "."  # comment-artifact/ is uploaded from the workspace


@pytest.mark.parametrize("project_labels", [None, ["self-hosted", "bench-laptop"]])
def test_setup_steps_in_an_adopting_project_take_its_runner_labels(tmp_path, project_labels):
    """The setup job's label, export and matrix steps, run in a copy of docs/examples/adopting-classes."""
    if shutil.which("jq") is None:
        pytest.skip("the jq executable is not installed")
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", ".github"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    pyproject = repo / "pyproject.toml"
    assert 'runner-labels = { "laptop" = ["self-hosted", "cpu", "laptop"] }' in pyproject.read_text()
    expected = ["self-hosted", "cpu", "laptop"]  # the example's table (the same as the default)
    if project_labels is not None:  # a table unlike the default: the project's labels, not the rule, reach runs-on
        text = pyproject.read_text().replace('["self-hosted", "cpu", "laptop"]', json.dumps(project_labels))
        pyproject.write_text(text)
        expected = project_labels
    steps = {step.get("name"): step for step in _load("benchmark.yml")["jobs"]["setup"]["steps"]}
    output = tmp_path / "github_output"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
           "RUN_DIR": str(tmp_path / "run"), "SHARD_COUNT": "1", "BENCHTRAIL_SRC": str(ROOT),
           "CPU_DEVICE": "laptop", "CUDA_DEVICE": "a2-highgpu-1g", "PRESETS": "smoke", "GITHUB_OUTPUT": str(output)}
    proc = _run_step(steps["Read the runner labels"], env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert json.loads(outputs["labels"]) == {"laptop": expected}
    assert json.loads(outputs["cpu-runner"]) == expected  # compile and process run there
    assert json.loads(outputs["cuda-runner"]) == ["self-hosted", "cuda", "a2-highgpu-1g"]  # not in the table
    for name in ("Export run configs", "Compute the job matrix"):
        proc = _run_step(steps[name], {**env, "LABELS": outputs["labels"]}, cwd=repo)
        assert proc.returncode == 0, proc.stderr
    matrix = json.loads(dict(line.split("=", 1) for line in output.read_text().splitlines())["matrix"])
    assert matrix == [{"device_name": "laptop", "host_environment": "linux-x86_64", "architecture": "cpu",
                       "shard": {"index": 0, "count": 1}, "runs_on": expected}]


def test_matrix_jq_takes_runs_on_from_the_labels_argument_else_the_default():
    """Through the jq package, as the workflow runs it through the jq CLI (`--argjson labels`)."""
    from benchtrail.github.runner_labels import default_labels

    obj = export_execution(generate(), ("x86_64", "cuda"), shard_count=1)
    program = (ROOT / MATRIX_JQ).read_text()

    def runs_on(labels: dict[str, list[str]]) -> dict[str, list[str]]:
        matrix = jq.compile(program, args={"labels": labels}).input_value(obj).first()
        return {m["device_name"]: m["runs_on"] for m in matrix}

    # No table: benchtrail's rule, the same in Python (benchtrail runner-labels) and in jq.
    assert runs_on({}) == {"c2-standard-16": default_labels("c2-standard-16", "cpu"),
                           "a2-highgpu-1g": default_labels("a2-highgpu-1g", "cuda")}
    assert runs_on({}) == {"c2-standard-16": ["self-hosted", "cpu", "c2-standard-16"],
                           "a2-highgpu-1g": ["self-hosted", "cuda", "a2-highgpu-1g"]}
    # A table names some devices: those take its labels, the rest the default; other names are ignored.
    assert runs_on({"a2-highgpu-1g": ["self-hosted", "gpu-pool"], "laptop": ["x"]}) == {
        "c2-standard-16": ["self-hosted", "cpu", "c2-standard-16"], "a2-highgpu-1g": ["self-hosted", "gpu-pool"]}


AUTH_ACTION = "google-github-actions/auth@"
WIF_STEP = "Authenticate to the store (Workload Identity Federation)"
KEY_STEP = "Authenticate to the store (service-account key)"


def _store_auth(name: str, job_id: str, event: str = "push", ref: str = "refs/heads/main", fork: bool = False,
                provider: str = "projects/1/locations/global/workloadIdentityPools/github/providers/repo",
                key: str = "") -> tuple[str, str | None, str | None]:
    """(BENCHTRAIL_STORE_AUTH, the service account, the credentials_json) of a store job for one event,
    through the harness's expression evaluator. GitHub passes a fork's PR run no secrets."""
    job = _load(name)["jobs"][job_id]
    repo = "octo/project"
    pull = {"head": {"repo": {"full_name": "fork/project" if fork else repo}}} if event == "pull_request" else None
    context = {"github": {"event_name": event, "ref": ref, "repository": repo,
                          "event": {"pull_request": pull, "repository": {"default_branch": "main"}}},
               "vars": {"BENCHTRAIL_STORE": "gs://bucket/prefix", "BENCHTRAIL_WIF_PROVIDER": provider,
                        "BENCHTRAIL_POSTSUBMIT_SERVICE_ACCOUNT": "post@proj.iam.gserviceaccount.com",
                        "BENCHTRAIL_PRESUBMIT_SERVICE_ACCOUNT": "pre@proj.iam.gserviceaccount.com",
                        "BENCHTRAIL_TRACKER_SERVICE_ACCOUNT": "tracker@proj.iam.gserviceaccount.com"},
               "secrets": {} if fork or not key else {"BENCHTRAIL_STORE_CREDENTIALS": key}, "inputs": {}}
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
    steps = {step.get("name"): step for step in _load("benchmark.yml")["jobs"]["process"]["steps"]}
    for step_name in (WIF_STEP, KEY_STEP):
        assert steps[step_name]["uses"].startswith(AUTH_ACTION), step_name
    assert set(steps[WIF_STEP]["with"]) == {"workload_identity_provider", "service_account"}
    assert steps[WIF_STEP]["with"]["workload_identity_provider"] == "${{ vars.BENCHTRAIL_WIF_PROVIDER }}"
    assert steps[KEY_STEP]["with"] == {"credentials_json": "${{ secrets.BENCHTRAIL_STORE_CREDENTIALS }}"}
    post, pre = "post@proj.iam.gserviceaccount.com", "pre@proj.iam.gserviceaccount.com"
    # Federation: the postsubmit account for pushes and manual runs of the default branch only.
    assert _store_auth("benchmark.yml", "process") == ("federation", post, None)
    assert _store_auth("benchmark.yml", "process", "workflow_dispatch") == ("federation", post, None)
    assert _store_auth("benchmark.yml", "process", "workflow_dispatch", "refs/heads/topic") == ("federation", pre, None)
    assert _store_auth("benchmark.yml", "process", "pull_request", "refs/pull/7/merge") == ("federation", pre, None)
    # A labelled fork PR: no OIDC token and no secrets, so no auth step (the runner's own credentials).
    assert _store_auth("benchmark.yml", "process", "pull_request", "refs/pull/7/merge", fork=True,
                       key="{}") == ("runner", None, None)
    # The key only without a provider; neither: the runner's own credentials.
    key = '{"type": "service_account"}'
    assert _store_auth("benchmark.yml", "process", provider="", key=key) == ("key", None, key)
    assert _store_auth("benchmark.yml", "process", provider="", key="") == ("runner", None, None)
    assert _store_auth("benchmark.yml", "process", key=key)[0] == "federation"
    # The auth steps follow every checkout (a checkout would remove the credentials file) and
    # precede every step that reads or writes the store; the hand-written key file is gone.
    names = list(steps)
    checkouts = [i for i, step in enumerate(steps.values()) if step.get("uses", "").startswith("actions/checkout@")]
    store_steps = [i for i, step in enumerate(steps.values()) if "--store" in step.get("run", "")]
    assert max(checkouts) < names.index(WIF_STEP) < names.index(KEY_STEP) < min(store_steps)
    assert not any("GOOGLE_APPLICATION_CREDENTIALS" in step.get("run", "") for step in steps.values())
    # No other job sees a secret.
    for name in WORKFLOW_FILES:
        for job_id, job in _load(name)["jobs"].items():
            text = yaml.safe_dump(job)
            if (name, job_id) not in (("benchmark.yml", "process"), ("track_regressions.yml", "track")):
                assert "secrets." not in text, (name, job_id)


def _touches_store(job: dict[str, Any]) -> bool:
    return any("--store" in step.get("run", "") for step in job.get("steps", []))


def test_id_token_write_is_granted_exactly_to_the_jobs_that_touch_the_store():
    granted, touching = set(), set()
    for name in WORKFLOW_FILES:
        workflow = _load(name)
        assert "id-token" not in workflow["permissions"], name  # never for a whole workflow
        for job_id, job in workflow["jobs"].items():
            assert job["permissions"].get("id-token", "none") in ("none", "write"), (name, job_id)
            if job["permissions"].get("id-token") == "write":
                granted.add((name, job_id))
            if _touches_store(job):
                touching.add((name, job_id))
                auth = [step for step in job["steps"] if step.get("uses", "").startswith(AUTH_ACTION)]
                assert [step["name"] for step in auth] == [WIF_STEP, KEY_STEP], (name, job_id)
    # A caller grants it only to the job whose called workflow has a store job.
    for name, job_id, job, called in _caller_jobs():
        assert _load_example(name)["permissions"] == {}
        if job["permissions"].get("id-token") == "write":
            granted.add((f"example/{name}", job_id))
        if any(_touches_store(called_job) for called_job in _load(called)["jobs"].values()):
            touching.add((f"example/{name}", job_id))
    assert touching == {("benchmark.yml", "process"), ("track_regressions.yml", "track"),
                        ("example/benchmarks.yml", "benchmark")}
    assert granted == touching


def test_the_auth_stand_in_needs_an_oidc_token_for_federation_and_exports_the_credentials_file(tmp_path):
    """tests/workflow_standins.py's google-github-actions/auth, as the harness runs it."""
    from types import SimpleNamespace

    from tests.workflow_standins import AUTH_OIDC_WARNING, google_auth

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
    both = google_auth(run, "auth", {**wif, "credentials_json": "{}"}, workspace, oidc, "process-0", github_env)
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
    key = '{"type": "service_account", "project_id": "proj-2", "client_email": "k@proj-2.iam.gserviceaccount.com"}'
    github_env.write_text("")
    keyed = google_auth(run, "auth", {"credentials_json": key}, workspace, {}, "track-0", github_env)
    assert keyed.outcome == "success", keyed.log
    assert [(a["job"], a["method"], a["service_account"]) for a in run.result.auth[1:]] == [
        ("track", "credentials_json", "k@proj-2.iam.gserviceaccount.com")]
    exported = dict(line.split("=", 1) for line in github_env.read_text().splitlines())
    assert json.loads(Path(exported["GOOGLE_APPLICATION_CREDENTIALS"]).read_text()) == json.loads(key)
    assert exported["GOOGLE_CLOUD_PROJECT"] == "proj-2"


def test_the_tracker_reads_the_store_as_the_tracker_account_or_with_the_key():
    tracker = "tracker@proj.iam.gserviceaccount.com"
    assert _store_auth("track_regressions.yml", "track", "workflow_run") == ("federation", tracker, None)
    assert _store_auth("track_regressions.yml", "track", "workflow_run", provider="", key="k") == ("key", None, "k")
    assert _store_auth("track_regressions.yml", "track", "workflow_run", provider="") == ("runner", None, None)


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_example_workflow_matches_the_github_workflow_schema(name):
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         str(EXAMPLE_WORKFLOWS / name)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout


def test_example_workflows_are_zizmor_clean(tmp_path):
    assert sorted(p.name for p in EXAMPLE_WORKFLOWS.iterdir()) == sorted(EXAMPLE_FILES)
    findings, _ = _zizmor(EXAMPLE_WORKFLOWS)
    assert _describe(findings) == []
    # The one suppression is the poster's workflow_run trigger, with a reason, and it does real work.
    suppressions = [(path.name, line.split("# zizmor:", 1)[1].strip()) for path in sorted(EXAMPLE_WORKFLOWS.iterdir())
                    for line in path.read_text().splitlines() if "# zizmor:" in line]
    assert [name for name, _ in suppressions] == ["post_benchmark_comment.yml"]
    assert re.fullmatch(r"ignore\[dangerous-triggers\] \S.{10,}", suppressions[0][1])
    unsuppressed = tmp_path / "post_benchmark_comment.yml"
    poster = (EXAMPLE_WORKFLOWS / "post_benchmark_comment.yml").read_text()
    unsuppressed.write_text(re.sub(r" *# zizmor:.*", "", poster))
    findings, _ = _zizmor(unsuppressed)
    assert [(f["ident"], f["determinations"]["severity"]) for f in findings] == [("dangerous-triggers", "High")]


def _caller_jobs() -> list[tuple[str, str, dict[str, Any], str]]:
    """(example file, job id, job, called workflow file) of every job that calls benchtrail."""
    found = []
    for name in EXAMPLE_FILES:
        for job_id, job in _load_example(name)["jobs"].items():
            match = CALLER_USES.fullmatch(job["uses"])
            assert match, f"{name}: {job_id} does not call benchtrail pinned by a full commit SHA: {job['uses']}"
            found.append((name, job_id, job, f"{match[1]}.yml"))
    return found


def test_example_callers_pin_one_benchtrail_commit_and_pass_only_declared_inputs_and_secrets():
    callers = _caller_jobs()
    assert [(name, called) for name, _, _, called in callers] == [
        ("benchmarks.yml", "benchmark.yml"), ("post_benchmark_comment.yml", "post_benchmark_comment.yml")]
    assert len({CALLER_USES.fullmatch(job["uses"])[2] for _, _, job, _ in callers}) == 1  # one SHA in both files
    for name, job_id, job, called in callers:
        text = (EXAMPLE_WORKFLOWS / name).read_text()
        # Secrets one by one, never `secrets: inherit`.
        assert job.get("secrets") != "inherit" and not re.search(r"^\s*secrets:\s*inherit", text, re.M), name
        assert "placeholder" in text.lower(), name  # the SHA is marked as one to replace
        declared = _triggers(_load(called))["workflow_call"]
        assert set(job.get("with", {})) <= set(declared.get("inputs", {})), (name, job_id)
        assert all(key in job.get("with", {}) for key, spec in declared.get("inputs", {}).items() if spec["required"])
        secrets = job.get("secrets", {})
        assert set(secrets) <= set(declared.get("secrets", {})), (name, job_id)
        assert secrets == {key: f"${{{{ secrets.{key} }}}}" for key in secrets}
        # The caller grants what every called job asks for (a called workflow can only lower it).
        granted = job["permissions"]
        for called_job_id, called_job in _load(called)["jobs"].items():
            for scope, access in called_job["permissions"].items():
                assert ACCESS[granted.get(scope, "none")] >= ACCESS[access], (name, called_job_id, scope)
        assert _load_example(name)["permissions"] == {}
    benchmark = _load_example("benchmarks.yml")["jobs"]["benchmark"]
    assert benchmark["secrets"] == {"BENCHTRAIL_STORE_CREDENTIALS": "${{ secrets.BENCHTRAIL_STORE_CREDENTIALS }}"}
    assert benchmark["with"]["cpu-device"] == "laptop"  # the example suite's one device


def test_example_caller_triggers_like_benchtrails_own_workflow_and_the_poster_follows_it():
    on = _triggers(_load_example("benchmarks.yml"))
    own = _triggers(_load("benchmark.yml"))
    assert on["pull_request"] == own["pull_request"] and on["push"] == own["push"]
    assert set(on["workflow_dispatch"]["inputs"]) == {"benchmark-presets"}
    assert _load_example("benchmarks.yml")["jobs"]["benchmark"]["with"]["benchmark-presets"] == (
        "${{ inputs.benchmark-presets || '' }}")
    poster = _load_example("post_benchmark_comment.yml")
    assert _triggers(poster) == {"workflow_run": {"workflows": [_load_example("benchmarks.yml")["name"]],
                                                  "types": ["completed"]}}
    assert poster["jobs"]["post"]["if"] == _load("post_benchmark_comment.yml")["jobs"]["post"]["if"]


def test_adopting_md_shows_the_example_files_as_they_are():
    blocks = re.findall(r"```yaml\n(.*?)```", _adopting_md_section("The workflow"), re.S)
    assert [yaml.safe_load(block) for block in blocks] == [_load_example(name) for name in EXAMPLE_FILES]


# -- post-merge tracking ---------------------------------------------------------------------------


def test_the_tracker_runs_track_only_after_a_successful_push_run_of_the_default_branch():
    workflow = _load("track_regressions.yml")
    assert _triggers(workflow) == {"workflow_run": {"workflows": ["benchmark"], "types": ["completed"]}}
    job = workflow["jobs"]["track"]
    assert job["runs-on"] == "ubuntu-latest"  # no self-hosted runner: it measures nothing
    assert job["concurrency"] == {"group": "track-regressions", "cancel-in-progress": False}

    def runs(event, conclusion, branch, store="gs://bucket/main"):
        return _evaluate(job["if"], {
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
    args = _benchtrail_args(step["run"], {"BENCHTRAIL_STORE": "gs://bucket/main", "HEAD_SHA": "a" * 40,
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
