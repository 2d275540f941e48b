"""The whole suite: which modules and run configs exist, and the presets that select them."""

from __future__ import annotations

import functools

from benchmark_suites import configs, devices
from benchmark_suites import model_definitions as models
from benchtrail.suite.definitions import Architecture, ModuleGenerationConfig, RunConfig, Suite

X86_64 = "x86_64"
X86_64_LARGE = "x86_64-large"
CUDA = "cuda"
COMP_STATS = "comp-stats"
COMP_STATS_LARGE = "comp-stats-large"
SMOKE = "smoke"
CUDA_SMOKE = "cuda-smoke"

PRESETS = (X86_64, X86_64_LARGE, CUDA, COMP_STATS, COMP_STATS_LARGE, SMOKE, CUDA_SMOKE)
#: Meta-presets (DESIGN.md). Smoke presets are never part of one.
META_PRESETS = (
    ("default", (X86_64, CUDA, COMP_STATS)),
    ("all", (X86_64, X86_64_LARGE, CUDA, COMP_STATS, COMP_STATS_LARGE)),
)
#: Fresh-process compilations per module: (preset, cold, warm). comp-stats gates only large
#: compile-time changes; comp-stats-large takes enough cold samples for a real test.
COMPILE_SAMPLING = ((COMP_STATS, 1, 2), (COMP_STATS_LARGE, 5, 2))

#: Models also compiled ahead of time (torch.export, AOTInductor). sqrl is left out on purpose:
#: its data-dependent branch cannot be exported.
AHEAD_OF_TIME = (models.MATMUL_1024, models.LAYER_NORM, models.CONV2D, models.MLP, models.RESNET18,
                 models.GPT2_BLOCK)
#: Models also compiled with max-autotune on the GPU runner.
MAX_AUTOTUNE = (models.MLP, models.RESNET18, models.GPT2_BLOCK)

#: Tasks beyond inference, run on eager and Inductor modules (AOTInductor runs inference only): the
#: reference-backed functions' gradient and Jacobian (vrelu3's Jacobian at 256 elements), and the
#: MLP's forward with autograd and its training step's gradient.
GRADIENT_TASKS = {
    models.VRELU3: (configs.BACKWARD_BS1,),
    models.VRELU3_256: (configs.JACOBIAN,),
    models.SQRL: (configs.BACKWARD_BS1, configs.JACOBIAN),
    models.MLP: (configs.FORWARD_BS1, configs.BACKWARD_BS1),
}

#: The compilation statistics of every PR (comp-stats): the two real networks under Inductor, the
#: graph break of sqrl, and one export and one AOTInductor module. The other modules' statistics are
#: in comp-stats-large (issue 18: the main job's cost).
COMP_STATS_MODULES = {(models.RESNET18, configs.INDUCTOR), (models.GPT2_BLOCK, configs.INDUCTOR),
                      (models.SQRL, configs.INDUCTOR), (models.MLP, configs.EXPORT),
                      (models.MLP, configs.AOT_INDUCTOR)}

# Cheap cases for tests (smoke) and GPU checks (cuda-smoke): one compiled function, one eager
# function, one small model.
_SMOKE_CASES = {("vrelu3", "eager"), ("vrelu3", "inductor"), ("mlp", "eager")}


def _compile_configs(model, arch: Architecture):
    yield configs.EAGER
    yield configs.INDUCTOR
    if model in AHEAD_OF_TIME:
        yield configs.EXPORT
        yield configs.AOT_INDUCTOR
    if arch is Architecture.CUDA and model in MAX_AUTOTUNE:
        yield configs.INDUCTOR_MAX_AUTOTUNE


def _execution_configs(model, compile_config):
    if model in models.ALL_MODELS:
        yield configs.INFERENCE_BS1
    if compile_config in (configs.EAGER, configs.INDUCTOR):
        yield from GRADIENT_TASKS.get(model, ())


@functools.cache
def generate() -> Suite:
    """Build every module and run config of the suite (pure; cached)."""
    generation_configs = []
    run_configs = []
    for arch, device, preset in ((Architecture.CPU, devices.C2_STANDARD_16, X86_64),
                                 (Architecture.CUDA, devices.A2_HIGHGPU_1G, CUDA)):
        for model in (*models.ALL_MODELS, models.VRELU3_256):
            for compile_config in _compile_configs(model, arch):
                # Compilation statistics: CPU modules (eager compiles nothing) of the models compiled
                # ahead of time, and sqrl, whose data-dependent branch is a real graph break.
                stats = (arch is Architecture.CPU and compile_config is not configs.EAGER
                         and (model in AHEAD_OF_TIME or model is models.SQRL))
                stats_presets = ((COMP_STATS, COMP_STATS_LARGE) if (model,
                                                                    compile_config) in COMP_STATS_MODULES
                                 else (COMP_STATS_LARGE,))
                gen = ModuleGenerationConfig.build(model, compile_config, arch,
                                                   presets=stats_presets if stats else ())
                generation_configs.append(gen)
                for execution in _execution_configs(model, compile_config):
                    # The CPU preset runs eager and Inductor modules; export and AOTInductor ones are
                    # in x86_64-large.
                    large = arch is Architecture.CPU and compile_config in (configs.EXPORT,
                                                                            configs.AOT_INDUCTOR)
                    run_presets = [X86_64_LARGE if large else preset]
                    if execution is configs.INFERENCE_BS1 and (model.name,
                                                               compile_config.name) in _SMOKE_CASES:
                        run_presets.append(SMOKE if arch is Architecture.CPU else CUDA_SMOKE)
                    run_configs.append(RunConfig.build(gen, execution, device, presets=tuple(run_presets)))
    return Suite(tuple(run_configs), tuple(generation_configs), PRESETS, META_PRESETS, COMPILE_SAMPLING)
