"""Why a benchmark got slower: the operators whose self time changed most between base and head.

The paired re-check profiles both arms of a confirmed regression with ``torch.profiler`` after their timed
samples; :func:`profile_diff` turns the two workers' answers into a row's ``profile`` (docs/formats.md: µs
of self CPU time per iteration, or of self device time on a GPU), :func:`render_why` into the lines of the
comment and ``benchtrail explain``. A confirmed instruction regression's per-function diff is rendered
here too (:func:`render_functions`). Torch-free.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchtrail.compare.tables import format_count
from benchtrail.markup import code_span, md_text

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


def profile_diff(
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


def why_lines(profile: Profile | None, run_dir: Any = None) -> list[str]:
    """:func:`render_why`'s lines as plain text (``benchtrail explain``), traces under ``run_dir`` when
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


def render_why(profile: Profile | None, link: Any = None) -> str:
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


#: Characters of a function's name the comment shows (C++ names run to thousands); the end is cut.
MAX_FUNCTION_CHARS = 120
_OBJECT = re.compile(r" \[[^\]]*\]$")
#: The heading of a ``functions`` diff by self instructions, and of one before ``ranked_by`` (inclusive).
SELF_HEADING = (
    "callgrind, instructions per call, largest change of self instructions first; the inclusive "
    "change beside, unless recursion makes callgrind's meaningless"
)
INCLUSIVE_HEADING = "callgrind, inclusive instructions per call, largest change first"


def function_name(name: str, limit: int = MAX_FUNCTION_CHARS) -> str:
    """A ``callgrind_annotate`` name as shown: folders and object file left out (``/b/Python/ceval.c:f'2
    [/lib/libpython3.11.so]`` → ``ceval.c:f'2``), at most ``limit`` characters: a longer one loses
    ``(anonymous namespace)::`` and then its middle, keeping three times more start than end."""
    where, _, function = _OBJECT.sub("", name).partition(":")
    short = f"{where.rsplit('/', 1)[-1]}:{function}"
    if len(short) <= limit:
        return short
    short = short.replace("(anonymous namespace)::", "")
    tail = (limit - 3) // 4
    return short if len(short) <= limit else f"{short[: limit - 3 - tail]} … {short[-tail:]}"


def _signed(x: float) -> str:
    """``+150k``, ``−2.70M``: a change as :func:`format_count`, with its sign."""
    return ("+" if x >= 0 else "−") + format_count(abs(x))


def _counts(fn: Mapping[str, Any], ranked_by: str | None) -> str:
    """One function of a row's ``functions``: ``0 → 2.70M (+2.70M) self, +2.70M inclusive`` (no inclusive
    where null), or before ``ranked_by``: ``1.20M → 1.35M (+150k) inclusive``."""
    text = f"{format_count(fn['base'])} → {format_count(fn['head'])} ({_signed(fn['change'])})"
    if ranked_by != "self":
        return f"{text} inclusive"
    inclusive = fn.get("inclusive")
    return f"{text} self" + (f", {_signed(inclusive['change'])} inclusive" if inclusive else "")


def function_lines(functions: Profile | None) -> list[str]:
    """A row's ``functions`` as plain text (``benchtrail explain``), a function a line; [] without one."""
    if not functions:
        return []
    lines = [
        f"{function_name(fn['name'], 400)} {_counts(fn, functions.get('ranked_by'))}"
        for fn in functions.get("functions") or ()
    ]
    return lines + ([functions["note"]] if functions.get("note") else [])


def render_functions(functions: Profile | None) -> str:
    """The "Why" block of a confirmed instruction regression, Markdown: a function a line, the note and the
    two callgrind files; "" without ``functions``. One from before ``ranked_by`` ranks by inclusive counts."""
    if not functions:
        return ""
    ranked_by = functions.get("ranked_by")
    out = [
        f"**Why** ({SELF_HEADING if ranked_by == 'self' else INCLUSIVE_HEADING}):",
        *(
            f"- {code_span(function_name(fn['name']))} {_counts(fn, ranked_by)}"
            for fn in functions.get("functions") or ()
        ),
    ]
    if functions.get("note"):
        out.append(f"\n_{md_text(functions['note'][:500])}_")
    files = functions.get("files") or {}
    if functions.get("functions") and files.get("head"):
        out.append(
            f"\nCallgrind files (callgrind_annotate, kcachegrind): head {code_span(files['head'])} of "
            f"this run, base {code_span(files.get('base') or '?')} of the baseline run"
        )
    return "\n".join(out) + "\n"
