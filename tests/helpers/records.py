"""Builders for results records used by several tests (real dataclasses, no mocks)."""

from __future__ import annotations

from benchtrail.results.schema import METRICS, BenchmarkRecord, ResultsFile
from benchtrail.results.summary import summarize


def spread(median: float, n: int = 10, step: float = 0.002) -> list[float]:
    """``n`` distinct samples evenly around ``median`` (mean and median exactly ``median``; ±1% for n = 10):
    steady samples with some spread, since all-equal samples are ``insufficient-samples``."""
    return [median * (1 + step * (i - (n - 1) / 2)) for i in range(n)]


def record(id: str = "rc1", samples=tuple(spread(100.0)), *, status: str = "ok", kind: str = "execution",
           metric: str = "latency", unit: str = "us", content_hash: str = "h1", name: str | None = None,
           direction: str | None = None, **details) -> BenchmarkRecord:
    samples = tuple(float(s) for s in samples)
    return BenchmarkRecord(
        id=id, name=name or f"{id}.inference-bs1.c2-standard-16", kind=kind, metric=metric, unit=unit,
        direction=direction or METRICS[metric].direction, device_name="c2-standard-16",
        module_name=f"{id}.cpu", compile_config="eager", task="inference",
        status=status, reason=None if status == "ok" else "boom", samples=samples, **summarize(samples),
        content_hash=content_hash, presets=("x86_64",), details=dict(details),
    )


def results(*records: BenchmarkRecord, commit: str = "a" * 40) -> ResultsFile:
    return ResultsFile(commit=commit, dirty=False, run={"run_id": "r1", "attempt": 1, "presets": ["x86_64"]},
                       environment={"torch_version": "2.13.0"}, benchmarks=tuple(records))


def apply_recheck(comparison, paired, *args, **kwargs) -> dict:
    """``benchtrail.runner.recheck.apply`` over comparison.json objects: ``comparison`` (an object, or a
    Comparison) and the paired rows (Row or row objects) in, the updated comparison.json object out."""
    from benchtrail.compare.document import Comparison, Row
    from benchtrail.runner.recheck import apply

    typed = {k: v if isinstance(v, Row) else Row.of(v) for k, v in paired.items()}
    given = comparison if isinstance(comparison, Comparison) else Comparison.of(comparison)
    return apply(given, typed, *args, **kwargs).document
