"""One counting process of ``evaluate-detector --metric instructions``, run under callgrind as
``python -m benchtrail.detector.count_worker SPEC.json OUT.json``.

It calibrates the injected loop, then counts interleaved blocks of the base and each δ variant, in
instructions per call. Method: docs/detector.md, "Instruction counts".
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchtrail.worker.counting import BLOCK_INSTRUCTIONS, MAX_CALLS, Dumps, instrumentation

#: Loop iterations of a calibration block (against an empty loop); blocks of each per calibration.
LOOP_PROBE = 20_000
CALIBRATION_BLOCKS = 3


def spin(k: int) -> None:
    """``k`` iterations of a pure-Python loop, each the same instructions (``range`` allocates beyond 256)."""
    for _ in repeat(None, k):
        pass


def count_variants(spec: dict[str, Any], dumps: Dumps) -> dict[str, Any]:
    """``counts[i]``: the repeats of variant ``i`` (0 the base, then ``spec["deltas_pct"]``), instructions
    per call; the calibration; ``phase_seconds`` since the start."""
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(spec["seed"])
    size = spec["matrix_size"]
    a, b = (torch.randn(size, size, generator=gen) for _ in range(2))
    out = torch.empty(size, size)

    def block(k: int, n: int) -> Callable[[], None]:
        def calls() -> None:
            for _ in range(n):
                torch.mm(a, b, out=out)
                spin(k)

        return calls

    def median(fn: Callable[[], Any]) -> float:
        return float(np.median([dumps.count(fn)[0] for _ in range(CALIBRATION_BLOCKS)]))

    marks = {"start": time.perf_counter()}
    block(0, 1)()  # the first call, uninstrumented
    instrumentation("on")
    marks["on"] = time.perf_counter()
    try:
        overhead = median(lambda: None)
        first = dumps.count(block(0, 1))[0] - overhead
        n = max(1, min(MAX_CALLS, round(BLOCK_INSTRUCTIONS / max(first, 1))))
        block(0, n)()  # warm-up, uncounted
        base = (dumps.count(block(0, n))[0] - overhead) / n  # k's scale: one block is close enough
        per_iteration = (median(lambda: spin(LOOP_PROBE)) - median(lambda: spin(0))) / LOOP_PROBE
        loops = [0] + [round(d / 100 * base / per_iteration) for d in spec["deltas_pct"]]
        counts: list[list[float]] = [[] for _ in loops]
        marks["calibrated"] = time.perf_counter()
        for _ in range(spec["repeats"]):
            for i, k in enumerate(loops):
                counts[i].append((dumps.count(block(k, n))[0] - overhead) / n)
        marks["counted"] = time.perf_counter()
    finally:
        instrumentation("off")
    return {
        "phase_seconds": {k: round(v - marks["start"], 2) for k, v in marks.items()},
        "pid": os.getpid(),
        "calls_per_block": n,
        "overhead": overhead,
        "base_instructions": base,
        "loop_instructions_per_iteration": per_iteration,
        "loop_iterations": loops,
        "counts": counts,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
    }


def main(spec_path: str, out_path: str) -> None:
    """Count as ``SPEC.json`` asks (``seed``, ``matrix_size``, ``deltas_pct``, ``repeats``, ``callgrind_dir``)
    and write the result to ``OUT.json``; the callgrind files are deleted as they are read."""
    started = time.perf_counter()
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    folder = Path(spec["callgrind_dir"])
    result = count_variants(spec, Dumps(folder))
    for path in folder.glob(f"callgrind.out.{os.getpid()}.*"):
        path.unlink()
    result["seconds_after_start"] = time.perf_counter() - started
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
