"""The rules ``benchtrail evaluate-detector`` compares: benchtrail's detector and its peers' rules.

Each rule takes one comparison (base and head samples, µs per call, lower is better) and returns a
verdict: ``regressed``, ``improved``, ``similar`` (and ``inconclusive`` for benchtrail). Peers see every
sample; benchtrail's adaptive detector sees the prefixes it asks for, round by round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy.stats import binomtest, mannwhitneyu

from benchtrail.errors import UserError

#: Series name whose threshold rules the evaluations use (the latency one falls to ``execution/*``).
SERIES_NAME = "detector-matmul.eager.inference"
#: Samples per side that one round of the adaptive detector adds.
ROUND_SAMPLES = 10
#: Rule key → label, in table order. Verdicts are ``regressed``, ``improved``, ``similar`` (and
#: ``inconclusive`` for benchtrail); an A/A alert is regressed or improved, a detection is regressed.
RULES = {
    "benchtrail": "benchtrail (threshold {threshold:g}%)",
    "iree-5": "IREE (mean change > 5%)",
    "iree-10": "IREE (mean change > 10%)",
    "github-action-benchmark": "github-action-benchmark (mean ratio > 2x)",
    "asv": "asv (median ratio > 1.1, U p < 0.002)",
}
ALERTS = ("regressed", "improved")


# -- peer rules ---------------------------------------------------------------------------------


def iree_rule(base: Sequence[float], head: Sequence[float], threshold_pct: float = 5.0) -> str:
    """IREE's rule: ``regressed``, ``improved`` or ``similar`` as the mean of 1-D samples (µs per call)
    changed by more than ``threshold_pct`` percent of the base mean; from IREE
    ``benchmark_presentation.py`` (``_categorize_on_single_metric``)."""
    ratio = float(np.mean(head) / np.mean(base))
    if abs(ratio - 1.0) <= threshold_pct / 100.0:
        return "similar"
    return "regressed" if ratio > 1.0 else "improved"


def github_action_benchmark_rule(
    base: Sequence[float], head: Sequence[float], alert_ratio: float = 2.0
) -> str:
    """github-action-benchmark's rule: ``regressed`` when head mean / base mean (µs per call) exceeds
    ``alert_ratio``, else ``similar``; from its ``src/write/findAlerts.ts`` (``alert-threshold`` 200%)."""
    return "regressed" if float(np.mean(head) / np.mean(base)) > alert_ratio else "similar"


def asv_rule(
    base: Sequence[float], head: Sequence[float], factor: float = 1.1, p_threshold: float = 0.002
) -> str:
    """asv's rule: ``regressed``, ``improved`` or ``similar`` as the median (µs per call) changed by more than
    ``factor`` and Mann–Whitney U has p < ``p_threshold``; from asv ``commands/compare.py`` and
    ``_stats.py`` (``is_different``), with scipy's ``mannwhitneyu`` for asv's own U code."""
    ratio = float(np.median(head) / np.median(base))
    if 1.0 / factor <= ratio <= factor or not mannwhitneyu(head, base).pvalue < p_threshold:
        return "similar"
    return "regressed" if ratio > factor else "improved"


class OurVerdict(NamedTuple):
    """benchtrail's detector on one comparison; ``mde_pct``: half its last interval's width, percent (NaN
    without one)."""

    verdict: str
    outcome: str
    samples_per_side: int
    mde_pct: float = float("nan")


def benchtrail_rule(
    base: Sequence[float],
    head: Sequence[float],
    threshold_pct: float,
    paired: bool = False,
    sequential: bool = False,
    planned_rounds: int | None = None,
) -> OurVerdict:
    """benchtrail's adaptive detector fed 1-D samples (time order, µs per call) ``ROUND_SAMPLES`` a round.

    ``paired``: sample j of base and of head were taken together; ``planned_rounds``: the rounds the
    sequential spending plans for (default: those given). Raises ValueError for sides of different
    lengths or not a multiple of ``ROUND_SAMPLES``.
    """
    from benchtrail.runner.adaptive import sample_until_settled

    base, head = (np.asarray(x, dtype=np.float64) for x in (base, head))
    if base.shape != head.shape or base.ndim != 1 or base.size == 0 or base.size % ROUND_SAMPLES:
        raise ValueError(
            f"need two 1-D sides of one length, a multiple of {ROUND_SAMPLES}; "
            f"got shapes {base.shape} and {head.shape}"
        )
    rounds = zip(*(x.reshape(-1, ROUND_SAMPLES).tolist() for x in (base, head)))
    settled = sample_until_settled(
        lambda: next(rounds),
        threshold_pct=threshold_pct,
        lower_is_better=True,
        paired=paired,
        max_rounds=base.size // ROUND_SAMPLES,
        sequential=sequential,
        planned_rounds=planned_rounds,
    )
    return OurVerdict(
        settled.verdict, settled.outcome, len(settled.base), float(settled.inference.mde_pct[0])
    )


def judge(
    base: Sequence[float],
    head: Sequence[float],
    threshold_pct: float,
    peer_samples: int | None = None,
    **detector: Any,
) -> tuple[dict[str, str], OurVerdict]:
    """``({rule: verdict}, benchtrail's OurVerdict)``; the peers see the first ``peer_samples`` of each side
    (default all)."""
    ours = benchtrail_rule(base, head, threshold_pct, **detector)
    base, head = base[:peer_samples], head[:peer_samples]
    return {
        "benchtrail": ours.verdict,
        "iree-5": iree_rule(base, head, 5.0),
        "iree-10": iree_rule(base, head, 10.0),
        "github-action-benchmark": github_action_benchmark_rule(base, head),
        "asv": asv_rule(base, head),
    }, ours


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """Exact (Clopper–Pearson, scipy's ``binomtest``) 95% interval of ``k / n``, fractions in [0, 1];
    ValueError for ``n < 1`` or ``k`` outside ``[0, n]``."""
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def threshold_of(metric: str, threshold_pct: float | None) -> tuple[float, str]:
    """``(threshold, rule)``: ``threshold_pct`` (rule ``--threshold-pct``), else the shipped rule of
    ``execution/<metric>/<SERIES_NAME>``; UserError when that cannot be loaded or is not in percent."""
    from benchtrail.compare.rules import find_threshold, load_thresholds

    rule = find_threshold(load_thresholds(), "execution", metric, SERIES_NAME)
    if rule.unit != "percent":
        raise UserError(
            f"the thresholds rule {rule.match!r} for {SERIES_NAME}"
            f"{' instructions' if metric == 'instructions' else ''} is not a percent rule"
        )
    return (rule.threshold, rule.match) if threshold_pct is None else (threshold_pct, "--threshold-pct")
