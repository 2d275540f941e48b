"""Every sample edge case of an execution series has a verdict with its reason, never a traceback
(issue 16, part 2), and every metric has a direction (part 3); driven through ``benchtrail compare``
on small hand-made results files. Samples are fixed lists: nothing here depends on chance."""

import dataclasses
import json
import math
import re

import pytest

from benchtrail.cli import main
from benchtrail.compare.comment import render
from benchtrail.compare.document import Comparison, Row
from benchtrail.compare.gate import check
from benchtrail.results.io import load_results, results_to_dict, write_results
from benchtrail.results.schema import METRICS
from tests.helpers.git import commit, git
from tests.helpers.records import record, results, spread
from tests.helpers.schemas import errors

#: series id -> (base samples, head samples, verdict, reason)
EDGE_CASES = {
    "zero-head": (spread(100), [*spread(100)[:-1], 0.0], "not-comparable",
                  "head sample 9 is 0.0 (0 or negative); latency samples must be finite and > 0"),
    "negative-base": ([-1.0, *spread(100)[1:]], spread(100), "not-comparable",
                      "baseline sample 0 is -1.0 (0 or negative); latency samples must be finite and > 0"),
    "all-zero": ([0.0] * 10, [0.0] * 10, "not-comparable",
                 "baseline sample 0 is 0.0 (0 or negative); latency samples must be finite and > 0"),
    "negative-median": ([-5.0] * 6, spread(100), "not-comparable",
                        "baseline sample 0 is -5.0 (0 or negative); latency samples must be finite and > 0"),
    "four-head": (spread(100), spread(200, n=4), "insufficient-samples",
                  "head has 4 samples; at least 5 on each side are needed"),
    "one-each": ([100.0], [300.0], "insufficient-samples",
                 "baseline has 1 sample; at least 5 on each side are needed"),
    "equal-head": (spread(100), [150.0] * 10, "insufficient-samples",
                   "all 10 head samples are equal (150.0): no spread to judge a change by (a timer's resolution?)"),
    "equal-both": ([100.0] * 8, [100.0] * 8, "insufficient-samples",
                   "all 8 baseline samples are equal (100.0): no spread to judge a change by (a timer's resolution?)"),
    "fine": (spread(100), spread(150), "regressed", None),
}


def _files(tmp_path, cases):
    base = write_results(tmp_path / "base.json",
                         results(*(record(k, b) for k, (b, _, _, _) in cases.items())))
    head = write_results(tmp_path / "head.json",
                         results(*(record(k, h) for k, (_, h, _, _) in cases.items())))
    return base, head


def test_every_execution_edge_case_gets_a_verdict_and_its_reason(tmp_path, capsys):
    base, head = _files(tmp_path, EDGE_CASES)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out)]) == 0
    comparison = json.loads(out.read_text())
    got = {r["id"]: (r["verdict"], r["reason"]) for r in comparison["rows"]}
    assert got == {k: (v, why) for k, (_, _, v, why) in EDGE_CASES.items()}
    assert comparison["counts"]["insufficient-samples"] == 4 and comparison["counts"]["not-comparable"] == 4
    rows = {r["id"]: r for r in comparison["rows"]}
    assert rows["four-head"]["change"] == pytest.approx(100.0)  # shown, never judged
    assert rows["zero-head"]["ci_low"] is None and rows["zero-head"]["p_value"] is None
    assert errors("comparison.schema.json", comparison) == []
    body, _, _ = render(Comparison.of(comparison))
    assert "4 not comparable" in body.splitlines()[0] and "4 insufficient samples" in body.splitlines()[0]
    (ref,) = re.findall(r"^- (\[\d+\]) head has 4 samples; at least 5 on each side are needed$", body, re.M)
    # the row refers to its reason, said once below its table
    assert f"| insufficient-samples {ref} |" in body


