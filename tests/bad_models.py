"""Tiny model factories for runner and compiler tests, some of which misbehave on purpose."""

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


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


class _GraphBreak(_Linear):
    def forward(self, x):
        y = self.fc(x)
        print("a deliberate graph break", end="")  # Dynamo cannot trace print
        return torch.relu(y)


class _DataDependent(_Linear):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: torch.export cannot capture it
            return self.fc(x)
        return -self.fc(x)


def linear():
    return _Linear()


def graph_break():
    return _GraphBreak()


def data_dependent():
    return _DataDependent()


class _Jittery(torch.nn.Module):
    """Each call sleeps 0.2 ms or 3 ms at random: IQR/median of its samples is far above 10%."""

    def forward(self, x):
        import random

        time.sleep(random.choice((0.0002, 0.003)))
        return x + 1


def jittery():
    return _Jittery()
