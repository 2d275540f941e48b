import json
import math
import re
from pathlib import Path

import pytest

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.results.io import load_results, results_to_dict, write_documents, write_results
from tests.helpers.records import record, results

DATA = Path(__file__).parent / "data"


def _write(tmp_path, obj, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_results_round_trip_to_equal_dataclasses(tmp_path):
    original = results(record("a", [1.0, 2.0, 3.0]), record("b", [], status="failed"))
    path = write_results(tmp_path / "r.json", original)
    assert load_results(path) == original
    text = path.read_text()
    assert text.endswith("\n") and '"schema_version": 2' in text and '"direction": "lower-is-better"' in text


def test_results_file_is_never_overwritten(tmp_path):
    path = write_results(tmp_path / "r.json", results(record("a")))
    with pytest.raises(UserError, match="already exists"):
        write_results(path, results(record("b")))
    assert load_results(path).benchmarks[0].id == "a"


def test_written_files_get_the_mode_open_would_give_them_not_mkstemps_0600(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        text = jsonio.write_text_atomic(tmp_path / "a.md", "x")
        png = jsonio.write_bytes_atomic(tmp_path / "b.png", b"\x89PNG", exclusive=True)
    finally:
        os.umask(old)
    assert (text.stat().st_mode & 0o777, png.stat().st_mode & 0o777) == (0o644, 0o644)
    assert (text.read_text(), png.read_bytes()) == ("x", b"\x89PNG")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.png"]  # no temp file left


def test_truncated_results_file_is_a_clear_error(tmp_path):
    full = json.dumps(results_to_dict(results(record("a"))))
    path = tmp_path / "r.json"
    path.write_text(full[: len(full) // 2])
    with pytest.raises(UserError, match=r"r\.json is not valid JSON \(truncated or corrupt\?\)"):
        load_results(path)


def test_newer_schema_version_asks_to_upgrade(tmp_path):
    obj = results_to_dict(results(record("a")))
    obj["schema_version"] = 99
    with pytest.raises(UserError, match=r"schema_version 99.*reads versions 1..2; upgrade benchtrail"):
        load_results(_write(tmp_path, obj))


def test_missing_field_names_the_field(tmp_path):
    obj = results_to_dict(results(record("a")))
    del obj["benchmarks"][0]["median"]
    with pytest.raises(UserError, match="BenchmarkRecord lacks field 'median'"):
        load_results(_write(tmp_path, obj))


def test_unknown_field_names_the_field_and_the_allowed_ones(tmp_path):
    obj = results_to_dict(results(record("a")))
    obj["benchmarks"][0]["medain"] = 1.0
    with pytest.raises(UserError, match=r"unknown field\(s\) \['medain'\]; allowed: \['compile_config'"):
        load_results(_write(tmp_path, obj))


def test_two_benchmarks_with_one_id_are_rejected(tmp_path):
    obj = results_to_dict(results(record("a", name="first"), record("b", name="second")))
    obj["benchmarks"][1]["id"] = "a"
    with pytest.raises(UserError, match="two benchmarks have id a \\('first' and 'second'\\)"):
        load_results(_write(tmp_path, obj))


def test_unknown_status_lists_allowed_statuses(tmp_path):
    obj = results_to_dict(results(record("a")))
    obj["benchmarks"][0]["status"] = "great"
    with pytest.raises(UserError,
                       match="status 'great'; allowed: ok, failed, timeout, oom, mismatch, skipped"):
        load_results(_write(tmp_path, obj))


def test_nan_median_is_written_as_null_and_rejected_as_inconsistent_with_the_samples(tmp_path):
    obj = results_to_dict(results(record("a", [1.0])))
    obj["benchmarks"][0]["median"] = math.nan
    jsonio.write_json(tmp_path / "r.json", obj)
    assert '"median": null' in (tmp_path / "r.json").read_text()
    with pytest.raises(UserError, match=r"median is None but the samples give 1.0"):
        load_results(tmp_path / "r.json")


def test_summary_that_disagrees_with_the_samples_is_rejected(tmp_path):
    obj = results_to_dict(results(record("a", [1.0, 2.0, 3.0])))
    obj["benchmarks"][0]["n"] = 5
    with pytest.raises(UserError, match="n is 5 but there are 3 samples"):
        load_results(_write(tmp_path, obj))
    obj["benchmarks"][0].update(n=3, unit="parsec")
    with pytest.raises(UserError, match="unit 'parsec'; allowed: us, ms, count, bytes"):
        load_results(_write(tmp_path, obj, "r2.json"))


def test_version_1_sample_file_keeps_loading_with_the_direction_of_its_metric():
    assert "direction" not in (DATA / "results-v1.json").read_text()
    loaded = load_results(DATA / "results-v1.json")
    assert [b.status for b in loaded.benchmarks] == ["ok", "failed"]
    assert loaded.benchmarks[0].median == pytest.approx(171.5)
    assert [b.direction for b in loaded.benchmarks] == ["lower-is-better", "lower-is-better"]


def test_flattened_documents_have_dotted_keys_and_safe_names(tmp_path):
    paths = write_documents(tmp_path, results(record("a", [1.0, 3.0], phase_times_ms={"run": 5.0})))
    (path,) = paths
    assert path.name.startswith("bench_a.inference-bs1.c2-standard-16_") and path.name.endswith(".json")
    doc = json.loads(path.read_text())
    assert doc["environment.torch_version"] == "2.13.0"
    assert doc["details.phase_times_ms.run"] == 5.0
    assert doc["samples"] == [1.0, 3.0] and doc["median"] == 2.0 and doc["schema_version"] == 2
    assert doc["direction"] == "lower-is-better"


@pytest.mark.parametrize("preset", ["../../evil2", "smoke ✓ <b>x</b>", "a/b", "a..b", ""])
def test_a_preset_name_that_is_not_a_safe_file_name_is_refused_naming_file_field_and_value(tmp_path, preset):
    obj = results_to_dict(results(record("a")))
    obj["benchmarks"][0]["presets"] = ["x86_64", preset]
    path = _write(tmp_path, obj)
    with pytest.raises(UserError) as caught:
        load_results(path)
    assert str(caught.value) == (f"results file {path}: benchmark 'a.inference-bs1.c2-standard-16' field presets has "
                                 f"{preset!r}; allowed: preset names of letters, digits, '.', '_' and '-', starting "
                                 "with a letter or digit, without '..' (regex ^[A-Za-z0-9][A-Za-z0-9._-]*$)")
    obj = results_to_dict(results(record("a")))
    obj["run"]["presets"] = [preset]
    with pytest.raises(UserError,
                       match=rf"field run\.presets is \[{re.escape(repr(preset))}\]; allowed: a list of"):
        load_results(_write(tmp_path, obj, "run.json"))


@pytest.mark.parametrize("text", ['[{"name": "x", "unit": "us", "value": 1.0}]', '{"benchmarks": []}'])
def test_json_of_another_tool_is_not_a_benchtrail_results_file(tmp_path, text):
    path = tmp_path / "gab.json"
    path.write_text(text)
    with pytest.raises(UserError,
                       match=rf"^{re.escape(str(path))} is not a benchtrail results file \(no "
                       r"schema_version\)"):
        load_results(path)


def test_invalid_json_message_says_at_once(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"trunc\n')
    with pytest.raises(UserError) as caught:
        load_results(path)
    assert str(caught.value) == (f"results file {path} is not valid JSON (truncated or corrupt?): "
                                 "Invalid control character at line 1 column 8")
