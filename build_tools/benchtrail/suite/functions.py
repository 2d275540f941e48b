"""Benchmarks as functions: the ``@benchmark`` decorator API and the suite it builds (torch-free).

One ``Model`` per benchmark and parameter combination, named ``module.function[seq=64]``, its id the
SHA-256 of the qualified name and parameters (``renamed_from`` keeps an old id); the suite is the one a
hand-written suite builds. The API, names and ids: docs/adopting.md.
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
COMPILE_CONFIGS = {
    c.name: c
    for c in (
        CompileConfig("compile-eager", "eager", CompileMode.EAGER),
        CompileConfig("compile-inductor", "inductor", CompileMode.INDUCTOR),
        CompileConfig(
            "compile-inductor-max-autotune", "inductor-max-autotune", CompileMode.INDUCTOR_MAX_AUTOTUNE
        ),
        CompileConfig("compile-export", "export", CompileMode.EXPORT),
        CompileConfig("compile-aot-inductor", "aot-inductor", CompileMode.AOT_INDUCTOR),
    )
}
#: The devices a benchmark may name (``devices=[...]``), by name.
DEVICES = {
    d.name: d
    for d in (
        DeviceSpec("device-cpu", "cpu", "linux-x86_64", Architecture.CPU, "x86_64", threads=1),
        # A runner whose wall time cannot be trusted (a GitHub-hosted VM): gates on instruction counts.
        DeviceSpec(
            "device-cpu-counted",
            "cpu-counted",
            "linux-x86_64",
            Architecture.CPU,
            "x86_64",
            threads=1,
            count_instructions=True,
        ),
        DeviceSpec("device-cuda", "cuda", "linux-x86_64", Architecture.CUDA, "cuda", threads=1),
    )
}
#: The preset every function benchmark is in unless it names its own.
DEFAULT_PRESET = "default"
#: Parameter values: what JSON (the run-config export) keeps as it is.
_PARAM_TYPES = (str, int, float, bool, type(None))
#: The name options of a benchmark and the names each allows (None: a path-safe preset name).
_NAMED = {
    "tasks": [t.value for t in Task],
    "compile": list(COMPILE_CONFIGS),
    "devices": list(DEVICES),
    "presets": None,
}
#: The sampling options and the least value each allows (None: above 0).
_SAMPLING = {"processes": None, "min_samples": None, "warmup_time_ms": 0, "timeout_s": None}


class Args:
    """The arguments of one call, ``Args(q, k, v, attn_mask=mask, scale=0.25)``, as an input factory
    returns them (or a tuple of positional arguments, or a single value)."""

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
    """One decorated benchmark; calling it calls the function. Every option: docs/adopting.md.

    Attributes:
        fn: the function, or with ``module`` an ``nn.Module`` factory called with the parameters.
        inputs: the input factory, called with the parameters as keyword arguments.
        params: parameter name -> values; the grid is their product, in this order.
        reference: a function with ``fn``'s signature (a factory with ``module``) to check value,
            gradient and Jacobian against; None checks compiled modules against eager only.
        renamed_from: the qualified name before a rename; its id and history are kept.
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
        """``module.function``, without parameters."""
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    def grid(self) -> list[dict[str, Any]]:
        """Every parameter combination in the grid's order; ``[{}]`` without parameters."""
        grid = dict(self.params)
        return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def benchmark(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorate a benchmark function: ``@benchmark(inputs=...)``, ``options`` being ``FunctionBenchmark``'s
    fields after ``fn``.

    Raises:
        UserError: an unknown task, compile config or device, an empty or non-JSON parameter value,
            or a sampling value out of range.
    """

    def wrap(f: Callable[..., Any]) -> FunctionBenchmark:
        code = getattr(f, "__code__", None)
        at = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
        where = f"@benchmark of {f.__module__}.{f.__qualname__}{at}"
        given = FunctionBenchmark(f, **options)
        bench = dataclasses.replace(
            given,
            params=_params(given.params or {}, where),
            **{name: _names(getattr(given, name), allowed, name, where) for name, allowed in _NAMED.items()},
            **{
                name: _positive(getattr(given, name), name, where, least) for name, least in _SAMPLING.items()
            },
            mutates_inputs=bool(given.mutates_inputs),
        )
        names = [n for n, _ in bench.params]
        _check_signature(bench.inputs, names, "inputs", where)
        if bench.module:
            _check_signature(f, names, "the module factory", where)
            if bench.reference is not None:
                _check_signature(bench.reference, names, "the reference factory", where)
        return bench

    return wrap if fn is None else wrap(fn)


def module_benchmark(fn: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``benchmark`` of an ``nn.Module`` factory, ``fn(**params)``; ``reference`` is a factory too."""
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
            raise UserError(
                f"{where}: parameter name {name!r} is not a Python identifier (it is passed as "
                "a keyword argument)"
            )
        values = (
            (values,)
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable)
            else tuple(values)
        )
        if not values:
            raise UserError(f"{where}: params[{name!r}] is empty; give at least one value")
        for v in values:
            if not isinstance(v, _PARAM_TYPES) or (isinstance(v, float) and v != v):
                raise UserError(
                    f"{where}: params[{name!r}] value {v!r} ({type(v).__name__}) is refused; "
                    "allowed: str, int, float (not NaN), bool or None (the run-config export is "
                    "JSON)"
                )
        out.append((name, values))
    return tuple(out)


