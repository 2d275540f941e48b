"""``benchtrail history`` and ``benchtrail compare-builds`` on real smoke runs over a git history
(``history_store``: c1 - c2 - c3 on main, side commit s1 merged by c3)."""

import json
import os
import shutil
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.history.builds import compare_builds
from benchtrail.history.collect import collect_history, load_history
from benchtrail.results.io import load_results_paths
from benchtrail.store import open_store
from tests.helpers import gcs_fixtures
from tests.helpers.cli import run_cli
from tests.helpers.git import git
from tests.helpers.stores import store_copy


def _stored(run_dir: Path) -> dict:
    """``{series id: record}`` of a run directory's results files."""
    return {b.id: b for f in load_results_paths([run_dir]) for b in f.benchmarks}


def _history(capsys, history_store, tmp_path, *extra):
    output = tmp_path / "history.json"
    code, out, err = run_cli(capsys, "history", "--store", history_store["store"], "--repo",
                             history_store["repo"],
                             "--output", output, *extra)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == str(output)  # the output path is printed last
    return json.loads(output.read_text())


@pytest.mark.e2e
def test_history_follows_first_parents_oldest_first_and_leaves_the_side_branch_out(history_store, tmp_path,
                                                                                   capsys):
    commits = history_store["commits"]
    data = _history(capsys, history_store, tmp_path, "--ref", "main")
    assert data["schema_version"] == 2
    assert data["head"] == commits["c3"]
    assert [c["commit"] for c in data["commits"]] == [commits["c1"], commits["c2"], commits["c3"]]
    stored = {name: _stored(history_store["run_dirs"][name]) for name in ("c1", "c2", "c3")}
    assert set(data["series"]) == set(stored["c3"])  # every series of the runs, execution and compilation
    kinds = {s["kind"] for s in data["series"].values()}
    assert kinds == {"execution", "compilation"}
    for sid, series in data["series"].items():
        assert [p["commit"] for p in series["points"]] == [commits["c1"], commits["c2"],
                                                           commits["c3"]], series["name"]
        assert commits["s1"] not in {p["commit"] for p in series["points"]}
        record = stored["c3"][sid]
        assert (series["name"], series["kind"], series["metric"], series["unit"], series["device_name"],
                series["compile_config"], series["task"]) == (record.name, record.kind, record.metric,
                                                              record.unit,
                                                               record.device_name, record.compile_config,
                                                              record.task)
        assert series["presets"] == ["smoke"]
        for point, name in zip(series["points"], ("c1", "c2", "c3")):
            run_dir, want = history_store["run_dirs"][name], stored[name][sid]
            assert (point["run_id"], point["attempt"]) == (run_dir.parent.name, int(run_dir.name))
            assert point["median"] == want.median and point["iqr"] == want.iqr, (series["name"], name)
            assert [(r["run_id"], r["median"]) for r in point["runs"]] == [(point["run_id"], want.median)]
            assert (point["min"], point["max"], point["n"], point["status"]) == (want.min, want.max, want.n,
                                                                                 want.status)
    latency = data["series"][next(i for i,
                                  r in stored["c3"].items()
                                  if r.name == "mlp.eager.inference-bs1.c2-standard-16")]
    # 20 samples: the history store's cases run in 2 processes of 10 samples (tests/conftest.py).
    assert latency["unit"] == "us" and all(p["n"] == 20 and p["p25"] <= p["median"] <= p["p75"]
                                           for p in latency["points"])


@pytest.mark.e2e
def test_collect_history_from_the_side_branch_reaches_s1_through_its_own_first_parents(history_store):
    commits = history_store["commits"]
    history = collect_history(open_store(str(history_store["store"])), history_store["repo"], "side", 100)
    assert history.run_commits() == [commits["c1"], commits["s1"]]
    s1_medians = {sid: r.median for sid, r in _stored(history_store["run_dirs"]["s1"]).items()}
    assert {s.id: s.points[-1].median for s in history.series} == s1_medians


@pytest.mark.e2e
def test_max_commits_keeps_the_newest_and_a_commit_without_a_run_is_a_gap(history_store, tmp_path, capsys):
    commits = history_store["commits"]
    clone = tmp_path / "clone"
    git(None, "clone", "-q", str(history_store["repo"]), str(clone))
    git(clone, "checkout", "-q", "main", isolated=True)
    git(clone, "commit", "-q", "--allow-empty", "-m", "c4 without a run", isolated=True)
    c4 = git(clone, "rev-parse", "HEAD", isolated=True)
    output = tmp_path / "h.json"
    code, out, err = run_cli(capsys, "history", "--store", history_store["store"], "--repo", clone,
                             "--max-commits", 3, "--output", output)
    assert code == 0, err
    history = load_history(output)
    assert [(c.commit, c.run_id is not None) for c in history.commits] == [
        (commits["c2"], True), (commits["c3"], True), (c4, False)]
    assert history.run_commits() == [commits["c2"], commits["c3"]]
    assert all([p.commit for p in s.points] == [commits["c2"], commits["c3"]] for s in history.series)
    assert "over 2 of 3 first-parent commits" in out


