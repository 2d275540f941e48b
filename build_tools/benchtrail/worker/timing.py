"""The measurement loop: warm-up, block calibration, then timed samples.

Each sample is a block of iterations that lasts at least ``min_sample_time_ms``, timed with
``time.perf_counter`` and divided by the block size, so timer resolution and call overhead
stay small against the block (the approach of ``timeit.Timer.autorange`` and pyperf's
calibration). On CUDA the caller passes ``synchronize`` so queued kernels finish inside the block.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from benchtrail.suite.definitions import ExecutionConfig

#: Version of the measurement method: this loop, the worker's timing and the sample units. Results
#: record it (``environment.method_version``; files without it are version 1) and it is part of the
#: baseline key (``benchtrail.results.baseline_key``): bump it when a change makes new samples incomparable
#: with old ones, so no run is compared with a baseline measured the old way.
#:   1 — one spawned process per case and process index.
#:   2 — workers forked from a pre-imported server (``benchtrail.worker.server``); the cases of one
#:       module share each process, in a shuffled order, from the compile stage's Inductor cache;
#:       cold compile samples no longer include importing Dynamo and Inductor (issue 18).
#:   3 — workers run with fixed glibc malloc thresholds (``benchtrail.runner.workers.MALLOC_TUNABLES``): no
#:       allocation history can put a process in a page-faulting mode (issue 38).
#:   4 — eager function benchmarks' value tasks time the user's call on pre-bound arguments, without the
#:       module wrapper (a floor of ~5 µs to ~0.1 µs); torch's thread count is set before each sample; a
#:       model that declares ``mutates_inputs`` is timed one call per sample on fresh inputs (issue 40).
METHOD_VERSION = 4


@dataclass(frozen=True)
class Measurement:
    """Raw timing of one case.

    Attributes:
        samples_us: one value per sample, µs per iteration.
        iterations_per_sample: block size used for every sample.
        warmup_iterations: iterations run before the first sample.
    """

    samples_us: tuple[float, ...]
    iterations_per_sample: int
    warmup_iterations: int


def _block(fn: Callable[[], object], iterations: int, synchronize: Callable[[], None]) -> float:
    """Run ``fn`` ``iterations`` times; return elapsed seconds."""
    synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    synchronize()
    return time.perf_counter() - start


def measure(
    fn: Callable[[], object],
    policy: ExecutionConfig,
    synchronize: Callable[[], None] = lambda: None,
    before_sample: Callable[[], None] | None = None,
) -> Measurement:
    """Warm ``fn`` up, pick the block size, and take ``policy.min_samples`` samples (``before_sample``, when
    given, is called before each, outside its timing: a duet worker's barrier)."""
    warmup_s = policy.warmup_time_ms / 1e3
    warmup_iterations = 0
    start = time.perf_counter()
    while warmup_iterations < 2 or time.perf_counter() - start < warmup_s:
        _block(fn, 1, synchronize)
        warmup_iterations += 1

    # Block sizes 1, 2, 5, 10, 20, 50, ... until one block lasts long enough (timeit.autorange),
    # with a 1.5x margin so that blocks stay above the minimum when the machine speeds up later.
    target_s = 1.5 * policy.min_sample_time_ms / 1e3
    iterations = 1
    i = 0
    while True:
        elapsed = _block(fn, iterations, synchronize)
        warmup_iterations += iterations
        if elapsed >= target_s:
            break
        i += 1
        iterations = (1, 2, 5)[i % 3] * 10 ** (i // 3)

    return Measurement(take_samples(fn, iterations, policy.min_samples, synchronize, before_sample), iterations,
                       warmup_iterations)


def measure_fresh(make: Callable[[], Callable[[], object]], policy: ExecutionConfig,
                  synchronize: Callable[[], None] = lambda: None,
                  before_sample: Callable[[], None] | None = None) -> Measurement:
    """Time one call per sample, each call ``make()`` made outside the timed region (on fresh inputs: a
    model that changes its inputs, as pytest-benchmark's ``pedantic(setup=...)`` and asv's ``number = 1``);
    warm-up as :func:`measure`'s, no block calibration."""
    warmup_s, warmup_iterations, start = policy.warmup_time_ms / 1e3, 0, time.perf_counter()
    while warmup_iterations < 2 or time.perf_counter() - start < warmup_s:
        _block(make(), 1, synchronize)
        warmup_iterations += 1
    samples = []
    for _ in range(policy.min_samples):
        fn = make()
        if before_sample is not None:
            before_sample()
        samples.append(_block(fn, 1, synchronize) * 1e6)
    return Measurement(tuple(samples), 1, warmup_iterations)


def floor_us(fn: Callable[[], object], iterations: int, count: int = 5) -> float:
    """The harness's per-call time in µs: the median of ``count`` samples of ``fn`` (a call of a no-op made
    as the case's call is) in blocks of ``iterations``, the case's block size."""
    samples = sorted(take_samples(fn, iterations, count))
    return samples[len(samples) // 2]


def take_samples(fn: Callable[[], object], iterations: int, count: int,
                 synchronize: Callable[[], None] = lambda: None,
                 before_sample: Callable[[], None] | None = None) -> tuple[float, ...]:
    """``count`` samples of ``fn`` with a fixed block of ``iterations`` calls each, in µs per call.

    No warm-up and no calibration: callers that fix the sample duration (``evaluate-detector``)
    or add samples to a calibrated case call this directly.
    """
    samples = []
    for _ in range(count):
        if before_sample is not None:
            before_sample()
        samples.append(_block(fn, iterations, synchronize) / iterations * 1e6)
    return tuple(samples)
