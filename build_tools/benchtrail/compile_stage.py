"""The compile stage: build each module, write its directory and its compilation statistics.

Each module directory holds ``module_info.json`` and ``compile-stats.json``. Eager modules are
recorded with nothing to compile. Inductor modules are compiled (``torch.compile`` plus the first
call) in a fresh worker process each. The statistics also become compilation series
``<module id>-<metric>`` in ``results/compilation.json`` so that ``compare`` treats them like any
other series.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.modules import content_hash
from benchtrail.results.schema import BenchmarkRecord
from benchtrail.stats.summary import summarize
from benchtrail.suite.definitions import CompileMode, ModuleGenerationConfig
from benchtrail.suite.serialization import serialize_and_pack
from benchtrail.workers import run_in_worker

#: Version history of module_info.json and compile-stats.json:
#:   1 — first version.
MODULE_SCHEMA_VERSION = 1

#: Compilation metrics stored as series, with their units.
METRICS = {"compile_time_ms": "ms", "graph_count": "count", "graph_breaks": "count"}

#: Threads for compiling; compile time on a 2-core runner is what we measure.
COMPILE_THREADS = 2
COMPILE_TIMEOUT_S = 1200.0


def compile_one(gen: ModuleGenerationConfig, module_dir: Path, torch_version: str) -> tuple[dict[str, Any], str]:
    """Compile one module into ``module_dir``; return (compile stats, content hash)."""
    digest = content_hash(gen, torch_version)
    info = {
        "schema_version": MODULE_SCHEMA_VERSION,
        "id": gen.id,
        "name": gen.name,
        "model": {"name": gen.model.name, "tags": list(gen.model.tags), "entry_point": gen.model.entry_point,
                  "input_specs": list(gen.model.input_specs),
                  "reference_entry_point": gen.model.reference_entry_point},
        "compile_config": {"name": gen.compile_config.name, "mode": gen.compile_config.mode.value,
                           "options": [list(o) for o in gen.compile_config.options],
                           "dtype": gen.compile_config.dtype},
        "target_architecture": gen.target_architecture.value,
        "content_hash": digest,
        "torch_version": torch_version,
    }
    jsonio.write_json(module_dir / "module_info.json", info, exclusive=True)
    if gen.compile_config.mode is CompileMode.EAGER:
        stats = {"status": "ok", "reason": "eager: nothing to compile", "compile_time_ms": 0.0,
                 "graph_count": 0, "graph_breaks": 0, "break_reasons": []}
    else:
        request = {"kind": "compile", "config": serialize_and_pack([gen])}
        stats = run_in_worker(request, COMPILE_TIMEOUT_S, COMPILE_THREADS)
    jsonio.write_json(module_dir / "compile-stats.json",
                      {"schema_version": MODULE_SCHEMA_VERSION, **stats}, exclusive=True)
    return stats, digest


def compile_records(gen: ModuleGenerationConfig, stats: dict[str, Any], digest: str,
                    device_name: str) -> list[BenchmarkRecord]:
    """The compilation series of one compiled module (none for eager)."""
    if gen.compile_config.mode is CompileMode.EAGER:
        return []
    records = []
    for metric, unit in METRICS.items():
        ok = stats["status"] == "ok"
        samples = (float(stats[metric]),) if ok else ()
        details = {"break_reasons": stats.get("break_reasons", [])} if metric == "graph_breaks" else {}
        if metric == "compile_time_ms" and ok:
            details = {k: stats.get(k) for k in ("fxgraph_cache_hit", "fxgraph_cache_miss", "peak_rss_bytes")}
        records.append(BenchmarkRecord(
            id=f"{gen.id}-{metric}", name=f"{gen.name}.{metric}", kind="compilation", metric=metric, unit=unit,
            device_name=device_name, module_name=gen.name, compile_config=gen.compile_config.name, task=None,
            status=stats["status"], reason=stats.get("reason"), samples=samples, **summarize(samples),
            content_hash=digest, presets=gen.presets, details=details,
        ))
    return records


def compile_modules(
    gens: tuple[ModuleGenerationConfig, ...],
    module_dir_paths: dict[str, str],
    output_dir: Path,
    torch_version: str,
    device_name: str,
    report: Callable[[str, str], None] = lambda name, status: None,
) -> list[BenchmarkRecord]:
    """Compile every module into ``output_dir/<module dir path>``; return the compilation series."""
    records: list[BenchmarkRecord] = []
    for gen in gens:
        stats, digest = compile_one(gen, output_dir / module_dir_paths[gen.id], torch_version)
        records.extend(compile_records(gen, stats, digest, device_name))
        report(gen.name, stats["status"])
    return records

