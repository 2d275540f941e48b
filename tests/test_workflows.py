"""The GitHub Actions workflows' structure: schema, triggers, jobs and their needs, matrix, artifacts.

check-jsonschema uses its vendored copy of the SchemaStore ``github-workflow`` schema. DESIGN.md's security rules
are checked in tests/test_workflow_security.py, the reusable workflows in tests/test_workflow_call.py, the jobs'
concurrency in tests/test_workflows_concurrency.py; the shared helpers live in
tests/helpers/workflow_checks.py.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.workflow_checks import (
    MATRIX_JQ,
    ROOT,
    WORKFLOW_FILES,
    WORKFLOWS,
    assert_valid_workflow,
    benchtrail_args,
    evaluate_condition,
    read_workflow,
    run_step_script,
    steps_of,
    triggers_of,
)
from tests.helpers.workflow_standins import artifact_paths

# Runners GitHub hosts; every other `runs-on` is treated as self-hosted.
GITHUB_HOSTED = {"ubuntu-latest"}
# The runs-on of the compile and process jobs: labels the setup job computed (benchtrail runner-labels).
SETUP_RUNNER = "${{{{ fromJSON(needs.setup.outputs.{}-runner || '[\"benchtrail-setup-skipped\"]') }}}}"
FORK_RULE = (
    "github.event_name != 'pull_request'",
    "github.event.pull_request.head.repo.full_name == github.repository",
    "contains(github.event.pull_request.labels.*.name, 'safe-to-benchmark')",
)


# -- GitHub's workflow schema -------------------------------------------------------------------


def test_the_workflow_folder_holds_exactly_the_documented_workflows():
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == sorted(WORKFLOW_FILES)


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_workflow_matches_the_github_workflow_schema(name):
    assert_valid_workflow(WORKFLOWS / name)


# -- triggers -------------------------------------------------------------------------------------


def test_no_workflow_uses_pull_request_target():
    for name in WORKFLOW_FILES:
        assert "pull_request_target" not in triggers_of(read_workflow(name)), name
        assert "pull_request_target" not in (WORKFLOWS / name).read_text(), name


def test_benchmark_triggers():
    workflow = read_workflow("benchmark.yml")
    on = triggers_of(workflow)
    assert workflow["name"] == "benchmark"  # post_benchmark_comment.yml names it
    assert on["pull_request"] == {"types": ["opened", "synchronize", "reopened", "edited", "labeled"]}
    assert on["push"] == {"branches": ["main", "release-*"]}
    assert set(on["workflow_dispatch"]["inputs"]) == {"benchmark-presets"}


def test_the_poster_runs_after_the_benchmark_workflow_completes():
    on = triggers_of(read_workflow("post_benchmark_comment.yml"))
    # workflow_call: another repository's short workflow_run file calls it (docs/adopting.md).
    assert on == {"workflow_run": {"workflows": ["benchmark"], "types": ["requested", "completed"]},
                  "workflow_call": {"inputs": {"python-version": {
                      "description": "Python for benchtrail", "required": False, "default": "3.11",
                      "type": "string"}}}}


# -- self-hosted runners and the fork rule --------------------------------------------------------


def _self_hosted_jobs() -> dict[str, dict[str, Any]]:
    """Jobs that may run on a self-hosted runner: every job whose runs-on is not a GitHub-hosted
    label (labels computed by an expression count, since the project chooses them)."""
    found = {}
    for name in WORKFLOW_FILES:
        for job_id, job in read_workflow(name)["jobs"].items():
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
    workflow = read_workflow("benchmark.yml")
    assert workflow["env"]["CPU_DEVICE"] == "${{ inputs.cpu-device || 'c2-standard-16' }}"
    assert workflow["env"]["CUDA_DEVICE"] == "${{ inputs.cuda-device || 'a2-highgpu-1g' }}"


def test_every_self_hosted_job_carries_the_fork_rule():
    for key, job in _self_hosted_jobs().items():
        condition = " ".join(job["if"].split())
        for clause in FORK_RULE:
            assert clause in condition, f"{key}: `if` lacks {clause!r}: {condition}"
        assert "needs.setup.outputs.has-benchmarks == 'true'" in condition, key


def test_setup_skips_labels_that_neither_approve_nor_select():
    condition = " ".join(read_workflow("benchmark.yml")["jobs"]["setup"]["if"].split())
    assert condition == ("github.event.action != 'labeled' || github.event.label.name == 'safe-to-benchmark' "
                         "|| startsWith(github.event.label.name, 'benchmarks:')")


# -- the matrix -----------------------------------------------------------------------------------


def test_the_setup_job_computes_the_matrix_with_matrix_jq():
    steps = {step.get("id"): step for _, step in steps_of(read_workflow("benchmark.yml")) if step.get("id")}
    # benchtrail's own matrix.jq (the caller's checkout has none), with the project's runner labels.
    assert f'jq -c --argjson labels "$LABELS" -f "$BENCHTRAIL_SRC/{MATRIX_JQ}" ' in steps["matrix"]["run"]
    assert steps["matrix"]["env"] == {"LABELS": "${{ steps.runners.outputs.labels }}",
                                      "HOSTED": "${{ steps.runners.outputs.hosted }}"}
    assert (ROOT / MATRIX_JQ).is_file()
    setup = read_workflow("benchmark.yml")["jobs"]["setup"]
    assert setup["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"


def test_execute_expands_the_setup_matrix_and_keeps_going():
    execute = read_workflow("benchmark.yml")["jobs"]["execute"]
    assert execute["strategy"]["fail-fast"] is False
    assert execute["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.setup.outputs.matrix || '[]') }}"}
    assert execute["timeout-minutes"] == 180
    assert all(isinstance(job["timeout-minutes"], int)
               for name in WORKFLOW_FILES for job in read_workflow(name)["jobs"].values())


@pytest.mark.parametrize("presets, has_cpu_modules, has_cuda_modules, devices, store", [
    ("x86_64,comp-stats", "true", "false", {"c2-standard-16"}, "gs://bucket/prefix"),
    ("cuda", "false", "true", {"a2-highgpu-1g"}, "gs://bucket/prefix"),
    ("x86_64,cuda,comp-stats", "true", "true", {"a2-highgpu-1g", "c2-standard-16"}, "gs://bucket/prefix"),
    ("x86_64,cuda,comp-stats", "true", "true", {"a2-highgpu-1g", "c2-standard-16"},
     "git:origin#benchtrail-data"),
])
def test_setup_steps_export_and_write_the_matrix_outputs(tmp_path, presets, has_cpu_modules, has_cuda_modules,
                                                         devices, store):
    """The setup job's export and matrix steps, run for real with the jq CLI. No runner-labels with a gs://
    store: the default self-hosted labels; with a git: store (no infrastructure): CPU on ubuntu-latest."""
    if shutil.which("jq") is None:
        pytest.skip("the jq executable is not installed")
    workflow = read_workflow("benchmark.yml")
    steps = {step.get("name"): step for step in workflow["jobs"]["setup"]["steps"]}
    output = tmp_path / "github_output"
    assert workflow["env"]["SHARD_COUNT"] == "${{ inputs.shard-count || 2 }}"  # 2 unless a caller says
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
           "RUN_DIR": str(tmp_path / "run"), "SHARD_COUNT": "2", "BENCHTRAIL_SRC": str(ROOT),
           "CPU_DEVICE": "c2-standard-16", "CUDA_DEVICE": "a2-highgpu-1g",
           "PRESETS": presets, "GITHUB_OUTPUT": str(output), "BENCHTRAIL_STORE": store}
    proc = run_step_script(steps["Read the runner labels"], env)
    assert proc.returncode == 0, proc.stderr
    runners = dict(line.split("=", 1) for line in output.read_text().splitlines())
    env["LABELS"], env["HOSTED"] = runners["labels"], runners["hosted"]
    for name in ("Export run configs", "Compute the job matrix"):
        proc = run_step_script(steps[name], env)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "run/run-configs").iterdir()) == ["compilation.json",
                                                                                "execution.json"]
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert sorted(outputs) == ["cpu-runner", "cuda-runner", "has-cpu-modules", "has-cuda-modules",
                               "has-execution",
                               "hosted", "labels", "matrix"]
    assert outputs["has-cpu-modules"] == has_cpu_modules
    assert outputs["has-cuda-modules"] == has_cuda_modules
    assert outputs["has-execution"] == "true"
    # benchtrail's own pyproject.toml has no runner-labels: every device keeps the default labels.
    assert json.loads(outputs["labels"]) == {}
    hosted = store.startswith("git:")
    assert outputs["hosted"] == str(hosted).lower()
    cpu_default = ["self-hosted", "cpu", "c2-standard-16"]
    assert json.loads(outputs["cpu-runner"]) == (["ubuntu-latest"] if hosted else cpu_default)
    # GitHub hosts no GPU runner: CUDA keeps the default labels.
    assert json.loads(outputs["cuda-runner"]) == ["self-hosted", "cuda", "a2-highgpu-1g"]
    matrix = json.loads(outputs["matrix"])
    assert {m["device_name"] for m in matrix} == devices
    assert sorted({(m["shard"]["index"], m["shard"]["count"]) for m in matrix}) == [(0, 2), (1, 2)]
    assert all(m["runs_on"] == (["ubuntu-latest"] if hosted and m["architecture"] == "cpu" else
                                ["self-hosted", m["architecture"], m["device_name"]]) for m in matrix)
    # The job exposes each step output under the same name (the labels table only feeds the matrix).
    assert workflow["jobs"]["setup"]["outputs"] == {
        "benchmark-presets": "${{ steps.configure.outputs.benchmark-presets }}",
        "has-benchmarks": "${{ steps.configure.outputs.has-benchmarks }}",
        "benchmarks-accept": "${{ steps.configure.outputs.benchmarks-accept }}",
        "selection-error": "${{ steps.configure.outputs.selection-error }}",
        "postsubmit": "${{ steps.configure.outputs.postsubmit }}",
        "cpu-runner": "${{ steps.runners.outputs.cpu-runner }}",
        "cuda-runner": "${{ steps.runners.outputs.cuda-runner }}",
        "hosted": "${{ steps.runners.outputs.hosted }}",
        **{name: f"${{{{ steps.matrix.outputs.{name} }}}}" for name in outputs
           if name not in ("labels", "cpu-runner", "cuda-runner", "hosted")}}


# -- compiled modules -----------------------------------------------------------------------------

RUN_DIR = "benchtrail-run"


def _context(event: str = "push", fork: bool = False, labels: tuple[str, ...] = (), **needs: str) -> dict[str,
                                                                                                          Any]:
    """An `if:` context: a push (or PR) with benchmarks to run, and the given ``needs`` results."""
    context: dict[str, Any] = {
        "github.event_name": event, "github.repository": "owner/benchtrail",
        "github.event.pull_request.head.repo.full_name": "someone/benchtrail" if fork else "owner/benchtrail",
        "github.event.pull_request.labels.*.name": list(labels),
        "needs.setup.outputs.has-benchmarks": "true", "needs.setup.outputs.has-execution": "true",
    }
    context.update({f"needs.{job.replace('_', '-')}.result": result for job, result in needs.items()})
    return context


@pytest.mark.parametrize("job_id, architecture, device, flag", [
    ("compile", "cpu", "c2-standard-16", "has-cpu-modules"),
    ("compile-cuda", "cuda", "a2-highgpu-1g", "has-cuda-modules"),
])
def test_each_compile_job_compiles_one_architecture_on_its_device(job_id, architecture, device, flag):
    job = read_workflow("benchmark.yml")["jobs"][job_id]
    assert job["needs"] == "setup"
    assert job["runs-on"] == SETUP_RUNNER.format(architecture)
    device_env = f"{architecture.upper()}_DEVICE"
    condition = " ".join(job["if"].split())
    assert f"needs.setup.outputs.{flag} == 'true'" in condition
    assert evaluate_condition(condition, {**_context(), f"needs.setup.outputs.{flag}": "true"}) is True
    assert evaluate_condition(condition, {**_context(), f"needs.setup.outputs.{flag}": "false"}) is False
    assert evaluate_condition(condition, {**_context("pull_request", fork=True),
                                          f"needs.setup.outputs.{flag}": "true"}) is False
    steps = {step.get("name"): step for step in job["steps"]}
    args = benchtrail_args(steps[f"Compile {architecture.upper()} modules"]["run"],
                           {"RUN_DIR": RUN_DIR, device_env: device})
    assert (args.func.__name__, args.run_configs, args.output_dir, args.device_name, args.architecture) == (
        "cmd_compile", Path(RUN_DIR, "run-configs/compilation.json"), Path(RUN_DIR), device, architecture)
    assert steps["Upload modules and compilation statistics"]["with"] == {
        "name": f"run-compilation-${{{{ env.{device_env} }}}}",
        "path": "${{ env.RUN_DIR }}/modules/\n${{ env.RUN_DIR }}/results/\n",
        "if-no-files-found": "error",
    }


def test_only_the_compile_jobs_compile():
    compiling = sorted(job_id for job_id, step in steps_of(read_workflow("benchmark.yml"))
                       if "benchtrail compile" in step.get("run", ""))
    assert compiling == ["compile", "compile-cuda"]


def test_execute_waits_for_both_compile_jobs_and_runs_whatever_they_did():
    """A compile job that failed or died fails only its own modules' run configs (the run stage
    reports them); the other cases still run."""
    execute = read_workflow("benchmark.yml")["jobs"]["execute"]
    assert execute["needs"] == ["setup", "compile", "compile-cuda"]
    condition = " ".join(execute["if"].split())
    ran = {(cpu, cuda): evaluate_condition(condition,
                                           _context(setup="success", compile=cpu, compile_cuda=cuda))
           for cpu in ("success", "skipped", "failure", "cancelled")
           for cuda in ("success", "skipped", "failure", "cancelled")}
    assert all(ran.values())
    assert evaluate_condition(condition,
                              _context(setup="failure", compile="skipped", compile_cuda="skipped")) is False
    ok = _context(setup="success", compile="success", compile_cuda="skipped")
    assert evaluate_condition(condition, ok, cancelled=True) is False
    assert evaluate_condition(condition, {**ok, "needs.setup.outputs.has-execution": "false"}) is False
    # setup failed
    assert evaluate_condition(condition, {**ok, "needs.setup.outputs.has-benchmarks": ""}) is False
    assert evaluate_condition(condition, _context("pull_request", fork=True, setup="success",
                                                  compile="skipped", compile_cuda="skipped")) is False
    assert evaluate_condition(condition, _context("pull_request", fork=True, labels=("safe-to-benchmark",),
                                                  setup="success",
                                                  compile="success", compile_cuda="success")) is True


def test_process_reports_whatever_the_benchmark_jobs_did():
    """Failed or dead compile and execute jobs are reported by the comment, never silence it."""
    process = read_workflow("benchmark.yml")["jobs"]["process"]
    assert process["needs"] == ["setup", "compile", "compile-cuda", "execute"]
    condition = " ".join(process["if"].split())
    for results in (("success", "success", "success"), ("skipped", "failure", "skipped"),
                    ("failure", "skipped", "failure"), ("cancelled", "skipped", "failure")):
        assert evaluate_condition(condition, _context(setup="success", compile=results[0],
                                                      compile_cuda=results[1], execute=results[2])), results
    assert evaluate_condition(condition, _context(setup="failure", compile="skipped", compile_cuda="skipped",
                                                  execute="skipped")) is False
    # Nothing ran for a fork PR without the label: nothing to report.
    assert evaluate_condition(condition, _context("pull_request", fork=True, setup="success",
                                                  compile="skipped", compile_cuda="skipped",
                                                  execute="skipped")) is False
    assert evaluate_condition(condition, _context(setup="success", compile="success", compile_cuda="success",
                                                  execute="success"), cancelled=True) is False


def test_execute_downloads_the_compiled_modules_and_runs_with_them():
    execute = read_workflow("benchmark.yml")["jobs"]["execute"]
    steps = {step.get("name"): step for step in execute["steps"]}
    download = steps["Download compiled modules"]
    assert download["uses"].startswith("actions/download-artifact@")
    assert download["with"] == {"pattern": "run-compilation-*", "merge-multiple": True,
                                "path": "${{ env.RUN_DIR }}"}
    # Only when a compile job ran, so the pattern matches at least one artifact.
    guard = " ".join(download["if"].split())
    outputs = ("needs.setup.outputs.has-cpu-modules", "needs.setup.outputs.has-cuda-modules")
    assert {(cpu, cuda): evaluate_condition(guard, dict(zip(outputs, (cpu, cuda))))
            for cpu in ("true", "false") for cuda in ("true", "false")} == {
        ("true", "true"): True, ("true", "false"): True, ("false", "true"): True, ("false", "false"): False}
    # Every compile job uploads an artifact the pattern matches.
    jobs = read_workflow("benchmark.yml")["jobs"]
    devices = {"env.CPU_DEVICE": "c2-standard-16", "env.CUDA_DEVICE": "a2-highgpu-1g"}
    uploaded = [_expand(step["with"]["name"], devices) for job_id in ("compile", "compile-cuda")
                for step in jobs[job_id]["steps"] if step.get("uses",
                                                              "").startswith("actions/upload-artifact@")]
    assert uploaded == ["run-compilation-c2-standard-16", "run-compilation-a2-highgpu-1g"]
    assert all(re.fullmatch(download["with"]["pattern"].replace("*", ".*"), name) for name in uploaded)
    env = {"RUN_DIR": RUN_DIR, "DEVICE_NAME": "a2-highgpu-1g", "SHARD_INDEX": "1", "hosted": ""}
    args = benchtrail_args(steps["Run benchmarks"]["run"], env)
    assert (args.func.__name__, args.run_configs, args.device_name, args.shard_index, args.modules_dir,
            args.output) == ("cmd_run", Path(RUN_DIR, "run-configs/execution.json"), "a2-highgpu-1g", 1,
                             Path(RUN_DIR), Path(RUN_DIR, "results/a2-highgpu-1g-1.json"))
    # A CPU device on a GitHub-hosted runner gates on instruction counts (the `hosted` array of the step).
    assert 'hosted=(--metrics "$METRICS" --gate-metric instructions)' in steps["Run benchmarks"]["run"]
    assert execute["env"]["HOSTED_CPU"] == (
        "${{ needs.setup.outputs.hosted == 'true' && matrix.architecture == 'cpu' }}")
    assert execute["env"]["METRICS"] == "${{ inputs.metrics || 'latency,instructions' }}"
    names = [step.get("name") or step["uses"].split("@")[0] for step in execute["steps"]]
    assert names.index("Download compiled modules") < names.index("Run benchmarks")
    # `benchtrail doctor` checks the runner before measuring (a failed check only warns).
    doctor = "Check the runner (benchtrail doctor)"
    assert (benchtrail_args(steps[doctor]["run"], env).func.__name__ == "cmd_doctor"
            and names.index(doctor) < names.index("Run benchmarks") and "||" in steps[doctor]["run"])


def _expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: values[m.group(1)], text)


def _artifact_paths(path_input: str, workspace: Path) -> list[str]:
    """The paths inside the artifact of the files upload-artifact takes for ``path_input``."""
    return [rel for _, rel in artifact_paths(path_input, workspace)]


def test_artifacts_keep_the_run_directory_layout(tmp_path):
    """Compile and execute artifacts merge back into one run directory: modules/ and results/."""
    jobs = read_workflow("benchmark.yml")["jobs"]
    run = tmp_path / RUN_DIR
    for rel in ("run-configs/execution.json", "run-configs/compilation.json",
                "modules/resnet18.export.cuda/model.pt2", "modules/resnet18.export.cuda/module_info.json",
                "results/compilation-a2-highgpu-1g.json", "results/compilation-c2-standard-16.json",
                "results/a2-highgpu-1g-1.json"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("{}")
    values = {"env.RUN_DIR": RUN_DIR, "matrix.device_name": "a2-highgpu-1g", "matrix.shard.index": "1"}

    def uploaded(job_id: str) -> list[str]:
        step = next(s for s in jobs[job_id]["steps"] if s.get("uses",
                                                              "").startswith("actions/upload-artifact@"))
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
    compare = benchtrail_args(process["Compare"]["run"], {"RUN_DIR": RUN_DIR})
    assert compare.head == [Path(RUN_DIR)] and compare.store is None


def test_process_compares_with_the_stored_baseline_rechecks_then_stores_the_run():
    job = read_workflow("benchmark.yml")["jobs"]["process"]
    steps = {step.get("name"): step for step in job["steps"]}
    env = {"RUN_DIR": RUN_DIR, "BENCHTRAIL_STORE": "gs://bucket/prefix", "GITHUB_RUN_ID": "42",
           "GITHUB_RUN_ATTEMPT": "2", "CPU_DEVICE": "c2-standard-16", "BASE_BRANCH": "release",
           "BENCHTRAIL_RUN_STORE": "gs://bucket/prefix/presubmit"}
    # The caller's input `store`, else the repository variable, else the data branch (`none`: no store);
    # an outage costs at most the deadline.
    assert " ".join(read_workflow("benchmark.yml")["env"]["BENCHTRAIL_STORE"].split()) == (
        "${{ (inputs.store || vars.BENCHTRAIL_STORE) != 'none' && "
        "(inputs.store || vars.BENCHTRAIL_STORE || 'git:origin#benchtrail-data') || '' }}")
    assert {k: v for k, v in job["env"].items() if k != "BENCHTRAIL_STORE_AUTH"} == {
        "POSTSUBMIT": "${{ (github.event_name == 'push' || github.event_name == 'workflow_dispatch') && "
                      "needs.setup.outputs.postsubmit == 'true' }}",
        "BENCHTRAIL_STORE_DEADLINE_S": "${{ vars.BENCHTRAIL_STORE_DEADLINE_S || '300' }}",
        "BENCHTRAIL_RELEASE_BRANCHES": "${{ vars.BENCHTRAIL_RELEASE_BRANCHES }}"}
    assert job["steps"][0]["with"]["fetch-depth"] == 0  # merge base and the base commit's worktree
    stored = steps["Compare with the stored baseline"]
    assert stored["if"] == "env.BENCHTRAIL_STORE != ''" and steps["Compare"]["if"] == ("env.BENCHTRAIL_STORE "
                                                                                       "== ''")
    args = benchtrail_args(stored["run"], env)
    assert (args.func.__name__, args.store, args.head, args.output, args.base, args.base_branch) == (
        "cmd_compare", "gs://bucket/prefix", [Path(RUN_DIR)], Path(RUN_DIR, "comparison.json"), [], "release")
    # Accepted regressions either way; with a store, trusted baselines of the PR's base branch (the
    # pushed branch otherwise), checked against GitHub's record of their runs with the job's token.
    assert stored["env"] == {**steps["Compare"]["env"],
                             "BASE_BRANCH": "${{ github.base_ref || github.ref_name }}",
                             "GITHUB_TOKEN": "${{ github.token }}"}
    assert steps["Draw the history dashboard"]["env"] == {"GITHUB_TOKEN": "${{ github.token }}"}
    args = benchtrail_args(steps["Re-check regressions in paired A/B runs"]["run"], env)
    assert (args.func.__name__, args.recheck, args.device_name, args.output_dir) == (
        "cmd_ab", Path(RUN_DIR, "comparison.json"), "c2-standard-16", Path(RUN_DIR, "checked"))
    assert "--total-budget-s" in steps["Re-check regressions in paired A/B runs"]["run"]
    upload = steps["Store the run"]
    assert upload["if"] == "env.BENCHTRAIL_RUN_STORE != ''"  # none for a PR with a git: store
    # A PR goes on without the store; a push that cannot store its run fails (and is never a trusted
    # baseline).
    assert upload["continue-on-error"] == "${{ github.event_name == 'pull_request' }}"
    args = benchtrail_args(upload["run"], env)
    # ... into BENCHTRAIL_RUN_STORE: a PR's run under presubmit/ (test_workflow_security.py checks the
    # choice).
    assert (args.func.__name__, args.run_dir, args.store, args.run_id, args.attempt, args.write_pointer) == (
        "cmd_upload", Path(RUN_DIR), "gs://bucket/prefix/presubmit", "42", 2, True)
    # The comment is rendered after the store step, so it can say where the run is (or that storing
    # failed), then stored into the same run; tests/test_workflow_harness.py runs these steps.
    names = [step.get("name") for step in job["steps"]]
    assert names.index("Store the comment") > names.index("Render the comment") > names.index(
        "Store the run") > names.index("Re-check regressions in paired A/B runs") > names.index("Compare")
