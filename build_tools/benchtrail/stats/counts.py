"""Verdicts of counted series (instructions per call under callgrind): the change of the median widened by
the measured spread, not a test (docs/statistics.md, "Instruction counts")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: A pair whose repeats spread more than this (percent, the two sides' relative ranges added) is
#: ``noisy``: half the default instruction threshold; the widest A/A pair measured added to 0.165%.
NOISY_SPREAD_PCT = 0.25
#: Repeats a side needs to have a spread at all.
MIN_REPEATS = 3


@dataclass(frozen=True)
class CountJudgement:
    """A counted pair's verdict; ``change_pct``: of the median, widened by ``spread_pct`` (both sides'
    :func:`spread_pct` added) to ``low_pct``/``high_pct``."""

    verdict: str
    change_pct: float
    low_pct: float
    high_pct: float
    spread_pct: float
    noisy: bool


def spread_pct(samples: Sequence[float]) -> float:
    """(max − min) / median of ``samples``, in percent."""
    x = np.asarray(samples, dtype=float)
    return float((x.max() - x.min()) / np.median(x) * 100.0)


def judge_counts(
    base: Sequence[float], head: Sequence[float], threshold_pct: float, lower_is_better: bool
) -> CountJudgement:
    """``regressed``/``improved`` when the widened change lies wholly beyond ``threshold_pct``, ``similar``
    within ±``threshold_pct``, else ``inconclusive``. The caller checks :data:`MIN_REPEATS` samples > 0."""
    change = (float(np.median(head)) / float(np.median(base)) - 1.0) * 100.0
    spread = spread_pct(base) + spread_pct(head)
    low, high = change - spread, change + spread
    worse_low, worse_high = (low, high) if lower_is_better else (-high, -low)
    verdict = (
        "regressed"
        if worse_low > threshold_pct
        else "improved"
        if worse_high < -threshold_pct
        else "similar"
        if -threshold_pct <= low and high <= threshold_pct
        else "inconclusive"
    )
    return CountJudgement(verdict, change, low, high, spread, spread > NOISY_SPREAD_PCT)
