"""Adaptive sampling: rounds are added while the comparison is UNKNOWN, within rounds and time budgets."""

import itertools

import numpy as np
import pytest

from benchtrail.runner.adaptive import sample_until_settled


def _draws(base_median, head_median, spread, n=10, seed=0):
    rng = np.random.default_rng(seed)
    calls = []

    def draw():
        calls.append(1)
        return (list(base_median * (1 + spread * rng.standard_normal(n))),
                list(head_median * (1 + spread * rng.standard_normal(n))))
    return draw, calls


def test_a_clear_regression_stops_after_the_first_round():
    draw, calls = _draws(100.0, 120.0, 0.01)
    s = sample_until_settled(draw, threshold_pct=5, max_rounds=5)
    assert (s.outcome, s.verdict, s.rounds, len(calls)) == ("DIFFERENT", "regressed", 1, 1)
    assert len(s.base) == len(s.head) == 10 and 1.19 < s.inference.ratio[0] < 1.21


def test_no_change_with_little_noise_is_same_after_one_round():
    draw, _ = _draws(100.0, 100.0, 0.002)
    s = sample_until_settled(draw, threshold_pct=5, max_rounds=5)
    assert (s.outcome, s.verdict, s.rounds) == ("SAME", "similar", 1)


def test_an_inconclusive_change_draws_up_to_max_rounds():
    draw, calls = _draws(100.0, 104.0, 0.05)  # a 4% change against a 5% threshold with 5% noise
    s = sample_until_settled(draw, threshold_pct=5, max_rounds=3)
    assert (s.outcome, s.rounds, len(calls), len(s.head)) == ("UNKNOWN", 3, 3, 30)


def test_min_rounds_are_always_drawn():
    draw, _ = _draws(100.0, 120.0, 0.01)
    assert sample_until_settled(draw, threshold_pct=5, min_rounds=3, max_rounds=5).rounds == 3


def test_budget_stops_before_a_new_round():
    draw, _ = _draws(100.0, 104.0, 0.05)
    ticks = itertools.count(0.0, 10.0)  # start at 0 s, then 10 s after round 1 (< 15), 20 s after round 2
    s = sample_until_settled(draw, threshold_pct=5, max_rounds=10, budget_s=15, clock=lambda: next(ticks))
    assert s.rounds == 2 and s.outcome == "UNKNOWN"


def test_noise_does_not_stop_the_rounds_only_a_decision_does():
    """50% noise on both sides of a +100% change: the first round is not decided and rounds are added until
    the interval decides (before issue 38 a noisy verdict stopped the loop after one round)."""
    draw, calls = _draws(100.0, 200.0, 0.5, n=4, seed=3)
    s = sample_until_settled(lambda: tuple(np.abs(x).tolist() for x in draw()), threshold_pct=5,
                             max_rounds=20)
    assert (s.verdict, s.outcome, s.stop) == ("regressed", "DIFFERENT", "decided")
    assert bool(s.inference.noisy[0]) and 1 < s.rounds < 20 and len(calls) == s.rounds


def _budgeted(draw, budget_s=100.0, round_s=10.0, **kwargs):
    """A budgeted sequential run whose rounds each take ``round_s`` seconds of a fake clock."""
    ticks = itertools.count(0.0, round_s)
    return sample_until_settled(draw, threshold_pct=5, max_rounds=None, budget_s=budget_s, sequential=True,
                                clock=lambda: next(ticks), **kwargs)


def test_a_budgeted_run_without_a_cap_runs_until_its_budget_and_the_last_look_spends_what_is_left():
    """A 4% change with 5% noise against a 5% threshold never decides: rounds go on past the old cap of 6
    until the budget (10 rounds of 10 s), and the last look's level is 1 minus the alpha not yet spent."""
    from benchtrail.stats.sequential import budget_alpha

    draw, calls = _draws(100.0, 104.0, 0.05)
    s = _budgeted(draw)
    assert (s.outcome, s.verdict, s.stop, s.rounds, len(calls)) == ("UNKNOWN", "inconclusive", "budget", 10,
                                                                    10)
    # Round k ends at 10k s (information time k/10). Round 1 is the first look; a later look spends at least
    # a tenth of alpha: Pocock-type spending gives 0.159, 0.295, 0.416, 0.523 of alpha by rounds 1 to 4, then
    # looks at rounds 6 and 8 (0.709, 0.865); rounds 5, 7 and 9 would spend less than a tenth and are not
    # looks; round 10 ends the budget and its look spends the rest.
    spent = float(budget_alpha(0.8, 0.01))
    assert s.level == pytest.approx(1.0 - (0.01 - spent), abs=1e-12)


def test_a_budgeted_run_stops_at_the_first_look_that_decides_same_however_little_it_may_spend():
    """The first look comes at min_rounds (here round 1, at 1% of a 1000 s budget), spending alpha(0.01)."""
    draw, calls = _draws(100.0, 100.0, 0.002)
    s = _budgeted(draw, budget_s=1000.0)
    assert (s.outcome, s.verdict, s.stop, len(calls)) == ("SAME", "similar", "decided", 1)
    assert s.level == pytest.approx(1.0 - float(np.log1p((np.e - 1) * 0.01)) * 0.01, abs=1e-12)


def test_without_a_round_cap_the_run_must_be_sequential_within_a_finite_budget():
    draw, _ = _draws(100.0, 100.0, 0.002)
    for kwargs in ({"sequential": False, "budget_s": 10.0}, {"sequential": True}):
        with pytest.raises(ValueError,
                           match="without max_rounds, sampling must be sequential within a finite"):
            sample_until_settled(draw, threshold_pct=5, max_rounds=None, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"min_rounds": 0}, "min_rounds <= max_rounds"), ({"min_rounds": 4, "max_rounds": 3}, "got 4 and 3"),
    ({"budget_s": 0}, "budget_s must be > 0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sample_until_settled(lambda: ([1.0], [1.0]), threshold_pct=5, **kwargs)


def test_bad_samples_raise():
    with pytest.raises(ValueError, match=r"head series 0: sample 1 is -1.0"):
        sample_until_settled(lambda: ([1.0, 2.0], [1.0, -1.0]), threshold_pct=5)


def test_same_spends_no_alpha_and_is_judged_at_99_percent_at_every_look():
    """2% noise, no change, a 5% rule: the first look's interval at its spent level (about 99.997%) crosses the
    threshold but the 99% one lies within it: SAME at that look, reported at 99% (stopping for SAME cannot raise
    the false-alarm rate)."""
    draw, calls = _draws(100.0, 100.0, 0.02, n=10, seed=0)
    s = _budgeted(draw, budget_s=1000.0, round_s=2.0, min_rounds=1)
    assert (s.outcome, s.verdict, s.stop, len(calls), s.level) == ("SAME", "similar", "decided", 1, 0.99)
