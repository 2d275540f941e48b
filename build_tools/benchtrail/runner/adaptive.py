"""Adaptive sampling: add samples while a comparison is inconclusive, within a time budget.

Chromium Pinpoint's loop (stop at DIFFERENT or SAME, or when the budget is spent) with benchtrail's
statistics; sequential looks spend alpha as Lan–DeMets' Pocock type. Method: docs/statistics.md,
"Adaptive sampling".
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
    """Samples drawn over all rounds, in draw order, and the last look's comparison (one series).

    Attributes:
        inference: of shape (1,) over ``base`` and ``head``.
        elapsed_s: wall time of the whole loop, seconds.
        level: the last interval's confidence level (``1 - alpha``, or that look's share when sequential).
        stop: ``decided`` (DIFFERENT or SAME), ``budget`` or ``max-rounds``.
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


def sample_until_settled(
    draw: Draw,
    *,
    threshold_pct: float,
    lower_is_better: bool = True,
    min_rounds: int = 1,
    max_rounds: int | None = 3,
    budget_s: float = float("inf"),
    alpha: float = 0.01,
    seed: int = 0,
    paired: bool = False,
    cluster_rounds: bool = False,
    sequential: bool = False,
    planned_rounds: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Settled:
    """Call ``draw`` until the comparison of everything drawn is DIFFERENT or SAME.

    ``paired``: a round's base and head samples are pairs (as many of each), compared as pairs; else as
    independent samples. ``cluster_rounds``: each round is a cluster of the bootstrap. Stops after
    ``max_rounds`` (None: no cap) or before a new round once ``budget_s`` seconds have passed; at least
    ``min_rounds`` are drawn. With ``sequential``, the looks share ``alpha``: rounds ``min_rounds`` to
    ``planned_rounds`` (default ``max_rounds``), or without ``max_rounds`` the fraction of ``budget_s``
    spent; SAME spends none and is judged at ``1 - alpha``.

    Raises:
        ValueError: ``min_rounds`` < 1 or > ``max_rounds``, ``budget_s`` <= 0, ``max_rounds=None`` without
            ``sequential`` or with an infinite ``budget_s``, or non-finite or <= 0 samples.
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
            raise ValueError(
                f"round {rounds} drew {len(b)} base and {len(h)} head samples; paired rounds draw pairs"
            )
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
        look = partial(
            _compare,
            base,
            head,
            [rounds] if cluster_rounds and len(sizes) == 1 else None,
            threshold_pct=threshold_pct,
            lower_is_better=lower_is_better,
            seed=seed,
            paired=paired,
        )
        result = look(a)
        if a < alpha and result.outcome[0] == "UNKNOWN":  # SAME spends no alpha: judged at 1 - alpha
            same = look(alpha)
            if same.outcome[0] == "SAME":
                result, a = same, alpha
        decided = result.outcome[0] != "UNKNOWN"
        if decided or last:
            return Settled(
                tuple(base),
                tuple(head),
                result,
                rounds,
                clock() - start,
                1.0 - a,
                "decided" if decided else "budget" if elapsed >= budget_s else "max-rounds",
            )


def _compare(
    base: list[float],
    head: list[float],
    clusters: list[int] | None,
    a: float,
    *,
    paired: bool,
    **options: Any,
) -> Inference:
    """One look: everything drawn compared at level ``1 - a`` and q < ``a``."""
    options.update(alpha=a, level=1.0 - a, resamples=resamples_for(a))
    samples = [np.asarray(base)], [np.asarray(head)]
    if paired:
        return compare_paired(*samples, clusters=clusters, **options)
    return compare_samples(*samples, base_clusters=clusters, head_clusters=clusters, **options)
