"""Sequential sampling's error control (``benchtrail.stats.sequential``) and its use in the adaptive loop,
on synthetic samples with known answers."""

import math

import numpy as np
import pytest

from benchtrail.runner.adaptive import sample_until_settled
from benchtrail.stats.sequential import look_alphas, pocock_spending


def test_pocock_spending_is_zero_at_the_start_alpha_at_the_end_and_the_closed_form_between():
    assert pocock_spending(0.0, 0.01) == 0.0
    assert pocock_spending(1.0, 0.01) == pytest.approx(0.01, rel=1e-12)
    # Lan & DeMets (1983): alpha * ln(1 + (e - 1) t); at t = 1/2: 0.01 * ln((1 + e) / 2) = 0.0062011...
    assert pocock_spending(0.5, 0.01) == pytest.approx(0.01 * math.log((1 + math.e) / 2), rel=1e-12)
    assert pocock_spending(0.5, 0.01) == pytest.approx(0.0062011, abs=1e-7)


def test_looks_share_alpha_front_loaded():
    looks = look_alphas(10, 0.01)
    assert looks.shape == (10,) and looks.sum() == pytest.approx(0.01, rel=1e-12)
    assert looks[0] == pytest.approx(0.01 * math.log1p((math.e - 1) / 10), rel=1e-12)  # 0.001581
    assert (np.diff(looks) < 0).all()  # each look spends less than the one before (Pocock type)
    assert look_alphas(1, 0.01).tolist() == [pytest.approx(0.01)]


@pytest.mark.parametrize("bad", [{"max_looks": 0, "alpha": 0.01}, {"max_looks": 3, "alpha": 0.0},
                                 {"max_looks": 3, "alpha": 1.0}])
def test_bad_arguments_raise(bad):
    with pytest.raises(ValueError):
        look_alphas(**bad)
    with pytest.raises(ValueError, match="information fractions"):
        pocock_spending(1.5, 0.01)


def _aa_draw(seed: int, pairs: int = 5):
    """A/A paired rounds: both sides the same 100 µs with 1% independent normal noise."""
    rng = np.random.default_rng(seed)
    return lambda: (list(100 * (1 + 0.01 * rng.standard_normal(pairs))),
                    list(100 * (1 + 0.01 * rng.standard_normal(pairs))))


def test_a_sequential_loop_uses_each_looks_level_and_says_which():
    rng = np.random.default_rng(1)

    def draw():
        base = 100 * (1 + 0.01 * rng.standard_normal(10))
        return list(base), list(1.5 * base)  # +50%: every pair ratio is 1.5

    # 4 looks: the first may use 0.00357, above the smallest two-sided Wilcoxon p of 10 pairs (2/2^10).
    settled = sample_until_settled(draw, threshold_pct=2, paired=True, sequential=True, max_rounds=4)
    assert (settled.rounds, settled.verdict) == (1, "regressed")
    assert settled.level == pytest.approx(1 - look_alphas(4, 0.01)[0])
    # 12 looks: the first may use only 0.00158, below that smallest p; the second look decides.
    settled = sample_until_settled(draw, threshold_pct=2, paired=True, sequential=True, max_rounds=12)
    assert (settled.rounds, settled.verdict) == (2, "regressed")
    assert settled.level == pytest.approx(1 - look_alphas(12, 0.01)[1])
    flat = sample_until_settled(_aa_draw(2), threshold_pct=2, paired=True, sequential=True, min_rounds=2,
                                max_rounds=6)
    assert flat.level == pytest.approx(1 - look_alphas(5, 0.01)[flat.rounds - 2])
    assert sample_until_settled(_aa_draw(2), threshold_pct=2, paired=True,
                                max_rounds=6).level == pytest.approx(0.99)


# -- the compare stage judges a paired run at its last look's level
# -------------------------------------------


def _paired_records(level=None):
    """8 pairs, head 20% slower in every pair: Wilcoxon's two-sided p is exactly 2/2^8 = 0.0078."""
    from tests.helpers.records import record

    base = 1000.0 * (1 + 0.01 * np.sin(np.arange(8)))
    head = base * 1.2 * (1 + 0.005 * np.cos(np.arange(8)))
    ab = {"rounds": 1, "orders": [["base", "head"]], "outcome": "DIFFERENT", "elapsed_s": 1.0}
    ab = {**ab, "level": level} if level is not None else ab
    return record("a", base, ab=ab), record("a", head, ab=ab)


def test_a_paired_run_is_judged_at_its_last_looks_level_and_one_without_a_level_at_99_percent():
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.compare.tables import change_cell
    from benchtrail.compare.verdicts import compare
    from tests.helpers.records import results

    def row(level):
        base, head = _paired_records(level)
        (r,) = compare([results(base)], [results(head)], load_thresholds())
        return r

    old = row(None)  # a run from before sequential sampling: 99%, and p = 0.0078 < 0.01
    assert (old.verdict, old.outcome) == ("regressed", "DIFFERENT") and old.q_value == pytest.approx(2 / 2**8)
    figures = ("verdict", "outcome", "change", "ci_low", "ci_high", "q_value", "mde")
    assert [getattr(row(0.99), k) for k in figures] == [getattr(old, k) for k in figures]
    # The first of two looks has alpha 0.0062 (look_alphas(2, 0.01)[0]): p = 0.0078 cannot reach it.
    first = row(1 - float(look_alphas(2, 0.01)[0]))
    assert first.verdict != "regressed" and first.outcome == "UNKNOWN"
    assert first.ci_low <= old.ci_low and first.ci_high >= old.ci_high  # a higher level: an interval as wide
    assert change_cell(first).endswith(", paired at 99.38%") and change_cell(old).endswith(", paired")
