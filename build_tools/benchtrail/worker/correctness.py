"""Correctness of a module's value, gradient or Jacobian, with dtype-aware tolerances.

Each case is checked against its model's reference implementation when it has one, else (compiled
modules) against the eager model, on the same inputs and the same task.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (``torch.allclose``'s
rule). The tolerances are ``torch.testing.assert_close``'s defaults for fp16 and bf16, and for
fp32 100× its defaults (rtol 1.3e-4, atol 1e-3): compiled code reorders reductions and fuses
operations, which changes fp32 rounding by more than one ulp on sums of thousands of terms.
"""

from __future__ import annotations

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


def compare_outputs(actual: Any, expected: Any) -> dict[str, Any]:
    """Compare two outputs (tensors or pytrees of tensors) leaf by leaf.

    Returns:
        ``{"ok": bool, "max_abs_err": float, "max_rel_err": float, "rtol": float, "atol": float}``
        where the errors are the largest over all floating-point leaves and the tolerances are
        those of the least precise dtype seen. Leaves of different shapes are a mismatch.
    """
    leaves_a = torch.utils._pytree.tree_leaves(actual)
    leaves_e = torch.utils._pytree.tree_leaves(expected)
    result = {"ok": len(leaves_a) == len(leaves_e), "max_abs_err": 0.0, "max_rel_err": 0.0,
              "rtol": 0.0, "atol": 0.0}
    for a, e in zip(leaves_a, leaves_e):
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)):
            continue
        if a.shape != e.shape:
            result["ok"] = False
            continue
        if not e.is_floating_point():
            result["ok"] &= bool(torch.equal(a, e))
            continue
        rtol, atol = TOLERANCES.get(e.dtype, TOLERANCES[torch.float32])
        a64, e64 = a.detach().double().cpu(), e.detach().double().cpu()
        diff = (a64 - e64).abs()
        rel = diff / e64.abs().clamp_min(torch.finfo(e.dtype).tiny)
        result["max_abs_err"] = max(result["max_abs_err"], float(diff.max()) if diff.numel() else 0.0)
        result["max_rel_err"] = max(result["max_rel_err"], float(rel.max()) if rel.numel() else 0.0)
        result["rtol"], result["atol"] = max(result["rtol"], rtol), max(result["atol"], atol)
        result["ok"] &= bool((diff <= atol + rtol * e64.abs()).all())
    return result


def expected_model(gen: ModuleGenerationConfig, device: str) -> tuple[str, torch.nn.Module] | None:
    """``(against, model)``: what a module's results are checked against.

    The model's reference implementation when it has one (``"reference"``, for every compile
    config including eager); else the eager model for compiled modules (``"eager"``); else None
    (an eager module without a reference, or model code that is not importable here).
    """
    reference = gen.model.reference_entry_point is not None
    if not reference and gen.compile_config.mode is CompileMode.EAGER:
        return None
    try:
        return ("reference" if reference else "eager"), build_model(gen.model, device, reference=reference)
    except ModuleError:
        return None


def check_task(task: Task, gen: ModuleGenerationConfig, inputs: tuple[torch.Tensor, ...], actual: Any,
               device: str, jacobian_mode: str | None = None) -> dict[str, Any] | None:
    """Compare ``actual``, the task's quantity from the module, with the same quantity computed in
    eager mode from :func:`expected_model`.

    The quantity is the value (inference, forward), the gradient (backward: inputs, then
    parameters, as ``tasks.gradient`` returns them) or the Jacobian (computed with the same
    ``jacobian_mode``, ``"jacrev"`` or ``"jacfwd"``).

    Returns:
        :func:`compare_outputs`'s dict plus ``quantity`` and ``against``; None when there is nothing
        to compare with.
    """
    found = expected_model(gen, device)
    if found is None:
        return None
    against, model = found
    with tasks.grad_mode(task):
        if task is Task.JACOBIAN:
            transform = torch.func.jacfwd if jacobian_mode == "jacfwd" else torch.func.jacrev
            expected = transform(model, argnums=tasks.differentiable_argnums(inputs))(*inputs)
        else:
            expected = tasks.step(task, model, inputs)()
    return {**compare_outputs(actual, expected), "quantity": tasks.QUANTITY[task], "against": against}
