"""``[tool.benchtrail]`` in an adopting repository's pyproject.toml (docs/adopting.md), and quarantine."""

import json
import shutil
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.compare.gate import check
from benchtrail.compare.notes import mark_regressions
from benchtrail.compare.rules import QuarantineEntry as Entry
from benchtrail.compare.rules import Rules, load_quarantine, load_thresholds
from benchtrail.compare.rules import unmatched_quarantine as unmatched
from benchtrail.compare.verdicts import compare
from benchtrail.errors import UserError
from benchtrail.project import KEYS, load_project, load_suite
from tests.helpers.git import git
from tests.helpers.records import record, results, spread

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "adopting-classes"


@pytest.fixture
def adopter(tmp_path, monkeypatch):
    """A temporary git repository holding the docs' adoption example, as the working directory."""
    repo = tmp_path / "my-project"
    shutil.copytree(EXAMPLE, repo)
    git(None, "init", "-q", str(repo))
    monkeypatch.chdir(repo)
    return repo


def test_the_docs_adoption_example_exports_its_own_suite(adopter, capsys):
    assert main(["export", "execution", "--output", "execution.json"]) == 0  # presets from [tool.benchtrail]
    assert capsys.readouterr().out.strip().splitlines()[-1] == "execution.json"
    export = json.loads((adopter / "execution.json").read_text())
    assert list(export["devices"]) == ["laptop"]
    (shard,) = export["devices"]["laptop"]["shards"]
    objs = shard["run_configs"]["keyed_obj_map"]
    assert {v["name"] for v in objs.values() if "entry_point" in v} == {"chain"}
    (rc_id,) = shard["run_configs"]["root_obj"]
    assert objs[rc_id]["name"] == "chain.eager.inference-quick.laptop" and objs[rc_id]["presets"] == ["smoke"]
    project = load_project(adopter)
    assert project.store == ".benchtrail/store" and project.thresholds == adopter / ("my_benchmarks/"
                                                                                     "thresholds.yaml")
    assert project.runner_labels == {"laptop": ("self-hosted", "cpu", "laptop")}


def _pyproject(repo: Path, table: str) -> Path:
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.benchtrail]\n" + table)
    return repo / "pyproject.toml"


@pytest.mark.parametrize("table, message", [
    ('suite = "my_benchmarks.suite:generate"\ncolour = "red"\n',
     "unknown key(s) 'colour' in [tool.benchtrail]; allowed keys: " + ", ".join(KEYS)),
    ('suite = "my_benchmarks.suite"\n', "suite = 'my_benchmarks.suite' is not 'package.module:function'"),
    ('presets = 3\n',
     "presets must be a preset name, a comma-separated string of them or a non-empty list of "
                     "names (strings), got 3"),
    ('presets = ["default", 3]\n',
     "presets must be a preset name, a comma-separated string of them or a non-empty "
                                   "list of names (strings), got ['default', 3]"),
    ('presets = []\n', "non-empty list of names (strings), got []"),
    ('thresholds = "missing.yaml"\n', "thresholds = 'missing.yaml': no such file"),
    ('runner-labels = { laptop = [] }\n', "runner-labels must map device names to non-empty lists"),
    ('suite = \n', "cannot read it as TOML"),
])
def test_a_bad_table_is_an_error_naming_the_file_and_key(adopter, table, message):
    path = _pyproject(adopter, table)
    with pytest.raises(UserError) as err:
        load_project(adopter / "my_benchmarks")  # found from a sub-folder, up to the repository root
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_suite_that_cannot_load_or_is_not_a_suite_is_a_clear_error(adopter, capsys):
    _pyproject(adopter, 'suite = "my_benchmarks.suite:chain"\npresets = "smoke"\n')
    with pytest.raises(UserError,
                       match=r"suite = 'my_benchmarks.suite:chain'.*returned Chain, not a benchtrail Suite"):
        load_suite(load_project(adopter))
    assert main(["export", "execution"]) == 1
    assert "not a benchtrail Suite" in capsys.readouterr().err
    _pyproject(adopter, 'suite = "my_benchmarks.nowhere:generate"\n')
    with pytest.raises(UserError, match=r"cannot load entry point 'my_benchmarks.nowhere:generate'"):
        load_suite(load_project(adopter))