def _check_signature(fn: Callable[..., Any], names: list[str], what: str, where: str) -> None:
    """Refuse, at import, a factory that cannot take the parameters as keyword arguments."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: nothing to check
        return
    try:
        signature.bind(**dict.fromkeys(names))
    except TypeError as exc:
        raise UserError(
            f"{where}: {what} {getattr(fn, '__qualname__', fn)!r}{signature} cannot take the "
            f"parameters {names} as keyword arguments ({exc}); each params name must be an "
            "argument of the input factory (and, for module_benchmark, of the module factory)"
        ) from None


def _positive(value: Any, what: str, where: str, least: float | None = None) -> Any:
    """``value``, a number above 0 (or from ``least``)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value > 0 if least is None else value >= least)
    ):
        allowed = "above 0" if least is None else f"from {least}"
        raise UserError(f"{where}: {what}={value!r}; allowed: a number {allowed}")
    return value


def params_label(params: Mapping[str, Any], literal: Collection[str] = ()) -> str:
    """``"[seq=64,dtype=f32]"`` (``""`` without parameters) as a model name shows them; those in
    ``literal`` with ``repr``: ``[n='1']``, ``[n=1]``."""
    return (
        f"[{','.join(f'{k}={v!r}' if k in literal else f'{k}={v}' for k, v in params.items())}]"
        if params
        else ""
    )


def coinciding(params: Sequence[tuple[str, Sequence[Any]]]) -> frozenset[str]:
    """The parameters two of whose values read the same as text (``1`` and ``"1"``), to show with ``repr``."""
    return frozenset(name for name, values in params if len({str(v) for v in values}) < len(values))


