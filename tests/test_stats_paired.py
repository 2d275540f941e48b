"""Paired comparison: pair ratios cancel a slow spell that both sides of a pair share."""

import numpy as np
import pytest
from scipy.stats import wilcoxon

from benchtrail.stats.inference import compare_samples
from benchtrail.stats.paired import compare_paired


def _drifting_pairs(slowdown, n=30, seed=0):
    """Pairs taken on a machine whose speed drifts by up to 25% over time; head is ``slowdown`` slower."""
    rng = np.random.default_rng(seed)
    machine = 1 + 0.25 * (np.sin(np.linspace(0, 6, n)) > 0.3) + 0.003 * rng.standard_normal(n)
    base = 1000 * machine * (1 + 0.003 * rng.standard_normal(n))
    head = 1000 * (1 + slowdown) * machine * (1 + 0.003 * rng.standard_normal(n))
    return base, head


def test_a_five_percent_slowdown_under_drift_is_regressed_paired_and_unsettled_unpaired():
    base, head = _drifting_pairs(0.05)
    paired = compare_paired([base], [head], threshold_pct=2, lower_is_better=True)
    unpaired = compare_samples([base], [head], threshold_pct=2, lower_is_better=True)
    assert (paired.verdict[0], paired.outcome[0]) == ("regressed", "DIFFERENT")
    assert 1.04 < paired.low[0] < paired.ratio[0] < paired.high[0] < 1.06
    assert unpaired.verdict[0] == "inconclusive" and unpaired.outcome[0] == "UNKNOWN"


def test_no_change_under_drift_is_same_paired():
    base, head = _drifting_pairs(0.0, seed=1)
    result = compare_paired([base], [head], threshold_pct=2, lower_is_better=True)
    assert (result.verdict[0], result.outcome[0]) == ("similar", "SAME")
    assert result.noise_base[0] < 0.01  # IQR/median of the pair ratios, not of the drifting sides


def test_p_value_is_scipy_wilcoxon_on_the_log_ratios():
    base, head = _drifting_pairs(0.01, seed=2)
    result = compare_paired([base, head], [head, base], threshold_pct=2, lower_is_better=True)
    assert result.p[0] == wilcoxon(np.log(head) - np.log(base)).pvalue
    assert result.p[1] == wilcoxon(np.log(base) - np.log(head)).pvalue
    assert result.ratio[0] == pytest.approx(np.exp(np.median(np.log(head / base))))


def test_equal_pairs_give_ratio_one_and_p_one_and_one_pair_gives_no_interval():
    result = compare_paired([[5.0] * 10, [3.0]], [[5.0] * 10, [4.0]], threshold_pct=2, lower_is_better=True)
    assert (result.ratio[0], result.low[0], result.high[0], result.p[0]) == (1.0, 1.0, 1.0, 1.0)
    assert result.outcome[0] == "SAME"
    assert np.isnan(result.low[1]) and np.isnan(result.p[1]) and result.outcome[1] == "UNKNOWN"


def test_round_clusters_resample_whole_rounds():
    rng = np.random.default_rng(3)
    base = 1000 * (1 + 0.002 * rng.standard_normal(30))
    head = base * np.repeat([1.00, 1.06, 1.03], 10) * (1 + 0.002 * rng.standard_normal(30))
    alone = compare_paired([base], [head], threshold_pct=2, lower_is_better=True)
    rounds = compare_paired([base], [head], threshold_pct=2, lower_is_better=True, clusters=np.array([3]))
    # Rounds at 0%, 6% and 3%: resampling whole rounds can draw the 0% round three times, so the
    # interval reaches down to no change; pair by pair it stays above it.
    assert rounds.low[0] < 1.0 < alone.low[0]
    assert rounds.high[0] - rounds.low[0] > alone.high[0] - alone.low[0]


@pytest.mark.parametrize("base, head, message", [
    ([[1.0, 2.0]], [[1.0]], "series 0: 2 base and 1 head samples; paired samples come in pairs"),
    ([[1.0, -2.0]], [[1.0, 2.0]], "base series 0: sample 1 is -2.0"),
    ([[1.0]], [[1.0], [2.0]], "base has 1 series and head has 2"),
])
def test_bad_input(base, head, message):
    with pytest.raises(ValueError, match=message):
        compare_paired(base, head, threshold_pct=2, lower_is_better=True)
