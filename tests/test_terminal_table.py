"""The comparison as ``compare``, ``pipeline`` and ``ab`` print it in the terminal (``benchtrail.compare.terminal``)."""

import dataclasses
import json

import pytest

from benchtrail.cli import main
from benchtrail.compare.document import VERDICTS, Comparison, Row, count_rows
from benchtrail.compare.terminal import render_table
from benchtrail.results.io import write_results
from tests.helpers.records import record, results, spread

DEVICE = "c2-standard-16"


def _comparison(document: dict) -> Comparison:
    return Comparison(document, tuple(document["rows"]))


def _row(name: str, verdict: str, base: float | None, head: float | None, change: float | None = None,
         ci: tuple[float, float] | None = None, *, unit: str = "us", change_unit: str | None = "%",
         mark: str | None = None, kind: str = "execution", metric: str = "latency", mde: float | None = None,
         noisy: bool | None = None) -> Row:
    return Row(id=name.split(".")[0], name=f"{name}.{DEVICE}", kind=kind, metric=metric, unit=unit,
               device_name=DEVICE,
               module_name=f"{name.split('.')[0]}.cpu", compile_config="inductor", verdict=verdict,
               reason="boom" if verdict == "failed" else None, base_median=base, head_median=head,
               base_iqr=base and base / 40, head_iqr=head and head / 5, base_n=0 if base is None else 10,
               head_n=0 if head is None else 10,
               change=change, change_unit=change_unit if change is not None else None, p_value=None,
               threshold=None, head_details={}, base_details={}, ci_low=ci[0] if ci else None,
               ci_high=ci[1] if ci else None, mark=mark, mde=mde, noisy=noisy)


ROWS = (
    _row("bert.eager.inference-bs8", "improved", 1_250_000.0, 1_100_000.0, -12.0, (-13.2, -10.9)),
    _row("resnet50.inductor.inference-bs1", "similar", 812.3, 815.0, 0.3, (-0.4, +1.0)),
    _row("a-model-whose-name-is-far-too-long-for-eighty-columns.max-autotune.train-bs64", "regressed",
         812.3, 832.6, 2.5, (1.1, 4.0), mark="unconfirmed"),
    _row("vit.inductor.inference-bs1", "inconclusive", 5_000.0, 5_400.0, 8.0, (-3.0, 19.0), mde=11.0,
         noisy=True),
    _row("resnet50.inductor.train-bs32", "regressed", 21_400.0, 22_962.2, 7.3, (5.1, 9.4), mark="confirmed"),
    _row("unet.eager.inference-bs1", "failed", 300.0, None),
    _row("llama.eager.inference-bs1", "new", None, 42.0),
    _row("bert.inductor.cpu.graph_breaks", "improved", 3.0, 1.0, -2.0, unit="count", change_unit="count",
         kind="compilation", metric="graph_breaks"),
)
COMPARISON = _comparison({
    "schema_version": 8, "head": {"commit": "3f2a9c1e" * 5, "dirty": False},
    "base": {"commit": "8e1d0b2a" * 5},
    "baseline": None, "thresholds_source": "default", "counts": count_rows(ROWS), "rows": ROWS,
    "missing_shards": None})

EXPECTED = """\
benchtrail: head 3f2a9c1e3f vs base 8e1d0b2a8e · c2-standard-16
benchmark                    verdict      change      interval      base   IQR      head  IQR      n
resnet50.inductor.train-bs…  regressed     +7.3%    +5.1…+9.4%  21.40 ms  2.5%  22.96 ms  20%  10/10
a-model-whose-name-is-far-…  unconfirmed   +2.5%    +1.1…+4.0%  812.3 µs  2.5%  832.6 µs  20%  10/10
bert.eager.inference-bs8     improved     -12.0%  -13.2…-10.9%   1.250 s  2.5%   1.100 s  20%  10/10
bert.inductor.cpu.graph_br…  improved         -2             —         3  2.5%         1  20%  10/10
llama.eager.inference-bs1    new               —             —         —     —   42.0 µs  20%   —/10
and 1 inconclusive, 1 similar, 1 failed
failed: unet.eager.inference-bs1: boom
inconclusive (1): vit.inductor.inference-bs1 +8.0% · noisy · could detect ≥ 11%: more samples or a …
"""


