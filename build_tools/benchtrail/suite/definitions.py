"""Frozen dataclasses that define a benchmark suite (IREE's ``definitions/`` style).

A ``Model`` compiled by a ``CompileConfig`` for an architecture is a module (``ModuleGenerationConfig``);
a module run by an ``ExecutionConfig`` on a ``DeviceSpec`` is a ``RunConfig``, the unit a runner measures.
``build()`` derives a composite's ``id`` and ``name``; presets are tags, not part of ids. A name with a
control character or line break raises ``BadName`` (a ``UserError`` and ``ValueError``) when made.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

from benchtrail.suite.ids import hash_composite_id

# SAFE_NAME: path-safe names, benchtrail's own suite and preset names (re-exported from names).
from benchtrail.suite.names import SAFE_NAME, check_name  # noqa: F401

#: One input: dimensions then dtype, e.g. ``1x3x224x224xf32`` or ``65536xf32``.
INPUT_SPEC = re.compile(r"^(?:[1-9][0-9]*x)+(f32|f16|bf16|f64|i64|i32)$")
#: Field metadata: ``serialization`` leaves the field out while it holds its default (a field added
#: later that older readers, which refuse unknown fields, never see in the objects they already knew).
OMIT_IF_DEFAULT = {"omit_if_default": True}


class Architecture(str, enum.Enum):
    """What a device computes on."""

    CPU = "cpu"
    CUDA = "cuda"


class CompileMode(str, enum.Enum):
    """How a model becomes a module. ``eager`` compiles nothing."""

    EAGER = "eager"
    INDUCTOR = "inductor"  # torch.compile, default mode
    INDUCTOR_MAX_AUTOTUNE = "inductor-max-autotune"
    EXPORT = "export"  # torch.export ExportedProgram (.pt2)
    AOT_INDUCTOR = "aot-inductor"  # torch._inductor.aoti_compile_and_package


class Task(str, enum.Enum):
    """What one iteration of a case does."""

    INFERENCE = "inference"  # forward under torch.no_grad
    FORWARD = "forward"  # forward with autograd recording
    BACKWARD = "backward"  # forward and backward (the gradient)
    JACOBIAN = "jacobian"  # torch.func jacrev/jacfwd


class _Named:
    """A definition whose ``name`` is checked when it is made."""

    name: str

    def __post_init__(self) -> None:
        check_name(self.name, type(self).__name__)


@dataclass(frozen=True)
class Model(_Named):
    """A PyTorch network or function built in code.

    Attributes:
        entry_point: ``"package.module:function"``: no arguments, returns an ``nn.Module``; torch is
            seeded first. A function benchmark's names its ``@benchmark`` object.
        input_specs: one ``INPUT_SPEC`` per forward argument, e.g. ``("1x3x224x224xf32",)``.
        reference_entry_point: ``module:function`` with the same signature, for correctness checks.
        fullgraph: a graph break fails the model's Inductor modules.
        params: a function benchmark's ``(name, value)`` pairs for its input factory.
        mutates_inputs: each timed iteration gets fresh inputs (one per sample); undeclared, a change
            in place is refused.
    """

    id: str
    name: str
    tags: tuple[str, ...]
    entry_point: str
    input_specs: tuple[str, ...]
    reference_entry_point: str | None = None
    fullgraph: bool = False
    params: tuple[tuple[str, Any], ...] = field(default=(), metadata=OMIT_IF_DEFAULT)
    mutates_inputs: bool = field(default=False, metadata=OMIT_IF_DEFAULT)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DeviceSpec(_Named):
    """A runner the benchmarks run on.

    Attributes:
        name: machine type and runner label, e.g. ``c2-standard-16``.
        host_environment: e.g. ``linux-x86_64``; microarchitecture: e.g. ``x86_64-avx2`` or ``sm_80``.
        threads: intra-op CPU threads (``torch.set_num_threads``).
        count_instructions: wall time is untrusted (a GitHub-hosted VM): CPU cases are also counted and
            gate on the counts; wall time is reported, not gated.
    """

    id: str
    name: str
    host_environment: str
    architecture: Architecture
    microarchitecture: str
    threads: int
    count_instructions: bool = field(default=False, metadata=OMIT_IF_DEFAULT)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class CompileConfig(_Named):
    """How to turn a model into a module: a mode, its options and the dtype of weights and inputs."""

    id: str
    name: str
    mode: CompileMode
    options: tuple[tuple[str, str], ...] = ()
    dtype: str = "f32"


@dataclass(frozen=True)
class ExecutionConfig(_Named):
    """How to run a module: the task, the batch size and the sampling policy.

    Attributes:
        processes: fresh worker processes per case, samples pooled (timings vary more between
            processes than within one; pyperf runs 20).
        min_samples: samples per process, each a block of iterations lasting ``min_sample_time_ms``.
        timeout_s: the case's worker is killed after this many seconds.
        reported_time: on a GPU, ``gpu`` (CUDA-event device time) or ``wall`` (synchronised host time)
            as the samples; both are kept.
        flush_l2, cuda_graphs: on a GPU, flush L2 before each sample; replay a CUDA graph of the
            launches when an iteration takes under about 50 µs.
    """

    id: str
    name: str
    task: Task
    batch_size: int = 1
    processes: int = 3
    min_samples: int = 10
    min_sample_time_ms: float = 1.0
    warmup_time_ms: float = 300.0
    timeout_s: float = 600.0
    reported_time: str = "gpu"
    flush_l2: bool = False
    cuda_graphs: bool = True


@dataclass(frozen=True)
class ModuleGenerationConfig(_Named):
    """One module: a model compiled by one compile config for one target architecture."""

    id: str
    name: str
    model: Model
    compile_config: CompileConfig
    target_architecture: Architecture
    presets: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        model: Model,
        compile_config: CompileConfig,
        target_architecture: Architecture,
        presets: tuple[str, ...] = (),
    ) -> ModuleGenerationConfig:
        return cls(
            hash_composite_id([model.id, compile_config.id, f"arch-{target_architecture.value}"]),
            f"{model.name}.{compile_config.name}.{target_architecture.value}",
            model,
            compile_config,
            target_architecture,
            tuple(presets),
        )


@dataclass(frozen=True)
class RunConfig(_Named):
    """One benchmark case: a module, an execution config and the device it runs on."""

    id: str
    name: str
    module_generation_config: ModuleGenerationConfig
    execution_config: ExecutionConfig
    target_device: DeviceSpec
    presets: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        gen: ModuleGenerationConfig,
        execution_config: ExecutionConfig,
        target_device: DeviceSpec,
        presets: tuple[str, ...] = (),
    ) -> RunConfig:
        if gen.target_architecture != target_device.architecture:
            raise ValueError(
                f"module {gen.name} targets {gen.target_architecture.value}, device "
                f"{target_device.name} is {target_device.architecture.value}"
            )
        return cls(
            hash_composite_id([gen.id, execution_config.id, target_device.id]),
            f"{gen.model.name}.{gen.compile_config.name}.{execution_config.name}.{target_device.name}",
            gen,
            execution_config,
            target_device,
            tuple(presets),
        )


@dataclass(frozen=True)
class Suite:
    """Everything a suite defines; ``generation_configs`` includes modules only compilation presets select."""

    run_configs: tuple[RunConfig, ...]
    generation_configs: tuple[ModuleGenerationConfig, ...]
    presets: tuple[str, ...]
    meta_presets: tuple[tuple[str, tuple[str, ...]], ...]
    #: (compilation preset, cold samples, warm samples) per module; the most any selected preset asks.
    compile_sampling: tuple[tuple[str, int, int], ...] = ()

    def select_compile_sampling(
        self, presets: tuple[str, ...], module: ModuleGenerationConfig | None = None
    ) -> tuple[int, int]:
        """(cold, warm) fresh-process compile samples: the most any of ``presets`` (that ``module`` is
        tagged with) asks; (1, 0) when none does."""
        tagged = set(presets) & set(module.presets) if module else set(presets)
        chosen = [(c, w) for p, c, w in self.compile_sampling if p in tagged]
        return max([c for c, _ in chosen], default=1), max([w for _, w in chosen], default=0)

    def select_run_configs(self, presets: tuple[str, ...]) -> tuple[RunConfig, ...]:
        """Run configs tagged with any of ``presets``, in suite order."""
        wanted = set(presets)
        return tuple(rc for rc in self.run_configs if wanted & set(rc.presets))

    def select_generation_configs(self, presets: tuple[str, ...]) -> tuple[ModuleGenerationConfig, ...]:
        """Modules tagged with any of ``presets`` plus the modules the selected run configs need."""
        wanted = set(presets)
        chosen = {g.id: g for g in self.generation_configs if wanted & set(g.presets)}
        for rc in self.select_run_configs(presets):
            chosen.setdefault(rc.module_generation_config.id, rc.module_generation_config)
        return tuple(sorted(chosen.values(), key=lambda g: g.name))
