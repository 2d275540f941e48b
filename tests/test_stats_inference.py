import math

import numpy as np
import pytest
from scipy.stats import false_discovery_control, mannwhitneyu

from benchtrail.results import summary
from benchtrail.stats.inference import (
    MIN_SAMPLES,
    NOISE_LIMIT,
    NOISE_RERUN,
    benjamini_hochberg,
    bootstrap_ratio_ci,
    classify,
    compare_samples,
    mann_whitney_p,
    minimum_detectable_effect,
    noise,
)


def noisy(median, n=30, spread=0.01, seed=0):
    return median * (1 + spread * np.random.default_rng(seed).standard_normal(n))


def reference_bootstrap(base, head, level, resamples, seed):
    """Plain Python loop, one median per resample, with the module's seed semantics (indices into the
    samples sorted ascending)."""
    base, head = np.sort(base), np.sort(head)
    rng = np.random.default_rng([seed, len(base), len(head)])
    ib = rng.integers(0, len(base), size=(resamples, len(base)))
    ih = rng.integers(0, len(head), size=(resamples, len(head)))
    ratios = []
    for r in range(resamples):
        ratios.append(np.median(head[ih[r]]) / np.median(base[ib[r]]))
    low, high = np.percentile(ratios, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return np.median(head) / np.median(base), low, high


# -- Mann–Whitney and Benjamini–Hochberg equal scipy ----------------------------------------------

def mixed_series():
    """Series of many shapes: large and small n, ties in some small groups only, integers, all equal."""
    rng = np.random.default_rng(7)
    base = [noisy(100, 30, seed=1), noisy(100, 25, seed=2), rng.uniform(1, 2, 5), np.array([1.0, 2, 2, 3, 4]),
            noisy(50, 3, seed=3), noisy(10, 8, seed=4), np.full(10, 7.0),
            rng.integers(1, 6, 12).astype(float),
            noisy(100, 30, seed=5)]
    head = [noisy(103, 30, seed=6), noisy(100, 31, seed=8), rng.uniform(1.5, 2.5, 6),
            np.array([2.0, 2, 3, 5, 6, 7]),
            noisy(55, 40, seed=9), noisy(12, 9, seed=10), np.full(10, 7.0),
            rng.integers(2, 7, 12).astype(float),
            noisy(130, 30, seed=11)]
    return base, head


def test_p_values_equal_scipy_mannwhitneyu_series_by_series():
    base, head = mixed_series()
    expected = [mannwhitneyu(h, b, alternative="two-sided").pvalue for b, h in zip(base, head)]
    np.testing.assert_array_equal(mann_whitney_p(base, head), expected)


def test_small_groups_choose_exact_or_asymptotic_per_series_like_scipy_auto():
    # Same shapes, one series with ties: a single batched scipy call would use the asymptotic
    # method for both; series by series, the one without ties gets the exact p-value.
    base = [np.array([1.0, 2, 3, 4, 5]), np.array([1.0, 1, 3, 4, 5])]
    head = [np.array([6.0, 7, 8, 9, 10]), np.array([6.0, 7, 8, 9, 9])]
    p = mann_whitney_p(base, head)
    assert p[0] == mannwhitneyu(head[0], base[0], method="exact").pvalue == pytest.approx(2 / 252)
    assert p[1] == mannwhitneyu(head[1], base[1], method="asymptotic").pvalue


def test_bh_equals_scipy_false_discovery_control_and_nan_stays_nan_and_does_not_count():
    p = np.array([0.001, np.nan, 0.04, 0.03, 0.5, np.nan, 0.0002, 1.0])
    q = benjamini_hochberg(p)
    known = ~np.isnan(p)
    np.testing.assert_array_equal(q[known], false_discovery_control(p[known], method="bh"))
    assert np.isnan(q[~known]).all()
    # Family size is the 6 known p-values: the smallest becomes 0.0002 * 6 / 1.
    assert q[6] == pytest.approx(0.0012, rel=1e-12)


def test_bh_of_only_nan_or_nothing_is_nan_or_empty():
    assert np.isnan(benjamini_hochberg(np.array([np.nan, np.nan]))).all()
    assert benjamini_hochberg(np.array([])).shape == (0,)


@pytest.mark.parametrize("bad", [1.5, -0.1, np.inf])
def test_bh_rejects_p_outside_unit_interval(bad):
    with pytest.raises(ValueError, match=r"p-value 1 is .*must lie in \[0, 1\]"):
        benjamini_hochberg(np.array([0.5, bad]))


# -- bootstrap interval ---------------------------------------------------------------------------

def test_bootstrap_interval_matches_python_loop_reference():
    base = [noisy(100, 30, 0.05, seed=1), noisy(100, 31, 0.05, seed=2), noisy(10, 7, 0.2, seed=3),
            noisy(100, 30, 0.05, seed=4)]
    head = [noisy(110, 30, 0.05, seed=5), noisy(95, 20, 0.05, seed=6), noisy(12, 4, 0.2, seed=7),
            noisy(100, 30, 0.05, seed=8)]
    ratio, low, high = bootstrap_ratio_ci(base, head, level=0.95, resamples=500, seed=3)
    for i, (b, h) in enumerate(zip(base, head)):
        expected = reference_bootstrap(b, h, 0.95, 500, 3)
        np.testing.assert_allclose([ratio[i], low[i], high[i]], expected, rtol=1e-12, atol=0)
    assert (low < ratio).all() and (ratio < high).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_interval_agrees_with_scipy_bootstrap_percentile_within_half_a_point(seed):
    """scipy.stats.bootstrap (method="percentile", independent resampling of the two samples) draws
    other random numbers, so the ends differ by Monte Carlo error; with 20,000 resamples each, on
    30 samples with 2% spread, they agree within 0.005 in the ratio (half a percentage point)."""
    from scipy.stats import bootstrap

    b, h = noisy(100, 30, 0.02, seed=seed), noisy(104, 30, 0.02, seed=seed + 10)
    _, low, high = bootstrap_ratio_ci([b], [h], level=0.99, resamples=20_000, seed=seed)
    ref = bootstrap((h, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                    vectorized=True, paired=False, confidence_level=0.99, n_resamples=20_000,
                    method="percentile", rng=np.random.default_rng(seed)).confidence_interval
    assert abs(low[0] - ref.low) < 0.005 and abs(high[0] - ref.high) < 0.005, (low[0], high[0], ref)


def test_bootstrap_interval_of_a_series_does_not_depend_on_the_other_series():
    b, h = noisy(100, 30, 0.05, seed=1), noisy(105, 30, 0.05, seed=2)
    alone = bootstrap_ratio_ci([b], [h], seed=11)
    among = bootstrap_ratio_ci([noisy(1, 12, seed=3), b, noisy(1, 30, seed=4)],
                               [noisy(1, 9, seed=5), h, noisy(1, 30, seed=6)], seed=11)
    np.testing.assert_array_equal(np.array(alone)[:, 0], np.array(among)[:, 1])
    assert bootstrap_ratio_ci([b], [h], seed=12)[1][0] != alone[1][0]


def test_interval_covers_the_true_ratio_about_as_often_as_its_level():
    rng = np.random.default_rng(2024)
    base = 100 * rng.lognormal(0, 0.05, size=(400, 30))
    head = 110 * rng.lognormal(0, 0.05, size=(400, 30))
    _, low, high = bootstrap_ratio_ci(base, head, level=0.90, resamples=1000, seed=0)
    coverage = np.mean((low <= 1.1) & (1.1 <= high))
    assert 0.85 <= coverage <= 0.95, coverage


# -- verdicts ---------------------------------------------------------------------------------------

def test_clear_20_percent_slowdown_with_1_percent_noise_is_regressed_and_different():
    r = compare_samples([noisy(100, seed=1)], [noisy(120, seed=2)], threshold_pct=5, lower_is_better=True)
    assert (r.verdict[0], r.outcome[0], r.reason[0]) == ("regressed", "DIFFERENT", "")
    assert r.ratio[0] == pytest.approx(1.2, abs=0.01)
    assert 1.05 < r.low[0] < r.ratio[0] < r.high[0] < 1.25
    assert r.p[0] == mannwhitneyu(noisy(120, seed=2), noisy(100, seed=1)).pvalue < 1e-10


def test_direction_decides_regressed_or_improved():
    base, fast = [noisy(100, seed=1)], [noisy(80, seed=2)]
    assert compare_samples(base, fast, threshold_pct=5, lower_is_better=True).verdict[0] == "improved"
    # Throughput (higher is better) that drops 20% regressed.
    assert compare_samples(base, fast, threshold_pct=5, lower_is_better=False).verdict[0] == "regressed"
    assert compare_samples(fast, base, threshold_pct=5, lower_is_better=False).verdict[0] == "improved"


def test_a_a_pair_is_similar_and_same_and_a_wide_one_is_inconclusive():
    quiet = compare_samples([noisy(100, seed=1)], [noisy(100, seed=2)], threshold_pct=5, lower_is_better=True)
    assert (quiet.verdict[0], quiet.outcome[0]) == ("similar", "SAME")
    assert quiet.reason[0] == "interval within the threshold"
    wide = compare_samples([noisy(100, 10, 0.05, seed=1)], [noisy(100, 10, 0.05, seed=11)],
                           threshold_pct=2, lower_is_better=True)
    assert (wide.verdict[0], wide.outcome[0]) == ("inconclusive", "UNKNOWN")
    assert wide.low[0] < 0.98 and wide.high[0] > 1.02
    assert wide.reason[0] == "interval crosses the threshold: more samples would settle it"
    # Noise between NOISE_RERUN (10%) and NOISE_LIMIT (25%) is gated but the reason advises a rerun.
    rough = compare_samples([noisy(100, 10, 0.08, seed=2)], [noisy(100, 10, 0.08, seed=12)],
                            threshold_pct=2, lower_is_better=True)
    assert NOISE_RERUN < rough.noise_head[0] < NOISE_LIMIT and rough.outcome[0] == "UNKNOWN"
    assert rough.reason[0] == "interval crosses the threshold; IQR/median above 10%: rerun with more samples"


def test_noise_never_hides_an_interval_that_decides():
    """40% IQR/median on both sides: +50% has its whole interval beyond 5% with q < 0.01 and is regressed;
    +10% has an interval that crosses 5% and is inconclusive. Both carry the noisy label."""
    wild = np.linspace(60.0, 140.0, 31)  # q25 = 80, median = 100, q75 = 120
    assert noise([wild])[0] == pytest.approx(0.40, rel=1e-12)
    r = compare_samples([wild, wild], [wild * 1.5, wild * 1.1], threshold_pct=5, lower_is_better=True)
    assert r.noise_base[0] == pytest.approx(0.4) and r.noise_head[0] == pytest.approx(0.4)
    assert r.low[0] > 1.05 and r.q[0] < 0.01
    assert (r.verdict[0], r.outcome[0], r.reason[0]) == ("regressed", "DIFFERENT", "")
    assert r.low[1] < 1.05 < r.high[1]
    assert (r.verdict[1], r.outcome[1]) == ("inconclusive", "UNKNOWN")
    assert r.reason[1] == f"interval crosses the threshold; IQR/median above {NOISE_LIMIT:.0%} on a side (noisy): " \
                          "rerun on a quieter machine"
    assert r.noisy.tolist() == [True, True]


def test_noise_is_iqr_over_median_as_in_summary():
    samples = [noisy(100, 30, 0.05, seed=1), noisy(3, 7, 0.02, seed=2), np.array([5.0])]
    expected = [summary.summarize(s)["iqr"] / summary.summarize(s)["median"] for s in samples]
    np.testing.assert_allclose(noise(samples), expected, rtol=1e-15)
    assert noise(samples)[2] == 0.0


def test_classify_precedence_row_by_row():
    # threshold 5%, lower is better, alpha 0.01
    rows = [  # (low, high, q, noise_base, noise_head) -> (verdict, outcome, noisy)
        ((1.10, 1.20, 1e-6, 0.01, 0.01), ("regressed", "DIFFERENT", False)),
        ((0.80, 0.90, 1e-6, 0.01, 0.01), ("improved", "DIFFERENT", False)),
        ((1.10, 1.20, 0.02, 0.01, 0.01), ("inconclusive", "UNKNOWN", False)),  # beyond, q too large
        ((0.97, 1.04, 0.50, 0.01, 0.01), ("similar", "SAME", False)),
        ((1.01, 1.04, 1e-6, 0.01, 0.01), ("similar", "SAME", False)),  # real but below threshold
        ((1.02, 1.08, 1e-6, 0.01, 0.01), ("inconclusive", "UNKNOWN", False)),  # crosses the threshold
        ((1.10, 1.20, 1e-6, 0.30, 0.01), ("regressed", "DIFFERENT", True)),  # noisy, but the interval decides
        ((1.02, 1.20, 1e-6, 0.30, 0.01), ("inconclusive", "UNKNOWN", True)),  # noisy and undecided
        ((np.nan, np.nan, np.nan, 0.0, 0.0), ("insufficient-samples", "UNKNOWN", False)),
        ((1.05, 1.05, 1e-6, 0.0, 0.0), ("similar", "SAME", False)),  # bounds are inclusive for SAME
        ((0.99, 1.01, 1e-6, 0.30, 0.30), ("similar", "SAME", True)),  # noisy, yet the interval is within
    ]
    low, high, q, nb, nh = (np.array(c) for c in zip(*(r[0] for r in rows)))
    verdict, outcome, reason, noisy_ = classify((low + high) / 2, low, high, q, nb, nh, 5.0, True)
    assert list(zip(verdict, outcome, noisy_.tolist())) == [r[1] for r in rows]
    assert reason[2] == "interval beyond the threshold but q >= alpha: more samples would settle it"
    assert reason[8] == f"fewer than {MIN_SAMPLES} samples on a side: no interval"
    # Per-series thresholds and directions.
    per = classify(np.ones(2) * 1.15, np.ones(2) * 1.1, np.ones(2) * 1.2, np.full(2, 1e-6), np.zeros(2),
                   np.zeros(2), np.array([5.0, 25.0]), np.array([True, False]))
    assert list(zip(per.verdict, per.outcome)) == [("regressed", "DIFFERENT"), ("similar", "SAME")]


# -- minimum detectable effect ----------------------------------------------------------------------

def test_minimum_detectable_effect_is_the_normal_approximation_from_iqr_and_n():
    # n = 25, median 100, IQR 13.49 (robust sigma 10.0006) on both sides.
    x = 100 + 6.745 * (np.arange(25) - 12) / 6
    sigma_rel = 13.49 / (2 * 0.6744897501960817) / 100
    expected = 100 * 2.5758293035489004 * math.sqrt(math.pi / 2 * 2 * sigma_rel ** 2 / 25)
    assert minimum_detectable_effect([x], [x])[0] == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(9.1312, abs=1e-3)
    assert minimum_detectable_effect([x], [x], level=0.95)[0] == pytest.approx(expected * 1.959964 / 2.575829,
                                                                                rel=1e-6)


def test_minimum_detectable_effect_is_close_to_the_bootstrap_half_width_for_large_n():
    base, head = [noisy(100, 400, 0.05, seed=1)], [noisy(100, 400, 0.05, seed=2)]
    _, low, high = bootstrap_ratio_ci(base, head, resamples=2000)
    half_width_pct = 100 * (high[0] - low[0]) / 2
    assert minimum_detectable_effect(base, head)[0] == pytest.approx(half_width_pct, rel=0.2)


# -- bad input ---------------------------------------------------------------------------------------

def test_one_sample_per_side_gives_ratio_but_no_interval_no_test_and_unknown():
    r = compare_samples([np.array([100.0]), noisy(100, seed=1)], [np.array([130.0]), noisy(100, seed=2)],
                        threshold_pct=5, lower_is_better=True)
    assert r.ratio[0] == 1.3
    assert np.isnan([r.low[0], r.high[0], r.p[0], r.q[0], r.mde_pct[0]]).all()
    assert (r.verdict[0], r.outcome[0]) == ("insufficient-samples", "UNKNOWN")
    assert r.reason[0] == "fewer than 2 samples on a side: no interval"
    assert r.q[1] == r.p[1]  # the NaN row does not count towards the family
    assert r.outcome[1] == "SAME"


def test_all_samples_equal_on_both_sides_give_ratio_one_interval_one_and_p_one():
    same = [np.full(30, 5.0)]
    ratio, low, high = bootstrap_ratio_ci(same, same)
    assert (ratio[0], low[0], high[0]) == (1.0, 1.0, 1.0)
    assert mann_whitney_p(same, same)[0] == 1.0
    r = compare_samples(same, same, threshold_pct=0, lower_is_better=True)
    assert (r.verdict[0], r.outcome[0], r.mde_pct[0], r.noise_base[0]) == ("similar", "SAME", 0.0, 0.0)


def everything(base, head):
    bootstrap_ratio_ci(base, head, resamples=10)
    mann_whitney_p(base, head)
    minimum_detectable_effect(base, head)
    compare_samples(base, head, threshold_pct=5, lower_is_better=True, resamples=10)


@pytest.mark.parametrize("bad", [0.0, -3.0])
def test_zero_or_negative_time_is_an_error_naming_the_series(bad):
    head = [noisy(100, seed=1), noisy(100, seed=2), noisy(100, seed=3)]
    head[2][4] = bad
    base = [noisy(100, seed=4)] * 3
    with pytest.raises(ValueError, match=rf"^head series 2: sample 4 is {bad}; samples must be > 0"):
        everything(base, head)
    with pytest.raises(ValueError, match=rf"^series 2: sample 4 is {bad}; samples must be > 0"):
        noise(head)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_sample_is_an_error_naming_the_series(bad):
    base = [noisy(100, seed=1), noisy(100, 12, seed=2)]
    base[1][0] = bad
    with pytest.raises(ValueError, match=rf"^base series 1: sample 0 is {bad}; samples must be finite"):
        everything(base, [noisy(100, seed=3)] * 2)


def test_mismatched_series_counts_are_an_error():
    with pytest.raises(ValueError, match="base has 2 series and head has 1"):
        everything([noisy(100, seed=1)] * 2, [noisy(100, seed=2)])


@pytest.mark.parametrize("sample, message", [
    (np.array([]), "base series 0: no samples"),
    (np.ones((2, 3)), r"base series 0: expected a 1-D array of samples, got shape \(2, 3\)"),
    (["fast"], "base series 0: samples must be numbers"),
])
def test_empty_or_malformed_series_is_an_error(sample, message):
    with pytest.raises(ValueError, match=message):
        everything([sample], [noisy(100)])


@pytest.mark.parametrize("kwargs, message", [
    ({"level": 1.0}, "level must be a number strictly between 0 and 1"),
    ({"resamples": 0}, "resamples must be an int >= 1"),
    ({"seed": -1}, "seed must be an int >= 0"),
])
def test_bootstrap_arguments_out_of_range_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ratio_ci([noisy(100)], [noisy(100)], **kwargs)


def test_classify_rejects_mismatched_shapes_and_negative_thresholds():
    one = np.ones(3)
    with pytest.raises(ValueError, match=r"q has shape \(2,\), ratio has \(3,\)"):
        classify(one, one, one, np.ones(2), one, one, 5.0, True)
    with pytest.raises(ValueError, match="threshold_pct must be finite and >= 0"):
        classify(one, one, one, one, one, one, -1.0, True)
    with pytest.raises(ValueError, match="alpha must be a number strictly between 0 and 1"):
        classify(one, one, one, one, one, one, 5.0, True, alpha=0)


def test_no_series_gives_empty_results():
    r = compare_samples([], [], threshold_pct=5, lower_is_better=True)
    assert r.ratio.shape == r.q.shape == r.verdict.shape == (0,)


# -- clustered samples (several worker processes per side) ----------------------------------------

def _process_effect_sides(series=300, k=3, m=10, between=0.03, within=0.005, seed=5):
    """A/A samples of ``k`` processes × ``m`` samples whose process medians differ by ``between`` (sd)."""
    rng = np.random.default_rng(seed)

    def side():
        offset = 1 + between * rng.standard_normal((series, k, 1))
        return (100 * offset * (1 + within * rng.standard_normal((series, k, m)))).reshape(series, k * m)
    return side(), side()


def test_two_stage_bootstrap_widens_intervals_when_processes_differ_and_cuts_false_alarms():
    base, head = _process_effect_sides()
    k = np.full(len(base), 3)
    plain = compare_samples(base, head, threshold_pct=2, lower_is_better=True)
    clustered = compare_samples(base, head, threshold_pct=2, lower_is_better=True, base_clusters=k,
                                head_clusters=k)
    alarms = lambda r: np.isin(r.verdict, ["regressed", "improved"]).mean()  # noqa: E731
    covers = lambda r: ((r.low <= 1) & (r.high >= 1)).mean()  # noqa: E731
    assert alarms(plain) > 0.05 and alarms(clustered) < alarms(plain) / 3  # 6.3% and 1.7% on these samples
    assert covers(clustered) > covers(plain) + 0.1  # 88.7% against 72% (nominal 99%: 3 clusters are few)
    np.testing.assert_array_equal(clustered.ratio, plain.ratio)  # the point estimate does not change
    np.testing.assert_allclose(clustered.mde_pct, 50 * (clustered.high - clustered.low))


def test_two_stage_bootstrap_matches_a_python_loop():
    base, head = _process_effect_sides(series=2, k=3, m=4)
    head = head[:, :8]  # 2 clusters of 4 on the head side
    ratio, low, high = bootstrap_ratio_ci(base, head, level=0.9, resamples=300, seed=4,
                                          base_clusters=np.array([3, 3]), head_clusters=np.array([2, 2]))
    rng = np.random.default_rng([4, 12, 8, 3, 2])

    def indices(n, k):
        chosen = rng.integers(0, k, size=(300, k, 1))
        return (chosen * (n // k) + rng.integers(0, n // k, size=(300, k, n // k))).reshape(300, n)
    ib, ih = indices(12, 3), indices(8, 2)
    for i in range(2):
        ratios = [np.median(head[i][ih[r]]) / np.median(base[i][ib[r]]) for r in range(300)]
        np.testing.assert_allclose([low[i], high[i]], np.percentile(ratios, [5, 95]), rtol=1e-12)
        assert ratio[i] == np.median(head[i]) / np.median(base[i])


@pytest.mark.parametrize("clusters, message", [
    (np.array([4]), "base series 0: 30 samples do not split into 4 equal clusters"),
    (np.array([0]), "base clusters must be one int >= 1 per series"),
    (np.array([1, 1]), "base clusters must be one int >= 1 per series \\(1\\)"),
    (np.array([1.5]), "base clusters must be one int"),
])
def test_bad_clusters_are_errors(clusters, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ratio_ci([noisy(1, 30)], [noisy(1, 30)], base_clusters=clusters)
