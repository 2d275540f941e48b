"""Function benchmarks (``benchtrail.benchmark``) for tests/test_function_benchmarks.py: vrelu3, right and
wrong in exactly one quantity each (tests/benchmarks/bad_models.py's hand-written backwards, as the
class-API tests use them), with a non-tensor keyword argument; and a function of a float tensor, an
index tensor and a boolean mask passed by keyword. The keyword argument is added, not multiplied: a factor
would scale the cotangents that the wrong backwards are right or wrong for."""

import torch

from benchtrail import Args, benchmark
from tests.benchmarks import bad_models


def vrelu3_inputs(n):
    """A float32 (n,) input and a non-tensor keyword argument."""
    return Args(torch.randn(n), offset=2.0)


def vrelu3_reference(x, offset):
    return bad_models._vrelu3(x) + offset


_CHECKED = {"inputs": vrelu3_inputs, "params": {"n": [16]}, "reference": vrelu3_reference,
                "tasks": ["inference", "backward", "jacobian"]}


@benchmark(**_CHECKED)
def vrelu3(x, offset):
    return bad_models._vrelu3(x) + offset


@benchmark(**_CHECKED)
def vrelu3_wrong_value(x, offset):
    return bad_models._vrelu3(x) + 0.01 + offset


@benchmark(**_CHECKED)
def vrelu3_wrong_gradient(x, offset):
    return bad_models._WrongForOnes.apply(x) + offset


@benchmark(**_CHECKED)
def vrelu3_wrong_jacobian(x, offset):
    return bad_models._WrongForOneHot.apply(x) + offset


def masked_inputs(n, dtype):
    """x: (n,) of ``dtype``; idx: int64 (n // 2,) positions into x; mask: bool (n,)."""
    generator = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=generator).to(getattr(torch, dtype))
    return Args(x, torch.randperm(n, generator=generator)[: n // 2], mask=x > 0)


def gather_masked_reference(x, idx, mask):
    return torch.stack([x[i] * 2 if mask[i] else x[i] * 0 for i in idx.tolist()])


@benchmark(inputs=masked_inputs, params={"n": [8, 12], "dtype": ["float32"]},
           reference=gather_masked_reference,
           tasks=["inference", "backward", "jacobian"], compile=["eager", "inductor"])
def gather_masked(x, idx, mask):
    return torch.where(mask, x * 2, torch.zeros_like(x))[idx]
