"""Collection of ``benchtrail evaluate-detector``'s samples, mode by mode (:mod:`benchtrail.detector.evaluate`).

A :class:`Plan` holds one mode's comparisons (δ, base worker, collection order) and receives their
samples; :func:`collect_stored` and :func:`collect_sequential` fill it from the two workers of
:mod:`benchtrail.detector.workers`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from benchtrail.detector.rules import ROUND_SAMPLES
from benchtrail.detector.workers import Worker


@dataclass(frozen=True)
class Sampling:
    """How a sequential mode samples: ``samples`` per side at least (what the peers see),
    ``max_samples`` at most; ``cpu`` the one CPU of paired mode (None: not pinned), ``duet_cpus`` the
    duet's two."""

    samples: int
    max_samples: int
    cpu: int | None
    duet_cpus: tuple[int, int] | None


@dataclass
class Plan:
    """Comparisons of one mode, by index: δ (percent), base worker (0 or 1), samples (µs per call) and
    slot order; ``order`` is the permutation of indices in which they are collected."""

    deltas: np.ndarray
    base_worker: np.ndarray
    order: np.ndarray
    base: list[list[float]] = field(default_factory=list)
    head: list[list[float]] = field(default_factory=list)
    #: paired mode: the side of each sample in the order taken, e.g. "bhhb..."; stored and duet: None.
    slots: list[str | None] = field(default_factory=list)
    #: sequential modes: wall seconds of each round drawn; rounds benchtrail's comparison used.
    walls: list[list[float] | None] = field(default_factory=list)
    used_rounds: list[int | None] = field(default_factory=list)


def plan_of(aa: int, ab: int, deltas_pct: Sequence[float], rng: np.random.Generator) -> Plan:
    """``aa`` A/A comparisons and ``ab`` per δ of ``deltas_pct``, base workers and order drawn from ``rng``."""
    deltas = np.array([0.0] * aa + [d for d in deltas_pct for _ in range(ab)])
    n = deltas.size
    return Plan(deltas, rng.integers(0, 2, n), rng.permutation(n), [[] for _ in range(n)], [[] for _ in range(n)],
                 [None] * n, [None] * n, [None] * n)


def _progress(description: str, total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from benchtrail.progress import console

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=console)
    return progress, progress.add_task(description, total=total)


def collect_stored(workers: Sequence[Worker], plan: Plan, samples: int, iterations: int, us_per_call: float) -> None:
    """Every base set first (an earlier run's baseline), then every head set."""
    progress, task = _progress("stored-baseline", 2 * plan.order.size)
    with progress:
        for i in plan.order:
            plan.base[i] = workers[plan.base_worker[i]].samples(samples, iterations, 0.0)
            progress.advance(task)
        for i in plan.order:
            spin_s = plan.deltas[i] / 100 * us_per_call / 1e6
            plan.head[i] = workers[1 - plan.base_worker[i]].samples(samples, iterations, spin_s)
            progress.advance(task)


def pin_all(workers: Sequence[Worker], cpu: int | None) -> None:
    """Pin both workers back to the shared CPU (a duet moved them)."""
    if cpu is not None:
        for w in workers:
            w.pin(cpu)


def collect_sequential(mode: str, workers: Sequence[Worker], plan: Plan, config: Sampling, iterations: int,
                        us_per_call: float, threshold_pct: float, rng: np.random.Generator) -> None:
    """Per comparison, rounds of ``ROUND_SAMPLES`` pairs while benchtrail's sequential comparison is
    undecided (``sample_until_settled(paired=True, sequential=True)``, up to ``max_samples`` per side),
    and at least ``samples`` per side for the peers.

    *paired*: a pair is a base and a head sample back to back on the one shared CPU, in a random order
    per pair, each after one untimed call in its worker (switching workers leaves the caches to the
    other process; the first call after a switch was measured about 2.5% slower). *duet*: a round is
    :func:`benchtrail.detector.workers.duet`, both workers at once on their own CPUs, which they swap
    every round so that a difference between the CPUs cancels.
    """
    pin_all(workers, None if mode == "duet" else config.cpu)
    progress, task = _progress(mode, plan.order.size)
    with progress:
        for i in plan.order:
            _sequential_comparison(mode, workers, plan, int(i), config, iterations, us_per_call, threshold_pct, rng)
            progress.advance(task)


def _sequential_comparison(mode: str, workers: Sequence[Worker], plan: Plan, i: int, config: Sampling,
                           iterations: int, us_per_call: float, threshold_pct: float,
                           rng: np.random.Generator) -> None:
    """Comparison ``i`` of a sequential mode (:func:`collect_sequential`), into ``plan``."""
    from benchtrail.detector.workers import duet
    from benchtrail.runner.adaptive import sample_until_settled

    spin = (0.0, plan.deltas[i] / 100 * us_per_call / 1e6)
    bw = int(plan.base_worker[i])
    arms = (workers[bw], workers[1 - bw])
    walls: list[float] = []
    taken: list[str] = []

    def draw() -> tuple[list[float], list[float]]:
        t = time.perf_counter()
        if mode == "duet":
            cpus, r = config.duet_cpus, len(walls)
            sides = duet(arms, (cpus[(r + bw) % 2], cpus[(r + bw + 1) % 2]), ROUND_SAMPLES, iterations, spin)
        else:
            sides = ([], [])
            for _ in range(ROUND_SAMPLES):  # one pair: base and head back to back, in a random order
                for side in rng.permutation(2):
                    sides[side].extend(arms[side].samples(1, iterations, spin[side], warm_calls=1))
                    taken.append("bh"[side])
        walls.append(time.perf_counter() - t)
        # Rounded as stored, so that judging the stored samples again decides exactly as here.
        b, h = ([round(x, 4) for x in side] for side in sides)
        plan.base[i].extend(b)
        plan.head[i].extend(h)
        return b, h

    settled = sample_until_settled(draw, threshold_pct=threshold_pct, lower_is_better=True, paired=True,
                                   sequential=True, max_rounds=config.max_samples // ROUND_SAMPLES)
    while len(walls) < config.samples // ROUND_SAMPLES:  # the peers' rules see `samples` per side
        draw()
    plan.walls[i], plan.used_rounds[i] = walls, settled.rounds
    plan.slots[i] = "".join(taken) if mode == "paired" else None