def test_insufficient_samples_never_gate(tmp_path, capsys):
    """A 3x slowdown measured with too few or all-equal samples fails neither compare --fail-on nor the gate."""
    cases = {k: EDGE_CASES[k] for k in ("four-head", "one-each", "equal-head", "equal-both")}
    base, head = _files(tmp_path, cases)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out),
                 "--fail-on", "regressed"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["verdict"] for r in rows} == {"insufficient-samples"} and {r["mark"] for r in rows} == {None}
    # even a re-check's mark does not make them gate
    confirmed = [Row.of({**r, "mark": "confirmed"}) for r in rows]
    assert check(confirmed, []).passed and check(confirmed, []).unconfirmed == 0
    assert main(["gate", "--comparison", str(out)]) == 0


def test_compilation_series_keep_todays_rules(tmp_path):
    """Counts and bytes compare exactly and one-sample compile times against the threshold, as before."""
    def comp(sid, metric, unit, samples):
        return record(sid, samples, kind="compilation", metric=metric, unit=unit, name=f"m.{metric}")
    base = write_results(tmp_path / "base.json", results(
        comp("breaks", "graph_breaks", "count", [0.0]), comp("bytes", "artifact_bytes", "bytes", [1000.0]),
        comp("cold", "compile_time_cold_ms", "ms", [1000.0]),
        comp("warm", "compile_time_warm_ms", "ms", [1000.0])))
    head = write_results(tmp_path / "head.json", results(
        comp("breaks", "graph_breaks", "count", [2.0]), comp("bytes", "artifact_bytes", "bytes", [1005.0]),
        comp("cold", "compile_time_cold_ms", "ms", [1600.0]),
        comp("warm", "compile_time_warm_ms", "ms", [1200.0])))
    out = tmp_path / "c.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out)]) == 0
    got = {r["id"]: (r["verdict"], r["change"],
                     r["change_unit"]) for r in json.loads(out.read_text())["rows"]}
    assert got == {"breaks": ("regressed", 2.0, "count"), "bytes": ("similar", pytest.approx(0.5), "%"),
                   "cold": ("regressed", pytest.approx(60.0), "%"),
                   "warm": ("similar", pytest.approx(20.0), "%")}


def test_negative_compilation_values_are_not_comparable_never_improvements(tmp_path):
    """A compile time, count or byte size below 0 is a broken measurement, whichever side holds it."""
    def comp(sid, metric, unit, samples):
        return record(sid, samples, kind="compilation", metric=metric, unit=unit, name=f"m.{metric}")
    base = write_results(tmp_path / "base.json", results(
        comp("cold", "compile_time_cold_ms", "ms", [1000.0]),
        comp("bytes", "artifact_bytes", "bytes", [-3.0]),
        comp("breaks", "graph_breaks", "count", [1.0])))
    head = write_results(tmp_path / "head.json", results(
        comp("cold", "compile_time_cold_ms", "ms", [-5.0]),
        comp("bytes", "artifact_bytes", "bytes", [1000.0]),
        comp("breaks", "graph_breaks", "count", [-1.0])))
    out = tmp_path / "c.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out)]) == 0
    got = {r["id"]: (r["verdict"], r["reason"]) for r in json.loads(out.read_text())["rows"]}
    assert got == {
        "cold": ("not-comparable",
                 "head sample 0 is -5.0 (negative); compile_time_cold_ms samples must be finite "
                                   "and >= 0"),
        "bytes": ("not-comparable",
                  "baseline sample 0 is -3.0 (negative); artifact_bytes samples must be finite "
                                    "and >= 0"),
        "breaks": ("not-comparable",
                   "head sample 0 is -1.0 (negative); graph_breaks samples must be finite and >= 0")}