@pytest.mark.e2e
def test_unknown_ref_is_refused_naming_it_and_nothing_is_written(history_store, tmp_path, capsys):
    output = tmp_path / "history.json"
    code, _out, err = run_cli(capsys, "history", "--store", history_store["store"], "--repo",
                              history_store["repo"],
                          "--ref", "no-such-branch", "--output", output)
    assert code == 1
    assert "--ref 'no-such-branch'" in err and "cannot resolve" in err
    assert not output.exists()


def test_an_empty_store_is_refused_and_nothing_is_written(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "one", isolated=True)
    (tmp_path / "empty-store").mkdir()
    output = tmp_path / "history.json"
    code, _out, err = run_cli(capsys, "history", "--store", tmp_path / "empty-store", "--repo", repo,
                              "--output", output)
    assert code == 1
    assert "no usable run of any of the 1 first-parent commit(s) of HEAD" in err
    assert not output.exists()


def test_a_store_folder_that_does_not_exist_is_refused_and_not_created(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "one", isolated=True)
    missing = tmp_path / "mistyped-store"
    code, _out, err = run_cli(capsys, "history", "--store", missing, "--repo", repo, "--output",
                              tmp_path / "h.json")
    assert code == 1
    assert f"benchtrail: error: no such store: {missing} does not exist" in err
    assert not missing.exists() and not (tmp_path / "h.json").exists()


def test_a_folder_that_is_not_a_git_repository_is_refused(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    code, _out, err = run_cli(capsys, "history", "--store", tmp_path / "store", "--repo", tmp_path,
                          "--output", tmp_path / "h.json")
    assert code == 1 and "is not a git repository" in err


@pytest.mark.e2e
def test_existing_history_file_is_never_overwritten(history_store, tmp_path, capsys):
    output = tmp_path / "history.json"
    output.write_text("keep me")
    code, _out, err = run_cli(capsys, "history", "--store", history_store["store"], "--repo",
                              history_store["repo"],
                          "--output", output)
    assert code == 1 and "already exists" in err
    assert output.read_text() == "keep me"


def _table_row(table: str, name: str) -> list[str]:
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name} in\n{table}")


@pytest.mark.e2e
def test_compare_builds_ratios_are_median_c3_over_median_c1(history_store, tmp_path, capsys):
    import matplotlib.image

    commits = history_store["commits"]
    code, out, err = run_cli(capsys, "compare-builds", commits["c1"], commits["c3"], "--store",
                             history_store["store"],
                             "--repo", history_store["repo"], "--output-dir", tmp_path)
    assert code == 0, err
    c1, c3 = _stored(history_store["run_dirs"]["c1"]), _stored(history_store["run_dirs"]["c3"])
    returned = compare_builds(commits["c1"], commits["c3"], open_store(str(history_store["store"])),
                              history_store["repo"])
    assert {r.id for r in returned.rows} == set(c1) == set(c3)
    ratios = 0
    for row in returned.rows:
        a, b = c1[row.id].median, c3[row.id].median
        assert (row.a_median, row.b_median) == (a, b)
        cells = _table_row(out, row.name)
        assert cells[1] == row.device_name == c3[row.id].device_name
        if a:
            assert row.ratio == b / a
            assert cells[4] == f"{b / a:.4f}"
            ratios += 1
        else:
            assert row.ratio is None and cells[4] == "—" and "0" in row.note
    assert ratios >= 6  # three latencies and the non-zero compilation statistics
    png = Path(out.strip().splitlines()[-1])
    assert png == tmp_path / f"compare-builds-{commits['c1'][:7]}-{commits['c3'][:7]}.png"
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 0 and image.shape[1] > 0


@pytest.mark.e2e
def test_compare_builds_takes_a_run_directory_and_says_which_side_lacks_a_series(history_store, tmp_path,
                                                                                 capsys):
    commits = history_store["commits"]
    only_latency = tmp_path / "run"
    (only_latency / "results").mkdir(parents=True)
    source = history_store["run_dirs"]["c1"] / "results" / "c2-standard-16-0.json"
    (only_latency / "results" / source.name).write_bytes(source.read_bytes())
    result = compare_builds(str(only_latency), commits["c3"], open_store(str(history_store["store"])),
                            history_store["repo"])
    assert (result.a.label, result.b.commit) == (str(only_latency), commits["c3"])
    assert result.a.commit == json.loads(source.read_text())["commit"] == commits["c1"]  # its results' commit
    by_kind = {r.kind: r for r in result.rows}
    assert by_kind["compilation"].note == "only in B (A lacks this series)" and by_kind["compilation"].ratio is None
    assert by_kind["execution"].ratio is not None


