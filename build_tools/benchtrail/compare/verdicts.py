"""The compare stage: give every series a verdict, head against baseline.

Execution series are first checked for samples that cannot be judged: a zero, negative, NaN or
infinite sample or median on either side is ``not-comparable``; fewer than ``MIN_SAMPLES_FOR_TEST``
samples on a side, or a side whose samples are all equal, is ``insufficient-samples`` (never gated).
Each such row says why. Compilation series keep the median rule below. Other series under a
percent rule with at least ``MIN_SAMPLES_FOR_TEST`` samples on each side go through
``stats.inference.compare_samples`` together: the ratio of medians with a 99% percentile bootstrap
interval (two-stage over worker processes when a record pools several), a two-sided Mann–Whitney U
test, Benjamini–Hochberg over all of them, the noise label (IQR/median above 25%: ``noisy``) and
the minimum detectable effect; a row is ``regressed`` only when its whole interval lies beyond the threshold and q < ``ALPHA``,
``similar`` only when it lies within it, else ``inconclusive`` (docs/statistics.md). Counts and bytes (absolute rules) and compilation series with fewer samples,
such as one-sample compile times, are judged on the change of the median against the threshold.
Which way is worse is the series' direction (its record's, its metric's: ``results.schema.METRICS``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from benchtrail.errors import UserError
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.stats.inference import compare_samples
from benchtrail.stats.power import samples_needed, smallest_p
from benchtrail.stats.sequential import resamples_for
from benchtrail.stats.paired import compare_paired
from benchtrail.compare.rules import Threshold, find_threshold
from benchtrail.compare.document import Row, accepted

ALPHA = 0.01
MIN_SAMPLES_FOR_TEST = 5
#: The reason of a row whose two sides' definitions were hashed by different schemes
#: (``benchtrail.suite.content_hash.HASH_SCHEME``): compared, their definitions unchecked.
HASH_SCHEME_NOTE = "definition not checked: hash scheme changed"
#: A row whose median is below this many times its harness floor says so (``_floor_note``).
FLOOR_FACTOR = 10


def _row(head: BenchmarkRecord | None, base: BenchmarkRecord | None, verdict: str, reason: str | None,
         threshold: Threshold | None = None, change: float | None = None, p_value: float | None = None,
         **inference: Any) -> Row:
    ref = head or base
    assert ref is not None
    return Row(
        id=ref.id, name=ref.name, kind=ref.kind, metric=ref.metric, unit=ref.unit, device_name=ref.device_name,
        module_name=ref.module_name, compile_config=ref.compile_config, verdict=verdict, reason=reason,
        base_median=base.median if base else None, head_median=head.median if head else None,
        base_iqr=base.iqr if base else None, head_iqr=head.iqr if head else None,
        base_n=base.n if base else 0, head_n=head.n if head else 0, change=change,
        change_unit=None if threshold is None else ("%" if threshold.unit == "percent" else ref.unit),
        p_value=p_value, threshold=asdict(threshold) if threshold else None,
        head_details=head.details if head else {}, base_details=base.details if base else {}, **inference,
    )


@dataclass(frozen=True)
class Unreported:
    """A run config of the head run's execution export that has no record in the head results: its
    execution series (``<run config id>``, latency in µs, as ``benchtrail.runner.run_cases.case_record``
    names it) and why it has none (e.g. ``no result: shard 1 of device d did not report (…)``)."""

    id: str
    name: str
    device_name: str
    module_name: str
    compile_config: str
    reason: str
    kind: str = "execution"
    metric: str = "latency"
    unit: str = "us"


def _unreported_row(u: Unreported, base: BenchmarkRecord | None) -> Row:
    """The ``failed`` row of a series the head should have and has not; the baseline's figures when it has them."""
    return Row(
        id=u.id, name=u.name, kind=u.kind, metric=u.metric, unit=u.unit, device_name=u.device_name,
        module_name=u.module_name, compile_config=u.compile_config, verdict="failed", reason=u.reason,
        base_median=base.median if base else None, head_median=None, base_iqr=base.iqr if base else None,
        head_iqr=None, base_n=base.n if base else 0, head_n=0, change=None, change_unit=None, p_value=None,
        threshold=None, head_details={}, base_details=base.details if base else {},
    )


