"""Read and write results files and the flattened per-benchmark documents."""

from __future__ import annotations

import dataclasses
import datetime
import math
import uuid
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.results.schema import (
    DIRECTIONS,
    KINDS,
    METRICS,
    SCHEMA_VERSION,
    STATUSES,
    UNITS,
    BenchmarkRecord,
    ResultsFile,
)
from benchtrail.results.summary import summarize
from benchtrail.suite.names import NAME_RULE, SAFE_NAME, name_problem, slug
from benchtrail.suite.serialization import from_plain

#: What a preset name may hold: it names files (``<preset>.png``, ``<preset>.html`` of the dashboard).
PRESET_NAME_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit, without '..' "
    f"(regex {SAFE_NAME.pattern})"
)


def unsafe_preset_name(name: object) -> bool:
    """True unless ``name`` follows ``PRESET_NAME_RULE``."""
    return not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name


def results_to_dict(results: ResultsFile) -> dict[str, Any]:
    """With ``schema_version``."""
    return {"schema_version": SCHEMA_VERSION, **dataclasses.asdict(results)}


def write_results(path: Path, results: ResultsFile) -> Path:
    """Atomic; refuses to overwrite an existing file."""
    return jsonio.write_json(path, results_to_dict(results), exclusive=True)


def load_results(path: Path, *, keep_bad: bool = False) -> ResultsFile:
    """Load and validate a results file (schema version 1 or 2; version 1 records get their metric's
    direction). ``keep_bad`` keeps a non-finite sample (null becomes NaN) or a summary that disagrees with
    the samples, for a stored baseline whose row compare makes ``not-comparable``.

    Raises:
        UserError: the file is unreadable, truncated, not benchtrail's, of an unknown schema version,
            lacks or has an unknown field, a bad status, kind, unit, metric or direction, an unsafe preset
            name, a name or id with a control character, or two benchmarks with one id; without
            ``keep_bad`` also a bad sample or summary. The message names file, benchmark, field and what
            is allowed.
    """
    obj = jsonio.read_json(
        path,
        kind="results file",
        supported=SCHEMA_VERSION,
        foreign="is not a benchtrail results file (no schema_version); give the "
        "results/*.json of a benchtrail run, or its run directory",
    )
    version = obj.pop("schema_version")
    if isinstance(obj.get("benchmarks"), list):
        obj["benchmarks"] = [_upgrade_record(path, version, b, keep_bad) for b in obj["benchmarks"]]
    results = from_plain(obj, ResultsFile, where=f"results file {path}")
    run_presets = results.run.get("presets", [])
    if not isinstance(run_presets, list) or any(map(unsafe_preset_name, run_presets)):
        raise UserError(
            f"results file {path}: field run.presets is {run_presets!r}; allowed: a list of "
            f"preset names of {PRESET_NAME_RULE}"
        )
    seen: dict[str, BenchmarkRecord] = {}
    for b in results.benchmarks:
        _check_record(path, b, not keep_bad)
        for field in ("id", "name", "device_name", "module_name", "compile_config"):
            value = getattr(b, field)
            if value and (problem := name_problem(value)):  # empty: a record of a tool that has none
                raise UserError(
                    f"results file {path}: benchmark {b.name!r} field {field} is {value!r}: "
                    f"{problem}; allowed: {NAME_RULE}"
                )
        if bad := list(filter(unsafe_preset_name, b.presets)):
            raise UserError(
                f"results file {path}: benchmark {b.name!r} field presets has {bad[0]!r}; "
                f"allowed: preset names of {PRESET_NAME_RULE}"
            )
        if b.id in seen:
            raise UserError(
                f"results file {path}: two benchmarks have id {b.id} "
                f"({seen[b.id].name!r} and {b.name!r}); ids must be unique"
            )
        seen[b.id] = b
    return results


