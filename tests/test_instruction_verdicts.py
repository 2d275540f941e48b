"""Issue 44: instruction rows judged by their repeats (``stats.counts.judge_counts``), never across counter
keys, confirmed without a paired re-check; latency rows beside them say what the instructions did. Synthetic
records, no valgrind."""

import json
from dataclasses import replace

import pytest

from benchtrail.compare import gate
from benchtrail.compare.document import Comparison, comparison_to_dict
from benchtrail.compare.notes import UNCHANGED_NOTE, mark_regressions
from benchtrail.compare.rules import Rules, find_threshold, load_thresholds
from benchtrail.compare.verdicts import compare
from benchtrail.results.baseline_key import counter_difference
from benchtrail.results.schema import BenchmarkRecord
from benchtrail.runner.recheck import suspects
from benchtrail.stats.counts import NOISY_SPREAD_PCT
from tests.helpers.records import record, results, spread

RULES = Rules(load_thresholds())
THRESHOLD = 0.5  # the shipped execution/instructions/* rule
COUNTER = {"counter": "callgrind", "valgrind": "3.19.0", "cpu": "AuthenticAMD AVX2"}
GATED = "wall time is reported, not gated: c2-standard-16 gates on instructions"


def repeats(median: float, range_pct: float = 0.02) -> tuple[float, ...]:
    """Five repeats around ``median``, their range ``range_pct`` percent of it (median exactly ``median``)."""
    return tuple(median * (1 + range_pct / 100 * k / 4) for k in (-2, -1, 0, 1, 2))


def counted(rc: str, samples: tuple[float, ...], counter: dict | None = COUNTER) -> BenchmarkRecord:
    details = {"iterations_per_sample": 2, "warmup_iterations": 3, "overhead": 1984, "threads": 1}
    return BenchmarkRecord.of(
        "instructions", samples, id=f"{rc}-instructions",
        name=f"{rc}.eager.inference-bs1.c2-standard-16.instructions", device_name="c2-standard-16",
        module_name=f"{rc}.cpu", compile_config="eager", task="inference", status="ok", reason=None,
        content_hash="h1", presets=("smoke",),
        details={**details, **({"counter": counter} if counter is not None else {})})


def judged(base, head, paired=False):
    rows = compare([results(*base, commit="b" * 40)], [results(*head, commit="h" * 40)], RULES.thresholds)
    return {r.id: r for r in mark_regressions(rows, RULES, paired=paired)}


def test_the_shipped_rule_judges_instructions_at_half_a_percent():
    rule = find_threshold(RULES.thresholds, "execution", "instructions", "mlp.eager.instructions",
                          "lower-is-better")
    assert (rule.match, rule.unit, rule.threshold) == ("execution/instructions/*", "percent", THRESHOLD)


def test_twice_the_threshold_is_regressed_and_confirmed_by_its_repeats_so_it_gates():
    rows = judged([counted("mlp", repeats(6.4e6))], [counted("mlp", repeats(6.4e6 * 1.01))])
    row = rows["mlp-instructions"]
    assert (row.verdict, row.mark, row.reason, row.noisy, row.outcome) == (
        "regressed", "confirmed", None, False, "DIFFERENT")
    assert (row.p_value, row.q_value, row.mde) == (None, None, None)
    assert row.change == pytest.approx(1.0)
    assert (row.ci_low, row.ci_high) == (pytest.approx(0.96), pytest.approx(1.04))  # ± 0.02% + 0.02%
    assert [r.id for r in gate.check(list(rows.values()), rule="confirmed").failing] == ["mlp-instructions"]


def test_a_regression_beside_an_improvement_and_half_the_threshold():
    base = [counted(rc, repeats(6.4e6)) for rc in ("better", "half")]
    head = [counted("better", repeats(6.4e6 * 0.99)), counted("half", repeats(6.4e6 * 1.0025))]
    rows = judged(base, head)
    assert (rows["better-instructions"].verdict, rows["better-instructions"].mark) == ("improved", None)
    half = rows["half-instructions"]
    assert (half.verdict, half.reason, half.noisy, half.outcome) == ("similar", None, False, "SAME")
    assert half.change == pytest.approx(0.25)


def test_a_wide_spread_is_inconclusive_and_noisy_naming_the_spread():
    row = judged([counted("mlp", repeats(6.4e6, 0.4))],
                 [counted("mlp", repeats(6.4e6 * 1.0025, 0.4))])["mlp-instructions"]
    assert (row.verdict, row.noisy, row.outcome) == ("inconclusive", True, "UNKNOWN")
    assert NOISY_SPREAD_PCT == 0.25
    assert row.reason == "repeats spread 0.80% (bound 0.25%)"
    assert (row.ci_low, row.ci_high) == (pytest.approx(-0.55), pytest.approx(1.05))


