"""Benchmarks whose reference raises, for tests/test_correctness_check.py: a function reference that
raises ValueError, one that raises a TypeError from inside (its signature is right, so the suite accepts
it), one with a long message, and a module_benchmark whose reference factory raises."""

import torch

from benchtrail import Args, benchmark, module_benchmark


def _inputs(n):
    return Args(torch.randn(n))


def boom_reference(x):
    raise ValueError("boom")


def str_reference(x):
    return x + "one"


def long_reference(x):
    raise ValueError("long " * 200)


@benchmark(inputs=_inputs, params={"n": [4]}, reference=boom_reference)
def boom(x):
    return x * 2


@benchmark(inputs=_inputs, params={"n": [4]}, reference=str_reference)
def wrong_type(x):
    return x + 1


@benchmark(inputs=_inputs, params={"n": [4]}, reference=long_reference)
def long_message(x):
    return x - 1


def no_reference_module(n):
    raise ValueError(f"no reference module of size {n}")


@module_benchmark(inputs=_inputs, params={"n": [4]}, reference=no_reference_module)
def scaled(n):
    return torch.nn.Linear(n, n)
