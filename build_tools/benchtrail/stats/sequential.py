"""Alpha spending for a comparison looked at after each round (group-sequential, Lan & DeMets 1983).

Look k of K uses only the increment ``α(k/K) − α((k−1)/K)`` of the Pocock-type ``α(t) = alpha · ln(1 +
(e − 1) t)``; by the union bound the false-alarm chance at any look stays below ``alpha``, with no model of
the samples. docs/statistics.md ("Adaptive sampling") has the design and sources.
"""

from __future__ import annotations

import math

import numpy as np


def pocock_spending(t: float | np.ndarray, alpha: float) -> np.ndarray:
    """The error spent by information fraction ``t`` (in [0, 1]), float64 of ``t``'s shape: 0 at 0, ``alpha``
    (two-sided, in (0, 1)) at 1. Raises ValueError: ``t`` or ``alpha`` out of range."""
    t = np.asarray(t, dtype=np.float64)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not ((t >= 0.0) & (t <= 1.0)).all():
        raise ValueError(f"information fractions must lie in [0, 1], got {t!r}")
    return alpha * np.log1p((math.e - 1.0) * t)


def look_alphas(max_looks: int, alpha: float) -> np.ndarray:
    """The error each of ``max_looks`` equally spaced looks may use: float64 ``(max_looks,)`` summing to
    ``alpha``. Raises ValueError: ``max_looks`` < 1, or ``alpha`` as :func:`pocock_spending`."""
    if max_looks < 1:
        raise ValueError(f"max_looks must be >= 1, got {max_looks!r}")
    return np.diff(pocock_spending(np.arange(max_looks + 1) / max_looks, alpha))


#: The error a budgeted run may have spent by the fraction ``t`` of its time budget (calendar time, Lan &
#: DeMets 1989): a look at ``t_k`` spends ``budget_alpha(t_k) − budget_alpha(t_{k−1})``.
budget_alpha = pocock_spending


#: Bootstrap resamples of one look at most: a look at a very small level would otherwise ask for 20 / level.
MAX_RESAMPLES = 50_000


def resamples_for(a: float) -> int:
    """Bootstrap resamples for a percentile interval at level ``1 - a``: 10 in each tail (``20 / a``), at
    least 2000, at most :data:`MAX_RESAMPLES`."""
    return min(MAX_RESAMPLES, max(2000, math.ceil(20.0 / a)))
