"""Head against base for *paired* samples: sample j of base and sample j of head were taken close
together in time (interleaved), so a slow spell of the machine hits both.

The unpaired comparison (:mod:`benchtrail.stats.inference`) sees such a spell as spread on both
sides and its interval widens until nothing is decided. Paired, each pair's ratio ``head_j / base_j``
cancels what the two samples shared, and the comparison is made on those ratios: the point
estimate is the median pair ratio, the interval a percentile bootstrap of that median over pairs
(two-stage over clusters, e.g. the rounds of a paired A/B run, when given), the test the Wilcoxon
signed-rank test on the log ratios (``scipy.stats.wilcoxon``), Benjamini–Hochberg over the series,
the noise guard on IQR/median of the pair ratios, and :func:`benchtrail.stats.inference.classify`.
The ratio estimated is the median of ``head_j / base_j``, which for a constant slowdown equals the
ratio of medians of the unpaired comparison.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import wilcoxon

from benchtrail.stats.estimators import (
    MIN_SAMPLES,
    ClustersLike,
    SamplesLike,
    _as_clusters,
    _check_bootstrap_args,
    _sides,
    _tails,
    _two_stage_indices,
    benjamini_hochberg,
)
from benchtrail.stats.inference import Inference, classify


def compare_paired(base: SamplesLike, head: SamplesLike, *, threshold_pct: npt.ArrayLike,
                   lower_is_better: npt.ArrayLike, level: float = 0.99, resamples: int = 2000, seed: int = 0,
                   alpha: float = 0.01, clusters: ClustersLike = None) -> Inference:
    """Compare paired samples series by series; same results as ``compare_samples``.

    Args:
        base, head: one 1-D array per series, ``base[i][j]`` paired with ``head[i][j]`` (same length;
            any unit, the same on both sides, > 0 and finite).
        clusters: None, or one int per series: its pairs form that many equal consecutive clusters
            (rounds), resampled in two stages as in ``bootstrap_ratio_ci``.
        threshold_pct, lower_is_better, level, resamples, seed, alpha: as ``compare_samples``.

    Returns:
        :class:`Inference` of arrays of shape (series,): ``ratio`` the median pair ratio, ``low``/``high``
        its interval, ``p`` Wilcoxon's two-sided p-value (1.0 when every pair ratio is 1; NaN with
        fewer than ``MIN_SAMPLES`` pairs), ``noise_base`` = ``noise_head`` = IQR/median of the pair
        ratios, ``mde_pct`` half the interval's width in percent.

    Raises:
        ValueError: sides of different lengths, bad samples or clusters (as ``compare_samples``).
    """
    _check_bootstrap_args(level, resamples, seed)
    b, h = _sides(base, head)
    k = _as_clusters(clusters, b, "pair")
    ratio, low, high, p, spread = (np.full(len(b), np.nan) for _ in range(5))
    for i, (x, y) in enumerate(zip(b, h)):
        if x.size != y.size:
            raise ValueError(f"series {i}: {x.size} base and {y.size} head samples; paired samples come "
                             "in pairs")
        d = np.log(y) - np.log(x)
        ratio[i] = np.exp(np.median(d))
        q25, q50, q75 = np.percentile(np.exp(d), [25, 50, 75])
        spread[i] = (q75 - q25) / q50
        if d.size < MIN_SAMPLES:
            continue
        rng = np.random.default_rng([seed, d.size, int(k[i])])
        medians = np.median(d[_two_stage_indices(rng, d.size, int(k[i]), resamples)], axis=1)
        low[i], high[i] = np.exp(np.percentile(medians, _tails(level)))
        p[i] = 1.0 if not d.any() else wilcoxon(d).pvalue
    q = benjamini_hochberg(p)
    return Inference(ratio, low, high, p, q, spread, spread.copy(), 50.0 * (high - low),
                     *classify(ratio, low, high, q, spread, spread, threshold_pct, lower_is_better, alpha))
