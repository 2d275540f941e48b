"""The per-function instruction diff of a confirmed instruction regression, computed and rendered.

Each ``instructions`` record keeps one callgrind file (``details.callgrind``, relative to its run directory)
of one counted block of ``details.iterations_per_sample`` calls. Counts come from ``callgrind_annotate``,
parsed as ``torch.utils.benchmark``'s valgrind wrapper does; the diff is ``CallgrindStats.delta`` (ranked by
self instructions) with each function's inclusive change beside. docs/formats.md gives the ``functions``
entry of comparison.json; :func:`render_functions` renders it for the comment, :func:`function_lines` for
``benchtrail explain``. Torch-free.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from benchtrail.compare.document import Json, Row
from benchtrail.compare.tables import format_count
from benchtrail.errors import UserError
from benchtrail.markup import code_span, md_text

#: ``callgrind_annotate``'s arguments: every function (threshold 100%), no percentages, no source annotation
#: (torch's ``parse_output``, plus ``--auto=no``); ``--inclusive=yes|no`` is added per mode.
ANNOTATE = ("callgrind_annotate", "--threshold=100", "--show-percs=no", "--auto=no")
#: Functions a row's diff keeps, and the confirmed instruction regressions diffed (largest change first).
TOP = 10
MAX_ROWS = 5
#: Seconds one ``callgrind_annotate`` may take.
TIMEOUT_S = 120.0
#: The note of a diff in which no function's self instructions per call changed.
UNCHANGED = "no function's instructions per call changed between the two callgrind files"
_TOTAL = re.compile(r"^([0-9,]+)\s+PROGRAM TOTALS")
_BEGIN = re.compile(r"Ir\s+file:function")
_FUNCTION = re.compile(r"^\s*([0-9,]+)\s+(.+:.+)$")
_TOTALS_LINE = re.compile(rb"totals:\s*([0-9]+)(\s+[0-9]+)*")  # a figure an event, Ir first
_RECURSION = re.compile(r"'[0-9]+( \[[^\]]*\])?$")


class FunctionChange(NamedTuple):
    """Self instructions of one function in base and head (per call or per block) and head − base, then
    its inclusive ones likewise (None: a recursion artifact)."""

    name: str
    base: float
    head: float
    change: float
    inclusive: tuple[float, float, float] | None = None


def file_total(path: str | Path) -> int:
    """The instructions of one callgrind file, from the ``totals:`` line callgrind writes last.
    Raises UserError when the file is missing or truncated (no final ``totals:`` line)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"callgrind file {path} does not exist")
    with path.open("rb") as f:
        f.seek(max(f.seek(0, 2) - 4096, 0))
        last = f.read().rstrip().rsplit(b"\n", 1)[-1].strip()
    if not (m := _TOTALS_LINE.fullmatch(last)):
        raise UserError(
            f"callgrind file {path} is truncated: it does not end with callgrind's 'totals:' "
            f"line (it ends {last[-60:].decode(errors='replace')!r})"
        )
    return int(m[1])


