"""The whole suite: which modules and run configs exist, and the presets that select them."""

from __future__ import annotations

import functools

from benchmark_suites import configs, devices, model_definitions
from benchtrail.suite.definitions import Architecture, ModuleGenerationConfig, RunConfig, Suite

X86_64 = "x86_64"
CUDA = "cuda"
COMP_STATS = "comp-stats"
SMOKE = "smoke"

PRESETS = (X86_64, CUDA, COMP_STATS, SMOKE)
#: Meta-presets (DESIGN.md). Smoke presets are never part of one.
META_PRESETS = (
    ("default", (X86_64, CUDA, COMP_STATS)),
    ("all", (X86_64, CUDA, COMP_STATS)),  # plus every *-large preset, once one exists
)

# Cheap cases for tests: one compiled function, one eager function, one small model.
_SMOKE_CASES = {("vrelu3", "eager"), ("vrelu3", "inductor"), ("mlp", "eager")}


@functools.cache
def generate() -> Suite:
    """Build every module and run config of the suite (pure; cached)."""
    generation_configs = []
    run_configs = []
    for arch, device, preset in ((Architecture.CPU, devices.C2_STANDARD_16, X86_64),
                                 (Architecture.CUDA, devices.A2_HIGHGPU_1G, CUDA)):
        for model in model_definitions.ALL_MODELS:
            for compile_config in (configs.EAGER, configs.INDUCTOR):
                # Compilation statistics are measured on CPU modules compiled by Inductor.
                compiled_on_cpu = arch is Architecture.CPU and compile_config is configs.INDUCTOR
                gen = ModuleGenerationConfig.build(
                    model, compile_config, arch, presets=(COMP_STATS,) if compiled_on_cpu else ()
                )
                generation_configs.append(gen)
                run_presets = [preset]
                if arch is Architecture.CPU and (model.name, compile_config.name) in _SMOKE_CASES:
                    run_presets.append(SMOKE)
                run_configs.append(RunConfig.build(gen, configs.INFERENCE_BS1, device, presets=tuple(run_presets)))
    return Suite(tuple(run_configs), tuple(generation_configs), PRESETS, META_PRESETS)
