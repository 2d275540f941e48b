"""The run stage: run each case of one device's shard in its own worker and record the result."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.results.schema import BenchmarkRecord
from benchtrail.runner.compile_modules import INDUCTOR_CACHE, MODULE_SCHEMA_VERSION
from benchtrail.stats.inference import NOISE_RERUN, noise
from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.definitions import Architecture, CompileMode, RunConfig
from benchtrail.suite.entry_points import ARTIFACTS, INDUCTOR_MODES
from benchtrail.suite.names import module_dir as module_dir_of
from benchtrail.suite.serialization import from_plain
from benchtrail.worker.protocol import NO_CUDA_REASON, WITH_SAMPLES, Response, run_request

#: A stage's progress callback: ``report(case name, status)``.
Progress = Callable[[str, str], None]


#: The fields of a :class:`CaseResult`, and of a worker's answer, that are not its record's ``details``.
_NOT_DETAILS = ("status", "reason", "samples", "answer", "profile", "duet", "version")


@dataclass
class CaseResult:
    """One case's worker answers folded into what its record keeps.

    ``samples`` are µs per iteration. The last ``answer``'s run fields, then every other field set here,
    go to the record's ``details``: times summed over the processes (``timed_ms``: inside timed sample
    blocks; ``warmup_ms``: warm-up and calibration; ``wall_time_ms``: the case's phases plus its share of
    each process's other time), Inductor cache hits and misses, GPU samples pooled (µs).
    """

    status: str
    reason: str | None = None
    samples: list[float] = field(default_factory=list)
    answer: Response | None = None
    profile: dict[str, Any] | None = None
    process_medians: list[float] | None = None
    phase_times_ms: dict[str, float] | None = None
    timed_ms: float | None = None
    warmup_ms: float | None = None
    process_starts: int | None = None
    wall_time_ms: float | None = None
    fxgraph_cache_hit: int | None = None
    fxgraph_cache_miss: int | None = None
    gpu_samples_us: tuple[float, ...] | None = None
    wall_samples_us: tuple[float, ...] | None = None
    rerun: dict[str, Any] | None = None
    ab: dict[str, Any] | None = None

    @classmethod
    def of(cls, answer: Response) -> CaseResult:
        """The result of one answer."""
        return cls(answer.status, answer.reason, list(answer.samples or ()), answer)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def take(self, answer: Response) -> None:
        """Pool an ok answer's samples and their median; it becomes the last answer."""
        self.answer = answer
        self.samples += answer.samples or ()
        self.process_medians.append(float(np.median(answer.samples or ())))

    def add(self, **values: Any) -> None:
        """Add each value to its field (a number summed, samples appended); None adds nothing."""
        for key, value in values.items():
            if value is not None:
                old = getattr(self, key)
                setattr(self, key, value if old is None else old + value)

    def details(self) -> dict[str, Any]:
        """The record's ``details``."""
        a = self.answer
        answered = (
            {
                k: v
                for k, v in vars(a).items()  # a run's WITH_SAMPLES fields are kept also when null
                if v is not None or (a.samples is not None and k in WITH_SAMPLES)
            }
            if a
            else {}
        )
        kept = answered | {k: v for k, v in vars(self).items() if v is not None}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in kept.items() if k not in _NOT_DETAILS}


def group_key(rc: RunConfig) -> tuple:
    """Cases measured in one worker process share this key: module, input shape, device, process count."""
    gen = rc.module_generation_config
    return (
        gen.id,
        tuple(gen.model.input_specs),
        rc.target_device.name,
        rc.target_device.threads,
        rc.execution_config.processes,
    )


def _order(rcs: list[RunConfig], process: int) -> list[RunConfig]:
    """The cases shuffled, seeded by their ids and ``process``, so no case is always measured first."""
    rng = random.Random(hashlib.sha256(("|".join(rc.id for rc in rcs) + f"|{process}").encode()).digest())
    shuffled = list(rcs)
    rng.shuffle(shuffled)
    return shuffled


def run_module_cases(
    rcs: list[RunConfig], module_dir: Path | None = None, env: dict[str, str] | None = None
) -> dict[str, CaseResult]:
    """Run cases of one :func:`group_key` in ``processes`` fresh worker processes; pool the samples by run
    config id.

    A case that raises still runs in later processes and ends ``failed``, reason ``1 of 3 processes raised:
    <the first reason>``; one that times out or crashes its process ends with that answer, and the cases
    after it rerun in a fresh process. Never raises.
    """
    cases = {
        rc.id: CaseResult("ok", process_medians=[], phase_times_ms={}, timed_ms=0.0, warmup_ms=0.0)
        for rc in rcs
    }
    raised = {rc.id: [] for rc in rcs}
    for process in range(rcs[0].execution_config.processes):
        todo = [rc for rc in _order(rcs, process) if cases[rc.id].ok]
        while todo:  # the cases a crash or timeout of another case kept from running go to a fresh process
            todo = _one_process(todo, module_dir, env, cases, raised)
    for rc in rcs:
        case, failures = cases[rc.id], raised[rc.id]
        if not case.ok:  # ended by its answer, with that answer's samples
            case.samples = list(case.answer.samples or ())
            case.gpu_samples_us = case.wall_samples_us = None
        elif failures:
            case.answer = failures[0]
        case.status, case.reason = case.answer.status, case.answer.reason
        if case.status == "failed" and case.process_medians:  # some raised: how many; the good samples
            k = len(failures)
            case.reason = f"{k} of {k + len(case.process_medians)} processes raised: {case.reason}"
    return cases


