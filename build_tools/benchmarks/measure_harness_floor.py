#!/usr/bin/env python3
"""Measure the harness floor: benchtrail's median of tiny function benchmarks next to torch's Timer.

Writes four function benchmarks of a float32 (4,) input to a temporary module (a no-op returning its
input, one view, two views, ``x + 1``), runs each through the real worker as the run stage does (fresh
worker processes, one thread) and times the same calls with ``torch.utils.benchmark.Timer`` in this
process (one thread). Prints per benchmark benchtrail's median, Timer's median, their difference (the
harness's share of benchtrail's figure) and the floor the worker measured (``details.floor_us``: a
no-op called as the case's call is, in the case's block size). All times in µs per call.

Usage: python build_tools/benchmarks/measure_harness_floor.py [--processes 3] [--samples 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

MODULE = '''
import torch
from benchtrail import benchmark


def four():
    return torch.randn(4)


@benchmark(inputs=four)
def noop(x):
    return x


@benchmark(inputs=four)
def one_view(x):
    return x.view(2, 2)


@benchmark(inputs=four)
def two_views(x):
    return x.view(2, 2).view(4)


@benchmark(inputs=four)
def add_one(x):
    return x + 1
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="worker processes per case (default 3)")
    parser.add_argument("--samples", type=int, default=10, help="samples per process (default 10)")
    args = parser.parse_args()
    import torch
    from torch.utils.benchmark import Timer

    from benchtrail.runner.run_cases import run_case
    from benchtrail.suite import functions
    from benchtrail.suite.definitions import RunConfig

    with tempfile.TemporaryDirectory(prefix="benchtrail-floor-") as tmp:
        Path(tmp, "floor_benchmarks.py").write_text(MODULE)
        sys.path.insert(0, tmp)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (tmp, os.environ.get("PYTHONPATH"))))
        module = importlib.import_module("floor_benchmarks")
        suite = functions.suite_of(functions.discover(["floor_benchmarks"]))
        torch.set_num_threads(1)
        x = module.four()
        print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; µs per call, one thread")
        print(f"{'benchmark':<12} {'benchtrail':>11} {'Timer':>9} {'harness':>9} {'floor':>7}")
        for rc in suite.run_configs:
            name = rc.name.split(".")[1].split("[")[0]
            execution = dataclasses.replace(rc.execution_config, processes=args.processes,
                                            min_samples=args.samples)
            response = run_case(RunConfig.build(rc.module_generation_config, execution, rc.target_device))
            if not response.ok:
                sys.exit(f"{rc.name}: {response.status}: {response.reason}")
            ours = statistics.median(response.samples)
            fn = getattr(module, name).fn
            timer = Timer("fn(x)", globals={"fn": fn, "x": x},
                          num_threads=1).blocked_autorange(min_run_time=1)
            theirs = timer.median * 1e6
            floor = response.answer.floor_us
            print(f"{name:<12} {ours:>11.3f} {theirs:>9.3f} {ours - theirs:>9.3f} {floor:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
