"""The runner's side of duet measurement in a paired A/B run (``benchtrail.runner.ab``, issue 21).

Duet benchmarking (Bulej et al., "Duet Benchmarking: Improving Measurement Accuracy in the Cloud", ICPE 2020)
runs base and head at the same time, each pinned to its own CPUs, with a synchronised start of every sample,
so a pair shares the machine's state (a noisy neighbour, a frequency change); the arms swap CPUs between
rounds, so a difference between the CPUs cancels. Here the runner chooses the CPUs (:func:`duet_cpus`) and
serves the barrier (:class:`Barrier`) on a Unix socket; each worker meets it before each timed sample
(``benchtrail.worker.duet``).

Where it applies (:func:`applies`): a CPU case whose two arms' workers both serve ``duet``, on a runner with
CPUs enough for both arms' threads. ``auto`` also asks for at least :data:`AUTO_MIN_CPUS` CPUs: on a 2-vCPU VM
``evaluate-detector`` measured duet worse than paired-sequential (docs/detector.md: the two vCPUs differ by
about 14% while both are busy, and duet's pair ratios spread 1.4x as much).
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

#: ``Policy.duet`` values: ``auto`` (where it applies and the runner has AUTO_MIN_CPUS CPUs), ``on`` (wherever
#: it applies), ``off``.
DUET_MODES = ("auto", "on", "off")
#: The fewest CPUs on which ``auto`` uses duet.
AUTO_MIN_CPUS = 4


def _allowed() -> list[int]:
    """This process's allowed CPU ids; none where the OS cannot pin (no ``os.sched_getaffinity``: macOS)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def duet_cpus(threads: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Two disjoint sets of ``threads`` CPU ids each from this process's allowed CPUs (lowest ids first);
    None when there are fewer than ``2 * threads``, or the OS cannot pin."""
    allowed = _allowed()
    if len(allowed) < 2 * threads:
        return None
    return tuple(allowed[:threads]), tuple(allowed[threads:2 * threads])


def applies(mode: str, threads: int, on_cpu: bool, both_serve: bool) -> bool:
    """Whether a case runs in duet: ``mode`` (:data:`DUET_MODES`) allows it, the case runs on the CPU,
    both arms' workers serve ``duet`` and the runner has CPUs for both arms' ``threads`` (``auto``: and at
    least :data:`AUTO_MIN_CPUS`).

    Raises:
        ValueError: ``mode`` is not one of :data:`DUET_MODES`.
    """
    if mode not in DUET_MODES:
        raise ValueError(f"duet mode {mode!r}; allowed: {', '.join(DUET_MODES)}")
    return (mode != "off" and on_cpu and both_serve and duet_cpus(threads) is not None
            and (mode == "on" or len(_allowed()) >= AUTO_MIN_CPUS))


class Barrier:
    """A barrier for two duet workers on a Unix socket (:attr:`path`), served by a thread.

    Each worker connects once and, before each sample, sends one byte; when both have sent one (or the one
    left, after :meth:`leave`), each gets one byte back. The runner calls :meth:`leave` when an arm's job
    ended (done, failed, killed, or never connected): from then on the other worker is released alone.
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
    """A :class:`Barrier` in a new temporary folder, closed and removed afterwards."""
    with (tempfile.TemporaryDirectory(prefix="benchtrail-duet-") as folder,
          contextlib.closing(Barrier(Path(folder))) as b):
        yield b