@pytest.mark.parametrize("field", ["samples", "median"])
def test_a_number_beyond_a_floats_range_is_refused_naming_the_field(tmp_path, capsys, field):
    _base, head = _files(tmp_path, {"fine": EDGE_CASES["fine"]})
    obj = results_to_dict(results(record("fine", spread(100))))
    huge = "9" * 400  # JSON allows it; Python reads an int that no float holds
    text = json.dumps(obj).replace(f"{spread(100)[0]!r}" if field == "samples" else '"median": 100.0',
                                   huge if field == "samples" else f'"median": {huge}', 1)
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["compare", "--base", str(bad), "--head", str(head), "--output",
                 str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    expected = "BenchmarkRecord.samples[0]" if field == "samples" else "BenchmarkRecord.median"
    assert f"results file {bad}" in err and (f"{expected}: 99999999999999999999... (400 digits) is beyond a "
                                             "float's range") in err
    assert "Traceback" not in err and not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("token, field, shown", [
    ("NaN", "samples[2]", "nan"), ("Infinity", "samples[2]", "inf"), ("-Infinity", "samples[2]", "-inf"),
    ("null", "samples[2]", "null (a NaN or infinity written as null)")])
def test_a_file_the_user_passes_with_a_non_finite_sample_is_refused_naming_file_and_field(tmp_path, capsys,
                                                                                          token, field,
                                                                                          shown):
    base, head = _files(tmp_path, {"fine": EDGE_CASES["fine"]})
    text = json.dumps(results_to_dict(results(record("fine", spread(150)))), indent=1)
    bad = tmp_path / "bad.json"
    bad.write_text(text.replace(f"{spread(150)[2]!r}", token, 1))
    for args in (["--base", str(bad), "--head", str(head)], ["--base", str(base), "--head", str(bad)]):
        out = tmp_path / f"c{len(list(tmp_path.iterdir()))}.json"
        assert main(["compare", *args, "--output", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"results file {bad}: benchmark 'fine.inference-bs1.c2-standard-16'" in err
        assert f"field {field} is {shown}" in err and "allowed: finite numbers" in err
        assert not out.exists()


def test_a_nan_median_the_user_passes_is_refused(tmp_path, capsys):
    _, head = _files(tmp_path, {"fine": EDGE_CASES["fine"]})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(results_to_dict(results(record("fine", spread(100))))).replace(
        '"median": 100.0', '"median": NaN'))
    assert main(["compare", "--base", str(bad), "--head", str(head), "--output",
                 str(tmp_path / "c.json")]) == 1
    assert "median is nan but the samples give 100.0" in capsys.readouterr().err


def _stored_baseline_with(tmp_path, repo, monkeypatch, mutate):
    """Upload a good baseline run with a pointer, then spoil its stored results file with ``mutate`` (text ->
    text); compare a head run against the store. Returns the comparison."""
    base_sha = git(repo, "rev-parse", "main", isolated=True)
    git(repo, "checkout", "-q", "-b", "pr", isolated=True)
    head_sha = commit(repo, "pr change")
    cases = dict.fromkeys(("rc1", "rc2", "rc3"), EDGE_CASES["fine"])
    run = tmp_path / "base"
    write_results(run / "results" / "c2-standard-16-0.json",
                  results(*(record(k, b) for k, (b, _, _, _) in cases.items()), commit=base_sha))
    store = tmp_path / "store"
    assert main(["upload", "--run-dir", str(run), "--store", str(store), "--run-id", "111", "--attempt", "1",
                 "--write-pointer"]) == 0
    (stored,) = (store / "runs").rglob("c2-standard-16-0.json")
    stored.chmod(0o644)
    stored.write_text(mutate(stored.read_text()))
    head = tmp_path / "head"
    write_results(head / "results" / "c2-standard-16-0.json",
                  results(*(record(k, h) for k, (_, h, _, _) in cases.items()), commit=head_sha))
    monkeypatch.chdir(repo)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(head), "--store", str(store), "--output", str(out)]) == 0
    return json.loads(out.read_text())


def _spoil(text):
    """rc1's third sample NaN (a token), rc2's null (as jsonio writes NaN), rc3 untouched."""
    obj = json.loads(text)
    b = {r["id"]: r for r in obj["benchmarks"]}
    b["rc1"]["samples"][2] = math.nan
    b["rc2"]["samples"][0] = None
    b["rc2"]["median"] = None
    return json.dumps(obj)


