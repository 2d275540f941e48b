"""Benchmarks as functions: the decorator API and the suite it builds (torch-free).

A benchmark is a plain function (or an ``nn.Module`` factory) in any module of the project, with an
input factory, an optional reference implementation and a parameter grid::

    import torch
    from benchtrail import Args, benchmark

    def attention_inputs(seq):
        q, k, v = torch.randn(3, 1, 4, seq, 16).unbind(0)
        return Args(q, k, v, attn_mask=torch.ones(seq, seq).tril().bool(), scale=0.25)

    @benchmark(inputs=attention_inputs, params={"seq": [64, 128]}, tasks=["inference", "backward"],
               compile=["eager", "inductor"])
    def attention(q, k, v, attn_mask, scale):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)

``[tool.benchtrail] benchmarks = ["mypkg.benchmarks"]`` names the modules; :func:`discover` imports
them and :func:`suite_of` builds the same ``Suite`` of run configs that a hand-written suite builds,
so every stage, the export, the store and the comment work unchanged.

* One ``Model`` per benchmark and parameter combination: its name is the benchmark's qualified name
  (``module.function``) plus the parameters in the grid's order (``mypkg.benchmarks.attention[seq=64]``);
  its id is the SHA-256 of the qualified name and the parameters as canonical JSON, so ids are stable
  across runs, independent of file and definition order, and change when the name does. A rename keeps
  its history only when said: ``renamed_from="old.module.function"`` keeps the old id.
* The worker (``benchtrail.worker.functions``) calls the input factory with the parameters (torch
  seeded first), flattens the returned arguments with ``torch.utils._pytree``: the tensors become the
  module's inputs (moved to the device; floating-point ones are differentiated by the backward and
  Jacobian tasks), everything else (ints, floats, strings, None, tensors inside objects pytree does not
  know) is bound as a constant.
* Devices: ``"cpu"`` (one intra-op thread) and ``"cuda"``; the device name is the series' device and
  the runner label of the workflow's ``runner-labels``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import itertools
import json
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from benchtrail.errors import UserError
from benchtrail.suite.definitions import (
    SAFE_NAME,
    Architecture,
    CompileConfig,
    CompileMode,
    DeviceSpec,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Suite,
    Task,
)

#: The compile configs a benchmark may name (``compile=[...]``), by name.
COMPILE_CONFIGS = {c.name: c for c in (
    CompileConfig("compile-eager", "eager", CompileMode.EAGER),
    CompileConfig("compile-inductor", "inductor", CompileMode.INDUCTOR),
    CompileConfig("compile-inductor-max-autotune", "inductor-max-autotune", CompileMode.INDUCTOR_MAX_AUTOTUNE),
    CompileConfig("compile-export", "export", CompileMode.EXPORT),
    CompileConfig("compile-aot-inductor", "aot-inductor", CompileMode.AOT_INDUCTOR),
)}
#: The devices a benchmark may name (``devices=[...]``), by name.
DEVICES = {d.name: d for d in (
    DeviceSpec("device-cpu", "cpu", "linux-x86_64", Architecture.CPU, "x86_64", threads=1),
    # A runner whose wall time cannot be trusted (a GitHub-hosted VM): gates on instruction counts (issue 44).
    DeviceSpec("device-cpu-counted", "cpu-counted", "linux-x86_64", Architecture.CPU, "x86_64", threads=1,
               count_instructions=True),
    DeviceSpec("device-cuda", "cuda", "linux-x86_64", Architecture.CUDA, "cuda", threads=1),
)}
#: The preset every function benchmark is in unless it names its own.
DEFAULT_PRESET = "default"
#: Parameter values: what JSON (the run-config export) keeps as it is.
_PARAM_TYPES = (str, int, float, bool, type(None))
#: The name options of a benchmark and the names each allows (None: a path-safe preset name).
_NAMED = {"tasks": [t.value for t in Task], "compile": list(COMPILE_CONFIGS), "devices": list(DEVICES),
          "presets": None}
#: The sampling options and the least value each allows (None: above 0).
_SAMPLING = {"processes": None, "min_samples": None, "warmup_time_ms": 0, "timeout_s": None}


class Args:
    """The arguments of one call: ``Args(q, k, v, attn_mask=mask, scale=0.25)``.

    An input factory returns an ``Args``, a tuple (positional arguments) or a single value.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    @classmethod
    def of(cls, value: Any) -> Args:
        """``value`` as ``Args``: itself, a tuple's items, or the one argument."""
        if isinstance(value, Args):
            return value
        return cls(*value) if isinstance(value, tuple) else cls(value)

    def __repr__(self) -> str:
        parts = [*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())]
        return f"Args({', '.join(parts)})"


