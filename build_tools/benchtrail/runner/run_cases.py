"""The run stage: run each case of one device's shard in its own worker and record the result."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.entry_points import ARTIFACTS
from benchtrail.results.schema import BenchmarkRecord, metric_direction
from benchtrail.stats.inference import NOISE_RERUN, noise
from benchtrail.results.summary import summarize
from benchtrail.suite.definitions import RunConfig
from benchtrail.suite.names import module_dir as module_dir_of
from benchtrail.runner.workers import run_in_worker
from benchtrail.worker.protocol import run_request

#: Per-sample lists a GPU worker returns besides ``samples``; pooled over processes like them.
POOLED_GPU_KEYS = ("gpu_samples_us", "wall_samples_us")


def run_case(rc: RunConfig, module_dir: Path | None = None) -> dict[str, Any]:
    """Run one case in ``processes`` fresh worker processes, one after another, and pool the samples.

    Returns the last worker's response with every process's samples, ``process_medians`` (µs),
    ``phase_times_ms`` summed over the processes (on a GPU also both times' samples pooled,
    ``gpu_samples_us`` and ``wall_samples_us``), and ``wall_time_ms``: the case's wall time as
    seen from here, process start-up included, so the phases sum to less. The first process that
    does not finish ok ends the case with its status (never raises).
    """
    request = run_request(rc, module_dir)
    samples: list[float] = []
    medians: list[float] = []
    phases: dict[str, float] = {}
    pooled: dict[str, list[float]] = {}
    start = time.perf_counter()
    for _ in range(rc.execution_config.processes):
        response = run_in_worker(request, rc.execution_config.timeout_s, rc.target_device.threads)
        for phase, ms in (response.phase_times_ms or {}).items():
            phases[phase] = phases.get(phase, 0.0) + ms
        timing = {"process_medians": medians, "phase_times_ms": phases,
                  "wall_time_ms": (time.perf_counter() - start) * 1e3}
        if not response.ok:
            return {**response.as_dict(), **timing}
        samples.extend(response.samples or ())
        medians.append(float(np.median(response.samples or ())))
        for key in POOLED_GPU_KEYS:
            if getattr(response, key) is not None:
                pooled.setdefault(key, []).extend(getattr(response, key))
    return {**response.as_dict(), "samples": samples, **pooled, **timing}


def run_case_with_rerun(rc: RunConfig, module_dir: Path | None = None) -> dict[str, Any]:
    """:func:`run_case`, run once more when its samples' IQR/median exceeds ``NOISE_RERUN`` (10%).

    The rerun's samples replace the first ones whatever their noise (keeping the quieter of the two
    would bias the result towards lucky runs); the first run's samples, process medians and noise
    are kept under ``rerun``. A row still noisier than ``NOISE_LIMIT`` after the rerun is ``noisy``
    in the comparison and never gated.
    """
    response = run_case(rc, module_dir)
    if response["status"] != "ok" or not response["samples"]:
        return response
    first_noise = float(noise([response["samples"]])[0])
    if first_noise <= NOISE_RERUN:
        return response
    rerun = run_case(rc, module_dir)
    return {**rerun, "rerun": {"reason": f"IQR/median {first_noise:.1%} above {NOISE_RERUN:.0%}",
                               "first_noise": first_noise, "first_samples": response["samples"],
                               "first_process_medians": response["process_medians"]}}


def case_record(rc: RunConfig, response: dict[str, Any], torch_version: str) -> BenchmarkRecord:
    """Turn a worker response into the execution series ``<run config id>`` (unit µs per iteration)."""
    samples = tuple(float(s) for s in response.get("samples", ()))
    details = {k: response[k] for k in ("phase_times_ms", "memory", "iterations_per_sample",
                                        "warmup_iterations", "threads", "traceback", "process_medians",
                                        "correctness", "rerun", "wall_time_ms", "jacobian_mode", "timing",
                                        "gpu_samples_us", "wall_samples_us", "oom") if k in response}
    gen = rc.module_generation_config
    return BenchmarkRecord(
        id=rc.id, name=rc.name, kind="execution", metric="latency", unit="us", direction=metric_direction("latency"),
        device_name=rc.target_device.name, module_name=gen.name, compile_config=gen.compile_config.name,
        task=rc.execution_config.task.value, status=response["status"], reason=response.get("reason"),
        samples=samples, **summarize(samples), content_hash=content_hash(rc, torch_version),
        presets=rc.presets, details=details,
    )


def module_problem(rc: RunConfig, modules_dir: Path) -> str | None:
    """Why ``rc`` cannot run from its compiled module, or None when it can (or needs no artifact).

    Only modes that run from an artifact (export, aot-inductor: ``benchtrail.suite.entry_points.ARTIFACTS``) are
    checked, in ``<modules_dir>/modules/<slug(module name)>/`` as the compile stage wrote it: a
    ``compile-stats.json`` whose status is not ok gives ``module <name> failed to compile: <its reason>``;
    a missing module folder or artifact gives ``module <name> was not compiled: no <path> (its compile
    job did not report)``; an unreadable ``compile-stats.json`` gives a reason naming the file.
    Never raises.
    """
    from benchtrail import jsonio
    from benchtrail.runner.compile_modules import MODULE_SCHEMA_VERSION
    from benchtrail.errors import UserError

    gen = rc.module_generation_config
    artifact = ARTIFACTS.get(gen.compile_config.mode)
    if artifact is None:
        return None
    folder = modules_dir / module_dir_of(gen.name)
    stats_path = folder / "compile-stats.json"
    if stats_path.is_file():
        try:
            stats = jsonio.read_json(stats_path, kind="compile stats", supported=MODULE_SCHEMA_VERSION)
        except UserError as exc:
            return f"module {gen.name} cannot be checked: {exc}"
        status = stats.get("status")
        if status != "ok":
            why = stats.get("reason") or f"status {status!r} in {stats_path}"
            return f"module {gen.name} failed to compile: {why}"
    for path in (folder, folder / artifact):
        if not path.exists():
            return f"module {gen.name} was not compiled: no {path} (its compile job did not report)"
    return None


def run_cases(
    run_configs: tuple[RunConfig, ...],
    torch_version: str,
    report: Callable[[str, str], None] = lambda name, status: None,
    modules_dir: Path | None = None,
    on_record: Callable[[BenchmarkRecord], None] = lambda record: None,
) -> list[BenchmarkRecord]:
    """Run every case in order (a noisy case once more), fresh workers each; a failing case never stops
    the others.

    ``modules_dir`` is the run directory whose ``modules/<slug(name)>/`` hold export and AOTInductor artifacts;
    a case whose module failed to compile or was not compiled there (:func:`module_problem`) is
    recorded ``failed`` with that reason and no worker is started for it. ``on_record`` gets each
    record as soon as its case finishes (``Journal.append``).
    """
    records = []
    for rc in run_configs:
        module_dir = modules_dir / module_dir_of(rc.module_generation_config.name) if modules_dir else None
        problem = module_problem(rc, modules_dir) if modules_dir else None
        response = {"status": "failed", "reason": problem} if problem else run_case_with_rerun(rc, module_dir)
        record = case_record(rc, response, torch_version)
        on_record(record)
        records.append(record)
        report(rc.name, record.status)
    return records


class Journal:
    """Finished cases of a run stage, one JSON record per line, so ``--continue`` can resume a run
    that stopped part-way (a cancelled job, a lost runner). Each line is appended and flushed to
    disk when its case finishes; a torn last line (the process died mid-write) is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: BenchmarkRecord) -> None:
        import dataclasses
        import json
        import os

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(dataclasses.asdict(record), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def refuse_stale(self) -> dict[str, BenchmarkRecord]:
        """Without ``--continue`` a journal left by an earlier run is an error (nothing is lost)."""
        from benchtrail.errors import UserError

        if self.path.exists():
            raise UserError(f"{self.path} holds the cases of a run that stopped part-way: pass --continue to "
                            "resume it, or delete the file to start again")
        return {}

    def load(self, run_configs: tuple[RunConfig, ...], torch_version: str) -> dict[str, BenchmarkRecord]:
        """Records of the journal whose run config is in ``run_configs`` with an unchanged definition
        (content hash), by run config id; other lines are ignored."""
        import json

        from benchtrail.errors import UserError
        from benchtrail.suite.serialization import from_plain

        if not self.path.exists():
            return {}
        wanted = {rc.id: content_hash(rc, torch_version) for rc in run_configs}
        finished = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = from_plain(json.loads(line), BenchmarkRecord, where=str(self.path))
            except (ValueError, TypeError, UserError):  # a torn last line, or another version's: run it again
                continue
            if wanted.get(record.id) == record.content_hash:
                finished[record.id] = record
        return finished

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