def test_equal_repeats_are_judged_and_too_few_or_a_zero_are_not():
    equal = (6.4e6,) * 5
    rows = judged([counted("same", equal), counted("few", repeats(6.4e6)), counted("zero", repeats(6.4e6))],
                  [counted("same", equal), counted("few", (6.4e6, 6.4e6)),
                   counted("zero", (*equal[:4], 0.0))])
    assert (rows["same-instructions"].verdict, rows["same-instructions"].change) == ("similar", 0.0)
    assert (rows["few-instructions"].verdict, rows["few-instructions"].reason) == (
        "insufficient-samples", "head has 2 samples; at least 3 on each side are needed")
    assert (rows["zero-instructions"].verdict, rows["zero-instructions"].reason) == (
        "not-comparable", "head sample 4 is 0.0 (0 or negative); instructions samples must be finite and > 0")


def test_counts_under_different_counter_keys_are_never_compared():
    newer = {**COUNTER, "valgrind": "3.22.0"}
    intel = {**COUNTER, "cpu": "GenuineIntel AVX512"}
    base = [counted(rc, repeats(6.4e6)) for rc in ("valgrind", "cpu", "none")]
    head = [counted("valgrind", repeats(6.4e6 * 1.05), newer), counted("cpu", repeats(6.4e6), intel),
            counted("none", repeats(6.4e6), None)]
    rows = judged(base, head)
    assert {k: (r.verdict, r.reason, r.change, r.mark) for k, r in rows.items()} == {
        "valgrind-instructions": ("not-comparable", "counted differently: valgrind 3.19.0 (baseline) vs "
                                  "3.22.0 (this run)", None, None),
        "cpu-instructions": ("not-comparable", "counted differently: cpu AuthenticAMD AVX2 (baseline) vs "
                             "GenuineIntel AVX512 (this run)", None, None),
        "none-instructions": ("not-comparable", "counted differently: counter callgrind (baseline) vs none "
                              "(this run); valgrind 3.19.0 (baseline) vs none (this run); cpu AuthenticAMD "
                              "AVX2 (baseline) vs none (this run)", None, None)}
    assert counter_difference({"counter": COUNTER}, {"counter": dict(COUNTER)}) is None
    assert counter_difference({}, {}) == "counter none (baseline) vs none (this run)"


def test_a_wall_time_suspect_says_what_its_instructions_did():
    base = [record("mlp", spread(100.0)), record("vrelu3", spread(100.0)), record("calm", spread(100.0)),
            counted("mlp", repeats(6.4e6)), counted("vrelu3", repeats(2.9e6)), counted("calm", repeats(1e6))]
    head = [record("mlp", spread(120.0)), record("vrelu3", spread(120.0)), record("calm", spread(100.0)),
            counted("mlp", repeats(6.4e6)), counted("vrelu3", repeats(2.9e6 * 1.0123)),
            counted("calm", repeats(1e6 * 1.0123))]
    rows = judged(base, head)
    assert (rows["mlp"].verdict, rows["mlp"].mark, rows["mlp"].reason) == (
        "regressed", "unconfirmed", UNCHANGED_NOTE)
    assert UNCHANGED_NOTE == "instructions unchanged (memory, threads or frequency?)"
    assert (rows["vrelu3"].verdict, rows["vrelu3"].reason) == ("regressed", "instructions +1.23% (regressed)")
    assert (rows["calm"].verdict, rows["calm"].reason) == ("similar", "interval within the threshold")
    assert rows["calm-instructions"].verdict == "regressed"
    doc = Comparison.of(comparison_to_dict(list(rows.values()), [results(*base)], [results(*head)], "t.yaml"))
    assert [r.id for r in suspects(doc)] == ["mlp", "vrelu3"]  # the latency rows keep their re-check


def test_an_instruction_row_is_never_a_paired_re_check_suspect():
    base, head = [counted("mlp", repeats(6.4e6))], [counted("mlp", repeats(6.4e6 * 0.98))]
    rows = list(judged(base, head).values())
    assert [(r.verdict, r.ab) for r in rows] == [("improved", None)]
    doc = Comparison.of(comparison_to_dict(rows, [results(*base)], [results(*head)], "t.yaml"))
    assert suspects(doc) == []


