"""``benchtrail init``: the files it writes, what it keeps, and that its caller workflows are the
documented example's (tests/test_workflow_call.py checks those against the reusable workflows)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchtrail.cli import main
from benchtrail.cli.init import PLACEHOLDER_COMMIT, pin_of_direct_url

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
    assert table == {"benchmarks": ["benchmarks"], "presets": "default", "runner-labels": {"cpu": ["self-hosted", "cpu"]}}
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["init", "--directory", str(tmp_path)]) == 0  # again: nothing is overwritten
    assert capsys.readouterr().out.count("kept  ") == 5
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_the_example_module_makes_a_suite_that_exports(tmp_path):
    assert main(["init", "--directory", str(tmp_path)]) == 0
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
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
    from benchtrail.pipeline.report import dashboard_stage
    from benchtrail.store import open_store

    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    (tmp_path / "run").mkdir()
    assert dashboard_stage(open_store(str(tmp_path / "store")), tmp_path / "repo", UNKNOWN_COMMIT, "local-1", 1,
                           tmp_path / "run") is None
    err = " ".join(capsys.readouterr().err.split())
    assert "no dashboard: this run has no commit (the repository has none yet, or this is not a git checkout): " \
           "commit, and the next run draws its history" in err and "--ref" not in err
    assert list((tmp_path / "run").iterdir()) == []
