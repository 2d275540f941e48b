"""The compile stage: each module's directory (``module_info.json``, ``compile-stats.json``, for export and
AOTInductor the ``.pt2`` artifact) and its compilation series ``<module id>-<metric>``.

Modules compile in fresh worker processes: ``cold`` samples each from an empty Inductor cache, ``warm``
ones reusing the cache the first cold sample filled; that first sample writes the artifact and the counts.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.results.schema import METRICS, BenchmarkRecord
from benchtrail.runner.launch import run_in_worker
from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.definitions import CompileMode, ModuleGenerationConfig
from benchtrail.suite.entry_points import ARTIFACTS, INDUCTOR_MODES
from benchtrail.worker.protocol import Response, compile_request

#: Version history of module_info.json and compile-stats.json:
#:   1 — first version.
#:   2 — cold and warm compile-time samples, kernel count, recompiles, artifact bytes.
MODULE_SCHEMA_VERSION = 2

#: Threads for compiling; compile time on a 2-core runner is what we measure.
COMPILE_THREADS = 2
COMPILE_TIMEOUT_S = 1200.0


def module_info(gen: ModuleGenerationConfig, digest: str, torch_version: str) -> dict[str, Any]:
    """The ``module_info.json`` object: model, compile config and flags, input specs, content hash."""
    model, config = gen.model, gen.compile_config
    return {
        "schema_version": MODULE_SCHEMA_VERSION,
        "id": gen.id,
        "name": gen.name,
        "model": {
            k: getattr(model, k)
            for k in ("name", "tags", "entry_point", "input_specs", "reference_entry_point", "fullgraph")
        },
        "compile_config": {
            "name": config.name,
            "mode": config.mode.value,
            "options": config.options,
            "dtype": config.dtype,
        },
        "target_architecture": gen.target_architecture.value,
        "artifact": ARTIFACTS.get(config.mode),
        "content_hash": digest,
        "torch_version": torch_version,
    }


#: The Inductor cache the compile stage fills for the run stage: ``<run dir>/modules/inductor-cache``.
INDUCTOR_CACHE = "inductor-cache"


@dataclass(frozen=True)
class ModuleStats:
    """One module's ``compile-stats.json``: ``answer``, the worker's to the first cold sample, or to the one
    that failed (then nothing else is set); compile times in ms; the last warm sample's cache hits;
    ``artifact_bytes`` (the Inductor cache's where the mode has no artifact)."""

    answer: Response
    cold_ms: tuple[float, ...] | None = None
    warm_ms: tuple[float, ...] | None = None
    warm_fxgraph_cache_hit: int | None = None
    artifact_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``compile-stats.json`` less its ``schema_version``: the answer's fields, then those set here."""
        answer = {k: v for k, v in self.answer.to_json().items() if k != "version"}
        return answer | {k: v for k, v in vars(self).items() if k != "answer" and v is not None}


def compile_samples(
    gen: ModuleGenerationConfig, module_dir: Path, cold: int, warm: int, tasks: tuple[str, ...]
) -> ModuleStats:
    """Compile one module ``cold`` + ``warm`` times in fresh processes.

    The first cold sample then compiles ``tasks``' graphs; its cache is merged into
    ``<module_dir>/../inductor-cache``, which the run stage's workers use.
    """

    def sample(request: Any, cache: Path) -> Response:
        return run_in_worker(
            request, COMPILE_TIMEOUT_S, COMPILE_THREADS, env={"TORCHINDUCTOR_CACHE_DIR": str(cache)}
        )

    others = compile_request(gen, explain=False)  # samples: no artifact, no graph counts
    with tempfile.TemporaryDirectory(prefix="benchtrail-inductor-cache-") as caches:
        first_cache = Path(caches, "cold-0")
        first = sample(compile_request(gen, module_dir, tasks=tasks), first_cache)
        if not first.ok:
            return ModuleStats(first)
        times, warm_hits = [first.compile_time_ms], None  # cold samples, then warm ones
        for i in range(1, cold + warm):  # the other cold samples, each from an empty cache, then warm ones
            answer = sample(others, first_cache if i >= cold else Path(caches, f"cold-{i}"))
            if not answer.ok:
                return ModuleStats(answer)
            times.append(answer.compile_time_ms)
            if i >= cold:  # the FX graph cache hits of the last warm sample
                warm_hits = answer.fxgraph_cache_hit or 0
        if first_cache.is_dir() and gen.compile_config.mode in INDUCTOR_MODES:
            # The cache's files are named by their content's hash, so merging modules' caches is safe.
            shutil.copytree(first_cache, module_dir.parent / INDUCTOR_CACHE, dirs_exist_ok=True)
    artifact = ARTIFACTS.get(gen.compile_config.mode, "inductor_cache")  # else generated code and kernels
    return ModuleStats(
        first,
        tuple(times[:cold]),
        tuple(times[cold:]),
        warm_hits,
        int((first.artifacts or {}).get(artifact, 0)),
    )


def compile_one(
    gen: ModuleGenerationConfig,
    module_dir: Path,
    torch_version: str,
    cold: int = 1,
    warm: int = 0,
    tasks: tuple[str, ...] = (),
) -> tuple[ModuleStats, str]:
    """(compile stats, content hash) of one module compiled into ``module_dir``; a failure leaves the two
    JSON files (with status and reason) and no artifact."""
    digest = content_hash(gen, torch_version)
    jsonio.write_json(
        module_dir / "module_info.json", module_info(gen, digest, torch_version), exclusive=True
    )
    if gen.compile_config.mode is CompileMode.EAGER:
        stats = ModuleStats(
            Response("ok", "eager: nothing to compile", graph_count=0, graph_breaks=0, break_reasons=()),
            (0.0,),
            (),
            artifact_bytes=0,
        )
    else:
        stats = compile_samples(gen, module_dir, cold, warm, tasks)
        if not stats.answer.ok:
            for name in ARTIFACTS.values():
                (module_dir / name).unlink(missing_ok=True)
    jsonio.write_json(
        module_dir / "compile-stats.json",
        {"schema_version": MODULE_SCHEMA_VERSION, **stats.to_json()},
        exclusive=True,
    )
    return stats, digest


def _samples(stats: ModuleStats, metric: str) -> tuple[float, ...]:
    """Every cold or warm compile time (ms), else the metric's one value; none when compiling failed."""
    if not stats.answer.ok:
        return ()
    if metric in ("compile_time_cold_ms", "compile_time_warm_ms"):
        return stats.cold_ms if metric == "compile_time_cold_ms" else stats.warm_ms
    return (float(stats.artifact_bytes if metric == "artifact_bytes" else getattr(stats.answer, metric)),)


def compile_records(
    gen: ModuleGenerationConfig, stats: ModuleStats, digest: str, device_name: str
) -> list[BenchmarkRecord]:
    """The compilation series of one module, one per metric its mode has (``METRICS``; none for eager)."""
    answer = stats.answer
    records = []
    for metric, about in METRICS.items():
        if gen.compile_config.mode not in about.modes:
            continue
        samples = _samples(stats, metric)
        if answer.ok and not samples:
            continue  # no warm samples asked for
        details: dict[str, Any] = {}
        if metric == "graph_breaks":
            details = {"break_reasons": list(answer.break_reasons or ())}
        elif metric == "compile_time_cold_ms" and answer.ok:
            details = {
                "fxgraph_cache_hit": answer.fxgraph_cache_hit,
                "fxgraph_cache_miss": answer.fxgraph_cache_miss,
            }
        elif metric == "artifact_bytes" and answer.ok:
            details = {"artifacts": answer.artifacts or {}}
        elif metric == "kernel_count" and answer.kernel_count_reason:
            details = {"kernel_count_reason": answer.kernel_count_reason}  # why it is 0
        records.append(
            BenchmarkRecord.of(
                metric,
                samples,
                id=f"{gen.id}-{metric}",
                name=f"{gen.name}.{metric}",
                device_name=device_name,
                module_name=gen.name,
                compile_config=gen.compile_config.name,
                task=None,
                status=answer.status,
                reason=answer.reason,
                content_hash=digest,
                presets=gen.presets,
                details=details,
            )
        )
    return records


def compile_modules(
    gens: tuple[ModuleGenerationConfig, ...],
    module_dir_paths: dict[str, str],
    output_dir: Path,
    torch_version: str,
    device_name: str,
    sampling: dict[str, tuple[int, int]],
    report: Callable[[str, str], None],
    tasks: dict[str, tuple[str, ...]],
) -> list[BenchmarkRecord]:
    """Compile every module into ``output_dir/<module dir path>``: the compilation series.

    ``sampling``: module id → (cold, warm) compilations (default (1, 0)); ``tasks``: module id → the tasks
    whose graphs go into ``output_dir/modules/inductor-cache``.
    """
    records: list[BenchmarkRecord] = []
    for gen in gens:
        stats, digest = compile_one(
            gen,
            output_dir / module_dir_paths[gen.id],
            torch_version,
            *sampling.get(gen.id, (1, 0)),
            tasks.get(gen.id, ()),
        )
        records.extend(compile_records(gen, stats, digest, device_name))
        report(gen.name, stats.answer.status)
    return records
