"""GPU timing: CUDA events for device time, the host clock (synchronised) for end-to-end latency.

A sample is one event pair around ``k`` launches (or one CUDA graph replay of them), ``k`` making a pair
last ``MIN_PAIR_US``; optional L2 flush as ``triton.testing.do_bench``. The method: docs/gpu.md.
The planning functions are pure; ``measure_cuda`` needs a GPU.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass

from benchtrail.suite.definitions import ExecutionConfig
from benchtrail.worker.timing import Hook, Step, block

#: Event pairs shorter than this get several launches (µs).
MIN_PAIR_US = 50.0
#: Warm-up ends when the last ``STEADY_WINDOW`` iteration times lie within ``STEADY_TOLERANCE`` of
#: their median (or at ``MAX_WARMUP_FACTOR`` times the policy's warm-up time).
STEADY_WINDOW = 5
STEADY_TOLERANCE = 0.05
MAX_WARMUP_FACTOR = 10
#: The time a benchmark reports on a GPU: device time between CUDA events, or host wall time.
REPORTED_TIMES = ("gpu", "wall")


@dataclass(frozen=True)
class TimingPlan:
    """How a case is timed: ``method`` ``perf_counter`` (CPU), ``cuda-events`` or ``cuda-graph``;
    ``launches`` per sample (1 on CPU); ``reported`` ``gpu`` or ``wall``."""

    method: str
    launches: int
    reported: str
    flush_l2: bool


def launches_per_sample(per_iteration_us: float) -> int:
    """Launches per event pair so that one pair lasts at least ``MIN_PAIR_US`` (at least 1).

    Raises:
        ValueError: ``per_iteration_us`` is not a positive finite number.
    """
    if not (per_iteration_us > 0 and math.isfinite(per_iteration_us)):
        raise ValueError(f"per-iteration time must be positive and finite, got {per_iteration_us!r} µs")
    return max(1, math.ceil(MIN_PAIR_US / per_iteration_us))


def plan_timing(architecture: str, per_iteration_us: float | None, policy: ExecutionConfig) -> TimingPlan:
    """The timing plan on ``architecture`` (``cpu`` or ``cuda``); ``per_iteration_us``: one warm iteration.

    Raises:
        ValueError: ``policy.reported_time`` is not one of ``REPORTED_TIMES``, or a CUDA plan has no
            valid ``per_iteration_us``.
    """
    if policy.reported_time not in REPORTED_TIMES:
        raise ValueError(
            f"execution config {policy.name}: reported_time {policy.reported_time!r} is not "
            f"one of {', '.join(REPORTED_TIMES)}"
        )
    if architecture != "cuda":
        return TimingPlan("perf_counter", 1, "wall", False)
    launches = launches_per_sample(per_iteration_us)  # type: ignore[arg-type]
    graph = launches > 1 and policy.cuda_graphs
    return TimingPlan(
        "cuda-graph" if graph else "cuda-events", launches, policy.reported_time, policy.flush_l2
    )


def is_steady(times: list[float]) -> bool:
    """Whether the last ``STEADY_WINDOW`` times lie within ``STEADY_TOLERANCE`` (relative) of their median."""
    if len(times) < STEADY_WINDOW:
        return False
    last = times[-STEADY_WINDOW:]
    median = statistics.median_high(last)
    return median > 0 and all(abs(t - median) <= STEADY_TOLERANCE * median for t in last)


def parse_oom_bytes(message: str) -> int | None:
    """The bytes an OOM error asked for, from PyTorch's ``Tried to allocate 2.00 GiB``; else None."""
    import re

    if match := re.search(r"Tried to allocate ([0-9.]+) ?(GiB|MiB|KiB|bytes|B)\b", message):
        scale = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "bytes": 1, "B": 1}[match[2]]
        return round(float(match[1]) * scale)
    return None


@dataclass(frozen=True)
class CudaMeasurement:
    """Samples of one case on a GPU, µs per iteration (device and synchronised host time); ``memory``:
    peak ``max_memory_allocated_bytes`` (less the L2 flush buffer) and ``max_memory_reserved_bytes``."""

    gpu_samples_us: tuple[float, ...]
    wall_samples_us: tuple[float, ...]
    timing: TimingPlan
    warmup_iterations: int
    memory: dict[str, int]

    @property
    def samples(self) -> tuple[float, ...]:
        """The ``timing.reported`` samples."""
        return self.gpu_samples_us if self.timing.reported == "gpu" else self.wall_samples_us


def _warm_up(fn: Step, policy: ExecutionConfig, synchronize: Hook) -> tuple[float, int]:
    """Run ``fn`` until its synchronised time is steady: (warm per-iteration µs, iterations)."""
    times = []
    start = time.perf_counter()
    budget = policy.warmup_time_ms / 1e3
    while True:
        times.append(block(fn, 1, synchronize) * 1e6)
        elapsed = time.perf_counter() - start
        if (elapsed >= budget and is_steady(times)) or elapsed >= MAX_WARMUP_FACTOR * budget:
            break
    return statistics.median_high(times[-STEADY_WINDOW:]), len(times)


def _capture(fn: Step, launches: int) -> Step:  # pragma: no cover - GPU
    """The ``replay`` of a CUDA graph of ``launches`` calls, warmed up on a side stream (torch's rule)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    return graph.replay


def measure_cuda(fn: Step, policy: ExecutionConfig) -> CudaMeasurement:  # pragma: no cover - GPU
    """Warm ``fn`` up until steady, plan the timing, then take ``policy.min_samples`` samples."""
    import torch

    synchronize = torch.cuda.synchronize
    per_iteration_us, warmup = _warm_up(fn, policy, synchronize)
    plan = plan_timing("cuda", per_iteration_us, policy)
    launches = plan.launches

    def run() -> None:  # the launches between events, when no CUDA graph replays them
        for _ in range(launches):
            fn()

    if plan.method == "cuda-graph":
        try:
            run = _capture(fn, launches)
        except Exception:  # not capturable (host sync, CPU tensors): time the launches between events
            torch.cuda.synchronize()
            plan = dataclasses.replace(plan, method="cuda-events")
    flush_bytes = 0  # the L2 flush buffer's, when the plan flushes
    if plan.flush_l2:
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        flush_bytes = max(2 * l2, 1 << 20)
        buffer = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    torch.cuda.reset_peak_memory_stats()
    gpu, wall = [], []
    for _ in range(policy.min_samples):
        if flush_bytes:
            buffer.zero_()
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        synchronize()
        t0 = time.perf_counter()
        start.record()
        run()
        end.record()
        synchronize()
        wall.append((time.perf_counter() - t0) * 1e6 / launches)
        gpu.append(start.elapsed_time(end) * 1e3 / launches)  # elapsed_time is in ms
    memory = {
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated() - flush_bytes,
        "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(),
    }
    return CudaMeasurement(tuple(gpu), tuple(wall), plan, warmup, memory)
