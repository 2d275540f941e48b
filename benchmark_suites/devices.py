"""Device specs. The name is the runner's machine type and its runner label."""

from __future__ import annotations

from benchmark_suites import unique_ids as ids
from benchtrail.suite.definitions import Architecture, DeviceSpec

# 2 intra-op threads: stable on small VMs and the same on every CPU runner, so results compare.
C2_STANDARD_16 = DeviceSpec(ids.DEVICE_C2_STANDARD_16, "c2-standard-16", "linux-x86_64", Architecture.CPU,
                            "x86_64-cascadelake", threads=2)
A2_HIGHGPU_1G = DeviceSpec(ids.DEVICE_A2_HIGHGPU_1G, "a2-highgpu-1g", "linux-x86_64", Architecture.CUDA,
                           "sm_80", threads=4)

ALL_DEVICES = (C2_STANDARD_16, A2_HIGHGPU_1G)
