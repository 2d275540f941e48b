"""The worker's side of duet measurement (Bulej et al., "Duet Benchmarking", ICPE 2020).

The worker pins itself to its CPUs for the whole job and, before each timed sample, sends one byte to
the runner's barrier and waits for one back: the barrier answers both arms' workers at once.
"""

from __future__ import annotations

import os
import socket
from typing import Any

#: Seconds a worker may take to connect to the barrier. Waiting at it has no limit: the other arm may still
#: be compiling, and the runner kills a worker past ``timeout_s`` and closes the barrier when it stops.
CONNECT_TIMEOUT_S = 30.0


class DuetError(RuntimeError):
    """The barrier could not be reached, or it went away mid-run."""


class Duet:
    """A worker's pinning and barrier for one job.

    Raises:
        DuetError: the CPUs cannot be pinned or the socket cannot be reached.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        self.cpus = spec["cpus"]  # a list of CPU ids (the protocol checked it)
        self.synced = 0
        try:  # Linux's thread ids of this process, this thread's (0) where /proc is absent
            threads = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            threads = [0]
        try:  # every thread the process has now (torch may have started its pool); later ones inherit it
            for tid in threads:
                os.sched_setaffinity(tid, set(self.cpus))
        except (OSError, ValueError, AttributeError) as exc:
            raise DuetError(f"duet: cannot pin to CPUs {self.cpus}: {exc}") from exc
        sock = self._sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(spec["socket"])
        except OSError as exc:
            sock.close()
            raise DuetError(f"duet: cannot reach the barrier at {spec['socket']}: {exc}") from exc
        sock.settimeout(None)

    def wait(self) -> None:
        """Return when the barrier lets both arms start their next sample.

        Raises:
            DuetError: the barrier closed or the socket failed.
        """
        try:
            self._sock.sendall(b"r")
            if self._sock.recv(1) != b"g":
                raise DuetError("duet: the barrier closed")
        except OSError as exc:
            raise DuetError(f"duet: the barrier failed: {exc}") from exc
        self.synced += 1

    def close(self) -> dict[str, Any]:
        """Leave the barrier; the response's ``duet``: ``{"cpus": [...], "synced": n}``."""
        self._sock.close()
        return {"cpus": self.cpus, "synced": self.synced}
