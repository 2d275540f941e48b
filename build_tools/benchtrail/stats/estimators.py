"""Head against base for many series at once: the estimators (interval, test, false-discovery control,
noise, minimum detectable effect). :mod:`benchtrail.stats.inference` turns them into a verdict.

Pure and vectorized (numpy/scipy, no I/O). Every function takes one entry per series and returns
arrays of shape ``(series,)``. Samples are a sequence of 1-D float arrays, one per series (a 2-D
array of shape ``(series, n)`` works too); series may have different sample counts. docs/statistics.md
explains the method and its sources.

Input rules, shared by every function that takes samples:

* ``base`` and ``head`` must hold the same number of series, else ``ValueError``.
* every series needs at least one sample, and every sample must be finite and > 0 (times, rates: a
  ratio of medians needs positive values); otherwise ``ValueError`` naming the side, the series
  index and the offending sample.
* a series with fewer than ``MIN_SAMPLES`` samples on either side gets no interval and no test:
  ``low``, ``high``, ``p`` and the minimum detectable effect are NaN and
  :func:`benchtrail.stats.inference.classify` says ``UNKNOWN``.
* a series whose samples are all equal on both sides gets ratio 1, interval [1, 1] and p = 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri
from scipy.stats import false_discovery_control, mannwhitneyu

#: Fewer samples than this on either side: no interval, no test.
MIN_SAMPLES = 2
#: scipy's ``mannwhitneyu(method="auto")`` uses the exact null distribution when either side has at
#: most this many samples and the pooled samples have no ties; we make the same choice per series.
_MWU_EXACT_MAX_N = 8
#: The IQR of a normal distribution is 2·Φ⁻¹(0.75)·σ = 1.3490·σ.
_IQR_PER_SIGMA = 2.0 * float(ndtri(0.75))
#: Rows of one (n_base, n_head) group per bootstrap block: bounds memory to a few (rows, resamples) arrays.
_BLOCK_ROWS = 2048

SamplesLike = Sequence[Sequence[float]] | Sequence[np.ndarray] | np.ndarray
#: Clusters per series (:func:`bootstrap_ratio_ci`): None, or one int >= 1 per series.
ClustersLike = Sequence[int] | np.ndarray | None


class _Group(NamedTuple):
    """Series sharing (n_base, n_head, k_base, k_head): ``members`` (g,) indices into the input, ``base``
    (g, n_base) and ``head`` (g, n_head) the rows in input order (cluster after cluster);
    ``k_base``/``k_head`` clusters per side."""

    members: np.ndarray
    base: np.ndarray
    head: np.ndarray
    k_base: int
    k_head: int


def _as_series(samples: SamplesLike, label: str) -> list[np.ndarray]:
    """The series as float64 arrays; ValueError naming the first series (in input order) that is empty, not
    1-D, or has a non-finite or <= 0 sample."""
    out = []
    for i, s in enumerate(samples):
        try:
            x = np.asarray(s, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{label} {i}: samples must be numbers ({exc})") from None
        if x.ndim != 1:
            raise ValueError(f"{label} {i}: expected a 1-D array of samples, got shape {x.shape}")
        if x.size == 0:
            raise ValueError(f"{label} {i}: no samples; drop the series or measure it")
        out.append(x)
    flat = np.concatenate(out) if out else np.empty(0)
    bad = ~(np.isfinite(flat) & (flat > 0))
    if bad.any():
        at = int(np.argmax(bad))
        ends = np.cumsum([x.size for x in out])
        i = int(np.searchsorted(ends, at, side="right"))
        value, col = flat[at], at - int(ends[i]) + out[i].size
        rule = "must be finite" if not np.isfinite(value) else "must be > 0 (a ratio of medians needs positive values)"
        raise ValueError(f"{label} {i}: sample {col} is {float(value)!r}; samples {rule}")
    return out


def _sides(base: SamplesLike, head: SamplesLike) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Both sides' series, checked (:func:`_as_series`), one base per head series."""
    b, h = _as_series(base, "base series"), _as_series(head, "head series")
    if len(b) != len(h):
        raise ValueError(f"base has {len(b)} series and head has {len(h)}; pass one base and one head "
                         "sample array per series, in the same order")
    return b, h


