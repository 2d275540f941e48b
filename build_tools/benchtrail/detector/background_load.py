"""A bounded background load beside the detector's measurement (``evaluate-detector --noise``).

One unpinned process alternates busy periods and sleeps; while busy it streams over a buffer (numpy
``add`` into itself), taking CPU time and memory bandwidth from the workers.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Load:
    """The background load: ``duty`` (0..1] of every ``period_s`` seconds busy over ``buffer_mib`` MiB."""

    duty: float = 0.5
    period_s: float = 0.01
    buffer_mib: int = 256

    def __post_init__(self) -> None:
        if not (0 < self.duty <= 1 and self.period_s > 0 and self.buffer_mib >= 1):
            raise ValueError(f"duty must be in (0, 1], period_s > 0 and buffer_mib >= 1: {self}")


def _run(load: Load, stop: Any) -> None:  # the child process
    import numpy as np

    buffer = np.ones(load.buffer_mib * 2**20 // 8)
    busy = load.duty * load.period_s
    while not stop.is_set():
        end = time.perf_counter() + busy
        while time.perf_counter() < end:
            np.add(buffer, 1.0, out=buffer)
        if load.duty < 1:
            time.sleep(load.period_s - busy)


@contextlib.contextmanager
def running_load(load: Load | None) -> Iterator[int | None]:
    """Run ``load`` in a spawned process for the block, yielding its pid (None for None); RuntimeError if
    the process died before the block ended."""
    if load is None:
        yield None
        return
    context = multiprocessing.get_context("spawn")  # never a fork of a process that holds torch
    stop = context.Event()
    process = context.Process(target=_run, args=(load, stop), name="benchtrail-background-load", daemon=True)
    process.start()
    try:
        yield process.pid
        if not process.is_alive():
            raise RuntimeError(f"the background load process exited early (exit code {process.exitcode})")
    finally:
        stop.set()
        end(process)


def end(process: Any) -> None:
    """Wait 5 s for a ``multiprocessing`` process to exit, then kill it."""
    process.join(5)
    if process.is_alive():
        process.kill()
        process.join()


def machine(load: Load | None) -> dict[str, Any]:
    """The machine, the date and the background ``load``, as every evaluate-detector setup records them."""
    import os
    import platform
    from datetime import UTC, datetime

    from benchtrail.runner.environment import cpu_model

    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "background_load": asdict(load) if load else None,
    }


def described(load: dict[str, Any] | None) -> str:
    """How a setup's table line ends: the ``background_load`` it records (None: none), or a full stop."""
    return (
        f"; with a background load (--noise: {100 * load['duty']:g}% duty over a "
        f"{load['buffer_mib']} MiB buffer)."
        if load
        else "."
    )
