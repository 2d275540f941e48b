"""Why a benchmark got slower: the operators whose self time changed most between base and head.

The paired re-check profiles both arms of a confirmed regression with ``torch.profiler`` after their timed
samples; :func:`diff_profiles` turns the two workers' answers into a row's ``profile`` (docs/formats.md: µs
of self CPU time per iteration, or of self device time on a GPU), :func:`render_profile` into the lines of
the comment and :func:`profile_lines` into those of ``benchtrail explain``. Torch-free.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchtrail.markup import code_span

#: Operators a row's profile keeps.
TOP = 5
#: The two arms of a paired run, base first.
ARMS = ("base", "head")
#: The note of a profile whose base arm answered none.
HEAD_ONLY = "head-only profile: the base commit's worker predates profiling"


#: A profile (JSON): a worker's answer (``Response.profile``) or a row's ``profile``.
Profile = Mapping[str, Any]
#: What a profile's times measure, by its ``clock``: self CPU time, or (a GPU run) self device time.
CLOCKS = {"cpu": ("self_cpu_us", "self CPU time"), "device": ("self_device_us", "self CUDA time")}


def _per_iteration(profile: Profile, clock: str) -> dict[str, float]:
    """``{operator name: self µs per iteration}`` of one worker's profile on ``clock``."""
    n = max(int(profile.get("iterations") or 1), 1)
    out: defaultdict[str, float] = defaultdict(float)  # an operator it lacks: 0 µs
    for op in profile.get("operators") or ():
        out[op["name"]] += float(op.get(CLOCKS[clock][0]) or 0.0) / n
    return out


def diff_profiles(
    base: Profile | None, head: Profile | None, traces: Mapping[str, str | None], top: int = TOP
) -> dict[str, Any] | None:
    """A row's ``profile`` from the two arms' worker profiles (None or ``{"error": ...}``: none, the note
    saying why) and trace paths by arm; None when the head has none. An operator one side lacks counts 0 µs;
    the clock is the device's when the head's profile has device times (a GPU run), else the CPU's."""
    if not head or "error" in head:
        return None
    on_device = any((op.get("self_device_us") or 0) > 0 for op in head.get("operators") or ())  # a GPU run
    clock = "device" if on_device else "cpu"
    head_us = _per_iteration(head, clock)
    if base and "error" not in base:
        paired, note = True, None
        base_us = _per_iteration(base, clock)
        order = sorted(set(base_us) | set(head_us), key=lambda k: -abs(head_us[k] - base_us[k]))
    else:
        paired = False
        note = HEAD_ONLY if not base else f"head-only profile: profiling the base failed ({base['error']})"
        base, traces = {}, {"head": traces.get("head")}  # no base side
        order = sorted(head_us, key=lambda k: -head_us[k])
    ops = [
        {
            "name": k,
            "base_us": round(base_us[k], 3) if paired else None,
            "head_us": round(head_us[k], 3),
            "change_us": round(head_us[k] - base_us[k], 3) if paired else None,
        }
        for k in order[:top]
    ]
    return {
        "operators": ops,
        "iterations": {"base": base.get("iterations"), "head": head.get("iterations")},
        "traces": {arm: traces.get(arm) for arm in ARMS},
        "note": note,
        "clock": clock,
    }


def _time(us: float) -> str:
    """``us`` in µs, ms or s, three significant figures: ``1.20 ms``, ``36.5 µs``, ``0 µs``."""
    if us == 0:
        return "0 µs"
    value, unit = next(
        ((us / scale, name) for scale, name in ((1e6, "s"), (1e3, "ms")) if abs(us) >= scale), (us, "µs")
    )
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:.{digits}f} {unit}"


def _times(op: Mapping[str, Any], head_only: str) -> str:
    """An operator's ``self time 1.20 ms → 3.65 ms (+2.45 ms) per iteration``, or ``head_only`` then its head
    time (a head-only profile)."""
    if op.get("base_us") is None:
        return f"{head_only}{_time(op['head_us'])} per iteration (head)"
    change = ("+" if op["change_us"] >= 0 else "−") + _time(abs(op["change_us"]))
    return f"self time {_time(op['base_us'])} → {_time(op['head_us'])} ({change}) per iteration"


def profile_lines(profile: Profile | None, run_dir: Any = None) -> list[str]:
    """:func:`render_profile`'s lines as plain text (``benchtrail explain``), traces under ``run_dir`` when
    given, else relative to the run directory; [] without a profile."""
    if not profile or not profile.get("operators"):
        return []
    lines = [f"{op['name']} {_times(op, 'self time ')}" for op in profile["operators"]]
    if profile.get("note"):
        lines.append(profile["note"])
    traces = profile.get("traces") or {}
    shown = [
        f"{arm} {Path(run_dir, traces[arm]) if run_dir is not None else traces[arm]}"
        for arm in ARMS
        if traces.get(arm)
    ]
    if shown:
        lines.append(
            "traces (Chrome trace JSON: open in ui.perfetto.dev or chrome://tracing): " + ", ".join(shown)
        )
    return lines


def render_profile(profile: Profile | None, link: Any = None) -> str:
    """The "Why" block of a regressed row's ``profile``, Markdown: the operators, most changed first
    (``aten::mm self time 1.20 ms → 3.65 ms (+2.45 ms) per iteration``), the note and the two traces, each
    shown as ``link(path)`` (default: the path in a code span); "" without a profile."""
    if not profile or not profile.get("operators"):
        return ""
    what = CLOCKS[profile.get("clock") or "cpu"][1]
    out = [
        f"**Why** (torch.profiler, {what} per iteration, largest change first):",
        *(f"- {code_span(op['name'])} {_times(op, '')}" for op in profile["operators"]),
    ]
    if profile.get("note"):
        out.append(f"\n_{profile['note']}_")
    traces = profile.get("traces") or {}
    shown = [
        f"[{arm}]({link(traces[arm])})" if link else f"{arm} {code_span(traces[arm])}"
        for arm in ARMS
        if traces.get(arm)
    ]
    if shown:
        out.append("\nTraces (Chrome trace JSON; open in ui.perfetto.dev): " + ", ".join(shown))
    return "\n".join(out) + "\n"
