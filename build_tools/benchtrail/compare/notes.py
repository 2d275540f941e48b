"""The notes and marks a judged row gets after its verdict (compare.verdicts): its reason notes the
instruction count beside a suspect latency row, a harness floor near its median, a thread count the
benchmark changed and a definition hashed by another scheme; a latency row of a device gating on
instructions is quarantined; a regressed row is marked confirmed, unconfirmed, accepted or quarantined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from benchtrail.compare.document import INCONCLUSIVE, Row, accepted
from benchtrail.compare.rules import Rules
from benchtrail.compare.tables import CHANGES
from benchtrail.results.schema import BenchmarkRecord

#: The reason of a row whose two sides' definitions were hashed by different schemes (the content hash's
#: ``HASH_SCHEME``): compared, their definitions unchecked.
HASH_SCHEME_NOTE = "definition not checked: hash scheme changed"
#: A row whose median is below this many times its harness floor says so (``_floor_note``).
FLOOR_FACTOR = 10
#: Appended to the reason of a suspect latency row whose run config's instruction count is ``similar``.
UNCHANGED_NOTE = "instructions unchanged (memory, threads or frequency?)"


def count_note(row: Row, counts: dict[str, Row]) -> str | None:
    """What a suspect latency row says of its run config's instruction row in ``counts``:
    :data:`UNCHANGED_NOTE` when similar, ``instructions +1.23% (regressed)`` when changed, else None."""
    c = counts.get(f"{row.id}-instructions")
    if c is None or row.verdict not in (*CHANGES, *INCONCLUSIVE):
        return None
    note = (
        UNCHANGED_NOTE
        if c.verdict == "similar"
        else f"instructions {c.change:+.2f}% ({c.verdict})"
        if c.verdict in CHANGES
        else None
    )
    return None if note and note in (row.reason or "") else note


def beside_counts(rows: list[Row]) -> list[Row]:
    """``rows`` with each suspect latency row noting its instruction row (:func:`count_note`), and each
    latency row of a device gating on instructions (``details.gate``) quarantined when its count was
    judged (else its wall time gates, its reason saying why)."""
    counts = {r.id: r for r in rows if r.metric == "instructions"}
    out = []
    for r in rows:
        if r.metric == "latency":
            r = _noted(r, count_note(r, counts))
        if r.metric == "latency" and r.head_details.get("gate") == "instructions":
            c = counts.get(f"{r.id}-instructions")
            if c is not None and c.verdict in (*CHANGES, "similar"):
                r = replace(
                    r, quarantined=f"wall time is reported, not gated: {r.device_name} gates on instructions"
                )
            else:  # without a judged count nothing would gate the case's work: its wall time does
                said = "this case has no count" if c is None else f"its count is {c.verdict}"
                r = _noted(r, f"wall time gates: {r.device_name} gates on instructions, and {said}")
        out.append(r)
    return out


def _noted(row: Row, *notes: str | None) -> Row:
    """``row`` with ``notes`` (those not None) appended to its reason."""
    return replace(row, reason="; ".join(filter(None, (row.reason, *notes))) or row.reason)


def threads_note(head: BenchmarkRecord) -> str | None:
    """Why a case ran at another thread count than the runner set (``details.threads_set``), or None."""
    ran, set_ = head.details.get("threads"), head.details.get("threads_set")
    if isinstance(ran, int) and isinstance(set_, int) and ran != set_:
        return (
            f"the benchmark's code changes torch's thread count: set {set_} before each sample, ran at {ran}"
        )
    return None


def _floor_note(head: BenchmarkRecord) -> str | None:
    """That a case's median is within ``FLOOR_FACTOR`` × the per-call floor (``details.floor_us``)."""
    floor, median = head.details.get("floor_us"), head.median
    if isinstance(floor, (int, float)) and floor > 0 and median is not None and median < FLOOR_FACTOR * floor:
        return (
            f"near the harness floor: median {median:.3g} µs, floor {floor:.2g} µs per call; a change "
            "this small may be the harness's (docs/statistics.md)"
        )
    return None


def with_notes(row: Row, head: BenchmarkRecord, unchecked: bool) -> Row:
    """``row`` with :data:`HASH_SCHEME_NOTE` (when its definitions were hashed by two schemes, ``unchecked``)
    and the head's floor and thread notes (not on a failed row) added to its reason."""
    notes = [HASH_SCHEME_NOTE if unchecked else None]
    if row.verdict != "failed" and head.kind == "execution":
        said = (row.reason or "").startswith("thread counts differ")
        notes += (_floor_note(head), None if said else threads_note(head))
    return _noted(row, *notes)


def regression_mark(row: Row, accept: Sequence[str], other: str = "confirmed") -> str:
    """The mark of a regressed row: ``quarantined`` when its series is (``row.quarantined``), ``accepted``
    when an ``accept`` glob matches it (:func:`accepted`), else ``other``."""
    return "quarantined" if row.quarantined else "accepted" if accepted(row, accept) else other


def mark_regressions(rows: list[Row], rules: Rules, paired: bool = False) -> list[Row]:
    """Mark each regressed row ``quarantined`` (a quarantine entry matches), ``accepted`` (an accept glob
    matches), ``confirmed`` when ``paired`` or instruction counts, else ``unconfirmed``; every row a
    quarantine entry matches carries its reason in ``quarantined``."""
    marked = []
    for r in rows:
        entry = rules.quarantined(r.name, r.id)
        r = replace(r, quarantined=entry.reason) if entry else r
        if r.verdict == "regressed":
            confirmed = "confirmed" if paired or r.metric == "instructions" else "unconfirmed"
            r = replace(r, mark=regression_mark(r, rules.accept, confirmed))
        marked.append(r)
    return marked
