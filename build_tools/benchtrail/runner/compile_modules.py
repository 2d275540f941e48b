"""The compile stage: build each module, write its directory and its compilation statistics.

Each module directory holds ``module_info.json``, ``compile-stats.json`` and, for export and
AOTInductor modules, the ``.pt2`` artifact. Eager modules are recorded with nothing to compile.
Every other module is compiled in fresh worker processes: ``cold`` samples each start from an
empty Inductor cache (``TORCHINDUCTOR_CACHE_DIR`` set to a new folder), ``warm`` samples reuse
the cache the first cold sample filled. The first cold sample writes the artifact and gives
the deterministic counts. The statistics become compilation series ``<module id>-<metric>`` in
``results/compilation-<device>.json``, which ``compare`` treats like any other series.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.results.schema import BenchmarkRecord, metric_direction
from benchtrail.results.summary import summarize
from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.definitions import CompileMode, ModuleGenerationConfig
from benchtrail.suite.entry_points import ARTIFACTS, INDUCTOR_MODES
from benchtrail.runner.workers import run_in_worker
from benchtrail.worker.protocol import compile_request

#: Version history of module_info.json and compile-stats.json:
#:   1 — first version.
#:   2 — cold and warm compile-time samples, kernel count, recompiles, artifact bytes.
MODULE_SCHEMA_VERSION = 2

#: Compilation series: metric -> (unit, the modes that have it).
_ALL = tuple(CompileMode)
METRICS: dict[str, tuple[str, tuple[CompileMode, ...]]] = {
    "compile_time_cold_ms": ("ms", _ALL),
    "compile_time_warm_ms": ("ms", _ALL),
    "graph_count": ("count", _ALL),
    "graph_breaks": ("count", _ALL),
    "recompiles": ("count", INDUCTOR_MODES),
    "kernel_count": ("count", INDUCTOR_MODES + (CompileMode.AOT_INDUCTOR,)),
    "artifact_bytes": ("bytes", _ALL),
    "peak_rss_bytes": ("bytes", _ALL),
}

#: Threads for compiling; compile time on a 2-core runner is what we measure.
COMPILE_THREADS = 2
COMPILE_TIMEOUT_S = 1200.0


def module_info(gen: ModuleGenerationConfig, digest: str, torch_version: str) -> dict[str, Any]:
    """The ``module_info.json`` object: model, compile config and flags, input specs, content hash."""
    return {
        "schema_version": MODULE_SCHEMA_VERSION,
        "id": gen.id,
        "name": gen.name,
        "model": {"name": gen.model.name, "tags": list(gen.model.tags), "entry_point": gen.model.entry_point,
                  "input_specs": list(gen.model.input_specs),
                  "reference_entry_point": gen.model.reference_entry_point, "fullgraph": gen.model.fullgraph},
        "compile_config": {"name": gen.compile_config.name, "mode": gen.compile_config.mode.value,
                           "options": [list(o) for o in gen.compile_config.options],
                           "dtype": gen.compile_config.dtype},
        "target_architecture": gen.target_architecture.value,
        "artifact": ARTIFACTS.get(gen.compile_config.mode),
        "content_hash": digest,
        "torch_version": torch_version,
    }


def _artifact_bytes(stats: dict[str, Any], mode: CompileMode) -> int:
    artifacts = stats.get("artifacts", {})
    if mode in ARTIFACTS:
        return int(artifacts.get(ARTIFACTS[mode], 0))
    return int(artifacts.get("inductor_cache", 0))  # generated code and compiled kernels


#: The Inductor cache the compile stage fills for the run stage: ``<run dir>/modules/inductor-cache``.
INDUCTOR_CACHE = "inductor-cache"


def compile_samples(gen: ModuleGenerationConfig, module_dir: Path, cold: int, warm: int,
                    tasks: tuple[str, ...] = ()) -> dict[str, Any]:
    """Compile one module ``cold`` + ``warm`` times in fresh processes; return its statistics.

    The first cold sample also compiles the graphs of ``tasks`` (the run configs' tasks:
    ``benchtrail.worker.main._prime``) after it is measured; its cache is then merged into the run
    directory's shared cache (``<module_dir>/../inductor-cache``), which the run stage's workers use.
    """
    request = compile_request(gen, module_dir, explain=True, tasks=tasks)
    others = compile_request(gen, None, explain=False)  # samples: no artifact, no graph counts
    with tempfile.TemporaryDirectory(prefix="benchtrail-inductor-cache-") as caches:
        first_cache = Path(caches, "cold-0")
        first = run_in_worker(request, COMPILE_TIMEOUT_S, COMPILE_THREADS,
                              env={"TORCHINDUCTOR_CACHE_DIR": str(first_cache)})
        stats = first.as_dict()
        if not first.ok:
            return stats
        stats["cold_ms"], stats["warm_ms"] = [first.compile_time_ms], []
        for i in range(1, cold):
            sample = run_in_worker(others, COMPILE_TIMEOUT_S, COMPILE_THREADS,
                                   env={"TORCHINDUCTOR_CACHE_DIR": str(Path(caches, f"cold-{i}"))})
            if not sample.ok:
                return sample.as_dict()
            stats["cold_ms"].append(sample.compile_time_ms)
        for _ in range(warm):
            sample = run_in_worker(others, COMPILE_TIMEOUT_S, COMPILE_THREADS,
                                   env={"TORCHINDUCTOR_CACHE_DIR": str(first_cache)})
            if not sample.ok:
                return sample.as_dict()
            stats["warm_ms"].append(sample.compile_time_ms)
            stats["warm_fxgraph_cache_hit"] = sample.fxgraph_cache_hit or 0
        if first_cache.is_dir() and gen.compile_config.mode in INDUCTOR_MODES:
            # The cache's files are named by their content's hash, so merging modules' caches is safe.
            shutil.copytree(first_cache, module_dir.parent / INDUCTOR_CACHE, dirs_exist_ok=True)
    stats["artifact_bytes"] = _artifact_bytes(stats, gen.compile_config.mode)
    return stats


def compile_one(gen: ModuleGenerationConfig, module_dir: Path, torch_version: str, cold: int = 1,
                warm: int = 0, tasks: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """Compile one module into ``module_dir``; return (compile stats, content hash).

    A failed compilation leaves ``module_info.json`` and ``compile-stats.json`` (with the status
    and reason) and no artifact.
    """
    digest = content_hash(gen, torch_version)
    jsonio.write_json(module_dir / "module_info.json", module_info(gen, digest, torch_version), exclusive=True)
    if gen.compile_config.mode is CompileMode.EAGER:
        stats = {"status": "ok", "reason": "eager: nothing to compile", "cold_ms": [0.0], "warm_ms": [],
                 "graph_count": 0, "graph_breaks": 0, "break_reasons": [], "artifact_bytes": 0}
    else:
        stats = compile_samples(gen, module_dir, cold, warm, tasks)
        if stats["status"] != "ok":
            for name in ARTIFACTS.values():
                (module_dir / name).unlink(missing_ok=True)
    jsonio.write_json(module_dir / "compile-stats.json",
                      {"schema_version": MODULE_SCHEMA_VERSION, **stats}, exclusive=True)
    return stats, digest


def compile_records(gen: ModuleGenerationConfig, stats: dict[str, Any], digest: str,
                    device_name: str) -> list[BenchmarkRecord]:
    """The compilation series of one compiled module (none for eager)."""
    mode = gen.compile_config.mode
    if mode is CompileMode.EAGER:
        return []
    ok = stats["status"] == "ok"
    records = []
    for metric, (unit, modes) in METRICS.items():
        if mode not in modes:
            continue
        if not ok:
            samples: tuple[float, ...] = ()
        elif metric == "compile_time_cold_ms":
            samples = tuple(stats["cold_ms"])
        elif metric == "compile_time_warm_ms":
            samples = tuple(stats["warm_ms"])
        else:
            samples = (float(stats[metric]),)
        if ok and not samples:
            continue  # no warm samples asked for
        details: dict[str, Any] = {}
        if metric == "graph_breaks":
            details = {"break_reasons": stats.get("break_reasons", [])}
        elif metric == "compile_time_cold_ms" and ok:
            details = {k: stats.get(k) for k in ("fxgraph_cache_hit", "fxgraph_cache_miss")}
        elif metric == "artifact_bytes" and ok:
            details = {"artifacts": stats.get("artifacts", {})}
        elif metric == "kernel_count" and stats.get("kernel_count_reason"):
            details = {"kernel_count_reason": stats["kernel_count_reason"]}  # why it is 0
        records.append(BenchmarkRecord(
            id=f"{gen.id}-{metric}", name=f"{gen.name}.{metric}", kind="compilation", metric=metric, unit=unit,
            direction=metric_direction(metric), device_name=device_name, module_name=gen.name,
            compile_config=gen.compile_config.name, task=None,
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
    sampling: dict[str, tuple[int, int]] | None = None,
    report: Callable[[str, str], None] = lambda name, status: None,
    tasks: dict[str, tuple[str, ...]] | None = None,
) -> list[BenchmarkRecord]:
    """Compile every module into ``output_dir/<module dir path>``; return the compilation series.

    ``sampling`` maps module ids to (cold, warm) fresh-process compilations (default (1, 0));
    ``tasks`` module ids to the tasks whose graphs go into ``output_dir/modules/inductor-cache``
    (:func:`compile_samples`).
    """
    records: list[BenchmarkRecord] = []
    for gen in gens:
        cold, warm = (sampling or {}).get(gen.id, (1, 0))
        stats, digest = compile_one(gen, output_dir / module_dir_paths[gen.id], torch_version, cold, warm,
                                    (tasks or {}).get(gen.id, ()))
        records.extend(compile_records(gen, stats, digest, device_name))
        report(gen.name, stats["status"])
    return records

