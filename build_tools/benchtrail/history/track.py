"""Post-merge regression tracking: change points in each series' first-parent history.

Per execution latency and compilation time series, the signal is ln(per-commit median) over a robust
run-to-run noise estimate; change points come from ruptures' PELT (Killick, Fearnhead & Eckley 2012,
``l1`` cost, ``min_size=2``, penalty ``PENALTY_PER_LOG_N * ln(n)``). Excursions are left out and PELT runs
again, then cuts with a Mann–Whitney p above ``ALPHA`` are merged, weakest first (after Hunter). Each
change point has its commit range, magnitude (after/before medians) and confidence 1 − p over the
per-commit medians. The method and its measurements: docs/tracking.md.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, astuple, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail.compare.rules import Threshold, find_threshold
from benchtrail.errors import UserError
from benchtrail.git import first_parent_log, is_ancestor, is_repository, resolve_commit, short_sha
from benchtrail.history.series import History, Series

#: Version history of the track report:
#:   1 — first version.
REPORT_SCHEMA_VERSION = 1
#: Fewest ``ok`` points a series needs: 4 per side is the smallest even split where a two-sided
#: Mann–Whitney p can fall below ``ALPHA`` (exactly 2/70 ≈ 0.029), so fewer could never file an issue.
MIN_POINTS = 8
#: ruptures' ``min_size``: a segment holds at least 2 points, so one slow run is never a segment.
MIN_SEGMENT = 2
#: Penalty per change, ``PENALTY_PER_LOG_N * ln(n)`` in units of noise (l1 cost; BIC-like). With 2%
#: run-to-run noise (``measure_track.py``, docs/tracking.md) a change was found in 1.0–3.8% of series
#: without one (an issue in 0.6–1.6%), a +10% step at its exact commit in 82–98% of 12 or 30 points.
PENALTY_PER_LOG_N = 2.0
#: Smallest run-to-run noise assumed (0.1%, in log units): keeps exact synthetic data finite.
NOISE_FLOOR = 1e-3
#: Longest excursion (:func:`excursion_mask`), in points: a segment this short that goes out and
#: comes back is load on the runner (or a change already undone), not a change.
EXCURSION_MAX = 3
#: A regression files an issue only when the Mann–Whitney p of its segments is at most this.
ALPHA = 0.05
#: A change point is new when its head is among the series' last this many points.
DEFAULT_NEW_WITHIN = 10
#: An issue whose marker names a commit of the points this many either side of the head is this
#: change point's issue (more points can move a change point by a commit or two).
MATCH_RADIUS = 2


@dataclass(frozen=True)
class ChangePoint:
    """A change in the median of a series between ``base_commit`` and ``head_commit``.

    ``commits``: those in ``base_commit..head_commit`` (to bisect), ``gap_commits`` the ones without a
    stored run. Medians in ``unit``; ``magnitude_pct`` = (after/before − 1) × 100; ``p_value``: two-sided
    Mann–Whitney U over the segments' per-commit medians; ``issue``: a regression beyond the threshold
    with ``p_value <= ALPHA``.
    """

    series_id: str
    series_name: str
    kind: str
    metric: str
    unit: str
    device_name: str
    base_commit: str
    head_commit: str
    commits: tuple[str, ...]
    gap_commits: tuple[str, ...]
    before_median: float
    after_median: float
    n_before: int
    n_after: int
    magnitude_pct: float
    p_value: float
    direction: str
    threshold: str
    beyond_threshold: bool
    issue: bool
    new: bool
    base_run: tuple[str, int]
    head_run: tuple[str, int]
    nearby_commits: tuple[str, ...]

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_value


@dataclass(frozen=True)
class Insufficient:
    """A tracked series with fewer than ``needed`` ``ok`` points: not analysed (not an error)."""

    series_id: str
    series_name: str
    device_name: str
    points: int
    needed: int


@dataclass(frozen=True)
class TrackReport:
    ref: str
    head: str
    store: str
    commits: int
    runs: int
    tracked: int
    change_points: tuple[ChangePoint, ...]
    insufficient: tuple[Insufficient, ...]


def is_tracked(series: Series) -> bool:
    """Execution latency and compilation time series (counts and bytes are judged per PR only)."""
    return (series.kind == "execution" and series.metric == "latency") or (
        series.kind == "compilation" and series.metric.startswith("compile_time_")
    )


def noise_scale(log_medians: np.ndarray) -> float:
    """Run-to-run noise σ of a log signal: 1.4826 × median |first difference| / √2 (a step adds one
    large difference, which the median ignores), at least ``NOISE_FLOOR``."""
    diffs = np.abs(np.diff(log_medians))
    return max(1.4826 * float(np.median(diffs)) / math.sqrt(2.0), NOISE_FLOOR) if diffs.size else NOISE_FLOOR


def detect(log_medians: np.ndarray) -> list[int]:
    """Indices where a new segment starts (ruptures PELT, ``l1``, ``min_size=2``), ascending."""
    import ruptures as rpt

    signal = (np.asarray(log_medians, dtype=np.float64) / noise_scale(log_medians)).reshape(-1, 1)
    ends = (
        rpt.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1)
        .fit(signal)
        .predict(pen=PENALTY_PER_LOG_N * math.log(len(log_medians)))
    )
    return [int(e) for e in ends[:-1]]


def _p_value(before: np.ndarray, after: np.ndarray) -> float:
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(before, after, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p


def excursion_mask(medians: np.ndarray, cuts: list[int]) -> np.ndarray:
    """Bool (n,) mask of excursions in ``medians`` (float64 (n,), positive): segments of at most
    ``EXCURSION_MAX`` points above or below both neighbours, whose neighbours lie closer to each other
    (in log levels) than to it: the series went out and came back, as under a burst of runner load.
    """
    bounds = [0, *cuts, len(medians)]
    levels = np.log([float(np.median(medians[a:b])) for a, b in itertools.pairwise(bounds)])
    mask = np.zeros(len(medians), dtype=bool)
    for i in range(1, len(levels) - 1):
        before, level, after = levels[i - 1 : i + 2]
        out = level > max(before, after) or level < min(before, after)
        back = abs(after - before) < min(abs(level - before), abs(level - after))
        if out and back and bounds[i + 1] - bounds[i] <= EXCURSION_MAX:
            mask[bounds[i] : bounds[i + 1]] = True
    return mask


def significant_cuts(medians: np.ndarray, cuts: list[int]) -> list[int]:
    """``cuts`` less those whose segments' Mann–Whitney p exceeds ``ALPHA``, the weakest removed first and
    the rest re-tested: Hunter's bottom-up merge (Fleming et al., ICPE 2023) with Mann–Whitney U in place
    of the t-test. ``medians``: float64 (n,), any unit."""
    kept = list(cuts)
    while kept:
        bounds = [0, *kept, len(medians)]
        p_values = [
            _p_value(medians[bounds[i] : cut], medians[cut : bounds[i + 2]]) for i, cut in enumerate(kept)
        ]
        weakest = int(np.argmax(p_values))
        if p_values[weakest] <= ALPHA:
            break
        del kept[weakest]
    return kept


def track(
    history: History,
    thresholds: tuple[Threshold, ...],
    *,
    new_within: int = DEFAULT_NEW_WITHIN,
    merge_weak: bool = True,
) -> TrackReport:
    """Change points of every tracked series of ``history``, over its ``ok`` points with a positive median.

    ``merge_weak=False`` keeps every PELT change point, without the excursion and merge steps. A change
    is ``new`` when its head is among the last ``new_within`` points. UserError for a series no
    threshold rule matches.
    """
    walked = [c.commit for c in history.commits]
    found: list[ChangePoint] = []
    short_of: list[Insufficient] = []
    tracked = [s for s in history.series if is_tracked(s)]
    for series in tracked:
        points = [p for p in series.points if p.status == "ok" and p.value is not None and p.value > 0]
        if len(points) < MIN_POINTS:
            short_of.append(Insufficient(series.id, series.name, series.device_name, len(points), MIN_POINTS))
            continue
        medians = np.array([p.value for p in points], dtype=np.float64)
        cuts = detect(np.log(medians))
        if merge_weak:
            kept = ~excursion_mask(medians, cuts)
            if not kept.all():  # detect again without the excursions' points
                points = [p for p, k in zip(points, kept) if k]
                medians = medians[kept]
                cuts = detect(np.log(medians))
            cuts = significant_cuts(medians, cuts)
        rule = find_threshold(thresholds, series.kind, series.metric, series.name)
        unit = "%" if rule.unit == "percent" else f" {series.unit}"
        bounds = [0, *cuts, len(points)]
        for lo, cut, hi in zip(bounds, bounds[1:], bounds[2:]):  # a change point and its two segments
            before, after = medians[lo:cut], medians[cut:hi]
            b, a = float(np.median(before)), float(np.median(after))
            magnitude = (a / b - 1.0) * 100.0
            worse = a > b if rule.lower_is_better else a < b
            beyond = abs(magnitude if rule.unit == "percent" else a - b) > rule.threshold
            p = _p_value(before, after)
            base, head = points[cut - 1], points[cut]
            span = history.commits[walked.index(base.commit) + 1 : walked.index(head.commit) + 1]
            found.append(
                ChangePoint(
                    *astuple(series.key),
                    base.commit,
                    head.commit,
                    tuple(c.commit for c in span),
                    tuple(c.commit for c in span if c.run_id is None),
                    b,
                    a,
                    len(before),
                    len(after),
                    magnitude,
                    p,
                    "regression" if worse else "improvement",
                    f"{rule.threshold:g}{unit} ({rule.match})",
                    beyond,
                    worse and beyond and p <= ALPHA,
                    cut >= len(points) - new_within,
                    (base.run_id, base.attempt),
                    (head.run_id, head.attempt),
                    tuple(q.commit for q in points[max(0, cut - MATCH_RADIUS) : cut + MATCH_RADIUS + 1]),
                )
            )
    return TrackReport(
        history.ref,
        history.head,
        history.store,
        len(history.commits),
        len(history.run_commits()),
        len(tracked),
        tuple(found),
        tuple(short_of),
    )


def report_to_dict(report: TrackReport, issues: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON object of the track report (docs/tracking.md), with ``schema_version``."""
    run = ("run_id", "attempt")
    plain = asdict(report)
    for cp, body in zip(report.change_points, plain["change_points"]):
        del body["nearby_commits"]
        body.update(
            base_run=dict(zip(run, cp.base_run)),
            head_run=dict(zip(run, cp.head_run)),
            confidence=cp.confidence,
        )
    # the renamed fields are popped before **plain copies the rest
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tracked_series": plain.pop("tracked"),
        "insufficient_data": plain.pop("insufficient"),
        **plain,
        "method": {
            "library": "ruptures",
            "algorithm": "Pelt",
            "model": "l1",
            "min_size": MIN_SEGMENT,
            "penalty": f"{PENALTY_PER_LOG_N:g} * ln(n)",
            "signal": "ln(median) / noise",
            "confidence": "1 - two-sided Mann-Whitney U p over per-commit medians",
            "alpha": ALPHA,
            "min_points": MIN_POINTS,
        },
        "issues": issues or [],
    }


