"""The baseline key: which stored runs may serve as the baseline of a device's series.

A candidate baseline's results for a device match the head's device name, GPU model, torch version
(without the local build tag), measurement-method version and origin (CI or not). Results without ``ci``
take the origin their run id tells; an unknown origin matches either. Counted series also need equal
counter keys (``details.counter``). The one definition: docs/formats.md, "Baseline key".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from benchtrail.results.schema import ResultsFile

#: How a device's ``lacking`` reason names stored runs measured under another key (the comment quotes it).
OTHER_KEY = "measure it under another key"
#: What a version-1 commit pointer (written before GPU models were recorded) says of a device's GPU.
UNKNOWN_GPU = "(not recorded)"


def origin_of_run_id(run_id: Any) -> bool | None:
    """True (CI) for an all-digit id (``GITHUB_RUN_ID``), False for ``local-...``, else None (unknown)."""
    if isinstance(run_id, str) and run_id.isascii():
        if run_id.isdigit():
            return True
        if run_id.startswith("local-"):
            return False
    return None


def origin_name(ci: bool | None) -> str:
    """``CI``, ``local`` or ``unknown``."""
    return "unknown" if ci is None else "CI" if ci else "local"


@dataclass(frozen=True)
class BaselineKey:
    """What must match between a series' head and its baseline.

    Attributes:
        device: the device spec's name, e.g. ``c2-standard-16``.
        gpu: ``torch.cuda.get_device_properties(0).name``, e.g. ``NVIDIA H100 80GB HBM3``; None without a
            GPU; ``UNKNOWN_GPU`` for version-1 pointers.
        torch_version: without the local build tag, e.g. ``2.13.0``.
        ci: True for a run in CI (``GITHUB_ACTIONS=true``), False outside it, None when unknown.
    """

    device: str
    gpu: str | None
    torch_version: str
    method_version: int
    ci: bool | None = None

    def __lt__(self, other: BaselineKey) -> bool:
        """By device, GPU, torch, method version, origin; None sorts without a TypeError."""
        mine, theirs = (
            (k.device, k.gpu or "", k.torch_version, k.method_version, origin_name(k.ci))
            for k in (self, other)
        )
        return mine < theirs

    def to_dict(self) -> dict[str, Any]:
        """The pointer's ``baseline_keys`` entry, ``ci`` always (null: unknown)."""
        return asdict(self)

    def describe(self) -> str:
        """``device d, GPU g, torch t, method version m, run in CI`` (or ``no GPU``, ``run outside CI``)."""
        gpu = f"GPU {self.gpu}" if self.gpu else "no GPU"
        origin = "" if self.ci is None else ", run in CI" if self.ci else ", run outside CI"
        return (
            f"device {self.device}, {gpu}, torch {self.torch_version}, method version "
            f"{self.method_version}{origin}"
        )


def keys_of_results(files: Iterable[ResultsFile]) -> dict[str, set[BaselineKey]]:
    """Every device of ``files`` and the keys its records were measured under (usually one); the origin
    is ``environment.ci``, else what ``run.run_id`` tells."""
    keys = defaultdict(set)
    for f in files:
        env = f.environment
        method, ci = env.get("method_version", 1), env.get("ci")
        for device in {b.device_name for b in f.benchmarks}:
            keys[device].add(
                BaselineKey(
                    device,
                    env.get("gpu_name") or None,
                    str(env.get("torch_version")),
                    method if isinstance(method, int) else 1,
                    ci if isinstance(ci, bool) else origin_of_run_id(f.run.get("run_id")),
                )
            )
    return dict(keys)


def keys_of_pointer(pointer: dict[str, Any]) -> dict[str, set[BaselineKey]]:
    """The keys of each device of a commit pointer: version 2's ``baseline_keys`` (without a bool or null
    ``ci``: the origin its ``run_id`` tells); version 1: ``devices`` × its torch version, method version 1,
    ``UNKNOWN_GPU`` and its run id's origin."""
    recorded = pointer.get("baseline_keys")
    told = origin_of_run_id(pointer.get("run_id"))
    if isinstance(recorded, list):  # the store's reader checked the fields
        keys = defaultdict(set)
        for k in recorded:
            ci = k["ci"] if isinstance(k.get("ci", ""), (bool, type(None))) else told
            keys[k["device"]].add(
                BaselineKey(k["device"], k.get("gpu"), k["torch_version"], k["method_version"], ci)
            )
        return dict(keys)
    return {
        d: {BaselineKey(d, UNKNOWN_GPU, str(pointer.get("torch_version")), 1, told)}
        for d in pointer.get("devices", [])
    }


def matches(base: BaselineKey, head: BaselineKey, *, any_origin: bool = False) -> bool:
    """Whether a run with key ``base`` may be the baseline of a series with key ``head``. ``UNKNOWN_GPU``
    matches only a head without a GPU; ``any_origin`` (``--baseline-any-origin``) ignores the origin."""
    same_gpu = head.gpu is None if base.gpu == UNKNOWN_GPU else base.gpu == head.gpu
    same_origin = any_origin or None in (base.ci, head.ci) or base.ci == head.ci  # equal, or either unknown
    return (
        same_gpu
        and same_origin
        and (base.device, base.torch_version, base.method_version)
        == (head.device, head.torch_version, head.method_version)
    )


def difference(
    base: Iterable[BaselineKey], head: Iterable[BaselineKey], *, any_origin: bool = False
) -> str | None:
    """Why one device's results under the ``base`` keys cannot be compared with ones under the ``head``
    keys, naming each field that differs, e.g. ``origin local (baseline) vs CI (this run)``; None when
    every key of each side matches one of the other's."""
    base, head = set(base), set(head)
    if (
        base
        and head
        and all(any(matches(b, h, any_origin=any_origin) for b in base) for h in head)
        and all(any(matches(b, h, any_origin=any_origin) for h in head) for b in base)
    ):
        return None
    parts = []
    for name, label in (("gpu", "GPU"), ("torch_version", "torch"), ("method_version", "method version")):
        b_values, h_values = (
            sorted({str(getattr(k, name) or "none") for k in keys}) for keys in (base, head)
        )
        if b_values != h_values:
            parts.append(f"{label} {', '.join(b_values)} (baseline) vs {', '.join(h_values)} (this run)")
    b_ci, h_ci = ({k.ci for k in keys} - {None} for keys in (base, head))
    if not any_origin and b_ci and h_ci and b_ci != h_ci:
        parts.append(
            f"origin {', '.join(sorted(map(origin_name, b_ci)))} (baseline) vs "
            f"{', '.join(sorted(map(origin_name, h_ci)))} (this run)"
        )
    return "; ".join(parts) or "the baseline key differs"


def counter_difference(base_details: dict[str, Any], head_details: dict[str, Any]) -> str | None:
    """Why two counted records' ``details.counter`` differ, e.g. ``valgrind 3.19.0 (baseline) vs 3.22.0
    (this run)`` (what a side lacks: ``none``); None when they are equal."""
    base, head = (
        d["counter"] if isinstance(d.get("counter"), dict) else {} for d in (base_details, head_details)
    )
    if base == head and base:
        return None
    return "; ".join(
        f"{k} {base.get(k, 'none')} (baseline) vs {head.get(k, 'none')} (this run)"
        for k in list({**base, **head}) or ["counter"]
        if not base or not head or base.get(k) != head.get(k)
    )
