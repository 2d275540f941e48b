"""The Markdown pieces of the PR comment: values, changes and intervals as text, series names as code
spans, and the tables of execution and compilation rows. Torch-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from benchtrail.markup import code_span, md_text

if TYPE_CHECKING:
    from benchtrail.compare.document import Row


#: Machine-read text (names, reasons) shown as-is: one line, Markdown and mentions escaped.
plain = md_text


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


def format_count(value: float) -> str:
    """``6401263.0`` → ``6.40M``, ``12345`` → ``12.3k``, ``850.4`` → ``850``, ``0.25`` → ``0.25``: three
    significant figures, k, M or G above a thousand."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale * 0.9995:
            x = value / scale
            return f"{x:.{2 if abs(x) < 9.995 else 1 if abs(x) < 99.95 else 0}f}{suffix}"
    return f"{value:.0f}" if abs(value) >= 99.5 else f"{value:.3g}"


def format_instructions(value: float | None) -> str:
    """``6401263.0`` → ``6.40M instr/call`` (:func:`format_count`); None as an em dash."""
    return "—" if value is None else f"{format_count(value)} instr/call"


def row_value(row: Row, value: float | None) -> str:
    """A base or head figure of ``row``: instructions per call, else :func:`format_value` in its unit."""
    return format_instructions(value) if row.metric == "instructions" else format_value(value, row.unit)


class Figures(Protocol):
    """A change and its interval: a :class:`Row`, an :class:`Estimate`, a row of a build comparison (read-only
    attributes: frozen dataclasses and named tuples provide them)."""

    @property
    def change(self) -> float | None: ...
    @property
    def change_unit(self) -> str | None: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...


def change_digits(row: Row) -> int:
    """Decimals of a row's percent change and interval: 2 for an ``instructions`` row (counts move by
    hundredths of a percent against a 0.5% threshold), else 1."""
    return 2 if row.metric == "instructions" else 1


def format_change(figures: Figures, unit: str, digits: int = 1) -> str:
    """A change (``figures.change`` in ``figures.change_unit``): ``+7.7%`` for a percent rule (``digits``
    decimals, :func:`change_digits`), else in ``unit`` (``+3`` counts, ``+1.20 ms``)."""
    change = figures.change
    if change is None:
        return "—"
    if figures.change_unit == "%":
        return f"{change:+.{digits}f}%"
    if unit == "count":
        return f"{change:+g}"
    return ("+" if change >= 0 else "-") + format_value(abs(change), unit)


def format_ci(figures: Figures, digits: int = 1) -> str:
    """The 99% bootstrap interval of the change, ``+6.1…+9.2%``; an em dash for none."""
    if None in (figures.ci_low, figures.ci_high):
        return "—"
    return f"{figures.ci_low:+.{digits}f}…{figures.ci_high:+.{digits}f}%"


def counted(n: int, word: str) -> str:
    """``1 stored run``, ``2 stored runs``: ``n`` and ``word``, plural unless ``n`` is 1."""
    return f"{n} {word}{'s' if n != 1 else ''}"


def and_more(total: int, shown: int) -> str:
    """`` and 2 more`` when ``total`` items are more than the ``shown``; else ``""``."""
    return f" and {total - shown} more" if total > shown else ""


class Notes:
    """Reasons said once: each distinct text gets a number (``[1]``, … in comment order) that table rows
    refer to; :meth:`legend` states the texts first referred to since the last legend."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.paired = False  # a table showed a paired estimate: the legend says what it is, once
        self.counted = False  # a table showed an instructions row: likewise
        self._said = 0
        self._paired_said = self._counted_said = False

    def ref(self, text: str) -> str:
        """``[n]``, the number of ``text`` (a new number for a text not seen before)."""
        return f"[{self.numbers.setdefault(text, len(self.numbers) + 1)}]"

    def legend(self) -> list[str]:
        """``- [n] text`` lines of the texts numbered since the last call, ``PAIRED_NOTE`` and
        ``COUNTED_NOTE`` once when due, then a blank line; [] for none."""
        lines = [f"- [{n}] {md_text(t)}" for t, n in self.numbers.items() if n > self._said]
        self._said = len(self.numbers)
        if self.paired and not self._paired_said:
            self._paired_said = True
            lines.append(f"- {PAIRED_NOTE}")
        if self.counted and not self._counted_said:
            self._counted_said = True
            lines.append(f"- {COUNTED_NOTE}")
        return [*lines, ""] if lines else []


def _tail(row: Row) -> str:
    """``.instructions`` for a series named ``<run config name>.instructions``, else ``""``."""
    return ".instructions" if row.metric == "instructions" and row.name.endswith(".instructions") else ""


def display_name(row: Row, one_device: bool) -> str:
    """A row's name as the comment shows it: without its ``.<device>`` suffix when ``one_device`` (also
    before an instructions series' ``.instructions``), else whole."""
    tail = _tail(row)
    core = row.name.removesuffix(tail)
    short = core.removesuffix("." + row.device_name) if one_device and row.device_name else core
    return short + tail if short else row.name  # a name that is the suffix alone stays whole