NOT_FINITE = "(not a finite number); latency samples must be finite and > 0"


def test_bad_values_in_a_stored_baseline_become_rows_with_a_reason(repo, tmp_path, monkeypatch):
    comparison = _stored_baseline_with(tmp_path, repo, monkeypatch, _spoil)
    got = {r["id"]: (r["verdict"], r["reason"]) for r in comparison["rows"]}
    assert got == {
        "rc1": ("not-comparable", f"baseline sample 2 is nan {NOT_FINITE}"),
        "rc2": ("not-comparable", f"baseline sample 0 is nan {NOT_FINITE}"),
        "rc3": ("regressed", None)}
    assert errors("comparison.schema.json", comparison) == []


def test_a_stored_version_1_baseline_without_directions_is_compared(repo, tmp_path, monkeypatch):
    """Results written before directions (schema 1, as an older A/B worker or pipeline writes them) are read."""
    def as_v1(text):
        obj = json.loads(text)
        for r in obj["benchmarks"]:
            del r["direction"]
        return json.dumps({**obj, "schema_version": 1})
    comparison = _stored_baseline_with(tmp_path, repo, monkeypatch, as_v1)
    assert [(r["verdict"], r["threshold"]["direction"]) for r in comparison["rows"]] == [
        ("regressed", "lower-is-better")] * 3


def test_metric_table_and_the_directions_written_and_read(tmp_path):
    assert {m: v.direction for m, v in METRICS.items() if m in ("latency", "throughput", "speedup")} == {
        "latency": "lower-is-better", "throughput": "higher-is-better", "speedup": "higher-is-better"}
    assert {v.direction for v in METRICS.values() if v.unit in ("count", "bytes")} == {"lower-is-better"}
    h = "0" * 64
    recs = [record("lat", [1.0], content_hash=h),
            record("tp", [2.0], metric="throughput", unit="per_s", content_hash=h),
            record("su", [1.5], metric="speedup", unit="ratio", content_hash=h),
            dataclasses.replace(record("gb", [0.0], kind="compilation", metric="graph_breaks", unit="count",
                                       content_hash=h), task=None)]
    loaded = load_results(write_results(tmp_path / "r.json", results(*recs)))
    assert [b.direction for b in loaded.benchmarks] == ["lower-is-better", "higher-is-better",
                                                        "higher-is-better",
                                                        "lower-is-better"]
    records = errors("results.schema.json", json.loads((tmp_path / "r.json").read_text()))
    assert [e for e in records if e.lstrip().startswith("$.benchmarks")] == []


