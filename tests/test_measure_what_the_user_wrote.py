"""What a function benchmark's samples measure (issue 40): the user's call alone (no module wrapper), on
fresh inputs when the function changes them, at the thread count the runner set; real worker processes."""

import dataclasses
from dataclasses import replace

import pytest

from benchtrail.compare.rules import Threshold
from benchtrail.compare.verdicts import compare
from benchtrail.results.schema import ResultsFile
from benchtrail.runner.run_cases import case_record, run_case
from benchtrail.suite import functions
from benchtrail.suite.definitions import RunConfig

RULE = (Threshold("*", "percent", 5.0, "lower-is-better"),)


@pytest.fixture(scope="module")
def cases():
    """``{function name: (run config, response)}``, each case in one cheap worker process."""
    suite = functions.suite_of(functions.discover(["tests.benchmarks.in_place"]))
    out = {}
    for rc in suite.run_configs:
        execution = dataclasses.replace(rc.execution_config, processes=1, min_sample_time_ms=2, timeout_s=300)
        rc = RunConfig.build(rc.module_generation_config, execution, rc.target_device)
        out[rc.name.split(".")[3].split("[")[0]] = (rc, run_case(rc))
    return out


def _row(cases, name, base_details=None):
    rc, response = cases[name]
    head = case_record(rc, response, "2.13.0")
    base = replace(head, details={**head.details, **(base_details or {})})
    env = {"torch_version": "2.13.0"}
    base, head = ([ResultsFile(c * 40, False, {}, env, (r,))] for c, r in (("b", base), ("h", head)))
    (row,) = compare(base, head, RULE)
    return row


def test_an_undeclared_in_place_change_is_refused_naming_the_input(cases):
    _, r = cases["sort_in_place"]
    assert r.status == "failed" and not r.samples
    assert r.reason == (
        "tests.benchmarks.in_place.sort_in_place[n=10000] changed its input x (float32 (10000,)) in place "
        "on its first call, so later iterations would run on changed data; declare "
        "@benchmark(..., mutates_inputs=True) to time one call per sample on fresh inputs, or change a copy")


def test_a_change_through_data_or_on_a_later_call_is_refused_too(cases):
    _, r = cases["sort_via_data"]
    assert r.status == "failed"
    assert "changed its input x (float32 (10000,)) in place on its first call" in r.reason
    _, r = cases["changes_on_a_later_call"]
    assert r.status == "failed"
    assert "changed its input x (float32 (16,)) in place during the samples" in r.reason


def test_a_declared_in_place_sort_is_timed_one_call_per_sample_on_fresh_inputs(cases):
    _, r = cases["sort_in_place_declared"]  # raises when a call gets an input an earlier call sorted
    assert r.status == "ok", r.reason
    assert r.answer.iterations_per_sample == 1 and len(r.samples) == 5 and r.answer.warmup_iterations >= 2


def test_an_in_place_add_passes_its_check_against_a_reference_run_on_pristine_inputs(cases):
    _, r = cases["add_one_in_place"]
    c = r.answer.correctness
    assert r.status == "ok" and c["ok"] and c["against"] == "reference" and c["max_abs_err"] == 0.0
    _, r = cases["add_one_compiled"]  # compiling calls it once: on a copy, not on the inputs the check uses
    assert r.status == "ok" and r.answer.correctness["ok"], r.reason
    _, r = cases["add_one_forward"]
    assert (r.status, r.reason) == ("failed", (
        "tests.benchmarks.in_place.add_one_forward[n=16] changes an input in place, which autograd refuses "
        "for an input that requires grad (the forward task differentiates its floating-point inputs): time "
        "it with the inference task, or change a copy"))


def test_a_reference_of_another_shape_or_value_is_a_mismatch_saying_so(cases):
    _, r = cases["whole"]
    assert (r.status, r.reason) == (
        "mismatch", "value differs from reference: value 0 has shape (16,), the reference's (8,)")
    _, r = cases["total"]  # a tensor against a Python float: compared by value
    assert r.status == "mismatch" and r.reason.startswith("value differs from reference: max abs error")


def test_a_case_that_changes_the_thread_count_is_flagged_and_not_compared_with_another_count(cases):
    _, r = cases["sets_two_threads"]
    assert (r.answer.threads_set, r.answer.threads) == (1, 2)
    flagged = _row(cases, "sets_two_threads")
    note = "the benchmark's code changes torch's thread count: set 1 before each sample, ran at 2"
    assert note in flagged.reason
    row = _row(cases, "sets_two_threads", {"threads": 1, "threads_set": 1})
    assert (row.verdict, row.reason) == (
        "not-comparable",
        "thread counts differ: the baseline ran at 1 thread, the head at 2 (the head's code "
                          "changes it)")
    _, plain = cases["identity"]
    assert (plain.answer.threads_set, plain.answer.threads) == (1, 1)


def test_the_harness_floor_is_measured_and_a_row_near_it_says_so(cases):
    _, r = cases["identity"]
    median = sorted(r.samples)[len(r.samples) // 2]
    # The user's call alone: about 0.1 µs on a 2-vCPU VM; through the module wrapper it was about 5 µs.
    assert median < 2.0 and 0 < r.answer.floor_us < 1.0, (median, r.answer.floor_us)
    assert "near the harness floor: median" in _row(cases, "identity").reason
    _, sort = cases["sort_copy"]
    assert sort.answer.floor_us < 1.0 and "harness floor" not in (_row(cases, "sort_copy").reason or "")


def test_a_reference_that_raises_is_a_failed_check_naming_the_exception():
    suite = functions.suite_of(functions.discover(["tests.benchmarks.raising_references"]))
    (rc,) = [rc for rc in suite.run_configs if ".boom[" in rc.name or rc.name.split(".")[3] == "boom"][:1]
    execution = dataclasses.replace(rc.execution_config, processes=1, min_samples=3, warmup_time_ms=10,
                                    min_sample_time_ms=0.2, timeout_s=300)
    r = run_case(RunConfig.build(rc.module_generation_config, execution, rc.target_device))
    assert (r.status, r.reason) == ("mismatch", "value not checked: the reference raised ValueError: boom")
    assert r.answer.correctness["error"] == "the reference raised ValueError: boom"
