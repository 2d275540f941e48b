"""The reusable workflows (workflow_call) and the adopting repository's example caller workflows."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import jq
import pytest
import yaml

from benchmark_suites.suite import generate
from benchtrail.compare.document import Comparison
from benchtrail.suite.export import export_execution
from tests.helpers.git import git
from tests.helpers.workflow_checks import (
    CALLER_USES,
    EXAMPLE,
    EXAMPLE_FILES,
    EXAMPLE_WORKFLOWS,
    MATRIX_JQ,
    ROOT,
    WORKFLOWS,
    assert_valid_workflow,
    caller_jobs,
    describe_findings,
    evaluate_condition,
    expression_value,
    read_example_workflow,
    read_workflow,
    run_step_script,
    steps_of,
    triggers_of,
    zizmor_findings,
)

# -- reusable workflows (workflow_call) and the adopting repository's files -------------------------

# The inputs and secret another repository may pass to benchmark.yml (docs/adopting.md, "The workflow").
CALL_INPUTS = {"benchmark-presets": ("string", ""), "python-version": ("string", "3.11"),
               "working-directory": ("string", "."), "pip-install": ("string", ""), "store": ("string", ""),
               "cpu-device": ("string", "c2-standard-16"), "cuda-device": ("string", "a2-highgpu-1g"),
               "shard-count": ("number", 2), "metrics": ("string", "latency,instructions")}
CALL_SECRETS = {"BENCHTRAIL_STORE_CREDENTIALS", "BENCHTRAIL_POSTSUBMIT_STORE_CREDENTIALS",
                "BENCHTRAIL_DEPLOY_KEY"}
#: Documented in docs/workflows.md ("The git store and GitHub-hosted runners") until docs/adopting.md
#: lists them.
WORKFLOWS_MD_ONLY = {"metrics", "BENCHTRAIL_DEPLOY_KEY"}
# A run called from another repository: `job.workflow_*` names this file's repository and commit.
CALLED = "job.workflow_repository != '' && job.workflow_repository != github.repository"
PROJECT_FOLDER = "${{ inputs.working-directory || '.' }}"
ACCESS = {"none": 0, "read": 1, "write": 2}


def _adopting_md_section(title: str) -> str:
    text = (ROOT / "docs" / "adopting.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_benchmark_workflow_is_callable_with_the_documented_inputs_and_secret():
    call = triggers_of(read_workflow("benchmark.yml"))["workflow_call"]
    assert {name: (spec["type"], spec["default"]) for name, spec in call["inputs"].items()} == CALL_INPUTS
    assert all(spec["required"] is False and spec["description"] for spec in call["inputs"].values())
    assert set(call["secrets"]) == CALL_SECRETS
    assert all(spec["required"] is False for spec in call["secrets"].values())
    # docs/adopting.md documents each of them.
    section = _adopting_md_section("The workflow")
    hosted = (ROOT / "docs" / "workflows.md").read_text().split("## The git store and GitHub-hosted runners\n")
    for name in (*CALL_INPUTS, *CALL_SECRETS):
        where = hosted[1] if name in WORKFLOWS_MD_ONLY and f"`{name}`" not in section else section
        assert f"`{name}`" in where, name
    # Run by benchtrail's own events (no inputs), each input falls back to its default in the
    # expression itself; every use of it has that form.
    # configure's, for workflow_dispatch as before
    uses = {"benchmark-presets": "inputs.benchmark-presets }}",
            "python-version": "inputs.python-version || '3.11' }}",
            "working-directory": "inputs.working-directory || '.' }}",
            "pip-install": "inputs.pip-install }}",  # empty: nothing more to install
            "store": "inputs.store || vars.BENCHTRAIL_STORE",  # then the data branch, or `none`
            "cpu-device": "inputs.cpu-device || 'c2-standard-16' }}",
            "cuda-device": "inputs.cuda-device || 'a2-highgpu-1g' }}",
            "shard-count": "inputs.shard-count || 2 }}",
            "metrics": "inputs.metrics || 'latency,instructions' }}"}
    text = (WORKFLOWS / "benchmark.yml").read_text()
    for name, use in uses.items():
        assert text.count(f"inputs.{name}") == text.count(use) > 0, name


def _install_steps(name: str) -> dict[str, list[dict[str, Any]]]:
    """Each job's steps from its first checkout up to and including "Install benchtrail"."""
    found = {}
    for job_id, job in read_workflow(name)["jobs"].items():
        names = [step.get("name") for step in job.get("steps", [])]
        if "Install benchtrail" in names:
            found[job_id] = job["steps"][:names.index("Install benchtrail") + 1]
    return found


