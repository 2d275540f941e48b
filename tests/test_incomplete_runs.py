"""Issue 39, item 8: a run whose writer was interrupted before its commit pointer (a killed pipeline, a failed
job) is listed as incomplete by ``benchtrail history`` and ``fetch``, in a folder and in GCS; stores are
create-only, so nothing is deleted, and such a run is never read as a baseline."""

import pytest

from benchtrail.cli import main
from benchtrail.results.io import write_results
from benchtrail.store import open_store
from tests.helpers.git import git
from tests.helpers.records import record, results


def _runs(store, sha: str, tmp_path) -> None:
    """Run 7/1 complete (results, then its pointer), run 8/1 interrupted (results, no pointer)."""
    for run_id in ("7", "8"):
        local = tmp_path / f"local-{run_id}"
        write_results(local / "results" / "c2-standard-16-0.json", results(record("rc1"), commit=sha))
        store.upload_run(local, run_id, 1, deadline_s=30)
    store.write_pointer(sha, "7", 1, {"created": "2026-12-05T00:00:00+00:00", "devices": ["c2-standard-16"],
                                      "results": ["results/c2-standard-16-0.json"]})


@pytest.mark.parametrize("kind", ["folder", "gcs"])
def test_a_run_without_its_pointer_is_listed_incomplete_by_fetch_and_history(kind, request, tmp_path, capsys):
    url = str(tmp_path / "store") if kind == "folder" else f"gs://{request.getfixturevalue('gcs_bucket')}/ci"
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "one", isolated=True)
    sha = git(repo, "rev-parse", "HEAD", isolated=True)
    store = open_store(url)
    _runs(store, sha, tmp_path)
    assert store.incomplete_runs() == [("8", 1)]
    for run_id, warned in (("7", False), ("8", True)):
        assert main(["fetch", "--store", url, "--run-id", run_id, "--attempt", "1", "--dest",
                     str(tmp_path / f"fetched-{run_id}")]) == 0
        err = capsys.readouterr().err
        assert ("warning: run 8/1 is incomplete: no commit pointer names it" in err) == warned, err
    assert main(["history", "--store", url, "--repo", str(repo), "--output", str(tmp_path / "h.json")]) == 0
    err = capsys.readouterr().err
    assert "1 incomplete run(s) without a commit pointer (interrupted or failed before they were stored in full; " \
           "never read): 8/1" in err
    # the baseline lookup sees the complete run only
    assert [p["run_id"] for p in store.pointers(sha)] == ["7"]
