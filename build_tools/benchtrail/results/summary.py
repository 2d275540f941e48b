"""Summary statistics of one case's raw samples."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import numpy as np


class Summary(TypedDict):
    """The summary fields of a ``BenchmarkRecord``."""

    n: int
    mean: float | None
    median: float | None
    variance: float | None
    stddev: float | None
    min: float | None
    max: float | None
    iqr: float | None


def summarize(samples: Sequence[float]) -> Summary:
    """In the samples' unit (variance in unit²). Variance and stddev use ddof=1, None below 2 samples; all
    but n None for no samples. IQR: numpy's linearly interpolated percentile(75) - percentile(25)."""
    x = np.asarray(samples, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return {
            "n": 0,
            "mean": None,
            "median": None,
            "variance": None,
            "stddev": None,
            "min": None,
            "max": None,
            "iqr": None,
        }
    q25, q50, q75 = np.percentile(x, [25, 50, 75])
    variance = float(np.var(x, ddof=1)) if n > 1 else None
    return {
        "n": n,
        "mean": float(x.mean()),
        "median": float(q50),
        "variance": variance,
        "stddev": float(np.sqrt(variance)) if variance is not None else None,
        "min": float(x.min()),
        "max": float(x.max()),
        "iqr": float(q75 - q25),
    }