@pytest.mark.parametrize("name, job_ids", [
    ("benchmark.yml", ["compile", "compile-cuda", "execute", "pages", "process", "setup"]),
    ("post_benchmark_comment.yml", ["gate", "post"]),
])
def test_a_called_run_installs_benchtrail_from_the_workflows_own_commit(name, job_ids):
    steps = _install_steps(name)
    assert sorted(steps) == job_ids
    for job_id, job_steps in steps.items():
        by_name = {step.get("name"): step for step in job_steps}
        checkout = by_name["Check out benchtrail"]
        assert checkout["if"] == CALLED, job_id
        assert checkout["uses"].startswith("actions/checkout@")
        assert checkout["with"] == {"repository": "${{ job.workflow_repository }}",
                                    "ref": "${{ job.workflow_sha }}",
                                    "path": ".benchtrail-src", "persist-credentials": False}, job_id
        assert job_steps[-1]["env"]["BENCHTRAIL_CHECKOUT"] == f"${{{{ ({CALLED}) && '.benchtrail-src' || '.' }}}}"
        setup_python = next(step for step in job_steps if step.get("uses",
                                                                   "").startswith("actions/setup-python@"))
        assert setup_python["with"] == {"python-version": "${{ inputs.python-version || '3.11' }}"}
    # Own repository: the checkout above is skipped and benchtrail comes from the workspace; called
    # from another repository: from benchtrail's checkout. (An empty job.workflow_repository, where
    # GitHub lacks it, installs from the workspace and fails there naming the cause.)
    checkout_dir = re.fullmatch(r"\$\{\{ (.*) \}\}", job_steps[-1]["env"]["BENCHTRAIL_CHECKOUT"])[1]
    for workflow_repository, repository, called in (("owner/benchtrail", "owner/benchtrail", False),
                                                    ("owner/benchtrail", "someone/project", True),
                                                    ("", "someone/project", False)):
        context = {"job.workflow_repository": workflow_repository, "github.repository": repository}
        assert evaluate_condition(CALLED, context) is called
        assert expression_value(checkout_dir, context) == (".benchtrail-src" if called else ".")


def test_jobs_that_run_benchtrail_work_in_the_callers_project_folder():
    workflow = read_workflow("benchmark.yml")
    folders = {job_id: job.get("defaults", {}).get("run", {}).get("working-directory")
               for job_id, job in workflow["jobs"].items()}
    assert folders == {"setup": PROJECT_FOLDER, "compile": PROJECT_FOLDER, "compile-cuda": PROJECT_FOLDER,
                       "execute": PROJECT_FOLDER, "process": PROJECT_FOLDER, "pages": PROJECT_FOLDER,
                       "summary": None}
    # The run directory is absolute: `run:` steps (in the project's folder) and the artifact actions
    # (in the workspace) mean the same folder.
    assert workflow["env"]["RUN_DIR"] == "${{ github.workspace }}/benchtrail-run"
    prepare = next(step for _, step in steps_of(workflow)
                   if step.get("name") == "Prepare the comment artifact")
    assert prepare["working-directory"] == "."  # comment-artifact/ is uploaded from the workspace


