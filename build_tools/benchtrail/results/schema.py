"""The results schema: one ``BenchmarkRecord`` per series in a results file.

A results file (``results/<device>-<shard>.json``, or ``results/compilation-<device>.json``) is::

    {schema_version, commit, dirty, run: {...}, environment: {...}, benchmarks: [record, ...]}

Execution records are series ``<run config id>`` (metric ``latency``, unit µs per iteration);
compilation records are series ``<module id>-<metric>`` (one sample each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Version history of the results file:
#:   1 — first version.
SCHEMA_VERSION = 1

STATUSES = ("ok", "failed", "timeout", "oom", "mismatch", "skipped")
KINDS = ("execution", "compilation")
UNITS = ("us", "ms", "count", "bytes")


@dataclass(frozen=True)
class BenchmarkRecord:
    """One series' result in one run.

    Attributes:
        id: series id: the run config id, or ``<module id>-<metric>`` for compilation metrics.
        name: readable name, e.g. ``resnet18.inductor.inference-bs1.c2-standard-16``.
        kind: ``execution`` or ``compilation``.
        metric: ``latency`` for execution; ``compile_time_ms``, ``graph_count``, ``graph_breaks``
            for compilation.
        unit: ``us`` (µs per iteration), ``ms``, ``count`` or ``bytes``.
        device_name: the device spec's name (runner machine type).
        module_name, compile_config, task: what ran, for tables.
        status: one of ``STATUSES``; reason: why it is not ``ok`` (None when ok).
        samples: raw samples in ``unit`` (empty when the case did not run).
        n, mean, median, variance, stddev, min, max, iqr: summary of ``samples``
            (``stats.summary.summarize``); None when there are no samples.
        content_hash: sha256 over rendered flags, torch version and model source; a changed
            hash under an unchanged id makes the series "not comparable".
        presets: the presets that selected this series.
        details: anything else recorded (phase times in ms, memory in bytes, iterations per
            sample, graph-break reasons, correctness).
    """

    id: str
    name: str
    kind: str
    metric: str
    unit: str
    device_name: str
    module_name: str
    compile_config: str
    task: str | None
    status: str
    reason: str | None
    samples: tuple[float, ...]
    n: int
    mean: float | None
    median: float | None
    variance: float | None
    stddev: float | None
    min: float | None
    max: float | None
    iqr: float | None
    content_hash: str
    presets: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultsFile:
    """A results file's content (see module docstring)."""

    commit: str
    dirty: bool
    run: dict[str, Any]
    environment: dict[str, Any]
    benchmarks: tuple[BenchmarkRecord, ...]
