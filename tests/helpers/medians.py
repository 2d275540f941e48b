"""Synthetic per-commit medians for change-point tracking: a step change over fixed, seeded noise."""

import numpy as np

#: Run-to-run noise of the synthetic medians: ±0.4%, fixed (seeded), so every test is deterministic.
NOISE = 1 + 0.004 * np.random.default_rng(7).uniform(-1, 1, 64)


def step(n: int, at: int, ratio: float, base: float = 100.0) -> list[float]:
    return [base * (ratio if i >= at else 1.0) * NOISE[i] for i in range(n)]
