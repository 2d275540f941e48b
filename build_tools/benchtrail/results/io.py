"""Read and write results files and the flattened per-benchmark documents."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import uuid
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.results.schema import KINDS, SCHEMA_VERSION, STATUSES, UNITS, BenchmarkRecord, ResultsFile
from benchtrail.stats.summary import summarize
from benchtrail.suite.definitions import SAFE_NAME
from benchtrail.suite.serialization import from_plain

#: What a preset name may hold: it names files (``<preset>.png``, ``<preset>.html`` of the dashboard).
PRESET_NAME_RULE = ("letters, digits, '.', '_' and '-', starting with a letter or digit, without '..' "
                    f"(regex {SAFE_NAME.pattern})")


def unsafe_preset_name(name: object) -> bool:
    """True when ``name`` is not a preset name that is safe as a file name (``PRESET_NAME_RULE``)."""
    return not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name


def results_to_dict(results: ResultsFile) -> dict[str, Any]:
    """The JSON object of a results file, with ``schema_version``."""
    return {"schema_version": SCHEMA_VERSION, **dataclasses.asdict(results)}


def write_results(path: Path, results: ResultsFile) -> Path:
    """Atomically write ``results`` to ``path``; refuses to overwrite an existing file."""
    return jsonio.write_json(path, results_to_dict(results), exclusive=True)


def load_results(path: Path) -> ResultsFile:
    """Load and validate a results file.

    Raises:
        UserError: the file is unreadable, truncated, JSON of another tool ("not a benchtrail results
            file (no schema_version)"), of an unknown schema version, lacks a field, has an unknown
            field, a bad status or kind, a preset name that is not safe as a file name (in
            ``run.presets`` or a record's ``presets``; ``PRESET_NAME_RULE``), or two benchmarks with one id.
    """
    try:
        obj = jsonio.read_json(path, kind="results file", supported=SCHEMA_VERSION)
    except UserError as exc:
        if _foreign(path):
            raise UserError(f"{path} is not a benchtrail results file (no schema_version); give the results/*.json "
                            "of a benchtrail run, or its run directory") from exc
        raise
    obj.pop("schema_version")
    results = from_plain(obj, ResultsFile, where=f"results file {path}")
    run_presets = results.run.get("presets", [])
    if not isinstance(run_presets, list) or any(unsafe_preset_name(p) for p in run_presets):
        raise UserError(f"results file {path}: field run.presets is {run_presets!r}; allowed: a list of preset "
                        f"names of {PRESET_NAME_RULE}")
    seen: dict[str, BenchmarkRecord] = {}
    for b in results.benchmarks:
        if b.status not in STATUSES:
            raise UserError(f"results file {path}: benchmark {b.name!r} has status {b.status!r}; "
                            f"allowed: {', '.join(STATUSES)}")
        if b.kind not in KINDS:
            raise UserError(f"results file {path}: benchmark {b.name!r} has kind {b.kind!r}; "
                            f"allowed: {', '.join(KINDS)}")
        _check_record(path, b)
        bad = [p for p in b.presets if unsafe_preset_name(p)]
        if bad:
            raise UserError(f"results file {path}: benchmark {b.name!r} field presets has {bad[0]!r}; allowed: "
                            f"preset names of {PRESET_NAME_RULE}")
        if b.id in seen:
            raise UserError(f"results file {path}: two benchmarks have id {b.id} "
                            f"({seen[b.id].name!r} and {b.name!r}); ids must be unique")
        seen[b.id] = b
    return results


def _foreign(path: Path) -> bool:
    """True when ``path`` holds JSON that is not a benchtrail file at all: not an object, or no ``schema_version``."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return not isinstance(obj, dict) or "schema_version" not in obj


def _check_record(path: Path, b: BenchmarkRecord) -> None:
    """A record's fields agree with each other: unit and kind known, summary matches the samples.

    Raises:
        UserError: naming the file, the benchmark, the field and what is allowed.
    """
    where = f"results file {path}: benchmark {b.name!r}"
    if not b.id:
        raise UserError(f"{where} has an empty id")
    if b.unit not in UNITS:
        raise UserError(f"{where} has unit {b.unit!r}; allowed: {', '.join(UNITS)}")
    if isinstance(b.n, bool) or b.n != len(b.samples):
        raise UserError(f"{where}: n is {b.n!r} but there are {len(b.samples)} samples")
    if not all(math.isfinite(x) for x in b.samples):
        raise UserError(f"{where}: samples must be finite numbers")
    if b.status == "ok" and not b.samples:
        raise UserError(f"{where}: status ok needs at least one sample")
    expected = summarize(b.samples)
    for key in ("median", "min", "max"):
        got, want = getattr(b, key), expected[key]
        if (got is None) != (want is None) or (want is not None and not math.isclose(got, want, rel_tol=1e-9)):
            raise UserError(f"{where}: {key} is {got!r} but the samples give {want!r}")


def load_results_paths(paths: list[Path]) -> list[ResultsFile]:
    """Load results from files and from directories (every ``*.json`` directly in them, or in ``results/``)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            folder = p / "results" if (p / "results").is_dir() else p
            found = sorted(folder.glob("*.json"))
            if not found:
                raise UserError(f"no results files (*.json) in {folder}")
            files.extend(found)
        else:
            files.append(p)
    return [load_results(f) for f in files]


def _flatten(prefix: str, obj: Any, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    else:
        out[prefix] = obj


def write_documents(folder: Path, results: ResultsFile, now: datetime.datetime | None = None) -> list[Path]:
    """Write one flattened document per benchmark: ``bench_<name>_<UTC yyyymmddThhmmssZ>_<uuid8>.json``.

    Nested objects become dotted keys (``environment.torch_version``, ``details.phase_times_ms.run``);
    lists (samples) stay lists. Such documents load into a search index or a table as they are.
    """
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%SZ")
    paths = []
    for b in results.benchmarks:
        doc: dict[str, Any] = {}
        _flatten("", {"commit": results.commit, "dirty": results.dirty, "run": results.run,
                      "environment": results.environment, **dataclasses.asdict(b)}, doc)
        doc["schema_version"] = SCHEMA_VERSION
        path = folder / f"bench_{b.name}_{stamp}_{uuid.uuid4().hex[:8]}.json"
        paths.append(jsonio.write_json(path, doc, exclusive=True))
    return paths
