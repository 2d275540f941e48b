"""Benchmarks as functions (docs/adopting.md): each is a function, an input factory and parameters."""

import torch

from benchtrail import Args, benchmark, module_benchmark
from my_benchmarks.model import Chain, masked_softplus


@module_benchmark(inputs=lambda batch: Args(torch.randn(batch, 64), repeat=8), params={"batch": [1, 32]})
def chain(batch):
    return Chain(width=64)


def softplus_reference(x, mask, beta):  # the same formula, written out
    return torch.where(mask, torch.log1p(torch.exp(beta * x)) / beta, torch.zeros_like(x))


@benchmark(inputs=lambda n: Args(torch.randn(n), torch.rand(n) > 0.5, beta=2.0), params={"n": [256]},
           reference=softplus_reference, tasks=["inference", "backward"])
def softplus(x, mask, beta):
    return masked_softplus(x, mask, beta=beta)
