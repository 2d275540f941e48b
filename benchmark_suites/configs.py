"""Compile configs and execution configs."""

from __future__ import annotations

from benchmark_suites import unique_ids as ids
from benchtrail.suite.definitions import CompileConfig, CompileMode, ExecutionConfig, Task

EAGER = CompileConfig(ids.COMPILE_EAGER, "eager", CompileMode.EAGER)
INDUCTOR = CompileConfig(ids.COMPILE_INDUCTOR, "inductor", CompileMode.INDUCTOR)

INFERENCE_BS1 = ExecutionConfig(ids.EXECUTION_INFERENCE_BS1, "inference-bs1", Task.INFERENCE, batch_size=1)