def test_the_wall_time_of_a_counting_device_is_reported_not_gated():
    base = [record("mlp", spread(100.0), gate="instructions"), counted("mlp", repeats(6.4e6))]
    head = [record("mlp", spread(120.0), gate="instructions"), counted("mlp", repeats(6.4e6))]
    for paired in (False, True):
        rows = judged(base, head, paired=paired)
        assert (rows["mlp"].verdict, rows["mlp"].mark, rows["mlp"].quarantined) == (
            "regressed", "quarantined", GATED)
        assert rows["mlp-instructions"].quarantined is None
        for rule in ("confirmed", "any"):
            result = gate.check(list(rows.values()), rule=rule)
            assert (result.passed, result.quarantined, result.unconfirmed) == (True, 1, 0)
    plain = replace(rows["mlp"], quarantined=None, mark="confirmed")  # the same row without the gate setting
    assert not gate.check([plain], rule="any").passed
    other_cpu = {**COUNTER, "cpu": "GenuineIntel DEFAULT"}  # hosted runners mix CPU vendors
    for count, said in ((replace(head[1], status="failed", reason="vgdb", samples=()), "is failed"),
                        (counted("mlp", repeats(6.4e6), counter=other_cpu), "is not-comparable"),
                        (None, None)):
        unjudged = judged(base, [head[0], *([count] if count else [])])
        # so wall time gates
        assert (unjudged["mlp"].mark, unjudged["mlp"].quarantined) == ("unconfirmed", None)
        assert unjudged["mlp"].reason.endswith("wall time gates: c2-standard-16 gates on instructions, and "
                                               + (f"its count {said}" if said else "this case has no count"))
        assert not gate.check(list(unjudged.values()), rule="any").passed
        doc = Comparison.of(comparison_to_dict(list(unjudged.values()), [results(*base)], [results(*head)],
                                               "t.yaml"))
        assert [r.id for r in suspects(doc)] == ["mlp"]  # re-checked, so the confirmed rule can gate it


def test_a_re_checked_wall_time_suspect_still_says_what_its_instructions_did():
    from benchtrail.runner.ab import Arm
    from tests.helpers.records import apply_recheck

    base = [record("mlp", spread(100.0)), counted("mlp", repeats(6.4e6))]
    head = [record("mlp", spread(120.0)), counted("mlp", repeats(6.4e6))]
    doc = comparison_to_dict(list(judged(base, head).values()), [results(*base)], [results(*head)], "t.yaml")
    undecided = {**doc["rows"][0], "verdict": "inconclusive", "reason": "interval crosses the threshold",
                 "head_details": {"ab": {"rounds": 5, "stop": "budget"}}}
    cleared = {**undecided, "verdict": "similar", "reason": None}
    arms = Arm("base", "b" * 40, None), Arm("head", "h" * 40, None)
    for paired, says in ((undecided, True), (cleared, False)):
        row = apply_recheck(doc, {"mlp": paired}, *arms)["rows"][0]
        assert row["reason"].startswith(("not decided", "cleared"))
        assert row["reason"].endswith(UNCHANGED_NOTE) is says and row["reason"].count(UNCHANGED_NOTE) == says


def test_the_wall_time_of_a_counting_device_is_never_re_checked():
    for gated in (True, False):
        extra = {"gate": "instructions"} if gated else {}
        base = [record("mlp", spread(100.0), **extra), counted("mlp", repeats(6.4e6))]
        head = [record("mlp", spread(80.0), **extra), counted("mlp", repeats(6.4e6))]
        rows = list(judged(base, head).values())
        assert [r.verdict for r in rows] == ["improved", "similar"]
        doc = Comparison.of(comparison_to_dict(rows, [results(*base)], [results(*head)], "t.yaml"))
        assert [r.id for r in suspects(doc)] == ([] if gated else ["mlp"])


def test_a_device_marked_for_counting_counts_its_eager_cases_and_leaves_its_wall_time_ungated():
    from benchmark_suites.suite import generate
    from benchtrail.runner.run_cases import CaseResult, case_record, countable
    from benchtrail.suite.content_hash import content_hash
    from benchtrail.suite.serialization import serialize_and_pack

    smoke = {rc.name.split(".")[:2][1] + "/" + rc.target_device.architecture.value: rc
             for rc in generate().select_run_configs(("smoke",))}
    eager, inductor = smoke["eager/cpu"], smoke["inductor/cpu"]

    def marked(rc):
        return replace(rc, target_device=replace(rc.target_device, count_instructions=True))

    assert "count_instructions" not in json.dumps(serialize_and_pack([eager]))  # exports and hashes unchanged
    assert content_hash(eager, "2.13.0") != content_hash(marked(eager), "2.13.0")
    assert [countable(eager), countable(inductor)] == [True, False]
    ok = CaseResult("ok", None, samples=[1.0] * 5)
    assert case_record(marked(eager), ok, "2.13.0").details.get("gate") == "instructions"
    assert "gate" not in case_record(marked(inductor), ok, "2.13.0").details
    assert "gate" not in case_record(eager, ok, "2.13.0").details


def test_a_run_request_leaves_the_counting_mark_out_for_an_older_worker():
    from benchmark_suites.suite import generate
    from benchtrail.worker.protocol import run_request

    rc = next(rc for rc in generate().select_run_configs(("smoke",)) if rc.name.startswith("mlp.eager"))
    marked = replace(rc, target_device=replace(rc.target_device, count_instructions=True))
    assert run_request(marked).config == run_request(rc).config  # what a worker from before issue 44 reads
