"""The baseline key: which stored runs may serve as the baseline of a device's series.

A run is a candidate baseline for a series of device ``d`` when its results for ``d`` have the same
key as the head's: device name, GPU model (``environment.gpu_name`` where the machine has a GPU,
else none), torch version (without the local build tag) and measurement-method version
(``benchtrail.worker.timing.METHOD_VERSION``; results without ``environment.method_version`` are version 1).
This module is the one definition (docs/formats.md, "Baseline key"): the baseline lookup matches
commit pointers with it, and ``compare`` refuses to compare results whose keys differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from benchtrail.results.schema import ResultsFile

#: What a version-1 commit pointer (written before GPU models were recorded) says of a device's GPU.
UNKNOWN_GPU = "(not recorded)"


@dataclass(frozen=True, order=True)
class BaselineKey:
    """What must match between a series' head and its baseline.

    Attributes:
        device: the device spec's name (runner machine type), e.g. ``c2-standard-16``.
        gpu: the GPU model (``torch.cuda.get_device_properties(0).name``, e.g. ``NVIDIA H100 80GB HBM3``),
            or None on a machine without a GPU; ``UNKNOWN_GPU`` for version-1 pointers.
        torch_version: torch's version without the local build tag, e.g. ``2.13.0``.
        method_version: ``benchtrail.worker.timing.METHOD_VERSION`` of the code that measured.
    """

    device: str
    gpu: str | None
    torch_version: str
    method_version: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """``device d, GPU g, torch t, method version m`` (``no GPU`` without one)."""
        gpu = f"GPU {self.gpu}" if self.gpu else "no GPU"
        return f"device {self.device}, {gpu}, torch {self.torch_version}, method version {self.method_version}"


def key_of(results: ResultsFile, device: str) -> BaselineKey:
    """The key of ``device``'s records in ``results``."""
    env = results.environment
    method = env.get("method_version", 1)
    return BaselineKey(device, env.get("gpu_name") or None, str(env.get("torch_version")),
                       method if isinstance(method, int) else 1)


def keys_of_results(files: Iterable[ResultsFile]) -> dict[str, set[BaselineKey]]:
    """Every device of ``files`` and the keys its records were measured under (usually one)."""
    keys: dict[str, set[BaselineKey]] = {}
    for f in files:
        for device in {b.device_name for b in f.benchmarks}:
            keys.setdefault(device, set()).add(key_of(f, device))
    return keys


def keys_of_pointer(pointer: dict[str, Any]) -> dict[str, set[BaselineKey]]:
    """The keys of each device of a commit pointer. Version 2 records them (``baseline_keys``); a
    version-1 pointer gives ``devices`` × its torch version, method version 1 and ``UNKNOWN_GPU``
    (it serves only devices whose head has no GPU: see :func:`matches`)."""
    recorded = pointer.get("baseline_keys")
    keys: dict[str, set[BaselineKey]] = {}
    if isinstance(recorded, list):
        names = [f.name for f in fields(BaselineKey)]
        for k in recorded:
            if isinstance(k, dict) and isinstance(k.get("device"), str):
                keys.setdefault(k["device"], set()).add(BaselineKey(*(k.get(n) for n in names)))
        return keys
    return {d: {BaselineKey(d, UNKNOWN_GPU, str(pointer.get("torch_version")), 1)}
            for d in pointer.get("devices", []) if isinstance(d, str)}


def matches(base: BaselineKey, head: BaselineKey) -> bool:
    """Whether a run with key ``base`` may be the baseline of a series with key ``head``. A key with
    ``UNKNOWN_GPU`` (an old pointer) matches only a head without a GPU."""
    if base.gpu == UNKNOWN_GPU:
        return head.gpu is None and (base.device, base.torch_version, base.method_version) == (
            head.device, head.torch_version, head.method_version)
    return base == head


def difference(base: Iterable[BaselineKey], head: Iterable[BaselineKey]) -> str | None:
    """Why results measured under the ``base`` keys cannot be compared with ones under the ``head``
    keys (one device), naming each field that differs, e.g. ``GPU NVIDIA A100-SXM4-80GB (baseline) vs
    NVIDIA H100 80GB HBM3 (this run)``; None when every head key matches a base key and every base key
    matches a head key (a device measured partly on another GPU model is not comparable)."""
    base, head = sorted(set(base), key=str), sorted(set(head), key=str)
    if base and head and all(any(matches(b, h) for b in base) for h in head) and \
            all(any(matches(b, h) for h in head) for b in base):
        return None
    parts = []
    for name, label in (("gpu", "GPU"), ("torch_version", "torch"), ("method_version", "method version")):
        b_values = sorted({str(getattr(k, name) or "none") for k in base})
        h_values = sorted({str(getattr(k, name) or "none") for k in head})
        if b_values != h_values:
            parts.append(f"{label} {', '.join(b_values)} (baseline) vs {', '.join(h_values)} (this run)")
    return "; ".join(parts) or "the baseline key differs"
