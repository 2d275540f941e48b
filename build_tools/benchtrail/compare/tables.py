"""The Markdown pieces of the PR comment: values, changes and intervals as text, series names as code
spans, and the tables of execution and compilation rows (``benchtrail.compare.comment`` puts them together).

Rows are comparison.json's row objects (or :class:`benchtrail.compare.document.Row`, for the one-row
formatters), read by key. This module never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

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


def format_ci(row: Row | Mapping[str, Any]) -> str:
    """The 99% bootstrap interval of the change, ``+6.1…+9.2%``; an em dash when there is none."""
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return "—"
    return f"{row['ci_low']:+.1f}…{row['ci_high']:+.1f}%"


class Notes:
    """Reasons said once: each distinct text gets a number (``[1]``, ``[2]``, … in comment order); a table row
    refers to it and the table's legend (:meth:`legend`) states the texts first referred to since the last legend."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.paired = False  # a table showed a paired estimate: the legend says what it is, once
        self._said = 0
        self._paired_said = False

    def ref(self, text: str) -> str:
        """``[n]``, the number of ``text`` (a new number for a text not seen before)."""
        return f"[{self.numbers.setdefault(text, len(self.numbers) + 1)}]"

    def legend(self) -> list[str]:
        """``- [n] text`` lines (Markdown list items, text escaped) of the texts numbered since the last call,
        and ``PAIRED_NOTE`` the first time after a paired estimate was shown."""
        fresh = [(n, t) for t, n in self.numbers.items() if n > self._said]
        self._said = len(self.numbers)
        lines = [f"- [{n}] {md_text(t)}" for n, t in fresh]
        if self.paired and not self._paired_said:
            self._paired_said = True
            lines.append(f"- {PAIRED_NOTE}")
        return lines


def display_name(row: Mapping[str, Any], one_device: bool) -> str:
    """A row's name as the comment shows it: without its ``.<device>`` suffix when the comparison has
    ``one_device`` (the context line names it), else the whole name."""
    name, device = row["name"], row.get("device_name") or ""
    if one_device and device and name.endswith("." + device) and len(name) > len(device) + 1:
        return name[:-len(device) - 1]
    return name


def paired_rounds(row: Mapping[str, Any]) -> int | None:
    """Rounds of the paired A/B run a row's own samples come from (``base_details.ab`` and
    ``head_details.ab`` with equal rounds and equal sample counts: a row of ``benchtrail ab``), else None."""
    head_ab = (row.get("head_details") or {}).get("ab") or {}
    base_ab = (row.get("base_details") or {}).get("ab") or {}
    rounds = head_ab.get("rounds")
    same_n = row.get("base_n") == row.get("head_n")
    return rounds if rounds and base_ab.get("rounds") == rounds and same_n else None


def level_text(level: float | None) -> str:
    """``99%``, ``99.64%``: a confidence level (a fraction; None: 0.99, the level before sequential sampling)
    in percent, to the digits that tell it from 99%."""
    return f"{100 * (0.99 if level is None else level):.4g}%"


def shown_level(row: Mapping[str, Any]) -> float | None:
    """The confidence level of a row's paired interval when it is not 99%: the last look of a sequential paired
    run (``ab.level`` of a re-checked row, ``head_details.ab.level`` of a row of ``benchtrail ab``), else None."""
    ab = row.get("ab") or {}
    level = ab.get("level") if ab else ((row.get("head_details") or {}).get("ab") or {}).get("level")
    return level if isinstance(level, (int, float)) and round(level, 6) != 0.99 else None


class Estimate(NamedTuple):
    """The one estimate a row shows: base and head (in the row's unit), the change and its interval (99%, or
    ``level`` for a paired estimate at another level; percent when ``change_unit`` is ``"%"``), and whether it
    comes from paired samples."""

    base: float | None
    head: float | None
    change: float | None
    change_unit: str | None
    ci_low: float | None
    ci_high: float | None
    paired: bool
    level: float | None = None


#: Verdicts of a paired run whose figures a re-checked row shows (a failed paired run has none; ``noisy``: a
#: paired run of comparison versions 1 to 7).
PAIRED_VERDICTS = ("regressed", "improved", "similar", "inconclusive", "noisy")


