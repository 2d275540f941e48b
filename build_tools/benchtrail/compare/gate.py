"""The gate over comparison.json's rows: which regressions fail a run (``benchtrail gate``, ``--fail-on
regressed``, the commit status).

Rule ``confirmed`` (CI's gate and the commit status; DESIGN, "Statuses and verdicts") fails only a
regression its paired A/B re-check confirmed (or from a paired run); ``any`` (a local run without a
re-check) fails every one. Under both, a regression a ``benchmarks-accept:`` glob accepts or the quarantine
file lists never fails. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from benchtrail.compare.document import Row, accepted
from benchtrail.compare.tables import (
    change_digits,
    counted,
    estimate,
    format_change,
    format_ci,
    level_text,
    row_value,
)


@dataclass(frozen=True)
class GateResult:
    """What the gate found: the ``failing`` regressions (neither accepted nor quarantined), and counts of
    ``unconfirmed`` ones not failed (``not_reached`` of them not reached by a time-bounded re-check),
    ``accepted`` and ``quarantined`` ones."""

    failing: tuple[Row, ...]
    unconfirmed: int
    not_reached: int
    accepted: int
    quarantined: int

    @property
    def passed(self) -> bool:
        return not self.failing


def check(
    rows: Sequence[Row], accept: Sequence[str] = (), rule: Literal["confirmed", "any"] = "confirmed"
) -> GateResult:
    """Gate ``rows`` with the ``accept`` globs (over series names and ids) under ``rule``: a regression
    marked or listed quarantined, or marked or matched accepted, never fails; of the rest, ``confirmed``
    fails the ``confirmed`` ones and counts the others as unconfirmed, ``any`` fails every one."""
    failing, unconfirmed, not_reached, n_accepted, n_quarantined = [], 0, 0, 0, 0
    for row in rows:
        if row.verdict != "regressed":
            continue
        if row.mark == "quarantined" or row.quarantined:
            n_quarantined += 1
        elif row.mark == "accepted" or accepted(row, accept):
            n_accepted += 1
        elif rule == "any" or row.mark == "confirmed":
            failing.append(row)
        else:
            unconfirmed += 1
            not_reached += row.recheck == "not-reached"
    return GateResult(tuple(failing), unconfirmed, not_reached, n_accepted, n_quarantined)


def figures(row: Row) -> str:
    """``+7.7% (99% CI +6.1…+9.2%), median 21.40 ms → 23.05 ms``, as the comment shows it; an instructions
    row's interval is its change widened by the repeats' spread."""
    est, digits = estimate(row), change_digits(row)
    what = "spread-widened" if row.metric == "instructions" else f"{level_text(est.level)} CI"
    ci = f" ({what} {format_ci(est, digits)})" if None not in (est.ci_low, est.ci_high) else ""
    return (
        f"{format_change(est, row.unit, digits)}{ci}, median {row_value(row, est.base)} → "
        f"{row_value(row, est.head)}"
    )


def failing_line(row: Row) -> str:
    """``confirmed regression: <name> (<device>): <figures>`` (:func:`figures`)."""
    return f"confirmed regression: {row.name} ({row.device_name}): {figures(row)}"


def summary_line(result: GateResult) -> str:
    """One line: whether the gate failed, and how many regressions were not gated and why."""
    head = (
        f"benchtrail gate: failed: {counted(len(result.failing), 'confirmed regression')} not accepted "
        "(accept one with a `benchmarks-accept: <series name or glob>` trailer)"
        if result.failing
        else "benchtrail gate: passed: no confirmed regression that is not accepted"
    )
    reached = (
        f", {result.not_reached} of them not reached by the time-bounded re-check"
        if result.not_reached
        else ""
    )
    return (
        f"{head}; {counted(result.unconfirmed, 'unconfirmed regression')} not gated{reached}; "
        f"{result.accepted} accepted, {result.quarantined} quarantined"
    )