def level_text(level: float | None) -> str:
    """``99%``, ``99.64%``: a confidence level (a fraction; None: 0.99, the level before sequential sampling)
    in percent, to the digits that tell it from 99%."""
    return f"{100 * (0.99 if level is None else level):.4g}%"


class Estimate(NamedTuple):
    """The one estimate a row shows: base and head (the row's unit), the change and its interval (99% or
    ``level``; percent when ``change_unit`` is ``"%"``), and whether it comes from paired samples."""

    base: float | None
    head: float | None
    change: float | None
    change_unit: str | None
    ci_low: float | None
    ci_high: float | None
    paired: bool
    level: float | None = None


#: Verdicts of a change found: the rows a table of changes shows.
CHANGES = ("regressed", "improved")
#: Verdicts of a paired run whose figures a re-checked row shows (a failed paired run has none; ``noisy``: a
#: paired run of comparison versions 1 to 7).
PAIRED_VERDICTS = ("regressed", "improved", "similar", "inconclusive", "noisy")


def estimate(row: Row) -> Estimate:
    """What a row shows: for a verdict from paired samples (a re-check's ``ab`` entry that was used, or a
    row of ``benchtrail ab``) the median per-pair ratio head/base as ``change`` (%) with its interval,
    ``base`` the paired base median and ``head`` base × ratio, ``level`` when not 99% (a sequential run's
    last look). Any other row: its medians and comparison.json's change and interval."""
    ab, own = row.ab or {}, row.head_details.get("ab") or {}
    if (
        ab.get("verdict") in PAIRED_VERDICTS
        and not ab.get("guard")
        and ab.get("change") is not None
        and ab.get("base_median")
    ):
        base, change, low, high = ab["base_median"], ab["change"], ab.get("ci_low"), ab.get("ci_high")
    elif (
        own.get("rounds")
        and (row.base_details.get("ab") or {}).get("rounds") == own["rounds"]
        and row.base_n == row.head_n
        and row.change_unit == "%"
        and row.change is not None
        and row.base_median
    ):
        base, change, low, high = row.base_median, row.change, row.ci_low, row.ci_high
    else:
        return Estimate(
            row.base_median, row.head_median, row.change, row.change_unit, row.ci_low, row.ci_high, False
        )
    level = (ab or own).get("level")
    shown = level if isinstance(level, (int, float)) and round(level, 6) != 0.99 else None
    return Estimate(base, base * (1 + change / 100), change, "%", low, high, True, shown)


#: The legend line of a table with a paired row (said once a comment).
PAIRED_NOTE = (
    "paired: the change is the median of the per-pair ratios head/base of a paired A/B run on "
    "this runner, with its interval (99%, or the level shown: the run looked after each round and "
    "each look spends part of the 1% false-alarm rate); base is the median of the paired base "
    "samples and head is base × that ratio. Other rows: the change between the medians, with its "
    "99% bootstrap interval."
)
#: The legend line of a table with an instructions row (said once a comment).
COUNTED_NOTE = (
    "instr/call: instructions per call counted under valgrind's callgrind, the median of the "
    "repeats; its interval is the change widened by the two sides' spread (each side's range "
    "over its median), not a bootstrap interval."
)


