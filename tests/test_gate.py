"""``benchtrail gate``: only confirmed regressions that nothing accepts or quarantines fail the CI check."""

import json
import subprocess
import sys

import pytest

from benchtrail import jsonio
from benchtrail.cli import main
from tests.helpers.marked_comparisons import marked_comparison


def _gate(tmp_path, capsys, comparison: dict, *flags: str) -> tuple[int, list[str], str]:
    path = jsonio.write_json(tmp_path / "comparison.json", comparison)
    code = main(["gate", "--comparison", str(path), *flags])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_a_confirmed_regression_fails_with_a_line_naming_it_and_a_summary(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BENCHMARKS_ACCEPT", raising=False)
    comparison = marked_comparison({"slow": "confirmed", "maybe": "unconfirmed"})
    row = next(r for r in comparison["rows"] if r["id"] == "slow")
    assert 20 < row["ci_low"] < 27.4 < row["ci_high"] < 35  # median 109.5 µs → 139.5 µs is +27.4%
    code, lines, _ = _gate(tmp_path, capsys, comparison)
    assert code == 3
    assert lines == [
        "confirmed regression: slow.inference-bs1.c2-standard-16 (c2-standard-16): +27.4% (99% CI "
        f"{row['ci_low']:+.1f}…{row['ci_high']:+.1f}%), median 109.5 µs → 139.5 µs",
        "benchtrail gate: failed: 1 confirmed regression not accepted (accept one with a `benchmarks-accept: "
        "<series name or glob>` trailer); 1 unconfirmed regression not gated; 0 accepted, 0 quarantined",
    ]


def test_unconfirmed_and_not_reached_regressions_never_fail_it(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BENCHMARKS_ACCEPT", raising=False)
    comparison = marked_comparison({"a": "unconfirmed", "b": "unconfirmed"},
                                   b={"recheck": "not-reached",
                                      "reason": "not re-checked: the re-check's time budget of 60 s ran out"})
    code, lines, _ = _gate(tmp_path, capsys, comparison)
    assert code == 0
    assert lines == ["benchtrail gate: passed: no confirmed regression that is not accepted; 2 unconfirmed "
                     "regressions not gated, 1 of them not reached by the time-bounded re-check; 0 accepted, "
                     "0 quarantined"]


@pytest.mark.parametrize("flags, env", [
    (["--accept", "slow.inference-*"], ""),  # a glob over the series name
    ([], " other , slow"),  # BENCHMARKS_ACCEPT, comma-separated, over the series id
    (["--accept", "nothing"], "slow*"),  # both are read
])
def test_a_confirmed_regression_accepted_by_a_glob_passes(tmp_path, capsys, monkeypatch, flags, env):
    monkeypatch.setenv("BENCHMARKS_ACCEPT", env)
    code, lines, _ = _gate(tmp_path, capsys, marked_comparison({"slow": "confirmed"}), *flags)
    assert code == 0
    assert lines == ["benchtrail gate: passed: no confirmed regression that is not accepted; 0 unconfirmed "
                     "regressions not gated; 1 accepted, 0 quarantined"]


def test_accepted_and_quarantined_rows_pass_and_a_confirmed_quarantined_series_too(tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.delenv("BENCHMARKS_ACCEPT", raising=False)
    # "c": an improvement of a quarantined series that the paired re-check found to be a regression
    comparison = marked_comparison({"a": "accepted", "q": "quarantined", "c": "confirmed"},
                                   q={"quarantined": "flaky on c2"}, c={"quarantined": "flaky on c2"})
    code, lines, _ = _gate(tmp_path, capsys, comparison)
    assert code == 0
    assert lines[-1].endswith("0 unconfirmed regressions not gated; 1 accepted, 2 quarantined")


def test_a_bad_comparison_file_is_a_user_error_naming_it(tmp_path, capsys):
    path = tmp_path / "comparison.json"
    path.write_text('{"schema_version": 5, "rows": ')
    assert main(["gate", "--comparison", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"comparison {path} is not valid JSON" in err
    assert main(["gate", "--comparison", str(tmp_path / "missing.json")]) == 1
    assert f"cannot read comparison {tmp_path / 'missing.json'}" in capsys.readouterr().err


def test_gate_never_imports_torch(tmp_path):
    path = jsonio.write_json(tmp_path / "comparison.json", marked_comparison({"slow": "confirmed"}))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "benchtrail.cli.app", "gate",
                           "--comparison",
                           str(path)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert done.returncode == 3, done.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert "benchtrail.compare.gate" in imported and not [m for m in imported if m.split(".")[0] == "torch"]
    assert json.loads(path.read_text())["rows"]  # the file is read as it is
