"""What a result was measured with: the git commit and the machine's software and hardware."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

#: Commit recorded when the working directory is not a git checkout.
UNKNOWN_COMMIT = "0" * 40


def git(cwd: Path, *args: str) -> str | None:
    """``git <args>`` in ``cwd``: its stripped stdout, or None when git fails, prints nothing or is absent."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def git_state(cwd: Path = Path(".")) -> tuple[str, bool]:
    """Return ``(commit sha, dirty)`` of the checkout at ``cwd``.

    Dirty means tracked files differ from HEAD (untracked files are ignored). Outside a git
    checkout the commit is ``UNKNOWN_COMMIT`` and dirty is True.
    """
    commit = git(cwd, "rev-parse", "HEAD")
    if not commit:
        return UNKNOWN_COMMIT, True
    status = git(cwd, "status", "--porcelain", "--untracked-files=no")
    return commit, bool(status)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or ``platform.processor()`` elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def torch_version() -> str:
    """torch's version without the local build tag (``2.13.0+cpu`` → ``2.13.0``)."""
    import torch

    return torch.__version__.split("+")[0]


def collect_environment(threads: int) -> dict[str, Any]:
    """Torch and Python versions, CPU model and counts, the fixed thread count, and the host."""
    import torch

    env: dict[str, Any] = {
        "torch_version": torch_version(),
        "torch_build": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "threads": threads,
        "hostname": platform.node(),
        "cuda_available": torch.cuda.is_available(),
    }
    if env["cuda_available"]:
        env["gpu_name"] = torch.cuda.get_device_name(0)
        env["cuda_version"] = torch.version.cuda
    return env
