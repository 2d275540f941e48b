"""The worker process: compiles one module or runs the cases of one module, then exits.

Started as ``python -m benchtrail.worker REQUEST.json RESPONSE.json`` or forked by the server, which may
hand one process several cases of one module (built once). A fresh process per module keeps caches,
allocator state and Dynamo's counters from leaking between modules, as in pyperf and IREE.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import json
import math
import os
import resource
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchtrail.suite.definitions import Architecture, CompileMode, ModuleGenerationConfig, RunConfig, Task
from benchtrail.suite.entry_points import ARTIFACTS, INDUCTOR_MODES, ModuleError
from benchtrail.suite.serialization import unpack_and_deserialize
from benchtrail.worker import tasks
from benchtrail.worker.build import (
    build_model,
    cache_counts,
    cache_since,
    compile_module,
    explain_graphs,
    load_artifact,
)
from benchtrail.worker.correctness import check_task
from benchtrail.worker.cuda_timing import measure_cuda, parse_oom_bytes, plan_timing
from benchtrail.worker.duet import Duet, DuetError
from benchtrail.worker.functions import BoundFunction
from benchtrail.worker.inputs import Tensors, model_inputs
from benchtrail.worker.mutation import changed_inputs
from benchtrail.worker.protocol import (
    NO_CUDA_REASON,
    CompileRequest,
    ProtocolError,
    Request,
    Response,
    RunRequest,
    read_request,
    refusal,
)
from benchtrail.worker.timing import floor_us, measure, measure_fresh


class CaseFailure(Exception):
    """The case failed in a way we name (the reason), e.g. NaN output."""


def _device_for(architecture: Architecture) -> str:
    if architecture is Architecture.CUDA:
        if not torch.cuda.is_available():
            raise CaseFailure(NO_CUDA_REASON)
        return "cuda"
    return "cpu"


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def compile_job(
    gen: ModuleGenerationConfig, module_dir: Path | None, explain: bool, prime: tuple[str, ...]
) -> dict[str, Any]:
    """Compile one module; compile_time_ms, peak_rss_bytes, kernel_count, recompiles, FX graph cache hits
    and misses, artifact bytes, graph breaks with ``explain``; all taken before the ``prime`` tasks run."""
    device = _device_for(gen.target_architecture)
    inductor = gen.compile_config.mode in INDUCTOR_MODES
    inputs = model_inputs(gen.model, device)
    compiled = compile_module(gen, inputs, device, module_dir)
    # Bytes of each artifact file in the module directory, and of the Inductor cache (generated code).
    artifacts = {p.name: p.stat().st_size for p in module_dir.glob("*.pt2")} if module_dir else {}
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache and Path(cache).is_dir():
        artifacts["inductor_cache"] = sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file())
    stats = {
        "compile_time_ms": compiled.compile_time_ms,
        "peak_rss_bytes": _peak_rss_bytes(),
        **compiled.stats,
        "artifacts": artifacts,
    }
    if prime and inductor:
        stats["prime_ms"] = _prime(gen, prime, device, compiled.fn)
    if explain:  # torch.export captures one graph or fails
        stats.update(
            explain_graphs(gen, inputs, device)
            if inductor
            else {"graph_count": 1, "graph_breaks": 0, "break_reasons": []}
        )
    return stats


def _prime(gen: ModuleGenerationConfig, names: tuple[str, ...], device: str, fn: Any) -> float:
    """Run each named task's first iteration on ``fn`` so its graphs land in the Inductor cache; ms taken.
    A task that fails is left to fail in the run stage."""
    start = time.perf_counter()
    _BUILT.clear()
    _BUILT[(gen.id, device)] = fn
    for name in names:
        try:
            task = Task(name)
            inputs = tasks.prepare_inputs(task, model_inputs(gen.model, device))
            task_fn, _ = task_module(gen, task, inputs, device, None)
            with tasks.grad_mode(task):
                tasks.step(task, task_fn, inputs)()
        except Exception:
            continue
    _BUILT.clear()
    return _ms(start)


def task_module(
    gen: ModuleGenerationConfig, task: Task, inputs: Tensors, device: str, module_dir: Path | None
) -> tuple[Any, str | None]:
    """``(callable, jacobian mode or None)``: the module, or for the Jacobian task its Jacobian function."""
    mode = gen.compile_config.mode
    if mode in ARTIFACTS:
        if task in (Task.BACKWARD, Task.JACOBIAN) and mode is CompileMode.AOT_INDUCTOR:
            raise CaseFailure(f"task {task.value!r} needs autograd; AOTInductor modules run inference only")
        if module_dir is None:
            raise CaseFailure(f"{gen.name} runs from its artifact: pass the run directory's modules")
        fn = _built((str(module_dir), device), lambda: load_artifact(module_dir))
        return tasks.jacobian_fn(fn, inputs, compile_fn=False) if task is Task.JACOBIAN else (fn, None)
    if task is Task.JACOBIAN:  # compile the Jacobian function itself, not the model (see worker.tasks)
        return tasks.jacobian_fn(build_model(gen.model, device), inputs, compile_fn=mode in INDUCTOR_MODES)
    return _built((gen.id, device), lambda: compile_module(gen, inputs, device).fn), None


def _built(key: tuple[str, str], build: Callable[[], Any]) -> Any:
    """The module of ``key``, built once: the cases of one module share it."""
    if key not in _BUILT:
        _BUILT.clear()
        _BUILT[key] = build()
    return _BUILT[key]


#: The module this process built last, by (module id, device): a forked worker's cases share it.
_BUILT: dict[tuple[str, str], Any] = {}


def release_modules() -> None:
    """Drop and collect the built module before ``os._exit``, which runs no destructor: only the AOTInductor
    loader's destructor removes the ``/tmp/aotinductor_*`` folder it extracted."""
    _BUILT.clear()
    gc.collect()


