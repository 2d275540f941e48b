"""A function benchmark as the worker runs it: an ``nn.Module`` of its input factory's tensors.

The factory's ``Args`` is flattened with pytree; the tensor leaves, in order, are the module's inputs
and every other leaf is bound as a constant, so compiling, the tasks and the correctness checks see
positional tensors, as for a class-API model.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from benchtrail.suite.definitions import Model
from benchtrail.suite.entry_points import ModuleError, load_entry_point
from benchtrail.suite.functions import Args, FunctionBenchmark, callable_name


def benchmark_of(model: Model) -> FunctionBenchmark | None:
    """The ``@benchmark`` object ``model.entry_point`` names, or None for a class-API model factory.

    Raises:
        ModuleError: the entry point cannot be loaded.
    """
    obj = load_entry_point(model.entry_point)
    return obj if isinstance(obj, FunctionBenchmark) else None


def _arguments(bench: FunctionBenchmark, model: Model, seed: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` of the input factory for ``model``'s parameters, torch seeded first."""
    torch.manual_seed(seed)
    try:
        made = bench.inputs(**dict(model.params))
    except Exception as exc:
        raise ModuleError(
            f"{model.name}: the input factory {callable_name(bench.inputs)} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(made, Iterator):  # a generator (`yield`, a generator expression): no argument anyone means
        raise ModuleError(
            f"{model.name}: the input factory {callable_name(bench.inputs)} returned "
            f"{type(made).__name__}, "
            "an iterator; return Args(*args, **kwargs) or a tuple of the arguments (Args(it) "
            "passes an iterator as the one argument)"
        )
    call = Args.of(made)
    return call.args, call.kwargs


def inputs(model: Model, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """The input factory's tensors, in flattening order, on ``device``.

    Raises:
        ModuleError: the entry point is not a function benchmark, or its input factory raised.
    """
    bench = benchmark_of(model)
    if bench is None:
        raise ModuleError(f"{model.entry_point} is not a @benchmark function")
    return tuple(
        leaf.to(device)
        for leaf in pytree.tree_leaves(_arguments(bench, model, seed))
        if isinstance(leaf, torch.Tensor)
    )


def input_names(model: Model, seed: int) -> list[str]:
    """The user's name of each tensor of ``inputs``: ``x``, ``argument 2``, ``keyword mask``, ``xs[1]``."""
    bench = benchmark_of(model)
    assert bench is not None
    arguments = _arguments(bench, model, seed)
    try:
        params = [] if bench.module else list(inspect.signature(bench.fn).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for path, leaf in pytree.tree_flatten_with_path(arguments)[0]:
        if isinstance(leaf, torch.Tensor):
            head, rest = path[1], pytree.keystr(path[2:])
            names.append(
                f"keyword {head.key}{rest}"
                if path[0].idx == 1
                else (params[head.idx] if head.idx < len(params) else f"argument {head.idx}") + rest
            )
    return names


class BoundFunction(torch.nn.Module):
    """``fn`` with its non-tensor arguments bound; an ``nn.Module`` ``fn`` is the submodule ``module``,
    so the backward task differentiates its parameters too."""

    def __init__(self, fn: Any, leaves: list[Any], spec: Any) -> None:
        super().__init__()
        if isinstance(fn, torch.nn.Module):
            self.module = fn
        else:
            self.fn = fn
        self._leaves = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        self._positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        self._spec = spec

    def _arguments(self, tensors: tuple[torch.Tensor, ...]) -> tuple[Any, Any]:
        leaves = list(self._leaves)
        for position, tensor in zip(self._positions, tensors):
            leaves[position] = tensor
        return pytree.tree_unflatten(leaves, self._spec)

    def forward(self, *tensors: torch.Tensor) -> Any:
        args, kwargs = self._arguments(tensors)
        fn = self.module if hasattr(self, "module") else self.fn
        return fn(*args, **kwargs)

    def call(self, *tensors: torch.Tensor, target: Any = None) -> functools.partial:
        """``fn`` (or ``target``) with its arguments bound once: the user's call alone, without
        unflattening (the harness floor, docs/statistics.md)."""
        args, kwargs = self._arguments(tensors)
        fn = target or (self.module if hasattr(self, "module") else self.fn)
        return functools.partial(fn, *args, **kwargs)


def build(bench: FunctionBenchmark, model: Model, target: Any, seed: int) -> BoundFunction:
    """The module of ``model`` calling ``target`` (the function or its reference), torch seeded per factory.

    Raises:
        ModuleError: a factory raised.
    """
    leaves, spec = pytree.tree_flatten(_arguments(bench, model, seed))
    if bench.module:
        torch.manual_seed(seed)
        try:
            target = target(**dict(model.params))
        except Exception as exc:
            raise ModuleError(f"{model.name}: the module factory raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(target, torch.nn.Module):
            raise ModuleError(
                f"{model.name}: the module factory returned {type(target).__name__}, not an nn.Module"
            )
    return BoundFunction(target, leaves, spec)
