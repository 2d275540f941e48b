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
    """IREE's rule: the mean changed by more than ``threshold_pct`` percent of the base mean.

    From IREE ``build_tools/benchmarks/common/benchmark_presentation.py``
    (``_categorize_on_single_metric``: ``abs(current - base) / base`` against the percentage of the
    first matching rule of ``benchmark_thresholds.py``, on the mean latency of the repetitions).

    Args:
        base, head: 1-D samples, µs per call (any unit, the same on both sides), non-empty.
        threshold_pct: percent of the base mean, >= 0 (IREE uses 5%, 10% and more per benchmark).

    Returns:
        ``regressed`` (head slower by more than the threshold), ``improved`` or ``similar``.
    """
    ratio = float(np.mean(head) / np.mean(base))
    if abs(ratio - 1.0) <= threshold_pct / 100.0:
        return "similar"
    return "regressed" if ratio > 1.0 else "improved"


def github_action_benchmark_rule(base: Sequence[float], head: Sequence[float],
                                 alert_ratio: float = 2.0) -> str:
    """github-action-benchmark's rule: alert when the value got worse by more than ``alert_ratio``.

    From benchmark-action/github-action-benchmark ``src/write/findAlerts.ts``: ``ratio = current /
    prev`` for smaller-is-better values (``prev / current`` for bigger-is-better ones such as
    pytest-benchmark's ops/s, which is 1/mean), ``ratio > threshold`` alerts; the ``alert-threshold``
    input defaults to ``200%``. The value is one number per run; here the mean of the samples. It
    never reports an improvement.

    Args:
        base, head: 1-D samples, µs per call, non-empty.
        alert_ratio: head mean / base mean above which it alerts.

    Returns:
        ``regressed`` or ``similar``.
    """
    return "regressed" if float(np.mean(head) / np.mean(base)) > alert_ratio else "similar"


def asv_rule(base: Sequence[float], head: Sequence[float], factor: float = 1.1,
             p_threshold: float = 0.002) -> str:
    """asv's rule: the median changed by more than ``factor`` and a Mann–Whitney U test says so.

    From airspeed-velocity/asv ``asv/commands/compare.py`` (``--factor`` default 1.1: worse when
    ``time_2 > time_1 * factor``, better when ``time_2 * factor < time_1``, on asv's result value, the
    median) and ``asv/_stats.py`` (``is_different``: Mann–Whitney U with ``p_threshold=0.002``).
    asv computes U with its own code; here ``scipy.stats.mannwhitneyu`` (two-sided, method auto).

    Args:
        base, head: 1-D samples, µs per call, at least one each.

    Returns:
        ``regressed``, ``improved`` or ``similar``.
    """
    ratio = float(np.median(head) / np.median(base))
    if 1.0 / factor <= ratio <= factor or not mannwhitneyu(head, base).pvalue < p_threshold:
        return "similar"
    return "regressed" if ratio > factor else "improved"


class OurVerdict(NamedTuple):
    """benchtrail's detector on one comparison: ``verdict`` (regressed, improved, similar, inconclusive),
    ``outcome`` (DIFFERENT, SAME, UNKNOWN), the samples per side it used and the minimum detectable
    effect it reached (percent: half its last interval's width; NaN without an interval)."""

    verdict: str
    outcome: str
    samples_per_side: int
    mde_pct: float = float("nan")


def benchtrail_rule(base: Sequence[float], head: Sequence[float], threshold_pct: float,
                    paired: bool = False, sequential: bool = False,
                    planned_rounds: int | None = None) -> OurVerdict:
    """benchtrail's detector: :func:`benchtrail.runner.adaptive.sample_until_settled` fed prefixes.

    Round k hands the detector samples ``[k·ROUND_SAMPLES, (k+1)·ROUND_SAMPLES)`` of each side, so it
    stops as soon as the comparison settles (DIFFERENT or SAME) and uses at most
    ``len(base)`` samples per side (``max_rounds = len(base) / ROUND_SAMPLES``). Lower is better.

    Args:
        base, head: 1-D samples in time order, µs per call; both of the same length, a multiple of
            ``ROUND_SAMPLES``.
        threshold_pct: percent, from the shipped thresholds table.
        paired: the samples were taken interleaved, sample j of base next to sample j of head in
            each round: compare pair ratios (:mod:`benchtrail.stats.paired`).
        sequential: spend the error over the rounds (``sample_until_settled(sequential=True)``).
        planned_rounds: the rounds the spending plans for, at least the rounds given (default: those).

    Raises:
        ValueError: sides of different length or not a multiple of ``ROUND_SAMPLES``.
    """
    from benchtrail.runner.adaptive import sample_until_settled

    base, head = (np.asarray(x, dtype=np.float64) for x in (base, head))
    if base.shape != head.shape or base.ndim != 1 or base.size == 0 or base.size % ROUND_SAMPLES:
        raise ValueError(f"need two 1-D sides of one length, a multiple of {ROUND_SAMPLES}; "
                         f"got shapes {base.shape} and {head.shape}")
    rounds = zip(*(x.reshape(-1, ROUND_SAMPLES).tolist() for x in (base, head)))
    settled = sample_until_settled(lambda: next(rounds), threshold_pct=threshold_pct, lower_is_better=True,
                                   paired=paired, max_rounds=base.size // ROUND_SAMPLES,
                                   sequential=sequential, planned_rounds=planned_rounds)
    return OurVerdict(settled.verdict, settled.outcome, len(settled.base),
                      float(settled.inference.mde_pct[0]))


def judge(base: Sequence[float], head: Sequence[float], threshold_pct: float, peer_samples: int | None = None,
          **detector: Any) -> tuple[dict[str, str], OurVerdict]:
    """Every rule of :data:`RULES` on one comparison: ``({rule: verdict}, benchtrail's OurVerdict)``.
    The peers see the first ``peer_samples`` samples of each side (default all); benchtrail's detector
    (:func:`benchtrail_rule`, with the options ``detector``) the prefixes it asks for."""
    ours = benchtrail_rule(base, head, threshold_pct, **detector)
    base, head = base[:peer_samples], head[:peer_samples]
    return {"benchtrail": ours.verdict, "iree-5": iree_rule(base, head, 5.0),
            "iree-10": iree_rule(base, head, 10.0),
            "github-action-benchmark": github_action_benchmark_rule(base, head),
            "asv": asv_rule(base, head)}, ours


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """Exact (Clopper–Pearson) 95% interval of a binomial proportion, as fractions in [0, 1]:
    ``scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")``.

    Raises:
        ValueError: ``n < 1`` or ``k`` outside ``[0, n]`` (from scipy).
    """
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def threshold_of(metric: str, threshold_pct: float | None) -> tuple[float, str]:
    """``(threshold, rule)``: ``threshold_pct`` (rule ``--threshold-pct``), else the shipped rule of
    ``execution/<metric>/<SERIES_NAME>``.

    Raises:
        UserError: the thresholds table cannot be loaded, or its rule is not a percent rule.
    """
    from benchtrail.compare.rules import find_threshold, load_thresholds

    rule = find_threshold(load_thresholds(), "execution", metric, SERIES_NAME)
    if rule.unit != "percent":
        raise UserError(f"the thresholds rule {rule.match!r} for {SERIES_NAME}"
                        f"{' instructions' if metric == 'instructions' else ''} is not a percent rule")
    return (rule.threshold, rule.match) if threshold_pct is None else (threshold_pct, "--threshold-pct")
