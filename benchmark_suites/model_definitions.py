"""The suite's models. Inputs are generated from specs with a fixed seed (``benchtrail.worker.inputs``)."""

from __future__ import annotations

from benchmark_suites import unique_ids as ids
from benchtrail.suite.definitions import Model

_M = "benchmark_suites.models"

MATMUL_1024 = Model(ids.MODEL_MATMUL_1024, "matmul-1024", ("micro-op",), f"{_M}.micro:matmul",
                    ("1024x1024xf32", "1024x1024xf32"))
GELU_EXACT = Model(ids.MODEL_GELU_EXACT, "gelu-exact", ("micro-op", "activation"), f"{_M}.micro:gelu_exact",
                   ("8x128x3072xf32",))
GELU_TANH = Model(ids.MODEL_GELU_TANH, "gelu-tanh", ("micro-op", "activation"), f"{_M}.micro:gelu_tanh",
                  ("8x128x3072xf32",))
SOFTMAX = Model(ids.MODEL_SOFTMAX, "softmax", ("micro-op",), f"{_M}.micro:softmax", ("8x12x128x128xf32",))
LAYER_NORM = Model(ids.MODEL_LAYER_NORM, "layer-norm", ("micro-op", "normalization"),
                   f"{_M}.micro:layer_norm",
                   ("8x128x768xf32",))
CONV2D = Model(ids.MODEL_CONV2D, "conv2d", ("micro-op", "convolution"), f"{_M}.micro:conv2d",
               ("1x64x56x56xf32",))
VRELU3 = Model(ids.MODEL_VRELU3, "vrelu3", ("function", "activation"), f"{_M}.functions:vrelu3",
               ("65536xf32",),
               reference_entry_point=f"{_M}.functions:vrelu3_reference")
# vrelu3 at 256 elements, for the Jacobian task (a 256 x 256 Jacobian; 65536 elements would be 16 GiB).
VRELU3_256 = Model(ids.MODEL_VRELU3_256, "vrelu3-256", ("function", "activation"), f"{_M}.functions:vrelu3",
                   ("256xf32",), reference_entry_point=f"{_M}.functions:vrelu3_reference")
SQRL = Model(ids.MODEL_SQRL, "sqrl", ("function", "loss"), f"{_M}.functions:sqrl", ("4x4xf32",),
             reference_entry_point=f"{_M}.functions:sqrl_reference")
MLP = Model(ids.MODEL_MLP, "mlp", ("model", "mlp"), f"{_M}.mlp:mlp", ("32x784xf32",))
RESNET18 = Model(ids.MODEL_RESNET18, "resnet18", ("model", "cnn"), f"{_M}.resnet:resnet18",
                 ("1x3x224x224xf32",))
GPT2_BLOCK = Model(ids.MODEL_GPT2_BLOCK, "gpt2-block", ("model", "transformer"), f"{_M}.gpt2:gpt2_block",
                   ("1x128x768xf32",))

ALL_MODELS = (MATMUL_1024, GELU_EXACT, GELU_TANH, SOFTMAX, LAYER_NORM, CONV2D, VRELU3, SQRL, MLP, RESNET18,
              GPT2_BLOCK)
