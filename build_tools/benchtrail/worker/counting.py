"""The counting worker: instructions per call of each CPU case under callgrind, one process per shard.

Run as ``python -m benchtrail.worker.counting REQUESTS.json JOURNAL.jsonl`` under valgrind by the
counting pass. A repeat is (block − overhead) / ``n`` instructions per call, a block being about
``BLOCK_INSTRUCTIONS`` (at most ``MAX_CALLS`` calls; one call for a model that changes its inputs).
The method and its measurements: docs/statistics.md, "How a count is taken".
"""

from __future__ import annotations

import copy
import gc
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchtrail.suite.definitions import RunConfig
from benchtrail.suite.serialization import unpack_and_deserialize
from benchtrail.worker import tasks
from benchtrail.worker.inputs import model_inputs
from benchtrail.worker.main import CaseFailure, failure_of, iteration_of, release_modules, task_module
from benchtrail.worker.protocol import Response, read_request

#: Instructions a counted block aims at; a block of a bigger call is one call. Per-call counts of autograd
#: and functorch calls wander by 0.3% (sqrl's Jacobian: repeats ranged 0.64% in blocks of 10M, 0.09% of 50M).
BLOCK_INSTRUCTIONS = 50_000_000
MAX_CALLS = 1000
#: A call of at least this many instructions is counted ``BIG_CALL_REPEATS`` times, not ``repeats``: its
#: repeats agree within 0.001% (one of 67.9M: 67,852,461 three times of five) and each takes a minute under
#: callgrind.
BIG_CALL = 100_000_000
BIG_CALL_REPEATS = 3


def instrumentation(state: str) -> None:
    """Switch callgrind's instrumentation ``on`` or ``off`` through ``vgdb``, spinning so valgrind polls.

    Raises:
        CaseFailure: vgdb failed.
    """
    proc = subprocess.Popen(
        ["vgdb", f"--pid={os.getpid()}", "instrumentation", state],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while proc.poll() is None:
        pass
    if proc.returncode:
        raise CaseFailure(
            f"vgdb could not switch callgrind's instrumentation {state}: "
            f"{proc.stderr.read().decode(errors='replace').strip()[-300:]}"
        )


class Dumps:
    """The callgrind files of this process, one per counted block: ``<folder>/callgrind.out.<pid>.<k>``."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.k = folder, 0

    def count(self, calls: Callable[[], Any]) -> tuple[int, Path]:
        """Instructions of ``calls()`` (collection on around it only) and the file they were dumped to."""
        gc.collect()
        gc.disable()
        torch._C._valgrind_toggle()
        try:
            calls()
        finally:  # collection off again (and the file numbering in step) also when the calls raise
            torch._C._valgrind_toggle_and_dump_stats()
            self.k += 1
            gc.enable()
        path = self.folder / f"callgrind.out.{os.getpid()}.{self.k}"
        totals = [
            line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("totals:")
        ]
        if not totals:
            raise CaseFailure(f"callgrind file {path} has no totals line")
        return int(totals[-1].split()[1]), path


def count_job(rc: RunConfig, module_dir: Path | None, repeats: int, dumps: Dumps) -> dict[str, Any]:
    """Count one case; the response's fields."""
    torch.set_num_threads(1)
    gen, task = rc.module_generation_config, rc.execution_config.task
    pristine = model_inputs(gen.model, "cpu")

    def fresh() -> Any:
        return tasks.prepare_inputs(task, copy.deepcopy(pristine))

    inputs = fresh()
    fn, _ = task_module(gen, task, fresh(), "cpu", module_dir)
    mutates = gen.model.mutates_inputs

    def block(n: int) -> Callable[[], None]:
        step = iteration_of(task, fn, fresh() if mutates else inputs)  # fresh inputs: made outside the block

        def calls() -> None:
            for _ in range(n):
                step()

        return calls

    with tasks.grad_mode(task):
        block(1)()  # the first call (compiling, loading), uninstrumented
        instrumentation("on")
        try:
            # Switching instrumentation off zeroes callgrind's costs but not its last dump's: the first dump
            # after switching it on again totals a negative count (a 64-bit wrap). An empty dump resyncs.
            dumps.count(lambda: None)
            first, _ = dumps.count(block(1))
            n = 1 if mutates else max(1, min(MAX_CALLS, round(BLOCK_INSTRUCTIONS / max(first, 1))))
            if n > 1:
                block(n)()  # warm-up, uncounted (a call of a block of its own was warmed up by the first)
            if first >= BIG_CALL:
                repeats = min(repeats, BIG_CALL_REPEATS)
            overhead, _ = dumps.count(lambda: None)
            counts, kept = [], None
            for _ in range(repeats):
                total, kept = dumps.count(block(n))
                counts.append((total - overhead) / n)
        finally:
            instrumentation("off")
    for k in range(dumps.k - repeats - 2, dumps.k):  # all but the last: resync, first, overhead, repeats
        (dumps.folder / f"callgrind.out.{os.getpid()}.{k}").unlink()
    return {
        "instructions": tuple(counts),
        "iterations_per_sample": n,
        "warmup_iterations": 1 + n * (n > 1),
        "overhead": overhead,
        "threads": 1,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "callgrind": str(kept),
    }


def serve(requests_path: str, journal_path: str) -> None:
    """Count every case of the request file, journaling ``{"start": i}`` before case i and
    ``{"case": i, **response}`` after it; a failing case does not stop the others."""
    spec = json.loads(Path(requests_path).read_text(encoding="utf-8"))
    dumps = Dumps(Path(spec["callgrind_dir"]))
    with open(journal_path, "a", encoding="utf-8") as journal:

        def say(line: dict[str, Any]) -> None:
            journal.write(json.dumps(line) + "\n")
            journal.flush()

        for i, data in enumerate(spec["requests"]):
            say({"start": i})
            try:
                request = read_request(data)
                (rc,) = unpack_and_deserialize(request.config, RunConfig)
                module_dir = Path(request.module_dir) if request.module_dir else None
                response = Response(status="ok", **count_job(rc, module_dir, spec["repeats"], dumps))
                if not all(map(math.isfinite, response.instructions)):
                    response = Response(status="failed", reason="an instruction count is not finite")
            except Exception as exc:
                response = failure_of(exc)
            release_modules()
            say({"case": i, **response.to_json()})


if __name__ == "__main__":
    serve(*sys.argv[1:])
