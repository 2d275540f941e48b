"""Build a module from its generation config: load the model factory, apply the compile config.

eager: the model; inductor modes: ``torch.compile`` plus the first call; export: ``torch.export.save``
to ``exported_program.pt2``; aot-inductor: ``aoti_compile_and_package``, loaded by ``aoti_load_package``.
Export and AOTInductor modules run from their artifact directory alone, without the model code.
Kernel counts come from ``generated_kernel_count`` (extern calls such as ``aten.mm`` are not kernels),
FX graph cache hits and misses from ``counters["inductor"]``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchtrail.suite.definitions import CompileMode, Model, ModuleGenerationConfig
from benchtrail.suite.entry_points import ARTIFACTS, INDUCTOR_MODES, ModuleError, load_entry_point
from benchtrail.worker.inputs import SEED, Tensors, model_inputs


def build_model(model: Model, device: str, reference: bool = False) -> torch.nn.Module:
    """Seed torch and call the model's factory (or its reference's); the model in eval mode on ``device``.

    Raises:
        ModuleError: the factory cannot be loaded, raised, or there is no reference to build.
    """
    from benchtrail.worker import functions

    bench = functions.benchmark_of(model)
    if bench is None:
        target = model.reference_entry_point if reference else model.entry_point
    else:
        target = bench.reference if reference else bench.fn
    if target is None:
        raise ModuleError(f"{model.name} has no reference implementation")
    torch.manual_seed(SEED)
    module = load_entry_point(target)() if bench is None else functions.build(bench, model, target, SEED)
    return module.eval().to(device)


@dataclass
class CompiledModule:
    """A callable module; ``compile_time_ms``: wall time from the model to a module that has run once
    (0 for eager); ``stats``: kernel_count (with kernel_count_reason when 0), recompiles, fxgraph_cache_hit
    / _miss."""

    fn: Callable[..., Any]
    compile_time_ms: float
    stats: dict[str, Any]


def compile_module(
    gen: ModuleGenerationConfig, inputs: Tensors, device: str, module_dir: Path | None = None
) -> CompiledModule:
    """Build and compile the model, first call included; export artifacts go to ``module_dir`` (else a
    temporary folder, removed before returning).

    Raises:
        ModuleError: the factory cannot be loaded; else whatever torch raises compiling or exporting.
    """
    model = build_model(gen.model, device)
    mode = gen.compile_config.mode
    if mode is CompileMode.EAGER:
        return CompiledModule(model, 0.0, {})
    import torch._inductor.metrics as inductor_metrics
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    inductor_metrics.reset()
    before = cache_counts()
    externs, graphs = counters["inductor"]["extern_calls"], counters["stats"]["unique_graphs"]
    start = time.perf_counter()
    scratch = None  # the artifact folder of a compile-time sample (no module_dir), removed before returning
    try:
        with torch.no_grad():
            if mode in INDUCTOR_MODES:
                fn = torch.compile(
                    model,
                    backend="inductor",
                    fullgraph=gen.model.fullgraph,
                    mode="max-autotune" if mode is CompileMode.INDUCTOR_MAX_AUTOTUNE else None,
                    options=dict(gen.compile_config.options) or None,
                )
            else:
                program = torch.export.export(model, inputs)
                if module_dir is None:
                    module_dir = scratch = Path(tempfile.mkdtemp(prefix="benchtrail-module-"))
                module_dir.mkdir(parents=True, exist_ok=True)
                path = module_dir / ARTIFACTS[mode]
                if mode is CompileMode.EXPORT:
                    torch.export.save(program, str(path))
                else:
                    torch._inductor.aoti_compile_and_package(program, package_path=str(path))
                fn = _load(mode, path)
            fn(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            elapsed_ms = (time.perf_counter() - start) * 1e3
            stats = {"kernel_count": int(inductor_metrics.generated_kernel_count), **cache_since(before)}
            if not stats["kernel_count"]:
                stats["kernel_count_reason"] = no_kernels_reason(
                    int(counters["inductor"]["extern_calls"] - externs),
                    int(counters["stats"]["unique_graphs"] - graphs) if mode in INDUCTOR_MODES else None,
                )
            # A second call with other values of the same shapes must not compile again.
            frames = counters["frames"]["total"]
            fn(*model_inputs(gen.model, device, seed=SEED + 1))
            stats["recompiles"] = int(counters["frames"]["total"] - frames)
    finally:  # not atexit: a forked worker ends by os._exit, which runs no atexit handler
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return CompiledModule(fn, elapsed_ms, stats)


def no_kernels_reason(extern_calls: int, graphs: int | None) -> str:
    """Why Inductor generated no kernel, from ``counters["inductor"]["extern_calls"]`` and
    ``counters["stats"]["unique_graphs"]`` (None for export and AOTInductor)."""
    if graphs == 0:
        return (
            "Dynamo captured no graph, so Inductor compiled nothing: the code ran eagerly "
            "(graph_count and break_reasons say why)"
        )
    if extern_calls:
        return (
            f"Inductor generated no kernel: the graph's {extern_calls} operation(s) are extern calls of "
            "library kernels (such as aten.mm), which it calls instead"
        )
    return "Inductor generated no kernel: the graph computes nothing (it returns its inputs or views of them)"


#: Inductor's FX graph cache counters (``torch._dynamo.utils.counters["inductor"]``), as responses name them.
_CACHE = ("fxgraph_cache_hit", "fxgraph_cache_miss")


def cache_counts() -> dict[str, int]:
    """FX graph cache hits and misses so far in this process; zeros while Dynamo is not imported
    (an eager worker never imports it: 3 s on a 2-vCPU runner)."""
    if "torch._dynamo.utils" not in sys.modules:
        return dict.fromkeys(_CACHE, 0)
    from torch._dynamo.utils import counters

    return {name: int(counters["inductor"][name]) for name in _CACHE}


def cache_since(before: dict[str, int]) -> dict[str, int]:
    """FX graph cache lookups since ``before``."""
    return {name: n - before[name] for name, n in cache_counts().items()}


def _load(mode: CompileMode, path: Path) -> Callable[..., Any]:
    if mode is CompileMode.EXPORT:
        return torch.export.load(str(path)).module()
    return torch._inductor.aoti_load_package(str(path))


def load_artifact(module_dir: Path) -> Callable[..., Any]:
    """Load an export or AOTInductor module from its directory alone.

    Raises:
        ModuleError: no ``module_info.json``, a mode without an artifact, a missing artifact, or a
            file torch cannot load (corrupt or truncated).
    """
    info_path = module_dir / "module_info.json"
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
        mode = CompileMode(info["compile_config"]["mode"])
    except (OSError, ValueError, KeyError) as exc:
        raise ModuleError(f"{info_path}: cannot read the module's mode ({exc})") from exc
    if mode not in ARTIFACTS:
        raise ModuleError(
            f"{module_dir}: mode {mode.value!r} has no artifact to load; it is built from the model"
        )
    path = module_dir / ARTIFACTS[mode]
    if not path.is_file():
        raise ModuleError(f"{path} is missing: run `benchtrail compile` for this module first")
    try:
        return _load(mode, path)
    except Exception as exc:  # torch raises many types for a bad zip or pickle
        raise ModuleError(
            f"{path} cannot be loaded (corrupt or truncated artifact?): "
            f"{type(exc).__name__}: {str(exc)[:200]}"
        ) from exc


def explain_graphs(gen: ModuleGenerationConfig, inputs: Tensors, device: str) -> dict[str, Any]:
    """``{"graph_count", "graph_breaks", "break_reasons": [{"reason", "location", "count"}]}`` from
    ``torch._dynamo.explain``; location is ``"<file>:<line>"``. Resets Dynamo: call it last."""
    model = build_model(gen.model, device)
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(*inputs)
    reasons = Counter()
    for br in explanation.break_reasons:
        frame = br.user_stack[-1] if br.user_stack else None
        location = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "unknown"
        reasons[(br.reason.splitlines()[0].strip(), location)] += 1
    return {
        "graph_count": int(explanation.graph_count),
        "graph_breaks": int(explanation.graph_break_count),
        "break_reasons": [
            {"reason": r, "location": loc, "count": n} for (r, loc), n in sorted(reasons.items())
        ],
    }
