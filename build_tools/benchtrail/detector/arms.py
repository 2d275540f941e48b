"""The two long-lived worker processes of ``benchtrail evaluate-detector``, one per arm.

Each times ``torch.mm`` of two seeded fp32 square matrices on one thread with the real harness, plus a
busy-spin per call for the injected extra work. In duet (Bulej et al., ICPE 2020) both sample at once,
each on its own CPU, meeting at a ``multiprocessing.Barrier`` before every sample.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from benchtrail.detector.background_load import end

#: Seconds a worker waits at the duet barrier for the other before it gives up (the other failed).
BARRIER_TIMEOUT_S = 60.0


def _worker_main(conn: Any, matrix_size: int, seed: int, cpu: int | None, barrier: Any) -> None:
    """Serve ``("warmup", s)``, ``("pin", cpu)``, ``("samples", count, iterations, spin_s, warm_calls)`` and
    ``("duet", ...)`` (the same, each sample started at ``barrier``) until None."""
    try:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        import torch

        from benchtrail.worker.timing import take_samples, warm_up

        torch.set_num_threads(1)
        gen = torch.Generator().manual_seed(seed)
        a, b = (torch.randn(matrix_size, matrix_size, generator=gen) for _ in range(2))
        out = torch.empty(matrix_size, matrix_size)
        conn.send(
            (
                "ok",
                {
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                    "pid": os.getpid(),
                    "cpus": sorted(os.sched_getaffinity(0)),
                },
            )
        )
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return

    def workload(spin_s: float) -> Callable[[], None]:
        """One timed call: the matmul, then a busy-spin of ``spin_s`` seconds."""

        def call() -> None:
            torch.mm(a, b, out=out)
            end = time.perf_counter() + spin_s
            while time.perf_counter() < end:
                pass

        return call

    with contextlib.suppress(EOFError):  # EOFError: the parent is gone
        for msg in iter(conn.recv, None):
            try:
                if msg[0] == "pin":
                    os.sched_setaffinity(0, {msg[1]})
                    value = msg[1]
                elif msg[0] == "warmup":  # value: the calls made
                    value = warm_up(lambda: workload(0.0), msg[1])
                else:  # samples, or duet: each sample started when both workers reach ``barrier``
                    kind, count, iterations, spin_s, warm_calls = msg
                    fn = workload(spin_s)
                    for _ in range(warm_calls):  # untimed: refill the caches the other arm's worker used
                        fn()
                    meet = (lambda: barrier.wait(BARRIER_TIMEOUT_S)) if kind == "duet" else None
                    value = take_samples(fn, iterations, count, before_sample=meet)
                conn.send(("ok", value))
            except Exception:
                conn.send(("error", traceback.format_exc()))


class Worker:
    """One arm's long-lived worker process and its end of the Pipe; ``args`` as :func:`_worker_main`'s."""

    def __init__(self, ctx: Any, index: int, *args: Any) -> None:
        self.index = index
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_worker_main, args=(child, *args), daemon=True, name=f"benchtrail-detector-worker-{index}"
        )
        self._proc.start()
        child.close()

    def reply(self) -> Any:
        """The answer to the last request. Raises RuntimeError (with the worker's traceback) if it failed."""
        try:
            status, value = self._conn.recv()
        except EOFError:
            self._proc.join(5)
            raise RuntimeError(
                f"detector worker {self.index} exited with code {self._proc.exitcode}"
            ) from None
        if status != "ok":
            raise RuntimeError(f"detector worker {self.index} failed:\n{value}")
        return value

    def post(self, *msg: Any) -> None:
        """Send a request; :meth:`reply` reads its answer."""
        self._conn.send(msg)

    def request(self, *msg: Any) -> Any:
        self.post(*msg)
        return self.reply()

    def samples(self, count: int, iterations: int, spin_s: float, warm_calls: int = 0) -> list[float]:
        """``count`` samples, µs per call, of ``iterations`` calls each, after ``warm_calls`` untimed ones."""
        return list(self.request("samples", count, iterations, spin_s, warm_calls))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        end(self._proc)
        self._conn.close()


@contextlib.contextmanager
def arm_workers(
    matrix_size: int, seed: int, cpu: int | None
) -> Iterator[tuple[tuple[Worker, Worker], dict[str, Any]]]:
    """``(two workers with identical matrices and one duet barrier, worker 0's info)``; the info has
    ``start_method`` (``fork`` or ``spawn``, from ``BENCHTRAIL_WORKER_START``)."""
    from benchtrail.runner.server_pool import start_method

    method = start_method()
    # ``fork``: a forkserver with torch preloaded, launched like the run stage's workers; ``spawn``: a
    # fresh interpreter each.
    ctx = multiprocessing.get_context("spawn" if method == "spawn" else "forkserver")
    if method != "spawn":
        ctx.set_forkserver_preload(["torch", "benchtrail.worker.timing"])
    workers: list[Worker] = []
    try:
        barrier = ctx.Barrier(2)
        for i in range(2):
            workers.append(Worker(ctx, i, matrix_size, seed, cpu, barrier))
        info = [w.reply() for w in workers][0]  # noqa: RUF015 - every worker replies
        yield tuple(workers), {**info, "start_method": method}
    finally:
        for w in workers:
            w.close()


def duet(
    arms: tuple[Worker, Worker],
    cpus: tuple[int, int],
    count: int,
    iterations: int,
    spins: tuple[float, float],
) -> tuple[list[float], list[float]]:
    """Each arm's ``count`` duet samples (µs per call): arm k on ``cpus[k]`` with ``spins[k]`` s of extra
    work per call, sample j of each started together; RuntimeError as :meth:`Worker.reply`."""
    for arm, cpu in zip(arms, cpus):
        arm.request("pin", cpu)
    for arm, spin in zip(arms, spins):
        arm.post("duet", count, iterations, spin, 1)
    return list(arms[0].reply()), list(arms[1].reply())
