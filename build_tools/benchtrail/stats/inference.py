"""Head against base for many series at once: the verdict. :func:`compare_samples` runs the estimators in
one pass and :func:`classify` turns them into a verdict per series; arrays have shape ``(series,)``. The
estimators are re-exported here, so callers import the whole comparison from one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from benchtrail.stats.estimators import (
    MIN_SAMPLES,
    ClustersLike,
    SamplesLike,
    _bootstrap,
    _check_bootstrap_args,
    _check_fraction,
    _mann_whitney,
    _mde,
    _noise,
    _prepare,
    benjamini_hochberg,
    bootstrap_ratio_ci,
    mann_whitney_p,
    minimum_detectable_effect,
    noise,
)

__all__ = [
    "MIN_SAMPLES",
    "NOISE_LIMIT",
    "NOISE_RERUN",
    "Classification",
    "Inference",
    "SamplesLike",
    "benjamini_hochberg",
    "bootstrap_ratio_ci",
    "classify",
    "compare_samples",
    "mann_whitney_p",
    "minimum_detectable_effect",
    "noise",
]

#: Noise is IQR / median of one side's samples. Above NOISE_RERUN a rerun with more samples is
#: advised; above NOISE_LIMIT a row is labelled ``noisy`` (beside its verdict, which the interval decides).
NOISE_RERUN = 0.10
NOISE_LIMIT = 0.25


class Classification(NamedTuple):
    """Per-series arrays of shape (series,): strings, and ``noisy`` bool."""

    verdict: np.ndarray  # "regressed" | "improved" | "similar" | "inconclusive" | "insufficient-samples"
    outcome: np.ndarray  # "DIFFERENT" | "SAME" | "UNKNOWN"
    reason: np.ndarray  # one short sentence; "" for DIFFERENT rows
    noisy: np.ndarray  # either side's IQR/median above NOISE_LIMIT


def classify(
    ratio: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    q: npt.ArrayLike,
    noise_base: npt.ArrayLike,
    noise_head: npt.ArrayLike,
    threshold_pct: npt.ArrayLike,
    lower_is_better: npt.ArrayLike,
    alpha: float = 0.01,
) -> Classification:
    """Verdict and outcome per series from the interval and the q-value; the noise only labels.

    With ``t = threshold_pct / 100`` (>= 0, scalar or (series,), like ``lower_is_better``):
    ``regressed`` / DIFFERENT: the interval lies wholly beyond ``1 + t`` (below ``1 - t`` when higher is
    better) and ``q < alpha``, ``improved`` symmetric; ``insufficient-samples`` / UNKNOWN: no interval;
    ``similar`` / SAME: the interval within ``[1 - t, 1 + t]``; else ``inconclusive`` / UNKNOWN.
    Outcome names as in Chromium Pinpoint. Other arrays (series,), ``q`` may be NaN.

    Raises:
        ValueError: arrays of different shapes, a negative or non-finite threshold, alpha out of range.
    """
    ratio = np.asarray(ratio, dtype=np.float64)
    arrays = [np.asarray(value, dtype=np.float64) for value in (low, high, q, noise_base, noise_head)]
    for name, value in zip(("low", "high", "q", "noise_base", "noise_head"), arrays):
        if value.shape != ratio.shape:
            raise ValueError(
                f"{name} has shape {value.shape}, ratio has {ratio.shape}; pass one value per series"
            )
    _check_fraction("alpha", alpha)
    try:
        t = np.broadcast_to(np.asarray(threshold_pct, dtype=np.float64), ratio.shape) / 100.0
        lib = np.broadcast_to(np.asarray(lower_is_better, dtype=bool), ratio.shape)
    except ValueError:
        raise ValueError(
            f"threshold_pct and lower_is_better must be scalars or of shape {ratio.shape}"
        ) from None
    if not (np.isfinite(t) & (t >= 0)).all():
        raise ValueError(f"threshold_pct must be finite and >= 0, got {np.asarray(threshold_pct)!r}")
    low, high, q, noise_base, noise_head = arrays
    worst_noise = np.maximum(noise_base, noise_head)
    noisy = worst_noise > NOISE_LIMIT
    no_interval = np.isnan(low) | np.isnan(high)
    above, below = low > 1.0 + t, high < 1.0 - t
    significant = q < alpha
    worse = np.where(lib, above, below) & significant
    better = np.where(lib, below, above) & significant
    within = (low >= 1.0 - t) & (high <= 1.0 + t)
    beyond = above | below  # the rows that are worse or better take the first reason
    verdict = np.select(
        [worse, better, no_interval, within],
        ["regressed", "improved", "insufficient-samples", "similar"],
        "inconclusive",
    )
    outcome = np.select([worse | better, within], ["DIFFERENT", "SAME"], "UNKNOWN")
    rerun = worst_noise > NOISE_RERUN
    quieter = f"IQR/median above {NOISE_LIMIT:.0%} on a side (noisy): rerun on a quieter machine"
    more = f"IQR/median above {NOISE_RERUN:.0%}: rerun with more samples"
    reason = np.select(
        [worse | better, no_interval, within, beyond & noisy, beyond & rerun, beyond, noisy, rerun],
        [
            "",
            f"fewer than {MIN_SAMPLES} samples on a side: no interval",
            "interval within the threshold",
            f"interval beyond the threshold but q >= alpha; {quieter}",
            f"interval beyond the threshold but q >= alpha; {more}",
            "interval beyond the threshold but q >= alpha: more samples would settle it",
            f"interval crosses the threshold; {quieter}",
            f"interval crosses the threshold; {more}",
        ],
        "interval crosses the threshold: more samples would settle it",
    )
    return Classification(verdict, outcome, reason, noisy)


@dataclass(frozen=True)
class Inference:
    """All per-series results of :func:`compare_samples`, each an array of shape (series,)."""

    ratio: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray
    q: np.ndarray
    noise_base: np.ndarray
    noise_head: np.ndarray
    mde_pct: np.ndarray
    verdict: np.ndarray
    outcome: np.ndarray
    reason: np.ndarray
    noisy: np.ndarray


def compare_samples(
    base: SamplesLike,
    head: SamplesLike,
    *,
    threshold_pct: npt.ArrayLike,
    lower_is_better: npt.ArrayLike,
    level: float = 0.99,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.01,
    base_clusters: ClustersLike = None,
    head_clusters: ClustersLike = None,
) -> Inference:
    """Bootstrap interval, Mann–Whitney p, Benjamini–Hochberg q over all series passed, noise, MDE and
    :func:`classify` in one pass; arguments and errors as those functions'. A clustered series' MDE is half
    its interval's width in percent (the normal approximation assumes independent samples).
    """
    _check_bootstrap_args(level, resamples, seed)
    n, groups = _prepare(base, head, base_clusters, head_clusters)
    ratio, low, high = _bootstrap(n, groups, level, int(resamples), int(seed))
    p = _mann_whitney(n, groups)
    q = benjamini_hochberg(p)
    nb, nh = (_noise(n, [(g.members, getattr(g, side)) for g in groups]) for side in ("base", "head"))
    mde = _mde(n, groups, level)
    for g in groups:
        if max(g.k_base, g.k_head) > 1:
            mde[g.members] = 50.0 * (high[g.members] - low[g.members])
    return Inference(
        ratio,
        low,
        high,
        p,
        q,
        nb,
        nh,
        mde,
        *classify(ratio, low, high, q, nb, nh, threshold_pct, lower_is_better, alpha),
    )
