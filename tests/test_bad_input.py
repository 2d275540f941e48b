"""Bad input fails early, names what is wrong, and loses nothing."""

import json
import time

from benchtrail.cli import main
from benchtrail.compare.document import Comparison
from benchtrail.results.io import write_results
from tests.helpers.records import record, results


def test_pipeline_with_nothing_runnable_here_fails_before_creating_a_run(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["pipeline", "--benchmark-presets", "cuda", "--store", str(store)]) == 1
    assert "select nothing this machine can compile or run (it has cpu)" in capsys.readouterr().err
    assert not (store / "runs").exists() and not (store / "commits").exists()


def test_pipeline_checks_thresholds_and_base_commit_before_running(tmp_path, capsys):
    store = tmp_path / "store"
    start = time.monotonic()
    assert main(["pipeline", "--benchmark-presets", "smoke", "--store", str(store),
                 "--thresholds", str(tmp_path / "missing.yaml")]) == 1
    assert "cannot load thresholds file" in capsys.readouterr().err
    assert main(["pipeline", "--benchmark-presets", "smoke", "--store", str(store), "--base-commit",
                 "deadbeef"]) == 1
    assert "--base-commit deadbeef: the store" in capsys.readouterr().err
    assert time.monotonic() - start < 20 and not (store / "runs").exists()


def test_pipeline_checks_the_noise_rerun_setting_before_creating_a_run(tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("BENCHTRAIL_NOISE_RERUN", "off")
    assert main(["pipeline", "--benchmark-presets", "smoke", "--store", str(store)]) == 1
    assert "BENCHTRAIL_NOISE_RERUN='off': allowed: 1" in capsys.readouterr().err
    assert not (store / "runs").exists() and not (store / "commits").exists()


def test_run_refuses_an_existing_output_before_running(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("precious")
    assert main(["run", "--run-configs", "whatever.json", "--device-name", "x", "--output", str(out)]) == 1
    assert out.read_text() == "precious"


def test_compare_never_overwrites_its_input(tmp_path, capsys):
    head = write_results(tmp_path / "head.json", results(record("a")))
    before = head.read_text()
    assert main(["compare", "--head", str(head), "--output", str(head)]) == 1
    assert "already exists; benchtrail never overwrites it" in capsys.readouterr().err
    assert head.read_text() == before


def test_compare_rejects_one_series_in_two_head_files(tmp_path, capsys):
    a = write_results(tmp_path / "a.json", results(record("s")))
    b = write_results(tmp_path / "b.json", results(record("s")))
    assert main(["compare", "--head", str(a), "--head", str(b), "--output", str(tmp_path / "c.json")]) == 1
    assert "is in two head results files" in capsys.readouterr().err


def test_comment_on_a_malformed_comparison_names_the_row_and_field(tmp_path, capsys):
    head = write_results(tmp_path / "head.json", results(record("a")))
    comparison = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(head), "--output", str(comparison)]) == 0
    obj = json.loads(comparison.read_text())
    del obj["rows"][0]["unit"]
    comparison.write_text(json.dumps(obj))
    assert main(["comment", "--comparison", str(comparison), "--output-dir", str(tmp_path / "c")]) == 1
    assert "rows[0]: Row lacks field 'unit'" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_failure_reasons_cannot_break_the_comment_table(tmp_path):
    from benchtrail.compare.comment import render
    from benchtrail.compare.document import comparison_to_dict
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.compare.verdicts import compare

    bad = record("a", [], status="failed")
    bad = type(bad)(**{**bad.__dict__, "reason": "boom | pipe\nsecond line"})
    rows = compare([], [results(bad)], load_thresholds())
    body, _, _ = render(Comparison.of(comparison_to_dict(rows, [], [results(bad)], "t")))
    # its row, in the folded "Failed" section
    (line,) = [x for x in body.splitlines() if x.startswith("| `a.")]
    assert line.count(" | ") == 3 and line.endswith(" | failed [1] |")
    # the reason, once, below the table
    assert "- [1] head failed: boom \\| pipe second line" in body.splitlines()


def test_configure_rejects_an_event_file_that_is_not_an_object(tmp_path, monkeypatch, capsys):
    event = tmp_path / "event.json"
    event.write_text("[1, 2]")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    assert main(["configure"]) == 1
    assert "must be a JSON object, got list" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_file_urls_are_absolute_and_percent_decoded(tmp_path, capsys):
    from benchtrail.store import open_store

    assert main(["pipeline", "--benchmark-presets", "smoke", "--store", "file://relstore/x"]) == 1
    assert "a file URL needs an absolute path" in capsys.readouterr().err
    store = open_store((tmp_path / "a b").as_uri())
    assert store.root == tmp_path / "a b" and (tmp_path / "a b").is_dir()
