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


def test_a_noisy_series_stops_early():
    draw, _ = _draws(100.0, 100.0, 0.5)
    s = sample_until_settled(lambda: tuple(np.abs(x).tolist() for x in draw()), threshold_pct=5, max_rounds=5)
    assert (s.verdict, s.rounds) == ("noisy", 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"min_rounds": 0}, "min_rounds <= max_rounds"), ({"min_rounds": 4, "max_rounds": 3}, "got 4 and 3"),
    ({"budget_s": 0}, "budget_s must be > 0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sample_until_settled(lambda: ([1.0], [1.0]), threshold_pct=5, **kwargs)


def test_bad_samples_raise():
    with pytest.raises(ValueError, match="head series 0: sample 1 is -1.0"):
        sample_until_settled(lambda: ([1.0, 2.0], [1.0, -1.0]), threshold_pct=5)
