"""Small multi-layer perceptron (MNIST-sized)."""

from __future__ import annotations

from torch import nn


def mlp() -> nn.Module:
    """784 -> 512 -> ReLU -> 512 -> ReLU -> 10. Input: float32 (32, 784). Output: (32, 10)."""
    return nn.Sequential(
        nn.Linear(784, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 10),
    ).eval()
