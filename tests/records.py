"""Builders for results records used by several tests (real dataclasses, no mocks)."""

from __future__ import annotations

from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.stats.summary import summarize


def record(id: str = "rc1", samples=(100.0,) * 10, *, status: str = "ok", kind: str = "execution",
           metric: str = "latency", unit: str = "us", content_hash: str = "h1", name: str | None = None,
           **details) -> BenchmarkRecord:
    samples = tuple(float(s) for s in samples)
    return BenchmarkRecord(
        id=id, name=name or f"{id}.inference-bs1.c2-standard-16", kind=kind, metric=metric, unit=unit,
        device_name="c2-standard-16", module_name=f"{id}.cpu", compile_config="eager", task="inference",
        status=status, reason=None if status == "ok" else "boom", samples=samples, **summarize(samples),
        content_hash=content_hash, presets=("x86_64",), details=dict(details),
    )


def results(*records: BenchmarkRecord, commit: str = "a" * 40) -> ResultsFile:
    return ResultsFile(commit=commit, dirty=False, run={"run_id": "r1", "attempt": 1, "presets": ["x86_64"]},
                       environment={"torch_version": "2.13.0"}, benchmarks=tuple(records))
