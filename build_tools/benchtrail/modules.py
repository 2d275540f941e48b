"""Build a module from its generation config: load the model factory, apply the compile config.

Graph counts and graph-break reasons come from torch's own ``torch._dynamo.explain``; FX graph
cache hits and misses from ``torch._dynamo.utils.counters["inductor"]``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import time
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchtrail.inputs import SEED
from benchtrail.suite.definitions import CompileMode, Model, ModuleGenerationConfig


def load_entry_point(entry_point: str) -> Callable[[], torch.nn.Module]:
    """Import ``"package.module:function"`` and return the function.

    Raises:
        ValueError: the entry point is malformed or names nothing.
    """
    module_name, sep, attr = entry_point.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"entry point {entry_point!r} is not of the form 'package.module:function'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load entry point {entry_point!r}: {exc}") from exc


def build_model(entry_point: str, device: str = "cpu") -> torch.nn.Module:
    """Seed torch, call the factory, return the model in eval mode on ``device``."""
    torch.manual_seed(SEED)
    return load_entry_point(entry_point)().eval().to(device)


def model_source_digest(model: Model) -> str:
    """sha256 (hex) of the source files of the model's factory and reference modules."""
    hasher = hashlib.sha256()
    for entry in filter(None, (model.entry_point, model.reference_entry_point)):
        module = importlib.import_module(entry.partition(":")[0])
        hasher.update(inspect.getsource(module).encode("utf-8"))
    return hasher.hexdigest()


@dataclass
class CompiledModule:
    """A callable module and what compiling it cost.

    Attributes:
        fn: call with the sample inputs.
        compile_time_ms: wall time of compilation including the first call (0 for eager).
        cache: Inductor FX graph cache hits and misses during compilation.
    """

    fn: Callable[..., Any]
    compile_time_ms: float
    cache: dict[str, int]


def compile_module(gen: ModuleGenerationConfig, inputs: tuple[torch.Tensor, ...], device: str) -> CompiledModule:
    """Build the model and compile it by ``gen.compile_config``; the first call is part of compiling.

    Raises:
        NotImplementedError: a compile mode this version does not build yet.
    """
    model = build_model(gen.model.entry_point, device)
    mode = gen.compile_config.mode
    if mode is CompileMode.EAGER:
        return CompiledModule(model, 0.0, {})
    if mode not in (CompileMode.INDUCTOR, CompileMode.INDUCTOR_MAX_AUTOTUNE):
        raise NotImplementedError(f"compile mode {mode.value!r} is not built by this benchtrail yet")
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    options = dict(gen.compile_config.options)
    compile_mode = "max-autotune" if mode is CompileMode.INDUCTOR_MAX_AUTOTUNE else None
    start = time.perf_counter()
    fn = torch.compile(model, backend="inductor", mode=compile_mode, options=options or None)
    with torch.no_grad():
        fn(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    elapsed_ms = (time.perf_counter() - start) * 1e3
    cache = {key: int(counters["inductor"][key]) for key in ("fxgraph_cache_hit", "fxgraph_cache_miss")}
    return CompiledModule(fn, elapsed_ms, cache)


def explain_graphs(gen: ModuleGenerationConfig, inputs: tuple[torch.Tensor, ...], device: str) -> dict[str, Any]:
    """Dynamo's graph count, graph-break count and break reasons for the model (``torch._dynamo.explain``).

    Returns:
        ``{"graph_count": int, "graph_breaks": int, "break_reasons": [{"reason", "location", "count"}]}``
        where ``location`` is ``"<file name>:<line>"`` of the user code that broke the graph.
        ``explain`` resets Dynamo, so call it after any compiled function is no longer needed.
    """
    model = build_model(gen.model.entry_point, device)
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(*inputs)
    reasons: dict[tuple[str, str], int] = {}
    for br in explanation.break_reasons:
        frame = br.user_stack[-1] if br.user_stack else None
        location = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "unknown"
        key = (br.reason.splitlines()[0].strip(), location)
        reasons[key] = reasons.get(key, 0) + 1
    return {
        "graph_count": int(explanation.graph_count),
        "graph_breaks": int(explanation.graph_break_count),
        "break_reasons": [{"reason": r, "location": loc, "count": n} for (r, loc), n in sorted(reasons.items())],
    }

def content_hash(config: Any, torch_version: str) -> str:
    """sha256 (hex) over a config's rendered fields (presets excluded), torch version and model source.

    ``config`` is a ``ModuleGenerationConfig`` or a ``RunConfig``. Equal ids with different
    hashes mean the definition changed under the same id, so results are not comparable.
    """
    import dataclasses
    import json

    from benchtrail.suite.serialization import serialize_and_pack

    gen = getattr(config, "module_generation_config", config)
    bare_gen = dataclasses.replace(gen, presets=())
    bare = bare_gen if config is gen else dataclasses.replace(config, presets=(), module_generation_config=bare_gen)
    hasher = hashlib.sha256()
    hasher.update(json.dumps(serialize_and_pack([bare]), sort_keys=True).encode("utf-8"))
    hasher.update(torch_version.encode("utf-8"))
    hasher.update(model_source_digest(gen.model).encode("utf-8"))
    return hasher.hexdigest()