def test_without_presets_anywhere_export_asks_for_them(adopter, capsys):
    _pyproject(adopter, 'suite = "my_benchmarks.suite:generate"\n')
    assert main(["export", "execution"]) == 1
    assert "pass --benchmark-presets, or set presets in [tool.benchtrail]" in capsys.readouterr().err


def test_quarantined_regressions_are_reported_but_never_gate(tmp_path):
    base = [record("flaky", spread(100.0)), record("real", spread(100.0))]
    head = [record("flaky", spread(150.0)), record("real", spread(150.0))]
    rows = compare([results(*base)], [results(*head, commit="c" * 40)], load_thresholds())
    entries = (Entry("flaky.*", "flaky on shared runners, #12"), Entry("gone.*", "old"))
    marked = {r.id: r for r in mark_regressions(rows, Rules(quarantine=entries))}
    assert (marked["flaky"].verdict, marked["flaky"].mark) == ("regressed", "quarantined")
    assert marked["flaky"].quarantined == "flaky on shared runners, #12"
    assert (marked["real"].mark, marked["real"].quarantined) == ("unconfirmed", None)
    assert [r.name for r in check(list(marked.values()), rule="any").failing] == [marked["real"].name]
    assert unmatched(entries, [(r.name, r.id) for r in rows]) == [Entry("gone.*", "old")]


def test_compare_cli_takes_the_quarantine_file_and_warns_about_stale_entries(tmp_path, capsys):
    from benchtrail.results.io import write_results

    base = write_results(tmp_path / "base.json", results(record("flaky", spread(100.0))))
    head = write_results(tmp_path / "head.json", results(record("flaky", spread(150.0)), commit="c" * 40))
    q = tmp_path / "q.yaml"
    q.write_text("schema_version: 1\nquarantine:\n  - match: 'flaky*'\n    reason: 'flaky, #12'\n"
                 "  - match: 'nothing*'\n    reason: 'stale'\n")
    assert main(["compare", "--base", str(base), "--head", str(head), "--quarantine", str(q), "--fail-on",
                 # the only regression is quarantined
                 "regressed", "--output", str(tmp_path / "c.json")]) == 0
    assert "quarantine entry 'nothing*' matches no series" in capsys.readouterr().err
    (row,) = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert (row["mark"], row["quarantined"]) == ("quarantined", "flaky, #12")


@pytest.mark.parametrize("text, message", [
    ("schema_version: 1\nquarantine:\n  - match: 'x'\n",
     "quarantine[0] must have exactly the keys match, reason"),
    ("schema_version: 1\nquarantine:\n  - match: 'x'\n    reason: ''\n",
     "quarantine[0].reason must be a non-empty"),
    ("schema_version: 2\nquarantine: []\n", "expected a mapping with schema_version: 1"),
    ("schema_version: 1\nquarantine: []\nextra: 1\n", "unknown: extra"),
])
def test_a_bad_quarantine_file_names_the_entry_and_field(tmp_path, text, message):
    q = tmp_path / "q.yaml"
    q.write_text(text)
    with pytest.raises(UserError) as err:
        load_quarantine(q)
    assert str(q) in str(err.value) and message in str(err.value)
    assert load_quarantine() == ()  # the shipped list is empty


def test_filter_narrows_export_and_rejects_bad_or_empty_patterns(tmp_path, capsys):
    out = tmp_path / "execution.json"
    assert main(["export", "execution", "--benchmark-presets", "x86_64", "--filter",
                 r"^sqrl\..*(backward|jacobian)",
                 "--output", str(out)]) == 0
    (shard,) = json.loads(out.read_text())["devices"]["c2-standard-16"]["shards"]
    objs = shard["run_configs"]["keyed_obj_map"]
    assert sorted(objs[i]["name"] for i in shard["run_configs"]["root_obj"]) == [
        "sqrl.eager.backward-bs1.c2-standard-16", "sqrl.eager.jacobian.c2-standard-16",
        "sqrl.inductor.backward-bs1.c2-standard-16", "sqrl.inductor.jacobian.c2-standard-16"]
    assert main(["export", "execution", "--benchmark-presets", "x86_64", "--filter", "(unclosed"]) == 1
    assert "--filter '(unclosed' is not a valid regular expression: missing )" in capsys.readouterr().err
    assert main(["export", "execution", "--benchmark-presets", "smoke", "--filter", "resnet"]) == 1
    assert "--filter 'resnet' matches no run config or module of presets smoke" in capsys.readouterr().err


