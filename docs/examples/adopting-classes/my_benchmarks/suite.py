"""An adopting project's benchmark suite: one model, run by the `smoke` preset (docs/adopting.md)."""

import torch

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
QUICK = ExecutionConfig("execution-quick", "inference-quick", Task.INFERENCE, processes=2, min_samples=5,
                        warmup_time_ms=20)
#: Matrix products per call: the work a change to this project would make slower or faster.
REPEAT = 20


class Chain(torch.nn.Module):
    """``REPEAT`` products of a 64 x 64 matrix with a fixed weight."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64) / 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(REPEAT):
            x = torch.tanh(x @ self.weight)
        return x


def chain() -> torch.nn.Module:
    """Input: float32 (64, 64). Output: float32 (64, 64)."""
    return Chain()


def generate() -> Suite:
    model = Model("model-chain", "chain", ("example",), "my_benchmarks.suite:chain", ("64x64xf32",))
    module = ModuleGenerationConfig.build(model, EAGER, Architecture.CPU)
    case = RunConfig.build(module, QUICK, LAPTOP, presets=("smoke",))
    return Suite((case,), (module,), ("smoke",), ())
