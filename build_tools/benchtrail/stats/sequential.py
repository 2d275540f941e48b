"""Error control when a comparison is looked at again after each round (sequential sampling).

Deciding after every round of samples and stopping at the first decisive look is *optional
stopping*: at the same per-look level, each extra look is one more chance of a false alarm. A
group-sequential design fixes that by spending the total error ``alpha`` over the looks: look ``k``
of at most ``K`` may use only the increment ``α(k/K) − α((k−1)/K)`` of an alpha-spending function
``α(t)``, ``α(0) = 0``, ``α(1) = alpha`` (Lan & DeMets, "Discrete sequential boundaries for clinical
trials", *Biometrika* 70(3), 1983). The increments sum to ``alpha``, so by the union bound the
chance of a false alarm at *any* look is at most ``alpha``, whatever the dependence between looks
and however early the comparison stops (stopping early because it is SAME only removes chances of
a false alarm). Boundaries computed from the joint normal law of the looks would be a little
tighter; the union bound needs no model of the samples, which here are bootstrap intervals on
pair ratios, not z statistics.

The spending function is the Pocock type of Lan & DeMets (1983), ``α(t) = alpha · ln(1 + (e − 1) t)``:
it spends a larger share early than the O'Brien–Fleming type, so a large change is decided in the
first round or two and only small ones use the later rounds.
"""

from __future__ import annotations

import math

import numpy as np


def pocock_spending(t: float | np.ndarray, alpha: float) -> np.ndarray:
    """The Lan–DeMets Pocock-type spending function ``alpha · ln(1 + (e − 1) t)``.

    Args:
        t: information fraction(s) in [0, 1] (here rounds drawn / most rounds), float or float64 array.
        alpha: total two-sided error, in (0, 1).

    Returns:
        float64 array of the shape of ``t``: the error spent up to ``t``; 0 at 0, ``alpha`` at 1.

    Raises:
        ValueError: ``t`` outside [0, 1] or ``alpha`` outside (0, 1).
    """
    t = np.asarray(t, dtype=np.float64)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not ((t >= 0.0) & (t <= 1.0)).all():
        raise ValueError(f"information fractions must lie in [0, 1], got {t!r}")
    return alpha * np.log1p((math.e - 1.0) * t)


def look_alphas(max_looks: int, alpha: float) -> np.ndarray:
    """The error each of ``max_looks`` equally spaced looks may use: the increments of
    :func:`pocock_spending` at ``k / max_looks``. float64 array of shape ``(max_looks,)``, summing to ``alpha``.

    Raises:
        ValueError: ``max_looks`` < 1, or ``alpha`` as :func:`pocock_spending`.
    """
    if max_looks < 1:
        raise ValueError(f"max_looks must be >= 1, got {max_looks!r}")
    return np.diff(pocock_spending(np.arange(max_looks + 1) / max_looks, alpha))


#: The error a budgeted run may have spent by the fraction ``t`` of its time budget: Pocock-type spending
#: over *calendar* time (Lan & DeMets, "Group sequential procedures: calendar versus information time",
#: *Statistics in Medicine* 8(10), 1989). The spending-function approach needs neither the number nor
#: the timing of the looks in advance, only that they do not depend on the data: a look at ``t_k``
#: spends ``budget_alpha(t_k) − budget_alpha(t_{k−1})``, and the look that ends the budget spends the
#: rest of ``alpha``. The same function as :func:`pocock_spending`, named for its use.
budget_alpha = pocock_spending


#: Bootstrap resamples of one look at most: a look at a very small level would otherwise ask for 20 / level.
MAX_RESAMPLES = 50_000


def resamples_for(a: float) -> int:
    """Bootstrap resamples for a percentile interval at level ``1 - a``: at least 10 in each tail of ``a / 2``
    (``20 / a``), at least 2000, at most :data:`MAX_RESAMPLES` (a sequential look's level is never below
    ``1 - alpha / 1000`` in practice: ``benchtrail.runner.adaptive``)."""
    return min(MAX_RESAMPLES, max(2000, math.ceil(20.0 / a)))
