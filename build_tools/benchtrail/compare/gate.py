"""The gate over the rows of ``comparison.json``: which regressions fail a run (``benchtrail gate``,
``compare``/``ab --fail-on regressed``, the commit status).

Two rules (:func:`check`'s ``rule``), on the same rows: ``confirmed`` (CI's gating check and the commit
status; DESIGN, "Statuses and verdicts") fails only a ``confirmed`` regression, one whose paired A/B
re-check agreed (or that comes from a paired run); ``any`` (``compare``/``ab --fail-on regressed``, a
local run without a re-check) fails every regression. ``pipeline --fail-on regressed`` takes the first when
its re-check ran, else the second. Under both, a regression that a
``benchmarks-accept:`` glob accepts (over the series name or id, as
:func:`benchtrail.compare.document.accepted`) or that the quarantine file lists never fails.
``unconfirmed`` regressions, rows a time-bounded re-check did not reach among them, are counted in the
summary. This module never imports torch.
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
    """What the gate found in the rows of a comparison.

    Attributes:
        failing: the regressions the rule fails, neither accepted nor quarantined.
        unconfirmed: regressions marked ``unconfirmed`` that the rule does not fail (``confirmed`` rule).
        not_reached: how many of ``unconfirmed`` a time-bounded re-check did not reach (``recheck: not-reached``).
        accepted: regressions accepted by a ``benchmarks-accept:`` glob (marked so, or matching ``accept`` now).
        quarantined: regressions of quarantined series.
    """

    failing: tuple[Row, ...]
    unconfirmed: int
    not_reached: int
    accepted: int
    quarantined: int

    @property
    def passed(self) -> bool:
        return not self.failing


def check(rows: Sequence[Row], accept: Sequence[str] = (),
          rule: Literal["confirmed", "any"] = "confirmed") -> GateResult:
    """Gate ``rows`` with the ``accept`` globs (over series names and ids) under ``rule``.

    A regressed row counts as quarantined when its mark is ``quarantined`` or it carries a quarantine
    reason (a re-check may confirm a quarantined series' change), as accepted when its mark is
    ``accepted`` or a glob matches it now. Of the rest, ``rule="confirmed"`` fails the ``confirmed`` ones
    and counts the others as unconfirmed; ``rule="any"`` fails every one.
    """
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
    """``+7.7% (99% CI +6.1…+9.2%), median 21.40 ms → 23.05 ms``: the figures the comment shows
    (``tables.estimate``: a paired run's, at its last look's level, when one decided); an instructions row's
    interval is its change widened by the repeats' spread (``stats.counts``), both to 2 decimals."""
    est, digits = estimate(row), change_digits(row)
    what = "spread-widened" if row.metric == "instructions" else f"{level_text(est.level)} CI"
    ci = f" ({what} {format_ci(est, digits)})" if None not in (est.ci_low, est.ci_high) else ""
    return (f"{format_change(est, row.unit, digits)}{ci}, median {row_value(row, est.base)} → "
            f"{row_value(row, est.head)}")


def failing_line(row: Row) -> str:
    """``confirmed regression: <name> (<device>): <figures>`` (:func:`figures`)."""
    return f"confirmed regression: {row.name} ({row.device_name}): {figures(row)}"


def summary_line(result: GateResult) -> str:
    """One line: whether the gate failed, and how many regressions were not gated and why."""
    head = (f"benchtrail gate: failed: {counted(len(result.failing), 'confirmed regression')} not accepted "
            "(accept one with a `benchmarks-accept: <series name or glob>` trailer)" if result.failing
            else "benchtrail gate: passed: no confirmed regression that is not accepted")
    reached = (f", {result.not_reached} of them not reached by the time-bounded re-check"
               if result.not_reached else "")
    return (f"{head}; {counted(result.unconfirmed, 'unconfirmed regression')} not gated{reached}; "
            f"{result.accepted} accepted, {result.quarantined} quarantined")