def run_job(
    rc: RunConfig,
    threads: int,
    module_dir: Path | None,
    phases: dict[str, float],
    profile: dict[str, Any] | None,
    pair: Duet | None,
) -> dict[str, Any]:
    """Run one case: samples (µs per iteration), memory, correctness, Jacobian mode, FX graph cache
    lookups of compiling, and with ``profile`` a profile taken after the samples.

    ``phases`` receives each phase's ms as it finishes (a failed case keeps those done): ``prep``,
    ``compile`` (first iteration included), ``check``, ``run``, ``done``. With ``pair`` every timed
    sample starts at the duet barrier.
    """
    torch.set_num_threads(threads)
    gen, task = rc.module_generation_config, rc.execution_config.task
    t0 = time.perf_counter()
    device = _device_for(rc.target_device.architecture)
    pristine = model_inputs(gen.model, device)  # never given to the user's code: copies of them are

    def fresh() -> Tensors:  # deepcopy keeps inputs that share storage sharing it
        return tasks.prepare_inputs(task, copy.deepcopy(pristine))

    inputs = fresh()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    phases["prep"] = _ms(t0)

    t0 = time.perf_counter()
    before = cache_counts()
    versions = [t._version for t in inputs]
    try:
        fn, jacobian_mode = task_module(gen, task, fresh(), device, module_dir)  # compiling calls it once
        iteration = iteration_of(task, fn, inputs)
        with tasks.grad_mode(task):
            output = iteration()
        sync()
    except RuntimeError as exc:
        if "leaf Variable that requires grad is being used in an in-place operation" not in str(exc):
            raise
        raise CaseFailure(
            f"{gen.model.name} changes an input in place, which autograd refuses for an "
            f"input that requires grad (the {task.value} task differentiates its "
            "floating-point inputs): time it with the inference task, or change a copy"
        ) from exc
    if problem := changed_inputs(gen.model, inputs, pristine, versions, "on its first call"):
        raise CaseFailure(problem)
    phases["compile"] = _ms(t0)
    cache = cache_since(before)

    t0 = time.perf_counter()
    if any(
        isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all()
        for t in torch.utils._pytree.tree_leaves(output)
    ):
        raise CaseFailure("output contains NaN or infinity")
    correctness = check_task(task, gen, fresh(), output, device, jacobian_mode)
    phases["check"] = _ms(t0)

    t0 = time.perf_counter()
    found = threads  # the thread count the user's code left, when it changed it

    def before_sample() -> None:
        nonlocal found
        if (now := torch.get_num_threads()) != threads:
            found = now
            torch.set_num_threads(threads)
        if pair is not None:
            pair.wait()

    # CUDA events and the synchronised host clock on a GPU (peak device memory since a reset), else the host
    # clock; a model that changes its inputs is timed one call per sample, each on fresh inputs (host clock).
    policy, mutates = rc.execution_config, gen.model.mutates_inputs
    with tasks.grad_mode(task):
        if device == "cuda" and not mutates:
            cm = measure_cuda(iteration, policy)
            timed = {
                **dataclasses.asdict(cm),
                "samples": cm.samples,
                "iterations_per_sample": cm.timing.launches,
            }
        else:
            m = (
                measure_fresh(lambda f=fn: iteration_of(task, f, fresh()), policy, sync, before_sample)
                if mutates
                else measure(iteration, policy, sync, before_sample)
            )
            timed = {
                **dataclasses.asdict(m),
                "timing": dataclasses.asdict(plan_timing("cpu", None, policy)),
                "memory": {},
            }
    phases["run"] = _ms(t0)
    if (now := torch.get_num_threads()) != threads:
        found = now
    if problem := changed_inputs(gen.model, inputs, pristine, versions, "during the samples"):
        raise CaseFailure(problem)  # a later call changed them: the samples timed changed data
    # Time inside the timed sample blocks, and the rest of the run phase (warm-up and calibration).
    timed_ms = sum(timed["samples"]) * timed["iterations_per_sample"] / 1e3
    timed.update(timed_ms=timed_ms, warmup_ms=max(phases["run"] - timed_ms, 0.0))
    if device != "cuda":
        noop = (
            fn.call(*inputs, target=_noop)
            if isinstance(iteration, functools.partial)
            else (lambda args=inputs: _noop(*args))
        )
        timed["floor_us"] = floor_us(noop, timed["iterations_per_sample"])
    if profile:  # after the samples, never during them; its time is in no phase
        timed["profile"] = _profile(
            iteration, task, device, profile, float(statistics.median_high(timed["samples"]))
        )

    t0 = time.perf_counter()
    del fn, iteration, inputs, output
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    phases["done"] = _ms(t0)
    timed["memory"]["peak_rss_bytes"] = _peak_rss_bytes()
    return {
        **timed,
        **cache,
        "threads": found,
        "threads_set": threads,
        "correctness": correctness,
        "jacobian_mode": jacobian_mode,
    }


