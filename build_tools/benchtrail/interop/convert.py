"""Results as other tools' input: github-action-benchmark JSON (``gab``, its ``customSmallerIsBetter``
input) and Bencher Metric Format (``bmf``, https://bencher.dev/docs/reference/bencher-metric-format/).

Only ``ok`` records are converted; the others are returned in ``Conversion.left_out``. docs/interop.md
gives the mapping: values are medians in the record's unit (Bencher's latency in ns), ranges and
lower/upper values from the samples' quartiles (two samples at least).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchtrail.errors import UserError, suggest
from benchtrail.results.schema import BenchmarkRecord, ResultsFile

FORMATS = ("gab", "bmf")
KINDS = ("all", "execution", "compilation")

#: Factor from an execution record's unit to nanoseconds (Bencher's Latency measure).
TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


@dataclass(frozen=True)
class Conversion:
    """A converted document (a list for ``gab``, an object for ``bmf``), the records converted and those
    ``left_out`` (not ``ok``), in input order."""

    document: Any
    included: tuple[BenchmarkRecord, ...]
    left_out: tuple[BenchmarkRecord, ...]


def check_options(fmt: str, kind: str) -> None:
    """Raises UserError, naming the value and the allowed ones, for an unknown ``fmt`` or ``kind``."""
    if fmt not in FORMATS:
        raise UserError(
            f"--to {fmt!r} is not a known format; allowed: {', '.join(FORMATS)} (gab = "
            f"github-action-benchmark customSmallerIsBetter, bmf = Bencher Metric Format)"
            f"{suggest(fmt, FORMATS)}"
        )
    if kind not in KINDS:
        raise UserError(f"--kind {kind!r} is not known; allowed: {', '.join(KINDS)}{suggest(kind, KINDS)}")


def _quartiles(record: BenchmarkRecord) -> tuple[float, float] | None:
    """25th and 75th percentiles of the samples (numpy's linear interpolation, as the record's
    IQR), or None for fewer than two samples."""
    if len(record.samples) < 2:
        return None
    q25, q75 = np.percentile(record.samples, [25, 75])
    return float(q25), float(q75)


def _g(x: float) -> str:
    """A number for text fields: whole numbers in full (``340682``), others with 6 significant
    digits (``0.785981``, ``1.25``)."""
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def _gab_entry(record: BenchmarkRecord, results: ResultsFile) -> dict[str, Any]:
    unit = record.unit
    entry: dict[str, Any] = {"name": record.name, "unit": unit, "value": record.median}
    lines = [f"samples: {record.n}"]
    quartiles = _quartiles(record)
    if quartiles is not None and record.iqr is not None:
        entry["range"] = f"± {_g(record.iqr / 2)}"
        lines += [f"p25: {_g(quartiles[0])} {unit}", f"p75: {_g(quartiles[1])} {unit}"]
    if record.n >= 2 and record.min is not None and record.max is not None:
        lines += [f"min: {_g(record.min)} {unit}", f"max: {_g(record.max)} {unit}"]
    lines += [
        f"device: {record.device_name}",
        f"run: {results.run.get('run_id', '?')}/{results.run.get('attempt', '?')}",
    ]
    entry["extra"] = "\n".join(lines)
    return entry


def _bmf_metric(record: BenchmarkRecord, factor: float) -> dict[str, float]:
    metric = {"value": record.median * factor}
    if quartiles := _quartiles(record):
        metric |= {"lower_value": quartiles[0] * factor, "upper_value": quartiles[1] * factor}
    return metric


def _bmf_key(record: BenchmarkRecord) -> tuple[str, str, float]:
    """(benchmark, measure slug, factor to the measure's unit) of a record. Raises UserError for an
    execution record not in a time unit."""
    if record.metric == "instructions":  # a measure of the run config's own benchmark, beside its latency
        return record.name.removesuffix(".instructions"), "instructions", 1.0
    if record.kind == "execution":
        if record.unit not in TO_NS:
            raise UserError(
                f"benchmark {record.name!r}: field unit is {record.unit!r}; an execution record "
                f"converts to Bencher's latency (ns) only from {', '.join(TO_NS)}"
            )
        return record.name, "latency", TO_NS[record.unit]
    return record.module_name, record.metric.replace("_", "-"), 1.0


def convert(results: Sequence[ResultsFile], fmt: str, kind: str = "all") -> Conversion:
    """The ``ok`` records of ``kind`` of one run's results files in ``fmt`` (docs/interop.md), ``gab``'s
    list sorted by name. Raises UserError when no record is ``ok`` (naming those left out), two records get
    one output name, or (``bmf``) an execution record is not in a time unit."""
    included, left_out = [], []
    for f in results:
        for b in f.benchmarks:
            if kind not in ("all", b.kind):
                continue
            if b.status == "ok" and b.median is not None:
                included.append((b, f))
            else:
                left_out.append(b)
    if not included:
        names = ", ".join(f"{b.name} ({b.status})" for b in left_out) or "none"
        raise UserError(
            f"--results: no ok {'' if kind == 'all' else kind + ' '}records to convert "
            f"(not ok, left out: {names}); a converted file needs at least one ok series"
        )
    seen: dict[tuple[str, str], BenchmarkRecord] = {}
    for b, _ in included:
        key = (b.name, "") if fmt == "gab" else _bmf_key(b)[:2]
        if key in seen:
            raise UserError(
                f"--results: {seen[key].name!r} (id {seen[key].id}) and {b.name!r} (id {b.id}) "
                f"both become {' / '.join(k for k in key if k)!r}; convert one run's results, "
                "each case once"
            )
        seen[key] = b
    if fmt == "gab":
        document: Any = sorted((_gab_entry(b, f) for b, f in included), key=lambda e: e["name"])
    else:
        document = {}
        for b, _ in included:
            benchmark, measure, factor = _bmf_key(b)
            document.setdefault(benchmark, {})[measure] = _bmf_metric(b, factor)
    return Conversion(document, tuple(b for b, _ in included), tuple(left_out))


def dumps(document: Any) -> str:
    """``document`` as indented JSON with sorted keys and a trailing newline (no NaN: ok records
    have finite samples)."""
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"
