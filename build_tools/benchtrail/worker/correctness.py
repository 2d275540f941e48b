"""Correctness of a module's value, gradient or Jacobian against the reference, else the eager model.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (``torch.allclose``'s rule).
Tolerances: ``assert_close``'s defaults for fp16 and bf16; for fp32 100× them (rtol 1.3e-4, atol 1e-3),
since compiled code reorders reductions. Relative error is ``|actual - expected| / max(|expected|, atol)``,
finite near zero.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from benchtrail.suite.definitions import CompileMode, ModuleGenerationConfig, Task
from benchtrail.suite.entry_points import ModuleError
from benchtrail.worker import tasks
from benchtrail.worker.build import build_model
from benchtrail.worker.inputs import Tensors

#: dtype -> (rtol, atol).
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-4, 1e-3),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}

_ERROR_CHARS = 300


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` of a floating-point ``dtype`` (fp32's for one without its own)."""
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def compare_outputs(actual: Any, expected: Any, against: str = "reference") -> dict[str, Any]:
    """Compare two pytrees of tensors leaf by leaf.

    Returns:
        ``{"ok", "max_abs_err", "max_rel_err", "rtol", "atol"}``: the largest errors over floating-point
        leaves, the least precise dtype's tolerances; ``error`` names mismatched counts, shapes or values.
    """
    leaves_a, leaves_e = tree_leaves(actual), tree_leaves(expected)
    ok, max_abs, max_rel, max_rtol, max_atol = True, 0.0, 0.0, 0.0, 0.0
    problems = (
        [] if len(leaves_a) == len(leaves_e) else [f"{len(leaves_a)} values, the {against} {len(leaves_e)}"]
    )
    for i, (a, e) in enumerate(zip(leaves_a, leaves_e)):
        a, e = _tensor(a, e), _tensor(e, a)
        tensors = [isinstance(x, torch.Tensor) for x in (a, e)]
        if not all(tensors):
            if any(tensors) or a != e:
                problems.append(f"value {i} is {_shown(a)}, the {against}'s {_shown(e)}")
        elif a.shape != e.shape:
            problems.append(f"value {i} has shape {tuple(a.shape)}, the {against}'s {tuple(e.shape)}")
        elif not (a.is_floating_point() or e.is_floating_point()):
            ok &= bool(torch.equal(a, e))
        else:
            rtol, atol = _tolerance(e.dtype if e.is_floating_point() else a.dtype)
            a64, e64 = (t.detach().double().cpu() for t in (a, e))
            diff = (a64 - e64).abs()
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
                max_rel = max(max_rel, float((diff / e64.abs().clamp_min(atol)).max()))
            max_rtol, max_atol = max(max_rtol, rtol), max(max_atol, atol)
            ok &= bool((diff <= atol + rtol * e64.abs()).all())
    result = {
        "ok": ok and not problems,
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "rtol": max_rtol,
        "atol": max_atol,
    }
    if problems:
        result["error"] = "; ".join(problems)
    return result


def _shown(x: Any) -> str:
    return f"a tensor {tuple(x.shape)}" if isinstance(x, torch.Tensor) else f"{x!r:.60}"


def _tensor(x: Any, other: Any) -> Any:
    """A Python number as a 0-d tensor of ``other``'s float dtype (else float64); other ``x`` unchanged."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return x
    floating = isinstance(other, torch.Tensor) and other.is_floating_point()
    return torch.tensor(float(x), dtype=other.dtype if floating else torch.float64)


def check_task(
    task: Task,
    gen: ModuleGenerationConfig,
    inputs: Tensors,
    actual: Any,
    device: str,
    jacobian_mode: str | None = None,
) -> dict[str, Any] | None:
    """Compare ``actual``, the task's quantity from the module, with the reference's (``against``
    "reference") or, for a compiled module without one, the eager model's ("eager").

    A reference that raises fails the check (``error`` "the reference raised TypeError: ...", both errors
    None); out-of-memory and the eager model's errors propagate.

    Returns:
        ``compare_outputs``' dict plus ``quantity`` and ``against``; None when there is nothing to compare
        with (an eager module without a reference, or model code not importable here).
    """
    quantity, reference = tasks.QUANTITY[task], gen.model.reference_entry_point is not None
    against = "reference" if reference else "eager"
    if not reference and gen.compile_config.mode is CompileMode.EAGER:
        return None
    try:
        model = build_model(gen.model, device, reference=reference)
        with tasks.grad_mode(task):
            if task is Task.JACOBIAN:  # torch.func.jacrev or jacfwd, as the module's
                transform = getattr(torch.func, jacobian_mode or "jacrev")
                expected = transform(model, argnums=tasks.differentiable_argnums(inputs))(*inputs)
            else:
                expected = tasks.step(task, model, inputs)()
    except Exception as exc:
        if isinstance(exc, ModuleError) and not reference:
            return None  # the model code is not importable here
        if isinstance(exc, torch.OutOfMemoryError) or not reference:
            raise
        message = f"the reference raised {type(exc).__name__}: {exc}".strip()
        if len(message) > _ERROR_CHARS:
            message = message[: _ERROR_CHARS - 3] + "..."
        # The largest of each tolerance over the floating-point outputs; fp32's when there is none.
        tolerances = [
            _tolerance(leaf.dtype)
            for leaf in tree_leaves(actual)
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()
        ]
        rtol, atol = map(max, zip(*tolerances)) if tolerances else _tolerance(torch.float32)
        return {
            "ok": False,
            "quantity": quantity,
            "against": against,
            "max_abs_err": None,
            "max_rel_err": None,
            "atol": atol,
            "rtol": rtol,
            "error": message,
        }
    return {**compare_outputs(actual, expected, against), "quantity": quantity, "against": against}
