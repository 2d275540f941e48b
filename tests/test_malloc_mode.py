"""Issue 38, item 5: a paired arm measured 3x slow because glibc's malloc adjusts its mmap threshold to the
allocation history, and every worker forked from one server replays one history. In the page-faulting mode a
2 MiB array is mmapped and faulted in afresh on every call; workers run with fixed thresholds instead
(``benchtrail.runner.launch.MALLOC_TUNABLES``). Counted in minor page faults, not timed."""

import json
import subprocess
import sys

import pytest

from benchtrail.runner.launch import MALLOC_TUNABLES, _environments

#: Minor page faults per call of a loop that allocates, fills and frees 2 MiB (512 pages of 4 KiB).
FAULTS = """
import json, resource
import numpy as np
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    np.ones(1 << 18).sum()
before = faults()
for _ in range(20):
    np.ones(1 << 18).sum()
print(json.dumps((faults() - before) / 20))
"""


def _faults_per_call(env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", FAULTS], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="GLIBC_TUNABLES is glibc's (Linux)")
def test_the_page_faulting_mode_is_gone_in_a_workers_environment(monkeypatch):
    # The mode a history can leave a process in: mmap threshold at glibc's 128 KiB start, never raised.
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072")
    import os

    assert _faults_per_call(dict(os.environ)) >= 400  # every call faults its 2 MiB in again
    env, _ = _environments(1, None)
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.mmap_threshold=131072:{MALLOC_TUNABLES}"  # the user's kept
    assert _faults_per_call(env) < 5  # ours come later and win: the array stays in the heap
