"""Sample inputs made in code from input specs and a fixed seed (nothing is downloaded)."""

from __future__ import annotations

import torch

from benchtrail.suite.definitions import INPUT_SPEC, Model

#: Seed for every input and every model's random init (``torch.manual_seed``).
SEED = 20261129
#: A case's inputs: positional tensors.
Tensors = tuple[torch.Tensor, ...]

_DTYPES = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f64": torch.float64,
    "i64": torch.int64,
    "i32": torch.int32,
}


def parse_input_spec(spec: str) -> tuple[tuple[int, ...], torch.dtype]:
    """Parse ``"1x3x224x224xf32"`` into ``((1, 3, 224, 224), torch.float32)``.

    Raises:
        ValueError: the spec does not match ``definitions.INPUT_SPEC``.
    """
    if not INPUT_SPEC.match(spec):
        raise ValueError(
            f"input spec {spec!r} is not of the form 1x3x224x224xf32 (dtypes: {', '.join(_DTYPES)})"
        )
    *dims, dtype = spec.split("x")
    return tuple(map(int, dims)), _DTYPES[dtype]


def model_inputs(model: Model, device: str, seed: int = SEED) -> Tensors:
    """A function benchmark's factory tensors, else standard-normal floats (integers in [0, 1000)) for the
    input specs, reproducible from ``seed``.

    Raises:
        ValueError: a malformed input spec.
        ModuleError: a function benchmark's input factory raised.
    """
    if model.params or not model.input_specs:
        from benchtrail.worker import functions

        if model.params or functions.benchmark_of(model) is not None:
            return functions.inputs(model, device, seed)
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        (
            torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
            if dtype.is_floating_point
            else torch.randint(0, 1000, shape, generator=generator, dtype=dtype)
        ).to(device)
        for shape, dtype in map(parse_input_spec, model.input_specs)
    )
