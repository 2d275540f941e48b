import json
import math
import re

import numpy as np
import pytest

from benchtrail.cli import main
from benchtrail.compare.document import Comparison, comparison_to_dict
from benchtrail.compare.rules import Threshold, find_threshold, load_thresholds
from benchtrail.compare.verdicts import compare
from benchtrail.errors import UserError
from benchtrail.results.io import write_results
from tests.helpers.records import record, results

RULES = load_thresholds()
rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws from ``rng`` seeded afresh: its samples do not depend on which tests ran before it in its
    process (pytest-xdist's work stealing changes that from run to run)."""
    global rng
    rng = np.random.default_rng(0)


def noisy(median, n=30, spread=0.01):
    return median * (1 + spread * rng.standard_normal(n))


def verdicts(base, head):
    return {r.id: (r.verdict, r.reason) for r in compare([results(*base)], [results(*head)], RULES)}


def test_clear_slowdown_is_regressed_and_speedup_improved():
    rows = compare([results(record("slow", noisy(100)), record("fast", noisy(100)))],
                   [results(record("slow", noisy(120)), record("fast", noisy(80)))], RULES)
    by_id = {r.id: r for r in rows}
    assert by_id["slow"].verdict == "regressed" and by_id["slow"].change == pytest.approx(20, abs=2)
    assert by_id["fast"].verdict == "improved" and by_id["fast"].change == pytest.approx(-20, abs=2)
    assert by_id["slow"].p_value < 1e-6


def test_change_within_threshold_is_similar_and_one_its_interval_crosses_is_inconclusive():
    assert verdicts([record("a", noisy(100, spread=0.002))], [record("a", noisy(100.5, spread=0.002))])["a"] == (
        "similar", "interval within the threshold")
    assert verdicts([record("a", noisy(100))], [record("a", noisy(102))])["a"] == (
        "inconclusive", "interval crosses the threshold: more samples would settle it")


def test_median_change_beyond_threshold_with_an_interval_reaching_below_it_is_inconclusive():
    base = record("a", [100, 110, 90, 105, 95, 100, 108, 92])
    head = record("a", [106, 116, 95, 111, 101, 106, 114, 98])
    rows = compare([results(base)], [results(head)], RULES)
    assert rows[0].change == pytest.approx(6.0) and rows[0].verdict == "inconclusive"
    assert rows[0].ci_low < 5.0 < rows[0].ci_high


def test_spread_above_a_quarter_of_the_median_is_labelled_noisy_and_its_interval_decides():
    base = record("a", [100, 140, 60, 120, 80, 100])
    head = record("a", [130, 180, 80, 160, 100, 130])
    (row,) = compare([results(base)], [results(head)], RULES)
    assert (row.verdict, row.noisy) == ("inconclusive", True) and row.ci_low < 2.0 < row.ci_high


def test_clear_regression_row_carries_its_interval_q_value_and_outcome():
    rows = compare([results(record("a", noisy(100)))], [results(record("a", noisy(120)))], RULES)
    row = rows[0]
    assert row.verdict == "regressed" and row.outcome == "DIFFERENT"
    assert 15 < row.ci_low < row.change < row.ci_high < 25
    assert row.q_value < 1e-6 and 0 < row.mde < 5


def test_new_removed_and_failed_rows():
    v = verdicts([record("gone"), record("broken")], [record("fresh"), record("broken", [], status="failed")])
    assert v["fresh"] == ("new", "no baseline for this series")
    assert v["gone"] == ("removed", "in the baseline but not in this run")
    assert v["broken"] == ("failed", "head failed: boom")


def test_changed_content_hash_is_not_comparable():
    v = verdicts([record("a", content_hash="old")], [record("a", content_hash="new")])
    assert v["a"][0] == "not-comparable" and "content hash differs" in v["a"][1]


def test_zero_or_nan_baseline_median_is_not_comparable_and_others_still_compare():
    zero = record("zero", [0.0] * 10)
    nan_base = record("nan", [1.0] * 10)
    nan_base = type(nan_base)(**{**nan_base.__dict__, "median": math.nan})
    v = verdicts([zero, nan_base, record("ok", noisy(100))],
                 [record("zero", [5.0] * 10), record("nan", [1.0] * 10), record("ok", noisy(150))])
    assert v["zero"] == ("not-comparable",
                         "baseline sample 0 is 0.0 (0 or negative); latency samples must be "
                                           "finite and > 0")
    assert v["nan"] == ("not-comparable", "baseline median is nan; it must be finite and > 0")
    assert v["ok"][0] == "regressed"


def test_graph_break_counts_compare_exactly():
    base = record("m-graph_breaks", [0.0], kind="compilation", metric="graph_breaks", unit="count",
                  name="sqrl.inductor.cpu.graph_breaks")
    head = record("m-graph_breaks", [1.0], kind="compilation", metric="graph_breaks", unit="count",
                  name="sqrl.inductor.cpu.graph_breaks")
    (row,) = compare([results(base)], [results(head)], RULES)
    assert (row.verdict, row.change, row.change_unit) == ("regressed", 1.0, "count")


def test_first_matching_rule_wins():
    rules = (Threshold("execution/latency/sqrl.*", "percent", 10, "lower-is-better"),
             Threshold("execution/*", "percent", 5, "lower-is-better"))
    assert find_threshold(rules, "execution", "latency", "sqrl.eager.x").threshold == 10
    assert find_threshold(rules, "execution", "latency", "mlp.eager.x").threshold == 5
    with pytest.raises(UserError, match="no threshold rule matches series 'compilation/graph_count/y'"):
        find_threshold(rules, "compilation", "graph_count", "y")


def test_higher_is_better_flips_the_direction():
    for rules in ((Threshold("*", "percent", 5, "higher-is-better"),), (Threshold("*", "percent", 5),)):
        rows = compare([results(record("tput", noisy(100), metric="throughput", unit="per_s"))],
                       [results(record("tput", noisy(80), metric="throughput", unit="per_s"))], rules)
        assert (rows[0].verdict, rows[0].threshold["direction"]) == ("regressed", "higher-is-better")


def test_thresholds_file_errors_name_the_rule_and_key(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("schema_version: 1\nthresholds:\n  - {match: '*', unit: percent, threshold: 5, "
                    "direction: lower-is-better, treshold: 3}\n")
    with pytest.raises(UserError, match=r"rule 0: unknown keys \['treshold'\]"):
        load_thresholds(path)
    path.write_text("schema_version: 1\nthresholds:\n  - {match: '*', unit: percnt, threshold: 5, "
                    "direction: lower-is-better}\n")
    with pytest.raises(UserError, match="unit 'percnt' is not one of percent, absolute"):
        load_thresholds(path)


def test_comparison_counts_every_verdict():
    rows = compare([results(record("a", noisy(100)))], [results(record("a", noisy(130)), record("b"))], RULES)
    obj = comparison_to_dict(rows, [results(record("a"))], [results(record("a"))], "t.yaml")
    assert obj["counts"]["regressed"] == 1 and obj["counts"]["new"] == 1 and obj["counts"]["similar"] == 0
    assert obj["schema_version"] == 8 and obj["counts"]["insufficient-samples"] == 0


def test_compare_cli_without_base_marks_every_series_new_and_rejects_bad_files(tmp_path, capsys):
    head = write_results(tmp_path / "head.json", results(record("a"), record("b")))
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(head), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["counts"]["new"] == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "commit": ')
    assert main(["compare", "--base", str(bad), "--head", str(head), "--output",
                 str(tmp_path / "c2.json")]) == 1
    assert "bad.json is not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "c2.json").exists()


def test_fail_on_regressed_exits_3_unless_a_trailer_accepts_it(tmp_path, capsys, monkeypatch):
    from benchtrail.compare.comment import render

    monkeypatch.delenv("BENCHMARKS_ACCEPT", raising=False)
    base = write_results(tmp_path / "base.json",
                         results(record("slow", noisy(100)), record("same", noisy(50))))
    head = write_results(tmp_path / "head.json",
                         results(record("slow", noisy(130)), record("same", noisy(50))))
    args = ["compare", "--base", str(base), "--head", str(head), "--fail-on", "regressed"]
    assert main([*args, "--output", str(tmp_path / "c1.json")]) == 3
    assert "1 regression(s) not accepted: slow.inference-bs1.c2-standard-16" in capsys.readouterr().err
    monkeypatch.setenv("BENCHMARKS_ACCEPT", "slow.*")
    assert main([*args, "--output", str(tmp_path / "c2.json")]) == 0
    comparison = json.loads((tmp_path / "c2.json").read_text())
    assert comparison["counts"]["accepted"] == 1
    body, _, _ = render(Comparison.of(comparison))
    assert body.startswith("### benchtrail: 1 regression (1 accepted), 0 improvements, 1 similar")
    assert "| regressed · accepted |" in body


def test_records_pooling_several_processes_get_the_two_stage_interval():
    """A record's ``process_medians`` (3 processes) make its samples 3 clusters for the interval."""
    from benchtrail.stats.inference import compare_samples

    rng = np.random.default_rng(1)
    base = [100 * o * (1 + 0.01 * rng.standard_normal()) for o in (1.0, 1.04, 0.98) for _ in range(10)]
    head = [100 * o * (1 + 0.01 * rng.standard_normal()) for o in (1.05, 1.03, 1.08) for _ in range(10)]
    rules = (Threshold("*", "percent", 2.0, "lower-is-better"),)

    def row(**details):
        return compare([results(record("rc1", base, **details))], [results(record("rc1", head, **details))],
                       rules)[0]
    pooled, by_process = row(), row(process_medians=[1.0, 1.0, 1.0])
    expected = compare_samples([base], [head], threshold_pct=2.0, lower_is_better=True, alpha=0.01,
                               base_clusters=np.array([3]), head_clusters=np.array([3]))
    assert by_process.ci_low == pytest.approx((expected.low[0] - 1) * 100)
    assert by_process.ci_high == pytest.approx((expected.high[0] - 1) * 100)
    assert by_process.ci_high - by_process.ci_low > pooled.ci_high - pooled.ci_low
    assert by_process.change == pooled.change
    # Samples that do not split evenly into the processes are treated as independent.
    assert row(process_medians=[1.0] * 7).ci_low == pooled.ci_low


def _run_dir_with_export(tmp_path):
    """A head run directory: an execution export of 4 cases in 2 shards (the real export code) and no results yet."""
    from benchtrail import jsonio
    from benchtrail.suite.export import export_execution, load_execution
    from tests.helpers.suites import bad_models_suite

    run_dir = tmp_path / "head"
    suite = bad_models_suite(("a", "tiny"), ("b", "tiny"), ("c", "tiny"), ("d", "tiny"))
    export = jsonio.write_json(run_dir / "run-configs" / "execution.json",
                               export_execution(suite, ("test",), shard_count=2))
    return run_dir, load_execution(export)["c2-standard-16"]


def _records_of(rcs, median=100.0):
    return [record(rc.id, noisy(median), name=rc.name) for rc in rcs]


def test_run_configs_of_a_shard_that_did_not_report_are_failed_rows_and_the_shard_is_listed(tmp_path, capsys):
    from tests.helpers.schemas import errors

    run_dir, shards = _run_dir_with_export(tmp_path)
    # Shard 0 reported one of its two cases (run with --filter); shard 1 never reported (its job was
    # cancelled).
    write_results(run_dir / "results" / "c2-standard-16-0.json", results(*_records_of(shards[0][:1])))
    base = write_results(tmp_path / "base.json", results(*_records_of(shards[0] + shards[1][:1], 100.0)))
    out = tmp_path / "comparison.json"
    assert main(["compare", "--base", str(base), "--head", str(run_dir), "--output", str(out)]) == 0
    comparison = json.loads(out.read_text())
    assert comparison["missing_shards"] == [{"device_name": "c2-standard-16", "shard_index": 1}]
    rows = {r["id"]: r for r in comparison["rows"]}
    assert len(rows) == 4 and comparison["counts"]["failed"] == 3 and comparison["counts"]["removed"] == 0
    for rc in shards[1]:
        row = rows[rc.id]
        assert (row["verdict"], row["reason"]) == (
            "failed",
            "no result: shard 1 of device c2-standard-16 did not report (its job failed, timed out or "
                      "was cancelled)")
        assert (row["name"], row["device_name"], row["module_name"], row["compile_config"]) == (
            rc.name, "c2-standard-16", rc.module_generation_config.name, "eager")
        assert (row["head_n"], row["head_median"], row["kind"], row["unit"]) == (0, None, "execution", "us")
    in_base = rows[shards[1][0].id]  # the baseline had it: its figures stay on the row
    assert in_base["base_n"] == 30 and in_base["base_median"] == pytest.approx(100.0, rel=0.05)
    assert rows[shards[1][1].id]["base_n"] == 0
    assert rows[shards[0][1].id]["reason"] == ("no result: shard 0 of device c2-standard-16 reported without it "
                                               "(it was run with --filter or --benchmark-id)")
    assert rows[shards[0][0].id]["verdict"] == "similar"
    assert "3 run config(s) of the head run's export have no result" in capsys.readouterr().err
    assert errors("comparison.schema.json", comparison) == []


def test_a_results_file_naming_its_shard_counts_as_reported_and_plain_files_keep_todays_rows(tmp_path):
    from benchtrail.pipeline.report_stages import compare_stage
    from benchtrail.results.schema import ResultsFile

    run_dir, shards = _run_dir_with_export(tmp_path)
    shard0 = results(*_records_of(shards[0]))
    shard0 = ResultsFile(shard0.commit, shard0.dirty, {**shard0.run, "device_name": "c2-standard-16",
                                                       "shard_index": 0}, shard0.environment,
                         shard0.benchmarks)
    write_results(run_dir / "results" / "renamed.json", shard0)  # not <device>-<shard>.json: its run says so
    comparison = json.loads(compare_stage([], [run_dir], tmp_path / "c1.json", None).read_text())
    assert comparison["missing_shards"] == [{"device_name": "c2-standard-16", "shard_index": 1}]
    assert sorted(r["verdict"] for r in comparison["rows"]) == ["failed", "failed", "new", "new"]
    # The pipeline skips a device this machine lacks on purpose: not unreported.
    skipped = compare_stage([], [run_dir], tmp_path / "c2.json", None, skipped_devices=("c2-standard-16",))
    assert json.loads(skipped.read_text())["missing_shards"] == []
    # A plain results file has no export to check against: today's rows, missing_shards null.
    plain = compare_stage([], [run_dir / "results" / "renamed.json"], tmp_path / "c3.json", None)
    assert json.loads(plain.read_text())["missing_shards"] is None
    assert [r["verdict"] for r in json.loads(plain.read_text())["rows"]] == ["new", "new"]


def test_load_comparison_checks_missing_shards_and_reads_older_versions_without_it(tmp_path):
    from benchtrail import jsonio
    from benchtrail.compare.document import load_comparison

    rows = compare([], [results(record("a"))], RULES)
    obj = comparison_to_dict(rows, [], [results(record("a"))], "t.yaml", missing_shards=[])
    assert load_comparison(jsonio.write_json(tmp_path / "ok.json", obj)).missing_shards == []
    older = {k: v for k, v in obj.items() if k != "missing_shards"} | {"schema_version": 4}
    assert "missing_shards" not in load_comparison(jsonio.write_json(tmp_path / "v4.json", older)).document
    bad = jsonio.write_json(tmp_path / "bad.json",
                            {**obj, "missing_shards": [{"device_name": "d", "shard_index": "1"}]})
    with pytest.raises(UserError, match=re.escape(f"comparison {bad}: field 'missing_shards' is [{{'device_name': "
                                                  "'d', 'shard_index': '1'}]; allowed: null or a list of")):
        load_comparison(bad)
