"""What one iteration of a case computes: inference and forward the value (forward recording autograd),
backward the gradient of the outputs' sum, jacobian ``torch.func.jacrev`` or ``jacfwd``.

For Inductor modules the Jacobian function itself is compiled: ``jacrev`` of a compiled module runs
Dynamo-free. The caller sets the grad mode around a step, keeping it out of the timed loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from benchtrail.suite.definitions import Task
from benchtrail.worker.inputs import Tensors

#: Inputs with more elements than this are refused by the Jacobian task (the Jacobian of an
#: n-element function has n² entries: 16 Mi float32 elements = 64 MiB at this limit).
JACOBIAN_MAX_INPUT_ELEMENTS = 4096

#: The quantity each task computes, which the correctness check compares.
QUANTITY = {
    Task.INFERENCE: "value",
    Task.FORWARD: "value",
    Task.BACKWARD: "gradient",
    Task.JACOBIAN: "jacobian",
}


class TaskError(ValueError):
    """The task cannot be applied to this module (e.g. a Jacobian of a large input)."""


def grad_mode(task: Task) -> contextlib.AbstractContextManager:
    """``torch.no_grad()`` for inference, ``torch.enable_grad()`` for every other task."""
    return torch.no_grad() if task is Task.INFERENCE else torch.enable_grad()


def prepare_inputs(task: Task, inputs: Tensors) -> Tensors:
    """Inputs for ``task``: floating-point inputs require grad for every task but inference."""
    if task is Task.INFERENCE:
        return inputs
    return tuple(t.detach().requires_grad_(True) if t.is_floating_point() else t for t in inputs)


def jacobian_mode(inputs: Tensors, output: Any) -> str:
    """``"jacfwd"`` for a tall Jacobian (more output than input elements), else ``"jacrev"``, as torch.func
    advises."""
    out_numel = sum(t.numel() for t in tree_leaves(output) if isinstance(t, torch.Tensor))
    return "jacfwd" if out_numel > sum(t.numel() for t in inputs) else "jacrev"


def _parameters(fn: Callable[..., Any]) -> list[torch.Tensor]:
    module = getattr(fn, "_orig_mod", fn)  # torch.compile's wrapper keeps the module here
    return [p for p in module.parameters() if p.requires_grad] if isinstance(module, torch.nn.Module) else []


def gradient(fn: Callable[..., Any], inputs: Tensors) -> Tensors:
    """Gradient of the sum of ``fn``'s outputs w.r.t. the inputs that require grad, then the module's
    parameters (zeros where the output does not depend on them).

    Raises:
        TaskError: nothing to differentiate (no output or no input requires grad).
    """
    outputs = [t for t in tree_leaves(fn(*inputs)) if isinstance(t, torch.Tensor) and t.requires_grad]
    wrt = [t for t in inputs if t.requires_grad] + _parameters(fn)
    if not outputs or not wrt:
        raise TaskError("backward: the output does not depend on any input or parameter that requires grad")
    return tuple(
        torch.autograd.grad(
            outputs, wrt, [torch.ones_like(t) for t in outputs], allow_unused=True, materialize_grads=True
        )
    )


def differentiable_argnums(inputs: Tensors) -> tuple[int, ...]:
    """Positions of the floating-point inputs, which the Jacobian task differentiates."""
    return tuple(i for i, t in enumerate(inputs) if t.is_floating_point())


def jacobian_fn(
    model: Callable[..., Any], inputs: Tensors, compile_fn: bool
) -> tuple[Callable[..., Any], str]:
    """``(jacobian function, mode)`` over every floating-point input; compiled when ``compile_fn``.

    Raises:
        TaskError: no floating-point input, or those inputs have more than ``JACOBIAN_MAX_INPUT_ELEMENTS``
            elements together.
    """
    argnums = differentiable_argnums(inputs)
    if not argnums:
        raise TaskError(
            "jacobian: no floating-point input to differentiate (inputs: "
            f"{', '.join(f'{t.dtype} {tuple(t.shape)}' for t in inputs) or 'none'}); the "
            "Jacobian is taken with respect to the floating-point tensor inputs: drop the "
            "jacobian task or pass one"
        )
    n = sum(inputs[i].numel() for i in argnums)
    if n > JACOBIAN_MAX_INPUT_ELEMENTS:
        raise TaskError(
            f"jacobian: the inputs have {n} elements; the Jacobian task takes at most "
            f"{JACOBIAN_MAX_INPUT_ELEMENTS} (its result has n² entries)"
        )
    with torch.no_grad():
        mode = jacobian_mode(tuple(inputs[i] for i in argnums), model(*inputs))
    jac = getattr(torch.func, mode)(model, argnums=argnums)  # torch.func.jacrev or jacfwd
    return (torch.compile(jac, backend="inductor") if compile_fn else jac), mode


def step(task: Task, fn: Callable[..., Any], inputs: Tensors) -> Callable[[], Any]:
    """One iteration returning the task's quantity; for the Jacobian ``fn`` is the Jacobian function."""
    if task is Task.BACKWARD:
        return lambda: gradient(fn, inputs)
    return lambda: fn(*inputs)