def _write_obj(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


@pytest.mark.parametrize("version", [1, 2])
def test_a_metric_without_a_known_direction_is_refused(tmp_path, capsys, version):
    obj = results_to_dict(results(record("a", spread(100)), record("b", spread(100))))
    obj["schema_version"] = version
    obj["benchmarks"][1]["metric"] = "energy_j"
    if version == 1:
        for r in obj["benchmarks"]:
            del r["direction"]
    bad = _write_obj(tmp_path, "bad.json", obj)
    good = write_results(tmp_path / "good.json", results(record("a", spread(100))))
    assert main(["compare", "--base", str(good), "--head", str(bad), "--output",
                 str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    assert f"results file {bad}: benchmark 'b.inference-bs1.c2-standard-16' has metric 'energy_j', which has no " \
           "known direction; allowed: latency, throughput, speedup, instructions, compile_time_cold_ms" in err


@pytest.mark.parametrize("direction, message", [
    ("higher-is-better", "has direction 'higher-is-better', but metric 'latency' is lower-is-better"),
    ("sideways", "has direction 'sideways'; allowed: lower-is-better, higher-is-better")])
def test_a_direction_other_than_the_metrics_is_refused(tmp_path, capsys, direction, message):
    obj = results_to_dict(results(record("a", spread(100))))
    obj["benchmarks"][0]["direction"] = direction
    bad = _write_obj(tmp_path, "bad.json", obj)
    assert main(["compare", "--head", str(bad), "--output", str(tmp_path / "c.json")]) == 1
    assert f"results file {bad}: benchmark 'a.inference-bs1.c2-standard-16' {message}" in capsys.readouterr().err


def test_a_version_2_record_without_direction_is_refused(tmp_path, capsys):
    obj = results_to_dict(results(record("a", spread(100))))
    del obj["benchmarks"][0]["direction"]
    bad = _write_obj(tmp_path, "bad.json", obj)
    assert main(["compare", "--head", str(bad), "--output", str(tmp_path / "c.json")]) == 1
    assert "BenchmarkRecord lacks field 'direction'" in capsys.readouterr().err


THRESHOLDS = "schema_version: 1\nthresholds:\n{}"


@pytest.mark.parametrize("rules, where, message", [
    ("  - {match: 'compilation/graph_count/*', unit: absolute, threshold: 0, direction: higher-is-better}\n"
     "  - {match: '*', unit: percent, threshold: 5}\n",
     "load", "rule 0: direction higher-is-better contradicts metric 'graph_count', which is lower-is-better"),
    ("  - {match: 'execution/*', unit: percent, threshold: 5, direction: lower-is-better}\n",
     "match", "thresholds rule 0 ('execution/*') says lower-is-better, but series "
              "'execution/throughput/tp.inference-bs1.c2-standard-16' is higher-is-better"),
    ("  - {match: '*', unit: percent, threshold: 5}\n"
     "  - {match: 'execution/*', unit: percent, threshold: 5, direction: higher-is-better}\n", "ok", None),
])
def test_a_thresholds_rule_can_only_narrow_the_direction(tmp_path, capsys, rules, where, message):
    path = tmp_path / "t.yaml"
    path.write_text(THRESHOLDS.format(rules))
    base = write_results(tmp_path / "base.json", results(record("tp", spread(100), metric="throughput",
                                                                unit="per_s"),
                                                         record("lat", spread(100))))
    head = write_results(tmp_path / "head.json", results(record("tp", spread(80), metric="throughput",
                                                                unit="per_s"),
                                                         record("lat", spread(80))))
    out = tmp_path / "c.json"
    code = main(["compare", "--base", str(base), "--head", str(head), "--output", str(out), "--thresholds",
                 str(path)])
    if message is None:
        assert code == 0
        rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
        assert (rows["tp"]["verdict"], rows["tp"]["threshold"]["direction"]) == ("regressed",
                                                                                 "higher-is-better")
        assert (rows["lat"]["verdict"], rows["lat"]["threshold"]["direction"]) == ("improved",
                                                                                   "lower-is-better")
    else:
        assert code == 1 and message in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("change, message", [
    ({"metric": "throughput", "direction": "higher-is-better"},
     "has kind 'execution' and unit 'us', but metric 'throughput' is execution in 'per_s'"),
    ({"kind": "compilation"},
     "has kind 'compilation' and unit 'us', but metric 'latency' is execution in 'us'"),
    ({"unit": "ms"}, "has kind 'execution' and unit 'ms', but metric 'latency' is execution in 'us'")])
def test_a_record_whose_kind_or_unit_is_not_its_metrics_is_refused(tmp_path, capsys, change, message):
    _, head = _files(tmp_path, {"fine": EDGE_CASES["fine"]})
    obj = results_to_dict(results(record("fine", spread(100))))
    obj["benchmarks"][0].update(change)
    bad = _write_obj(tmp_path, "bad.json", obj)
    assert main(["compare", "--base", str(bad), "--head", str(head), "--output",
                 str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    assert f"results file {bad}: benchmark 'fine.inference-bs1.c2-standard-16' {message}" in err
    assert "allowed: its metric's" in err and not (tmp_path / "c.json").exists()
