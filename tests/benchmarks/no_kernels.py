"""Function benchmarks (``benchtrail.benchmark``) for tests/test_kernel_count.py whose Inductor modules
generate no kernel, each for another reason: a matrix product (an extern call of ``aten.mm``), a
transpose (a view: nothing to compute) and a function that returns its input (no graph at all)."""

import torch

from benchtrail import Args, benchmark


def square_inputs(n):
    """Two float32 (n, n) matrices."""
    return Args(torch.randn(n, n), torch.randn(n, n))


@benchmark(inputs=square_inputs, params={"n": [8]}, compile=["eager", "inductor"])
def matmul(a, b):
    return a @ b


@benchmark(inputs=square_inputs, params={"n": [8]}, compile=["eager", "inductor"])
def transpose(a, b):
    return a.t()


@benchmark(inputs=square_inputs, params={"n": [8]}, compile=["eager", "inductor"])
def passthrough(a, b):
    return a