@pytest.mark.e2e
def test_compare_builds_refuses_a_commit_without_a_stored_run(history_store, tmp_path, capsys):
    commits = history_store["commits"]
    (tmp_path / "other-store").mkdir()
    code, _out, err = run_cli(capsys, "compare-builds", commits["c1"], commits["c3"], "--store",
                              tmp_path / "other-store",
                          "--repo", history_store["repo"], "--output-dir", tmp_path)
    assert code == 1
    assert f"A {commits['c1']!r}" in err and "holds no run of it" in err and "run directory" in err
    assert not list(tmp_path.glob("*.png"))
    code, _out, err = run_cli(capsys, "compare-builds", commits["c1"], commits["c3"], "--store",
                              tmp_path / "typo",
                          "--repo", history_store["repo"], "--output-dir", tmp_path)
    assert code == 1 and f"no such store: {tmp_path / 'typo'} does not exist" in err
    assert not (tmp_path / "typo").exists()
    code, _out, err = run_cli(capsys, "compare-builds", "no-such-ref", commits["c3"], "--store",
                              history_store["store"],
                          "--repo", history_store["repo"], "--output-dir", tmp_path)
    assert code == 1 and "A 'no-such-ref' is neither a run directory nor a commit" in err


@pytest.mark.e2e
def test_history_from_a_gs_store_equals_the_history_from_the_folder(history_store, gcs_bucket, tmp_path,
                                                                    capsys):

    local = open_store(str(history_store["store"]))
    remote = open_store(f"gs://{gcs_bucket}/ci", retry=gcs_fixtures.FAST_RETRY)
    for name, sha in history_store["commits"].items():
        run_dir = history_store["run_dirs"][name]
        run_id, attempt = run_dir.parent.name, int(run_dir.name)
        # comparison.json too: its marks are drawn, and timing decides whether a run has any
        remote.upload_run(run_dir, run_id, attempt, patterns=("results/*.json", "comparison.json"))
        (pointer,) = local.pointers(sha)
        info = {k: v for k,
                v in pointer.items() if k not in ("schema_version", "commit", "run_id", "attempt")}
        remote.write_pointer(sha, run_id, attempt, info)
    from_folder = _history(capsys, history_store, tmp_path, "--ref", "main")
    output = tmp_path / "from-gcs.json"
    code, _out, err = run_cli(capsys, "history", "--store", f"gs://{gcs_bucket}/ci", "--repo",
                              history_store["repo"],
                          "--ref", "main", "--output", output)
    assert code == 0, err
    from_gcs = json.loads(output.read_text())
    assert from_gcs["store"] == f"gs://{gcs_bucket}/ci"
    assert (from_gcs["commits"], from_gcs["series"]) == (from_folder["commits"], from_folder["series"])


@pytest.mark.e2e
def test_every_results_file_records_the_commit_its_run_was_made_at(history_store):
    for name, run_dir in history_store["run_dirs"].items():
        files = sorted((run_dir / "results").glob("*.json"))
        assert len(files) == 2, name  # compilation and execution
        for f in files:
            assert json.loads(f.read_text())["commit"] == history_store["commits"][name], (name, f.name)


@pytest.mark.e2e
def test_each_pipeline_run_draws_its_history_dashboard_and_the_comment_links_it(history_store):
    c3 = history_store["run_dirs"]["c3"]
    index = c3 / "dashboard" / "index.html"
    assert index.is_file() and (c3 / "dashboard" / "smoke.png").is_file()
    assert f"Dashboard (history by commit): `{index}`" in (c3 / "comment" / "comment.md").read_text().splitlines()
    page = (c3 / "dashboard" / "smoke.html").read_text()
    commits = history_store["commits"]
    for name in ("c1", "c2", "c3"):  # the run itself is the newest point, drawn before it was stored
        assert commits[name][:7] in page, name
    assert commits["s1"][:7] not in page


