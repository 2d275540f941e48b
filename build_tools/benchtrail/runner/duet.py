"""The runner's side of duet measurement in a paired A/B run: the CPUs of each arm and the sample barrier.

Duet benchmarking (Bulej et al., ICPE 2020) runs base and head at once, each pinned to its own CPUs, every
sample started together. ``auto`` asks for :data:`AUTO_MIN_CPUS` CPUs: on a 2-vCPU VM duet measured worse
than paired runs (docs/detector.md).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

#: ``auto`` (where it applies, on AUTO_MIN_CPUS CPUs or more), ``on`` (wherever it applies), ``off``.
DUET_MODES = ("auto", "on", "off")
AUTO_MIN_CPUS = 4


def _allowed() -> list[int]:
    """This process's allowed CPU ids; none where the OS cannot pin (macOS)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def duet_cpus(threads: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Two disjoint sets of ``threads`` allowed CPU ids, lowest first; None if fewer than ``2 * threads``."""
    allowed = _allowed()
    if len(allowed) < 2 * threads:
        return None
    return tuple(allowed[:threads]), tuple(allowed[threads : 2 * threads])


def applies(mode: str, threads: int, on_cpu: bool, both_serve: bool) -> bool:
    """Whether a CPU case runs in duet: ``mode`` allows it, both arms' workers serve it and there are CPUs
    for both arms' ``threads``. Raises ValueError for a ``mode`` not in :data:`DUET_MODES`."""
    if mode not in DUET_MODES:
        raise ValueError(f"duet mode {mode!r}; allowed: {', '.join(DUET_MODES)}")
    return (
        mode != "off"
        and on_cpu
        and both_serve
        and duet_cpus(threads) is not None
        and (mode == "on" or len(_allowed()) >= AUTO_MIN_CPUS)
    )


class Barrier:
    """A barrier for two duet workers on a Unix socket (:attr:`path`), served by a thread.

    Before each sample a worker sends one byte; when both (or, after :meth:`leave`, the one left) have, each
    gets one byte back.
    """

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "duet.sock")
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(self.path)
        self._listener.listen(2)
        self._expected = 2
        self._lock = threading.Lock()
        self._stop = False
        self.released = 0  # times both (or the one left) were let go
        self._thread = threading.Thread(target=self._serve, name="benchtrail-duet-barrier", daemon=True)
        self._thread.start()

    def leave(self) -> None:
        """An arm's job ended: wait for one worker fewer."""
        with self._lock:
            self._expected -= 1

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        conns, waiting = [], set()
        while not self._stop:
            ready, _, _ = select.select([self._listener, *conns], [], [], 0.05)
            for s in ready:
                if s is self._listener:
                    conns.append(self._listener.accept()[0])
                    continue
                try:
                    data = s.recv(1)
                except OSError:
                    data = b""
                if data:
                    waiting.add(s)
                else:
                    conns.remove(s)
                    waiting.discard(s)
                    s.close()
            if waiting and len(waiting) >= self._expected:  # an int read is atomic; leave() writes it locked
                self.released += 1  # before the workers see it (a reader after they finished sees it)
                for s in waiting:
                    with contextlib.suppress(OSError):
                        s.sendall(b"g")
                waiting.clear()
        for s in conns:
            s.close()


@contextlib.contextmanager
def barrier() -> Iterator[Barrier]:
    """A :class:`Barrier` in a temporary folder, removed afterwards."""
    with (
        tempfile.TemporaryDirectory(prefix="benchtrail-duet-") as folder,
        contextlib.closing(Barrier(Path(folder))) as b,
    ):
        yield b
