"""Issue 44: instruction rows in the PR comment, and the per-function diff of a confirmed instruction regression
(``benchtrail.compare.callgrind``) through the real ``callgrind_annotate`` on small callgrind files written here
(no valgrind run). Comment tests use synthetic rows."""

import shutil
from dataclasses import replace

import pytest

from benchtrail.compare.callgrind import (
    UNCHANGED,
    FunctionChange,
    file_total,
    function_counts,
    function_diff,
    function_lines,
    function_name,
    with_functions,
)
from benchtrail.compare.comment import render
from benchtrail.compare.comment_size import MAX_COMMENT_CHARS
from benchtrail.compare.document import Comparison, Row, load_comparison
from benchtrail.compare.gate import figures
from benchtrail.compare.tables import format_count, format_instructions
from benchtrail.errors import UserError
from benchtrail.pipeline.report_stages import callgrind_locator, compare_stage
from benchtrail.results.io import write_results
from benchtrail.results.schema import BenchmarkRecord
from benchtrail.store import open_store
from tests.helpers.records import results

needs_annotate = pytest.mark.skipif(shutil.which("callgrind_annotate") is None,
                                    reason="callgrind_annotate (valgrind's tools) is not installed")
DEVICE = "c2-standard-16"
COUNTER = {"counter": "callgrind", "valgrind": "3.19.0", "cpu": "AuthenticAMD AVX2"}


