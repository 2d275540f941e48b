"""``benchtrail init``: the files it writes, what it keeps, and that its caller workflows are the
documented example's (tests/test_workflow_call.py checks those against the reusable workflows)."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchtrail.cli import main
from benchtrail.cli.init import PLACEHOLDER_COMMIT, pin_of_direct_url
from tests.helpers.git import git

CLASSES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "adopting-classes" / ".github" / "workflows"
SHA = "0c1d2e3f" * 5


def test_init_writes_the_table_an_example_and_the_workflows_then_keeps_them(tmp_path, capsys):
    assert main(["init", "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("pyproject.toml", "benchmarks.py", ".github/workflows/benchmarks.yml",
                 ".github/workflows/post_benchmark_comment.yml"):
        assert f"wrote {tmp_path / name}\n" in out
    assert f"wrote {tmp_path / '.gitignore'} (.benchtrail/ ignored)" in out
    assert (tmp_path / ".gitignore").read_text() == "# benchtrail's local store (benchtrail init)\n.benchtrail/\n"
    assert "note: pin `uses:` in .github/workflows/*.yml to a benchtrail commit (it says OWNER/benchtrail@0123456" in out
    import tomllib

    table = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["benchtrail"]
    assert table == {"benchmarks": ["benchmarks"], "presets": "default"}  # no runner labels: GitHub-hosted
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["init", "--directory", str(tmp_path)]) == 0  # again: nothing is overwritten
    assert capsys.readouterr().out.count("kept  ") == 5
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_the_example_module_makes_a_suite_that_exports(tmp_path):
    assert main(["init", "--directory", str(tmp_path)]) == 0
    git(None, "init", "-q", str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", "import sys; from benchtrail.cli import main; sys.exit(main())",
                           "export", "execution", "--output", "-"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    export = json.loads(proc.stdout)
    objs = export["devices"]["cpu"]["shards"][0]["run_configs"]["keyed_obj_map"]
    assert sorted(v["name"] for v in objs.values() if "module_generation_config" in v) == [
        f"benchmarks.matmul[n={n}].eager.{task}.cpu" for n in (128, 64) for task in ("backward", "inference")]


def test_an_existing_pyproject_gets_the_table_appended_and_a_bad_one_is_left_alone(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "bench.py").write_text("# the project's own\n")
    assert main(["init", "--directory", str(tmp_path), "--benchmarks", "mypkg.bench"]) == 0
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith('[project]\nname = "x"\n\n# benchtrail') and 'benchmarks = ["mypkg.bench"]' in text
    assert (tmp_path / "mypkg" / "bench.py").read_text() == "# the project's own\n"
    assert not (tmp_path / "benchmarks.py").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pyproject.toml").write_text("[project\n")
    capsys.readouterr()
    assert main(["init", "--directory", str(bad)]) == 1
    assert "cannot read it as TOML" in capsys.readouterr().err
    assert sorted(p.name for p in bad.iterdir()) == ["pyproject.toml"]


def test_without_a_bucket_the_git_store_is_the_default_and_the_next_steps_set_it_up(tmp_path, capsys):
    """No ``--store``: the workflow names no store (the reusable workflow's default is the data branch,
    git:origin#benchtrail-data) and the table no runner labels (GitHub-hosted); the next steps create the
    ruleset only a deploy key bypasses, the deploy key in the postsubmit environment, Pages, and say how to
    move to a bucket."""
    assert main(["init", "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    workflow = (tmp_path / ".github" / "workflows" / "benchmarks.yml").read_text()
    job = yaml.safe_load(workflow)["jobs"]["benchmark"]
    assert "store" not in job["with"] and job["permissions"]["pages"] == "write"
    assert "runner-labels" not in (tmp_path / "pyproject.toml").read_text()
    assert "The workflow stores runs in this repository's branch benchtrail-data" in out
    steps = out.split("  1. ", 1)[1].split("  3. ", 1)[0]
    commands = "\n".join(line for line in steps.splitlines() if line.startswith("       "))
    assert "<<" not in commands and "name=main" not in commands  # no heredoc; the default branch asked
    checked = subprocess.run(["bash", "-n", "-c", commands], capture_output=True, text=True)
    assert (checked.returncode, checked.stderr) == (0, "")
    (echo,) = [line for line in commands.splitlines() if "/rulesets" in line]
    ruleset = json.loads(shlex.split(echo)[1])
    assert ruleset["conditions"]["ref_name"]["include"] == ["refs/heads/benchtrail-data"]
    assert ruleset["bypass_actors"] == [{"actor_type": "DeployKey", "bypass_mode": "always"}]
    assert {r["type"] for r in ruleset["rules"]} == {"creation", "update", "deletion", "non_fast_forward"}
    for said in ("gh repo deploy-key add benchtrail-deploy-key.pub --allow-write",
                 '-f name="$(gh repo view --json defaultBranchRef -q .defaultBranchRef.name)"',
                 "gh secret set BENCHTRAIL_DEPLOY_KEY --env benchtrail-postsubmit < benchtrail-deploy-key",
                 "Settings > Pages > Source: GitHub Actions", "gate on instruction counts",
                 '"Growing: GCS and self-hosted runners" (benchtrail init --store gs://...)'):
        assert said in out, said


@pytest.mark.parametrize("store, labels", [("gs://my-bucket/bench", True), ("git:upstream#perf-data", False)])
def test_a_named_store_goes_into_the_workflow_and_a_bucket_brings_self_hosted_labels(tmp_path, capsys, store,
                                                                                       labels):
    import tomllib

    assert main(["init", "--directory", str(tmp_path), "--store", store]) == 0
    out = capsys.readouterr().out
    workflow = (tmp_path / ".github" / "workflows" / "benchmarks.yml").read_text()
    job = yaml.safe_load(workflow)["jobs"]["benchmark"]
    assert job["with"]["store"] == store
    table = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["benchtrail"]
    assert table.get("runner-labels") == ({"cpu": ["self-hosted", "cpu"]} if labels else None)
    assert ("gh repo deploy-key add" in out) is not labels
    assert (f"The workflow stores runs in {store} and runs on self-hosted runners" in out) is labels
    assert ("branch perf-data" in out) is not labels


@pytest.mark.parametrize("store, said", [
    (".benchtrail/store", "--store '.benchtrail/store': the workflow's store is gs://BUCKET[/PREFIX]"),
    ("gs://", "--store 'gs://': the workflow's store is gs://BUCKET[/PREFIX]"),
    ("git:origin#runs", "'runs' is not a branch name benchtrail stores in"),
])
def test_a_store_the_workflow_cannot_use_is_refused_before_any_file(tmp_path, capsys, store, said):
    assert main(["init", "--directory", str(tmp_path), "--store", store]) == 1
    assert said in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_the_workflows_are_the_documented_example_with_the_function_api_device(tmp_path):
    assert main(["init", "--directory", str(tmp_path)]) == 0
    for name in ("benchmarks.yml", "post_benchmark_comment.yml"):
        written = yaml.safe_load((tmp_path / ".github" / "workflows" / name).read_text())
        example = yaml.safe_load((CLASSES / name).read_text())
        if name == "benchmarks.yml":
            example["jobs"]["benchmark"]["with"]["cpu-device"] = "cpu"
            dispatch = example[True]["workflow_dispatch"]["inputs"]["benchmark-presets"]
            dispatch.update(default="default", description=dispatch["description"].replace("smoke", "default"))
        assert written == example, name
        assert f"@{PLACEHOLDER_COMMIT} # placeholder" in (tmp_path / ".github" / "workflows" / name).read_text()


@pytest.mark.parametrize("text, pin", [
    (json.dumps({"url": "https://github.com/octo/benchtrail.git", "vcs_info": {"vcs": "git", "commit_id": SHA}}),
     ("octo/benchtrail", SHA)),
    (json.dumps({"url": "git+https://github.com/octo/benchtrail", "vcs_info": {"commit_id": SHA}}), ("octo/benchtrail", SHA)),
    (json.dumps({"url": "https://github.com/octo/benchtrail", "vcs_info": {"commit_id": "main"}}), None),
    (json.dumps({"url": "https://gitlab.com/octo/benchtrail", "vcs_info": {"commit_id": SHA}}), None),
    (json.dumps({"url": "file:///work/benchtrail", "dir_info": {"editable": True}}), None),
    ("not json", None), (None, None), ("[]", None),
])
def test_the_pin_comes_from_a_git_install_at_a_full_sha_only(text, pin):
    assert pin_of_direct_url(text) == pin


def test_a_known_install_pins_both_workflows_to_its_commit():
    from benchtrail.cli.init import workflow

    for name, called in (("benchmarks.yml", "benchmark.yml"), ("post_benchmark_comment.yml", "post_benchmark_comment.yml")):
        text = workflow(f"{name}.template", ("octo/benchtrail", SHA))
        assert f"uses: octo/benchtrail/.github/workflows/{called}@{SHA}\n" in text
        assert "placeholder" not in text.lower() and "{" + "commit}" not in text


def test_the_pipelines_dashboard_of_a_run_without_a_commit_says_to_commit(tmp_path, capsys):
    """A repository without a commit yet (or no checkout): the run is recorded under git's null sha, and its
    dashboard says why there is none, not that a --ref the user never gave cannot be resolved."""
    from benchtrail.git import UNKNOWN_COMMIT
    from benchtrail.pipeline.report_stages import dashboard_stage
    from benchtrail.store import open_store

    git(None, "init", "-q", str(tmp_path / "repo"))
    (tmp_path / "run").mkdir()
    assert dashboard_stage(open_store(str(tmp_path / "store")), tmp_path / "repo", UNKNOWN_COMMIT, "local-1", 1,
                           tmp_path / "run") is None
    err = " ".join(capsys.readouterr().err.split())
    assert "no dashboard: this run has no commit (the repository has none yet, or this is not a git checkout): " \
           "commit, and the next run draws its history" in err and "--ref" not in err
    assert list((tmp_path / "run").iterdir()) == []
