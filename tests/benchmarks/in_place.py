"""Function benchmarks that change their inputs in place, or torch's thread count, and a no-op, for
tests/test_measure_what_the_user_wrote.py."""

import torch

from benchtrail import benchmark


def n_values(n):
    """A float32 (n,) input: distinct values in a random order."""
    return torch.randn(n)


_SORT = {"inputs": n_values, "params": {"n": [10_000]}, "min_samples": 5, "warmup_time_ms": 20}


@benchmark(**_SORT)
def sort_in_place(x):
    x.copy_(torch.sort(x).values)
    return x


@benchmark(**_SORT, mutates_inputs=True)
def sort_in_place_declared(x):
    if bool((x[1:] >= x[:-1]).all()):  # every call must get the input unsorted, as the factory made it
        raise ValueError("timed on an input an earlier call sorted")
    x.copy_(torch.sort(x).values)
    return x


@benchmark(**_SORT)
def sort_copy(x):
    return torch.sort(x).values


def add_one_reference(x):
    return x + 1


@benchmark(inputs=n_values, params={"n": [16]}, reference=add_one_reference, mutates_inputs=True,
           min_samples=5)
def add_one_in_place(x):
    return x.add_(1)


@benchmark(inputs=n_values, params={"n": [16]}, min_samples=5)
def sets_two_threads(x):
    torch.set_num_threads(2)
    return x * 2


@benchmark(inputs=n_values, params={"n": [4]}, min_samples=5)
def identity(x):
    return x


@benchmark(**_SORT)
def sort_via_data(x):
    x.data.copy_(torch.sort(x).values)  # .data has a version counter of its own: the values show the change
    return x


_CALLS = [0]


@benchmark(inputs=n_values, params={"n": [16]}, min_samples=5)
def changes_on_a_later_call(x):
    _CALLS[0] += 1
    if _CALLS[0] == 3:
        x.mul_(2)
    return x * 1


@benchmark(inputs=n_values, params={"n": [16]}, reference=add_one_reference, mutates_inputs=True,
           min_samples=5,
           compile=["inductor"])
def add_one_compiled(x):
    return x.add_(1)


@benchmark(inputs=n_values, params={"n": [16]}, tasks=["forward"], mutates_inputs=True, min_samples=5)
def add_one_forward(x):
    return x.add_(1)


def three(x):
    return 3.0


@benchmark(inputs=n_values, params={"n": [16]}, reference=three, min_samples=5)
def total(x):
    return x.sum()


def first_half(x):
    return x[:8]


@benchmark(inputs=n_values, params={"n": [16]}, reference=first_half, min_samples=5)
def whole(x):
    return x * 1