def _finite_positive(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def _sample_problem(base: BenchmarkRecord, head: BenchmarkRecord) -> tuple[str, str] | None:
    """``(verdict, reason)`` of an execution pair whose samples cannot be judged, or None when they can:
    ``not-comparable`` for a zero, negative, NaN or infinite sample or median on a side,
    ``insufficient-samples`` for fewer than ``MIN_SAMPLES_FOR_TEST`` samples or all-equal samples on a side."""
    sides = (("baseline", base), ("head", head))
    for side, r in sides:
        for i, x in enumerate(r.samples):
            if not _finite_positive(x):
                what = "not a finite number" if not math.isfinite(x) else "0 or negative"
                return "not-comparable", (f"{side} sample {i} is {x!r} ({what}); {r.metric} samples must be "
                                          "finite and > 0")
        if r.samples and not _finite_positive(r.median):
            return "not-comparable", f"{side} median is {r.median!r}; it must be finite and > 0"
    for side, r in sides:
        if len(r.samples) < MIN_SAMPLES_FOR_TEST:
            return "insufficient-samples", (f"{side} has {len(r.samples)} sample{'s' if len(r.samples) != 1 else ''}"
                                            f"; at least {MIN_SAMPLES_FOR_TEST} on each side are needed")
    for side, r in sides:
        if min(r.samples) == max(r.samples):
            return "insufficient-samples", (f"all {len(r.samples)} {side} samples are equal ({r.samples[0]!r}): no "
                                            "spread to judge a change by (a timer's resolution?)")
    return None


def _change(base: BenchmarkRecord, head: BenchmarkRecord, threshold: Threshold) -> float | None:
    """The change of the median (percent or absolute, per the rule), None when a median is unusable."""
    if threshold.unit == "percent":
        ok = _finite_positive(base.median) and head.median is not None and math.isfinite(head.median)
        return (head.median / base.median - 1.0) * 100.0 if ok else None
    ok = all(m is not None and math.isfinite(m) for m in (base.median, head.median))
    return head.median - base.median if ok else None


def _precheck(base: BenchmarkRecord, head: BenchmarkRecord, threshold: Threshold) -> Row | None:
    """The verdict of a pair that cannot be compared on its samples, or None when it can."""
    if head.status != "ok":
        return _row(head, base, "failed", f"head {head.status}: {head.reason}")
    if base.status != "ok":
        return _row(head, base, "not-comparable", f"baseline {base.status}: {base.reason}")
    if base.metric != head.metric or base.direction != head.direction:
        return _row(head, base, "not-comparable", f"metrics differ: baseline {base.metric} ({base.direction}), "
                                                  f"head {head.metric} ({head.direction})")
    if base.unit != head.unit:
        return _row(head, base, "not-comparable", f"units differ: baseline {base.unit}, head {head.unit}")
    if base.content_hash != head.content_hash:
        # Shown for information (a fixed graph break is news), never gated.
        change = None if base.median is None or head.median is None else head.median - base.median
        return _row(head, base, "not-comparable",
                    "definition changed (content hash differs: flags, torch version or model source)",
                    threshold, change if threshold.unit == "absolute" else None)
    if head.kind == "execution":
        b, h = base.details.get("threads"), head.details.get("threads")
        if isinstance(b, int) and isinstance(h, int) and b != h:
            sets = [side for side, r in (("baseline", base), ("head", head)) if _threads_note(r)]
            return _row(head, base, "not-comparable", f"thread counts differ: the baseline ran at {b} "
                        f"thread{'s' if b != 1 else ''}, the head at {h}"
                        + (f" (the {' and '.join(sets)}'s code changes it)" if sets else ""))
        problem = _sample_problem(base, head)
        if problem is not None:
            return _row(head, base, *problem, threshold, _change(base, head, threshold))
    if any(not math.isfinite(x) for x in base.samples + head.samples):
        side = "baseline" if any(not math.isfinite(x) for x in base.samples) else "head"
        return _row(head, base, "not-comparable", f"{side} has a sample that is not a finite number")
    for side, r in (("baseline", base), ("head", head)):
        negative = [i for i, x in enumerate(r.samples) if x < 0]
        if negative:  # compile times, counts and bytes are never below 0
            return _row(head, base, "not-comparable", f"{side} sample {negative[0]} is {r.samples[negative[0]]!r} "
                                                      f"(negative); {r.metric} samples must be finite and >= 0")
    if base.median is None or not math.isfinite(base.median):
        return _row(head, base, "not-comparable", "baseline median is missing or NaN")
    if head.median is None or not math.isfinite(head.median):
        return _row(head, base, "not-comparable", "head median is missing or NaN")
    if threshold.unit == "percent" and base.median <= 0:
        return _row(head, base, "not-comparable", "baseline median is 0 or negative; a percent change is undefined")
    return None


def compare_series(base: BenchmarkRecord, head: BenchmarkRecord, threshold: Threshold) -> Row:
    """Verdict for one series on the change of its median alone (absolute rules, few samples)."""
    early = _precheck(base, head, threshold)
    if early is not None:
        return early
    change = _change(base, head, threshold)
    worse = change > threshold.threshold if threshold.lower_is_better else change < -threshold.threshold
    better = change < -threshold.threshold if threshold.lower_is_better else change > threshold.threshold
    if worse:
        return _row(head, base, "regressed", None, threshold, change)
    if better:
        return _row(head, base, "improved", None, threshold, change)
    return _row(head, base, "similar", None, threshold, change)


def processes(record: BenchmarkRecord) -> int:
    """Worker processes whose samples a record pools (``details.process_medians``; 1 when unknown or
    when the samples do not split evenly): the clusters of the two-stage bootstrap."""
    k = len(record.details.get("process_medians") or ())
    return k if k > 1 and len(record.samples) % k == 0 else 1


def paired_rounds(base: BenchmarkRecord, head: BenchmarkRecord) -> int | None:
    """Rounds of a paired A/B run when both records come from one (``details.ab``, equal sample
    counts that split evenly into the rounds), else None."""
    rounds = (head.details.get("ab") or {}).get("rounds")
    if not rounds or (base.details.get("ab") or {}).get("rounds") != rounds:
        return None
    return rounds if len(base.samples) == len(head.samples) and len(head.samples) % rounds == 0 else None


def paired_level(head: BenchmarkRecord) -> float:
    """The confidence level of a paired A/B run's last look (``details.ab.level``: under sequential sampling,
    ``benchtrail.runner.ab.Policy.sequential``, each look spends part of ``ALPHA``); ``1 - ALPHA`` for a run
    that predates it or has no valid level."""
    level = (head.details.get("ab") or {}).get("level")
    return float(level) if isinstance(level, (int, float)) and 0.0 < level < 1.0 else 1.0 - ALPHA


def _infer_paired(pairs: list[tuple[BenchmarkRecord, BenchmarkRecord, Threshold]]) -> list[Row]:
    """Rows for series of a paired A/B run: pair ratios, clustered by round (``stats.paired``), each series
    at the level of the look its run stopped at (:func:`paired_level`: interval at that level, q < 1 - level).
    Benjamini–Hochberg runs over the series of one level together, so a series alone at its level is judged on
    its own p, as its run's loop judged it; several at one level are corrected together (q >= p), and the
    bootstrap's seed here is 0 whatever ``Policy.seed`` the run used: a row may then be less decided than the
    look that stopped its run."""
    levels = [paired_level(h) for _, h, _ in pairs]
    rows: dict[int, Row] = {}
    for level in sorted(set(levels)):
        index = [i for i, x in enumerate(levels) if x == level]
        group = [pairs[i] for i in index]
        alpha = 1.0 - level
        result = compare_paired([b.samples for b, _, _ in group], [h.samples for _, h, _ in group],
                                threshold_pct=np.array([t.threshold for _, _, t in group]),
                                lower_is_better=np.array([t.lower_is_better for _, _, t in group]), alpha=alpha,
                                level=level, resamples=resamples_for(alpha),
                                clusters=np.array([paired_rounds(b, h) for b, h, _ in group], dtype=np.int64))
        rows.update(zip(index, _rows_of(group, result)))
    return [rows[i] for i in range(len(pairs))]


def _underpowered(rows: list[Row]) -> list[Row]:
    """``rows`` (compared together) with each ``inconclusive`` one whose sample counts could not show a lone
    change among them (the smallest Mann–Whitney p × the rows is not below ``ALPHA``:
    ``stats.power.smallest_p``) made ``insufficient-samples``, naming the samples a side it needed."""
    m = len(rows)
    return [replace(r, verdict="insufficient-samples", reason=(
        f"{r.base_n} and {r.head_n} samples cannot show a lone change among {m} series compared (smallest p × {m} "
        f"is not below {ALPHA:g}): {samples_needed(m, ALPHA)} a side are needed"))
        if r.verdict == "inconclusive" and smallest_p(r.base_n, r.head_n) * m >= ALPHA else r for r in rows]


def _infer(pairs: list[tuple[BenchmarkRecord, BenchmarkRecord, Threshold]]) -> list[Row]:
    """Rows for percent-rule series with enough samples, all compared in one vectorized pass (series
    of a paired A/B run in a pass of their own)."""
    if not pairs:
        return []
    paired = [paired_rounds(b, h) is not None for b, h, _ in pairs]
    if all(paired):
        return _infer_paired(pairs)
    if any(paired):
        rows = dict(zip([i for i, x in enumerate(paired) if x], _infer_paired([p for p, x in zip(pairs, paired) if x])))
        rows.update(zip([i for i, x in enumerate(paired) if not x], _infer([p for p, x in zip(pairs, paired) if not x])))
        return [rows[i] for i in range(len(pairs))]
    result = compare_samples([b.samples for b, _, _ in pairs], [h.samples for _, h, _ in pairs],
                             threshold_pct=np.array([t.threshold for _, _, t in pairs]),
                             lower_is_better=np.array([t.lower_is_better for _, _, t in pairs]), alpha=ALPHA,
                             base_clusters=np.array([processes(b) for b, _, _ in pairs], dtype=np.int64),
                             head_clusters=np.array([processes(h) for _, h, _ in pairs], dtype=np.int64))
    return _underpowered(_rows_of(pairs, result))


def _rows_of(pairs: list[tuple[BenchmarkRecord, BenchmarkRecord, Threshold]], result) -> list[Row]:
    rows = []
    for k, (b, h, t) in enumerate(pairs):
        finite = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        pct = lambda x: (float(x) - 1.0) * 100.0 if np.isfinite(x) else None  # noqa: E731
        rows.append(_row(h, b, str(result.verdict[k]), str(result.reason[k]) or None, t, pct(result.ratio[k]),
                         finite(result.p[k]), ci_low=pct(result.low[k]), ci_high=pct(result.high[k]),
                         q_value=finite(result.q[k]), mde=finite(result.mde_pct[k]),
                         outcome=str(result.outcome[k]), noisy=bool(result.noisy[k])))
    return rows


def _index(files: list[ResultsFile], side: str, several_commits: bool = False) -> dict[str, BenchmarkRecord]:
    """Series by id over several results files of one side.

    Raises:
        UserError: the files come from different commits (unless ``several_commits``: per-device
            baselines), or two files hold the same series.
    """
    commits = sorted({f.commit for f in files})
    if len(commits) > 1 and not several_commits:
        raise UserError(f"the {side} results come from different commits ({', '.join(c[:12] for c in commits)}); "
                        "compare one commit with another")
    index: dict[str, BenchmarkRecord] = {}
    for f in files:
        for b in f.benchmarks:
            if b.id in index:
                raise UserError(f"series {b.name!r} ({b.id}) is in two {side} results files; pass each run once")
            index[b.id] = b
    return index


def compare(base: list[ResultsFile], head: list[ResultsFile], thresholds: tuple[Threshold, ...],
            unreported: tuple[Unreported, ...] = (), mismatched: dict[str, str] | None = None,
            several_base_commits: bool = False) -> list[Row]:
    """Rows for every series in head or base, in head order, then the ``unreported`` series the head
    lacks (``failed``, with their reason; the baseline's figures when it has the series), then removed
    ones; one per series id.

    ``mismatched`` maps a device to why its baseline's key differs from the head's
    (``benchtrail.results.baseline_key.difference``): its head series are ``not-comparable`` with that reason
    and its baseline series are left out. ``several_base_commits`` allows base files of several commits
    (each device's own baseline run).

    Raises:
        UserError: two files of a side hold one series, or the thresholds have no rule for a series or
            a rule whose direction contradicts the series' (``thresholds.find_threshold``)."""
    mismatched = mismatched or {}
    base_by_id = {k: b for k, b in _index(base, "base", several_base_commits).items()
                  if b.device_name not in mismatched}
    head_by_id = _index(head, "head")
    schemes = [{b.id: f.environment.get("hash_scheme", 1) for f in files for b in f.benchmarks} for files in (base, head)]
    unchecked: set[str] = set()  # definitions hashed by two schemes: compared, not checked
    for sid, b in list(base_by_id.items()):
        h = head_by_id.get(sid)
        if h is not None and b.content_hash != h.content_hash and schemes[0].get(sid) != schemes[1].get(sid):
            base_by_id[sid] = replace(b, content_hash=h.content_hash)
            unchecked.add(sid)
    lacking = {u.id: u for u in unreported if u.id not in head_by_id}
    rows: list[Row | None] = []
    batch: list[tuple[int, tuple[BenchmarkRecord, BenchmarkRecord, Threshold]]] = []
    for sid, h in head_by_id.items():
        b = base_by_id.get(sid)
        if h.device_name in mismatched:
            rows.append(_row(h, None, "failed" if h.status != "ok" else "not-comparable",
                             f"head {h.status}: {h.reason}" if h.status != "ok" else
                             f"not compared: the baseline of {h.device_name} was measured differently "
                             f"({mismatched[h.device_name]})"))
            continue
        if b is None:
            rows.append(_row(h, None, "failed" if h.status != "ok" else "new",
                             f"head {h.status}: {h.reason}" if h.status != "ok" else "no baseline for this series"))
            continue
        t = find_threshold(thresholds, h.kind, h.metric, h.name, h.direction)
        enough = min(len(b.samples), len(h.samples)) >= MIN_SAMPLES_FOR_TEST
        positive = all(_finite_positive(x) for x in b.samples + h.samples)
        if t.unit == "percent" and enough and positive and _precheck(b, h, t) is None:
            batch.append((len(rows), (b, h, t)))
            rows.append(None)
        else:
            rows.append(compare_series(b, h, t))
    for (position, _), row in zip(batch, _infer([pair for _, pair in batch])):
        rows[position] = row
    rows = [replace(r, reason="; ".join(filter(None, (r.reason, HASH_SCHEME_NOTE)))) if r and r.id in unchecked
            else r for r in rows]
    rows = [_with_caveats(r, head_by_id[r.id]) if r and r.id in head_by_id else r for r in rows]
    rows.extend(_unreported_row(u, base_by_id.get(sid)) for sid, u in lacking.items())
    for sid, b in base_by_id.items():
        if sid not in head_by_id and sid not in lacking:
            rows.append(_row(None, b, "removed", "in the baseline but not in this run"))
    return rows


def _threads_note(head: BenchmarkRecord) -> str | None:
    """Why a case ran at another thread count than the runner set (``details.threads_set``), or None."""
    ran, set_ = head.details.get("threads"), head.details.get("threads_set")
    if isinstance(ran, int) and isinstance(set_, int) and ran != set_:
        return f"the benchmark's code changes torch's thread count: set {set_} before each sample, ran at {ran}"
    return None


def _floor_note(head: BenchmarkRecord) -> str | None:
    """That a case's median is within ``FLOOR_FACTOR`` × the harness's per-call floor (``details.floor_us``)."""
    floor, median = head.details.get("floor_us"), head.median
    if isinstance(floor, (int, float)) and floor > 0 and median is not None and median < FLOOR_FACTOR * floor:
        return (f"near the harness floor: median {median:.3g} µs, floor {floor:.2g} µs per call; a change this "
                "small may be the harness's (docs/statistics.md)")
    return None


def _with_caveats(row: Row, head: BenchmarkRecord) -> Row:
    """``row`` with the head's floor and thread notes added to its reason (not to failed or removed rows)."""
    said = (row.reason or "").startswith("thread counts differ")
    notes = [n for n in (_floor_note(head), None if said else _threads_note(head)) if n]
    if not notes or row.verdict in ("failed", "removed") or head.kind != "execution":
        return row
    return replace(row, reason="; ".join(filter(None, (row.reason, *notes))))


def mark_regressions(rows: list[Row], accept: list[str], paired: bool = False,
                     quarantine: tuple[Any, ...] = ()) -> list[Row]:
    """Mark each regressed row ``quarantined`` when a ``quarantine`` entry
    (``benchtrail.compare.rules.QuarantineEntry``) matches it, else ``accepted`` when ``accepted(row, accept)``,
    else ``confirmed`` when the samples come from a paired A/B run (``paired``), else
    ``unconfirmed``. Every row a quarantine entry matches carries its reason in ``quarantined``."""
    from benchtrail.compare.rules import find_quarantined as find

    other = "confirmed" if paired else "unconfirmed"
    marked = []
    for r in rows:
        entry = find(tuple(quarantine), r.name, r.id)
        if entry:
            r = replace(r, quarantined=entry.reason)
        if r.verdict == "regressed":
            r = replace(r, mark="quarantined" if entry else "accepted" if accepted(r, accept) else other)
        marked.append(r)
    return marked