def change_cell(row: Row, est: Estimate | None = None) -> str:
    """``+30.0% (+28.1…+31.9%)``, then ``, paired`` (``at 99.64%``) for a paired estimate; a change in the
    row's unit for an absolute rule; an em dash for none."""
    est, digits = est or estimate(row), change_digits(row)
    text = format_change(est, row.unit, digits)
    if est.change is not None and None not in (est.ci_low, est.ci_high):
        text += f" ({format_ci(est, digits)})"
    if est.paired:
        text += ", paired" + (f" at {level_text(est.level)}" if est.level is not None else "")
    return text


def verdict_note(row: Row) -> str:
    """What the verdict cell adds: `` · noisy`` (a side's IQR/median above 25%), and for an ``inconclusive``
    row its ``mde``: `` · could detect ≥ 13% (threshold 5%)``."""
    note = " · noisy" if row.noisy and row.verdict != "noisy" else ""
    if row.verdict == "inconclusive" and row.mde is not None:
        note += f" · could detect ≥ {row.mde:.{0 if row.mde >= 10 else 1}f}%"
        rule = row.threshold or {}
        if rule.get("unit") == "percent":  # what it could not be told from: the row's rule
            note += f" (threshold {rule['threshold']:g}%)"
    return note


def instruction_rows(rows: Sequence[Row]) -> dict[str, Row]:
    """The ``instructions`` rows by their run config's latency row id (``<id>-instructions`` → ``<id>``)."""
    return {r.id.removesuffix("-instructions"): r for r in rows if r.metric == "instructions"}


def instructions_suffix(row: Row, counted: Mapping[str, Row]) -> str:
    """`` · instructions +2.00%`` for a latency row with a compared instructions row in ``counted``, else
    ``""``."""
    other = counted.get(row.id) if row.metric == "latency" else None
    if other is None or other.change is None:
        return ""
    return f" · instructions {format_change(other, other.unit, change_digits(other))}"


def series_table(
    rows: Sequence[Row], notes: Notes, one_device: bool, counted: Mapping[str, Row]
) -> list[str]:
    """The Markdown table of ``rows``, one row a series, reasons as ``[n]`` references to ``notes``; with
    several devices a name not ending in its device is followed by ``· <device>``."""
    lines = ["| benchmark | base → head | change (99% CI) | verdict |", "|---|---:|---:|---|"]
    for r in rows:
        est = estimate(r)
        notes.paired |= est.paired
        notes.counted |= r.metric == "instructions"
        verdict = r.verdict + (f" · {r.mark}" if r.mark else "") + verdict_note(r)
        if r.quarantined and r.mark != "quarantined":
            verdict += " · quarantined"
        refs = "".join(notes.ref(t) for t in (r.reason, r.quarantined) if t)
        name = code_span(display_name(r, one_device), in_table=True)
        device = r.device_name
        core = r.name.removesuffix(_tail(r))
        if not one_device and r.kind == "execution" and device and not core.endswith("." + device):
            name += f" · {md_text(device)}"  # several devices, and a name that does not say which
        base = row_value(r, est.base).removesuffix(" instr/call")  # one unit after both figures
        lines.append(
            f"| {name} | {base} → {row_value(r, est.head)} | {change_cell(r, est)}"
            f"{instructions_suffix(r, counted)} | {md_text(verdict)}{f' {refs}' if refs else ''} |"
        )
    return lines


def _break_reasons(details: dict[str, Any]) -> set[str]:
    """``"<reason> at <file>:<line>"`` for each graph break recorded in a row's details."""
    return {
        f"{b['reason']} at {b['location']}" if b.get("location") else b["reason"]
        for b in details.get("break_reasons", [])
    }


def compilation_table(rows: Sequence[Row]) -> list[str]:
    """The Markdown table of compilation ``rows``; a graph-break row names the breaks that are new or gone."""
    lines = ["| module | metric | base | head | change | |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        note = md_text(r.verdict)
        if r.metric == "graph_breaks":
            base, head = _break_reasons(r.base_details), _break_reasons(r.head_details)
            for what, breaks in (("new graph break", head - base), ("graph break removed", base - head)):
                note += "".join(f"; {what}: {code_span(s[:160], in_table=True)}" for s in sorted(breaks))
        lines.append(
            f"| {code_span(r.module_name, in_table=True)} | {md_text(r.metric)} | "
            f"{format_value(r.base_median, r.unit)} | "
            f"{format_value(r.head_median, r.unit)} | {format_change(r, r.unit)} | {note} |"
        )
    return lines