def function_counts(path: str | Path, inclusive: bool = False) -> Counter[str]:
    """``{file:function: instructions}`` of one callgrind file, self or ``inclusive``, read by
    ``callgrind_annotate``. Raises UserError when that is not on PATH or the file is missing, truncated or
    unparsable."""
    if shutil.which(ANNOTATE[0]) is None:
        raise UserError(
            "callgrind_annotate is not on PATH: the per-function diff needs valgrind's tools "
            "(Debian/Ubuntu: sudo apt-get install valgrind)"
        )
    file_total(path)
    mode = f"--inclusive={'yes' if inclusive else 'no'}"
    try:
        done = subprocess.run(
            [*ANNOTATE, mode, str(path)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"callgrind_annotate took over {TIMEOUT_S:g} s on {path}") from None
    if done.returncode:
        said = " ".join((done.stderr or done.stdout).split())[-300:]
        raise UserError(f"callgrind_annotate could not read {path} (exit code {done.returncode}): {said}")
    lines = iter(done.stdout.splitlines())
    if not (any(map(_TOTAL.match, lines)) and any(map(_BEGIN.match, lines))):  # the table follows both
        raise UserError(
            f"callgrind_annotate's output for {path} has no function table (not a callgrind file?)"
        )
    counts: Counter[str] = Counter()
    for line in lines:
        if m := _FUNCTION.match(line):
            counts[m[2]] += int(m[1].replace(",", ""))
        elif not re.match(r"-+", line):
            break
    return counts


def _levels_merged(counts: Counter[str]) -> Counter[str]:
    """Self counts with each function's recursion levels (``f'2``) added to ``f``: where a counted block
    starts inside the interpreter's loop, its frames sit at level 1 in one file and level 2 in the other."""
    merged: Counter[str] = Counter()
    for name, n in counts.items():
        merged[_RECURSION.sub(lambda m: m.group(1) or "", name)] += n
    return merged


def function_diff(
    base_path: str | Path, head_path: str | Path, top: int = TOP, calls: tuple[int, int] = (1, 1)
) -> list[FunctionChange]:
    """The ``top`` functions whose self instructions per call changed most (``|head − base|``, then name; a
    function one file lacks counts 0; recursion levels ``f'2`` counted as ``f``), as ``CallgrindStats.delta``,
    with inclusive counts beside (None for a recursion artifact: a function that ran but has no level-1
    entry on a side, or a count above the file's total). ``calls``: each block's
    calls (base, head). Raises UserError as :func:`function_counts`."""
    paths = (base_path, head_path)
    totals = [file_total(p) for p in paths]
    own = [_levels_merged(function_counts(p)) for p in paths]
    whole = [function_counts(p, inclusive=True) for p in paths]
    changes = []
    for f in own[0].keys() | own[1].keys():
        base, head = (own[i][f] / calls[i] for i in (0, 1))
        if base == head:
            continue
        base_call, head_call = (whole[i][f] / calls[i] for i in (0, 1))
        artifact = any((own[i][f] and f not in whole[i]) or whole[i][f] > totals[i] for i in (0, 1))
        inclusive = None if artifact else (base_call, head_call, head_call - base_call)
        changes.append(FunctionChange(f, base, head, head - base, inclusive))
    return sorted(changes, key=lambda c: (-abs(c.change), c.name))[:top]


#: Where a side's callgrind file is: ``(row, "base" | "head")`` → a local path, or why there is none.
Locate = Callable[[Row, str], "Path | str"]


def _inside(name: object) -> bool:
    """Whether ``name`` is a relative POSIX path without ``..``, empty parts or wildcards (``*?[]``)."""
    return (
        isinstance(name, str)
        and not name.startswith("/")
        and not re.search(r"[*?\[\]\\]", name)
        and all(part not in ("", ".", "..") for part in name.split("/"))
    )


def row_functions(row: Row, locate: Locate, top: int = TOP) -> Json:
    """A row's ``functions`` (docs/formats.md): :func:`function_diff` of its two sides' files, per call."""
    calls = {side: getattr(row, f"{side}_details").get("iterations_per_sample") for side in ("base", "head")}
    files = {side: getattr(row, f"{side}_details").get("callgrind") for side in ("base", "head")}
    out: Json = {"functions": [], "ranked_by": "self", "calls": calls, "files": files, "note": None}
    bad = [side for side, n in calls.items() if not (type(n) is int and n > 0)]
    unsafe = [side for side, f in files.items() if not _inside(f)]
    if bad or None in files.values():
        side = bad[0] if bad else next(s for s, f in files.items() if f is None)
        note = f"the {side} record has no details.{'iterations_per_sample' if bad else 'callgrind'}"
    elif unsafe:
        note = (
            f"the {unsafe[0]} record's details.callgrind {files[unsafe[0]]!r} is not a path inside its "
            "run directory"
        )
    else:
        paths = {side: locate(row, side) for side in ("base", "head")}
        missing = [side for side, p in paths.items() if isinstance(p, str)]
        note = (
            f"the {missing[0]}'s callgrind file {files[missing[0]]}: {paths[missing[0]]}" if missing else ""
        )
    if not note:
        try:
            diff = function_diff(paths["base"], paths["head"], top, (calls["base"], calls["head"]))
        except UserError as exc:
            note = str(exc)
    if note:
        return {**out, "note": f"no per-function diff: {note}"}
    return {**out, "functions": [_entry(c) for c in diff], "note": None if diff else UNCHANGED}


def _entry(change: FunctionChange) -> Json:
    """One function of a row's ``functions``, to 0.1 instruction."""
    inclusive = (
        None
        if change.inclusive is None
        else dict(zip(("base", "head", "change"), (round(x, 1) for x in change.inclusive)))
    )
    return {
        "name": change.name,
        "base": round(change.base, 1),
        "head": round(change.head, 1),
        "change": round(change.change, 1),
        "inclusive": inclusive,
    }


def with_functions(
    rows: Sequence[Row], locate: Locate, top: int = TOP, max_rows: int = MAX_ROWS
) -> list[Row]:
    """``rows`` with ``functions`` set on the ``max_rows`` confirmed instruction regressions of largest change
    (:func:`row_functions`); the other rows as they are."""
    chosen = sorted(
        (
            r
            for r in rows
            if r.metric == "instructions" and r.verdict == "regressed" and r.mark == "confirmed"
        ),
        key=lambda r: -(r.change or 0.0),
    )[:max_rows]
    diffs = {id(r): row_functions(r, locate, top) for r in chosen}
    return [replace(r, functions=diffs[id(r)]) if id(r) in diffs else r for r in rows]


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


def function_lines(functions: Mapping[str, Any] | None) -> list[str]:
    """A row's ``functions`` as plain text (``benchtrail explain``), a function a line; [] without one."""
    if not functions:
        return []
    lines = [
        f"{function_name(fn['name'], 400)} {_counts(fn, functions.get('ranked_by'))}"
        for fn in functions.get("functions") or ()
    ]
    return lines + ([functions["note"]] if functions.get("note") else [])


def render_functions(functions: Mapping[str, Any] | None) -> str:
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
