"""The worker process: compiles one module or runs one case, then exits.

Started as ``python -m benchtrail.worker REQUEST.json RESPONSE.json`` by ``benchtrail.workers``;
a fresh process per case keeps caches, allocator state and Dynamo's counters from leaking
between cases (pyperf and IREE's benchmark driver do the same).
"""

from __future__ import annotations

import gc
import json
import math
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from benchtrail.correctness import check_against_eager
from benchtrail.inputs import make_inputs
from benchtrail.measure import measure
from benchtrail.modules import (ARTIFACTS, INDUCTOR_MODES, ModuleError, compile_module, explain_graphs,
                                load_artifact)
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


def _artifact_bytes(module_dir: Path | None) -> dict[str, int]:
    """Bytes of each artifact file in the module directory, and of the Inductor cache (generated code)."""
    sizes = {}
    if module_dir is not None:
        sizes.update({p.name: p.stat().st_size for p in module_dir.glob("*.pt2")})
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache and Path(cache).is_dir():
        sizes["inductor_cache"] = sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file())
    return sizes


def compile_job(gen: ModuleGenerationConfig, module_dir: Path | None, explain: bool) -> dict[str, Any]:
    """Compile one module (its artifact into ``module_dir`` when given); return its statistics.

    Returns compile_time_ms, peak_rss_bytes, kernel_count, recompiles, FX graph cache hits and
    misses, artifact sizes in bytes, and with ``explain`` the graph count and graph breaks.
    """
    device = _device_for(gen.target_architecture)
    inputs = make_inputs(gen.model.input_specs, device)
    compiled = compile_module(gen, inputs, device, module_dir)
    stats: dict[str, Any] = {"compile_time_ms": compiled.compile_time_ms, "peak_rss_bytes": _peak_rss_bytes(),
                             **compiled.stats, "artifacts": _artifact_bytes(module_dir)}
    if explain:
        mode = gen.compile_config.mode
        if mode in INDUCTOR_MODES:
            stats.update(explain_graphs(gen, inputs, device))
        else:  # torch.export captures one graph or fails
            stats.update({"graph_count": 1, "graph_breaks": 0, "break_reasons": []})
    return stats


def run_job(rc: RunConfig, threads: int, module_dir: Path | None) -> dict[str, Any]:
    """Run one case; return raw samples (µs per iteration), phase times (ms), memory and correctness.

    Eager and Inductor modules are built from the model factory; export and AOTInductor modules
    are loaded from ``module_dir``. A compiled module's output is checked against eager when the
    model code is importable (status ``mismatch`` when it differs beyond the dtype's tolerance).
    """
    torch.set_num_threads(threads)
    gen = rc.module_generation_config
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    device = _device_for(rc.target_device.architecture)
    inputs = make_inputs(gen.model.input_specs, device)
    phases["prep"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    if gen.compile_config.mode in ARTIFACTS:
        if module_dir is None:
            raise CaseFailure("failed", f"{gen.name} runs from its artifact: pass the run directory's modules")
        fn = load_artifact(module_dir)
    else:
        fn = compile_module(gen, inputs, device).fn
    phases["compile"] = (time.perf_counter() - t0) * 1e3

    task = rc.execution_config.task
    if task not in (Task.INFERENCE, Task.FORWARD):
        raise CaseFailure("skipped", f"task {task.value!r} is not run by this benchtrail yet")
    grad = torch.enable_grad if task is Task.FORWARD else torch.no_grad
    with grad():
        output = fn(*inputs)
        _check_finite(output)
        correctness = None
        if gen.compile_config.mode is not CompileMode.EAGER:
            correctness = check_against_eager(gen, inputs, output, device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        t0 = time.perf_counter()
        m = measure(lambda: fn(*inputs), rc.execution_config, sync)
        phases["run"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    del fn, inputs, output
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
        "correctness": correctness,
    }


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Run a request; return ``{"status": ..., "reason": ..., **payload}``. Never raises."""
    try:
        if request["kind"] == "compile":
            (gen,) = unpack_and_deserialize(request["config"], ModuleGenerationConfig)
            module_dir = Path(request["module_dir"]) if request.get("module_dir") else None
            payload = compile_job(gen, module_dir, request.get("explain", True))
        else:
            (rc,) = unpack_and_deserialize(request["config"], RunConfig)
            module_dir = Path(request["module_dir"]) if request.get("module_dir") else None
            payload = run_job(rc, request["threads"], module_dir)
            if payload["correctness"] and not payload["correctness"]["ok"]:
                c = payload["correctness"]
                return {"status": "mismatch", "reason": f"output differs from eager: max abs error "
                        f"{c['max_abs_err']:.3g}, max rel error {c['max_rel_err']:.3g} (atol {c['atol']:g}, "
                        f"rtol {c['rtol']:g})", **payload}
        return {"status": "ok", "reason": None, **payload}
    except CaseFailure as exc:
        return {"status": exc.status, "reason": exc.reason}
    except ModuleError as exc:
        return {"status": "failed", "reason": str(exc)}
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
