"""Leaf ids, registered in one place. Never change or reuse an id: results are keyed by them.

A renamed model keeps its id; a changed model under the same id is caught by the content
hash stored with each result ("not comparable").
"""

# Models.
MODEL_MATMUL_1024 = "model-matmul-1024-f32"
MODEL_GELU_EXACT = "model-gelu-exact-f32"
MODEL_GELU_TANH = "model-gelu-tanh-f32"
MODEL_SOFTMAX = "model-softmax-f32"
MODEL_LAYER_NORM = "model-layer-norm-768-f32"
MODEL_CONV2D = "model-conv2d-64c-3x3-f32"
MODEL_VRELU3 = "model-vrelu3-f32"
MODEL_SQRL = "model-sqrl-f32"
MODEL_VRELU3_256 = "model-vrelu3-256-f32"
MODEL_MLP = "model-mlp-784-512-512-10-f32"
MODEL_RESNET18 = "model-resnet18-f32"
MODEL_GPT2_BLOCK = "model-gpt2-small-block-f32"

# Devices.
DEVICE_C2_STANDARD_16 = "device-c2-standard-16"
DEVICE_A2_HIGHGPU_1G = "device-a2-highgpu-1g"

# Compile configs.
COMPILE_EAGER = "compile-eager"
COMPILE_INDUCTOR = "compile-inductor-default"
COMPILE_INDUCTOR_MAX_AUTOTUNE = "compile-inductor-max-autotune"
COMPILE_EXPORT = "compile-torch-export"
COMPILE_AOT_INDUCTOR = "compile-aot-inductor"

# Execution configs.
EXECUTION_INFERENCE_BS1 = "execution-inference-bs1"
EXECUTION_FORWARD_BS1 = "execution-forward-bs1"
EXECUTION_BACKWARD_BS1 = "execution-backward-bs1"
EXECUTION_JACOBIAN = "execution-jacobian"
