"""The run stage: run each case of one device's shard in its own worker and record the result."""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail.errors import UserError
from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.entry_points import ARTIFACTS
from benchtrail.results.schema import BenchmarkRecord, metric_direction
from benchtrail.stats.inference import NOISE_RERUN, noise
from benchtrail.results.summary import summarize
from benchtrail.suite.definitions import Architecture, RunConfig
from benchtrail.suite.names import module_dir as module_dir_of
from benchtrail.worker.protocol import NO_CUDA_REASON, run_request

#: Per-sample lists a GPU worker returns besides ``samples``; pooled over processes like them.
POOLED_GPU_KEYS = ("gpu_samples_us", "wall_samples_us")


def group_key(rc: RunConfig) -> tuple:
    """Cases measured in one worker process share this key: one module (built and compiled once per
    process), one input shape, one device and process count (``benchtrail.worker.main``)."""
    gen = rc.module_generation_config
    return (gen.id, tuple(gen.model.input_specs), rc.target_device.name, rc.target_device.threads,
            rc.execution_config.processes)


def _order(rcs: list[RunConfig], process: int) -> list[RunConfig]:
    """The cases of one process in a shuffled order, the same on every run (seeded by the cases' ids
    and the process index), so no case is always measured first, right after the compile."""
    rng = random.Random(hashlib.sha256(("|".join(rc.id for rc in rcs) + f"|{process}").encode()).digest())
    shuffled = list(rcs)
    rng.shuffle(shuffled)
    return shuffled


