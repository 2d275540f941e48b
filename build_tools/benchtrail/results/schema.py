"""The results schema: one ``BenchmarkRecord`` per series in a results file.

A results file (``results/<device>-<shard>.json``, or ``results/compilation-<device>.json``) is::

    {schema_version, commit, dirty, run: {...}, environment: {...}, benchmarks: [record, ...]}

Execution series are ``<run config id>`` (``latency``: µs per iteration); compilation series are
``<module id>-<metric>`` (one sample each). Each record carries its metric's direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from benchtrail.suite.definitions import CompileMode
from benchtrail.suite.entry_points import INDUCTOR_MODES

#: Version history of the results file:
#:   1 — first version.
#:   2 — each record gains ``direction`` (``DIRECTIONS``); version 1 files are read with the direction of
#:       their metric (``METRICS``).
SCHEMA_VERSION = 2

STATUSES = ("ok", "failed", "timeout", "oom", "mismatch", "skipped")
KINDS = ("execution", "compilation")
#: ``us`` µs per iteration, ``per_s`` items per second, ``ratio`` unitless (1.0 = as fast).
UNITS = ("us", "ms", "count", "bytes", "per_s", "ratio")
DIRECTIONS = ("lower-is-better", "higher-is-better")


class Metric(NamedTuple):
    """``modes``: the compile modes a compilation metric is recorded for (none: only older files hold it)."""

    kind: str
    unit: str
    direction: str
    modes: tuple[CompileMode, ...] = ()


_COMPILED = tuple(m for m in CompileMode if m is not CompileMode.EAGER)
_KERNELS = (*INDUCTOR_MODES, CompileMode.AOT_INDUCTOR)  # the modes whose kernels Inductor generates
#: Every metric benchtrail knows (docs/formats.md, "Metrics"). A results file holding another is refused: it
#: has no known direction. The compile stage records its compilation series in this order.
METRICS: dict[str, Metric] = {
    "latency": Metric("execution", "us", "lower-is-better"),
    "throughput": Metric("execution", "per_s", "higher-is-better"),
    "speedup": Metric("execution", "ratio", "higher-is-better"),
    "instructions": Metric("execution", "count", "lower-is-better"),  # per call, under callgrind (issue 44)
    "compile_time_cold_ms": Metric("compilation", "ms", "lower-is-better", _COMPILED),
    "compile_time_warm_ms": Metric("compilation", "ms", "lower-is-better", _COMPILED),
    "compile_time_ms": Metric("compilation", "ms", "lower-is-better"),
    "graph_count": Metric("compilation", "count", "lower-is-better", _COMPILED),
    "graph_breaks": Metric("compilation", "count", "lower-is-better", _COMPILED),
    "recompiles": Metric("compilation", "count", "lower-is-better", INDUCTOR_MODES),
    "kernel_count": Metric("compilation", "count", "lower-is-better", _KERNELS),
    "artifact_bytes": Metric("compilation", "bytes", "lower-is-better", _COMPILED),
    "peak_rss_bytes": Metric("compilation", "bytes", "lower-is-better", _COMPILED),
}


@dataclass(frozen=True)
class SeriesKey:
    """What names one series across runs; ``id`` is unique within a run and the same in every run. Every
    per-series row subclasses it, adding fields after these so ``dataclasses.asdict`` stays flat."""

    id: str
    name: str
    kind: str
    metric: str
    unit: str
    device_name: str

    @property
    def key(self) -> SeriesKey:
        """Just the key fields, whatever subclass ``self`` is."""
        return SeriesKey(self.id, self.name, self.kind, self.metric, self.unit, self.device_name)


@dataclass(frozen=True)
class BenchmarkRecord:
    """One series' result in one run.

    Attributes:
        name: e.g. ``resnet18.inductor.inference-bs1.c2-standard-16``.
        samples: raw, in ``unit`` (``us``: µs per iteration); empty when the case did not run.
        n, mean, median, variance, stddev, min, max, iqr: :func:`summarize` of ``samples``.
        content_hash: sha256 over rendered flags, torch version and model source; changed under an
            unchanged id, the series is "not comparable".
        details: anything else (phase times in ms, memory in bytes, graph-break reasons, correctness).
    """

    id: str
    name: str
    kind: str
    metric: str
    unit: str
    direction: str
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

    key = SeriesKey.key  # the record's series (:class:`SeriesKey`)

    @classmethod
    def of(cls, metric: str, samples: tuple[float, ...], **fields: Any) -> BenchmarkRecord:
        """Kind, unit and direction from ``METRICS``, the summary from ``samples``."""
        from benchtrail.results.summary import summarize

        kind, unit, direction, _ = METRICS[metric]
        return cls(
            metric=metric,
            kind=kind,
            unit=unit,
            direction=direction,
            samples=samples,
            **summarize(samples),
            **fields,
        )


@dataclass(frozen=True)
class ResultsFile:
    """A results file's content."""

    commit: str
    dirty: bool
    run: dict[str, Any]
    environment: dict[str, Any]
    benchmarks: tuple[BenchmarkRecord, ...]
