"""Summary statistics of one case's raw samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summarize(samples: Sequence[float]) -> dict[str, float | int | None]:
    """Return n, mean, median, variance, stddev, min, max and IQR of ``samples``.

    Args:
        samples: raw samples, one value per sample (for latency: µs per iteration).

    Returns:
        A dict in the samples' unit (variance in unit²). Variance and stddev use ddof=1 and are
        None for fewer than 2 samples; everything but n is None for no samples. IQR is
        ``percentile(75) - percentile(25)`` with numpy's default linear interpolation.
    """
    x = np.asarray(samples, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return {"n": 0, **dict.fromkeys(("mean", "median", "variance", "stddev", "min", "max", "iqr"))}
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
