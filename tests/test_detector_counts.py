"""``evaluate-detector --metric instructions``: drawing comparisons across processes and judging them, on
synthetic counts (no valgrind starts here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchtrail.cli import app as cli
from benchtrail.detector.count_evaluation import (
    CountConfig,
    count_pool,
    deltas_of,
    draw_comparisons,
    format_counts_table,
    judged,
    rejudge,
    rows_of,
)
from benchtrail.errors import UserError
from tests.helpers.instruction_counts import BASE, synthetic


def document(counts, deltas=(0.25, 1.0), aa=150, ab=50, threshold=0.5, seed=0):
    """A whole output document of ``counts``, as
    :func:`benchtrail.detector.count_evaluation.evaluate_counts` makes."""
    setup = {"metric": "instructions", "counter": "callgrind", "valgrind": "3.19.0",
             "cpu": "AuthenticAMD AVX2",
             "matrix_size": 384, "threshold_pct": threshold, "threshold_match": "execution/instructions/*",
             "deltas_pct": list(deltas), "samples_per_side": 5, "repeats_per_process": 8, "parallel": 2,
             "seed": seed, "torch": "2.13.0+cpu", "collect_s": 300.0, "cpu_model": "AMD EPYC", "cpu_count": 2,
             "date": "2026-12-01T00:00:00+00:00", "background_load": None,
             "processes": [{"counts": c, "loop_instructions_per_iteration": 74.0, "wall_s": 95.0}
                           for c in counts]}
    comparisons = draw_comparisons(counts, deltas, aa, ab, 5, np.random.default_rng(seed))
    return rejudge({"schema_version": 1, "setup": setup, "comparisons": comparisons}, threshold)


def test_deltas_are_twice_and_half_the_threshold_plus_those_given():
    assert deltas_of(0.5) == (0.25, 1.0)
    assert deltas_of(0.5, (2.0, 1.0)) == (0.25, 1.0, 2.0)


def test_comparisons_take_base_and_head_from_two_different_processes_seeded():
    counts = synthetic()
    drawn = draw_comparisons(counts, (0.25, 1.0), 150, 50, 5, np.random.default_rng(0))
    assert [c["delta_pct"] for c in drawn] == [0.0] * 150 + [0.25] * 50 + [1.0] * 50
    for c in drawn:
        variant = {0.0: 0, 0.25: 1, 1.0: 2}[c["delta_pct"]]
        assert c["base_process"] != c["head_process"]
        assert len(set(c["base_repeats"])) == 5 == len(set(c["head_repeats"]))
        assert c["base"] == [counts[c["base_process"]][0][r] for r in c["base_repeats"]]
        assert c["head"] == [counts[c["head_process"]][variant][r] for r in c["head_repeats"]]
    # Every ordered pair of 6 processes appears among 150 A/A draws; the same seed draws the same.
    assert len({(c["base_process"], c["head_process"]) for c in drawn[:150]}) == 30
    assert draw_comparisons(counts, (0.25, 1.0), 150, 50, 5, np.random.default_rng(0)) == drawn
    assert draw_comparisons(counts, (0.25, 1.0), 150, 50, 5, np.random.default_rng(1)) != drawn


def test_stable_counts_give_no_aa_alert_catch_twice_the_threshold_and_call_half_of_it_similar():
    doc = document(synthetic())
    rows = {r["delta_pct"]: r for r in doc["rows"]}
    assert (rows[0.0]["alerts"], rows[0.0]["similar"], rows[0.0]["n"]) == (0, 150, 150)
    assert (rows[1.0]["alerts"], rows[1.0]["regressed"], rows[1.0]["n"]) == (50, 50, 50)
    assert (rows[0.25]["alerts"], rows[0.25]["similar"]) == (0, 50)
    assert rows[0.0]["ci_high_pct"] == pytest.approx(2.43, abs=0.01)  # 0 of 150: Clopper–Pearson bound
    # The widened change of δ = 1%: the median change ± both sides' ranges (300 of 13.4M each, 0.0045%).
    c = next(c for c in doc["comparisons"] if c["delta_pct"] == 1.0)
    change = (np.median(c["head"]) / np.median(c["base"]) - 1) * 100
    spread = sum((max(x) - min(x)) / np.median(x) * 100 for x in (c["base"], c["head"]))
    assert c["change_pct"] == pytest.approx(change) and c["low_pct"] == pytest.approx(change - spread)
    assert 0.0 < spread < 0.0046 and not c["noisy"]
    table = format_counts_table(doc)
    assert "| 0 (A/A) | 0 / 150 | 0.00 – 2.43 | 150 | 0 | 0 | 0 |" in table
    assert "| 1 | 50 / 50 | 92.89 – 100.00 | 0 | 0 | 0 | 0 |" in table
    assert "| 0.25 | 0 / 50 | 0.00 – 7.11 | 50 | 0 | 0 | 0 |" in table
    assert "13,373,694 instructions per call (medians of the processes: 13,373,444 – 13,373,944)" in table
    assert "collection 5.0 min" in table and "Threshold 0.5% (--threshold-pct)" in table


def test_spread_repeats_widen_the_change_into_inconclusive_and_noisy():
    # Repeats 0.15% of the base apart on each side: spread 0.3% (noisy, > 0.25%); a median moves by at most
    # 0.15%, so an A/A change widens to at most ±0.46%: similar. δ = 0.25% widens past 0.5% when its median
    # change is 0.25% or more: inconclusive; δ = 1% stays beyond 1 - 0.15 - 0.3 = 0.55%: regressed.
    doc = document(synthetic(jitter=0.0015 * BASE))
    rows = {r["delta_pct"]: r for r in doc["rows"]}
    assert (rows[0.0]["similar"], rows[0.0]["noisy"], rows[0.0]["alerts"]) == (150, 150, 0)
    assert rows[1.0]["regressed"] == 50 and rows[0.25]["inconclusive"] > 0
    for c in (c for c in doc["comparisons"] if c["delta_pct"] == 0.25):
        assert c["spread_pct"] == pytest.approx(0.3, abs=0.001) and c["noisy"]
        assert c["verdict"] == ("inconclusive" if c["high_pct"] > 0.5 else "similar")


def test_an_aa_improvement_counts_as_an_alert():
    counts = synthetic(processes=2)
    counts[1][0] = [x * 0.99 for x in counts[1][0]]  # process 1 counts 1% fewer: any pair is an alert
    rows = rows_of(judged(draw_comparisons(counts, (1.0,), 20, 1, 5, np.random.default_rng(0)), 0.5))
    aa = rows[0]
    assert aa["alerts"] == aa["regressed"] + aa["improved"] == 20
    assert aa["regressed"] > 0 and aa["improved"] > 0


def test_rejudging_at_another_threshold_keeps_the_counts():
    doc = document(synthetic())
    again = rejudge(doc, 0.1)
    rows = {r["delta_pct"]: r for r in again["rows"]}
    assert rows[0.25]["regressed"] == 50 and rows[0.0]["alerts"] == 0
    assert [c["base"] for c in again["comparisons"]] == [c["base"] for c in doc["comparisons"]]


def test_the_command_rejudges_an_instructions_output(tmp_path, capsys):
    old, out = tmp_path / "counted.json", tmp_path / "again.json"
    old.write_text(json.dumps(document(synthetic())))
    assert cli.main(["evaluate-detector", "--rejudge", str(old), "--threshold-pct", "0.1",
                     "--output", str(out)]) == 0
    assert "| 0.25 | 50 / 50 |" in capsys.readouterr().out
    assert json.loads(out.read_text())["setup"]["threshold_match"] == "--threshold-pct"


@pytest.mark.parametrize(("argv", "message"), [
    (["--metric", "instructions", "--modes", "paired"], "--modes does not apply to --metric instructions"),
    (["--metric", "instructions", "--samples", "10", "--max-samples", "20"],
     "--samples and --max-samples do not apply to --metric instructions: leave them out"),
    (["--processes", "6"], "--processes does not apply to --metric latency"),
    (["--rejudge", "x.json", "--metric", "instructions"],
     "--rejudge measures nothing; --metric would not apply"),
])
def test_options_of_the_other_metric_are_refused(argv, message, tmp_path, capsys):
    assert cli.main(["evaluate-detector", *argv, "--output", str(tmp_path / "o.json")]) == 1
    assert message in capsys.readouterr().err


def test_fewer_than_five_processes_are_refused(capsys):
    with pytest.raises(SystemExit):
        cli.main(["evaluate-detector", "--metric", "instructions", "--processes", "4"])
    assert "argument --processes: expected a whole number from 5, got" in capsys.readouterr().err


def test_without_valgrind_the_error_names_the_metric_and_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    message = "the instructions metric counts with callgrind, and valgrind is not on PATH: install valgrind"
    with pytest.raises(UserError, match=message):
        count_pool(CountConfig(), (0.25, 1.0))