def run_module_cases(rcs: list[RunConfig], module_dir: Path | None = None,
                     env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Run cases of one :func:`group_key` in ``processes`` fresh worker processes, and pool the samples.

    Each process builds the module once and measures every case still ok, in a shuffled order
    (:func:`_order`). Returns, per run config id, the last worker response with every process's samples,
    ``process_medians`` (µs), ``phase_times_ms`` summed over the processes, ``timed_ms`` and
    ``warmup_ms`` (time inside timed sample blocks, and warm-up with calibration, summed),
    ``process_starts``, ``fxgraph_cache_hit`` and ``_miss`` summed (Inductor graphs loaded from the
    cache, and compiled: workers from before issue 18 do not report them), on a GPU both times' samples pooled (``gpu_samples_us``, ``wall_samples_us``),
    and ``wall_time_ms``: the case's phases plus its share of each process's time outside any case's
    phases (start, import, teardown). A case whose code raises in a process (status ``failed``) still runs in
    the later ones, and ends ``failed`` with the good processes' samples and the reason ``1 of 3 processes
    raised: <the first reason>`` (its samples are never compared: the row is ``failed``), or the first reason
    when every process raised; a case that times
    out or crashes its process ends with that status and is not run in later processes. The cases after it in
    that process run again in a fresh one (never raises).
    """
    state = {rc.id: {"samples": [], "process_medians": [], "phase_times_ms": {}, "pooled": {}, "timed_ms": 0.0,
                     "warmup_ms": 0.0, "process_starts": 0, "wall_time_ms": 0.0, "cache": {}, "raised": []}
             for rc in rcs}
    done: dict[str, dict[str, Any]] = {}
    for process in range(rcs[0].execution_config.processes):
        todo = [rc for rc in _order(rcs, process) if rc.id not in done]
        while todo:  # the cases a crash or timeout of another case kept from running go to a fresh process
            todo = _one_process(todo, module_dir, env, state, done)
    out = {}
    for rc in rcs:
        case = state[rc.id]
        timing = {**{k: case[k] for k in ("process_medians", "phase_times_ms", "timed_ms", "warmup_ms",
                                          "process_starts", "wall_time_ms")}, **case["cache"]}
        if rc.id in done:
            out[rc.id] = {**done[rc.id], **timing}
        elif case["raised"]:  # every process raised: its reason; some did: how many, and the good samples
            first, k, ok = case["raised"][0], len(case["raised"]), len(case["process_medians"])
            out[rc.id] = {**first, "samples": case["samples"], **case["pooled"], **timing,
                          **({"reason": f"{k} of {k + ok} processes raised: {first.get('reason')}"} if ok else {})}
        else:
            out[rc.id] = {**case["last"].as_dict(), "samples": case["samples"], **case["pooled"], **timing}
    return out


def _one_process(todo: list[RunConfig], module_dir: Path | None, env: dict[str, str] | None,
                 state: dict[str, dict[str, Any]], done: dict[str, dict[str, Any]]) -> list[RunConfig]:
    """Run ``todo`` in one worker process and add each answer to ``state`` (a failure to ``done``);
    return the cases it did not start (``NOT_RUN``: an earlier case crashed or timed out)."""
    from benchtrail.runner.workers import NOT_RUN, run_in_workers

    start = time.perf_counter()
    responses = run_in_workers([run_request(rc, module_dir) for rc in todo],
                               [rc.execution_config.timeout_s for rc in todo], todo[0].target_device.threads, env=env)
    wall = (time.perf_counter() - start) * 1e3
    answered = [(rc, r) for rc, r in zip(todo, responses) if r.status != NOT_RUN]
    spent = sum(sum((r.phase_times_ms or {}).values()) for _, r in answered)
    for rc, response in answered:
        case = state[rc.id]
        case["process_starts"] += 1
        for phase, ms in (response.phase_times_ms or {}).items():
            case["phase_times_ms"][phase] = case["phase_times_ms"].get(phase, 0.0) + ms
        case["wall_time_ms"] += sum((response.phase_times_ms or {}).values()) + max(wall - spent, 0.0) / len(answered)
        case["timed_ms"] += response.timed_ms or 0.0
        case["warmup_ms"] += response.warmup_ms or 0.0
        for key in ("fxgraph_cache_hit", "fxgraph_cache_miss"):  # graphs loaded from and compiled into the cache
            if getattr(response, key) is not None:
                case["cache"][key] = case["cache"].get(key, 0) + getattr(response, key)
        case["last"] = response
        if response.status == "failed":  # the case's code raised: the other processes still run it
            case["raised"].append(response.as_dict())
            continue
        if not response.ok:
            done[rc.id] = response.as_dict()
            continue
        case["samples"].extend(response.samples or ())
        case["process_medians"].append(float(np.median(response.samples or ())))
        for key in POOLED_GPU_KEYS:
            if getattr(response, key) is not None:
                case["pooled"].setdefault(key, []).extend(getattr(response, key))
    return [rc for rc, r in zip(todo, responses) if r.status == NOT_RUN]


def run_case(rc: RunConfig, module_dir: Path | None = None) -> dict[str, Any]:
    """One case alone in ``processes`` fresh worker processes (:func:`run_module_cases` of one case)."""
    return run_module_cases([rc], module_dir)[rc.id]


def _noisy(response: dict[str, Any]) -> float | None:
    """The IQR/median of an ok response's samples when above ``NOISE_RERUN``, else None."""
    if response["status"] != "ok" or not response["samples"]:
        return None
    first_noise = float(noise([response["samples"]])[0])
    return first_noise if first_noise > NOISE_RERUN else None


def _with_rerun(first: dict[str, Any], rerun: dict[str, Any], first_noise: float) -> dict[str, Any]:
    """The rerun's response, with the first run's samples, medians and noise under ``rerun``."""
    counts = {k: first.get(k, 0) + rerun.get(k, 0) for k in ("process_starts", "fxgraph_cache_hit", "fxgraph_cache_miss")
              if k in first or k in rerun}  # both attempts' processes
    return {**rerun, **counts,
            "rerun": {"reason": f"IQR/median {first_noise:.1%} above {NOISE_RERUN:.0%}",
                      "first_noise": first_noise, "first_samples": first["samples"],
                      "first_process_medians": first["process_medians"],
                      "first_wall_time_ms": first["wall_time_ms"], "first_timed_ms": first["timed_ms"],
                      "first_warmup_ms": first["warmup_ms"], "first_phase_times_ms": first["phase_times_ms"]}}


#: Environment variable that turns the noise rerun off (``0``) or on (``1``, the default; unset or empty too).
NOISE_RERUN_ENV = "BENCHTRAIL_NOISE_RERUN"


def noise_rerun_enabled() -> bool:
    """Whether the run stage reruns a noisy case: ``BENCHTRAIL_NOISE_RERUN`` is ``1``, unset or empty.

    ``0`` saves the rerun's run time (it doubles a noisy case's) where that matters more than a second draw:
    a budget-bound CI job, or this project's tests, which check what runs record, not how precisely they measure.

    Raises:
        UserError: any other value, naming the variable, the value and the allowed ones.
    """
    value = os.environ.get(NOISE_RERUN_ENV, "")
    setting = value.strip()
    if setting not in ("", "0", "1"):
        raise UserError(f"{NOISE_RERUN_ENV}={value!r}: allowed: 1 (rerun a case noisier than "
                        f"{NOISE_RERUN:.0%} once, the default), 0 (never rerun), unset or empty (as 1)")
    return setting != "0"


def run_module_cases_with_rerun(rcs: list[RunConfig], module_dir: Path | None = None,
                                env: dict[str, str] | None = None, rerun: bool = True) -> dict[str, dict[str, Any]]:
    """:func:`run_module_cases`, then (with ``rerun``) the cases whose samples' IQR/median exceeds
    ``NOISE_RERUN`` (10%) once more, together.

    The rerun's samples replace the first ones whatever their noise (keeping the quieter of the two
    would bias the result towards lucky runs); the first run's samples, process medians, noise,
    wall time, timed and warm-up time and phases are kept under ``rerun``. A row still noisier than ``NOISE_LIMIT`` after the
    rerun is labelled ``noisy`` in the comparison (its interval still decides its verdict).
    """
    first = run_module_cases(rcs, module_dir, env)
    if not rerun:
        return first
    noisy = {rc.id: n for rc in rcs if (n := _noisy(first[rc.id])) is not None}
    if not noisy:
        return first
    second = run_module_cases([rc for rc in rcs if rc.id in noisy], module_dir, env)
    return {**first, **{i: _with_rerun(first[i], second[i], n) for i, n in noisy.items()}}


def case_record(rc: RunConfig, response: dict[str, Any], torch_version: str) -> BenchmarkRecord:
    """Turn a worker response into the execution series ``<run config id>`` (unit µs per iteration)."""
    samples = tuple(float(s) for s in response.get("samples", ()))
    details = {k: response[k] for k in ("phase_times_ms", "memory", "iterations_per_sample",
                                        "warmup_iterations", "threads", "traceback", "process_medians",
                                        "correctness", "rerun", "wall_time_ms", "jacobian_mode", "timing",
                                        "gpu_samples_us", "wall_samples_us", "oom", "timed_ms", "warmup_ms",
                                        "process_starts", "fxgraph_cache_hit", "fxgraph_cache_miss", "floor_us",
                                        "threads_set")
               if k in response}
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
    cuda: bool = True,
    rerun: bool = True,
) -> list[BenchmarkRecord]:
    """Run every case (with ``rerun``, a noisy case once more: :func:`run_module_cases_with_rerun`), the cases
    of one module together in each of their fresh worker processes (:func:`run_module_cases`); a failing
    case never stops the others. Records come back in the order of ``run_configs``.

    ``modules_dir`` is the run directory whose ``modules/<slug(name)>/`` hold export and AOTInductor artifacts;
    a case whose module failed to compile or was not compiled there (:func:`module_problem`) is
    recorded ``failed`` with that reason and no worker is started for it; so is each CUDA case when ``cuda``
    is false (torch sees no GPU here: reason ``benchtrail.worker.protocol.NO_CUDA_REASON``, the one its worker
    would give after importing torch, Dynamo and Inductor). ``on_record`` gets each record as soon as its case
    finishes (``Journal.append``).
    """
    env = inductor_cache_env(modules_dir)
    groups: dict[tuple, list[RunConfig]] = {}
    for rc in run_configs:
        groups.setdefault(group_key(rc), []).append(rc)
    by_id: dict[str, BenchmarkRecord] = {}
    for group in groups.values():
        module_dir = modules_dir / module_dir_of(group[0].module_generation_config.name) if modules_dir else None
        problems = {rc.id: module_problem(rc, modules_dir) for rc in group} if modules_dir else {}
        if not cuda:
            problems |= {rc.id: NO_CUDA_REASON for rc in group if rc.target_device.architecture is Architecture.CUDA}
        ready = [rc for rc in group if not problems.get(rc.id)]
        responses = run_module_cases_with_rerun(ready, module_dir, env, rerun) if ready else {}
        for rc in group:
            problem = problems.get(rc.id)
            response = {"status": "failed", "reason": problem} if problem else responses[rc.id]
            record = case_record(rc, response, torch_version)
            on_record(record)
            by_id[rc.id] = record
            report(rc.name, record.status)
    return [by_id[rc.id] for rc in run_configs]


def inductor_cache_env(modules_dir: Path | None) -> dict[str, str]:
    """``TORCHINDUCTOR_CACHE_DIR`` of the run stage's workers: the compile stage's cache
    (``<modules_dir>/modules/inductor-cache``) when it is there, else nothing (Inductor's default)."""
    from benchtrail.runner.compile_modules import INDUCTOR_CACHE

    if modules_dir is None or not (modules_dir / "modules" / INDUCTOR_CACHE).is_dir():
        return {}
    return {"TORCHINDUCTOR_CACHE_DIR": str((modules_dir / "modules" / INDUCTOR_CACHE).resolve())}


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