def model_id(qualified_name: str, params: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the qualified name and the parameters as JSON with sorted keys."""
    return hashlib.sha256(
        json.dumps({"benchmark": qualified_name, "params": dict(params)}, sort_keys=True).encode()
    ).hexdigest()


def discover(modules: Iterable[str]) -> list[tuple[str, FunctionBenchmark]]:
    """Import ``modules``; ``(entry point, benchmark)`` of every module-level benchmark, by entry point.

    Raises:
        UserError: a module cannot be imported, or none of them defines a benchmark.
    """
    found = {}
    modules = list(modules)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except UserError:  # a refused @benchmark: its message names the function, its file and line
            raise
        except Exception as exc:  # the adopter's code: report whatever it raised
            raise UserError(
                f"benchmarks module {name!r} cannot be imported: {type(exc).__name__}: {exc}"
            ) from exc
        for attr, value in vars(module).items():
            if isinstance(value, FunctionBenchmark) and value.fn.__module__ == module.__name__:
                found[f"{module.__name__}:{attr}"] = value
    if not found:
        raise UserError(
            f"no @benchmark function found in {', '.join(modules) or '(no modules)'}; "
            "decorate a module-level function with benchtrail.benchmark (docs/adopting.md)"
        )
    return sorted(found.items())


def suite_of(benchmarks: Iterable[tuple[str, FunctionBenchmark]]) -> Suite:
    """One run config per benchmark, parameter combination, compile config, task and device, modules in
    the same presets (which so record compilation statistics).

    Raises:
        UserError: two benchmarks make the same model id (a ``renamed_from``), or a reference cannot take
            the arguments its input factory gives.
    """
    run_configs = []
    modules = {}
    owner = {}
    for entry, bench in benchmarks:
        ref = bench.reference
        reference = (
            None
            if ref is None
            else (
                f"{ref.__module__}:{ref.__qualname__}"
                if hasattr(ref, "__qualname__")
                else f"{entry.partition(':')[0]}:{type(ref).__qualname__}"
            )
        )
        literal = coinciding(bench.params)
        for params in bench.grid():
            model = Model(
                model_id(bench.renamed_from or bench.qualified_name, params),
                bench.qualified_name + params_label(params, literal),
                ("function",),
                entry,
                (),
                reference_entry_point=reference,
                fullgraph=bench.fullgraph,
                params=tuple(params.items()),
                mutates_inputs=bench.mutates_inputs,
            )
            if owner.setdefault(model.id, model.name) != model.name:
                raise UserError(
                    f"benchmarks {owner[model.id]!r} and {model.name!r} have the same id "
                    "(renamed_from names another benchmark)"
                )
            if ref is not None and not bench.module:
                _check_reference(bench, params, model.name)
            for device_name, compile_name in itertools.product(bench.devices, bench.compile):
                device = DEVICES[device_name]
                gen = ModuleGenerationConfig.build(
                    model, COMPILE_CONFIGS[compile_name], device.architecture, presets=bench.presets
                )
                modules.setdefault(gen.id, gen)
                for task in bench.tasks:
                    run_configs.append(
                        RunConfig.build(gen, _execution(bench, Task(task)), device, presets=bench.presets)
                    )
    return Suite(
        tuple(run_configs),
        tuple(modules.values()),
        tuple(dict.fromkeys(p for rc in run_configs for p in rc.presets)),
        (),
    )


def _check_reference(bench: FunctionBenchmark, params: dict[str, Any], name: str) -> None:
    """Refuse a reference that cannot take the input factory's arguments, the factory run on the meta
    device (one that fails there goes unchecked: the worker reports it)."""
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
        raise UserError(
            f"benchmark {name}: reference {ref}{signature} cannot take the arguments of the "
            f"input factory ({given}): {exc}; allowed: the reference takes the benchmark's "
            "arguments"
        ) from None


def _execution(bench: FunctionBenchmark, task: Task) -> ExecutionConfig:
    """The execution config of one task, named by the task; its id covers the sampling policy."""
    policy = (bench.processes, bench.min_samples, bench.warmup_time_ms, bench.timeout_s)
    if policy == (3, 10, 300.0, 600.0):
        return ExecutionConfig(f"execution-{task.value}", task.value, task)
    digest = hashlib.sha256(json.dumps([task.value, *policy]).encode()).hexdigest()[:16]
    return ExecutionConfig(
        f"execution-{task.value}-{digest}",
        task.value,
        task,
        processes=bench.processes,
        min_samples=bench.min_samples,
        warmup_time_ms=float(bench.warmup_time_ms),
        timeout_s=float(bench.timeout_s),
    )


def callable_name(fn: Any) -> str:
    """A callable's qualified name; a ``functools.partial``'s or a callable object's is its type's."""
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__
