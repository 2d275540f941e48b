"""The comparison in the terminal: what ``benchtrail compare``, ``pipeline`` and ``ab`` print before the
path of their main output (with ``--json``, the comparison.json object instead). Torch-free.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from benchtrail.compare.comment_header import runner_checks_line
from benchtrail.compare.document import INCONCLUSIVE, VERDICTS, Comparison, Row
from benchtrail.compare.tables import (
    CHANGES,
    and_more,
    change_digits,
    display_name,
    estimate,
    format_change,
    format_ci,
    format_count,
    format_value,
    verdict_note,
)
from benchtrail.markup import shared_module, shared_tail

#: The widest table printed, in columns (terminal cells).
MAX_WIDTH = 100
#: Style of a row (and of its count) per verdict; the others are unstyled.
_STYLES = {
    "regressed": "red",
    "improved": "green",
    "failed": "red",
    "inconclusive": "yellow",
    "not-comparable": "yellow",
    "insufficient-samples": "yellow",
}
#: Marks shown in place of ``regressed``: they decide whether the row gates (``confirmed`` shows the verdict).
_SHOWN_MARKS = ("unconfirmed", "accepted", "quarantined")


def _cells(row: Row) -> tuple[str, ...]:
    """A row's verdict (or the mark that decides whether it gates), change, interval (%), base median and
    IQR, head median and IQR, ``base/head`` sample counts; a paired estimate: its pairs' counts, no IQR."""
    e = estimate(row)
    verdict = row.mark if row.verdict == "regressed" and row.mark in _SHOWN_MARKS else row.verdict
    paired = (row.ab or {}) if e.paired else {}
    counts = "/".join(
        str(paired.get(f"{side}_n", getattr(row, f"{side}_n")) or "—") for side in ("base", "head")
    )
    digits = change_digits(row)
    return (
        verdict,
        format_change(e, row.unit, digits),
        format_ci(e, digits),
        _value(row, e.base),
        _spread(None if paired else row.base_iqr, row.base_median),
        _value(row, e.head),
        _spread(None if paired else row.head_iqr, row.head_median),
        counts,
    )


def _value(row: Row, value: float | None) -> str:
    """A median as the table shows it: ``6.40M instr`` per call, else as :func:`format_value`."""
    if row.metric == "instructions" and value is not None:
        return f"{format_count(value)} instr"
    return format_value(value, row.unit)


def _spread(iqr: float | None, median: float | None) -> str:
    """IQR/median in percent, ``2.4%``, ``31%``; an em dash without both or with a zero median."""
    if iqr is None or not median:
        return "—"
    pct = 100 * iqr / median
    return f"{pct:.{1 if pct < 10 else 0}f}%"


def _largest_first(row: Row) -> tuple[bool, float, str]:
    """The sort key of rows: largest change first, then name."""
    change = estimate(row).change
    return change is None, -abs(change or 0.0), row.name


def _title(comparison: Comparison) -> str:
    head = comparison.head.get("commit") or "?"
    base = comparison.base.get("commit") or comparison.baseline.get("commit")
    devices = sorted({r.device_name for r in comparison.rows})
    where = f" · {', '.join(devices)}" if devices else ""
    return f"benchtrail: head {head[:10]} vs " + (f"base {base[:10]}" if base else "no baseline") + where


def _rest_line(comparison: Comparison, after_table: bool) -> Text:
    """The rows not in the table, counted by verdict (``VERDICTS`` order, zero counts left out)."""
    counts = Counter(r.verdict for r in comparison.rows)
    parts = [
        Text(f"{counts[v]} {v}", style=_STYLES.get(v, "")) for v in _ORDER if v not in SHOWN and counts[v]
    ]
    if not parts:
        return Text("no series compared")
    return Text("and " if after_table else "").append_text(Text(", ").join(parts))


#: The verdicts of the rows the table shows without ``all_rows``, in this order.
SHOWN = (*CHANGES, "new")
#: The order of the table's rows and of the count line (noisy: rows of comparison versions 1 to 7).
_ORDER = (*SHOWN, *VERDICTS, "noisy")
_HEADERS = ("benchmark", "verdict", "change", "interval", "base", "IQR", "head", "IQR", "n")
#: Columns left out, in this order, while the names would get fewer cells than this (a narrow terminal):
#: the IQRs, the sample counts, the interval, the medians.
_MIN_NAME = 16
_OPTIONAL = ((5, 7), (8,), (3,), (4, 6))


def _fitting_columns(cells: list[tuple[str, ...]], width: int) -> tuple[tuple[int, ...], int]:
    """Indexes into ``_HEADERS`` of the columns shown and the cells of ``width`` left for the names; those
    of ``_OPTIONAL`` drop in turn while the names would get fewer than ``_MIN_NAME`` cells."""
    columns = tuple(range(len(_HEADERS)))
    for drop in (*_OPTIONAL, None):
        used = sum(max(cell_len(c) for c in (_HEADERS[i], *(row[i] for row in cells))) for i in columns[1:])
        room = width - used - 2 * (len(columns) - 1)  # two spaces between columns
        if drop is None or not cells or room >= min(_MIN_NAME, max(cell_len(row[0]) for row in cells)):
            break
        columns = tuple(i for i in columns if i not in drop)
    return columns, room


