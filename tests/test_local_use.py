"""Issue 43, local use: the numbers the terminal prints after a run (``--all``: of every row) and those
``explain`` prints, read back from real runs' comparison.json (``history_store``), and ``pipeline --fail-on``
over two runs of one function benchmark, the second 4x slower."""

import argparse
import json
import re
import shutil
from pathlib import Path

from benchtrail.cli import main
from benchtrail.cli.compare import show_result
from benchtrail.compare.document import Row, load_comparison
from benchtrail.compare.tables import format_change, format_value
from benchtrail.compare.terminal import render_table
from tests.helpers.git import git


def _rows(run_dir):
    return json.loads((run_dir / "comparison.json").read_text(encoding="utf-8"))["rows"]


def _numbers(r):
    """A row's base median, IQR, head median, IQR and ``base/head`` counts as the table prints them, spaces
    collapsed: medians as the comment shows them, each IQR in percent of its median."""
    def side(s):
        iqr, median = r[f"{s}_iqr"], r[f"{s}_median"]
        pct = 100 * iqr / median if median else None
        spread = "—" if pct is None else f"{pct:.1f}%" if pct < 10 else f"{pct:.0f}%"
        return f"{format_value(median, r['unit'])} {spread}"
    return f"{side('base')} {side('head')} {r['base_n'] or '—'}/{r['head_n'] or '—'}"


def _change(row):
    """A row's change and interval as the table prints them."""
    interval = "—" if row.ci_low is None else f"{row.ci_low:+.1f}…{row.ci_high:+.1f}%"
    return f"{format_change(row, row.unit)} {interval}"


def _printed(capsys, path, all_rows=False):
    """What ``compare``, ``pipeline`` and ``ab`` print of ``path``: the table's rows (the lines ending in
    their counts) and the whole text, spaces collapsed."""
    show_result(path, path, argparse.Namespace(json=False, all=all_rows))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == str(path) and all(len(line) <= 100 for line in lines[:-1])
    rows = [line for line in lines if re.search(r"(\d+|—)/(\d+|—)$", line)]
    # The numbers as a wide terminal shows them: at 100 columns wide noisy IQRs can push the IQR columns out.
    wide = render_table(load_comparison(path), width=400, all_rows=all_rows).splitlines()
    assert len([line for line in wide if re.search(r"(\d+|—)/(\d+|—)$", line)]) == len(rows)
    return rows, " ".join(" ".join(wide).split())


def test_after_a_run_the_terminal_shows_each_new_rows_median_iqr_and_samples(history_store, capsys):
    rows = _rows(history_store["run_dirs"]["c1"])  # the first run: every row is new
    lines, text = _printed(capsys, history_store["run_dirs"]["c1"] / "comparison.json")
    assert {r["verdict"] for r in rows} == {"new"} and len(lines) == len(rows)
    assert "benchmark verdict change interval base IQR head IQR n" in text
    for r in rows:
        assert r["head_n"] > 0 and f"new — — {_numbers(r)}" in text, r["name"]


def test_all_lists_every_row_with_its_change_interval_and_both_sides(history_store, capsys):
    run_dir = history_store["run_dirs"]["c3"]
    rows = _rows(run_dir)
    shown = [r for r in rows if r["verdict"] in ("regressed", "improved", "new")]  # timing decides which
    assert len(_printed(capsys, run_dir / "comparison.json")[0]) == len(shown)
    lines, text = _printed(capsys, run_dir / "comparison.json", all_rows=True)
    assert len(lines) == len(rows)
    for r in rows:
        row = Row.of(r)
        assert r["base_n"] > 0 and f"{_change(row)} {_numbers(r)}" in text, r["name"]


def test_explain_prints_each_rows_medians_change_interval_and_verdict(history_store, capsys, tmp_path):
    run_dir = history_store["run_dirs"]["c3"]
    rows = _rows(run_dir)
    for r in rows:
        row = Row.of(r)
        assert main(["explain", row.id, "--run", str(run_dir)]) == 0
        ci = f" (99% CI {row.ci_low:+.1f}…{row.ci_high:+.1f}%)" if row.ci_low is not None else ""
        medians = f"{format_value(row.base_median, row.unit)} → {format_value(row.head_median, row.unit)}"
        verdict = f"{row.verdict} · {row.mark}" if row.mark else row.verdict
        said = f"{verdict}, {format_change(row, row.unit)}{ci}, median {medians}"
        assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("compared")] == [
            f"compared     {row.metric}: {said}" + (f"; {row.reason}" if row.reason else "")]
    module = rows[-1]["id"].rsplit("-", 1)[0]  # a module: a line for each of its compilation series
    assert main(["explain", module, "--run", str(run_dir)]) == 0
    said = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()
            if line.startswith("compared")]
    assert said == [f"compared     {r['metric']}" for r in rows if r["id"].startswith(f"{module}-")]
    shutil.copytree(run_dir / "run-configs", tmp_path / "run-configs")  # a run without a comparison
    assert main(["explain", rows[0]["id"], "--run", str(tmp_path)]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("compared")] == [
        "compared     no: this run has no comparison.json"]


#: One function benchmark; its sleep is a module constant, outside what the content hash reads (the
#: function, its input factory and reference), so a commit that makes it 4x slower keeps it comparable.
NAP = """import time

import torch

from benchtrail import benchmark

SLEEP_S = {sleep}


@benchmark(inputs=lambda: torch.ones(4), processes=1, min_samples=8, warmup_time_ms=5)
def nap(x):
    time.sleep(SLEEP_S)
    return x + 1
"""


def test_pipeline_fail_on_exits_3_on_a_regression_and_0_without(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "napper"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[tool.benchtrail]\nbenchmarks = ["nap_bench"]\n'
                                         'presets = "default"\nstore = ".benchtrail/store"\n')
    monkeypatch.chdir(repo)
    git(repo, "init", "-q", "-b", "main", isolated=True)
    for sleep, code in ((0.010, 0), (0.040, 3)):  # the first run has nothing to compare with
        (repo / "nap_bench.py").write_text(NAP.format(sleep=sleep))
        git(repo, "add", "-A", isolated=True)
        git(repo, "commit", "-q", "-m", f"sleep {sleep}", isolated=True)
        assert main(["pipeline", "--no-recheck", "--fail-on", "regressed"]) == code
    out, err = capsys.readouterr()
    assert "benchtrail: 1 regression(s) not accepted: nap_bench.nap.eager.inference.cpu" in err
    first, second = (_rows(Path(line).parents[1]) for line in out.splitlines() if line.endswith("comment.md"))
    assert [r["verdict"] for r in first + second] == ["new", "regressed"]
    text = " ".join(out.split())  # the terminal after each run: its new or changed row's numbers
    assert f"new — — {_numbers(first[0])}" in text
    assert f"unconfirmed {_change(Row.of(second[0]))} {_numbers(second[0])}" in text
