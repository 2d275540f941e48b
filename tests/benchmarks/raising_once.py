"""A function benchmark whose code raises in the first worker process only (tests/test_partial_case.py): the
process that finds no file at ``$BENCHTRAIL_TEST_RAISE_ONCE`` creates it and raises."""

import os

import torch

from benchtrail import Args, benchmark


@benchmark(inputs=lambda: Args(torch.ones(8)), presets=["partial"])
def raises_once(x):
    marker = os.environ.get("BENCHTRAIL_TEST_RAISE_ONCE")
    if marker and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("flaky: the first process raises")
    return x * 2