@pytest.mark.e2e
def test_history_and_compare_builds_read_a_store_without_writing_to_it(history_store, tmp_path, capsys):
    store = store_copy(history_store, tmp_path / "store")
    folders = [store, *(p for p in store.rglob("*") if p.is_dir())]
    # a write (even a write check: create, then remove a file) changes a folder's mtime
    for folder in folders:
        os.utime(folder, ns=(1_000_000_000, 1_000_000_000))
        folder.chmod(0o555)
    try:
        code, _out, err = run_cli(capsys, "history", "--store", store, "--repo", history_store["repo"],
                              "--output", tmp_path / "h.json")
        assert code == 0, err
        commits = history_store["commits"]
        code, _out, err = run_cli(capsys, "compare-builds", commits["c1"], commits["c3"], "--store", store,
                              "--repo", history_store["repo"], "--output-dir", tmp_path)
        assert code == 0, err
        assert {f: f.stat().st_mtime_ns for f in folders} == dict.fromkeys(folders, 1000000000)
    finally:
        for folder in folders:
            folder.chmod(0o755)


@pytest.mark.e2e
def test_compare_builds_refuses_a_run_directory_holding_results_of_two_runs(history_store, tmp_path, capsys):
    mixed = tmp_path / "mix dir"
    (mixed / "results").mkdir(parents=True)
    c1, c3 = history_store["run_dirs"]["c1"], history_store["run_dirs"]["c3"]
    shutil.copyfile(c1 / "results" / "c2-standard-16-0.json", mixed / "results" / "c2-standard-16-0.json")
    shutil.copyfile(c3 / "results" / "compilation-c2-standard-16.json",
                    mixed / "results" / "compilation-c2-standard-16.json")
    commits = history_store["commits"]
    code, out, err = run_cli(capsys, "compare-builds", mixed, commits["c3"], "--store",
                             history_store["store"], "--repo", history_store["repo"], "--output-dir",
                             tmp_path)
    assert code == 1 and out == ""
    assert f"benchtrail: error: A {str(mixed)!r}: results of more than one run: " in err
    assert f"run {c1.parent.name}/1 at commit {commits['c1'][:12]} from {mixed}" in err
    assert f"run {c3.parent.name}/1 at commit {commits['c3'][:12]} from {mixed}" in err
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.e2e
def test_a_corrupt_commit_pointer_is_a_warning_and_listed_in_skipped(history_store, tmp_path, capsys):
    store = store_copy(history_store, tmp_path / "store")
    c1 = history_store["commits"]["c1"]
    (pointer,) = (store / "commits" / c1).glob("*.json")
    pointer.write_text('{"trunc')
    output = tmp_path / "h.json"
    code, _out, err = run_cli(capsys, "history", "--store", store, "--repo", history_store["repo"], "--ref",
                              "main",
                          "--output", output)
    assert code == 0, err
    reason = (f"{c1[:7]}: commit pointer {pointer} is not valid JSON (truncated or corrupt?): Unterminated string "
              "starting at line 1 column 2")
    assert f"benchtrail: warning: run not used: {reason}" in err.splitlines()
    history = json.loads(output.read_text())
    assert history["skipped"] == [reason]
    assert history["commits"][0] == {"commit": c1, "run_id": None, "attempt": None}


@pytest.mark.e2e
def test_when_no_run_is_usable_the_error_says_why_for_each(history_store, tmp_path, capsys):
    store = store_copy(history_store, tmp_path / "store")
    for name in ("c1", "c2", "c3"):
        run_dir = store / history_store["run_dirs"][name].relative_to(history_store["store"])
        (run_dir / "results" / "c2-standard-16-0.json").write_text("{}")
    code, _out, err = run_cli(capsys, "history", "--store", store, "--repo", history_store["repo"], "--ref",
                              "main",
                          "--output", tmp_path / "h.json")
    assert code == 1
    assert "no usable run of any of the 3 first-parent commit(s) of main" in err and ". Runs not used: " in err
    for name in ("c1", "c2", "c3"):
        run_dir = store / history_store["run_dirs"][name].relative_to(history_store["store"])
        assert (f"{history_store['commits'][name][:7]} run {run_dir.parent.name}/1: {run_dir / 'results'}"
                "/c2-standard-16-0.json is not a benchtrail results file (no schema_version)") in err


@pytest.mark.e2e
def test_an_output_dir_that_is_a_file_and_an_empty_output_are_named(history_store, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    commits = history_store["commits"]
    code, _out, err = run_cli(capsys, "compare-builds", commits["c1"], commits["c3"], "--store",
                              history_store["store"],
                          "--repo", history_store["repo"], "--output-dir", afile)
    assert code == 1 and f"--output-dir {afile} is a file" in err
    with pytest.raises(SystemExit) as exited:
        main(["history", "--store", str(history_store["store"]), "--repo", str(history_store["repo"]),
              "--output", ""])
    assert exited.value.code == 1 and "argument --output: empty path" in capsys.readouterr().err