def _setup_steps_in_the_example(tmp_path: Path, shard_count: int, project_labels: list[str] | None = None
                                ) -> dict[str, str]:
    """Run the setup job's label, export and matrix steps (the jq CLI, as on the runner) in a copy of
    docs/examples/adopting-classes (`smoke`: one case, on device `laptop`), its runner-labels table
    replaced by ``project_labels`` when given; the steps' outputs. The run directory: ``tmp_path / "run"``."""
    if shutil.which("jq") is None:
        pytest.skip("the jq executable is not installed")
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", ".github"))
    git(None, "init", "-q", str(repo))
    pyproject = repo / "pyproject.toml"
    assert 'runner-labels = { "laptop" = ["self-hosted", "cpu", "laptop"] }' in pyproject.read_text()
    if project_labels is not None:
        text = pyproject.read_text().replace('["self-hosted", "cpu", "laptop"]', json.dumps(project_labels))
        pyproject.write_text(text)
    steps = {step.get("name"): step for step in read_workflow("benchmark.yml")["jobs"]["setup"]["steps"]}
    output = tmp_path / "github_output"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
           "RUN_DIR": str(tmp_path / "run"), "SHARD_COUNT": str(shard_count), "BENCHTRAIL_SRC": str(ROOT),
           "CPU_DEVICE": "laptop", "CUDA_DEVICE": "a2-highgpu-1g", "PRESETS": "smoke",
           "GITHUB_OUTPUT": str(output)}
    proc = run_step_script(steps["Read the runner labels"], env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    labels = dict(line.split("=", 1) for line in output.read_text().splitlines())["labels"]
    for name in ("Export run configs", "Compute the job matrix"):
        proc = run_step_script(steps[name], {**env, "LABELS": labels}, cwd=repo)
        assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


@pytest.mark.parametrize("project_labels", [None, ["self-hosted", "bench-laptop"]])
def test_setup_steps_in_an_adopting_project_take_its_runner_labels(tmp_path, project_labels):
    """The setup job's label, export and matrix steps, run in a copy of docs/examples/adopting-classes."""
    # Without project_labels: the example's table (the same as the default); with them, a table unlike the
    # default: the project's labels, not the rule, reach runs-on.
    expected = project_labels or ["self-hosted", "cpu", "laptop"]
    outputs = _setup_steps_in_the_example(tmp_path, 1, project_labels)
    assert json.loads(outputs["labels"]) == {"laptop": expected}
    assert json.loads(outputs["cpu-runner"]) == expected  # compile and process run there
    assert json.loads(outputs["cuda-runner"]) == ["self-hosted", "cuda", "a2-highgpu-1g"]  # not in the table
    assert json.loads(outputs["matrix"]) == [{"device_name": "laptop", "host_environment": "linux-x86_64",
                                              "architecture": "cpu", "shard": {"index": 0, "count": 1},
                                              "runs_on": expected}]


def test_a_suite_with_fewer_cases_than_shards_takes_no_runner_for_an_empty_shard(tmp_path):
    """The example's one case with shard-count 3: one execute leg, not three (shards 1 and 2 are empty and
    would each hold a self-hosted runner for nothing), and the comparison of that leg's results calls no
    shard unreported: the comment has no "Shards that did not report" line (issue 39)."""
    from benchtrail.compare.comment_header import missing_shards_line
    from benchtrail.pipeline.report_stages import compare_stage
    from benchtrail.results.io import write_results
    from benchtrail.suite.export import load_execution
    from tests.helpers.records import record, results

    outputs = _setup_steps_in_the_example(tmp_path, 3)
    assert json.loads(outputs["matrix"]) == [{"device_name": "laptop", "host_environment": "linux-x86_64",
                                              "architecture": "cpu", "shard": {"index": 0, "count": 3},
                                              "runs_on": ["self-hosted", "cpu", "laptop"]}]
    assert outputs["has-execution"] == "true"
    run_dir = tmp_path / "run"
    shards = load_execution(run_dir / "run-configs" / "execution.json")["laptop"]
    assert [len(shards[i]) for i in sorted(shards)] == [1, 0, 0]  # the export keeps the shards asked for
    # The one leg's results (its run-execution artifact); the process job compares the merged run directory.
    leg = results(*(record(rc.id, name=rc.name) for rc in shards[0]))
    write_results(run_dir / "results" / "laptop-0.json", leg)
    comparison = json.loads(compare_stage([], [run_dir], tmp_path / "comparison.json", None).read_text())
    assert comparison["missing_shards"] == []
    assert [(r["name"], r["verdict"]) for r in comparison["rows"]] == [(shards[0][0].name, "new")]
    assert missing_shards_line(Comparison.of(comparison)) is None


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
        "c2-standard-16": ["self-hosted", "cpu", "c2-standard-16"],
        "a2-highgpu-1g": ["self-hosted", "gpu-pool"]}


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_example_workflow_matches_the_github_workflow_schema(name):
    assert_valid_workflow(EXAMPLE_WORKFLOWS / name)


