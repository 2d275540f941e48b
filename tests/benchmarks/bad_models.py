"""Tiny model factories for runner and compiler tests, some of which misbehave on purpose."""

import os
import time

import torch


class _Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("deliberate failure in forward")


class _NaN(torch.nn.Module):
    def forward(self, x):
        return x * float("nan")


class _Identity(torch.nn.Module):
    def forward(self, x):
        return x + 1


def raises():
    return _Raises()


def nan_output():
    return _NaN()


def hangs():
    time.sleep(600)
    return _Identity()


def tiny():
    return _Identity()


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


class _GraphBreak(_Linear):
    def forward(self, x):
        y = self.fc(x)
        print("a deliberate graph break", end="")  # Dynamo cannot trace print
        return torch.relu(y)


class _DataDependent(_Linear):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: torch.export cannot capture it
            return self.fc(x)
        return -self.fc(x)


def linear():
    return _Linear()


def graph_break():
    return _GraphBreak()


def data_dependent():
    return _DataDependent()


class _Jittery(torch.nn.Module):
    """Each call busy-waits 0.1 ms or 3 ms, drawn from a seeded generator: a sample is a block of a few
    calls (about 1.5 ms), so IQR/median of the samples is far above 10%. A busy-wait, not ``time.sleep``:
    on a loaded machine a sleeping thread wakes late, by as much as the longer wait, which erased the
    contrast (the test that uses this model failed once under pytest-xdist)."""

    def __init__(self):
        super().__init__()
        import random

        self._random = random.Random(0)

    def forward(self, x):
        end = time.perf_counter() + self._random.choice((0.0001, 0.003))
        while time.perf_counter() < end:
            pass
        return x + 1


def jittery():
    return _Jittery()


# vrelu3 (benchmark_suites.models.functions) implemented wrongly in exactly one quantity each, to
# show that the value, the gradient and the Jacobian are checked separately against the reference.
# The Jacobian task uses reverse mode here (a square Jacobian), so its rows are vector-Jacobian
# products with one-hot cotangents, while the gradient task uses an all-ones cotangent.

def _vrelu3(x):
    return torch.where(x < 0, torch.zeros_like(x), torch.where(x < 1, x * x * x / 3.0, x - 2.0 / 3.0))


def _vrelu3_derivative(x):
    return torch.where(x < 0, torch.zeros_like(x), torch.where(x < 1, x * x, torch.ones_like(x)))


class _Vrelu3Function(torch.autograd.Function):
    """vrelu3 with a hand-written backward (subclasses get it wrong in one way each)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return _vrelu3(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])


class _WrongForOnes(_Vrelu3Function):
    """Correct vector-Jacobian product for one-hot cotangents (so a correct Jacobian), scaled by
    the cotangent's sum otherwise: the gradient of the sum is n times too large."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _vrelu3_derivative(x) * g.sum()


class _WrongForOneHot(_Vrelu3Function):
    """Correct for an all-ones cotangent (so a correct gradient of the sum), but every Jacobian row
    is the derivative times the cotangent's mean: a wrong Jacobian."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.mean() * _vrelu3_derivative(x)


class _Offset(torch.nn.Module):
    def forward(self, x):
        return _vrelu3(x) + 0.01  # wrong value; a constant offset leaves gradient and Jacobian right


class _Apply(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function.apply(x)


def vrelu3_wrong_value():
    return _Offset()


def vrelu3_wrong_gradient():
    return _Apply(_WrongForOnes)


def vrelu3_wrong_jacobian():
    return _Apply(_WrongForOneHot)


class _OutOfMemory(torch.nn.Module):
    def forward(self, x):
        # The message PyTorch's CUDA caching allocator raises (c10/cuda/CUDACachingAllocator.cpp).
        raise torch.OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
            "1.06 GiB is free. Of the allocated memory 76.80 GiB is allocated by PyTorch.")


def out_of_memory():
    return _OutOfMemory()


class _CrashesWithGrad(torch.nn.Module):
    """Ends its process (exit code 3) when called with autograd on: a crash that takes its worker down."""

    def forward(self, x):
        if torch.is_grad_enabled():
            os._exit(3)
        return x + 1


def crashes_with_grad():
    return _CrashesWithGrad()


def counted():
    """``tiny``, and a line with this process's id in the file ``$BENCHTRAIL_TEST_BUILDS`` per model built."""
    with open(os.environ["BENCHTRAIL_TEST_BUILDS"], "a") as f:
        f.write(f"{os.getpid()}\n")
    return _Identity()
