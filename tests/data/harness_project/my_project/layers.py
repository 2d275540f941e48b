"""Two small layers of the adopting project. A change here is what a PR's benchmarks compare."""

import torch

#: Matrix products per call of ``Chain``.
REPEAT = 20


class Chain(torch.nn.Module):
    """``REPEAT`` products of a 64 x 64 matrix with a fixed weight, each followed by tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64) / 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(REPEAT):
            x = torch.tanh(x @ self.weight)
        return x


class Mix(torch.nn.Module):
    """A gated linear layer: ``sigmoid(x W1) * (x W2)`` over 64 features."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(64, 64)
        self.value = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.gate(x)) * self.value(x)
