"""The per-function instruction diff of a confirmed instruction regression (issue 44, item 5).

Each ``instructions`` record keeps one callgrind file, one counted block of ``details.iterations_per_sample``
calls (``benchtrail.worker.counting``), relative to its run directory (``details.callgrind``).
:func:`function_counts` reads a file through ``callgrind_annotate --inclusive=yes`` and parses its output as
``torch.utils.benchmark``'s valgrind wrapper does; :func:`function_diff` is ``CallgrindStats.delta`` of two
files; :func:`with_functions` gives each confirmed instruction regression its ``functions`` (comparison.json):

    {"functions": [{"name": str, "base": float, "head": float, "change": float}],  # instructions per call
     "calls": {"base": int, "head": int}, "files": {"base": path, "head": path}, "note": str | null}

``functions`` is [] and ``note`` says why when a file cannot be had or read. Torch-free.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from benchtrail.compare.document import Json, Row
from benchtrail.errors import UserError

#: ``callgrind_annotate``'s arguments: inclusive counts, every function (threshold 100%), no percentages, no
#: source annotation (torch's ``parse_output``, plus ``--auto=no``).
ANNOTATE = ("callgrind_annotate", "--inclusive=yes", "--threshold=100", "--show-percs=no", "--auto=no")
#: Functions a row's diff keeps, and the confirmed instruction regressions diffed (largest change first).
TOP = 10
MAX_ROWS = 5
#: Seconds one ``callgrind_annotate`` may take.
TIMEOUT_S = 120.0
_TOTAL = re.compile(r"^([0-9,]+)\s+PROGRAM TOTALS")
_BEGIN = re.compile(r"Ir\s+file:function")
_FUNCTION = re.compile(r"^\s*([0-9,]+)\s+(.+:.+)$")


class FunctionChange(NamedTuple):
    """One function of a diff: its inclusive instructions in base and head (per call, or per block), and
    head − base."""

    name: str
    base: float
    head: float
    change: float


def function_counts(path: str | Path) -> dict[str, int]:
    """``{file:function: inclusive instructions}`` of one callgrind file; a function whose count equals the
    program totals is left out (callgrind's top-level symbols, as torch leaves them out).

    Raises:
        UserError: ``callgrind_annotate`` is not on PATH, the file cannot be read, or its output cannot be
            parsed (the message names the file).
    """
    if shutil.which(ANNOTATE[0]) is None:
        raise UserError("callgrind_annotate is not on PATH: the per-function diff needs valgrind's tools "
                        "(Debian/Ubuntu: sudo apt-get install valgrind)")
    path = Path(path)
    if not path.is_file():
        raise UserError(f"callgrind file {path} does not exist")
    try:
        done = subprocess.run([*ANNOTATE, str(path)], capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UserError(f"callgrind_annotate took over {TIMEOUT_S:g} s on {path}") from None
    if done.returncode:
        said = " ".join((done.stderr or done.stdout).split())[-300:]
        raise UserError(f"callgrind_annotate could not read {path} (exit code {done.returncode}): {said}")
    total, counts, state = None, {}, "total"
    for line in done.stdout.splitlines():
        if state == "total":
            if m := _TOTAL.match(line):
                total, state = int(m[1].replace(",", "")), "begin"
        elif state == "begin":
            state = "parse" if _BEGIN.match(line) else state
        elif m := _FUNCTION.match(line):
            ir = int(m[1].replace(",", ""))
            if ir != total:
                counts[m[2]] = counts.get(m[2], 0) + ir
        elif not re.match(r"-+", line):
            break
    if state != "parse":
        raise UserError(f"callgrind_annotate's output for {path} has no function table "
                        "(not a callgrind file?)")
    return counts


def function_diff(base_path: str | Path, head_path: str | Path, top: int = TOP,
                  calls: tuple[int, int] = (1, 1)) -> list[FunctionChange]:
    """The ``top`` functions whose inclusive instructions changed most (head − base, largest ``|change|``
    first, then by name; a function one file lacks counts 0 there), as ``CallgrindStats.delta``; each file's
    counts divided by its block's calls (``calls``: base, head), so blocks of different lengths compare.

    Raises:
        UserError: as :func:`function_counts`.
    """
    base, head = function_counts(base_path), function_counts(head_path)
    changes = [FunctionChange(f, b, h, h - b) for f in base.keys() | head.keys()
               for b, h in [(base.get(f, 0) / calls[0], head.get(f, 0) / calls[1])]]
    return sorted((c for c in changes if c.change), key=lambda c: (-abs(c.change), c.name))[:top]


#: Where a side's callgrind file is: ``(row, "base" | "head")`` → a local path, or why there is none.
Locate = Callable[[Row, str], "Path | str"]


def _inside(name: object) -> bool:
    """Whether ``name`` is a relative POSIX path without ``..``, empty parts or wildcards (``*?[]``)."""
    return (isinstance(name, str) and not name.startswith("/") and not re.search(r"[*?\[\]\\]", name)
            and all(part not in ("", ".", "..") for part in name.split("/")))


def row_functions(row: Row, locate: Locate, top: int = TOP) -> Json:
    """A row's ``functions`` (module docstring): :func:`function_diff` of its two sides' files, per call
    (each block's counts over its side's ``details.iterations_per_sample``)."""
    calls = {side: getattr(row, f"{side}_details").get("iterations_per_sample") for side in ("base", "head")}
    files = {side: getattr(row, f"{side}_details").get("callgrind") for side in ("base", "head")}
    out: Json = {"functions": [], "calls": calls, "files": files, "note": None}
    bad = [side for side, n in calls.items() if not (type(n) is int and n > 0)]
    if bad or None in files.values():
        lacking = "iterations_per_sample" if bad else "callgrind"
        side = bad[0] if bad else next(s for s, f in files.items() if f is None)
        return {**out, "note": f"no per-function diff: the {side} record has no details.{lacking}"}
    unsafe = next((f"the {side} record's details.callgrind {f!r} is not a path inside its run directory"
                   for side, f in files.items() if not _inside(f)), None)
    if unsafe:
        return {**out, "note": f"no per-function diff: {unsafe}"}
    paths = {side: locate(row, side) for side in ("base", "head")}
    missing = next((f"the {side}'s callgrind file {files[side]}: {p}" for side, p in paths.items()
                    if isinstance(p, str)), None)
    if missing:
        return {**out, "note": f"no per-function diff: {missing}"}
    try:
        diff = function_diff(paths["base"], paths["head"], top, (calls["base"], calls["head"]))
    except UserError as exc:
        return {**out, "note": f"no per-function diff: {exc}"}
    return {**out, "functions": [{k: round(v, 1) if k != "name" else v for k, v in c._asdict().items()}
                                 for c in diff]}


def with_functions(rows: Sequence[Row], locate: Locate, top: int = TOP,
                   max_rows: int = MAX_ROWS) -> list[Row]:
    """``rows`` with ``functions`` set on the ``max_rows`` confirmed instruction regressions of largest change
    (:func:`row_functions`); the other rows as they are."""
    chosen = sorted((r for r in rows if r.metric == "instructions" and r.verdict == "regressed"
                     and r.mark == "confirmed"), key=lambda r: -(r.change or 0.0))[:max_rows]
    diffs = {id(r): row_functions(r, locate, top) for r in chosen}
    return [replace(r, functions=diffs[id(r)]) if id(r) in diffs else r for r in rows]
