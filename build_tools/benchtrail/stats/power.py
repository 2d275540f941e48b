"""How many samples a comparison needs before a change can be significant at all.

With n samples a side, Mann–Whitney's p has a floor, and Benjamini–Hochberg's q of a lone change among m
series is p × m: a row whose floor × m is not below alpha can never be ``regressed``. No numpy or scipy:
``benchtrail export`` imports it.
"""

from __future__ import annotations

import math

from benchtrail.errors import UserError
from benchtrail.suite.definitions import RunConfig

#: As in the estimators: fewer samples than this on a side give no test; scipy's
#: ``mannwhitneyu(method="auto")`` is exact when a side has at most ``EXACT_MAX_N`` samples (no ties).
MIN_SAMPLES = 2
EXACT_MAX_N = 8


def smallest_p(n_base: int, n_head: int) -> float:
    """The smallest two-sided Mann–Whitney p these sample counts can give, as the estimators compute it:
    exact, ``2 / C(n_b + n_h, n_b)`` (0.0079 for 5 a side), up to 8 a side, else scipy's normal
    approximation with continuity correction; 1.0 below ``MIN_SAMPLES``."""
    if min(n_base, n_head) < MIN_SAMPLES:
        return 1.0
    if min(n_base, n_head) <= EXACT_MAX_N:
        return min(1.0, 2.0 / math.comb(n_base + n_head, n_base))
    u = n_base * n_head
    sigma = math.sqrt(u * (n_base + n_head + 1) / 12.0)
    return min(1.0, math.erfc((u / 2.0 - 0.5) / sigma / math.sqrt(2.0)))


def samples_needed(series: int, alpha: float = 0.01) -> int:
    """The fewest samples a side from which on :func:`smallest_p` × ``series`` < ``alpha``: 5 for one
    series, 8 for 20, 11 for 100. Raises ValueError: ``series`` < 1 or ``alpha`` outside (0, 1)."""
    if series < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"need series >= 1 and 0 < alpha < 1, got {series!r} and {alpha!r}")
    n = MIN_SAMPLES
    while not all(smallest_p(k, k) * series < alpha for k in range(n, max(n, EXACT_MAX_N + 1) + 1)):
        n += 1
    return n


def check_sample_sizes(run_configs: tuple[RunConfig, ...], alpha: float = 0.01) -> None:
    """Raises UserError naming the run configs whose samples a side (``processes × min_samples``) can
    never give a significant change when all ``run_configs`` are compared together."""
    m = len(run_configs)
    short = [
        rc
        for rc in run_configs
        if smallest_p(n := rc.execution_config.processes * rc.execution_config.min_samples, n) * m >= alpha
    ]
    if not short:
        return
    ec = short[0].execution_config
    names = ", ".join(rc.name for rc in short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else "")
    raise UserError(
        f"{len(short)} of the {m} run configs selected take too few samples to ever show a "
        f"change: {names} (processes={ec.processes} × min_samples={ec.min_samples} = "
        f"{ec.processes * ec.min_samples} a side). With {m} series compared, the smallest "
        f"possible Mann–Whitney p times {m} must be below {alpha:g}: at least "
        f"{samples_needed(m, alpha)} samples a side are needed; raise min_samples or processes"
        + (", or select fewer run configs" if m > 1 else "")
    )
