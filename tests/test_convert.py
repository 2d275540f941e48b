"""``benchtrail convert``: github-action-benchmark (gab) and Bencher Metric Format (bmf) output.

The input, ``tests/data/convert/run/results/`` (one run: ``c2-standard-16-0.json`` with 4 execution
records, ``compilation-c2-standard-16.json`` with 5 compilation records), was written once with
``benchtrail.results.io.write_results`` from hand-picked samples whose medians and quartiles are
easy to check: vrelu3 eager 120, 121, 122, 123.5, 124 µs (median 122, p25 121, p75 123.5), vrelu3
inductor 25, 25.5, 26, 26.5, 40 µs (median 26, p25 25.5, p75 26.5), warm compile time 1200, 1100 ms
(median 1150, p25 1125, p75 1175); one mismatch, two failed records.

``expected-gab.json`` and ``expected-bmf.json`` were produced once with
``benchtrail convert --to gab|bmf --results tests/data/convert/run --output tests/data/convert/expected-<fmt>.json``
and checked by hand against those numbers (gab: values in the records' units, range ± IQR/2; bmf:
latency in ns = µs × 1000, lower/upper = p25/p75) before being checked in.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.results.io import load_results_paths

DATA = Path(__file__).parent / "data" / "convert"
RUN = DATA / "run"
LEFT_OUT = {"vrelu3.export.inference-bs1.c2-standard-16": "mismatch",
            "mlp.eager.inference-bs1.c2-standard-16": "failed",
            "sqrl.inductor.cpu.graph_count": "failed"}


def _convert(tmp_path, capsys, *args):
    out = tmp_path / "out.json"
    code = main(["convert", *args, "--output", str(out)])
    captured = capsys.readouterr()
    return code, out, captured


@pytest.mark.parametrize("fmt", ["gab", "bmf"])
def test_output_equals_the_checked_in_file_and_lists_left_out_records_on_stderr(tmp_path, capsys, fmt):
    code, out, captured = _convert(tmp_path, capsys, "--to", fmt, "--results", str(RUN))
    assert code == 0, captured.err
    assert out.read_text(encoding="utf-8") == (DATA / f"expected-{fmt}.json").read_text(encoding="utf-8")
    assert captured.out.strip().splitlines()[-1] == str(out)  # the path last
    assert "6 series written" in captured.out
    assert "left out 3 record(s) that are not ok" in captured.err
    for name, status in LEFT_OUT.items():
        assert f"{name} ({status}: " in captured.err


def test_gab_values_are_medians_in_the_record_unit_and_range_parses_as_half_the_iqr(tmp_path, capsys):
    code, out, _ = _convert(tmp_path, capsys, "--to", "gab", "--results", str(RUN))
    assert code == 0
    records = {b.name: b for f in load_results_paths([RUN]) for b in f.benchmarks}
    entries = json.loads(out.read_text(encoding="utf-8"))
    assert [e["name"] for e in entries] == sorted(n for n, b in records.items() if b.status == "ok")
    for e in entries:
        b = records[e["name"]]
        assert (e["value"], e["unit"]) == (b.median, b.unit)
        if b.n >= 2:
            # github-action-benchmark's src/extractRangeInfo.ts: /(\+-|±)\s*(\d.+)/ then Number(...)
            match = re.match(r"(\+-|±)\s*(\d.+)", e["range"])
            assert match and float(match.group(2)) == pytest.approx(b.iqr / 2, rel=1e-5)
        else:
            assert "range" not in e
        assert f"samples: {b.n}\n" in e["extra"]
    assert {e["name"]: e["value"] for e in entries}["vrelu3.eager.inference-bs1.c2-standard-16"] == 122.0


def test_bmf_latency_is_the_median_in_nanoseconds_with_quartiles_as_bounds(tmp_path, capsys):
    code, out, _ = _convert(tmp_path, capsys, "--to", "bmf", "--results", str(RUN))
    assert code == 0
    bmf = json.loads(out.read_text(encoding="utf-8"))
    assert bmf["vrelu3.eager.inference-bs1.c2-standard-16"] == {
        "latency": {"value": 122000.0, "lower_value": 121000.0, "upper_value": 123500.0}}
    assert bmf["vrelu3.inductor.inference-bs1.c2-standard-16"]["latency"]["value"] == 26000.0
    compile_stats = bmf["vrelu3.inductor.cpu"]
    assert compile_stats["compile-time-warm-ms"] == {"value": 1150.0, "lower_value": 1125.0,
                                                     "upper_value": 1175.0}
    assert compile_stats["compile-time-cold-ms"] == {"value": 9890.5}  # one sample: no bounds
    assert compile_stats["artifact-bytes"] == {"value": 340682.0}
    for name in LEFT_OUT:
        assert name not in bmf
    assert "sqrl.inductor.cpu" not in bmf


def test_kind_execution_leaves_compilation_metrics_out(tmp_path, capsys):
    code, out, captured = _convert(tmp_path, capsys, "--to", "bmf", "--kind", "execution", "--results",
                                   str(RUN))
    assert code == 0, captured.err
    assert sorted(json.loads(out.read_text(encoding="utf-8"))) == [
        "vrelu3.eager.inference-bs1.c2-standard-16", "vrelu3.inductor.inference-bs1.c2-standard-16"]
    assert "sqrl.inductor.cpu.graph_count" not in captured.err  # not asked for, so not "left out"


def test_results_files_may_be_given_one_by_one(tmp_path, capsys):
    files = sorted((RUN / "results").glob("*.json"))
    code, out, _ = _convert(tmp_path, capsys, "--to", "gab", "--results", *map(str, files))
    assert code == 0
    assert out.read_text(encoding="utf-8") == (DATA / "expected-gab.json").read_text(encoding="utf-8")


def test_unknown_format_names_the_value_and_the_allowed_ones(tmp_path, capsys):
    code, out, captured = _convert(tmp_path, capsys, "--to", "bfm", "--results", str(RUN))
    assert code == 1
    assert "--to 'bfm' is not a known format; allowed: gab, bmf" in captured.err
    assert "Did you mean 'bmf'?" in captured.err
    assert not out.exists()


def test_unknown_kind_is_an_error(tmp_path, capsys):
    code, _, captured = _convert(tmp_path, capsys, "--to", "gab", "--kind", "latency", "--results", str(RUN))
    assert code == 1
    assert "--kind 'latency' is not known; allowed: all, execution, compilation" in captured.err


def test_a_folder_without_results_is_an_error(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, captured = _convert(tmp_path, capsys, "--to", "gab", "--results", str(empty))
    assert code == 1
    assert f"no results files (*.json) in {empty}" in captured.err
    assert not out.exists()


def test_a_truncated_results_file_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text((RUN / "results" / "c2-standard-16-0.json").read_text()[:200])
    code, _, captured = _convert(tmp_path, capsys, "--to", "bmf", "--results", str(bad))
    assert code == 1
    assert f"results file {bad} is not valid JSON" in captured.err


def test_a_bad_status_names_the_file_field_value_and_allowed_values(tmp_path, capsys):
    obj = json.loads((RUN / "results" / "c2-standard-16-0.json").read_text())
    obj["benchmarks"][0]["status"] = "great"
    bad = tmp_path / "bad-status.json"
    bad.write_text(json.dumps(obj))
    code, _, captured = _convert(tmp_path, capsys, "--to", "gab", "--results", str(bad))
    assert code == 1
    assert f"results file {bad}: benchmark 'vrelu3.eager.inference-bs1.c2-standard-16' has status 'great'; " \
           "allowed: ok, failed" in captured.err


def test_results_of_two_runs_are_refused(tmp_path, capsys):
    other = tmp_path / "other-run"
    shutil.copytree(RUN, other)
    path = other / "results" / "c2-standard-16-0.json"
    obj = json.loads(path.read_text())
    obj["run"]["run_id"] = "local-20261202T000000Z-0000beef"
    path.write_text(json.dumps(obj))
    code, out, captured = _convert(tmp_path, capsys, "--to", "gab", "--results", str(RUN), str(path))
    assert code == 1
    assert "--results: results of more than one run" in captured.err
    assert "local-20261202T000000Z-0000beef/1" in captured.err and str(path) in captured.err
    assert not out.exists()


def test_nothing_ok_to_convert_is_an_error_naming_what_was_left_out(tmp_path, capsys):
    code, out, captured = _convert(tmp_path, capsys, "--to", "gab", "--kind", "execution", "--results",
                                   str(RUN / "results" / "compilation-c2-standard-16.json"))
    assert code == 1
    assert "no ok execution records to convert" in captured.err
    obj = json.loads((RUN / "results" / "c2-standard-16-0.json").read_text())
    obj["benchmarks"] = [b for b in obj["benchmarks"] if b["status"] != "ok"]
    failed_only = tmp_path / "failed.json"
    failed_only.write_text(json.dumps(obj))
    code, out, captured = _convert(tmp_path, capsys, "--to", "bmf", "--results", str(failed_only))
    assert code == 1
    assert "mlp.eager.inference-bs1.c2-standard-16 (failed)" in captured.err
    assert not out.exists()


def test_an_existing_output_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "out.json"
    out.write_text("keep")
    assert main(["convert", "--to", "gab", "--results", str(RUN), "--output", str(out)]) == 1
    assert "already exists; benchtrail never overwrites it" in capsys.readouterr().err
    assert out.read_text() == "keep"


def test_an_empty_output_path_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["convert", "--to", "gab", "--results", str(RUN), "--output", ""])
    assert exited.value.code == 1
    assert "argument --output: empty path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_file_of_another_tool_is_named_as_not_a_benchtrail_results_file(tmp_path, capsys):
    code, gab, _ = _convert(tmp_path, capsys, "--to", "gab", "--results", str(RUN))
    assert code == 0
    code, _out, captured = _convert(tmp_path / "again", capsys, "--to", "bmf", "--results", str(gab))
    assert code == 1
    assert f"{gab} is not a benchtrail results file (no schema_version)" in captured.err


def test_bmf_gives_an_instruction_count_as_its_benchmarks_own_measure(tmp_path, capsys):
    from benchtrail.results.summary import summarize

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (path,) = sorted((run / "results").glob("c2-*.json"))
    doc = json.loads(path.read_text(encoding="utf-8"))
    (eager,) = [r for r in doc["benchmarks"] if r["name"] == "vrelu3.eager.inference-bs1.c2-standard-16"]
    samples = [3558966.0, 3559123.0, 3559047.0, 3559067.0, 3558932.0]
    counted = {**eager, "id": f"{eager['id']}-instructions", "name": f"{eager['name']}.instructions",
               "metric": "instructions", "unit": "count", "samples": samples, **summarize(tuple(samples))}
    path.with_name(f"{path.stem}.instructions.json").write_text(
        json.dumps({**doc, "run": {**doc["run"], "metric": "instructions"}, "benchmarks": [counted]}))
    code, out, _ = _convert(tmp_path, capsys, "--to", "bmf", "--results", str(run))
    assert code == 0
    assert json.loads(out.read_text(encoding="utf-8"))["vrelu3.eager.inference-bs1.c2-standard-16"] == {
        "latency": {"value": 122000.0, "lower_value": 121000.0, "upper_value": 123500.0},
        "instructions": {"value": 3559047.0, "lower_value": 3558966.0, "upper_value": 3559067.0}}
