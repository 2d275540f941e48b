"""Correctness of a module's value, gradient or Jacobian, with dtype-aware tolerances.

Each case is checked against its model's reference implementation when it has one, else (compiled
modules) against the eager model, on the same inputs and the same task.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (``torch.allclose``'s
rule). The tolerances are ``torch.testing.assert_close``'s defaults for fp16 and bf16, and for
fp32 100× its defaults (rtol 1.3e-4, atol 1e-3): compiled code reorders reductions and fuses
operations, which changes fp32 rounding by more than one ulp on sums of thousands of terms.

The relative error reported is ``|actual - expected| / max(|expected|, atol)``: below atol the
absolute tolerance decides an element anyway, so it stays finite near zero and is at most about
``1 + rtol`` for an element that passes.

A reference that raises (while it is built or while it computes the quantity) fails the check; the
result then holds the exception in ``error`` and no errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from benchtrail.worker import tasks
from benchtrail.worker.build import build_model
from benchtrail.suite.entry_points import ModuleError
from benchtrail.suite.definitions import CompileMode, ModuleGenerationConfig, Task

#: dtype -> (rtol, atol).
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-4, 1e-3),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}

_ERROR_CHARS = 300


def _tolerances(dtypes: Iterable[torch.dtype]) -> tuple[float, float]:
    """``(rtol, atol)``: the largest of each over the floating-point ``dtypes``; fp32's when there is none."""
    tolerances = [TOLERANCES.get(d, TOLERANCES[torch.float32]) for d in dtypes if d.is_floating_point]
    if not tolerances:
        return TOLERANCES[torch.float32]
    return max(r for r, _ in tolerances), max(a for _, a in tolerances)


def compare_outputs(actual: Any, expected: Any, against: str = "reference") -> dict[str, Any]:
    """Compare two outputs (tensors or pytrees of tensors) leaf by leaf.

    Returns:
        ``{"ok": bool, "max_abs_err": float, "max_rel_err": float, "rtol": float, "atol": float}``
        where the errors are the largest over all floating-point leaves and the tolerances are
        those of the least precise dtype seen. The relative error's denominator is
        ``max(|expected|, atol)``. Leaves of different counts, shapes or (non-tensor) values are a mismatch
        whose ``error`` says which, naming ``expected`` by ``against``; Python numbers compare as tensors.
    """
    leaves_a = torch.utils._pytree.tree_leaves(actual)
    leaves_e = torch.utils._pytree.tree_leaves(expected)
    result: dict[str, Any] = {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "rtol": 0.0, "atol": 0.0}
    problems = [] if len(leaves_a) == len(leaves_e) else [f"{len(leaves_a)} values, the {against} {len(leaves_e)}"]
    for i, (a, e) in enumerate(zip(leaves_a, leaves_e)):
        a, e = _tensor(a, e), _tensor(e, a)
        if isinstance(a, torch.Tensor) != isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
            if isinstance(a, torch.Tensor) or isinstance(e, torch.Tensor) or a != e:
                problems.append(f"value {i} is {_shown(a)}, the {against}'s {_shown(e)}")
            continue
        if a.shape != e.shape:
            problems.append(f"value {i} has shape {tuple(a.shape)}, the {against}'s {tuple(e.shape)}")
            continue
        if not (a.is_floating_point() or e.is_floating_point()):
            result["ok"] &= bool(torch.equal(a, e))
            continue
        rtol, atol = TOLERANCES.get(e.dtype if e.is_floating_point() else a.dtype, TOLERANCES[torch.float32])
        a64, e64 = a.detach().double().cpu(), e.detach().double().cpu()
        diff = (a64 - e64).abs()
        rel = diff / e64.abs().clamp_min(atol)
        result["max_abs_err"] = max(result["max_abs_err"], float(diff.max()) if diff.numel() else 0.0)
        result["max_rel_err"] = max(result["max_rel_err"], float(rel.max()) if rel.numel() else 0.0)
        result["rtol"], result["atol"] = max(result["rtol"], rtol), max(result["atol"], atol)
        result["ok"] &= bool((diff <= atol + rtol * e64.abs()).all())
    if problems:
        result.update(ok=False, error="; ".join(problems))
    return result