def test_the_table_lists_regressions_improvements_and_new_rows_with_their_numbers_in_100_columns():
    text = render_table(COMPARISON, colour=False)
    assert text == EXPECTED
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert "\x1b" not in text
    assert [line.split()[1] for line in lines[2:-3]] == ["regressed", "unconfirmed", "improved", "improved",
                                                         "new"]
    # nothing cut: the largest change first in each part
    wide = render_table(COMPARISON, width=200).splitlines()
    assert [line.split()[0] for line in wide[2:-3]] == [
        "resnet50.inductor.train-bs32",
        "a-model-whose-name-is-far-too-long-for-eighty-columns.max-autotune.train-bs64",
        "bert.eager.inference-bs8", "bert.inductor.cpu.graph_breaks", "llama.eager.inference-bs1"]
    every = render_table(COMPARISON, all_rows=True).splitlines()  # all_rows: then the others, no count line
    assert [line.split()[1] for line in every[2:-2]] == [
        "regressed", "unconfirmed", "improved", "improved", "new", "inconclusive", "similar", "failed"]
    assert every[-2].startswith("failed: ")


@pytest.mark.parametrize(("width", "headers"), [
    (50, ["benchmark", "verdict", "change"]), (60, ["benchmark", "verdict", "change", "base", "head"]),
    (80, ["benchmark", "verdict", "change", "interval", "base", "head", "n"]),
    (120, ["benchmark", "verdict", "change", "interval", "base", "IQR", "head", "IQR", "n"])])
def test_no_row_wraps_at_any_width_and_a_narrow_one_leaves_out_the_iqrs_counts_interval_then_medians(width,
                                                                                                     headers):
    lines = render_table(COMPARISON, width=width).splitlines()
    assert all(len(line) <= width for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("benchmark"))
    assert lines[header].split() == headers
    assert len(lines) - header == 1 + 5 + 1 + 2  # the header, 5 rows (none wrapped), the count line, failed,
    # inconclusive


def test_colour_when_asked_for_and_names_are_never_markup():
    coloured = render_table(COMPARISON, width=80, colour=True)
    assert "\x1b[31m" in coloured and "\x1b[32m" in coloured  # regressions red, improvements green
    odd = _comparison({**COMPARISON.document, "rows": [
        _row("[bold]x[/bold].eager.inference-bs1", "regressed", 1.0, 2.0, 100.0, (90.0, 110.0))]})
    assert "[bold]x[/bold].eager.inference-bs1  regressed" in render_table(odd, width=120)


def test_an_empty_comparison_says_so():
    empty = _comparison({**COMPARISON.document, "rows": [], "base": None})
    assert render_table(empty) == "benchtrail: head 3f2a9c1e3f vs no baseline\nno regressions or improvements\n" \
                                  "no series compared\n"
    similar = _comparison({**COMPARISON.document, "rows": [ROWS[1]]})
    assert render_table(similar).splitlines()[1:] == ["no regressions or improvements", "1 similar"]


def _compare_files(tmp_path):
    base = write_results(tmp_path / "base.json",
                         results(record("slow", spread(100.0)), record("same", spread(50.0))))
    head = write_results(tmp_path / "head.json", results(record("slow", spread(130.0)),
                                                         record("same", spread(50.0)),
                                                         commit="b" * 40))
    return ["compare", "--base", str(base), "--head", str(head)]