def _one_process(
    todo: list[RunConfig],
    module_dir: Path | None,
    env: dict[str, str] | None,
    cases: dict[str, CaseResult],
    raised: dict[str, list[Response]],
) -> list[RunConfig]:
    """Run ``todo`` in one worker process, folding answers into ``cases`` (raises into ``raised``); return
    the cases not started because an earlier one crashed or timed out."""
    from benchtrail.runner.launch import NOT_RUN, run_in_workers

    start = time.perf_counter()
    responses = run_in_workers(
        [run_request(rc, module_dir) for rc in todo],
        [rc.execution_config.timeout_s for rc in todo],
        todo[0].target_device.threads,
        env=env,
    )
    wall = (time.perf_counter() - start) * 1e3
    answered = [(rc, r) for rc, r in zip(todo, responses) if r.status != NOT_RUN]
    spent = sum(sum((r.phase_times_ms or {}).values()) for _, r in answered)
    for rc, response in answered:
        case, phases = cases[rc.id], response.phase_times_ms or {}
        for phase, ms in phases.items():
            case.phase_times_ms[phase] = case.phase_times_ms.get(phase, 0.0) + ms
        case.add(
            process_starts=1,
            wall_time_ms=sum(phases.values()) + max(wall - spent, 0.0) / len(answered),
            timed_ms=response.timed_ms,
            warmup_ms=response.warmup_ms,
            fxgraph_cache_hit=response.fxgraph_cache_hit,
            fxgraph_cache_miss=response.fxgraph_cache_miss,
        )
        if response.status == "failed":  # the case's code raised: the other processes still run it
            raised[rc.id].append(response)
            continue
        case.answer, case.status = response, response.status
        if response.ok:
            case.take(response)
            case.add(gpu_samples_us=response.gpu_samples_us, wall_samples_us=response.wall_samples_us)
    return [rc for rc, r in zip(todo, responses) if r.status == NOT_RUN]


def run_case(rc: RunConfig) -> CaseResult:
    """One case alone in ``processes`` fresh worker processes."""
    return run_module_cases([rc])[rc.id]


def _with_rerun(first: CaseResult, rerun: CaseResult, first_noise: float) -> CaseResult:
    """The rerun's result, both attempts' counts summed, the first run's samples and times under ``rerun``."""
    result = replace(
        rerun,
        rerun={
            "reason": f"IQR/median {first_noise:.1%} above {NOISE_RERUN:.0%}",
            "first_noise": first_noise,
            **{
                f"first_{k}": getattr(first, k)
                for k in (
                    "samples",
                    "process_medians",
                    "wall_time_ms",
                    "timed_ms",
                    "warmup_ms",
                    "phase_times_ms",
                )
            },
        },
    )
    result.add(
        process_starts=first.process_starts,
        fxgraph_cache_hit=first.fxgraph_cache_hit,
        fxgraph_cache_miss=first.fxgraph_cache_miss,
    )
    return result


#: Environment variable that turns the noise rerun off (``0``) or on (``1``, the default; unset or empty too).
NOISE_RERUN_ENV = "BENCHTRAIL_NOISE_RERUN"


def noise_rerun_enabled() -> bool:
    """``BENCHTRAIL_NOISE_RERUN`` is ``1``, unset or empty (``0``: no rerun, for budget-bound jobs and tests).

    Raises:
        UserError: any other value.
    """
    value = os.environ.get(NOISE_RERUN_ENV, "")
    if value.strip() not in ("", "0", "1"):
        raise UserError(
            f"{NOISE_RERUN_ENV}={value!r}: allowed: 1 (rerun a case noisier than "
            f"{NOISE_RERUN:.0%} once, the default), 0 (never rerun), unset or empty (as 1)"
        )
    return value.strip() != "0"


def run_module_cases_with_rerun(
    rcs: list[RunConfig], module_dir: Path | None, env: dict[str, str], rerun: bool
) -> dict[str, CaseResult]:
    """:func:`run_module_cases`, then (with ``rerun``) the cases whose IQR/median exceeds ``NOISE_RERUN``
    (10%) once more, together. The rerun's samples replace the first whatever their noise (keeping the
    quieter would favour lucky runs); the first run's are kept under ``rerun``.
    """
    first = run_module_cases(rcs, module_dir, env)
    noisy = {
        i: n
        for i, r in first.items()
        if rerun and r.ok and r.samples and (n := float(noise([r.samples])[0])) > NOISE_RERUN
    }
    if not noisy:
        return first
    second = run_module_cases([rc for rc in rcs if rc.id in noisy], module_dir, env)
    return {**first, **{i: _with_rerun(first[i], second[i], n) for i, n in noisy.items()}}


