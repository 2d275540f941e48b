"""An adopting project's benchmark suite, run by the `smoke` preset (docs/adopting.md).

The factories live here and the code they measure in ``my_project``: a result's content hash
covers this file (the benchmark's definition), so a PR that changes only ``my_project`` is
compared with its baseline, while one that changes a benchmark's definition shows it as "not
comparable".
"""

import torch
from my_project.layers import Chain, Mix

from benchtrail.suite.definitions import (
    Architecture,
    CompileConfig,
    CompileMode,
    DeviceSpec,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Suite,
    Task,
)

#: The runner: its name is the machine type and a runner label.
LAPTOP = DeviceSpec("device-laptop", "laptop", "linux-x86_64", Architecture.CPU, "x86_64", threads=1)
EAGER = CompileConfig("compile-eager", "eager", CompileMode.EAGER)
EXPORT = CompileConfig("compile-export", "export", CompileMode.EXPORT)
QUICK = ExecutionConfig("execution-quick", "inference-quick", Task.INFERENCE, processes=1, min_samples=20,
                        warmup_time_ms=50)


def chain() -> torch.nn.Module:
    """Input: float32 (64, 64). Output: float32 (64, 64)."""
    return Chain()


def mix() -> torch.nn.Module:
    """Input: float32 (64, 64). Output: float32 (64, 64)."""
    return Mix()


def generate() -> Suite:
    chain_model = Model("model-chain", "chain", ("example",), "my_benchmarks.suite:chain", ("64x64xf32",))
    mix_model = Model("model-mix", "mix", ("example",), "my_benchmarks.suite:mix", ("64x64xf32",))
    modules = (ModuleGenerationConfig.build(chain_model, EAGER, Architecture.CPU),
               ModuleGenerationConfig.build(mix_model, EAGER, Architecture.CPU),
               ModuleGenerationConfig.build(mix_model, EXPORT, Architecture.CPU))
    cases = tuple(RunConfig.build(module, QUICK, LAPTOP, presets=("smoke",)) for module in modules)
    return Suite(cases, modules, ("smoke",), ())
