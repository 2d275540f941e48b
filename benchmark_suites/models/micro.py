"""Micro-op modules: single PyTorch operators wrapped as ``nn.Module``.

Each factory takes no arguments and returns a module in eval mode.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MatMul(nn.Module):
    """Dense matrix product ``a @ b``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class Gelu(nn.Module):
    """GELU activation with the given ``approximate`` mode ("none" or "tanh")."""

    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate=self.approximate)


class Softmax(nn.Module):
    """Softmax over the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def matmul() -> nn.Module:
    """Inputs: a, b float32 (1024, 1024). Output: (1024, 1024)."""
    return MatMul().eval()


def gelu_exact() -> nn.Module:
    """Exact (erf) GELU. Input: any float32 tensor. Output: same shape."""
    return Gelu("none").eval()


def gelu_tanh() -> nn.Module:
    """Tanh-approximated GELU. Input: any float32 tensor. Output: same shape."""
    return Gelu("tanh").eval()


def softmax() -> nn.Module:
    """Softmax over the last dim. Input: any float32 tensor. Output: same shape."""
    return Softmax().eval()


def layer_norm() -> nn.Module:
    """LayerNorm(768). Input: float32 (8, 128, 768). Output: (8, 128, 768)."""
    return nn.LayerNorm(768).eval()


def conv2d() -> nn.Module:
    """Conv2d(64, 64, 3, padding=1). Input: float32 (1, 64, 56, 56). Output: (1, 64, 56, 56)."""
    return nn.Conv2d(64, 64, 3, padding=1).eval()
