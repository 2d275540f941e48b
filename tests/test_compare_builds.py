"""``benchtrail compare-builds`` judges B against A as ``benchtrail compare`` would, and refuses to compare
a run with itself unless asked (``history_store``: real smoke runs; more in tests/test_history.py)."""

import pytest

from benchtrail.compare.document import VERDICTS
from benchtrail.history.builds import compare_builds
from benchtrail.store import open_store
from tests.helpers.cli import run_cli


@pytest.mark.e2e
def test_compare_builds_refuses_a_run_compared_with_itself_unless_allowed(history_store, tmp_path, capsys):
    commits, run_dir = history_store["commits"], history_store["run_dirs"]["c3"]
    args = (run_dir, commits["c3"], "--store", history_store["store"], "--repo", history_store["repo"],
            "--output-dir", tmp_path)
    code, out, err = run_cli(capsys, "compare-builds", *args)
    assert code == 1 and out == ""
    assert (f"A {str(run_dir)!r} and B {commits['c3']!r} are the same run ({run_dir.parent.name}/{run_dir.name} at "
            f"commit {commits['c3'][:12]})") in err
    assert "pass --allow-same-run to compare a run with itself" in err and not list(tmp_path.glob("*.png"))
    code, out, err = run_cli(capsys, "compare-builds", *args, "--allow-same-run")
    assert code == 0, err
    same = compare_builds(str(run_dir), commits["c3"], open_store(str(history_store["store"])),
                          history_store["repo"], allow_same_run=True)
    assert {r.verdict for r in same.rows} <= {"similar", "inconclusive"}  # a noisy series stays undecided
    assert {r.ratio for r in same.rows if r.ratio is not None} == {1.0}
    assert {r.change for r in same.rows if r.change is not None} == {0.0}


@pytest.mark.e2e
def test_compare_builds_shows_the_change_its_interval_and_the_verdict_of_each_row(history_store, tmp_path,
                                                                                  capsys):
    commits = history_store["commits"]
    code, out, err = run_cli(capsys, "compare-builds", commits["c1"], commits["c3"], "--store",
                             history_store["store"],
                             "--repo", history_store["repo"], "--output-dir", tmp_path)
    assert code == 0, err
    header = next(line for line in out.splitlines() if "benchmark" in line)
    assert [c.strip() for c in header.strip("│┃ ").replace("┃", "│").split("│")] == [
        "benchmark", "device", "A median", "B median", "B/A", "change", "99% CI", "verdict", "note"]
    rows = compare_builds(commits["c1"], commits["c3"], open_store(str(history_store["store"])),
                          history_store["repo"]).rows
    shown = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        shown.setdefault(cells[0], cells)
    for row in rows:
        cells = shown[row.name]
        assert row.verdict in VERDICTS and cells[7] == row.verdict
        if row.kind == "execution":  # 20 samples a side: the bootstrap interval of the ratio of medians
            assert row.change == pytest.approx((row.b_median / row.a_median - 1) * 100)
            assert cells[5] == f"{row.change:+.1f}%" and cells[6] == f"{row.ci_low:+.1f}…{row.ci_high:+.1f}%"
            assert row.ci_low < row.ci_high