def callgrind_file(path, calls, work_self, extra=0):
    """A callgrind file of one block of ``calls`` calls, as callgrind writes it (``totals:`` last): main calls
    work (which calls helper) and helper; helper costs 50 a call; ``extra`` instructions in a function only
    this file has. Self: main ``calls``, work ``work_self``, helper ``50 × calls``; inclusive: work
    ``work_self + 30 × calls``, helper ``50 × calls``, main the total."""
    helper_by_work, helper_by_main, helper = 30 * calls, 20 * calls, 50 * calls
    total = calls + work_self + helper + extra
    lines = ["# callgrind format", "version: 1", "creator: benchtrail-test", "positions: line", "events: Ir",
             "", "fl=/build/src/model.c", "fn=main", f"1 {calls}",
             "cfn=work", f"calls={calls} 5", f"2 {work_self + helper_by_work}",
             "cfn=helper", f"calls={calls} 9", f"3 {helper_by_main}"]
    if extra:
        lines += ["cfn=extra", "calls=1 12", f"4 {extra}"]
    lines += ["fn=work", f"5 {work_self}", "cfn=helper", f"calls={calls} 9", f"6 {helper_by_work}",
              "fn=helper", f"9 {helper}"]
    if extra:
        lines += ["fn=extra", f"12 {extra}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*lines, "", f"totals: {total}"]) + "\n")
    return path


def recursive_file(path, self_cost):
    """A callgrind file whose inclusive counts are recursion artifacts, as CPython's frames are under
    ``--separate-recs``: main (10 self) calls ``eval'2``, which calls itself (30 of its ``self_cost`` a level
    down, counted again in its inclusive count), and ``loop``, which reports a call of itself costing 1000:
    inclusive counts of ``self_cost`` + 30 and 1050, the latter above the file's total."""
    total = 10 + self_cost + 50
    lines = ["events: Ir", "fl=/build/src/eval.c", "fn=main", "1 10", "cfn=eval'2", "calls=1 5",
             f"2 {self_cost}", "cfn=loop", "calls=1 9", "3 50", "fn=eval'2", f"5 {self_cost}", "cfn=eval'2",
             "calls=1 5", "6 30", "fn=loop", "9 50", "cfn=loop", "calls=9 9", "10 1000", "",
             f"totals: {total}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@needs_annotate
def test_function_counts_are_callgrind_annotates_self_or_inclusive_counts(tmp_path):
    path = callgrind_file(tmp_path / "base.out", calls=10, work_self=1000)
    assert function_counts(path) == {"/build/src/model.c:main": 10, "/build/src/model.c:work": 1000,
                                     "/build/src/model.c:helper": 500}
    assert function_counts(path, inclusive=True) == {"/build/src/model.c:main": 1510,
                                                     "/build/src/model.c:work": 1300,
                                                     "/build/src/model.c:helper": 500}
    assert file_total(path) == 1510


@needs_annotate
def test_function_diff_ranks_by_self_per_call_with_the_inclusive_change_beside(tmp_path):
    base = callgrind_file(tmp_path / "base.out", calls=10, work_self=1000)  # work 100 self, 130 inclusive
    head = callgrind_file(tmp_path / "head.out", calls=20, work_self=2600, extra=40)  # 130, 160; extra 2
    assert function_diff(base, head, calls=(10, 20)) == [
        FunctionChange("/build/src/model.c:work", 100.0, 130.0, 30.0, (130.0, 160.0, 30.0)),
        FunctionChange("/build/src/model.c:extra", 0.0, 2.0, 2.0, (0.0, 2.0, 2.0))]  # main, helper: same
    # per block (CallgrindStats.delta of two blocks), and cut to the top
    assert function_diff(base, head, top=2) == [
        FunctionChange("/build/src/model.c:work", 1000, 2600, 1600, (1300, 3200, 1900)),
        FunctionChange("/build/src/model.c:helper", 500, 1000, 500, (500, 1000, 500))]


@needs_annotate
def test_inclusive_counts_of_recursion_are_left_out_not_printed(tmp_path):
    base, head = recursive_file(tmp_path / "base.out", 100), recursive_file(tmp_path / "head.out", 160)
    assert function_counts(head, inclusive=True) == {"/build/src/eval.c:main": 220,
                                                     "/build/src/eval.c:eval'2": 190,
                                                     "/build/src/eval.c:loop": 1050}
    assert file_total(head) == 220  # loop's inclusive 1050 is above it
    # eval'2 counted as eval, no level-1 entry: no inclusive; main and loop changed nothing of their own
    assert function_diff(base, head) == [FunctionChange("/build/src/eval.c:eval", 100, 160, 60, None)]
    head_loop = recursive_file(tmp_path / "loop.out", 100)
    head_loop.write_text(head_loop.read_text().replace("9 50\ncfn=loop", "9 70\ncfn=loop")
                         .replace("totals: 160", "totals: 180"))
    assert function_diff(base, head_loop) == [FunctionChange("/build/src/eval.c:loop", 50, 70, 20, None)]
    # the same work one recursion level up in head (a block that starts inside the interpreter's loop):
    # the levels are one function, so only the 60 more of its own count (main's call of eval'2 as eval)
    level1 = recursive_file(tmp_path / "level1.out", 160)
    level1.write_text(level1.read_text().replace("fn=eval'2", "fn=eval"))  # cfn= lines too
    assert function_diff(base, level1) == [FunctionChange("/build/src/eval.c:eval", 100, 160, 60, None)]


@needs_annotate
def test_a_missing_truncated_or_broken_file_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match=r"callgrind file .*nope\.out does not exist"):
        function_counts(tmp_path / "nope.out")
    whole = callgrind_file(tmp_path / "whole.out", calls=10, work_self=1000).read_bytes()
    (tmp_path / "cut.out").write_bytes(whole[:208])  # as `head -c 208 whole.out > cut.out`: mid-line
    with pytest.raises(UserError, match=r"callgrind file .*cut\.out is truncated: it does not end with "
                                        r"callgrind's 'totals:' line \(it ends 'calls=10'\)"):
        function_diff(tmp_path / "whole.out", tmp_path / "cut.out")
    (tmp_path / "empty.out").write_text("")
    with pytest.raises(UserError, match=r"empty\.out is truncated: .* \(it ends ''\)"):
        function_counts(tmp_path / "empty.out")
    (tmp_path / "noevents.out").write_text("fn=main\n1 10\ntotals: 10\n")
    with pytest.raises(UserError, match=r"callgrind_annotate could not read .*noevents\.out "
                                        r"\(exit code 255\): .*missing events line"):
        function_counts(tmp_path / "noevents.out")


def test_without_callgrind_annotate_the_message_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no valgrind tools
    with pytest.raises(UserError, match=r"callgrind_annotate is not on PATH: .*apt-get install valgrind"):
        function_counts(tmp_path / "x.out")


def counted(run_dir, calls, median, work_self, extra=0):
    """An instructions record of ``mlp`` (``median`` per call, five repeats 0.02% apart) with its callgrind
    file, written into ``run_dir`` as the counting pass does."""
    callgrind_file(run_dir / "callgrind" / "mlp.out", calls, work_self, extra)
    samples = tuple(median * (1 + 0.0001 * k) for k in (-2, -1, 0, 1, 2))
    record = BenchmarkRecord.of(
        "instructions", samples, id="rc-mlp-instructions",
        name=f"mlp.eager.inference-bs1.{DEVICE}.instructions",
        device_name=DEVICE, module_name="mlp.eager.cpu", compile_config="eager", task="inference",
        status="ok", reason=None, content_hash="h1", presets=("smoke",),
        details={"iterations_per_sample": calls, "warmup_iterations": calls + 1, "overhead": 1984,
                 "threads": 1,
                 "counter": COUNTER, "callgrind": "callgrind/mlp.out"})
    return record


def run(run_dir, commit, *records):
    write_results(run_dir / "results" / f"{DEVICE}-0.instructions.json", results(*records, commit=commit))
    return run_dir


@needs_annotate
def test_the_compare_stage_keeps_the_diff_of_a_confirmed_instruction_regression_in_its_row(tmp_path):
    base = run(tmp_path / "base", "b" * 40, counted(tmp_path / "base", 10, 193.0, 1000))
    head = run(tmp_path / "head", "c" * 40, counted(tmp_path / "head", 20, 225.0, 2600, extra=40))
    (row,) = load_comparison(compare_stage([base], [head], tmp_path / "comparison.json")).rows
    assert (row.verdict, row.mark) == ("regressed", "confirmed")
    assert row.functions == {
        "functions": [{"name": "/build/src/model.c:work", "base": 100.0, "head": 130.0, "change": 30.0,
                       "inclusive": {"base": 130.0, "head": 160.0, "change": 30.0}},
                      {"name": "/build/src/model.c:extra", "base": 0.0, "head": 2.0, "change": 2.0,
                       "inclusive": {"base": 0.0, "head": 2.0, "change": 2.0}}],
        "ranked_by": "self", "calls": {"base": 10, "head": 20},
        "files": {"base": "callgrind/mlp.out", "head": "callgrind/mlp.out"}, "note": None}
    body, _, _ = render(load_comparison(tmp_path / "comparison.json"))
    why = body[body.index("<details><summary>Why it got slower (callgrind): 1 series</summary>"):]
    assert why.splitlines()[2:8] == [
        "`mlp.eager.inference-bs1.instructions`", "",
        "**Why** (callgrind, instructions per call, largest change of self instructions first; the inclusive "
        "change beside, unless recursion makes callgrind's meaningless):",
        "- `model.c:work` 100 → 130 (+30) self, +30 inclusive",
        "- `model.c:extra` 0 → 2 (+2) self, +2 inclusive", ""]
    assert ("Callgrind files (callgrind_annotate, kcachegrind): head `callgrind/mlp.out` of this run, base "
            "`callgrind/mlp.out` of the baseline run") in why


@needs_annotate
def test_a_stored_baseline_gives_its_file_from_the_store_or_says_in_one_line_why_not(tmp_path):
    store = open_store(str(tmp_path / "store"))
    stored = store.run_dir("r0", 1)
    base_files = [results(counted(stored, 10, 193.0, 1000), commit="b" * 40)]
    head = run(tmp_path / "head", "c" * 40, counted(tmp_path / "head", 20, 225.0, 2600))
    baseline = {"commit": "b" * 40, "run_id": "r0", "attempt": 1, "run_dir": str(stored),
                "devices": {DEVICE: {"commit": "b" * 40, "reason": "merge base", "run_id": "r0",
                                     "attempt": 1}}}
    (row,) = load_comparison(compare_stage([], [head], tmp_path / "c1.json", baseline=baseline,
                                           base_results=base_files, store=store)).rows
    assert [f["change"] for f in row.functions["functions"]] == [30.0] and row.functions["note"] is None
    (stored / "callgrind" / "mlp.out").unlink()
    (row,) = load_comparison(compare_stage([], [head], tmp_path / "c2.json", baseline=baseline,
                                           base_results=base_files, store=store)).rows
    assert row.functions["functions"] == []
    assert row.functions["note"].startswith("no per-function diff: the base's callgrind file callgrind/mlp.out: "
                                            "could not be fetched from baseline run r0/1: no file of run ")
    locate = callgrind_locator([], [head], baseline, None)  # no store: the baseline's run_dir only
    assert locate(row, "base") == "not in baseline run r0/1 (no store to fetch it from)"
    assert locate(row, "head") == head / "callgrind" / "mlp.out"
    (head / "results" / "callgrind").mkdir()  # the counting pass's own layout: beside its results file
    (head / "callgrind" / "mlp.out").rename(head / "results" / "callgrind" / "mlp.out")
    assert locate(row, "head") == head / "results" / "callgrind" / "mlp.out"
    assert callgrind_locator([], [head / "results" / f"{DEVICE}-0.instructions.json"], None, None)(
        row, "head") == head / "results" / "callgrind" / "mlp.out"


def row(name, metric, verdict, base, head, change, low=None, high=None, mark=None, **fields):
    unit = "count" if metric == "instructions" else "us"
    rid = "rc-mlp" + ("-instructions" if metric == "instructions" else "")
    return Row(id=fields.pop("id", rid), name=name, kind="execution", metric=metric, unit=unit,
               device_name=DEVICE, module_name="mlp.eager.cpu", compile_config="eager", verdict=verdict,
               reason=fields.pop("reason", None), base_median=base, head_median=head, base_iqr=None,
               head_iqr=None,
               base_n=5, head_n=5, change=change, change_unit="%", p_value=None, threshold=None,
               head_details={}, base_details={}, ci_low=low, ci_high=high, mark=mark, **fields)


LATENCY = f"mlp.eager.inference-bs1.{DEVICE}"


def document(*rows):
    counts = {v: sum(r.verdict == v for r in rows) for v in ("regressed", "improved", "similar")}
    counts["confirmed"] = sum(r.mark == "confirmed" for r in rows)
    return Comparison.of({"schema_version": 8, "head": {"commit": "c" * 40, "devices": [DEVICE]},
                          "base": {"commit": "b" * 40}, "baseline": {"reason": "merge base"},
                          "counts": counts, "rows": [r.plain() for r in rows]})


def test_instruction_rows_show_counts_per_call_and_latency_rows_their_instruction_change():
    rows = (row(LATENCY, "latency", "regressed", 21400.0, 27820.0, 30.0, 28.1, 31.9, "confirmed"),
            row(f"{LATENCY}.instructions", "instructions", "regressed", 6401263.0, 6529288.0, 2.0, 1.96, 2.04,
                "confirmed"),
            row(f"vrelu3.eager.inference-bs1.{DEVICE}", "latency", "similar", 650.25, 650.5, 0.04, -0.5, 0.6,
                id="rc-vrelu3"),
            row(f"vrelu3.eager.inference-bs1.{DEVICE}.instructions", "instructions", "similar", 2903311.0,
                2903674.0, 0.0125, -0.0125, 0.0375, id="rc-vrelu3-instructions"))
    body, _, _ = render(document(*rows))
    # instruction figures to 2 decimals (hundredths of a percent against a 0.5% threshold), others to 1
    assert ("| `mlp.eager.inference-bs1` | 21.40 ms → 27.82 ms | +30.0% (+28.1…+31.9%) · instructions "
            "+2.00% | regressed · confirmed |") in body
    assert ("| `mlp.eager.inference-bs1.instructions` | 6.40M → 6.53M instr/call | +2.00% (+1.96…+2.04%) | "
            "regressed · confirmed |") in body
    assert ("| `vrelu3.eager.inference-bs1` | 650.2 µs → 650.5 µs | +0.0% (-0.5…+0.6%) · instructions "
            "+0.01% | similar |") in body
    assert ("| `vrelu3.eager.inference-bs1.instructions` | 2.90M → 2.90M instr/call | +0.01% "
            "(-0.01…+0.04%) | similar |") in body
    assert [figures(r) for r in rows[1::2]] == [
        "+2.00% (spread-widened +1.96…+2.04%), median 6.40M instr/call → 6.53M instr/call",
        "+0.01% (spread-widened -0.01…+0.04%), median 2.90M instr/call → 2.90M instr/call"]
    assert body.count("- instr/call: instructions per call counted under valgrind's callgrind") == 1
    # a run that counts nothing: no suffix and no legend line
    plain, _, _ = render(document(rows[0], rows[2]))
    assert "instructions" not in plain and "instr/call" not in plain


def test_counts_read_as_three_significant_figures():
    assert [format_count(x) for x in (6401263.0, 2903311.0, 12345.0, 999999.0, 850.4, 2.0, 0.25, 1.5e9)] == [
        "6.40M", "2.90M", "12.3k", "1.00M", "850", "2", "0.25", "1.50G"]
    assert (format_instructions(6401263.0), format_instructions(None)) == ("6.40M instr/call", "—")
    long = "/src/aten/x.cpp:at::native::" + "T" * 300 + " [/lib/libtorch_cpu.so]"
    shown = function_name(long)
    assert len(shown) == 120 and shown.startswith("x.cpp:at::native::TTT") and " … " in shown
    lambdas = "::{lambda()#2}::operator()() const::{lambda(float, float)#1}&"  # a kernel's name: its start
    kernel = ("???:void at::native::DEFAULT::vectorized_loop<at::native::(anonymous namespace)::"
              f"maximum_kernel(at::TensorIteratorBase&){lambdas * 8}>(char**, long, long) [clone .isra.0] "
              "[/lib/libtorch_cpu.so]")
    assert function_name(kernel) == ("???:void at::native::DEFAULT::vectorized_loop<at::native::"
                                     "maximum_kernel(at::TensorItera … , long, long) [clone .isra.0]")
    assert len(function_name(kernel)) == 120


def test_a_diff_that_could_not_be_made_says_why_in_one_line_and_an_older_row_has_none(tmp_path):
    regressed = row(f"{LATENCY}.instructions", "instructions", "regressed", 6.4e6, 6.53e6, 2.0, 1.96, 2.04,
                    "confirmed")
    no_file = replace(regressed, base_details={"iterations_per_sample": 10, "callgrind": "callgrind/mlp.out"},
                      head_details={"iterations_per_sample": 10, "callgrind": "../../etc/passwd"})
    older = replace(regressed, id="rc-old-instructions", base_details={"iterations_per_sample": 10},
                    head_details={"iterations_per_sample": 10, "callgrind": "callgrind/old.out"})
    rows = with_functions([no_file, older, row(LATENCY, "latency", "regressed", 1.0, 2.0, 100.0)],
                          lambda r, side: "never asked")
    assert [r.functions["note"] if r.functions else None for r in rows] == [
        "no per-function diff: the head record's details.callgrind '../../etc/passwd' is not a path inside "
        "its run directory",
        "no per-function diff: the base record has no details.callgrind", None]
    body, _, _ = render(document(*rows))
    assert ("_no per-function diff: the base record has no details.callgrind_" in body
            and "Callgrind files" not in body)
    assert "functions" not in Row.plain(regressed)  # absent unless set, as older comparisons are


@needs_annotate
def test_identical_files_say_that_no_function_changed(tmp_path):
    same = callgrind_file(tmp_path / "callgrind" / "mlp.out", calls=10, work_self=1000)
    details = {"iterations_per_sample": 10, "callgrind": "callgrind/mlp.out"}
    regressed = replace(row(f"{LATENCY}.instructions", "instructions", "regressed", 6.4e6, 6.53e6, 2.0, 1.96,
                            2.04, "confirmed"), base_details=details, head_details=details)
    (done,) = with_functions([regressed], lambda r, side: same)
    assert (done.functions["functions"], done.functions["note"]) == ([], UNCHANGED)
    assert UNCHANGED == "no function's instructions per call changed between the two callgrind files"
    body, _, _ = render(document(done))
    assert f"_{UNCHANGED}_" in body and "Callgrind files" not in body


def test_a_diff_written_before_self_ranking_still_renders_as_inclusive_counts():
    """A comparison.json entry without ``ranked_by`` and ``inclusive`` (ranked by inclusive counts)."""
    older = {"functions": [{"name": "/build/src/model.c:work", "base": 130.0, "head": 160.0, "change": 30.0}],
             "calls": {"base": 10, "head": 20}, "files": {"base": "a.out", "head": "a.out"}, "note": None}
    regressed = row(f"{LATENCY}.instructions", "instructions", "regressed", 6.4e6, 6.53e6, 2.0, 1.96, 2.04,
                    "confirmed", functions=older)
    loaded = Comparison.of(document(regressed).document)  # through comparison.json's reader
    body, _, _ = render(loaded)
    assert ("**Why** (callgrind, inclusive instructions per call, largest change first):\n"
            "- `model.c:work` 130 → 160 (+30) inclusive\n") in body
    assert function_lines(loaded.rows[0].functions) == ["model.c:work 130 → 160 (+30) inclusive"]


def test_the_caps_still_hold_with_diffs_of_long_names():
    name = "/src/aten/x.cpp:at::native::" + "T" * 3000
    functions = {"functions": [{"name": f"{name}{i}", "base": 1e6, "head": 1.1e6, "change": 1e5}
                               for i in range(10)], "calls": {"base": 1, "head": 1},
                 "files": {"base": "callgrind/a.out", "head": "callgrind/a.out"}, "note": None}
    rows = [row(f"case{i:05d}.instructions", "instructions", "regressed", 6.4e6, 6.6e6, 3.0, 2.9, 3.1,
                "confirmed", id=f"rc{i}-instructions", functions=functions if i < 5 else None)
            for i in range(1500)]
    body, full, _ = render(document(*rows))
    assert len(body) <= MAX_COMMENT_CHARS and "see full.md" in body
    assert body.count("<summary>Why it got slower (callgrind): 5 series</summary>") == 1
    assert full.count("| `case") == 1500


def test_explain_names_an_instruction_series_and_prints_its_function_diff(tmp_path, capsys):
    from benchmark_suites.suite import generate
    from benchtrail import jsonio
    from benchtrail.cli import main
    from benchtrail.pipeline.measure_stages import write_export

    suite = generate()
    write_export(suite, "execution", ("smoke",), tmp_path / "run" / "run-configs" / "execution.json")
    rc = next(rc for rc in suite.select_run_configs(("smoke",)) if rc.name.startswith("mlp.eager"))
    functions = {"functions": [{"name": "/b/ceval.c:eval'2 [/lib/libpython.so]", "base": 16745.0,
                                "head": 20948.0, "change": 4203.0, "inclusive": None},
                               {"name": "/build/src/model.c:work", "base": 100.0, "head": 130.0,
                                "change": 30.0, "inclusive": {"base": 130.0, "head": 160.0, "change": 30.0}}],
                 "ranked_by": "self", "calls": {"base": 10, "head": 20},
                 "files": {"base": "a.out", "head": "a.out"}, "note": None}
    counted_row = row(f"{rc.name}.instructions", "instructions", "regressed", 6401263.0, 6529288.0, 2.0, 1.96,
                      2.04, "confirmed", id=f"{rc.id}-instructions", functions=functions)
    jsonio.write_json(tmp_path / "run" / "comparison.json", document(counted_row).document)
    shown = rc.name.removesuffix(f".{rc.target_device.name}") + ".instructions"  # as the comment shows it
    assert main(["explain", shown, "--run", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    for text in (f"benchmark    {rc.name}.instructions", f"id           {rc.id}-instructions",
                 "kind         execution (instructions per call, counted under callgrind)",
                 "compared     instructions: regressed · confirmed, +2.00% (spread-widened +1.96…+2.04%), "
                 "median 6.40M instr/call → 6.53M instr/call",
                 "why (callgrind, instructions per call):\n"
                 "  ceval.c:eval'2 16.7k → 20.9k (+4.20k) self\n"  # recursion: no inclusive figure
                 "  model.c:work 100 → 130 (+30) self, +30 inclusive\n",
                 f"--benchmark-id {rc.id} --modules-dir {tmp_path / 'run'} --output "
                 f"repro/{rc.name}.json --metrics instructions"):
        assert text in out, text