def _upgrade_record(path: Path, version: int, b: Any, keep_bad: bool) -> Any:
    """One record's JSON upgraded: version 1 gets its metric's direction; null samples become NaN
    (``keep_bad``) or a UserError."""
    if not isinstance(b, dict):
        return b
    where = f"results file {path}: benchmark {b.get('name')!r}"
    metric = b.get("metric")
    if isinstance(metric, str) and metric not in METRICS:
        raise UserError(
            f"{where} has metric {metric!r}, which has no known direction; allowed: "
            f"{', '.join(METRICS)} (docs/formats.md, 'Metrics')"
        )
    if version < 2 and "direction" not in b and isinstance(metric, str):
        b = {**b, "direction": METRICS[metric].direction}
    samples = b.get("samples")
    if isinstance(samples, list) and None in samples:
        if not keep_bad:
            raise UserError(
                f"{where}: field samples[{samples.index(None)}] is null (a NaN or infinity "
                "written as null); allowed: finite numbers"
            )
        b = {**b, "samples": [math.nan if x is None else x for x in samples]}
    return b


def _check_record(path: Path, b: BenchmarkRecord, values: bool) -> None:
    """UserError unless status, kind, unit and direction are known and the metric's, and (``values``)
    every sample is finite and the summary matches the samples."""
    where = f"results file {path}: benchmark {b.name!r}"
    for field, allowed in (("status", STATUSES), ("kind", KINDS), ("unit", UNITS), ("direction", DIRECTIONS)):
        if getattr(b, field) not in allowed:
            raise UserError(f"{where} has {field} {getattr(b, field)!r}; allowed: {', '.join(allowed)}")
    if not b.id:
        raise UserError(f"{where} has an empty id")
    metric = METRICS[b.metric]
    if (b.kind, b.unit) != (metric.kind, metric.unit):
        raise UserError(
            f"{where} has kind {b.kind!r} and unit {b.unit!r}, but metric {b.metric!r} is "
            f"{metric.kind} in {metric.unit!r} (docs/formats.md, 'Metrics'); allowed: its "
            "metric's"
        )
    if b.direction != metric.direction:
        raise UserError(
            f"{where} has direction {b.direction!r}, but metric {b.metric!r} is "
            f"{metric.direction} (docs/formats.md, 'Metrics'); allowed: its metric's direction"
        )
    if isinstance(b.n, bool) or b.n != len(b.samples):
        raise UserError(f"{where}: n is {b.n!r} but there are {len(b.samples)} samples")
    if not values:
        return
    for i, x in enumerate(b.samples):
        if not math.isfinite(x):
            raise UserError(
                f"{where}: field samples[{i}] is {x!r}; allowed: finite numbers (JSON has no NaN or Infinity)"
            )
    if b.status == "ok" and not b.samples:
        raise UserError(f"{where}: status ok needs at least one sample")
    expected = summarize(b.samples)
    for key, want in (("median", expected["median"]), ("min", expected["min"]), ("max", expected["max"])):
        got = getattr(b, key)
        if got != want and (got is None or want is None or not math.isclose(got, want, rel_tol=1e-9)):
            raise UserError(f"{where}: {key} is {got!r} but the samples give {want!r}")


def load_results_paths(paths: list[Path]) -> list[ResultsFile]:
    """From files and directories (every ``*.json`` in them, or in their ``results/``)."""
    files = []
    for p in map(Path, paths):
        folder = p / "results" if (p / "results").is_dir() else p
        found = sorted(folder.glob("*.json")) if p.is_dir() else [p]
        if not found:
            raise UserError(f"no results files (*.json) in {folder}")
        files += found
    return list(map(load_results, files))


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(obj, dict):
        return {prefix: obj}
    return {
        k: v
        for key, value in obj.items()
        for k, v in _flatten(value, f"{prefix}.{key}" if prefix else key).items()
    }


def write_documents(folder: Path, results: ResultsFile) -> list[Path]:
    """One flattened document per benchmark, ``bench_<name>_<UTC yyyymmddThhmmssZ>_<uuid8>.json``: nested
    objects become dotted keys (``details.phase_times_ms.run``), lists stay lists."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    shared = {
        "commit": results.commit,
        "dirty": results.dirty,
        "run": results.run,
        "environment": results.environment,
    }
    return [
        jsonio.write_json(
            folder / f"bench_{slug(b.name)}_{stamp}_{uuid.uuid4().hex[:8]}.json",
            {**_flatten({**shared, **dataclasses.asdict(b)}), "schema_version": SCHEMA_VERSION},
            exclusive=True,
        )
        for b in results.benchmarks
    ]
