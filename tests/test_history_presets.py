"""Runs whose preset is not a safe file name, or names a page the dashboard writes itself, are not
used by ``benchtrail history``, ``plot`` and the pipeline's dashboard, and nothing is written outside."""

import json
import shutil
from pathlib import Path

import pytest

from benchtrail.history.collect import collect_history, load_history
from benchtrail.store import open_store
from tests.helpers.cli import run_cli
from tests.helpers.stores import store_copy


def _set_presets(run_dir: Path, presets: list[str]) -> list[Path]:
    """Give every record of the run's results files, and the run itself, ``presets``; return the files."""
    files = sorted((run_dir / "results").glob("*.json"))
    for f in files:
        obj = json.loads(f.read_text())
        obj["run"]["presets"] = presets
        for b in obj["benchmarks"]:
            b["presets"] = presets
        f.write_text(json.dumps(obj))
    return files


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*"))


@pytest.mark.e2e
@pytest.mark.parametrize("preset", ["../../evil2", "smoke ✓ <b>x</b>"])
def test_a_run_whose_preset_is_not_a_safe_file_name_is_not_used_and_nothing_is_written_outside(
        history_store, tmp_path, capsys, preset):
    store = store_copy(history_store, tmp_path / "a" / "store")
    c3_run = store / history_store["run_dirs"]["c3"].relative_to(history_store["store"])
    bad = _set_presets(c3_run, [preset])
    output = tmp_path / "a" / "history.json"
    code, _out, err = run_cli(capsys, "history", "--store", store, "--repo", history_store["repo"],
                              "--output", output)
    assert code == 0, err
    assert (f"warning: run not used: {history_store['commits']['c3'][:7]} run {c3_run.parent.name}/1: "
            "results file ") in err
    assert f"results file {bad[0]}: field run.presets is {[preset]!r}; allowed: a list of preset names of letters, " \
           "digits, '.', '_' and '-', starting with a letter or digit, without '..'" in err
    history = load_history(output)
    assert [c.run_id is not None for c in history.commits] == [True, True, False]  # c3's run is a gap
    before = _files(tmp_path)
    out_dir = tmp_path / "a" / "b" / "dash"
    code, _out, err = run_cli(capsys, "plot", "--history", output, "--output-dir", out_dir)
    assert code == 0, err
    assert {p for p in _files(tmp_path) - before if out_dir not in p.parents} == {out_dir, out_dir.parent}
    assert sorted(p.name for p in out_dir.glob("*.png")) == ["compilation.png", "smoke.png"]


@pytest.mark.e2e
@pytest.mark.parametrize("preset", ["../../evil2", "smoke ✓ <b>x</b>", "index"])
def test_the_pipelines_dashboard_never_writes_a_page_named_by_a_bad_preset_of_the_run(history_store, tmp_path,
                                                                                      preset):
    from benchtrail.pipeline.report_stages import dashboard_stage

    store = store_copy(history_store, tmp_path / "store")
    run_dir = tmp_path / "a" / "run"
    shutil.copytree(history_store["run_dirs"]["c3"] / "results", run_dir / "results")
    _set_presets(run_dir, [preset])
    before = _files(tmp_path)
    index = dashboard_stage(open_store(str(store)), history_store["repo"], history_store["commits"]["c3"],
                            "pending-run", 1, run_dir)
    written = _files(tmp_path) - before
    if preset == "index":  # a valid results file; the run is left out of its dashboard, which says why
        assert index == run_dir / "dashboard" / "index.html"
        assert {p.relative_to(index.parent).as_posix() for p in written - {index.parent}} == {
            "index.html", "plotly.min.js", "smoke.png", "smoke.html", "compilation.png", "compilation.html"}
        assert "has the name of a page the dashboard writes itself (index.html)" in index.read_text()
        assert "pending-run" not in (index.parent / "smoke.html").read_text()
    else:  # the run's own results are refused: no dashboard ("no dashboard: ..."), the run goes on
        assert index is None and written == set()


@pytest.mark.e2e
@pytest.mark.parametrize("preset", ["compilation", "index", "Index"])
def test_a_stored_run_whose_preset_is_a_page_the_dashboard_writes_itself_is_not_used(history_store, tmp_path,
                                                                                     preset):
    store = store_copy(history_store, tmp_path / "store")
    c2_run = store / history_store["run_dirs"]["c2"].relative_to(history_store["store"])
    _set_presets(c2_run, [preset])
    history = collect_history(open_store(str(store), read_only=True), history_store["repo"], "main")
    assert [c.run_id is not None for c in history.commits] == [True, False, True]
    (line,) = history.skipped
    assert line.startswith(f"{history_store['commits']['c2'][:7]} run {c2_run.parent.name}/1: run "
                           f"{c2_run.parent.name}/1 ({c2_run.resolve()}): series ")
    assert line.endswith(f"preset {preset!r} has the name of a page the dashboard writes itself "
                         f"({preset.lower()}.html); reserved: compilation, index, no-preset; rename the preset")

