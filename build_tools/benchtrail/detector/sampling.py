"""Collection of ``benchtrail evaluate-detector``'s samples, mode by mode, from its two workers."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchtrail.detector.alert_rules import ROUND_SAMPLES
from benchtrail.detector.arms import Worker, duet


@dataclass(frozen=True)
class Sampling:
    """How the modes sample: ``samples`` per side (a sequential mode's least: what the peers see),
    ``max_samples`` a sequential mode's most, each ``iterations`` calls of about ``us_per_call`` µs; ``cpu``
    the stored and paired modes' one CPU (None: not pinned)."""

    samples: int
    max_samples: int
    cpu: int | None
    duet_cpus: tuple[int, int] | None
    iterations: int
    us_per_call: float
    threshold_pct: float


@dataclass
class Plan:
    """Comparisons of one mode, by index: δ (percent), base worker (0 or 1), samples (µs per call, rounded
    as stored); ``order``: the permutation of indices in which they are collected."""

    deltas: np.ndarray
    base_worker: np.ndarray
    order: np.ndarray
    base: list[list[float]]
    head: list[list[float]]
    #: paired mode: the side of each sample in the order taken, e.g. "bhhb..."; stored and duet: None.
    slots: list[str | None]
    #: sequential modes: wall seconds of each round drawn.
    walls: list[list[float] | None]

    def spin_s(self, i: int, us_per_call: float) -> float:
        """Seconds of extra work per head call of comparison ``i``."""
        return self.deltas[i] / 100 * us_per_call / 1e6


def plan_of(aa: int, ab: int, deltas_pct: Sequence[float], rng: np.random.Generator) -> Plan:
    """``aa`` A/A comparisons and ``ab`` per δ, base workers and order drawn from ``rng``."""
    deltas = np.concatenate([np.zeros(aa), np.repeat(deltas_pct, ab)])
    n = deltas.size
    return Plan(
        deltas,
        rng.integers(0, 2, n),
        rng.permutation(n),
        [[] for _ in range(n)],
        [[] for _ in range(n)],
        [None] * n,
        [None] * n,
    )


def collect(
    mode: str, workers: Sequence[Worker], plan: Plan, config: Sampling, rng: np.random.Generator
) -> None:
    """Fill ``plan`` with ``mode``'s samples.

    *stored-baseline*: every base set, then every head set. The sequential modes: rounds of
    ``ROUND_SAMPLES`` pairs while benchtrail's sequential comparison is undecided (up to ``max_samples``),
    at least ``samples`` for the peers. *paired*: base and head back to back on one CPU, in random order,
    each after an untimed call (the first call after a switch measured 2.5% slower). *duet*: both workers
    at once, swapping CPUs every round.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from benchtrail.progress import console

    if mode != "duet" and config.cpu is not None:  # back on the shared CPU (a duet moved them)
        for w in workers:
            w.request("pin", config.cpu)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    task = progress.add_task(mode, total=(2 if mode == "stored-baseline" else 1) * plan.order.size)
    with progress:
        if mode == "stored-baseline":  # every base set, then every head set (side 1: the other worker)
            for side, sets in enumerate((plan.base, plan.head)):
                for i in plan.order:
                    spin_s = plan.spin_s(i, config.us_per_call) if side else 0.0
                    worker = workers[plan.base_worker[i] ^ side]
                    sets[i] = [round(x, 4) for x in worker.samples(config.samples, config.iterations, spin_s)]
                    progress.advance(task)
            return
        for i in plan.order:
            _sequential_comparison(mode, workers, plan, int(i), config, rng)
            progress.advance(task)


def _sequential_comparison(
    mode: str, workers: Sequence[Worker], plan: Plan, i: int, config: Sampling, rng: np.random.Generator
) -> None:
    """Comparison ``i`` of a sequential mode, into ``plan``."""
    from benchtrail.runner.adaptive import sample_until_settled

    spin = (0.0, plan.spin_s(i, config.us_per_call))
    bw = int(plan.base_worker[i])
    arms = (workers[bw], workers[1 - bw])
    walls: list[float] = []
    taken: list[str] = []

    def draw() -> tuple[list[float], list[float]]:
        t = time.perf_counter()
        if mode == "duet":
            cpus = config.duet_cpus if (len(walls) + bw) % 2 == 0 else config.duet_cpus[::-1]
            sides = duet(arms, cpus, ROUND_SAMPLES, config.iterations, spin)
        else:
            sides = ([], [])
            for _ in range(ROUND_SAMPLES):  # one pair: base and head back to back, in a random order
                for side in rng.permutation(2):
                    sides[side].extend(arms[side].samples(1, config.iterations, spin[side], warm_calls=1))
                    taken.append("bh"[side])
        walls.append(time.perf_counter() - t)
        # Rounded as stored, so that judging the stored samples again decides exactly as here.
        b, h = ([round(x, 4) for x in side] for side in sides)
        plan.base[i].extend(b)
        plan.head[i].extend(h)
        return b, h

    sample_until_settled(
        draw,
        threshold_pct=config.threshold_pct,
        lower_is_better=True,
        paired=True,
        sequential=True,
        max_rounds=config.max_samples // ROUND_SAMPLES,
    )
    while len(walls) < config.samples // ROUND_SAMPLES:  # the peers' rules see `samples` per side
        draw()
    plan.walls[i], plan.slots[i] = walls, "".join(taken) if mode == "paired" else None
