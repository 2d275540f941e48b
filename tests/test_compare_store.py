"""`benchtrail upload --write-pointer` makes a run a baseline; `benchtrail compare --store` finds and fetches it."""

import json

import pytest

from benchtrail.cli import main
from benchtrail.results.io import write_results
from benchtrail.store import open_store
from tests.records import record, results
from tests.test_baseline import commit, git, repo  # noqa: F401  (the fixture)


def _run_dir(tmp_path, name, sha, median):
    run_dir = tmp_path / name
    write_results(run_dir / "results" / "c2-standard-16-0.json",
                  results(record("rc1", [median + i * 0.01 for i in range(10)]), commit=sha))
    return run_dir


def test_compare_with_store_uses_the_merge_base_run_uploaded_with_a_pointer(repo, tmp_path, monkeypatch, capsys):
    base_sha = git(repo, "rev-parse", "main")
    git(repo, "checkout", "-q", "-b", "pr")
    head_sha = commit(repo, "pr change")
    store = tmp_path / "store"
    assert main(["upload", "--run-dir", str(_run_dir(tmp_path, "base", base_sha, 100.0)), "--store", str(store),
                 "--run-id", "111", "--attempt", "1", "--write-pointer"]) == 0
    (pointer,) = open_store(str(store)).pointers(base_sha)
    assert (pointer["run_id"], pointer["devices"], pointer["torch_version"]) == ("111", ["c2-standard-16"], "2.13.0")
    monkeypatch.chdir(repo)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(_run_dir(tmp_path, "head", head_sha, 150.0)), "--store", str(store),
                 "--output", str(out)]) == 0
    comparison = json.loads(out.read_text())
    assert (comparison["baseline"]["commit"], comparison["baseline"]["reason"]) == (base_sha, "merge base")
    (row,) = comparison["rows"]
    assert row["base_median"] == pytest.approx(100.045) and row["head_median"] == pytest.approx(150.045)
    assert row["verdict"] == "regressed"
    assert f"baseline: {base_sha[:12]} (merge base)" in capsys.readouterr().err  # progress goes to stderr


def test_compare_with_an_empty_store_has_no_baseline(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(_run_dir(tmp_path, "head", git(repo, "rev-parse", "HEAD"), 1.0)),
                 "--store", str(tmp_path / "store"), "--output", str(out)]) == 0
    assert [r["verdict"] for r in json.loads(out.read_text())["rows"]] == ["new"]


def test_base_and_store_together_are_refused(tmp_path, capsys):
    head = _run_dir(tmp_path, "head", "a" * 40, 1.0)
    assert main(["compare", "--head", str(head), "--base", str(head), "--store", str(tmp_path / "s"),
                 "--output", str(tmp_path / "c.json")]) == 1
    assert "--base and --store both name a baseline" in capsys.readouterr().err


def test_a_pointer_needs_results_of_one_commit_and_nothing_is_uploaded(tmp_path, capsys):
    run_dir = _run_dir(tmp_path, "mixed", "a" * 40, 1.0)
    write_results(run_dir / "results" / "other.json", results(record("rc2"), commit="b" * 40))
    store = tmp_path / "store"
    assert main(["upload", "--run-dir", str(run_dir), "--store", str(store), "--run-id", "1", "--attempt", "1",
                 "--write-pointer"]) == 1
    assert "a pointer needs results of one commit" in capsys.readouterr().err
    assert not (store / "runs").exists() or not any((store / "runs").rglob("*.json"))
