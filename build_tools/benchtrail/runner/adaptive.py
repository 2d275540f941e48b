"""Adaptive sampling: add samples while a comparison is inconclusive, within a time budget.

Chromium's Pinpoint compares two builds in rounds and stops when the comparison says DIFFERENT or
SAME, or when the budget is spent (UNKNOWN). benchtrail does the same with its own statistics
(:func:`benchtrail.stats.inference.compare_samples`): each round draws more samples for both sides,
then the whole comparison is made again on everything drawn so far.

Looking again after each round raises the chance of a false alarm (optional stopping). Without
``sequential`` every look uses the same level: the rounds are few (``max_rounds``), a row must have
its whole interval beyond the threshold *and* q < alpha, and ``benchtrail evaluate-detector``
measures the resulting false-positive rate. With ``sequential``, look k uses only its share of
``alpha`` (:mod:`benchtrail.stats.sequential`, Lan–DeMets alpha spending of the Pocock type), so the
chance of a false alarm at any look stays below ``alpha``; many more rounds can then be allowed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchtrail.stats.inference import Inference, compare_samples
from benchtrail.stats.paired import compare_paired
from benchtrail.stats.sequential import look_alphas

#: One round: ``(base samples, head samples)`` drawn in that round, any unit (the same on both sides).
Draw = Callable[[], tuple[list[float], list[float]]]


@dataclass(frozen=True)
class Settled:
    """Samples drawn over all rounds and the comparison of the last round (one series).

    Attributes:
        base, head: every sample drawn, in draw order.
        inference: :class:`Inference` of shape (1,) over ``base`` and ``head``.
        rounds: rounds drawn (>= 1).
        elapsed_s: wall time of the whole loop, seconds.
        level: the confidence level of the last comparison's interval (``1 - alpha`` without
            ``sequential``; that look's share with it).
    """

    base: tuple[float, ...]
    head: tuple[float, ...]
    inference: Inference
    rounds: int
    elapsed_s: float
    level: float = 0.99

    @property
    def outcome(self) -> str:
        """``DIFFERENT``, ``SAME`` or ``UNKNOWN``."""
        return str(self.inference.outcome[0])

    @property
    def verdict(self) -> str:
        """``regressed``, ``improved``, ``similar`` or ``noisy``."""
        return str(self.inference.verdict[0])


def sample_until_settled(draw: Draw, *, threshold_pct: float, lower_is_better: bool = True,
                         min_rounds: int = 1, max_rounds: int = 3, budget_s: float = float("inf"),
                         alpha: float = 0.01, seed: int = 0, paired: bool = False, cluster_rounds: bool = False,
                         sequential: bool = False, planned_rounds: int | None = None,
                         clock: Callable[[], float] = time.perf_counter) -> Settled:
    """Call ``draw`` until the comparison of everything drawn is DIFFERENT or SAME.

    With ``paired``, each round's base and head samples are pairs taken close in time (sample j of
    each side; a round must draw as many of each) and the comparison is
    :func:`benchtrail.stats.paired.compare_paired`; else the two sides are independent samples
    (:func:`compare_samples`). ``cluster_rounds`` treats each round as a cluster (fresh worker
    processes per round) for the two-stage bootstrap.

    Stops after ``max_rounds`` rounds, or before a new round once ``budget_s`` seconds have passed
    (the round in progress is never cut short), whichever comes first; at least ``min_rounds``
    rounds are always drawn. A ``noisy`` verdict also stops the loop: more samples of a machine that
    noisy do not help.

    Without ``sequential`` every comparison uses level ``1 - alpha`` and q < ``alpha``. With it, the
    looks that may stop the loop (rounds ``min_rounds`` to ``max_rounds``) share ``alpha`` as
    :func:`benchtrail.stats.sequential.look_alphas` spends it; look j uses level ``1 - alpha_j`` and
    q < ``alpha_j`` (rounds before ``min_rounds`` use the first look's). ``planned_rounds`` (default
    ``max_rounds``) is the most rounds the spending plans for: a replay of stored rounds that has
    fewer than planned passes the planned count, so each look keeps its level.

    Raises:
        ValueError: ``min_rounds`` < 1 or > ``max_rounds``, ``budget_s`` <= 0, or samples that
            :func:`compare_samples` rejects (non-finite or <= 0).
    """
    if not 1 <= min_rounds <= max_rounds:
        raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {min_rounds} and {max_rounds}")
    planned = max_rounds if planned_rounds is None else planned_rounds
    if planned < max_rounds:
        raise ValueError(f"planned_rounds {planned} is fewer than max_rounds {max_rounds}")
    if not budget_s > 0:
        raise ValueError(f"budget_s must be > 0 seconds, got {budget_s!r}")
    start = clock()
    looks = look_alphas(planned - min_rounds + 1, alpha) if sequential else None
    base: list[float] = []
    head: list[float] = []
    rounds = 0
    sizes: set[tuple[int, int]] = set()
    while True:
        b, h = draw()
        base.extend(b)
        head.extend(h)
        sizes.add((len(b), len(h)))
        rounds += 1
        if paired and len(b) != len(h):
            raise ValueError(f"round {rounds} drew {len(b)} base and {len(h)} head samples; paired rounds draw pairs")
        # Clusters need equal rounds; rounds of unequal size fall back to independent samples.
        clusters = [rounds] if cluster_rounds and len(sizes) == 1 else None
        a = alpha if looks is None else float(looks[max(rounds - min_rounds, 0)])
        # A percentile interval at level 1 - a needs resamples in each tail of a/2: at least 10 each.
        resamples = max(2000, math.ceil(20.0 / a))
        if paired:
            result = compare_paired([np.asarray(base)], [np.asarray(head)], threshold_pct=threshold_pct,
                                    lower_is_better=lower_is_better, alpha=a, level=1.0 - a, seed=seed,
                                    resamples=resamples, clusters=clusters)
        else:
            result = compare_samples([np.asarray(base)], [np.asarray(head)], threshold_pct=threshold_pct,
                                     lower_is_better=lower_is_better, alpha=a, level=1.0 - a, seed=seed,
                                     resamples=resamples, base_clusters=clusters, head_clusters=clusters)
        settled = str(result.outcome[0]) != "UNKNOWN" or str(result.verdict[0]) == "noisy"
        if rounds >= min_rounds and (settled or rounds >= max_rounds or clock() - start >= budget_s):
            return Settled(tuple(base), tuple(head), result, rounds, clock() - start, 1.0 - a)
