"""The compiler summary (``benchtrail.compare.compiler_summary``) of fixed results fixtures: literal numbers."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchtrail.compare.compiler_summary import (
    MIN_INTERVAL_CASES,
    compiler_summary,
    geomean_interval,
    render_markdown,
    rows_from_json,
    rows_to_json,
)
from benchtrail.compare.document import Comparison
from benchtrail.errors import UserError
from tests.helpers.compiler_results import CPU, GPU, base_results, case, compiled, head_results
from tests.helpers.records import results


def test_head_summary_literal_numbers():
    cpu, gpu = compiler_summary(head_results())
    assert (cpu.compile_config, cpu.device_name, gpu.device_name) == ("inductor", CPU, GPU)
    h = cpu.head
    assert (h.cases, h.ok, h.pass_rate, h.paired) == (4, 3, 0.75, 3)
    # geomean(2, 4, 1) = 2; 3 cases, fewer than MIN_INTERVAL_CASES: no interval
    assert h.geomean_speedup == pytest.approx(2.0, rel=1e-12)
    assert (h.speedup_low, h.speedup_high) == (None, None)
    # the interval the t formula gives them: logs ln2·(1, 2, 0): sd ln2, t(0.975, 2) = 4.302653
    assert geomean_interval([2.0, 4.0, 1.0]) == (pytest.approx(2.0), pytest.approx(0.357462, abs=5e-7),
                                                 pytest.approx(11.189997, abs=5e-7))
    # Cold: module medians 1100, 3000, 2000 (m4 failed) → 2000; warm: 110, 300 → 205.
    assert (h.modules, h.cold_ms, h.warm_ms) == (3, 2000.0, 205.0)
    assert (h.memory_pairs, h.compression_ratio) == (0, None)  # CPU: peak RSS only, no ratio
    g = gpu.head
    assert (g.pass_rate, g.geomean_speedup, g.speedup_low, g.speedup_high) == (1.0, pytest.approx(2.0), None,
                                                                               None)
    assert (g.memory_pairs, g.compression_ratio) == (2, pytest.approx(1.125, rel=1e-12))
    assert (g.modules, g.cold_ms, g.warm_ms) == (0, None, None)
    assert cpu.base is None and cpu.change("pass_rate") is None and cpu.change("geomean_speedup") is None


def test_changes_against_base():
    cpu, gpu = compiler_summary(head_results(), base_results())
    assert (cpu.base.pass_rate, cpu.base.geomean_speedup, cpu.base.cold_ms) == (1.0, pytest.approx(2**0.5),
                                                                                2250.0)
    assert cpu.change("pass_rate") == pytest.approx(-25.0)
    assert cpu.change("geomean_speedup") == pytest.approx(41.4214, abs=5e-5)  # 2 / √2 − 1
    assert cpu.change("cold_ms") == pytest.approx(-11.1111, abs=5e-5)  # 2000 / 2250 − 1
    # base: no warm; CPU: no ratio
    assert cpu.change("warm_ms") is None and cpu.change("compression_ratio") is None
    assert gpu.base.compression_ratio == pytest.approx(1.0)
    assert gpu.change("compression_ratio") == pytest.approx(12.5)
    assert (gpu.change("pass_rate"), gpu.change("geomean_speedup")) == (pytest.approx(0.0),
                                                                        pytest.approx(0.0, abs=1e-9))


def test_render_markdown_exact():
    assert render_markdown([]) == ""
    gpu_only = [f for f in head_results() if f.benchmarks[0].device_name == GPU]
    base = [f for f in base_results() if f.benchmarks[0].device_name == GPU]
    assert render_markdown(compiler_summary(gpu_only, base)) == (
        "| compile config | pass rate | speedup [95% CI] | cold compile | warm compile | memory ratio |\n"
        "|---|---:|---:|---:|---:|---:|\n"
        "| inductor | 100% (2/2) (+0 pp) | 2.00× [2 cases] (+0.0%) | — | — | 1.12× (+12.5%) |\n"
        "\n"
        "Speedup: eager median / compiled median per case, geometric mean over cases. Compile: median over "
        "modules. Memory ratio: eager / compiled CUDA allocator peak over the timed samples (— on CPU). In "
        "parentheses: change against base (pass rate in percentage points). [n cases]: fewer than 5 cases "
        "with a speedup, too few for a 95% interval.\n")
    table = render_markdown(compiler_summary(head_results())).splitlines()
    assert table[0].startswith("| compile config | device | pass rate |")
    assert table[2] == ("| inductor | c2-standard-16 | 75% (3/4) | 2.00× [3 cases] | 2000 ms | 205 ms | — |")


def _speedups(*speedups: float):
    """Results of one CPU case per speedup: eager 100 µs, inductor 100 / speedup µs."""
    return results(*(c for i, s in enumerate(speedups)
                     for c in (case(f"m{i}", "eager", 100.0), case(f"m{i}", "inductor", 100.0 / s))))


def test_the_interval_needs_five_cases_and_fewer_show_their_count():
    assert MIN_INTERVAL_CASES == 5
    # 5 cases, speedups 1, 2, 4, 2, 1: geomean 2^0.8; logs ln2·(0, 1, 2, 1, 0), sd ln2·√0.7,
    # t(0.975, 4) = 2.776445
    (five,) = compiler_summary([_speedups(1, 2, 4, 2, 1)])
    assert (five.head.paired, five.head.geomean_speedup) == (5, pytest.approx(1.741101, abs=5e-7))
    assert (five.head.speedup_low, five.head.speedup_high) == (pytest.approx(0.847420, abs=5e-7),
                                                               pytest.approx(3.577249, abs=5e-7))
    # 4 cases: a geometric mean and its count, no interval; in the table, in the JSON rows and back
    (four,) = rows = compiler_summary([_speedups(1, 2, 4, 2)])
    assert (four.head.paired, four.head.geomean_speedup, four.head.speedup_low, four.head.speedup_high) == (
        4, pytest.approx(2.0), None, None)
    data = json.loads(json.dumps(rows_to_json(rows)))
    head = data[0]["head"]
    assert (head["paired"], head["speedup_low"], head["speedup_high"]) == (4, None, None)
    assert rows_from_json(data) == rows
    assert render_markdown(rows).splitlines()[2] == "| inductor | 100% (4/4) | 2.00× [4 cases] | — | — | — |"
    one = render_markdown(compiler_summary([_speedups(3)]))
    assert one.splitlines()[2].split(" | ")[2] == "3.00× [1 case]"
    assert "[0.85…3.58]" in render_markdown(compiler_summary([_speedups(1, 2, 4, 2, 1)]))
    assert "fewer than" not in render_markdown(compiler_summary([_speedups(1, 2, 4, 2, 1)]))


def test_an_older_comparison_json_with_a_two_case_interval_reads_without_it():
    # a row as the compare stage wrote it before MIN_INTERVAL_CASES (issue 39: 2 cases gave [0.28…2.94])
    old = {"cases": 2, "ok": 2, "paired": 2, "geomean_speedup": 0.91, "speedup_low": 0.28,
           "speedup_high": 2.94, "modules": 2, "cold_ms": 1500.0, "warm_ms": None, "memory_pairs": 0,
           "compression_ratio": None}
    five = {**old, "cases": 5, "ok": 5, "paired": 5}
    (row,) = rows_from_json([{"compile_config": "inductor", "device_name": CPU, "head": old, "base": five}])
    assert (row.head.paired, row.head.geomean_speedup, row.head.speedup_low, row.head.speedup_high) == (
        2, 0.91, None, None)
    assert (row.base.speedup_low, row.base.speedup_high) == (0.28, 2.94)  # 5 cases: kept
    assert render_markdown([row]).splitlines()[2] == (
        "| inductor | 100% (2/2) (+0 pp) | 0.91× [2 cases] (+0.0%) | 1500 ms (+0.0%) | — | — |")


def test_edge_cases():
    # A compile config whose every case failed: no speedup; a case twice is refused by name.
    failed = results(case("m1", "eager", 100.0), case("m1", "inductor", None, status="failed"))
    (row,) = compiler_summary([failed])
    assert (row.head.pass_rate, row.head.paired, row.head.geomean_speedup, row.head.speedup_low) == (0.0, 0,
                                                                                                     None,
                                                                                                     None)
    with pytest.raises(UserError,
                       match=r"'m1\.eager\.inference-bs1\.c2-standard-16' \(eager\) is there twice"):
        compiler_summary([failed, failed])
    # One pair: a geometric mean without an interval; older files' compile_time_ms counts as cold.
    one = results(case("m1", "eager", 100.0), case("m1", "inductor", 25.0),
                  compiled("m1", "inductor", "compile_time_ms", (1500.0,)))
    (row,) = compiler_summary([one])
    assert (row.head.geomean_speedup, row.head.speedup_low, row.head.cold_ms) == (pytest.approx(4.0), None,
                                                                                  1500.0)
    eager = one.benchmarks[0]  # its instruction count beside it (issue 44) is no second case
    counted = dataclasses.replace(eager, id=f"{eager.id}-instructions", metric="instructions", unit="count")
    assert compiler_summary([dataclasses.replace(one, benchmarks=(*one.benchmarks, counted))]) == [row]
    with pytest.raises(ValueError, match="above 0"):
        geomean_interval([1.0, 0.0])


def test_json_round_trip_and_bad_input():
    rows = compiler_summary(head_results(), base_results())
    data = json.loads(json.dumps(rows_to_json(rows)))
    assert rows_from_json(data) == rows
    data[1]["head"]["ok"] = -1
    with pytest.raises(UserError,
                       match=r"comparison.json: compiler_summary\[1\].head.ok is -1; expected an integer"):
        rows_from_json(data, "comparison.json: compiler_summary")
    with pytest.raises(ValueError, match="figure must be one of"):
        rows[0].change("median")


def test_the_comment_shows_the_summary_after_the_confirmed_changes():
    from benchtrail.compare.comment import render
    from benchtrail.compare.document import comparison_to_dict

    head, base = head_results(), base_results()
    document = comparison_to_dict([], base, head, "thresholds.yaml")
    document["compiler_summary"] = rows_to_json(compiler_summary(head, base))
    body, _, _ = render(Comparison.of(document))
    lines = body.splitlines()
    at = lines.index("#### Compiler summary")
    assert lines.index("#### Confirmed regressions and improvements") < at
    assert lines[at + 1:at + 5] == render_markdown(compiler_summary(head, base)).splitlines()[:4]
    assert "#### Compiler summary" not in render(Comparison.of(comparison_to_dict([], base, head, "t")))[0]