def _groups_of(keys: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Series indices grouped by equal ``keys`` (a tuple of ints per series), in ascending key order."""
    if not keys:
        return []
    _, inverse, counts = np.unique(np.array(keys, dtype=np.int64), axis=0, return_inverse=True,
                                   return_counts=True)
    order = np.argsort(inverse.ravel(), kind="stable")
    return np.split(order, np.cumsum(counts)[:-1])


def _as_clusters(clusters: ClustersLike, series: list[np.ndarray], label: str) -> np.ndarray:
    """Clusters per series: ones when None; else positive ints dividing each series' sample count."""
    if clusters is None:
        return np.ones(len(series), dtype=np.int64)
    k = np.asarray(clusters)
    if k.shape != (len(series),) or not np.issubdtype(k.dtype, np.integer) or (k < 1).any():
        raise ValueError(f"{label} clusters must be one int >= 1 per series ({len(series)}), got {clusters!r}")
    for i, (x, ki) in enumerate(zip(series, k)):
        if x.size % ki:
            raise ValueError(f"{label} series {i}: {x.size} samples do not split into {ki} equal clusters")
    return k.astype(np.int64)


def _prepare(base: SamplesLike, head: SamplesLike, base_clusters: ClustersLike = None,
             head_clusters: ClustersLike = None) -> tuple[int, list[_Group]]:
    b, h = _sides(base, head)
    kb, kh = _as_clusters(base_clusters, b, "base"), _as_clusters(head_clusters, h, "head")
    groups = []
    for members in _groups_of([(x.size, y.size, i, j) for x, y, i, j in zip(b, h, kb, kh)]):
        base_rows, head_rows = (np.stack([x[i] for i in members]) for x in (b, h))
        groups.append(_Group(members, base_rows, head_rows, int(kb[members[0]]), int(kh[members[0]])))
    return len(b), groups


def _medians(sorted_rows: np.ndarray) -> np.ndarray:
    n = sorted_rows.shape[1]
    medians: np.ndarray = 0.5 * (sorted_rows[:, (n - 1) // 2] + sorted_rows[:, n // 2])
    return medians


def _check_fraction(name: str, value: float) -> None:
    """ValueError unless ``value``, the argument ``name``, is a number strictly between 0 and 1."""
    if not (isinstance(value, (int, float)) and 0.0 < value < 1.0):
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")


def _check_bootstrap_args(level: float, resamples: int, seed: int) -> None:
    _check_fraction("level", level)
    for name, value, least in (("resamples", resamples, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")


def _tails(level: float) -> list[float]:
    """The percentiles that bound a two-sided interval at ``level``."""
    return [100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0]


def _two_stage_indices(rng: np.random.Generator, n: int, k: int, resamples: int) -> np.ndarray:
    """(resamples, n) indices of a two-stage resample of ``k`` equal clusters of ``n // k`` samples:
    ``k`` clusters drawn with replacement, then ``n // k`` samples with replacement within each."""
    m = n // k
    chosen = rng.integers(0, k, size=(resamples, k, 1))
    return (chosen * m + rng.integers(0, m, size=(resamples, k, m))).reshape(resamples, n)


def _bootstrap(n: int, groups: list[_Group], level: float, resamples: int,
               seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ratio, low, high = np.empty(n), np.full(n, np.nan), np.full(n, np.nan)
    pct = _tails(level)
    for g in groups:
        base, head = (np.sort(x, axis=1) for x in (g.base, g.head))
        ratio[g.members] = _medians(head) / _medians(base)
        nb, nh = base.shape[1], head.shape[1]
        if min(nb, nh) < MIN_SAMPLES:
            continue
        clustered = max(g.k_base, g.k_head) > 1
        if clustered:  # two-stage, on the rows in input order (see :func:`bootstrap_ratio_ci`)
            rng = np.random.default_rng([seed, nb, nh, g.k_base, g.k_head])
            sides = ((g.base, _two_stage_indices(rng, nb, g.k_base, resamples)),
                     (g.head, _two_stage_indices(rng, nh, g.k_head, resamples)))
            block = _BLOCK_ROWS // 32  # (rows, resamples, n) gathers: keep them to tens of MB
        else:
            rng = np.random.default_rng([seed, nb, nh])
            # Sorted index rows into sorted samples give sorted resamples: a resample's median is the
            # mean of the samples at its two middle indices (base drawn first).
            mid_b, mid_h = (np.sort(rng.integers(0, m, size=(resamples, m)), axis=1)
                            [:, [(m - 1) // 2, m // 2]] for m in (nb, nh))
            sides = (base, mid_b), (head, mid_h)
            block = _BLOCK_ROWS
        for start in range(0, len(g.members), block):
            rows = slice(start, start + block)
            mb, mh = (np.median(x[rows][:, i], axis=2) if clustered else 0.5 * x[rows][:, i].sum(axis=2)
                      for x, i in sides)
            low[g.members[rows]], high[g.members[rows]] = np.percentile(mh / mb, pct, axis=1)
    return ratio, low, high


def bootstrap_ratio_ci(base: SamplesLike, head: SamplesLike, *, level: float = 0.99, resamples: int = 2000,
                       seed: int = 0, base_clusters: ClustersLike = None,
                       head_clusters: ClustersLike = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ratio of medians head/base per series and its percentile bootstrap confidence interval.

    Method: the percentile bootstrap (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
    ch. 13) of the ratio of medians. Each of ``resamples`` resamples draws ``n_base`` base samples
    and, independently, ``n_head`` head samples with replacement; the interval is the
    ``(1 - level)/2`` and ``(1 + level)/2`` percentiles (numpy's linear interpolation) of the
    resampled ratios. The median of an even count is the mean of the two middle samples.

    Vectorized per group of series with the same (n_base, n_head): the group draws one index array
    of shape ``(resamples, n_base)`` and one of ``(resamples, n_head)`` from
    ``numpy.random.default_rng([seed, n_base, n_head])`` (base first) and applies them to every
    series of the group, as indices into each series' samples sorted ascending (a resample's median
    is then the mean of the samples at its two middle sorted indices: two gathers per resample
    instead of a median). So a result depends only on the seed and its own series' samples, not on
    which other series are passed; series of one group share resampling patterns (their intervals
    are correlated, each is still a valid interval).

    Clustered samples: samples taken in ``k`` worker processes vary more between processes than
    within one, so resampling single samples would make the interval too narrow. With
    ``base_clusters``/``head_clusters`` (one int per series: the series' samples are ``k`` equal,
    consecutive clusters), a side is resampled in two stages: ``k`` clusters with replacement, then
    samples with replacement within each chosen cluster (Davison & Hinkley, *Bootstrap Methods and
    their Application*, 1997, §3.8), from ``default_rng([seed, n_base, n_head, k_base, k_head])``,
    taking ``np.median`` of each resample. With ``k = 1`` it is the plain bootstrap above.

    Args:
        base, head: one 1-D array of samples per series (any unit, e.g. µs), same series order.
        base_clusters, head_clusters: None (every sample independent) or ints of shape (series,).
        level: confidence level in (0, 1); 0.99 gives the 0.5th and 99.5th percentiles.
        resamples: bootstrap resamples (>= 1; Efron & Tibshirani advise >= 1000 for percentiles).
        seed: non-negative int.

    Returns:
        ``(ratio, low, high)``, float64 arrays of shape (series,), unitless (1.0 = no change).
        ``low`` and ``high`` are NaN where either side has fewer than ``MIN_SAMPLES`` samples.

    Raises:
        ValueError: see the module docstring; also a level, resamples or seed out of range.
    """
    _check_bootstrap_args(level, resamples, seed)
    return _bootstrap(*_prepare(base, head, base_clusters, head_clusters), level, int(resamples), int(seed))


def _mann_whitney(n: int, groups: list[_Group]) -> np.ndarray:
    p = np.full(n, np.nan)
    for g in groups:
        n_min = min(g.base.shape[1], g.head.shape[1])
        if n_min < MIN_SAMPLES:
            continue
        # scipy's "auto" looks for ties over the whole batch; decide per series as a lone call would.
        pooled = np.sort(np.concatenate([g.head, g.base], axis=1), axis=1)
        exact = (n_min <= _MWU_EXACT_MAX_N) & (np.diff(pooled, axis=1) != 0).all(axis=1)
        for mask, method in ((~exact, "asymptotic"), (exact, "exact")):
            if mask.any():
                p[g.members[mask]] = mannwhitneyu(g.head[mask], g.base[mask], alternative="two-sided",
                                                axis=1, method=method).pvalue
    return p


def mann_whitney_p(base: SamplesLike, head: SamplesLike) -> np.ndarray:
    """Two-sided Mann–Whitney U p-value per series (scipy.stats.mannwhitneyu, as in Google
    Benchmark's compare.py), equal to ``mannwhitneyu(head[i], base[i]).pvalue`` series by series.

    One scipy call per (n_base, n_head) group with ``axis=1``; for small groups the exact/asymptotic
    choice of ``method="auto"`` is made per series (exact when a side has <= 8 samples and there are
    no ties), since scipy would otherwise make it once for the whole batch.

    Returns:
        float64 array of shape (series,); NaN where a side has fewer than ``MIN_SAMPLES`` samples;
        1.0 where all samples of both sides are equal.

    Raises:
        ValueError: see the module docstring.
    """
    return _mann_whitney(*_prepare(base, head))


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values), via scipy.stats.false_discovery_control.

    Benjamini & Hochberg, "Controlling the false discovery rate", JRSS B 57 (1995). The family is
    every non-NaN entry of ``p``: pass all series of one comparison in one call. NaN entries stay
    NaN and do not count towards the family size.

    Args:
        p: p-values, any shape, in [0, 1] or NaN.

    Returns:
        float64 array of the same shape.

    Raises:
        ValueError: an entry is infinite or outside [0, 1].
    """
    p = np.asarray(p, dtype=np.float64)
    known = ~np.isnan(p)
    bad = known & ~((p >= 0) & (p <= 1))
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"p-value {i} is {p.ravel()[i]!r}; p-values must lie in [0, 1] or be NaN")
    q = np.full(p.shape, np.nan)
    if known.any():
        q[known] = false_discovery_control(p[known], method="bh")
    return q


def _noise(n: int, groups: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """IQR / median per series from (index, rows) groups."""
    out = np.empty(n)
    for index, rows in groups:
        q25, q50, q75 = np.percentile(rows, [25, 50, 75], axis=1)
        out[index] = (q75 - q25) / q50
    return out


def noise(samples: SamplesLike) -> np.ndarray:
    """IQR / median per series (IQR as in stats.summary: numpy's linear interpolation), unitless.

    The relative-spread guard of asv and pyperf: above :data:`benchtrail.stats.inference.NOISE_LIMIT` a row
    is labelled ``noisy``. One sample gives 0.

    Returns:
        float64 array of shape (series,).

    Raises:
        ValueError: a series is empty or has a non-finite or <= 0 sample (message names its index).
    """
    series = _as_series(samples, "series")
    groups = _groups_of([(x.size,) for x in series])
    return _noise(len(series), [(index, np.stack([series[i] for i in index])) for index in groups])


def _mde(n: int, groups: list[_Group], level: float) -> np.ndarray:
    z = float(ndtri(0.5 + level / 2.0))
    out = np.full(n, np.nan)
    for g in groups:
        if min(g.base.shape[1], g.head.shape[1]) < MIN_SAMPLES:
            continue
        var = 0.0
        for s in (g.base, g.head):
            q25, q50, q75 = np.percentile(s, [25, 50, 75], axis=1)
            var = var + (math.pi / 2.0) * ((q75 - q25) / _IQR_PER_SIGMA / q50) ** 2 / s.shape[1]
        out[g.members] = 100.0 * z * np.sqrt(var)
    return out


def minimum_detectable_effect(base: SamplesLike, head: SamplesLike, level: float = 0.99) -> np.ndarray:
    """Smallest change of the median, in percent, this comparison can tell from no change.

    Normal approximation, not the bootstrap: a robust sigma ``IQR / 1.349`` per side (the IQR of a
    normal distribution is 1.349 σ), the asymptotic standard error of a sample median
    ``sqrt(π/2)·σ/√n`` (the large-sample variance of a median, 1/(4·n·f(m)²), for a normal density;
    e.g. Kendall & Stuart, *The Advanced Theory of Statistics*, vol. 1), and the delta method for
    the log of the ratio of medians::

        MDE% = 100 · z_{(1+level)/2} · sqrt(π/2 · (σ_b²/(m_b²·n_b) + σ_h²/(m_h²·n_h)))

    It is the half-width of the normal-approximation interval of the ratio: a true change of this
    size is detected about half the time; gating against a threshold t needs about t + MDE.

    Returns:
        float64 array of shape (series,), in percent; NaN where a side has fewer than
        ``MIN_SAMPLES`` samples; 0 where both sides have zero IQR.

    Raises:
        ValueError: see the module docstring; also a level outside (0, 1).
    """
    _check_fraction("level", level)
    return _mde(*_prepare(base, head), level)
