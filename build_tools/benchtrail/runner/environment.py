"""What a result was measured with: the git commit and the machine's software and hardware."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or ``platform.processor()`` elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def in_ci(environ: dict[str, str] | None = None) -> bool:
    """``GITHUB_ACTIONS`` is ``true``; recorded as ``environment.ci``, part of the baseline key."""
    return (os.environ if environ is None else environ).get("GITHUB_ACTIONS") == "true"


def machine_of(env: dict[str, Any]) -> dict[str, Any]:
    """``{cpu_model, cpu_count, gpu_model}`` of a collected environment: logical cores (None when unknown),
    and ``gpu_name`` or None."""
    return {
        "cpu_model": env.get("cpu_model"),
        "cpu_count": env.get("cpu_count"),
        "gpu_model": env.get("gpu_name"),
    }


def torch_version() -> str:
    """torch's version without the local build tag (``2.13.0+cpu`` → ``2.13.0``)."""
    import torch

    return torch.__version__.split("+")[0]


def collect_environment(threads: int) -> dict[str, Any]:
    """Versions (torch, Python, the measurement method), CPU model and counts, ``threads``, the host, the
    runner checks as ``doctor`` (about 0.25 s), ``machine`` and ``ci``; with a GPU also :func:`gpu_info`."""
    import torch

    from benchtrail.runner.doctor import run_checks
    from benchtrail.suite.content_hash import HASH_SCHEME
    from benchtrail.worker.protocol import METHOD_VERSION

    env: dict[str, Any] = {
        "torch_version": torch_version(),
        "torch_build": torch.__version__,
        "method_version": METHOD_VERSION,
        "hash_scheme": HASH_SCHEME,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "threads": threads,
        "hostname": platform.node(),
        "cuda_available": torch.cuda.is_available(),
        # Before gpu_info, whose torch calls would make this process a GPU compute app.
        "doctor": run_checks(),
    }
    if env["cuda_available"]:
        env.update(gpu_info())
    return env | {"machine": machine_of(env), "ci": in_ci()}


#: ``nvidia-smi --query-gpu`` fields recorded with GPU results (``nvidia-smi --help-query-gpu``):
#: the driver and the current and maximum SM and memory clocks in MHz.
NVIDIA_SMI_FIELDS = ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem")


def parse_nvidia_smi(text: str) -> dict[str, Any]:
    """Parse one line of ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits`` into
    ``{"driver_version": str, "clocks_mhz": {"sm": int, "mem": int, "max_sm": int, "max_mem": int}}``, less
    what nvidia-smi could not read (``[N/A]``); ``{}`` for no line."""
    line = text.strip().partition("\n")[0]
    if not line:
        return {}
    fields = dict(zip(NVIDIA_SMI_FIELDS, (v.strip() for v in line.split(","))))
    driver = fields.pop("driver_version", "")
    out: dict[str, Any] = {
        "clocks_mhz": {
            name.removeprefix("clocks.").replace(".", "_"): int(v)
            for name, v in fields.items()
            if v.isdigit()
        }
    }
    if driver and not driver.startswith("["):
        out["driver_version"] = driver
    return out


def gpu_info(index: int = 0) -> dict[str, Any]:
    """Name, compute capability, memory (bytes), CUDA and cuDNN versions from torch; driver and clocks
    from ``nvidia-smi`` where readable."""
    import torch

    from benchtrail.runner.doctor import nvidia_smi

    props = torch.cuda.get_device_properties(index)
    info: dict[str, Any] = {
        "gpu_name": props.name,
        "gpu_compute_capability": f"{props.major}.{props.minor}",
        "gpu_memory_bytes": int(props.total_memory),
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    out, _ = nvidia_smi(
        f"--id={index}", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"
    )
    return info | {f"gpu_{k}": v for k, v in parse_nvidia_smi(out or "").items()}
