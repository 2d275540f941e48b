"""Two small layers of the adopting project. A change here is what a PR's benchmarks compare."""

import time

import torch

#: Seconds ``Chain`` waits per call: a stand-in for work whose time does not vary between worker
#: processes (a bare tensor op on a shared 2-core VM can differ by 50% from one process to the next),
#: so the paired re-check of a slowdown is decided, not noisy. 10 ms, not 1: a sleep here wakes up to
#: 3.5 ms late now and then, which made 1 ms samples' IQR/median pass the 25% noise guard in about 7% of
#: 20-sample series on a quiet 2-vCPU VM (0.8% at most at 10 ms; 15 series of 20 samples each).
DELAY_S = 0.010


class Chain(torch.nn.Module):
    """One product of a 64 x 64 matrix with a fixed weight, after waiting ``DELAY_S``."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64) / 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(DELAY_S)
        return torch.tanh(x @ self.weight)


class Mix(torch.nn.Module):
    """A gated linear layer: ``sigmoid(x W1) * (x W2)`` over 64 features."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(64, 64)
        self.value = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.gate(x)) * self.value(x)
