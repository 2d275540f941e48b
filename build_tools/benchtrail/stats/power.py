"""How many samples a comparison needs before a change can be significant at all (issue 38).

With n samples a side, Mann–Whitney's p cannot go below a floor, and Benjamini–Hochberg's q of a lone
change among m series is p × m: a row whose floor × m is not below alpha can never be ``regressed``,
however large its change. Pure math (no numpy, no scipy): ``benchtrail export`` imports it.
"""

from __future__ import annotations

import math

from benchtrail.errors import UserError
from benchtrail.suite.definitions import RunConfig

#: As ``benchtrail.stats.estimators``: fewer samples than this on a side give no test; scipy's
#: ``mannwhitneyu(method="auto")`` is exact when a side has at most ``EXACT_MAX_N`` samples (no ties).
MIN_SAMPLES = 2
EXACT_MAX_N = 8


def smallest_p(n_base: int, n_head: int) -> float:
    """The smallest two-sided Mann–Whitney p that ``n_base`` and ``n_head`` samples can give (every head sample
    above every base sample), as ``stats.estimators.mann_whitney_p`` computes it: exact, ``2 / C(n_b + n_h, n_b)``
    (0.0079 for 5 a side), when a side has at most 8 samples, else scipy's normal approximation with its
    continuity correction; 1.0 where a side has fewer than ``MIN_SAMPLES``."""
    if min(n_base, n_head) < MIN_SAMPLES:
        return 1.0
    if min(n_base, n_head) <= EXACT_MAX_N:
        return min(1.0, 2.0 / math.comb(n_base + n_head, n_base))
    u = n_base * n_head
    sigma = math.sqrt(u * (n_base + n_head + 1) / 12.0)
    return min(1.0, math.erfc((u / 2.0 - 0.5) / sigma / math.sqrt(2.0)))


def samples_needed(series: int, alpha: float = 0.01) -> int:
    """The fewest samples a side (both sides alike), from which on every count's :func:`smallest_p`, times the
    ``series`` compared together, is below ``alpha``: 5 for one series, 8 for 20, 11 for 100. (The exact p up to
    8 a side is smaller than the approximation's from 9 on, so a count that passes need not be enough one
    sample later.)

    Raises:
        ValueError: ``series`` < 1 or ``alpha`` outside (0, 1).
    """
    if series < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"need series >= 1 and 0 < alpha < 1, got {series!r} and {alpha!r}")
    n = MIN_SAMPLES
    while not all(smallest_p(k, k) * series < alpha for k in range(n, max(n, EXACT_MAX_N + 1) + 1)):
        n += 1
    return n


def check_sample_sizes(run_configs: tuple[RunConfig, ...], alpha: float = 0.01) -> None:
    """Refuse run configs whose samples a side (``processes × min_samples``) can never give a significant
    change when all ``run_configs`` are compared together.

    Raises:
        UserError: naming the run configs, their samples and the samples a side needed.
    """
    m = len(run_configs)
    short = [rc for rc in run_configs
             if smallest_p(n := rc.execution_config.processes * rc.execution_config.min_samples, n) * m >= alpha]
    if not short:
        return
    ec = short[0].execution_config
    names = ", ".join(rc.name for rc in short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else "")
    raise UserError(f"{len(short)} of the {m} run configs selected take too few samples to ever show a change: "
                    f"{names} (processes={ec.processes} × min_samples={ec.min_samples} = "
                    f"{ec.processes * ec.min_samples} a side). With {m} series compared, the smallest possible "
                    f"Mann–Whitney p times {m} must be below {alpha:g}: at least {samples_needed(m, alpha)} samples "
                    "a side are needed; raise min_samples or processes" + (", or select fewer run configs" if m > 1 else ""))