#: Modes whose kernels Inductor builds for this machine (``-march=native``: AVX-512 here, which valgrind
#: cannot run; rebuilding them under valgrind costs a minute a case): not counted.
NATIVE_MODES = frozenset((*INDUCTOR_MODES, CompileMode.AOT_INDUCTOR))


def countable(rc: RunConfig) -> bool:
    """A CPU case of a mode without native kernels (eager, export)."""
    return (
        rc.target_device.architecture is Architecture.CPU
        and rc.module_generation_config.compile_config.mode not in NATIVE_MODES
    )


def case_fields(rc: RunConfig, torch_version: str) -> dict[str, Any]:
    """The record fields that a case's run config gives."""
    gen = rc.module_generation_config
    return {
        "device_name": rc.target_device.name,
        "module_name": gen.name,
        "compile_config": gen.compile_config.name,
        "task": rc.execution_config.task.value,
        "content_hash": content_hash(rc, torch_version),
        "presets": rc.presets,
    }


def case_record(
    rc: RunConfig, result: CaseResult, torch_version: str, gate_instructions: bool = False
) -> BenchmarkRecord:
    """The execution series ``<run config id>`` (µs per iteration); a counted case on a device marked
    ``count_instructions``, or with ``gate_instructions``, gets ``details.gate: instructions`` (not gated)."""
    counted = rc.target_device.count_instructions or gate_instructions
    gate = {"gate": "instructions"} if counted and countable(rc) else {}
    return BenchmarkRecord.of(
        "latency",
        tuple(float(s) for s in result.samples),
        id=rc.id,
        name=rc.name,
        status=result.status,
        reason=result.reason,
        details=result.details() | gate,
        **case_fields(rc, torch_version),
    )


def compiled_dir(rc: RunConfig, modules_dir: Path | None) -> Path | None:
    """``rc``'s compiled module folder in the run directory ``modules_dir``; None without one."""
    return modules_dir / module_dir_of(rc.module_generation_config.name) if modules_dir else None


def cache_env(modules_dir: Path | None) -> dict[str, str]:
    """``TORCHINDUCTOR_CACHE_DIR`` of the compile stage's cache under ``modules_dir`` if there, else empty."""
    cache = modules_dir / "modules" / INDUCTOR_CACHE if modules_dir else None
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache.resolve())} if cache and cache.is_dir() else {}


def module_problem(rc: RunConfig, modules_dir: Path) -> str | None:
    """Why ``rc`` cannot run from its compiled module, or None when it can or needs no artifact: ``module
    <name> failed to compile: <its reason>``, ``module <name> was not compiled: no <path> ...``, or a reason
    naming an unreadable ``compile-stats.json``. Never raises.
    """
    gen = rc.module_generation_config
    artifact = ARTIFACTS.get(gen.compile_config.mode)
    if artifact is None:
        return None
    folder = compiled_dir(rc, modules_dir)
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
    report: Progress,
    modules_dir: Path | None,
    on_record: Callable[[BenchmarkRecord], None],
    cuda: bool,
    rerun: bool,
    gate_instructions: bool = False,
) -> list[BenchmarkRecord]:
    """Run every case, a module's cases together in each fresh worker process; records in the order of
    ``run_configs``, each passed to ``on_record`` as its case finishes. A failing case never stops the
    others; a case whose module is missing from ``modules_dir`` (:func:`module_problem`), or a CUDA case
    without ``cuda``, is recorded ``failed`` without starting a worker.
    """
    env = cache_env(modules_dir)
    groups = {}
    for rc in run_configs:
        groups.setdefault(group_key(rc), []).append(rc)
    by_id = {}
    for group in groups.values():
        problems = {
            rc.id: NO_CUDA_REASON
            if not cuda and rc.target_device.architecture is Architecture.CUDA
            else modules_dir and module_problem(rc, modules_dir)
            for rc in group
        }
        ready = [rc for rc in group if not problems[rc.id]]
        results = (
            run_module_cases_with_rerun(ready, compiled_dir(group[0], modules_dir), env, rerun)
            if ready
            else {}
        )
        for rc in group:
            result = results.get(rc.id) or CaseResult("failed", problems[rc.id])
            record = by_id[rc.id] = case_record(rc, result, torch_version, gate_instructions)
            on_record(record)
            report(rc.name, record.status)
    return [by_id[rc.id] for rc in run_configs]


@dataclass(frozen=True)
class Journal:
    """Finished cases of a run stage, one JSON record per line fsynced as each finishes, for ``--continue``;
    a torn last line is ignored."""

    path: Path

    def append(self, record: BenchmarkRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(dataclasses.asdict(record), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def refuse_stale(self) -> dict[str, BenchmarkRecord]:
        """Without ``--continue`` a journal left by an earlier run is an error (nothing is lost)."""
        if self.path.exists():
            raise UserError(
                f"{self.path} holds the cases of a run that stopped part-way: pass --continue to "
                "resume it, or delete the file to start again"
            )
        return {}

    def load(self, run_configs: tuple[RunConfig, ...], torch_version: str) -> dict[str, BenchmarkRecord]:
        """Records by run config id whose run config is in ``run_configs`` with an unchanged content hash."""
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
