"""One set of defaults (issue 19, item 5): every command resolves its store by one rule, every run
records its machine and origin, and a CI run and a local run never serve as each other's baseline
unless ``--baseline-any-origin`` says so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.cli.options import DEFAULT_STORE, STORE_ENV, StoreChoice, require_store, resolve_store
from benchtrail.compare.baseline import ORIGIN_HINT, find_baselines
from benchtrail.errors import UserError
from benchtrail.results.baseline_key import BaselineKey, keys_of_pointer, keys_of_results, matches
from benchtrail.results.io import load_results_paths, write_results
from benchtrail.runner.environment import in_ci, machine_of
from benchtrail.store import open_store
from tests.helpers.git import commit, git
from tests.helpers.records import record, results

CPU = "c2-standard-16"


def _project(folder: Path, store: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(f'[tool.benchtrail]\nstore = "{store}"\n')
    return folder


# -- store resolution --------------------------------------------------------------------------


def test_store_resolution_order_flag_then_environment_then_pyproject_then_default(tmp_path, monkeypatch):
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_store(None) == StoreChoice(DEFAULT_STORE, "default")
    project = _project(tmp_path / "proj", "stores/main")
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")  # the pyproject is found upwards; its relative folder is its own
    choice = resolve_store(None)
    assert (choice.url, choice.source) == (str(project / "stores/main"), f"{project / 'pyproject.toml'}: "
                                                                          "[tool.benchtrail] store")
    monkeypatch.setenv(STORE_ENV, "gs://bucket/env")
    assert (resolve_store(None).url, resolve_store(None).source) == ("gs://bucket/env", STORE_ENV)
    assert (resolve_store("flag/store").url, resolve_store("flag/store").source) == ("flag/store", "--store")
    monkeypatch.setenv(STORE_ENV, "")  # the reusable workflow's "no store"
    assert resolve_store(None).url is None and resolve_store(None).source == STORE_ENV
    assert resolve_store("flag/store").url == "flag/store"
    with pytest.raises(UserError, match="BENCHTRAIL_STORE is set but empty, which means no store"):
        require_store(None, "benchtrail history")


@pytest.mark.parametrize("url", ["git:origin#benchtrail-data", "git:", "gs://b/p", "file:///srv/store"])
def test_a_pyproject_store_url_is_kept_as_it_is(tmp_path, monkeypatch, url):
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.chdir(_project(tmp_path / "proj", url))
    assert resolve_store(None).url == url


def test_pipeline_with_an_empty_benchtrail_store_fails_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(STORE_ENV, " ")
    assert main(["pipeline", "--benchmark-presets", "smoke"]) == 1
    err = capsys.readouterr().err
    assert "benchtrail pipeline (it writes its run into a store) needs a store" in err and STORE_ENV in err


def test_history_and_track_no_longer_demand_store_but_refuse_no_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(STORE_ENV, "")
    assert main(["history", "--output", str(tmp_path / "h.json")]) == 1
    assert "benchtrail history needs a store, and BENCHTRAIL_STORE is set but empty" in capsys.readouterr().err
    assert main(["track"]) == 1
    assert "benchtrail track needs a store" in capsys.readouterr().err
    monkeypatch.delenv(STORE_ENV)
    assert main(["history", "--output", str(tmp_path / "h.json")]) == 1  # the default folder does not exist
    assert f"no such store: {DEFAULT_STORE} does not exist" in capsys.readouterr().err


def test_explain_dump_cmds_and_history_use_the_pyproject_store(history_store, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(STORE_ENV, raising=False)
    project = tmp_path / "proj"
    _project(project, os.path.relpath(history_store["store"], project))
    monkeypatch.chdir(project)
    newest = max(history_store["store"].glob("runs/*/*"), key=lambda p: p.stat().st_mtime)
    assert main(["dump-cmds"]) == 0
    assert f"--modules-dir {newest}" in capsys.readouterr().out
    assert main(["history", "--repo", str(history_store["repo"]), "--output", str(tmp_path / "h.json")]) == 0
    assert json.loads((tmp_path / "h.json").read_text())["store"] == history_store["store"].resolve().as_uri()
    monkeypatch.setenv(STORE_ENV, "gs://bucket/prefix")
    assert main(["explain", "abc"]) == 1
    assert "pass --run STORE/runs/<id>/<attempt>/" in capsys.readouterr().err


# -- the machine and the origin of a run -------------------------------------------------------


def test_every_run_records_its_machine_and_origin(history_store):
    (f, *_) = load_results_paths([history_store["run_dirs"]["c3"]])
    env = f.environment
    assert env["machine"] == {"cpu_model": env["cpu_model"], "cpu_count": os.cpu_count(),
                              "gpu_model": env.get("gpu_name")}
    assert env["ci"] is False  # tests/conftest.py clears GITHUB_ACTIONS
    assert machine_of({"cpu_model": "Xeon", "cpu_count": 16, "gpu_name": "NVIDIA H200"}) == {
        "cpu_model": "Xeon", "cpu_count": 16, "gpu_model": "NVIDIA H200"}
    assert (in_ci({"GITHUB_ACTIONS": "true"}), in_ci({"GITHUB_ACTIONS": "false"}), in_ci({})) == (True, False,
                                                                                                  False)


def test_older_results_and_pointers_take_the_origin_their_run_id_tells():
    def origin(run_id, env=None):
        f = results(record("rc1"))
        f = f.__class__(f.commit, f.dirty, {**f.run, "run_id": run_id}, {**f.environment, **(env or {})},
                        f.benchmarks)
        (key,) = keys_of_results([f])[CPU]
        return key.ci

    assert (origin("501"), origin("local-20261201T000000Z-0000abcd"), origin("r1")) == (True, False, None)
    assert origin("501", {"ci": False}) is False  # recorded wins
    keys = [{"device": CPU, "gpu": None, "torch_version": "2.13.0", "method_version": 1}]
    assert {k.ci for k in keys_of_pointer({"run_id": "501", "baseline_keys": keys})[CPU]} == {True}
    assert {k.ci for k in keys_of_pointer({"run_id": "local-x", "devices": [CPU],
                                           "torch_version": "2"})[CPU]} == {False}
    ci, local, unknown = (BaselineKey(CPU, None, "2.13.0", 1, c) for c in (True, False, None))
    assert matches(ci, ci) and not matches(local, ci) and not matches(ci, local)
    assert matches(unknown, ci) and matches(local, unknown) and matches(local, ci, any_origin=True)
    assert ci.to_dict()["ci"] is True and unknown.to_dict()["ci"] is None
    recorded = [{**keys[0], "ci": None}]  # written by this benchtrail: unknown, whatever the run id
    assert {k.ci for k in keys_of_pointer({"run_id": "501", "baseline_keys": recorded})[CPU]} == {None}
    assert sorted([ci, unknown, local]) == [ci, local, unknown]  # orders without TypeError


# -- a CI run and a local run are not each other's baseline --------------------------------------


def _run_dir(tmp_path: Path, name: str, sha: str, median: float, ci: bool) -> Path:
    f = results(record("rc1", [median + i * 0.01 for i in range(10)]), commit=sha)
    f = f.__class__(f.commit, f.dirty, f.run, {**f.environment, "ci": ci}, f.benchmarks)
    write_results(tmp_path / name / "results" / f"{CPU}-0.json", f)
    return tmp_path / name


def test_compare_by_hand_refuses_another_origin_unless_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    base, head = _run_dir(tmp_path, "local", "a" * 40, 100.0, False), _run_dir(tmp_path, "ci", "b" * 40,
                                                                               150.0, True)
    out = tmp_path / "c1.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["verdict"], row["reason"]) == ("not-comparable",
                                               f"not compared: the baseline of {CPU} was measured "
                                                                 "differently (origin local (baseline) vs CI "
                                               "(this run))")
    out = tmp_path / "c2.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out),
                 "--baseline-any-origin"]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["verdict"] == "regressed" and row["base_median"] == pytest.approx(100.045)


def test_the_stored_lookup_skips_a_local_run_for_a_ci_head_unless_asked(repo, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(STORE_ENV, raising=False)
    base_sha = git(repo, "rev-parse", "main", isolated=True)
    git(repo, "checkout", "-q", "-b", "pr", isolated=True)
    head_sha = commit(repo, "pr change")
    store = tmp_path / "store"
    assert main(["upload", "--run-dir", str(_run_dir(tmp_path, "base", base_sha, 100.0, False)), "--store",
                 str(store), "--run-id", "local-1", "--attempt", "1", "--write-pointer"]) == 0
    (pointer,) = open_store(str(store)).pointers(base_sha)
    assert pointer["baseline_keys"] == [{"device": CPU, "gpu": None, "torch_version": "2.13.0",
                                         "method_version": 1,
                                         "ci": False}]
    head = _run_dir(tmp_path, "head", head_sha, 150.0, True)
    head_keys = keys_of_results(load_results_paths([head]))
    found = find_baselines(open_store(str(store)), repo, head_sha, head_keys)
    assert not found.runs and found.lacking[CPU].endswith(ORIGIN_HINT)
    assert "run in CI" in found.lacking[CPU]
    found = find_baselines(open_store(str(store)), repo, head_sha, head_keys, any_origin=True)
    assert [(b.commit, b.run_id) for b in found.runs] == [(base_sha, "local-1")]

    monkeypatch.chdir(repo)
    monkeypatch.setenv(STORE_ENV, str(store))  # compare without --base or --store: BENCHTRAIL_STORE
    out = tmp_path / "c.json"
    assert main(["compare", "--head", str(head), "--output", str(out)]) == 0
    assert [r["verdict"] for r in json.loads(out.read_text())["rows"]] == ["new"]
    out = tmp_path / "c-any.json"
    assert main(["compare", "--head", str(head), "--output", str(out), "--baseline-any-origin"]) == 0
    comparison = json.loads(out.read_text())
    assert comparison["baseline"]["commit"] == base_sha and comparison["rows"][0]["verdict"] == "regressed"
    monkeypatch.setenv(STORE_ENV, "")  # the workflow's "no store": no baseline, every row new
    out = tmp_path / "c-none.json"
    assert main(["compare", "--head", str(head), "--output", str(out), "--baseline-any-origin"]) == 0
    comparison = json.loads(out.read_text())
    assert comparison["baseline"] is None and comparison["rows"][0]["verdict"] == "new"