def test_example_workflows_are_zizmor_clean(tmp_path):
    assert sorted(p.name for p in EXAMPLE_WORKFLOWS.iterdir()) == sorted(EXAMPLE_FILES)
    findings, _ = zizmor_findings(EXAMPLE_WORKFLOWS)
    assert describe_findings(findings) == []
    # The one suppression is the poster's workflow_run trigger, with a reason, and it does real work.
    suppressions = [(path.name,
                     line.split("# zizmor:", 1)[1].strip()) for path in sorted(EXAMPLE_WORKFLOWS.iterdir())
                    for line in path.read_text().splitlines() if "# zizmor:" in line]
    assert [name for name, _ in suppressions] == ["post_benchmark_comment.yml"]
    assert re.fullmatch(r"ignore\[dangerous-triggers\] \S.{10,}", suppressions[0][1])
    unsuppressed = tmp_path / "post_benchmark_comment.yml"
    poster = (EXAMPLE_WORKFLOWS / "post_benchmark_comment.yml").read_text()
    unsuppressed.write_text(re.sub(r" *# zizmor:.*", "", poster))
    findings, _ = zizmor_findings(unsuppressed)
    assert [(f["ident"], f["determinations"]["severity"]) for f in findings] == [("dangerous-triggers",
                                                                                  "High")]


def test_example_callers_pin_one_benchtrail_commit_and_pass_only_declared_inputs_and_secrets():
    callers = caller_jobs()
    assert [(name, called) for name, _, _, called in callers] == [
        ("benchmarks.yml", "benchmark.yml"), ("post_benchmark_comment.yml", "post_benchmark_comment.yml")]
    # one SHA in both files
    assert len({CALLER_USES.fullmatch(job["uses"])[2] for _, _, job, _ in callers}) == 1
    for name, job_id, job, called in callers:
        text = (EXAMPLE_WORKFLOWS / name).read_text()
        # Secrets one by one, never `secrets: inherit`.
        assert job.get("secrets") != "inherit" and not re.search(r"^\s*secrets:\s*inherit", text, re.M), name
        assert "placeholder" in text.lower(), name  # the SHA is marked as one to replace
        declared = triggers_of(read_workflow(called))["workflow_call"]
        assert set(job.get("with", {})) <= set(declared.get("inputs", {})), (name, job_id)
        assert all(key in job.get("with", {}) for key,
                   spec in declared.get("inputs", {}).items() if spec["required"])
        secrets = job.get("secrets", {})
        assert set(secrets) <= set(declared.get("secrets", {})), (name, job_id)
        assert secrets == {key: f"${{{{ secrets.{key} }}}}" for key in secrets}
        # The caller grants what every called job asks for (a called workflow can only lower it).
        granted = job["permissions"]
        for called_job_id, called_job in read_workflow(called)["jobs"].items():
            for scope, access in called_job["permissions"].items():
                assert ACCESS[granted.get(scope, "none")] >= ACCESS[access], (name, called_job_id, scope)
        assert read_example_workflow(name)["permissions"] == {}
    benchmark = read_example_workflow("benchmarks.yml")["jobs"]["benchmark"]
    assert benchmark["secrets"] == {"BENCHTRAIL_STORE_CREDENTIALS": "${{ secrets.BENCHTRAIL_STORE_"
                                    "CREDENTIALS }}"}
    assert benchmark["with"]["cpu-device"] == "laptop"  # the example suite's one device


def test_example_caller_triggers_like_benchtrails_own_workflow_and_the_poster_follows_it():
    on = triggers_of(read_example_workflow("benchmarks.yml"))
    own = triggers_of(read_workflow("benchmark.yml"))
    assert on["pull_request"] == own["pull_request"] and on["push"] == own["push"]
    assert set(on["workflow_dispatch"]["inputs"]) == {"benchmark-presets"}
    assert read_example_workflow("benchmarks.yml")["jobs"]["benchmark"]["with"]["benchmark-presets"] == (
        "${{ inputs.benchmark-presets || '' }}")
    poster = read_example_workflow("post_benchmark_comment.yml")
    assert triggers_of(poster) == {
        "workflow_run": {"workflows": [read_example_workflow("benchmarks.yml")["name"]],
                         "types": ["requested", "completed"]}}
    # The caller runs for every PR event; the called jobs pick theirs (post: completed; gate: both).
    own_post = read_workflow("post_benchmark_comment.yml")["jobs"]["post"]["if"]
    assert own_post == poster["jobs"]["post"]["if"] + " && github.event.action == 'completed'"


def test_adopting_md_shows_the_example_files_as_they_are():
    blocks = re.findall(r"```yaml\n(.*?)```", _adopting_md_section("The workflow"), re.S)
    assert [yaml.safe_load(block) for block in blocks] == [read_example_workflow(name)
                                                           for name in EXAMPLE_FILES]
