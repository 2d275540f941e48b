"""Head against base for *paired* samples: sample j of each side taken close in time, so a slow spell
hits both and the pair ratio ``head_j / base_j`` cancels it. docs/statistics.md ("Paired samples") has
the method: median pair ratio, bootstrap over pairs, Wilcoxon signed-rank test on the log ratios.
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


def compare_paired(
    base: SamplesLike,
    head: SamplesLike,
    *,
    threshold_pct: npt.ArrayLike,
    lower_is_better: npt.ArrayLike,
    level: float = 0.99,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.01,
    clusters: ClustersLike = None,
) -> Inference:
    """``compare_samples`` on pairs: ``base[i][j]`` pairs with ``head[i][j]``; ``clusters`` (None, or one int
    per series) splits a series' pairs into equal consecutive rounds for a two-stage bootstrap.

    Returns an :class:`Inference` of (series,) arrays: ``ratio`` the median pair ratio, ``p`` Wilcoxon's
    two-sided (1.0 when every pair ratio is 1), ``noise_base`` = ``noise_head`` = IQR/median of the pair
    ratios, ``mde_pct`` half the interval's width in percent. ValueError: sides of different lengths, bad
    samples or clusters.
    """
    _check_bootstrap_args(level, resamples, seed)
    b, h = _sides(base, head)
    k = _as_clusters(clusters, b, "pair")
    ratio, low, high, p, spread = (np.full(len(b), np.nan) for _ in range(5))
    for i, (x, y) in enumerate(zip(b, h)):
        if x.size != y.size:
            raise ValueError(
                f"series {i}: {x.size} base and {y.size} head samples; paired samples come in pairs"
            )
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
    return Inference(
        ratio,
        low,
        high,
        p,
        q,
        spread,
        spread.copy(),
        50.0 * (high - low),
        *classify(ratio, low, high, q, spread, spread, threshold_pct, lower_is_better, alpha),
    )
