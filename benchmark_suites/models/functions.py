"""Scalar-function benchmarks from the Microsoft knossos benchmark set.

Each function is written twice: a "plain ops" version (the one that is
benchmarked) and a reference written differently, used to check correctness.
"""

from __future__ import annotations

import torch
from torch import nn


class VRelu3(nn.Module):
    """Piecewise-cubic activation "vrelu3" (knossos benchmarks), via torch.where.

    f(x) = 0 for x < 0; x**3 / 3 for 0 <= x < 1; x - 2/3 for x >= 1.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros_like(x)
        cubic = x * x * x / 3.0
        linear = x - 2.0 / 3.0
        return torch.where(x < 0, zero, torch.where(x < 1, cubic, linear))


class VRelu3Reference(nn.Module):
    """Reference for "vrelu3" (knossos benchmarks): clamp(x, 0, 1)**3 / 3 + relu(x - 1)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = torch.clamp(x, 0.0, 1.0)
        return c**3 / 3.0 + torch.relu(x - 1.0)


class Sqrl(nn.Module):
    """The "sqrl" function (knossos benchmarks) with a data-dependent Python branch.

    y = sum(x); t = -0.125 * x if y < 0 else 0.5 * x**2; return mean(sin(t) * t).
    The ``if`` on a tensor value is deliberate: it forces a torch.compile graph break.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.sum()
        if y < 0:
            t = -0.125 * x
        else:
            t = 0.5 * x**2
        return torch.mean(torch.sin(t) * t)


class SqrlReference(nn.Module):
    """Reference for "sqrl" (knossos benchmarks) using torch.where, no Python branching."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.where(x.sum() < 0, -0.125 * x, 0.5 * x * x)
        return (torch.sin(t) * t).mean()


def vrelu3() -> nn.Module:
    """Input: float32 (65536,). Output: float32 (65536,)."""
    return VRelu3().eval()


def vrelu3_reference() -> nn.Module:
    """Input: float32 (65536,). Output: float32 (65536,)."""
    return VRelu3Reference().eval()


def sqrl() -> nn.Module:
    """Input: float32 (4, 4). Output: float32 scalar (0-d)."""
    return Sqrl().eval()


def sqrl_reference() -> nn.Module:
    """Input: float32 (4, 4). Output: float32 scalar (0-d)."""
    return SqrlReference().eval()
