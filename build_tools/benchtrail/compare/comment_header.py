"""The comment's header: the lines above its tables, each one built alone.

The verdict line (counts), the context line (head vs baseline, presets, devices, torch), ``--note``
lines, missing shards, refused stored runs, failed runner checks, what a partial baseline lacks, and what
the paired A/B re-check decided. Each returns a line (or lines, or None when it has nothing to say).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from benchtrail.compare.document import INCONCLUSIVE, Comparison, Row
from benchtrail.compare.tables import CHANGES, PAIRED_VERDICTS, and_more, counted, display_name, plain
from benchtrail.markup import code_span
from benchtrail.results.baseline_key import OTHER_KEY

#: Characters of one ``--note`` shown in the comment (comment.json keeps the whole note).
MAX_NOTE_CHARS = 1_000


def verdict_line(comparison: Comparison) -> str:
    """One line: counts of regressions, improvements, inconclusive, similar…, and new graph breaks."""
    c = comparison.counts
    parts = [counted(c.get("regressed", 0), "regression"), counted(c.get("improved", 0), "improvement")]
    if marks := ", ".join(
        f"{c[m]} {m}" for m in ("accepted", "quarantined", "unconfirmed", "confirmed") if c.get(m)
    ):
        parts[0] += f" ({marks})"
    parts += [
        f"{c[k]} {k.replace('-', ' ')}"
        for k in (
            "inconclusive",
            "similar",
            "failed",
            "not-comparable",
            "new",
            "removed",
            "noisy",
            "insufficient-samples",
        )
        if c.get(k)
    ]
    breaks = sum(
        max(0, (r.head_median or 0) - r.base_median)
        for r in comparison.rows
        if r.metric == "graph_breaks" and r.base_median is not None
    )
    line = "### benchtrail: " + ", ".join(parts)
    if breaks:
        line += f" · {breaks:.0f} new graph break{'s' if breaks != 1 else ''}"
    return line


def context_line(comparison: Comparison) -> str:
    head, baseline = comparison.head, comparison.baseline
    text = f"`{head.get('commit', '?')[:7]}`{' (dirty)' if head.get('dirty') else ''}"
    per_device = baseline.get("devices") or {}
    if len({b["commit"] for b in per_device.values()}) > 1:
        runs = defaultdict(list)  # (commit, reason) -> devices
        for device, b in sorted(per_device.items()):
            runs[b["commit"], b["reason"]].append(device)
        text += " vs baselines " + ", ".join(
            f"`{c[:7]}` ({r}) for {', '.join(map(plain, ds))}" for (c, r), ds in runs.items()
        )
    elif comparison.base:
        commit = baseline.get("commit") or comparison.base["commit"]
        text += f" vs baseline `{commit[:7]}` ({baseline.get('reason', 'given')})"
    elif baseline.get("store_error"):
        text += f" · no baseline: {plain(baseline['reason'][:500])}; every series is new"
    elif baseline.get("ignored"):
        text += (
            " · no usable baseline: its stored results cannot be read (below), so nothing is compared"
            if str(baseline.get("reason")).startswith("no usable")  # the baseline finder's reason
            else " · no trusted baseline: every series is new"
        )
    else:
        text += " · no baseline found: every series is new"
        other = min(
            ((d, w) for d, w in (baseline.get("lacking") or {}).items() if OTHER_KEY in w), default=None
        )
        if other:
            hint = "stored runs of " + other[1].partition("; stored runs of ")[2]
            text += f" ({plain(other[0])}: {plain(hint[:300])})"
    if presets := head.get("run", {}).get("presets"):
        text += f" · presets {', '.join(presets)}"
    text += (
        f" · devices {', '.join(map(plain, head.get('devices', [])))}, "
        f"torch {plain(head.get('torch_version'))}"
    )
    return text


def missing_shards_line(comparison: Comparison) -> str | None:
    """``⚠ Shards that did not report: laptop shard 1, …`` from ``missing_shards``; None if none is."""
    if not comparison.missing_shards:
        return None
    names = ", ".join(
        f"{plain(m['device_name'])} shard {m['shard_index']}" for m in comparison.missing_shards
    )
    return (
        f"⚠ Shards that did not report: {names}. Their run configs are listed as failed "
        "(the job failed, timed out or was cancelled)."
    )


_PID = re.compile(r"\s*\(pid \d+(?:, ([^)]*))?\)")
_NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)\s*(%?)")


def check_figure(check: dict[str, str]) -> str:
    """A failed ``benchtrail doctor`` check as the comment says it, escaped: ``load average 3.20 > 1.5`` for
    an ``at most X``/``at least X`` limit, else ``cpu governor is powersave (expected performance)``;
    process ids left out (``python (pid 7) 99%`` → ``python 99%``)."""
    name, expected = check["name"], check["expected"]
    value = _PID.sub(lambda m: f" ({m[1]})" if m[1] else "", check["value"]).strip()
    if limit := re.match(r"(at most|at least|none above) (-?\d+(?:\.\d+)?\s*%?)", expected):
        bound, op = limit[2].replace(" ", ""), "<" if limit[1] == "at least" else ">"
        figures = [n + u for n, u in _NUMBER.findall(value) if u == ("%" if bound.endswith("%") else "")]
        if figures and limit[1] != "none above":
            return plain(f"{name} {figures[0]} {op} {bound}")
        return plain(f"{name}: {value} ({op} {bound})")
    return plain(f"{name} is {value} (expected {expected})")


def runner_checks_line(comparison: Comparison) -> str | None:
    """``⚠ runner checks failed on HOST: …`` from comparison.json's ``head.runner_checks`` (each by
    :func:`check_figure`); None when every check passed or none was recorded."""
    devices = comparison.head.get("runner_checks") or []
    parts = [
        f"on {plain(d['device'])}: " + "; ".join(map(check_figure, d["failed"]))
        for d in devices
        if d.get("failed")
    ]
    if not parts:
        return None
    return (
        "⚠ runner checks failed "
        + " · ".join(parts)
        + ". These results may be disturbed: see `benchtrail doctor` in docs/runners.md."
    )


def note_line(note: str) -> str:
    """A ``--note`` as one escaped line of plain text, cut to ``MAX_NOTE_CHARS`` characters (then ``…``)."""
    text = " ".join(str(note).split())
    return plain(text[:MAX_NOTE_CHARS]) + ("…" if len(text) > MAX_NOTE_CHARS else "")


#: Rows a time-bounded re-check did not reach that its line names; the rest are counted.
NOT_REACHED_NAMED = 5


def _recheck_outcome(row: Row) -> str:
    """``confirmed``, ``cleared``, ``inconclusive`` or ``kept`` (paired run unused) of a re-checked row."""
    ab = row.ab  # decided: it has the stored figures (version 8), or a paired verdict used (before)
    if ab is None:
        raise ValueError(f"row {row.id} was not re-checked (no ab)")
    if row.stored is None and (ab.get("guard") or ab.get("verdict") not in PAIRED_VERDICTS):
        return "kept"
    if row.verdict in CHANGES:
        return "confirmed"
    return "inconclusive" if row.verdict in INCONCLUSIVE else "cleared"


def recheck_line(rows: Sequence[Row], one_device: bool) -> str | None:
    """What the paired A/B re-check decided: suspects confirmed, cleared, left inconclusive, not re-checked,
    and those a time-bounded re-check did not reach (the first ``NOT_REACHED_NAMED`` named). None when no
    row was re-checked."""
    missed = [r for r in rows if r.recheck == "not-reached"]
    checked = [r for r in rows if r.ab and r.recheck != "not-reached"]
    if not checked and not missed:
        return None
    line = "Paired A/B re-check"
    if checked:
        counts = Counter(_recheck_outcome(r) for r in checked)
        line += (
            f" of {counted(len(checked), 'suspected change')} against the baseline "
            f"commit on this runner: {counts['confirmed']} confirmed, {counts['cleared']} cleared"
        )
        if counts["inconclusive"]:
            line += f", {counts['inconclusive']} inconclusive within the time budget"
        line += f", {counts['kept']} could not be re-checked." if counts["kept"] else "."
    else:
        line += ":"
    if missed:
        named = ", ".join(code_span(display_name(r, one_device)) for r in missed[:NOT_REACHED_NAMED])
        named += and_more(len(missed), NOT_REACHED_NAMED)
        line += (
            f" {counted(len(missed), ('more ' if checked else '') + 'suspected change')} not re-checked:"
            f" the re-check's time budget ran out first ({named}); "
            f"{'they stay' if len(missed) != 1 else 'it stays'} unconfirmed."
        )
    return line


def baseline_gaps(comparison: Comparison) -> str | None:
    """What a partial baseline lacks: head devices (and why, from ``baseline.lacking``) and new series."""
    if not comparison.base:
        return None
    lacking = comparison.baseline.get("lacking") or {}
    missing = sorted(set(comparison.head.get("devices", [])) - set(comparison.base.get("devices", [])))
    new = comparison.counts.get("new", 0)
    if not missing and not new:
        return None
    parts = [f"devices {', '.join(map(plain, missing))}"] if missing else []
    if new:
        parts.append(f"{new} series")
    why = "".join(f" {plain(d)}: {plain(lacking[d])}." for d in missing if d in lacking)
    return f"The baseline lacks {' and '.join(parts)}: those rows are new, not compared.{why}"


def trust_lines(comparison: Comparison) -> list[str]:
    """``⚠`` lines for stored runs the trust refused (``baseline.ignored``, three shown) and for devices
    not compared because their baseline was measured differently (``not-comparable`` rows saying so)."""
    ignored = comparison.baseline.get("ignored") or []
    shown = "; ".join(f"`{i['commit'][:7]}`: {plain(i['reason'][:300])}" for i in ignored[:3])
    lines = (
        [
            f"⚠ Ignored {counted(len(ignored), 'stored run')} that {'are' if len(ignored) != 1 else 'is'} "
            f"not a trusted baseline: {shown}{and_more(len(ignored), 3)}."
        ]
        if ignored
        else []
    )
    reasons = sorted(
        {
            r.reason
            for r in comparison.rows
            if r.verdict == "not-comparable"
            and r.reason
            and r.reason.startswith("not compared: the baseline of")
        }
    )
    lines += [f"⚠ {plain(r[len('not compared: ') :][:400])}: its series are not compared." for r in reasons]
    return lines