def format_table(report: TrackReport) -> str:
    """The printed summary: one row per change point, then the series with insufficient data."""
    lines = [
        f"{len(report.change_points)} change point(s) in "
        f"{report.tracked - len(report.insufficient)} of {report.tracked} tracked series over "
        f"{report.runs} run(s) of {report.commits} first-parent commit(s) of {report.ref} "
        f"({short_sha(report.head)})"
    ]
    if report.change_points:
        rows = [("series", "device", "commits", "change", "p", "new", "verdict")]
        for cp in report.change_points:
            gaps = f" ({len(cp.gap_commits)} without run)" if cp.gap_commits else ""
            verdict = cp.direction + ("" if cp.beyond_threshold else " (below threshold)")
            rows.append(
                (
                    cp.series_name,
                    cp.device_name,
                    f"{short_sha(cp.base_commit)}..{short_sha(cp.head_commit)}{gaps}",
                    f"{cp.magnitude_pct:+.1f}%",
                    f"{cp.p_value:.3g}",
                    "yes" if cp.new else "no",
                    verdict + (" → issue" if cp.issue and cp.new else ""),
                )
            )
        widths = [max(map(len, column)) for column in zip(*rows)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if report.insufficient:
        lines.append(
            f"insufficient data (fewer than {report.insufficient[0].needed} ok points), "
            f"{len(report.insufficient)} series:"
        )
        lines += [f"  {i.series_name}  {i.points} point(s)" for i in report.insufficient]
    return "\n".join(lines) + "\n"


# -- bisect-range ---------------------------------------------------------------------------------


def bisect_range(repo: Path, a: str, b: str) -> list[tuple[str, str]]:
    """``[(sha, subject)]`` of the first-parent commits in ``a..b``, oldest first: what to bisect.

    Raises UserError when ``repo`` is no git repository, ``a`` or ``b`` names no commit, or ``a`` is
    not an ancestor of ``b``.
    """
    if not is_repository(repo):
        raise UserError(f"--repo {str(repo)!r} is not a git repository (or git is not installed)")
    shas = []
    for name, ref in (("A", a), ("B", b)):
        sha = resolve_commit(repo, ref)
        if sha is None:
            raise UserError(
                f"{name} {ref!r}: git cannot resolve it to a commit in {repo}; give a sha, "
                "branch or tag (fetch the history first in a shallow clone)"
            )
        shas.append(sha)
    if not is_ancestor(repo, *shas):
        raise UserError(
            f"A {a!r} ({short_sha(shas[0])}) is not an ancestor of B {b!r} ({short_sha(shas[1])}); "
            "give the older build first"
        )
    return first_parent_log(repo, *shas)
