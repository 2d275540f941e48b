"""Synthetic instruction counts of base and head, per worker process and repeat, for the detector."""

import numpy as np

BASE = 13_373_294.0


def synthetic(processes: int = 6, repeats: int = 8, deltas=(0.25, 1.0), jitter: float = 300.0):
    """``counts[process][variant][repeat]``: each process a base a few hundred instructions off the others
    (as measured: 0.003% apart), repeats alternately ``jitter`` instructions apart (any 5 of 8 hold both
    values, so every side's range is ``jitter``), head δ = base × (1 + δ%)."""
    out = []
    for p in range(processes):
        base = BASE + 100.0 * p
        wobble = jitter * (np.arange(repeats) % 2)
        out.append([(base * (1 + d / 100) + wobble).tolist() for d in (0.0, *deltas)])
    return out