def _shown(x: Any) -> str:
    return f"a tensor {tuple(x.shape)}" if isinstance(x, torch.Tensor) else f"{x!r:.60}"


def _tensor(x: Any, other: Any) -> Any:
    """A Python number as a 0-d tensor of ``other``'s floating-point dtype (float64 beside a number or an
    integer tensor), so ``3.0`` and ``tensor(3.)`` compare by value; else ``x``."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return x
    floating = isinstance(other, torch.Tensor) and other.is_floating_point()
    return torch.tensor(float(x), dtype=other.dtype if floating else torch.float64)


def expected_model(gen: ModuleGenerationConfig, device: str) -> tuple[str, torch.nn.Module] | None:
    """``(against, model)``: what a module's results are checked against.

    The model's reference implementation when it has one (``"reference"``, for every compile
    config including eager); else the eager model for compiled modules (``"eager"``); else None
    (an eager module without a reference, or model code that is not importable here).

    Raises:
        Exception: whatever building the reference raises (:func:`check_task` reports it).
    """
    if gen.model.reference_entry_point is not None:
        return "reference", build_model(gen.model, device, reference=True)
    if gen.compile_config.mode is CompileMode.EAGER:
        return None
    try:
        return "eager", build_model(gen.model, device)
    except ModuleError:
        return None


def _expected(task: Task, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
              jacobian_mode: str | None) -> Any:
    """The task's quantity computed from ``model`` in eager mode."""
    with tasks.grad_mode(task):
        if task is Task.JACOBIAN:
            transform = torch.func.jacfwd if jacobian_mode == "jacfwd" else torch.func.jacrev
            return transform(model, argnums=tasks.differentiable_argnums(inputs))(*inputs)
        return tasks.step(task, model, inputs)()


def check_task(task: Task, gen: ModuleGenerationConfig, inputs: tuple[torch.Tensor, ...], actual: Any,
               device: str, jacobian_mode: str | None = None) -> dict[str, Any] | None:
    """Compare ``actual``, the task's quantity from the module, with the same quantity computed in
    eager mode from :func:`expected_model`.

    The quantity is the value (inference, forward), the gradient (backward: inputs, then
    parameters, as ``tasks.gradient`` returns them) or the Jacobian (computed with the same
    ``jacobian_mode``, ``"jacrev"`` or ``"jacfwd"``).

    A reference that raises, while it is built or computes the quantity, is a failed check:
    ``ok`` False, ``error`` ``"the reference raised TypeError: ..."``, both errors None, and the
    tolerances of ``actual``'s dtypes. Running out of memory is not the reference's failure: it
    propagates.

    Returns:
        :func:`compare_outputs`'s dict plus ``quantity`` and ``against`` (and ``error`` when the
        reference raised); None when there is nothing to compare with.
    """
    quantity = tasks.QUANTITY[task]
    try:
        found = expected_model(gen, device)
        if found is None:
            return None
        against, model = found
        expected = _expected(task, model, inputs, jacobian_mode)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:
        if gen.model.reference_entry_point is None:  # the eager model: its failures are the module's
            raise
        message = f"the reference raised {type(exc).__name__}: {exc}".strip()
        if len(message) > _ERROR_CHARS:
            message = message[:_ERROR_CHARS - 3] + "..."
        leaves = torch.utils._pytree.tree_leaves(actual)
        rtol, atol = _tolerances(leaf.dtype for leaf in leaves if isinstance(leaf, torch.Tensor))
        return {"ok": False, "quantity": quantity, "against": "reference", "max_abs_err": None,
                "max_rel_err": None, "atol": atol, "rtol": rtol, "error": message}
    return {**compare_outputs(actual, expected, against), "quantity": quantity, "against": against}
