"""Correctness of a compiled module's output against eager, with dtype-aware tolerances.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (``torch.allclose``'s
rule). The tolerances are ``torch.testing.assert_close``'s defaults for fp16 and bf16, and for
fp32 100× its defaults (rtol 1.3e-4, atol 1e-3): compiled code reorders reductions and fuses
operations, which changes fp32 rounding by more than one ulp on sums of thousands of terms.
"""

from __future__ import annotations

from typing import Any

import torch

from benchtrail.modules import ModuleError, build_model
from benchtrail.suite.definitions import ModuleGenerationConfig

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


def check_against_eager(gen: ModuleGenerationConfig, inputs: tuple[torch.Tensor, ...], output: Any,
                        device: str) -> dict[str, Any] | None:
    """Compare ``output`` of the compiled module with the eager model's on the same inputs.

    Returns None when the model code is not importable here (an artifact-only machine).
    """
    try:
        model = build_model(gen.model.entry_point, device)
    except ModuleError:
        return None
    with torch.no_grad():
        expected = model(*inputs)
    return compare_outputs(output, expected)
