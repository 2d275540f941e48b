"""``benchtrail compare-backends``: median latency and speedup over eager per compile config, on a
real smoke run (``history_store``) and on the fixed run of tests/data/convert/ (see test_convert.py)."""

import json
from pathlib import Path

import pytest

from benchtrail.interop.backends import check_one_run, compare_backends
from benchtrail.results.io import load_results_paths
from tests.helpers.cli import run_cli

FIXED_RUN = Path(__file__).parent / "data" / "convert" / "run"


def _run(capsys, *args):
    return run_cli(capsys, "compare-backends", *args)


def _row(table: str, model: str, config: str) -> list[str]:
    """The cells of the printed table's row for ``model`` and compile config ``config``."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 9 and cells[0] == model and cells[3] == config:
            return cells
    raise AssertionError(f"no row {model}/{config} in\n{table}")


def test_speedup_on_a_real_smoke_run_is_eager_median_over_inductor_median(history_store, tmp_path, capsys):
    import matplotlib.image

    run_dir = history_store["run_dirs"]["c3"]
    code, out, err = _run(capsys, "--results", str(run_dir), "--output-dir", str(tmp_path))
    assert code == 0, err

    results_file = run_dir / "results" / "c2-standard-16-0.json"
    medians = {b["name"]: b["median"] for b in json.loads(results_file.read_text())["benchmarks"]}
    eager = medians["vrelu3.eager.inference-bs1.c2-standard-16"]
    inductor = medians["vrelu3.inductor.inference-bs1.c2-standard-16"]
    speedup = eager / inductor

    row = _row(out, "vrelu3", "inductor")
    assert row[1:3] == ["inference", "c2-standard-16"]
    assert row[7] == f"{speedup:.2f}×" and row[8] == "ok"
    assert _row(out, "vrelu3", "eager")[7] == "1.00×"
    assert _row(out, "mlp", "eager")[7] == "1.00×"

    rows = compare_backends(load_results_paths([run_dir]))
    by_key = {(r.model, r.compile_config): r for r in rows}
    # no compilation rows
    assert set(by_key) == {("vrelu3", "eager"), ("vrelu3", "inductor"), ("mlp", "eager")}
    assert by_key["vrelu3", "inductor"].speedup == speedup
    assert by_key["vrelu3", "inductor"].median_us == inductor

    png = Path(out.strip().splitlines()[-1])  # the PNG path, last
    assert png.parent == tmp_path and png.name == f"backends-{run_dir.parent.name}-1.png"
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] >= 300 and image.shape[1] >= 600 and image.shape[2] in (3, 4)
    assert image[..., :3].std() > 0.05  # bars drawn, not a blank canvas


def test_failed_mismatch_and_missing_eager_cases_have_no_speedup_and_say_why(tmp_path, capsys):
    code, out, err = _run(capsys, "--results", str(FIXED_RUN), "--output-dir", str(tmp_path))
    assert code == 0, err
    assert _row(out, "vrelu3", "inductor")[7] == f"{122.0 / 26.0:.2f}×"  # eager median / inductor median
    assert _row(out, "vrelu3", "export")[7:] == ["-", "mismatch: max abs error 0.5 > atol 0.001"]
    assert _row(out, "mlp", "eager")[7:] == ["-", "failed: worker exited with code -9"]
    assert "at commit 1234567890ab" in out.splitlines()[0]
    assert Path(out.strip().splitlines()[-1]).is_file()

    rows = compare_backends(load_results_paths([FIXED_RUN]))
    assert [(r.model, r.compile_config, r.speedup) for r in rows] == [
        ("mlp", "eager", None), ("vrelu3", "eager", 1.0), ("vrelu3", "inductor", 122.0 / 26.0),
        ("vrelu3", "export", None)]


def test_an_inductor_case_without_an_ok_eager_case_has_no_speedup(tmp_path):
    obj = json.loads((FIXED_RUN / "results" / "c2-standard-16-0.json").read_text())
    obj["benchmarks"] = [b for b in obj["benchmarks"] if b["compile_config"] != "eager"]
    path = tmp_path / "no-eager.json"
    path.write_text(json.dumps(obj))
    rows = compare_backends(load_results_paths([path]))
    assert [(r.compile_config, r.status, r.speedup) for r in rows] == [("inductor", "ok", None),
                                                                         ("export", "mismatch", None)]


def test_results_of_two_runs_are_refused(tmp_path, capsys):
    obj = json.loads((FIXED_RUN / "results" / "c2-standard-16-0.json").read_text())
    obj["commit"] = "f" * 40
    other = tmp_path / "other.json"
    other.write_text(json.dumps(obj))
    code, out, err = _run(capsys, "--results", str(FIXED_RUN), str(other), "--output-dir", str(tmp_path))
    assert code == 1 and out == ""
    assert "--results: results of more than one run" in err
    assert "commit ffffffffffff" in err and "commit 1234567890ab" in err and str(other) in err
    assert not list(tmp_path.glob("*.png"))


def test_compilation_results_alone_are_refused(tmp_path, capsys):
    code, _, err = _run(capsys, "--results", str(FIXED_RUN / "results" / "compilation-c2-standard-16.json"),
                        "--output-dir", str(tmp_path))
    assert code == 1
    assert "no execution records (kind 'execution')" in err


def test_missing_results_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    code, _, err = _run(capsys, "--results", str(missing), "--output-dir", str(tmp_path))
    assert code == 1
    assert f"cannot read results file {missing}" in err


def test_an_existing_png_is_never_overwritten(tmp_path, capsys):
    assert _run(capsys, "--results", str(FIXED_RUN), "--output-dir", str(tmp_path))[0] == 0
    code, out, err = _run(capsys, "--results", str(FIXED_RUN), "--output-dir", str(tmp_path))
    assert code == 1 and out == ""
    assert "already exists; benchtrail never overwrites it" in err


def test_check_one_run_needs_some_results():
    from benchtrail.errors import UserError

    with pytest.raises(UserError, match="no results files found"):
        check_one_run([("dir", [])])


def test_a_reason_with_brackets_and_a_traceback_shows_its_first_line_verbatim(tmp_path, capsys):
    obj = json.loads((FIXED_RUN / "results" / "c2-standard-16-0.json").read_text())
    failed = next(b for b in obj["benchmarks"] if b["status"] == "failed")
    failed["reason"] = "shape [bold][1, 3][/bold] != [1, 4]\nTraceback (most recent call last):\n  ..."
    path = tmp_path / "results.json"
    path.write_text(json.dumps(obj))
    code, out, err = _run(capsys, "--results", str(path), "--output-dir", str(tmp_path))
    assert code == 0, err
    assert _row(out, "mlp", "eager")[8] == "failed: shape [bold][1, 3][/bold] != [1, 4]"
    assert "Traceback" not in out


def _zero(record: dict) -> None:
    """Make ``record`` an ok case whose samples (and so its median) are all 0."""
    from benchtrail.results.summary import summarize

    record["samples"] = [0.0] * 5
    record.update(summarize(record["samples"]))


@pytest.mark.parametrize("zeroed,rows", [
    ("inductor", {"eager": ("1.00×", "ok"), "inductor": ("-", "ok (median is 0: no speedup)")}),
    ("eager", {"eager": ("-", "ok (median is 0: no speedup)"),
               "inductor": ("-", "ok (eager median is 0: no speedup)")}),
])
def test_a_median_of_0_says_so_instead_of_blaming_the_eager_case(tmp_path, capsys, zeroed, rows):
    obj = json.loads((FIXED_RUN / "results" / "c2-standard-16-0.json").read_text())
    _zero(next(b for b in obj["benchmarks"] if b["name"] == f"vrelu3.{zeroed}.inference-bs1.c2-standard-16"))
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(obj))
    code, out, err = _run(capsys, "--results", str(path), "--output-dir", str(tmp_path))
    assert code == 0, err
    for config, (speedup, status) in rows.items():
        assert _row(out, "vrelu3", config)[7:] == [speedup, status]
    assert "no ok eager case" not in out
    notes = {r.compile_config: r.note for r in compare_backends(load_results_paths([path]))
             if r.model == "vrelu3"}
    assert notes == {c: s.removeprefix("ok (").removesuffix(")") if "(" in s else None for c,
                     (_, s) in rows.items()} \
        | {"export": None}


def test_an_output_dir_that_is_a_file_is_named(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    code, out, err = _run(capsys, "--results", str(FIXED_RUN), "--output-dir", str(afile))
    assert code == 1 and out == ""
    assert f"--output-dir {afile} is a file" in err