def render_table(
    comparison: Comparison, width: int = MAX_WIDTH, colour: bool = False, all_rows: bool = False
) -> str:
    """The comparison as terminal text: a title (head and base commits, devices), a table of regressions,
    improvements then new rows (``all_rows``: then every other row) with medians in engineering units (µs,
    ms, s, KiB…), IQRs in percent of their medians and ``base/head`` sample counts, then a line counting
    the other rows by verdict. No line is wider than ``width`` columns: names are cut with ``…`` (a shared
    module path and end said once under the title), optional columns dropped; a row never wraps.
    ``colour``: ANSI colours, else plain. Raises ValueError when ``width`` is under 40."""
    if width < 40:
        raise ValueError(f"width {width} is too narrow for the comparison table; allowed: 40 or more columns")
    single_device = len({r.device_name for r in comparison.rows}) == 1
    shown = sorted(
        (r for r in comparison.rows if all_rows or r.verdict in SHOWN),
        key=lambda r: (_ORDER.index(r.verdict), _largest_first(r)),
    )
    # Names too long for their column lose what every row's name shares: first the module path (a function
    # benchmark's name starts with it: mypkg.benchmarks.attention[seq=64]...), then the end (compile config
    # and task), in front of the device when rows are on several; said once in a line under the title.
    head = tail = ""

    def name(r: Row) -> str:
        base = display_name(r, True)  # without the ".<device>" suffix
        return base.removeprefix(head).removesuffix(tail) + ("" if single_device else r.name[len(base) :])

    cells = [(name(r), *_cells(r)) for r in shown]
    columns, room = _fitting_columns(cells, width)
    bases = [display_name(r, True) for r in comparison.rows]
    if any(cell_len(name(r)) > room for r in shown):
        head = shared_module(bases)
    if any(cell_len(name(r)) > room for r in shown):
        tail = shared_tail([b.removeprefix(head) for b in bases])
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        color_system="standard" if colour else None,
        force_terminal=colour,
        no_color=not colour,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    console.print(Text(_title(comparison), style="bold"))
    if head or tail:
        console.print(
            Text(f"names: {head}<benchmark>{tail}{'' if single_device else '.<device>'}"),
            no_wrap=True,
            overflow="ellipsis",
        )
    if shown:
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        table.add_column(_HEADERS[0])  # the only column that may shrink: its cells are cut, never wrapped
        for i in columns[1:]:
            table.add_column(_HEADERS[i], no_wrap=True, justify="left" if i == 1 else "right")
        for row, texts in zip(shown, cells):
            style = "dim" if row.mark in ("accepted", "quarantined") else _STYLES.get(row.verdict, "")
            table.add_row(
                Text(name(row), no_wrap=True, overflow="ellipsis"),  # as shortened
                *(Text(texts[i], style=style if i in (1, 2) else "") for i in columns[1:]),
            )
        console.print(table)
    else:
        console.print(Text("no regressions or improvements"))
    if len(shown) < len(comparison.rows) or not shown:
        console.print(_rest_line(comparison, bool(shown)))
    for line in attention_lines(comparison, name):
        console.print(Text(line), no_wrap=True, overflow="ellipsis")  # rich wraps a Text's own no_wrap
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


#: Failed rows named one per line under the table; the rest are counted.
MAX_FAILED_LINES = 3


def attention_lines(comparison: Comparison, name: Callable[[Row], str]) -> list[str]:
    """What the count line cannot say: the runner checks that failed, each failed row with its reason's
    first line (:data:`MAX_FAILED_LINES`, then a count), and the three largest inconclusive changes with
    the effect each could have detected. ``name``: a row's name as the table shows it."""
    lines = []
    if checks := runner_checks_line(comparison):
        lines.append(checks.replace("\\", "").replace("⚠ ", "warning: ").split(". These results")[0])
    failed = [r for r in comparison.rows if r.verdict == "failed"]
    for r in failed[:MAX_FAILED_LINES]:
        reason = (r.reason or "no reason recorded").splitlines()[0]
        lines.append(f"failed: {name(r)}: {reason}")
    if len(failed) > MAX_FAILED_LINES:
        lines.append(f"… and {len(failed) - MAX_FAILED_LINES} more failed (comment.md gives each reason)")
    undecided = [r for r in comparison.rows if r.verdict in INCONCLUSIVE]
    if undecided:  # the largest changes by name first: an undecided large change must not hide
        shown = ", ".join(
            f"{name(r)} {format_change(estimate(r), r.unit, change_digits(r))}{verdict_note(r)}"
            for r in sorted(undecided, key=_largest_first)[:3]
        ) + and_more(len(undecided), 3)
        lines.append(
            f"inconclusive ({len(undecided)}): {shown}: more samples or a quieter machine would settle them"
        )
    return lines


def stdout_style() -> tuple[int, bool]:
    """``(width, colour)`` for standard output: the terminal's width capped at :data:`MAX_WIDTH`, and colour
    as rich decides it (a terminal or ``FORCE_COLOR``, no ``NO_COLOR``, ``TERM`` not ``dumb``)."""
    console = Console()
    colour = (
        console.is_terminal
        and not console.is_dumb_terminal
        and not console.no_color
        and console.color_system is not None
    )
    return max(40, min(MAX_WIDTH, console.width if console.is_terminal else MAX_WIDTH)), colour
