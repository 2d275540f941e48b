"""What a case's call did to its inputs: an undeclared change in place is refused."""

from __future__ import annotations

import torch

from benchtrail.suite.definitions import Model
from benchtrail.worker.functions import input_names
from benchtrail.worker.inputs import SEED, Tensors


def changed_inputs(
    model: Model, inputs: Tensors, pristine: Tensors, versions: list[int], when: str
) -> str | None:
    """Why a case that changed an input ``when`` is refused (a version counter moved from ``versions``,
    or values differ from ``pristine``), or None; a model declaring ``mutates_inputs`` never is."""
    if model.mutates_inputs:
        return None
    for i, (t, p, v) in enumerate(zip(inputs, pristine, versions)):
        if t._version == v and _same(t.detach(), p):
            continue
        if model.params or not model.input_specs:
            name, declare = input_names(model, SEED)[i], "@benchmark(..., mutates_inputs=True)"
        else:
            name, declare = str(i), "Model(..., mutates_inputs=True)"
        return (
            f"{model.name} changed its input {name} ({str(t.dtype).removeprefix('torch.')} "
            f"{tuple(t.shape)}) in place {when}, so later iterations would run on changed data; declare "
            f"{declare} to time one call per sample on fresh inputs, or change a copy"
        )
    return None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN equal to NaN."""
    if a.is_floating_point() or a.is_complex():
        return bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))
    return bool(torch.equal(a, b))
