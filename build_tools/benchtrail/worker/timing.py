"""The measurement loop: warm-up, block calibration, then timed samples.

A sample is a block of iterations lasting at least ``min_sample_time_ms`` on ``time.perf_counter``,
divided by the block size (as ``timeit.Timer.autorange`` and pyperf calibrate).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchtrail.suite.definitions import ExecutionConfig

# The version of this measurement method; the protocol owns it (and its history) for the parent side.
from benchtrail.worker.protocol import METHOD_VERSION  # noqa: F401

#: What the loop times: a zero-argument call (a task's step; a no-op for the harness floor).
Step = Callable[[], object]
#: A zero-argument hook outside the timed calls: ``synchronize`` (drains a device's queue), ``before_sample``.
Hook = Callable[[], None]


@dataclass(frozen=True)
class Measurement:
    """Raw timing of one case, named as in the response; ``samples`` in µs per iteration."""

    samples: tuple[float, ...]
    iterations_per_sample: int
    warmup_iterations: int


def block(fn: Step, iterations: int, synchronize: Hook) -> float:
    """Seconds to run ``fn`` ``iterations`` times."""
    synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    synchronize()
    return time.perf_counter() - start


def warm_up(make: Callable[[], Step], warmup_s: float, synchronize: Hook = lambda: None) -> int:
    """Call ``make()``'s function at least twice and for ``warmup_s`` seconds; the calls made."""
    calls, start = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - start < warmup_s:
        block(make(), 1, synchronize)
        calls += 1
    return calls


def measure(fn: Step, policy: ExecutionConfig, synchronize: Hook, before_sample: Hook) -> Measurement:
    """Warm up, pick the block size, take ``policy.min_samples`` samples, ``before_sample`` untimed."""
    warmup_iterations = warm_up(lambda: fn, policy.warmup_time_ms / 1e3, synchronize)
    # Block sizes 1, 2, 5, 10, 20, 50, ... until one block lasts long enough (timeit.autorange),
    # with a 1.5x margin so that blocks stay above the minimum when the machine speeds up later.
    target_s = 1.5 * policy.min_sample_time_ms / 1e3
    for i in itertools.count():
        iterations = (1, 2, 5)[i % 3] * 10 ** (i // 3)
        warmup_iterations += iterations
        if block(fn, iterations, synchronize) >= target_s:
            break
    return Measurement(
        take_samples(fn, iterations, policy.min_samples, synchronize, before_sample),
        iterations,
        warmup_iterations,
    )


def measure_fresh(
    make: Callable[[], Step], policy: ExecutionConfig, synchronize: Hook, before_sample: Hook
) -> Measurement:
    """Time one call per sample, each made by ``make()`` outside the timed region (fresh inputs, as
    pytest-benchmark's ``pedantic(setup=...)``); no block calibration."""
    warmup_iterations = warm_up(make, policy.warmup_time_ms / 1e3, synchronize)
    samples = []
    for _ in range(policy.min_samples):
        fn = make()
        before_sample()
        samples.append(block(fn, 1, synchronize) * 1e6)
    return Measurement(tuple(samples), 1, warmup_iterations)


def floor_us(fn: Step, iterations: int) -> float:
    """The harness's per-call µs: median of 5 samples of ``fn`` (a no-op called as the case is)."""
    return statistics.median_high(take_samples(fn, iterations, 5))


def take_samples(
    fn: Step, iterations: int, count: int, synchronize: Hook = lambda: None, before_sample: Hook | None = None
) -> tuple[float, ...]:
    """``count`` samples of ``iterations`` calls each, µs per call; no warm-up, no calibration."""
    samples = []
    for _ in range(count):
        if before_sample is not None:
            before_sample()
        samples.append(block(fn, iterations, synchronize) / iterations * 1e6)
    return tuple(samples)
