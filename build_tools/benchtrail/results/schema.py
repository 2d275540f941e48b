"""The results schema: one ``BenchmarkRecord`` per series in a results file.

A results file (``results/<device>-<shard>.json``, or ``results/compilation-<device>.json``) is::

    {schema_version, commit, dirty, run: {...}, environment: {...}, benchmarks: [record, ...]}

Execution records are series ``<run config id>`` (metric ``latency``, unit µs per iteration);
compilation records are series ``<module id>-<metric>`` (one sample each). Every metric has a direction
(``METRICS``), recorded on each record; a thresholds rule can only narrow it (``benchtrail.compare.rules``).
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
    """What a metric measures: its kind, unit and which way is better; for a compilation metric, the compile
    modes whose modules the compile stage records it for (none: only files of earlier versions hold it)."""

    kind: str
    unit: str
    direction: str
    modes: tuple[CompileMode, ...] = ()


_COMPILED = tuple(m for m in CompileMode if m is not CompileMode.EAGER)
_KERNELS = (*INDUCTOR_MODES, CompileMode.AOT_INDUCTOR)  # the modes whose kernels Inductor generates
#: Every metric benchtrail knows, with its kind, unit and direction (docs/formats.md, "Metrics"). A
#: metric not listed here has no known direction: a results file holding it is refused, and a thresholds
#: rule never supplies one (a series is never judged lower-is-better by default). The compile stage records
#: its compilation series in this order (``benchtrail.runner.compile_modules.compile_records``).
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
    """What names one benchmark series across runs: the one type every per-series row builds on.

    ``id`` identifies the series (the run config id, or ``<module id>-<metric>``; unique within a
    run, the same in every run that measures it); ``name`` is its readable name; ``kind``, ``metric``,
    ``unit`` (one of ``UNITS``) and ``device_name`` (the device spec's name) describe it. A subclass
    adds its own fields after these, so ``dataclasses.asdict`` stays flat.
    """

    id: str
    name: str
    kind: str
    metric: str
    unit: str
    device_name: str

    @property
    def key(self) -> SeriesKey:
        """Just the key fields (a ``SeriesKey``, whatever subclass ``self`` is)."""
        return SeriesKey(self.id, self.name, self.kind, self.metric, self.unit, self.device_name)


@dataclass(frozen=True)
class BenchmarkRecord:
    """One series' result in one run.

    Attributes:
        id: series id: the run config id, or ``<module id>-<metric>`` for compilation metrics.
        name: readable name, e.g. ``resnet18.inductor.inference-bs1.c2-standard-16``.
        kind: ``execution`` or ``compilation``.
        metric: ``latency`` for execution; ``compile_time_ms``, ``graph_count``, ``graph_breaks``
            for compilation.
        unit: one of ``UNITS``: ``us`` (µs per iteration), ``ms``, ``count``, ``bytes``, ``per_s``,
            ``ratio``.
        direction: ``lower-is-better`` or ``higher-is-better``; the metric's own (``METRICS``).
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
        """A record of a ``metric`` series: kind, unit and direction from ``METRICS``, the summary from
        ``samples``."""
        from benchtrail.results.summary import summarize

        kind, unit, direction, _ = METRICS[metric]
        return cls(metric=metric, kind=kind, unit=unit, direction=direction, samples=samples,
                   **summarize(samples), **fields)


@dataclass(frozen=True)
class ResultsFile:
    """A results file's content (see module docstring)."""

    commit: str
    dirty: bool
    run: dict[str, Any]
    environment: dict[str, Any]
    benchmarks: tuple[BenchmarkRecord, ...]
