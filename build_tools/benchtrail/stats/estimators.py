"""Head against base for many series at once: interval, test, false-discovery control, noise, MDE.

Pure, vectorized numpy/scipy; docs/statistics.md has the method and its sources. Samples: one 1-D float
array per series (or a 2-D ``(series, n)`` array), counts may differ; results have shape ``(series,)``.
Raises ValueError when the sides hold different series counts, or a series is empty or has a sample that
is not finite and > 0 (the message names side, series and sample). A series with fewer than
``MIN_SAMPLES`` on a side gets NaN ``low``, ``high``, ``p`` and MDE; all-equal samples on both sides give
ratio 1, interval [1, 1] and p = 1.
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
    """Series sharing (n_base, n_head, k_base, k_head): ``members`` (g,) input indices, ``base`` (g, n_base)
    and ``head`` (g, n_head) their rows (cluster after cluster)."""

    members: np.ndarray
    base: np.ndarray
    head: np.ndarray
    k_base: int
    k_head: int


def _as_series(samples: SamplesLike, label: str) -> list[np.ndarray]:
    """float64 arrays; ValueError naming the first series that is empty, not 1-D, or has a bad sample."""
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
        rule = (
            "must be finite"
            if not np.isfinite(value)
            else "must be > 0 (a ratio of medians needs positive values)"
        )
        raise ValueError(f"{label} {i}: sample {col} is {float(value)!r}; samples {rule}")
    return out


def _sides(base: SamplesLike, head: SamplesLike) -> tuple[list[np.ndarray], list[np.ndarray]]:
    b, h = _as_series(base, "base series"), _as_series(head, "head series")
    if len(b) != len(h):
        raise ValueError(
            f"base has {len(b)} series and head has {len(h)}; pass one base and one head "
            "sample array per series, in the same order"
        )
    return b, h


def _groups_of(keys: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Series indices grouped by equal ``keys`` (a tuple of ints per series), in ascending key order."""
    if not keys:
        return []
    _, inverse, counts = np.unique(
        np.array(keys, dtype=np.int64), axis=0, return_inverse=True, return_counts=True
    )
    order = np.argsort(inverse.ravel(), kind="stable")
    return np.split(order, np.cumsum(counts)[:-1])


def _as_clusters(clusters: ClustersLike, series: list[np.ndarray], label: str) -> np.ndarray:
    """Clusters per series: ones when None; else positive ints dividing each series' sample count."""
    if clusters is None:
        return np.ones(len(series), dtype=np.int64)
    k = np.asarray(clusters)
    if k.shape != (len(series),) or not np.issubdtype(k.dtype, np.integer) or (k < 1).any():
        raise ValueError(
            f"{label} clusters must be one int >= 1 per series ({len(series)}), got {clusters!r}"
        )
    for i, (x, ki) in enumerate(zip(series, k)):
        if x.size % ki:
            raise ValueError(f"{label} series {i}: {x.size} samples do not split into {ki} equal clusters")
    return k.astype(np.int64)


def _prepare(
    base: SamplesLike,
    head: SamplesLike,
    base_clusters: ClustersLike = None,
    head_clusters: ClustersLike = None,
) -> tuple[int, list[_Group]]:
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
    return [100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0]


def _two_stage_indices(rng: np.random.Generator, n: int, k: int, resamples: int) -> np.ndarray:
    """(resamples, n) indices: ``k`` of the ``k`` equal clusters drawn with replacement, then samples with
    replacement within each."""
    m = n // k
    chosen = rng.integers(0, k, size=(resamples, k, 1))
    return (chosen * m + rng.integers(0, m, size=(resamples, k, m))).reshape(resamples, n)


