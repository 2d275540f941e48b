"""Adaptive sampling: add samples while a comparison is inconclusive, within a time budget.

Chromium's Pinpoint compares two builds in rounds and stops when the comparison says DIFFERENT or
SAME, or when the budget is spent (UNKNOWN). benchtrail does the same with its own statistics
(:func:`benchtrail.stats.inference.compare_samples`): each round draws more samples for both sides,
then the whole comparison is made again on everything drawn so far.

Looking again after each round raises the chance of a false alarm (optional stopping). Without
``sequential`` every look uses the same level: the rounds are few (``max_rounds``), a row must have
its whole interval beyond the threshold *and* q < alpha, and ``benchtrail evaluate-detector``
measures the resulting false-positive rate. With ``sequential``, each look uses only its share of
``alpha`` (:mod:`benchtrail.stats.sequential`, Lan–DeMets alpha spending of the Pocock type), so the
chance of a false alarm at any look stays below ``alpha``; then the rounds need no cap but a time budget
(the paired re-check's: it runs until it knows, or the budget is spent).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from benchtrail.stats.inference import Inference, compare_samples
from benchtrail.stats.paired import compare_paired
from benchtrail.stats.sequential import budget_alpha, look_alphas, resamples_for

#: One round: ``(base samples, head samples)`` drawn in that round, any unit (the same on both sides).
Draw = Callable[[], tuple[list[float], list[float]]]


@dataclass(frozen=True)
class Settled:
    """Samples drawn over all rounds and the comparison of the last look (one series).

    Attributes:
        base, head: every sample drawn, in draw order.
        inference: :class:`Inference` of shape (1,) over ``base`` and ``head``.
        rounds: rounds drawn (>= 1).
        elapsed_s: wall time of the whole loop, seconds.
        level: the confidence level of the last comparison's interval (``1 - alpha`` without
            ``sequential``; that look's share with it).
        stop: why the loop stopped: ``decided`` (DIFFERENT or SAME), ``budget`` (the time budget was
            spent) or ``max-rounds``.
    """

    base: tuple[float, ...]
    head: tuple[float, ...]
    inference: Inference
    rounds: int
    elapsed_s: float
    level: float = 0.99
    stop: str = "decided"

    @property
    def outcome(self) -> str:
        """``DIFFERENT``, ``SAME`` or ``UNKNOWN``."""
        return str(self.inference.outcome[0])

    @property
    def verdict(self) -> str:
        """``regressed``, ``improved``, ``similar``, ``inconclusive`` or ``insufficient-samples``."""
        return str(self.inference.verdict[0])


#: A look of a budgeted sequential run after its first spends at least this share of ``alpha`` (the last look
#: excepted), so a run looks at most 1 / MIN_LOOK_SHARE + 2 times and no look's interval is needlessly wide.
MIN_LOOK_SHARE = 0.1


def sample_until_settled(draw: Draw, *, threshold_pct: float, lower_is_better: bool = True,
                         min_rounds: int = 1, max_rounds: int | None = 3, budget_s: float = float("inf"),
                         alpha: float = 0.01, seed: int = 0, paired: bool = False,
                         cluster_rounds: bool = False, sequential: bool = False,
                         planned_rounds: int | None = None,
                         clock: Callable[[], float] = time.perf_counter) -> Settled:
    """Call ``draw`` until the comparison of everything drawn is DIFFERENT or SAME.

    With ``paired``, each round's base and head samples are pairs taken close in time (sample j of
    each side; a round must draw as many of each) and the comparison is
    :func:`benchtrail.stats.paired.compare_paired`; else the two sides are independent samples
    (:func:`compare_samples`). ``cluster_rounds`` treats each round as a cluster (fresh worker
    processes per round) for the two-stage bootstrap.

    Stops after ``max_rounds`` rounds (None: no cap), or before a new round once ``budget_s`` seconds have
    passed (the round in progress is never cut short), whichever comes first; at least ``min_rounds``
    rounds are always drawn. Noise does not stop it: only an interval that decides (DIFFERENT, SAME).

    Without ``sequential`` every comparison uses level ``1 - alpha`` and q < ``alpha``. With it, the looks
    that may stop the loop share ``alpha`` (:mod:`benchtrail.stats.sequential`, Pocock-type spending), so
    the chance of a false alarm at any look stays below ``alpha``; SAME (the interval within the threshold)
    spends none and is judged at every look at ``1 - alpha`` (the returned level then):

    * with ``max_rounds``, over rounds: rounds ``min_rounds`` to ``planned_rounds`` (default ``max_rounds``)
      are the looks, as :func:`benchtrail.stats.sequential.look_alphas` spends it; ``planned_rounds`` lets a
      replay of fewer stored rounds keep each look's level;
    * with ``max_rounds=None``, over the time budget (a finite ``budget_s``): the information time of a look
      is the fraction of ``budget_s`` spent (:func:`benchtrail.stats.sequential.budget_alpha`); round
      ``min_rounds`` is the first look, a later round is a look when it may spend at least ``MIN_LOOK_SHARE``
      of ``alpha``, and the round after which the budget is spent is the last look and spends what is left
      (no earlier look leaves it less than ``MIN_LOOK_SHARE`` of ``alpha``).

    Raises:
        ValueError: ``min_rounds`` < 1 or > ``max_rounds``, ``budget_s`` <= 0, ``max_rounds=None`` without
            ``sequential`` or with an infinite ``budget_s``, or samples that :func:`compare_samples` rejects
            (non-finite or <= 0).
    """
    if min_rounds < 1 or (max_rounds is not None and min_rounds > max_rounds):
        raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {min_rounds} and {max_rounds}")
    if not budget_s > 0:
        raise ValueError(f"budget_s must be > 0 seconds, got {budget_s!r}")
    if max_rounds is None and not (sequential and math.isfinite(budget_s)):
        raise ValueError("without max_rounds, sampling must be sequential within a finite budget_s")
    looks = None
    if sequential and max_rounds is not None:
        planned = max_rounds if planned_rounds is None else planned_rounds
        if planned < max_rounds:
            raise ValueError(f"planned_rounds {planned} is fewer than max_rounds {max_rounds}")
        looks = look_alphas(planned - min_rounds + 1, alpha)
    start = clock()
    base: list[float] = []
    head: list[float] = []
    rounds = 0
    sizes: set[tuple[int, int]] = set()
    spent = 0.0  # budgeted sequential: the error spent by the looks so far
    while True:
        b, h = draw()
        base.extend(b)
        head.extend(h)
        sizes.add((len(b), len(h)))
        rounds += 1
        if paired and len(b) != len(h):
            raise ValueError(f"round {rounds} drew {len(b)} base and {len(h)} head samples; "
                             "paired rounds draw pairs")
        if rounds < min_rounds:
            continue
        elapsed = clock() - start
        last = elapsed >= budget_s or (max_rounds is not None and rounds >= max_rounds)
        if looks is not None:
            a = float(looks[rounds - min_rounds])
        elif sequential:
            share = float(budget_alpha(min(elapsed / budget_s, 1.0), alpha)) - spent
            left = alpha - spent - share  # for the looks after this one: the last needs a share too
            if not last and ((spent and share < MIN_LOOK_SHARE * alpha) or left < MIN_LOOK_SHARE * alpha):
                continue  # not a look (the first, at min_rounds, is one unless it leaves the last too little)
            a = share if not last else alpha - spent
            spent += a
        else:
            a = alpha
        # Clusters need equal rounds; rounds of unequal size fall back to independent samples.
        look = partial(_compare, base, head, [rounds] if cluster_rounds and len(sizes) == 1 else None,
                       threshold_pct=threshold_pct, lower_is_better=lower_is_better, seed=seed, paired=paired)
        result = look(a)
        if a < alpha and result.outcome[0] == "UNKNOWN":  # SAME spends no alpha: judged at 1 - alpha
            same = look(alpha)
            if same.outcome[0] == "SAME":
                result, a = same, alpha
        decided = result.outcome[0] != "UNKNOWN"
        if decided or last:
            return Settled(tuple(base), tuple(head), result, rounds, clock() - start, 1.0 - a,
                           "decided" if decided else "budget" if elapsed >= budget_s else "max-rounds")


def _compare(base: list[float], head: list[float], clusters: list[int] | None, a: float, *, paired: bool,
             **options: Any) -> Inference:
    """One look: everything drawn compared at level ``1 - a`` and q < ``a`` (``options``: the threshold, its
    direction and the seed)."""
    options.update(alpha=a, level=1.0 - a, resamples=resamples_for(a))
    samples = [np.asarray(base)], [np.asarray(head)]
    if paired:
        return compare_paired(*samples, clusters=clusters, **options)
    return compare_samples(*samples, base_clusters=clusters, head_clusters=clusters, **options)
