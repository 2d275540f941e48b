"""Model factories that misbehave on purpose, for runner tests."""

import time

import torch


class _Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("deliberate failure in forward")


class _NaN(torch.nn.Module):
    def forward(self, x):
        return x * float("nan")


class _Identity(torch.nn.Module):
    def forward(self, x):
        return x + 1


def raises():
    return _Raises()


def nan_output():
    return _NaN()


def hangs():
    time.sleep(600)
    return _Identity()


def tiny():
    return _Identity()