def _bootstrap(
    n: int, groups: list[_Group], level: float, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
            sides = (
                (g.base, _two_stage_indices(rng, nb, g.k_base, resamples)),
                (g.head, _two_stage_indices(rng, nh, g.k_head, resamples)),
            )
            block = _BLOCK_ROWS // 32  # (rows, resamples, n) gathers: keep them to tens of MB
        else:
            rng = np.random.default_rng([seed, nb, nh])
            # Sorted index rows into sorted samples give sorted resamples: a resample's median is the
            # mean of the samples at its two middle indices (base drawn first).
            mid_b, mid_h = (
                np.sort(rng.integers(0, m, size=(resamples, m)), axis=1)[:, [(m - 1) // 2, m // 2]]
                for m in (nb, nh)
            )
            sides = (base, mid_b), (head, mid_h)
            block = _BLOCK_ROWS
        for start in range(0, len(g.members), block):
            rows = slice(start, start + block)
            mb, mh = (
                np.median(x[rows][:, i], axis=2) if clustered else 0.5 * x[rows][:, i].sum(axis=2)
                for x, i in sides
            )
            low[g.members[rows]], high[g.members[rows]] = np.percentile(mh / mb, pct, axis=1)
    return ratio, low, high


def bootstrap_ratio_ci(
    base: SamplesLike,
    head: SamplesLike,
    *,
    level: float = 0.99,
    resamples: int = 2000,
    seed: int = 0,
    base_clusters: ClustersLike = None,
    head_clusters: ClustersLike = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ratio of medians head/base per series and its percentile bootstrap interval (Efron & Tibshirani).

    Each group of series with equal (n_base, n_head) shares index arrays from
    ``numpy.random.default_rng([seed, n_base, n_head])``, so a result depends only on the seed and its own
    series. ``base_clusters``/``head_clusters`` (None, or ints of shape (series,): the series' samples are
    that many equal consecutive clusters, e.g. worker processes) resample clusters, then samples within
    them (Davison & Hinkley §3.8), from ``default_rng([seed, n_base, n_head, k_base, k_head])``.
    ``level`` in (0, 1): 0.99 gives the 0.5th and 99.5th percentiles; ``resamples`` >= 1; ``seed`` >= 0.

    Returns:
        ``(ratio, low, high)``, float64 (series,), unitless (1.0 = no change); ``low``/``high`` NaN below
        ``MIN_SAMPLES``.

    Raises:
        ValueError: as the module says; also a level, resamples or seed out of range.
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
                p[g.members[mask]] = mannwhitneyu(
                    g.head[mask], g.base[mask], alternative="two-sided", axis=1, method=method
                ).pvalue
    return p


def mann_whitney_p(base: SamplesLike, head: SamplesLike) -> np.ndarray:
    """Two-sided Mann–Whitney U p-value per series, as in Google Benchmark's compare.py: equal to
    ``scipy.stats.mannwhitneyu(head[i], base[i]).pvalue``. float64 (series,); ValueError as the module says.
    """
    return _mann_whitney(*_prepare(base, head))


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg q-values (scipy's ``false_discovery_control``) of ``p``: any shape, [0, 1] or NaN.

    The family is every non-NaN entry: pass all series of one comparison at once. NaN stays NaN.
    Raises ValueError: an entry is infinite or outside [0, 1].
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
    out = np.empty(n)
    for index, rows in groups:
        q25, q50, q75 = np.percentile(rows, [25, 50, 75], axis=1)
        out[index] = (q75 - q25) / q50
    return out


def noise(samples: SamplesLike) -> np.ndarray:
    """IQR / median per series (numpy's linear interpolation), unitless, float64 (series,); one sample: 0.

    The relative-spread guard of asv and pyperf. ValueError: an empty series or a bad sample (as above).
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

    Normal approximation (docs/statistics.md)::

        MDE% = 100 · z_{(1+level)/2} · sqrt(π/2 · (σ_b²/(m_b²·n_b) + σ_h²/(m_h²·n_h))),  σ = IQR / 1.349

    A true change of this size is detected about half the time; gating at threshold t needs about t + MDE.
    float64 (series,); NaN below ``MIN_SAMPLES``; 0 where both IQRs are 0. ValueError as the module says,
    or a level outside (0, 1).
    """
    _check_fraction("level", level)
    return _mde(*_prepare(base, head), level)