def test_continue_resumes_a_run_stage_from_its_journal(tmp_path, capsys):
    from benchtrail.pipeline.measure_stages import write_export
    from benchtrail.results.io import load_results
    from benchtrail.runner.environment import torch_version
    from benchtrail.runner.run_cases import CaseResult, Journal, case_record
    from benchtrail.suite.export import load_execution
    from tests.helpers.suites import bad_models_suite

    export = write_export(bad_models_suite(("a-first", "tiny"), ("b-second", "tiny")), "execution", ("test",),
                          tmp_path / "execution.json")
    first = load_execution(export)["c2-standard-16"][0][0]
    out = tmp_path / "r.json"
    # A run that stopped after its first case, and died while writing the next line of its journal.
    journal = Journal(out.with_name("r.json.partial.jsonl"))
    journal.append(case_record(first, CaseResult("failed", "from the journal"), torch_version()))
    with open(journal.path, "a") as f:
        f.write('{"id": "torn')
    args = ["run", "--run-configs", str(export), "--device-name", "c2-standard-16", "--output", str(out)]
    assert main(args) == 1  # without --continue a leftover journal is an error, and nothing is lost
    assert "pass --continue to resume it" in capsys.readouterr().err and journal.path.exists()
    assert main([*args, "--continue"]) == 2  # the kept case failed
    records = {b.name.split(".")[0]: b for b in load_results(out).benchmarks}
    # not run again
    assert (records["a-first"].status, records["a-first"].reason) == ("failed", "from the journal")
    assert records["b-second"].status == "ok" and records["b-second"].n > 0
    assert "1 of 2 cases finished earlier" in capsys.readouterr().err
    assert not journal.path.exists()


def _nested_project(tmp_path: Path) -> Path:
    """A git repository whose benchtrail project is its ``bench/`` folder; returns the repository."""
    repo = (tmp_path / "repo").resolve()
    (repo / "bench" / "pkg").mkdir(parents=True)
    git(None, "init", "-q", str(repo))
    (repo / "bench" / "pyproject.toml").write_text('[tool.benchtrail]\nsuite = "pkg.suite:generate"\n')
    return repo


def test_the_project_root_goes_first_on_sys_path_and_on_the_workers_pythonpath(tmp_path, monkeypatch):
    import os
    import sys

    from benchtrail.project import import_root, put_first_on_sys_path
    from benchtrail.runner.launch import worker_pythonpath

    root = _nested_project(tmp_path) / "bench"
    monkeypatch.chdir(root / "pkg")  # a subfolder: found upwards
    assert import_root() == root
    monkeypatch.setattr(sys, "path", ["/x", str(root), "/y"])
    assert put_first_on_sys_path() == root and sys.path == [str(root), "/x", "/y"]  # moved, not repeated
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/a", str(root), "/b"]))
    assert worker_pythonpath() == os.pathsep.join([str(root), "/a", "/b"])
    # malformed: reported by the commands that read it
    (root / "pyproject.toml").write_text("[tool.benchtrail\n")
    assert import_root() == root
    monkeypatch.chdir(tmp_path)  # outside any project
    monkeypatch.delenv("PYTHONPATH")
    assert import_root() is None and put_first_on_sys_path() is None and worker_pythonpath() == ""
    assert sys.path == [str(root), "/x", "/y"]


def test_an_ab_arm_imports_the_project_from_its_own_checkout(tmp_path, monkeypatch):
    import os

    from benchtrail.runner.ab import Arm

    repo = _nested_project(tmp_path)
    base_checkout = (tmp_path / "worktree").resolve()  # stands in for the base commit's git worktree
    git(None, "init", "-q", str(base_checkout))
    monkeypatch.chdir(repo / "bench" / "pkg")
    monkeypatch.setenv("PYTHONPATH", "/inherited")
    # as benchtrail.pipeline.measure_stages builds it: the working directory
    head = Arm("head", "h" * 40, Path(".").resolve())
    assert head.env()["PYTHONPATH"].split(os.pathsep) == [
        str(repo / "bench"), str(repo / "build_tools"), str(repo), "/inherited"]
    base = Arm("base", "b" * 40, base_checkout)
    assert base.env()["PYTHONPATH"].split(os.pathsep) == [
        str(base_checkout / "bench"), str(base_checkout / "build_tools"), str(base_checkout), "/inherited"]