def test_compare_prints_the_table_then_the_path_and_no_colour_under_no_color(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("FORCE_COLOR", "1")  # as if stdout were a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    out = tmp_path / "c1.json"
    assert main([*_compare_files(tmp_path), "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == str(out)  # the path last, as scripts read it
    assert lines[0] == f"benchtrail: head {'b' * 10} vs base {'a' * 10} · {DEVICE}"
    assert lines[2].split()[:3] == ["slow.inference-bs1", "unconfirmed", "+30.0%"]  # no paired re-check yet
    assert lines[-2] == "and 1 similar"
    assert all(len(line) <= 80 and "\x1b" not in line for line in lines)
    monkeypatch.delenv("NO_COLOR")
    (tmp_path / "again").mkdir()
    assert main([*_compare_files(tmp_path / "again"), "--output", str(tmp_path / "c2.json")]) == 0
    assert "\x1b[31m" in capsys.readouterr().out


def test_compare_json_prints_the_comparison_alone(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main([*_compare_files(tmp_path), "--output", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed == json.loads(out.read_text(encoding="utf-8"))
    assert sorted(r["verdict"] for r in printed["rows"]) == ["regressed", "similar"]
    assert captured.err.strip().splitlines()[-1] == f"benchtrail: wrote {out}"


@pytest.mark.parametrize("command", [["pipeline", "--benchmark-presets", "smoke"],
                                     ["ab", "--recheck", "c.json", "--output-dir", "o"]])
def test_pipeline_and_ab_take_json(command):
    from benchtrail.cli.app import build_parser

    assert build_parser(command[0]).parse_args([*command, "--json"]).json is True
    assert build_parser(command[0]).parse_args(command).json is False


def test_every_verdict_has_a_place():
    """Each verdict is either in the table (regressed, improved) or counted on the count line; failed and
    inconclusive rows are also said under it, failed with their reasons, inconclusive with the effect each
    could have detected. A row of an older version (verdict noisy) is counted as it was."""
    rows = tuple(_row(f"m{i}.eager.inference-bs1", v, 1.0, 1.0, 0.0, mde=4.0) for i, v in enumerate(VERDICTS))
    text = render_table(_comparison({**COMPARISON.document, "rows": rows}), width=200)
    count, failed, undecided = text.splitlines()[-3:]
    assert all(f"1 {v}" in count for v in VERDICTS if v not in ("regressed", "improved", "new"))
    assert failed.startswith("failed: m") and failed.endswith(": boom")
    assert undecided == (f"inconclusive (1): m{VERDICTS.index('inconclusive')}.eager.inference-bs1 +0.0% · could "
                         "detect ≥ 4.0%: more samples or a quieter machine would settle them")
    old = (_row("m0.eager.inference-bs1", "noisy", 1.0, 1.0, 0.0),)
    assert render_table(_comparison({**COMPARISON.document, "schema_version": 7, "rows": old}),
                        width=200).splitlines()[-2:] == [
        "1 noisy",
        "inconclusive (1): m0.eager.inference-bs1 +0.0%: more samples or a quieter machine would settle them"]


def test_a_paired_verdict_shows_the_paired_estimate_as_the_comment_does():
    """A regression the paired re-check confirmed: its stored-baseline figures (-14.4%, 1.00 ms -> 856 µs)
    give way to the paired estimate, with base -> head from the same pairs (compare.tables.estimate)."""
    import dataclasses

    row = dataclasses.replace(_row("resnet18.eager.inference-bs1", "regressed", 1000.0, 856.0, -14.4,
                                   (-16.0, -12.0),
                                   mark="confirmed"),
                              ab={"verdict": "regressed", "change": 6.8, "ci_low": 2.9, "ci_high": 16.7,
                                  "base_median": 900.0, "rounds": 3})
    comparison = _comparison({**COMPARISON.document, "rows": [row], "counts": count_rows([row])})
    (line,) = [line for line in render_table(comparison).splitlines() if line.startswith("resnet18")]
    assert line.split() == ["resnet18.eager.inference-bs1", "regressed", "+6.8%", "+2.9…+16.7%", "900.0",
                            "µs", "—",
                            "961.2", "µs", "—", "10/10"]  # the paired run's medians, not the stored IQRs


def test_runner_checks_that_failed_are_said_under_the_table():
    head = {**COMPARISON.document["head"],
            "runner_checks": [{"device": DEVICE,
                               "failed": [{"name": "load", "value": "3.2", "expected": "< 1"}]}]}
    text = render_table(_comparison({**COMPARISON.document, "head": head}), width=200)
    (line,) = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert line.startswith(f"warning: runner checks failed on {DEVICE}: load") and "3.2" in line and "\\" not in line


def test_names_too_long_for_80_columns_lose_what_they_all_share_said_once_under_the_title():
    """Function benchmarks' names start with their module (``tinyproj.benchmarks.``) and, here, all end with
    ``.eager.inference``: both go, said once in a ``names:`` line, so the function and its parameters stay in
    view; a dot inside the parameters is no boundary; with room enough the names are whole."""
    names = ["tinyproj.benchmarks.gelu[n=256].eager.inference",
             "tinyproj.benchmarks.gelu[n=64].eager.inference",
             "tinyproj.benchmarks.scale[f=0.5].eager.inference",
             "tinyproj.benchmarks.scale[f=0.25].eager.inference"]
    rows = [_row(names[0], "regressed", 117.5, 307.7, 161.9, (150.0, 170.0)),
            _row(names[1], "improved", 50.0, 40.0, -20.0, (-22.0, -18.0)),
            _row(names[2], "similar", 10.0, 10.0, 0.0, (-1.0, 1.0)),
            _row(names[3], "similar", 10.0, 10.0, 0.0, (-1.0, 1.0))]
    lines = render_table(_comparison({**COMPARISON.document, "rows": rows, "counts": count_rows(rows)}),
                         width=80).splitlines()
    assert lines[1] == "names: tinyproj.benchmarks.<benchmark>.eager.inference"
    assert [line.split()[0] for line in lines[3:5]] == ["gelu[n=256]", "gelu[n=64]"]
    wide = render_table(_comparison({**COMPARISON.document, "rows": rows, "counts": count_rows(rows)}),
                        width=160)
    assert [line.split()[0] for line in wide.splitlines()[2:4]] == names[:2]  # room enough: whole names
    scaled = [_row(n, "regressed", 1.0, 2.0, 100.0, (90.0, 110.0)) for n in names[2:]]
    lines = render_table(_comparison({**COMPARISON.document, "rows": scaled,
                                        "counts": count_rows(scaled)}), width=80).splitlines()
    assert [line.split()[0] for line in lines[3:5]] == ["scale[f=0.25]", "scale[f=0.5]"]
    two = [_row(f"tinyproj.benchmarks.attention_block.{c}.inference", "regressed", 1.0, 2.0, 100.0,
                (90.0, 110.0))
           for c in ("eager", "inductor")]  # the function stays in every name
    lines = render_table(_comparison({**COMPARISON.document, "rows": two, "counts": count_rows(two)}),
                         width=80).splitlines()
    assert lines[1] == "names: tinyproj.benchmarks.<benchmark>.inference"
    assert [line.split()[0] for line in lines[3:5]] == ["attention_block.eager", "attention_block.induc…"]


@pytest.mark.parametrize("names, shared", [
    (["tinyproj.benchmarks.attention_block.eager.inference",
      "tinyproj.benchmarks.attention_block.inductor.inference"],
     "tinyproj.benchmarks."),  # the function stays: three components are kept
    (["a-long-model-name-1024x1024.eager.inference-bs1",
      "a-long-model-name-1024x1024.inductor.inference-bs1"], ""),
    (["p.m.f[s=0.5].eager.x", "p.m.f[s=0.25].eager.x"], "p.m."),  # a dot inside [parameters] is no boundary
    (["tinyproj.benchmarks.gelu[n=256].eager.inference"], ""),  # one name: nothing is shared
])
def test_the_shared_module_path_leaves_every_name_its_function_compile_config_and_task(names, shared):
    from benchtrail.markup import shared_module

    assert shared_module(names) == shared


def test_the_shared_tail_leaves_every_name_one_component():
    from benchtrail.markup import shared_tail

    assert shared_tail(["gelu[n=256].eager.inference", "gelu[n=64].eager.inference"]) == ".eager.inference"
    assert shared_tail(["f[s=a.b]", "g[s=a.b]"]) == ""  # a dot inside [parameters] is no boundary
    assert shared_tail(["eager.inference", "inference"]) == ""  # "inference" would keep nothing
    assert shared_tail(["f.eager.inference"]) == "" and shared_tail(["f.inference", "g.backward"]) == ""


def test_the_inconclusive_line_names_the_largest_changes_first_and_is_cut_not_wrapped():
    rows = [_row(f"m{i}.eager.inference-bs1", "inconclusive", 100.0, 100.0 + c, c, (c - 50.0, c + 50.0))
            for i, c in enumerate((3.0, 185.6, -40.0, 10.0))]
    comparison = _comparison({**COMPARISON.document, "rows": rows, "counts": count_rows(rows)})
    assert render_table(comparison, width=200).splitlines()[-1] == (
        "inconclusive (4): m1.eager.inference-bs1 +185.6%, m2.eager.inference-bs1 -40.0%, m3.eager.inference-bs1 "
        "+10.0% and 1 more: more samples or a quieter machine would settle them")
    narrow = render_table(comparison, width=60).splitlines()
    assert narrow[-1] == "inconclusive (4): m1.eager.inference-bs1 +185.6%, m2.eager.…" and len(narrow[-1]) == 60


def test_on_two_devices_the_shared_end_goes_in_front_of_the_device_and_the_inconclusive_line_uses_short_names():
    rows = [dataclasses.replace(_row(f"mypkg.benchmarks.attention[seq={seq}].eager.inference", verdict, 1.0,
                                     2.0,
                                     change, (change - 5.0, change + 5.0)),
                                name=f"mypkg.benchmarks.attention[seq={seq}].eager.inference.{device}",
                                device_name=device)
            for seq, verdict, change in ((64, "regressed", 100.0), (128, "inconclusive", 200.0))
            for device in ("c2-standard-16", "g2-standard-8")]
    lines = render_table(_comparison({**COMPARISON.document, "rows": rows, "counts": count_rows(rows)}),
                         width=80).splitlines()
    assert lines[1] == "names: mypkg.benchmarks.<benchmark>.eager.inference.<device>"
    assert [line.split()[0] for line in lines[3:5]] == ["attention[seq=64].c2-…", "attention[seq=64].g2-…"]
    assert lines[-1] == "inconclusive (2): attention[seq=128].c2-standard-16 +200.0%, attention[seq=128]…"