def estimate(row: Mapping[str, Any]) -> Estimate:
    """What a row shows. A row whose verdict comes from paired samples shows the paired estimate: the
    median of the per-pair ratios head/base (``change``, percent, with its interval), with ``base`` the
    median of the paired base samples and ``head`` = base × that ratio, so base → head agrees with the
    change. Such a row is one re-checked in a paired A/B run (its ``ab`` entry, when that run gave a
    verdict and was used: no ``guard``) or one of a paired run itself (:func:`paired_rounds`). Any other row shows its medians and
    the change between them (``change``, ``ci_low``, ``ci_high`` as comparison.json has them)."""
    ab = row.get("ab") or {}
    if ab.get("verdict") in PAIRED_VERDICTS and not ab.get("guard") and ab.get("change") is not None \
            and ab.get("base_median"):
        base = ab["base_median"]
        return Estimate(base, base * (1 + ab["change"] / 100), ab["change"], "%", ab.get("ci_low"),
                        ab.get("ci_high"), True, shown_level(row))
    if paired_rounds(row) and row.get("change_unit") == "%" and row.get("change") is not None \
            and row.get("base_median"):
        base = row["base_median"]
        return Estimate(base, base * (1 + row["change"] / 100), row["change"], "%", row.get("ci_low"),
                        row.get("ci_high"), True, shown_level(row))
    return Estimate(row.get("base_median"), row.get("head_median"), row.get("change"), row.get("change_unit"),
                    row.get("ci_low"), row.get("ci_high"), False)


#: The legend line of a table with a paired row (said once a comment).
PAIRED_NOTE = ("paired: the change is the median of the per-pair ratios head/base of a paired A/B run on this "
               "runner, with its interval (99%, or the level shown: the run looked after each round and each look "
               "spends part of the 1% false-alarm rate); base is the median of the paired base samples and head is "
               "base × that ratio. Other rows: the change between the medians, with its 99% bootstrap interval.")


def change_cell(row: Mapping[str, Any], est: Estimate | None = None) -> str:
    """``+30.0% (+28.1…+31.9%)`` (``, paired`` for a paired estimate; ``, paired at 99.64%`` when its interval's
    level is not 99%); a change in the row's unit for an absolute rule; an em dash for none."""
    est = est or estimate(row)
    text = format_change({"change": est.change, "change_unit": est.change_unit, "unit": row["unit"]})
    if est.change is not None and est.ci_low is not None and est.ci_high is not None:
        text += f" ({est.ci_low:+.1f}…{est.ci_high:+.1f}%)"
    level = f" at {level_text(est.level)}" if est.paired and est.level is not None else ""
    return text + (f", paired{level}" if est.paired else "")


def verdict_note(row: Row | Mapping[str, Any]) -> str:
    """What the verdict cell adds: `` · noisy`` for the label (a side's IQR/median above 25%), and for an
    ``inconclusive`` row the effect it could have detected and its rule, `` · could detect ≥ 13% (threshold 5%)``
    (its ``mde``)."""
    note = " · noisy" if row.get("noisy") and row["verdict"] != "noisy" else ""
    if row["verdict"] == "inconclusive" and row.get("mde") is not None:
        note += f" · could detect ≥ {row['mde']:.{0 if row['mde'] >= 10 else 1}f}%"
        rule = row.get("threshold") or {}
        if rule.get("unit") == "percent":  # what it could not be told from: the row's rule
            note += f" (threshold {rule['threshold']:g}%)"
    return note


#: The columns of every series table of the comment.
SERIES_HEADER = ["| benchmark | base → head | change (99% CI) | verdict |", "|---|---:|---:|---|"]


def series_table(rows: Sequence[Mapping[str, Any]], notes: Notes, one_device: bool) -> list[str]:
    """The Markdown table of ``rows`` (comparison.json's row objects: a row of an older version shows what
    it has): one row a series, its reasons (and a quarantine's) as ``[n]`` references to ``notes``. A name
    drops its ``.<device>`` suffix when ``one_device``; with several devices a name that does not end in its
    device is followed by ``· <device>``."""
    lines = list(SERIES_HEADER)
    for r in rows:
        est = estimate(r)
        notes.paired |= est.paired
        values = f"{format_value(est.base, r['unit'])} → {format_value(est.head, r['unit'])}"
        verdict = r["verdict"] + (f" · {r['mark']}" if r.get("mark") else "") + verdict_note(r)
        if r.get("quarantined") and r.get("mark") != "quarantined":
            verdict += " · quarantined"
        refs = "".join(notes.ref(t) for t in (r.get("reason"), r.get("quarantined")) if t)
        name = code_span(display_name(r, one_device), in_table=True)
        device = r.get("device_name") or ""
        if not one_device and r["kind"] == "execution" and device and not r["name"].endswith("." + device):
            name += f" · {cell(device)}"  # several devices, and a name that does not say which
        cells = [name, values, change_cell(r, est),
                 cell(verdict) + (f" {refs}" if refs else "")]
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
