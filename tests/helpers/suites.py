"""Small suites of tests/benchmarks/bad_models.py's entry points (one eager run config each, quick execution
policies) and their execution export, for the tests that run the run stage on them."""

import dataclasses
from pathlib import Path

from benchmark_suites import devices
from benchtrail import jsonio
from benchtrail.suite.definitions import (
    CompileConfig,
    CompileMode,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Suite,
    Task,
)
from benchtrail.suite.export import export_execution

EAGER = CompileConfig("compile-eager", "eager", CompileMode.EAGER)
FAST = ExecutionConfig("exec-test", "inference-bs1", Task.INFERENCE, processes=2, min_samples=10,
                       warmup_time_ms=10, timeout_s=20)
#: The hanging case's policy: killed after 5 s (it sleeps for 600), so the test waits 5 s, not FAST's 20.
HANG = dataclasses.replace(FAST, id="exec-test-hang", timeout_s=5)


def bad_models_suite(*entries: tuple[str, str], device=devices.C2_STANDARD_16) -> Suite:
    rcs = []
    for name, entry in entries:
        model = Model(f"model-{name}", name, ("test",), f"tests.benchmarks.bad_models:{entry}", ("8xf32",))
        gen = ModuleGenerationConfig.build(model, EAGER, device.architecture)
        rcs.append(RunConfig.build(gen, HANG if entry == "hangs" else FAST, device, presets=("test",)))
    return Suite(tuple(rcs), tuple(rc.module_generation_config for rc in rcs), ("test",), ())


def write_execution_export(tmp_path, suite) -> Path:
    return jsonio.write_json(tmp_path / "execution.json", export_execution(suite, ("test",)))
