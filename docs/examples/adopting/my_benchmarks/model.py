"""The project's code: a small network and a function, as any PyTorch project has them."""

import torch


class Chain(torch.nn.Module):
    """``repeat`` products with a fixed (width, width) weight, each followed by tanh.

    Input: float32 (batch, width). Output: float32 (batch, width).
    """

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width, width) / width**0.5)

    def forward(self, x: torch.Tensor, repeat: int = 1) -> torch.Tensor:
        for _ in range(repeat):
            x = torch.tanh(x @ self.weight)
        return x


def masked_softplus(x: torch.Tensor, mask: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """softplus(beta * x) / beta where ``mask`` (bool, x's shape) holds, else 0."""
    return torch.where(mask, torch.nn.functional.softplus(x, beta=beta), torch.zeros_like(x))
