"""The CI gating check over ``comparison.json`` (``benchtrail gate``).

Only a ``confirmed`` regression fails the gate (DESIGN, "Statuses and verdicts"): a regressed row
whose paired A/B re-check agreed (or that comes from a paired run), that no ``benchmarks-accept:``
glob accepts (over the series name or id, as :func:`benchtrail.compare.document.accepted`) and that the
quarantine file does not list. ``unconfirmed`` regressions, rows a time-bounded re-check did not
reach among them, never fail it; they are counted in the summary. This module never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchtrail.compare.tables import estimate, format_change, format_value, level_text
from benchtrail.compare.document import Comparison, Row, accepted


@dataclass(frozen=True)
class GateResult:
    """What the gate found in the rows of a comparison.

    Attributes:
        failing: the confirmed regressions neither accepted nor quarantined (typed rows; readable by key too).
        unconfirmed: regressions marked ``unconfirmed`` (not gated), neither accepted nor quarantined.
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


def check(rows: Comparison | Sequence[Row | Mapping[str, Any]], accept: Sequence[str]) -> GateResult:
    """Gate the rows of a comparison (``load_comparison``'s, or comparison.json's row objects: a field an
    older row lacks reads as its default) with the ``accept`` globs (over series names and ids).

    A regressed row counts as quarantined when its mark is ``quarantined`` or it carries a quarantine
    reason (a re-check may confirm a quarantined series' change), as accepted when its mark is
    ``accepted`` or a glob matches it now; of the rest, ``confirmed`` ones fail and ``unconfirmed``
    ones are counted only.
    """
    failing, unconfirmed, not_reached, n_accepted, n_quarantined = [], 0, 0, 0, 0
    for row in map(Row.of, rows.rows if isinstance(rows, Comparison) else rows):
        if row.verdict != "regressed":
            continue
        if row.mark == "quarantined" or row.quarantined:
            n_quarantined += 1
        elif row.mark == "accepted" or accepted(row, accept):
            n_accepted += 1
        elif row.mark == "confirmed":
            failing.append(row)
        else:
            unconfirmed += 1
            not_reached += row.recheck == "not-reached"
    return GateResult(tuple(failing), unconfirmed, not_reached, n_accepted, n_quarantined)


def failing_line(row: Row) -> str:
    """``confirmed regression: <name> (<device>): +7.7% (99% CI +6.1…+9.2%), median 21.40 ms → 23.05 ms``: the
    figures the comment shows (``tables.estimate``: a paired run's, at its last look's level, when one decided)."""
    est = estimate(row)
    change = format_change({"change": est.change, "change_unit": est.change_unit, "unit": row.unit})
    ci = (f" ({level_text(est.level)} CI {est.ci_low:+.1f}…{est.ci_high:+.1f}%)"
          if est.ci_low is not None and est.ci_high is not None else "")
    return (f"confirmed regression: {row.name} ({row.device_name}): {change}{ci}"
            f", median {format_value(est.base, row.unit)} → {format_value(est.head, row.unit)}")


def summary_line(result: GateResult) -> str:
    """One line: whether the gate failed, and how many regressions were not gated and why."""
    n = len(result.failing)
    head = (f"benchtrail gate: failed: {n} confirmed regression{'s' if n != 1 else ''} not accepted (accept one "
            "with a `benchmarks-accept: <series name or glob>` trailer)" if n
            else "benchtrail gate: passed: no confirmed regression that is not accepted")
    reached = (f", {result.not_reached} of them not reached by the time-bounded re-check"
               if result.not_reached else "")
    return (f"{head}; {result.unconfirmed} unconfirmed regression{'s' if result.unconfirmed != 1 else ''} "
            f"not gated{reached}; {result.accepted} accepted, {result.quarantined} quarantined")
