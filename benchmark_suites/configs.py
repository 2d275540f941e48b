"""Compile configs and execution configs."""

from __future__ import annotations

from benchmark_suites import unique_ids as ids
from benchtrail.suite.definitions import CompileConfig, CompileMode, ExecutionConfig, Task

EAGER = CompileConfig(ids.COMPILE_EAGER, "eager", CompileMode.EAGER)
INDUCTOR = CompileConfig(ids.COMPILE_INDUCTOR, "inductor", CompileMode.INDUCTOR)
INDUCTOR_MAX_AUTOTUNE = CompileConfig(ids.COMPILE_INDUCTOR_MAX_AUTOTUNE, "inductor-max-autotune",
                                      CompileMode.INDUCTOR_MAX_AUTOTUNE)
EXPORT = CompileConfig(ids.COMPILE_EXPORT, "export", CompileMode.EXPORT)
AOT_INDUCTOR = CompileConfig(ids.COMPILE_AOT_INDUCTOR, "aot-inductor", CompileMode.AOT_INDUCTOR)

INFERENCE_BS1 = ExecutionConfig(ids.EXECUTION_INFERENCE_BS1, "inference-bs1", Task.INFERENCE, batch_size=1)
FORWARD_BS1 = ExecutionConfig(ids.EXECUTION_FORWARD_BS1, "forward-bs1", Task.FORWARD, batch_size=1)
BACKWARD_BS1 = ExecutionConfig(ids.EXECUTION_BACKWARD_BS1, "backward-bs1", Task.BACKWARD, batch_size=1)
JACOBIAN = ExecutionConfig(ids.EXECUTION_JACOBIAN, "jacobian", Task.JACOBIAN)