@dataclasses.dataclass(frozen=True)
class FunctionBenchmark:
    """One decorated benchmark (what ``@benchmark`` returns; calling it calls the function).

    Attributes:
        fn: the function (``module=False``: called with the input factory's arguments) or the
            ``nn.Module`` factory (``module=True``: called with the parameters, its module then
            called with the arguments).
        inputs: the input factory, called with the parameters as keyword arguments.
        params: parameter name -> the values to run (the grid is their product, in this order).
        reference: a function with ``fn``'s signature (for a module factory: a factory) whose value,
            gradient and Jacobian the module's are checked against; None checks compiled modules
            against eager only.
        tasks, compile, devices, presets: names (``Task`` values, :data:`COMPILE_CONFIGS`,
            :data:`DEVICES`, preset names).
        processes, min_samples, warmup_time_ms, timeout_s: the sampling policy (``ExecutionConfig``).
        renamed_from: the qualified name the benchmark had before a rename; its id (and history) is kept.
        module: ``fn`` is an ``nn.Module`` factory.
        fullgraph: a graph break fails its Inductor modules.
        mutates_inputs: ``fn`` changes its input tensors in place (``Model.mutates_inputs``).
    """

    fn: Callable[..., Any]
    inputs: Callable[..., Any]
    params: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    reference: Callable[..., Any] | None = None
    tasks: tuple[str, ...] = ("inference",)
    compile: tuple[str, ...] = ("eager",)
    devices: tuple[str, ...] = ("cpu",)
    presets: tuple[str, ...] = (DEFAULT_PRESET,)
    processes: int = 3
    min_samples: int = 10
    warmup_time_ms: float = 300.0
    timeout_s: float = 600.0
    renamed_from: str | None = None
    module: bool = False
    fullgraph: bool = False
    mutates_inputs: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def qualified_name(self) -> str:
        """``module.function``: the benchmark's name without parameters."""
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    def grid(self) -> list[dict[str, Any]]:
        """Every parameter combination, in the grid's order (``[{}]`` without parameters)."""
        grid = dict(self.params)
        return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def benchmark(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorate a benchmark function (``@benchmark(inputs=...)``); ``options``: the fields of
    :class:`FunctionBenchmark` after ``fn``. ``tasks``: ``inference``, ``forward``, ``backward``, ``jacobian``.

    Raises:
        UserError: an unknown task, compile config or device, an empty or non-JSON parameter value,
            or a sampling value out of range; the message names the benchmark, the argument, the
            value and what is allowed.
    """
    def wrap(f: Callable[..., Any]) -> FunctionBenchmark:
        code = getattr(f, "__code__", None)
        at = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
        where = f"@benchmark of {f.__module__}.{f.__qualname__}{at}"
        given = FunctionBenchmark(f, **options)
        bench = dataclasses.replace(
            given, params=_params(given.params or {}, where),
            **{name: _names(getattr(given, name), allowed, name, where) for name, allowed in _NAMED.items()},
            **{name: _positive(getattr(given, name), name, where, least)
               for name, least in _SAMPLING.items()},
            mutates_inputs=bool(given.mutates_inputs))
        names = [n for n, _ in bench.params]
        _check_signature(bench.inputs, names, "inputs", where)
        if bench.module:
            _check_signature(f, names, "the module factory", where)
            if bench.reference is not None:
                _check_signature(bench.reference, names, "the reference factory", where)
        return bench

    return wrap if fn is None else wrap(fn)


def module_benchmark(fn: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """:func:`benchmark` of an ``nn.Module`` factory: ``fn(**params)`` returns the module, which is
    called with the input factory's arguments; ``reference`` is a factory too."""
    return benchmark(fn, module=True, **kwargs)


def _names(values: Iterable[str], allowed: list[str] | None, what: str, where: str) -> tuple[str, ...]:
    """``values`` without repeats, each one of ``allowed`` (None: a path-safe preset name)."""
    values = (values,) if isinstance(values, str) else tuple(values)
    if allowed is None:
        bad = [p for p in values if not isinstance(p, str) or not SAFE_NAME.match(p)]
        word, rule = "refused", "letters, digits, '.', '_' and '-', starting with a letter or digit"
    else:
        bad = [v for v in values if v not in allowed]
        word, rule = "unknown", ", ".join(allowed)
    if bad or not values:
        problem = f"{word} {bad[0]!r}" if bad else "empty"
        raise UserError(f"{where}: {what}={list(values)!r}: {problem}; allowed: {rule}")
    return tuple(dict.fromkeys(values))


def _params(params: Mapping[str, Sequence[Any]], where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(params, Mapping):
        raise UserError(f"{where}: params must be a dict of name -> list of values, got {params!r}")
    out = []
    for name, values in params.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"{where}: parameter name {name!r} is not a Python identifier (it is passed as a "
                            "keyword argument)")
        values = (values,) if isinstance(values, (str, bytes)) or not isinstance(values, Iterable) else tuple(values)
        if not values:
            raise UserError(f"{where}: params[{name!r}] is empty; give at least one value")
        for v in values:
            if not isinstance(v, _PARAM_TYPES) or (isinstance(v, float) and v != v):
                raise UserError(f"{where}: params[{name!r}] value {v!r} ({type(v).__name__}) is refused; allowed: "
                                "str, int, float (not NaN), bool or None (the run-config export is JSON)")
        out.append((name, values))
    return tuple(out)


def _check_signature(fn: Callable[..., Any], names: list[str], what: str, where: str) -> None:
    """Refuse a factory that cannot be called with the parameters as keyword arguments (found now, at
    import, not in a worker after the run started)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: nothing to check
        return
    try:
        signature.bind(**dict.fromkeys(names))
    except TypeError as exc:
        raise UserError(f"{where}: {what} {getattr(fn, '__qualname__', fn)!r}{signature} cannot take the "
                        f"parameters {names} as keyword arguments ({exc}); each params name must be an argument "
                        "of the input factory (and, for module_benchmark, of the module factory)") from None


def _positive(value: Any, what: str, where: str, least: float | None = None) -> Any:
    """``value``, a number above 0 (with ``least``: from ``least``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value > 0 if least is None else value >= least):
        allowed = "above 0" if least is None else f"from {least}"
        raise UserError(f"{where}: {what}={value!r}; allowed: a number {allowed}")
    return value


def params_label(params: Mapping[str, Any], literal: Collection[str] = ()) -> str:
    """``"[seq=64,dtype=f32]"`` (``""`` without parameters): the parameters as a model name shows them; those named
    in ``literal`` with ``repr`` (``[n='1']``, ``[n=1]``): a parameter whose values' text coincides
    (:func:`coinciding`)."""
    return f"[{','.join(f'{k}={v!r}' if k in literal else f'{k}={v}' for k, v in params.items())}]" if params else ""


def coinciding(params: Sequence[tuple[str, Sequence[Any]]]) -> frozenset[str]:
    """The parameters of a grid two of whose values read the same as text (``1`` and ``"1"``, ``None`` and
    ``"None"``): their names show the values with ``repr``, so each combination keeps a name of its own."""
    return frozenset(name for name, values in params if len({str(v) for v in values}) < len(values))


def model_id(qualified_name: str, params: Mapping[str, Any]) -> str:
    """The model id of one parameter combination: SHA-256 (hex) of the qualified name and the
    parameters as canonical JSON (sorted keys), so the order of the grid does not change it."""
    return hashlib.sha256(json.dumps({"benchmark": qualified_name, "params": dict(params)},
                                     sort_keys=True).encode()).hexdigest()


def discover(modules: Iterable[str]) -> list[tuple[str, FunctionBenchmark]]:
    """Import ``modules`` and return ``(entry point, benchmark)`` for every module-level benchmark,
    sorted by entry point (``"mypkg.benchmarks:attention"``).

    Raises:
        UserError: a module cannot be imported (with the exception), or none of them defines a benchmark.
    """
    found = {}
    modules = list(modules)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except UserError:  # a refused @benchmark: its message names the function, its file and line
            raise
        except Exception as exc:  # the adopter's code: report whatever it raised
            raise UserError(f"benchmarks module {name!r} cannot be imported: {type(exc).__name__}: {exc}") from exc
        for attr, value in vars(module).items():
            if isinstance(value, FunctionBenchmark) and value.fn.__module__ == module.__name__:
                found[f"{module.__name__}:{attr}"] = value
    if not found:
        raise UserError(f"no @benchmark function found in {', '.join(modules) or '(no modules)'}; decorate a "
                        "module-level function with benchtrail.benchmark (docs/adopting.md)")
    return sorted(found.items())


def suite_of(benchmarks: Iterable[tuple[str, FunctionBenchmark]]) -> Suite:
    """The ``Suite`` of ``benchmarks`` (from :func:`discover`): one run config per benchmark, parameter
    combination, compile config, task and device, in the presets each benchmark names; compiled
    modules are in the same presets, so those presets also record compilation statistics.

    Raises:
        UserError: two benchmarks make the same model id (a ``renamed_from`` equal to another's name), or
            a function benchmark's reference cannot take the arguments its input factory gives.
    """
    run_configs = []
    modules = {}
    owner = {}
    for entry, bench in benchmarks:
        ref = bench.reference
        reference = None if ref is None else (f"{ref.__module__}:{ref.__qualname__}" if hasattr(ref, "__qualname__")
                                              else f"{entry.partition(':')[0]}:{type(ref).__qualname__}")
        literal = coinciding(bench.params)
        for params in bench.grid():
            model = Model(model_id(bench.renamed_from or bench.qualified_name, params),
                          bench.qualified_name + params_label(params, literal), ("function",), entry, (),
                          reference_entry_point=reference, fullgraph=bench.fullgraph,
                          params=tuple(params.items()), mutates_inputs=bench.mutates_inputs)
            if owner.setdefault(model.id, model.name) != model.name:
                raise UserError(f"benchmarks {owner[model.id]!r} and {model.name!r} have the same id "
                                "(renamed_from names another benchmark)")
            if ref is not None and not bench.module:
                _check_reference(bench, params, model.name)
            for device_name, compile_name in itertools.product(bench.devices, bench.compile):
                device = DEVICES[device_name]
                gen = ModuleGenerationConfig.build(model, COMPILE_CONFIGS[compile_name], device.architecture,
                                                   presets=bench.presets)
                modules.setdefault(gen.id, gen)
                for task in bench.tasks:
                    run_configs.append(RunConfig.build(gen, _execution(bench, Task(task)), device,
                                                       presets=bench.presets))
    return Suite(tuple(run_configs), tuple(modules.values()),
                 tuple(dict.fromkeys(p for rc in run_configs for p in rc.presets)), ())


def _check_reference(bench: FunctionBenchmark, params: dict[str, Any], name: str) -> None:
    """Refuse a reference that cannot take the arguments the input factory gives for ``params``: the
    factory runs under the meta device (no tensor data; a factory that fails there is not checked, the
    worker reports its errors)."""
    import contextlib

    torch = sys.modules.get("torch")  # loaded by the benchmarks module; this torch-free module imports none
    try:
        signature = inspect.signature(bench.reference)
        with torch.device("meta") if torch is not None else contextlib.nullcontext():
            args = Args.of(bench.inputs(**params))
    except Exception:  # a builtin reference, or a factory that needs real data: nothing to check
        return
    try:
        signature.bind(*args.args, **args.kwargs)
    except TypeError as exc:
        given = f"{len(args.args)} positional"
        if args.kwargs:
            given += f", keywords {', '.join(args.kwargs)}"
        ref = f"{getattr(bench.reference, '__module__', '?')}.{callable_name(bench.reference)}"
        raise UserError(f"benchmark {name}: reference {ref}{signature} cannot take the arguments of the "
                        f"input factory ({given}): {exc}; allowed: the reference takes the benchmark's "
                        "arguments") from None


def _execution(bench: FunctionBenchmark, task: Task) -> ExecutionConfig:
    """The execution config of one task of ``bench``: named by the task; its id covers the policy, so
    two benchmarks with different policies get different configs."""
    policy = (bench.processes, bench.min_samples, bench.warmup_time_ms, bench.timeout_s)
    if policy == (3, 10, 300.0, 600.0):
        return ExecutionConfig(f"execution-{task.value}", task.value, task)
    digest = hashlib.sha256(json.dumps([task.value, *policy]).encode()).hexdigest()[:16]
    return ExecutionConfig(f"execution-{task.value}-{digest}", task.value, task, processes=bench.processes,
                           min_samples=bench.min_samples, warmup_time_ms=float(bench.warmup_time_ms),
                           timeout_s=float(bench.timeout_s))


def callable_name(fn: Any) -> str:
    """A callable's qualified name; a ``functools.partial``'s or a callable object's is its type's."""
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__
