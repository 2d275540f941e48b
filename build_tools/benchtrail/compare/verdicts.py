"""The compare stage: give every series a verdict, head against baseline (docs/statistics.md).

Execution samples that cannot be judged make a row ``not-comparable`` (zero, negative, NaN, infinite) or
``insufficient-samples`` (fewer than ``MIN_SAMPLES_FOR_TEST`` a side, or all equal). Percent-rule series
with enough samples are compared together: ratio of medians with a 99% bootstrap interval, Mann–Whitney U,
Benjamini–Hochberg; ``regressed`` only when the whole interval lies beyond the threshold and q < ``ALPHA``,
``similar`` only within it, else ``inconclusive``. Absolute rules and few-sample compilation series are
judged on the median's change. Instruction counts are judged on their repeats' spread (no test), need the
same counter key, and are confirmed by their repeats.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Any

from benchtrail.compare.document import Row
from benchtrail.compare.notes import beside_counts, threads_note, with_notes
from benchtrail.compare.rules import Threshold, find_threshold
from benchtrail.compare.tables import CHANGES
from benchtrail.errors import UserError
from benchtrail.results.baseline_key import counter_difference
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.stats.counts import MIN_REPEATS, NOISY_SPREAD_PCT, judge_counts
from benchtrail.stats.inference import compare_samples
from benchtrail.stats.paired import compare_paired
from benchtrail.stats.power import samples_needed, smallest_p
from benchtrail.stats.sequential import resamples_for

ALPHA = 0.01
MIN_SAMPLES_FOR_TEST = 5
#: The fields that name a row's series, taken from its head record, else its base record (or the
#: :class:`Unreported` run config).
_SERIES = ("id", "name", "kind", "metric", "unit", "device_name", "module_name", "compile_config")

Pair = tuple[BenchmarkRecord, BenchmarkRecord, Threshold]


@dataclass(frozen=True)
class Unreported:
    """A run config of the head run's execution export with no record in the head results: its execution
    series (latency, µs) and why it has none (``no result: shard 1 of device d did not report (…)``)."""

    id: str
    name: str
    device_name: str
    module_name: str
    compile_config: str
    reason: str
    kind: str = "execution"
    metric: str = "latency"
    unit: str = "us"


def _row(
    head: BenchmarkRecord | None,
    base: BenchmarkRecord | None,
    verdict: str,
    reason: str | None,
    threshold: Threshold | None = None,
    change: float | None = None,
    p_value: float | None = None,
    series: BenchmarkRecord | Unreported | None = None,
    **inference: Any,
) -> Row:
    """The row of a series (named by ``series``, default: the head record, else the base record)."""
    ref = series or head or base
    if ref is None:
        raise ValueError("a row names its series: give series, head or base")
    return Row(
        **{k: getattr(ref, k) for k in _SERIES},
        verdict=verdict,
        reason=reason,
        **{
            f"{side}_{k}": getattr(r, k) if r else empty
            for side, r in (("base", base), ("head", head))
            for k, empty in (("median", None), ("iqr", None), ("n", 0), ("details", {}))
        },
        change=change,
        change_unit=None if threshold is None else ("%" if threshold.unit == "percent" else ref.unit),
        p_value=p_value,
        threshold=asdict(threshold) if threshold else None,
        **inference,
    )


def _finite_positive(x: float | None) -> bool:
    return x is not None and 0 < x < math.inf  # not NaN


def _sample_problem(
    base: BenchmarkRecord, head: BenchmarkRecord, minimum: int, spread: bool
) -> tuple[str, str] | None:
    """``(verdict, reason)`` of an execution pair whose samples cannot be judged (the module docstring's
    rule; all-equal samples only with ``spread``), else None."""
    sides = ("baseline", base), ("head", head)
    for side, r in sides:
        for i, x in enumerate(r.samples):
            if not _finite_positive(x):
                what = "0 or negative" if math.isfinite(x) else "not a finite number"
                return "not-comparable", (
                    f"{side} sample {i} is {x!r} ({what}); {r.metric} samples must be finite and > 0"
                )
        if r.samples and not _finite_positive(r.median):
            return "not-comparable", f"{side} median is {r.median!r}; it must be finite and > 0"
    for side, r in sides:
        n = len(r.samples)
        if n < minimum:
            return "insufficient-samples", (
                f"{side} has {n} sample{'s' if n != 1 else ''}; at least {minimum} on each side are needed"
            )
    for side, r in sides if spread else ():
        if min(r.samples) == max(r.samples):
            return "insufficient-samples", (
                f"all {len(r.samples)} {side} samples are equal "
                f"({r.samples[0]!r}): no spread to judge a change by (a timer's "
                "resolution?)"
            )
    return None


def _change(base: BenchmarkRecord, head: BenchmarkRecord, threshold: Threshold) -> float | None:
    """The change of the median (percent or absolute, per the rule), None when a median is unusable."""
    b, h = base.median, head.median
    if b is None or h is None or not (math.isfinite(b) and math.isfinite(h)):
        return None
    if threshold.unit == "percent":
        return (h / b - 1.0) * 100.0 if b > 0 else None
    return h - b


def _precheck(base: BenchmarkRecord, head: BenchmarkRecord, threshold: Threshold) -> Row | None:
    """The verdict of a pair that cannot be compared on its samples, or None when it can."""

    def no(reason: str) -> Row:
        return _row(head, base, "not-comparable", reason)

    sides = ("baseline", base), ("head", head)
    if head.status != "ok":
        return _row(head, base, "failed", f"head {head.status}: {head.reason}")
    if base.status != "ok":
        return no(f"baseline {base.status}: {base.reason}")
    if base.metric != head.metric:  # the loader checked that a record's unit and direction are its metric's
        return no(
            f"metrics differ: baseline {base.metric} ({base.direction}), head {head.metric} "
            f"({head.direction})"
        )
    if base.content_hash != head.content_hash:
        # Shown for information (a fixed graph break is news), never gated.
        return _row(
            head,
            base,
            "not-comparable",
            "definition changed (content hash differs: flags, torch version or model source)",
            threshold,
            _change(base, head, threshold) if threshold.unit == "absolute" else None,
        )
    if head.kind == "execution":
        b, h = base.details.get("threads"), head.details.get("threads")
        if isinstance(b, int) and isinstance(h, int) and b != h:
            sets = [side for side, r in sides if threads_note(r)]
            return no(
                f"thread counts differ: the baseline ran at {b} thread{'s' if b != 1 else ''}, the "
                f"head at {h}" + (f" (the {' and '.join(sets)}'s code changes it)" if sets else "")
            )
        counted = head.metric == "instructions"
        if counted and (differs := counter_difference(base.details, head.details)):
            return no(f"counted differently: {differs}")
        problem = _sample_problem(base, head, MIN_REPEATS if counted else MIN_SAMPLES_FOR_TEST, not counted)
        if problem:
            return _row(head, base, *problem, threshold, _change(base, head, threshold))
    for side, r in sides:
        if not all(map(math.isfinite, r.samples)):
            return no(f"{side} has a sample that is not a finite number")
    for side, r in sides:
        for i, x in enumerate(r.samples):
            if x < 0:  # compile times, counts and bytes are never below 0
                return no(
                    f"{side} sample {i} is {x!r} (negative); {r.metric} samples must be finite and >= 0"
                )
    for side, r in sides:
        if _finite(r.median) is None:
            return no(f"{side} median is missing or NaN")
    if threshold.unit == "percent" and base.median is not None and base.median <= 0:  # not None: above
        return no("baseline median is 0 or negative; a percent change is undefined")
    return None


def processes(record: BenchmarkRecord) -> int:
    """Worker processes whose samples a record pools (``details.process_medians``; 1 when unknown or
    when the samples do not split evenly): the clusters of the two-stage bootstrap."""
    k = len(record.details.get("process_medians") or ())
    return k if k > 1 and len(record.samples) % k == 0 else 1


def paired_rounds(base: BenchmarkRecord, head: BenchmarkRecord) -> int | None:
    """Rounds of a paired A/B run when both records come from one (``details.ab``, equal sample
    counts that split evenly into the rounds), else None."""
    rounds = (head.details.get("ab") or {}).get("rounds")
    if not (
        rounds
        and (base.details.get("ab") or {}).get("rounds") == rounds
        and len(base.samples) == len(head.samples)
    ):
        return None
    return rounds if len(head.samples) % rounds == 0 else None


def paired_level(head: BenchmarkRecord) -> float:
    """The confidence level of a paired A/B run's last look (``details.ab.level``; each sequential look
    spends part of ``ALPHA``); ``1 - ALPHA`` without a valid one."""
    level = (head.details.get("ab") or {}).get("level")
    return float(level) if isinstance(level, (int, float)) and 0.0 < level < 1.0 else 1.0 - ALPHA


def _underpowered(rows: list[Row]) -> list[Row]:
    """``rows`` with each ``inconclusive`` one whose sample counts could not show a lone change among them
    (smallest Mann–Whitney p × rows ≥ ``ALPHA``) made ``insufficient-samples``, naming the samples needed."""
    m = len(rows)
    return [
        replace(
            r,
            verdict="insufficient-samples",
            reason=(
                f"{r.base_n} and {r.head_n} samples cannot show a lone change among {m} series compared "
                f"(smallest p × {m} is not below {ALPHA:g}): {samples_needed(m, ALPHA)} a side are needed"
            ),
        )
        if r.verdict == "inconclusive" and smallest_p(r.base_n, r.head_n) * m >= ALPHA
        else r
        for r in rows
    ]


def _infer(pairs: list[Pair], level: float | None) -> list[Row]:
    """Rows of percent-rule series with enough samples, compared in one vectorized pass; paired A/B runs in
    a pass per ``level`` their run stopped at (None: not paired), pair ratios clustered by round.
    Benjamini–Hochberg runs per level and the bootstrap seed is 0 whatever the run used, so a row may be
    less decided than the look that stopped its run."""
    bases, heads, rules = zip(*pairs)  # the stats functions take lists as arrays
    samples = [b.samples for b in bases], [h.samples for h in heads]
    threshold_pct, lower_is_better = [t.threshold for t in rules], [t.lower_is_better for t in rules]
    if level is None:
        result = compare_samples(
            *samples,
            threshold_pct=threshold_pct,
            lower_is_better=lower_is_better,
            alpha=ALPHA,
            base_clusters=list(map(processes, bases)),
            head_clusters=list(map(processes, heads)),
        )
        return _underpowered(_rows_of(pairs, result))
    alpha = 1.0 - level
    rounds = [k for b, h in zip(bases, heads) if (k := paired_rounds(b, h))]  # all: paired pairs alone
    result = compare_paired(
        *samples,
        threshold_pct=threshold_pct,
        lower_is_better=lower_is_better,
        alpha=alpha,
        level=level,
        resamples=resamples_for(alpha),
        clusters=rounds,
    )
    return _rows_of(pairs, result)


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _pct(ratio: float) -> float | None:
    return (float(ratio) - 1.0) * 100.0 if math.isfinite(ratio) else None


def _rows_of(pairs: list[Pair], result) -> list[Row]:
    return [
        _row(
            h,
            b,
            str(result.verdict[k]),
            str(result.reason[k]) or None,
            t,
            _pct(result.ratio[k]),
            _finite(result.p[k]),
            ci_low=_pct(result.low[k]),
            ci_high=_pct(result.high[k]),
            q_value=_finite(result.q[k]),
            mde=_finite(result.mde_pct[k]),
            outcome=str(result.outcome[k]),
            noisy=bool(result.noisy[k]),
        )
        for k, (b, h, t) in enumerate(pairs)
    ]


def _index(files: list[ResultsFile], side: str, several_commits: bool = False) -> dict[str, BenchmarkRecord]:
    """Series by id over one side's results files. Raises UserError when two files hold one series or the
    files come from different commits (unless ``several_commits``: per-device baselines)."""
    commits = sorted({f.commit for f in files})
    if len(commits) > 1 and not several_commits:
        raise UserError(
            f"the {side} results come from different commits "
            f"({', '.join(c[:12] for c in commits)}); compare one commit with another"
        )
    index = {}
    for f in files:
        for b in f.benchmarks:
            if b.id in index:
                raise UserError(
                    f"series {b.name!r} ({b.id}) is in two {side} results files; pass each run once"
                )
            index[b.id] = b
    return index


def compare(
    base: list[ResultsFile],
    head: list[ResultsFile],
    thresholds: tuple[Threshold, ...],
    unreported: tuple[Unreported, ...] = (),
    mismatched: dict[str, str] | None = None,
    several_base_commits: bool = False,
) -> list[Row]:
    """One row per series id: head series in head order, then the ``unreported`` series the head lacks
    (``failed``), then removed ones. A device in ``mismatched`` (``{device: why its baseline key differs}``)
    has its head series ``not-comparable`` and its baseline series left out. ``several_base_commits``:
    each device's own baseline run. Raises UserError when two files of a side hold one series or no
    threshold rule fits a series."""
    mismatched = mismatched or {}
    base_by_id = {
        k: b for k, b in _index(base, "base", several_base_commits).items() if b.device_name not in mismatched
    }
    head_by_id = _index(head, "head")
    schemes = [
        {b.id: f.environment.get("hash_scheme", 1) for f in files for b in f.benchmarks}
        for files in (base, head)
    ]
    unchecked = set()  # definitions hashed by two schemes: compared, not checked
    lacking = {u.id: u for u in unreported if u.id not in head_by_id}
    rows: dict[str, Row] = {}  # head series id -> row (a pair _infer judges: once it has)
    # A paired run's level (_infer; None: not paired) -> series id -> pair.
    batch: defaultdict[float | None, dict[str, Pair]] = defaultdict(dict)
    for sid, h in head_by_id.items():
        b = base_by_id.get(sid)  # None for a device in mismatched
        if b and b.content_hash != h.content_hash and schemes[0][sid] != schemes[1][sid]:
            b = replace(b, content_hash=h.content_hash)
            unchecked.add(sid)
        if b is None and h.status != "ok":
            rows[sid] = _row(h, None, "failed", f"head {h.status}: {h.reason}")
        elif h.device_name in mismatched:
            rows[sid] = _row(
                h,
                None,
                "not-comparable",
                f"not compared: the baseline of {h.device_name} was "
                f"measured differently ({mismatched[h.device_name]})",
            )
        elif b is None:
            rows[sid] = _row(h, None, "new", "no baseline for this series")
        else:
            t = find_threshold(thresholds, h.kind, h.metric, h.name, h.direction)
            precheck = _precheck(b, h, t)  # None: judged below, alone or with the others (_infer)
            if precheck:
                rows[sid] = precheck
                continue
            if h.metric == "instructions" and t.unit == "percent":
                rows[sid] = _counted(b, h, t)
            elif (
                t.unit == "percent"
                and min(len(b.samples), len(h.samples)) >= MIN_SAMPLES_FOR_TEST
                and all(map(_finite_positive, b.samples + h.samples))
            ):
                batch[paired_level(h) if paired_rounds(b, h) else None][sid] = b, h, t
            else:  # absolute rules, few samples: judged on the change of the median alone
                change = _change(b, h, t)
                assert change is not None, "_precheck passed: finite medians, a percent rule's base > 0"
                worse = change if t.lower_is_better else -change  # > 0: the worse way
                verdict = (
                    "regressed" if worse > t.threshold else "improved" if worse < -t.threshold else "similar"
                )
                rows[sid] = _row(h, b, verdict, None, t, change)
    for level, group in batch.items():
        rows.update(zip(group, _infer(list(group.values()), level)))
    return (
        beside_counts([with_notes(rows[sid], h, sid in unchecked) for sid, h in head_by_id.items()])
        + [_row(None, base_by_id.get(sid), "failed", u.reason, series=u) for sid, u in lacking.items()]
        + [
            _row(None, b, "removed", "in the baseline but not in this run")
            for sid, b in base_by_id.items()
            if sid not in head_by_id and sid not in lacking
        ]
    )


def _counted(base: BenchmarkRecord, head: BenchmarkRecord, threshold: Threshold) -> Row:
    """The row of an instruction-count pair; its reason names the repeats' spread when noisy or
    inconclusive."""
    j = judge_counts(base.samples, head.samples, threshold.threshold, threshold.lower_is_better)
    reason = (
        f"repeats spread {j.spread_pct:.2f}% (bound {NOISY_SPREAD_PCT:g}%)"
        if j.noisy or j.verdict == "inconclusive"
        else None
    )
    outcome = "DIFFERENT" if j.verdict in CHANGES else "SAME" if j.verdict == "similar" else "UNKNOWN"
    return _row(
        head,
        base,
        j.verdict,
        reason,
        threshold,
        j.change_pct,
        ci_low=j.low_pct,
        ci_high=j.high_pct,
        outcome=outcome,
        noisy=j.noisy,
    )
