"""The worker process: compiles one module or runs one case, then exits.

Started as ``python -m benchtrail.worker REQUEST.json RESPONSE.json`` by ``benchtrail.workers``;
a fresh process per case keeps caches, allocator state and Dynamo's counters from leaking
between cases (pyperf and IREE's benchmark driver do the same).
"""

from __future__ import annotations

import gc
import json
import math
import resource
import sys
import time
import traceback
from typing import Any

import torch

from benchtrail.inputs import make_inputs
from benchtrail.measure import measure
from benchtrail.modules import compile_module, explain_graphs
from benchtrail.suite.definitions import Architecture, CompileMode, ModuleGenerationConfig, RunConfig, Task
from benchtrail.suite.serialization import unpack_and_deserialize


class CaseFailure(Exception):
    """The case failed in a way we name (status and reason), e.g. NaN output."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _device_for(architecture: Architecture) -> str:
    if architecture is Architecture.CUDA:
        if not torch.cuda.is_available():
            raise CaseFailure(
                "failed", "CUDA run config on a machine without CUDA; refusing to run it on the CPU"
            )
        return "cuda"
    return "cpu"


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _check_finite(output: Any) -> None:
    for t in torch.utils._pytree.tree_leaves(output):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all():
            raise CaseFailure("failed", "output contains NaN or infinity")


def compile_job(gen: ModuleGenerationConfig) -> dict[str, Any]:
    """Compile one module; return its compile statistics (see ``modules.compile_module``)."""
    device = _device_for(gen.target_architecture)
    inputs = make_inputs(gen.model.input_specs, device)
    compiled = compile_module(gen, inputs, device)
    rss = _peak_rss_bytes()  # before explain, which traces the model again
    graphs = explain_graphs(gen, inputs, device) if gen.compile_config.mode is not CompileMode.EAGER else {}
    return {"compile_time_ms": compiled.compile_time_ms, "peak_rss_bytes": rss, **compiled.cache, **graphs}


def run_job(rc: RunConfig, threads: int) -> dict[str, Any]:
    """Run one case; return raw samples (µs per iteration), phase times (ms) and memory."""
    torch.set_num_threads(threads)
    gen = rc.module_generation_config
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    device = _device_for(rc.target_device.architecture)
    inputs = make_inputs(gen.model.input_specs, device)
    phases["prep"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    compiled = compile_module(gen, inputs, device)
    phases["compile"] = (time.perf_counter() - t0) * 1e3

    task = rc.execution_config.task
    if task not in (Task.INFERENCE, Task.FORWARD):
        raise CaseFailure("skipped", f"task {task.value!r} is not run by this benchtrail yet")
    grad = torch.enable_grad if task is Task.FORWARD else torch.no_grad
    with grad():
        _check_finite(compiled.fn(*inputs))
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        t0 = time.perf_counter()
        m = measure(lambda: compiled.fn(*inputs), rc.execution_config, sync)
        phases["run"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    del compiled, inputs
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    phases["done"] = (time.perf_counter() - t0) * 1e3
    return {
        "samples": list(m.samples_us),
        "iterations_per_sample": m.iterations_per_sample,
        "warmup_iterations": m.warmup_iterations,
        "phase_times_ms": phases,
        "memory": {"peak_rss_bytes": _peak_rss_bytes()},
        "threads": torch.get_num_threads(),
    }


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run a request; return ``{"status": ..., "reason": ..., **payload}``. Never raises."""
    try:
        if request["kind"] == "compile":
            (gen,) = unpack_and_deserialize(request["config"], ModuleGenerationConfig)
            payload = compile_job(gen)
        else:
            (rc,) = unpack_and_deserialize(request["config"], RunConfig)
            payload = run_job(rc, request["threads"])
        return {"status": "ok", "reason": None, **payload}
    except CaseFailure as exc:
        return {"status": exc.status, "reason": exc.reason}
    except torch.OutOfMemoryError as exc:
        return {"status": "oom", "reason": f"out of memory: {str(exc).splitlines()[0]}"}
    except Exception as exc:  # one failing case must not stop the others: report it
        tb = traceback.format_exc(limit=-3)
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}".strip()[:2000], "traceback": tb}


def main(argv: list[str]) -> int:
    request_path, response_path = argv
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    response = handle(request)
    if any(isinstance(v, float) and not math.isfinite(v) for v in response.get("samples", [])):
        response = {"status": "failed", "reason": "a timing sample is not finite"}
    with open(response_path, "w", encoding="utf-8") as f:
        json.dump(response, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
