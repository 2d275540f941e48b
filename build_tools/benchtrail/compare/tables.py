"""The Markdown pieces of the PR comment: values, changes and intervals as text, series names as code
spans, and the tables of execution and compilation rows (``benchtrail.compare.comment`` puts them together).

Rows are comparison.json's row objects (or :class:`benchtrail.compare.document.Row`, for the one-row
formatters), read by key. This module never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benchtrail.markup import code_span, md_text

if TYPE_CHECKING:
    from benchtrail.compare.document import Row


def plain(text: str) -> str:
    """Machine-read text (names, reasons) shown as-is: one line, Markdown and mentions escaped (``markup.md_text``)."""
    return md_text(text)



def format_value(value: float | None, unit: str) -> str:
    """``21400.0, "us"`` → ``"21.40 ms"``; counts as integers; None as an em dash."""
    if value is None:
        return "—"
    if unit == "us":
        if abs(value) >= 1e6:
            return f"{value / 1e6:.3f} s"
        if abs(value) >= 1e3:
            return f"{value / 1e3:.2f} ms"
        return f"{value:.1f} µs"
    if unit == "ms":
        return f"{value / 1e3:.2f} s" if abs(value) >= 1e4 else f"{value:.0f} ms"
    if unit == "count":
        return f"{value:.0f}"
    if unit == "bytes":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f} {name}"
        return f"{value:.0f} B"
    return f"{value:g} {unit}"


def format_change(row: Row | Mapping[str, Any]) -> str:
    """A row's change: ``+7.7%`` for a percent rule, else in the row's unit (``+3`` counts, ``+1.20 ms``)."""
    change = row.get("change")
    if change is None:
        return "—"
    if row.get("change_unit") == "%":
        return f"{change:+.1f}%"
    if row["unit"] == "count":
        return f"{change:+g}"
    return ("+" if change >= 0 else "-") + format_value(abs(change), row["unit"])


def cell(text: str) -> str:
    """Text shown literally inside a Markdown table cell: one line, Markdown escaped (``markup.md_text``)."""
    return md_text(text)


def label(row: dict[str, Any], in_table: bool = True) -> str:
    """A series name as a code span (``markup.code_span``; ``|`` escaped in a table cell)."""
    return code_span(row["name"], in_table=in_table)


def format_ci(row: Row | Mapping[str, Any]) -> str:
    """The 99% bootstrap interval of the change, ``+6.1…+9.2%``; an em dash when there is none."""
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return "—"
    return f"{row['ci_low']:+.1f}…{row['ci_high']:+.1f}%"


def series_table(rows: list[dict[str, Any]], with_verdict: bool) -> list[str]:
    """The Markdown table of execution ``rows`` (comparison.json's row objects: a row of an older version
    shows what it has, e.g. its p value where it has no q value), with a verdict column when ``with_verdict``."""
    head = "| benchmark | device | base median | head median | change | 99% CI | q | verdict |"
    lines = [head if with_verdict else head.rsplit(" verdict |", 1)[0],
             "|---|---|---:|---:|---:|---:|---:|" + ("---|" if with_verdict else "")]
    for r in rows:
        q = r.get("q_value", r.get("p_value"))
        cells = [label(r), md_text(r["device_name"]), format_value(r["base_median"], r["unit"]),
                 format_value(r["head_median"], r["unit"]), format_change(r), format_ci(r),
                 "—" if q is None else f"{q:.2g}"]
        if with_verdict:
            mark = f" · {r['mark']}" if r.get("mark") else ""
            # A quarantined regression says why in its reason; any other quarantined row says so after its mark.
            why = r.get("quarantined")
            flag = f" · quarantined: {why}" if why and r.get("mark") != "quarantined" else ""
            reason = "; ".join(filter(None, (r.get("reason"), why if r.get("mark") == "quarantined" else None)))
            cells.append(cell(r["verdict"] + mark + flag + (f" ({reason})" if reason else "")))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _break_reasons(details: dict[str, Any]) -> set[str]:
    """``"<reason> at <file>:<line>"`` for each graph break recorded in a row's details."""
    return {f"{b['reason']} at {b['location']}" if b.get("location") else b["reason"]
            for b in details.get("break_reasons", [])}


def compilation_table(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of compilation ``rows``; a graph-break row names the breaks that are new or gone."""
    lines = ["| module | metric | base | head | change | |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        note = cell(r["verdict"])
        if r["metric"] == "graph_breaks":
            new = _break_reasons(r["head_details"]) - _break_reasons(r["base_details"])
            gone = _break_reasons(r["base_details"]) - _break_reasons(r["head_details"])
            note += "".join(f"; new graph break: {code_span(s[:160], in_table=True)}" for s in sorted(new))
            note += "".join(f"; graph break removed: {code_span(s[:160], in_table=True)}" for s in sorted(gone))
        lines.append(f"| {code_span(r['module_name'], in_table=True)} | {cell(r['metric'])} | "
                     f"{format_value(r['base_median'], r['unit'])} | "
                     f"{format_value(r['head_median'], r['unit'])} | {format_change(r)} | {note} |")
    return lines
