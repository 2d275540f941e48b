"""`benchtrail upload --write-pointer` makes a run a baseline; `benchtrail compare --store` finds and fetches it."""

import json

import pytest

from benchtrail.cli import main
from benchtrail.results.io import write_results
from benchtrail.store import open_store
from tests.helpers.git import commit, git
from tests.helpers.records import record, results


def _run_dir(tmp_path, name, sha, median):
    run_dir = tmp_path / name
    write_results(run_dir / "results" / "c2-standard-16-0.json",
                  results(record("rc1", [median + i * 0.01 for i in range(10)]), commit=sha))
    return run_dir


def test_compare_with_store_uses_the_merge_base_run_uploaded_with_a_pointer(repo, tmp_path, monkeypatch,
                                                                            capsys):
    base_sha = git(repo, "rev-parse", "main", isolated=True)
    git(repo, "checkout", "-q", "-b", "pr", isolated=True)
    head_sha = commit(repo, "pr change")
    store = tmp_path / "store"
    assert main(["upload", "--run-dir", str(_run_dir(tmp_path, "base", base_sha, 100.0)), "--store",
                 str(store),
                 "--run-id", "111", "--attempt", "1", "--write-pointer"]) == 0
    (pointer,) = open_store(str(store)).pointers(base_sha)
    assert (pointer["run_id"], pointer["devices"], pointer["torch_version"]) == ("111", ["c2-standard-16"],
                                                                                 "2.13.0")
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
    assert main(["compare", "--head", str(_run_dir(tmp_path, "head", git(repo, "rev-parse", "HEAD", isolated=True), 1.0)),
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
    assert main(["upload", "--run-dir", str(run_dir), "--store", str(store), "--run-id", "1", "--attempt",
                 "1",
                 "--write-pointer"]) == 1
    assert "a pointer needs results of one commit" in capsys.readouterr().err
    assert not (store / "runs").exists() or not any((store / "runs").rglob("*.json"))


def _head_with_a_failed_case(tmp_path, sha):
    run_dir = tmp_path / "head"
    write_results(run_dir / "results" / "c2-standard-16-0.json",
                  results(record("rc1", [150.0 + i * 0.01 for i in range(10)]),
                          record("rc2", (), status="failed"),
                          commit=sha))
    return run_dir


def _compare_without_the_store(repo, tmp_path, monkeypatch, capsys, store_url):
    """``compare --store`` with a store that cannot be read: (comparison, stderr, seconds it took)."""
    import time

    from tests.helpers.schemas import errors

    monkeypatch.chdir(repo)
    monkeypatch.setenv("BENCHTRAIL_STORE_DEADLINE_S", "2")
    monkeypatch.setenv("BENCHTRAIL_STAGING", str(tmp_path / "staging"))
    head = _head_with_a_failed_case(tmp_path, git(repo, "rev-parse", "HEAD", isolated=True))
    out = tmp_path / "comparison.json"
    start = time.monotonic()
    assert main(["compare", "--head", str(head), "--store", store_url, "--output", str(out)]) == 0
    elapsed = time.monotonic() - start
    comparison = json.loads(out.read_text())
    assert errors("comparison.schema.json", comparison) == []
    assert comparison["base"] is None
    assert {r["id"]: (r["verdict"], r["reason"]) for r in comparison["rows"]} == {
        "rc1": ("new", "no baseline for this series"), "rc2": ("failed", "head failed: boom")}
    baseline = comparison["baseline"]
    assert baseline == {"reason": f"the store could not be read: {baseline['store_error']}",
                        "store": store_url,
                        "store_error": baseline["store_error"]}
    err = capsys.readouterr().err
    assert f"benchtrail: warning: the store {store_url} could not be read, so this comparison has no baseline" in err
    return comparison, err, elapsed


def test_compare_with_a_stopped_store_is_written_without_a_baseline(repo, tmp_path, monkeypatch, capsys):
    from google.cloud import storage

    from benchtrail.store.emulator import start_emulator

    with start_emulator() as emulator:  # a store that held a baseline run, then went away
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
        storage.Client(project="test").create_bucket("bt-stopped")
        assert main(["upload", "--run-dir",
                     str(_run_dir(tmp_path, "base", git(repo, "rev-parse", "HEAD~1", isolated=True), 100.0)),
                     "--store", "gs://bt-stopped/ci", "--run-id", "111", "--attempt", "1",
                     "--write-pointer"]) == 0
    comparison, _, elapsed = _compare_without_the_store(repo, tmp_path, monkeypatch, capsys,
                                                        "gs://bt-stopped/ci")
    assert comparison["baseline"]["store_error"].startswith(
        "cannot list gs://bt-stopped/ci/: still failing when the 2 s retry deadline ran out; last error: "
        "ConnectionError: ")
    assert elapsed < 5.0


def test_compare_with_a_store_answering_503_is_written_without_a_baseline(repo, tmp_path, monkeypatch, capsys,
                                                                          fault_proxy, gcs_bucket):
    fault_proxy.add("status", status=503, path_prefix="/", methods=("GET", "POST", "PUT", "DELETE", "PATCH"))
    comparison, _, elapsed = _compare_without_the_store(repo, tmp_path, monkeypatch, capsys,
                                                        f"gs://{gcs_bucket}/ci")
    assert comparison["baseline"]["store_error"].startswith(
        f"cannot list gs://{gcs_bucket}/ci/: still failing when the 2 s retry deadline ran out; last error: 503 GET ")
    assert comparison["baseline"]["store_error"].endswith(": injected 503")
    assert fault_proxy.outcomes("/").count(503) >= 2 and elapsed < 5.0
    # The same head against the store once it answers again: the same exit code (0), no store error.
    fault_proxy.clear()
    assert main(["compare", "--head", str(tmp_path / "head"), "--store", f"gs://{gcs_bucket}/ci",
                 "--output", str(tmp_path / "again.json")]) == 0
    assert json.loads((tmp_path / "again.json").read_text())["baseline"] is None


def test_a_bad_store_deadline_or_store_url_still_fails_compare(tmp_path, capsys, monkeypatch):
    head = _head_with_a_failed_case(tmp_path, "a" * 40)
    monkeypatch.setenv("BENCHTRAIL_STORE_DEADLINE_S", "soon")
    assert main(["compare", "--head", str(head), "--store", "gs://bt-any/ci", "--output",
                 str(tmp_path / "c1.json")]) == 1
    assert "BENCHTRAIL_STORE_DEADLINE_S='soon' is not allowed" in capsys.readouterr().err
    monkeypatch.delenv("BENCHTRAIL_STORE_DEADLINE_S")
    assert main(["compare", "--head", str(head), "--store", "gs://Bad_Bucket/ci", "--output",
                 str(tmp_path / "c2.json")]) == 1
    assert "'Bad_Bucket' is not a valid bucket name" in capsys.readouterr().err
    assert not (tmp_path / "c1.json").exists() and not (tmp_path / "c2.json").exists()