def _noop(*args: Any, **kwargs: Any) -> None:
    """What the harness floor calls instead of the user's code."""


def iteration_of(task: Task, fn: Any, inputs: Tensors) -> Any:
    """One timed call: a function benchmark's value is the user's function on pre-bound arguments."""
    if isinstance(fn, BoundFunction) and task in (Task.INFERENCE, Task.FORWARD):
        return fn.call(*inputs)
    return tasks.step(task, fn, inputs)


#: Operators a profile answers at most, largest self CPU time first.
PROFILE_OPERATORS = 50


def _profile(
    iteration: Any, task: Task, device: str, spec: dict[str, Any], sample_us: float
) -> dict[str, Any]:
    """Profile ``spec["iterations"]`` iterations (fewer to fit ``spec["budget_ms"]`` at ``sample_us`` µs
    each), write the Chrome trace to ``spec["trace"]``; ``{iterations, trace, wall_ms, operators}`` with
    ``self_cpu_us`` (and ``self_device_us``) summed over iterations. Never raises: ``{"error": reason}``."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    start = time.perf_counter()
    try:
        n, budget = spec["iterations"], spec.get("budget_ms")
        if budget and sample_us > 0:
            n = max(1, min(n, int(budget * 1e3 / sample_us)))
        gpu = device == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
        with tasks.grad_mode(task), profiler(activities=activities) as prof:
            for _ in range(n):
                iteration()
            if gpu:
                torch.cuda.synchronize()
        Path(spec["trace"]).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(spec["trace"])
        ops = [
            {
                "name": e.key,
                "self_cpu_us": float(e.self_cpu_time_total),
                "count": int(e.count),
                **({"self_device_us": float(e.self_device_time_total)} if gpu else {}),
            }
            for e in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:PROFILE_OPERATORS]
        ]
        return {"iterations": n, "trace": spec["trace"], "wall_ms": _ms(start), "operators": ops}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".strip()[:500]}


def _out_of_memory(exc: BaseException) -> dict[str, Any]:
    """The reason and ``oom`` details of an out-of-memory error, after emptying the CUDA cache."""
    message = str(exc)
    requested = parse_oom_bytes(message)
    if emptied := torch.cuda.is_available():
        torch.cuda.empty_cache()
    asked = f" (requested {requested} bytes)" if requested is not None else ""
    return {
        "reason": f"out of memory{asked}: {message.splitlines()[0] if message else type(exc).__name__}",
        "oom": {"requested_bytes": requested, "cache_emptied": emptied},
    }


def _serve(request: Request, phases: dict[str, float]) -> Response:
    """Run a parsed request; raises what the job raises."""
    module_dir = Path(request.module_dir) if request.module_dir else None
    if isinstance(request, CompileRequest):
        (gen,) = unpack_and_deserialize(request.config, ModuleGenerationConfig)
        return Response(status="ok", **compile_job(gen, module_dir, request.explain, request.tasks))
    (rc,) = unpack_and_deserialize(request.config, RunConfig)
    # A duet on a CPU: the process is pinned to its CPUs first; the response's ``duet`` says so.
    pair = Duet(request.duet) if request.duet and rc.target_device.architecture is Architecture.CPU else None
    try:
        payload = run_job(rc, request.threads, module_dir, phases, request.profile, pair)
    finally:
        done = pair and pair.close()
    c, why = payload["correctness"], None
    if c and not c["ok"]:
        why = (
            f"{c['quantity']} "
            f"{'not checked' if c['max_abs_err'] is None else 'differs from ' + c['against']}: "
            f"{c['error']}"
            if c.get("error")
            else f"{c['quantity']} differs from {c['against']}: max abs error {c['max_abs_err']:.3g}, "
            f"max rel error {c['max_rel_err']:.3g} (atol {c['atol']:g}, rtol {c['rtol']:g})"
        )
    return Response(
        status="mismatch" if why else "ok", reason=why, **payload, duet=done, phase_times_ms=phases
    )


def handle(data: Any) -> Response:
    """Read a request (a JSON object) and run it; never raises. A run response always holds
    ``phase_times_ms``; an unreadable request (e.g. a newer protocol) is answered ``failed``."""
    try:
        request = read_request(data)
    except ProtocolError as exc:
        return refusal(exc)
    phases = {}
    extra = {"phase_times_ms": phases} if isinstance(request, RunRequest) else {}
    try:
        return _serve(request, phases)
    # DuetError: the other arm failed or the runner left.
    except (CaseFailure, tasks.TaskError, DuetError, ModuleError) as exc:
        return Response(status="failed", reason=str(exc), **extra)
    except torch.OutOfMemoryError as exc:
        return Response(status="oom", **_out_of_memory(exc), **extra)
    except Exception as exc:  # one failing case must not stop the others: report it
        return failure_of(exc, **extra)


def failure_of(exc: Exception, **fields: Any) -> Response:
    """The ``failed`` response of an exception, with its last frames; call it in the ``except`` block."""
    return Response(
        status="failed",
        reason=f"{type(exc).__name__}: {exc}".strip()[:2000],
        traceback=traceback.format_exc(limit=-3),
        **fields,
    )


def answer(request_path: str, response_path: str) -> None:
    """Read the request file, run it, and write the response file atomically."""
    response = handle(json.loads(Path(request_path).read_text(encoding="utf-8")))
    if not all(map(math.isfinite, response.samples or ())):
        response = Response(status="failed", reason="a timing sample is not finite")
    partial = Path(response_path + ".partial")
    partial.write_text(json.dumps(response.to_json()), encoding="utf-8")
    partial.replace(response_path)
