import hashlib

from benchmark_suites import configs, devices, model_definitions
from benchtrail.suite.definitions import Architecture, ModuleGenerationConfig, RunConfig
from benchtrail.suite.ids import TRANSPARENT_ID, hash_composite_id


def test_composite_id_is_sha256_over_position_prefixed_keys():
    expected = hashlib.sha256(b"0-a:1-b:").hexdigest()
    assert hash_composite_id(["a", "b"]) == expected


def test_composite_id_depends_on_order():
    assert hash_composite_id(["a", "b"]) != hash_composite_id(["b", "a"])


def test_transparent_child_keeps_existing_ids():
    # A field appended later with a transparent default must not change old ids.
    assert hash_composite_id(["a", "b", TRANSPARENT_ID]) == hash_composite_id(["a", "b"])
    # ...but a transparent key in the middle still shifts the later positions' prefixes.
    assert hash_composite_id(["a", TRANSPARENT_ID, "b"]) == hashlib.sha256(b"0-a:2-b:").hexdigest()


def test_module_id_hashes_model_compile_config_and_architecture():
    gen = ModuleGenerationConfig.build(model_definitions.MLP, configs.INDUCTOR, Architecture.CPU)
    assert gen.id == hash_composite_id([model_definitions.MLP.id, configs.INDUCTOR.id, "arch-cpu"])
    assert gen.name == "mlp.inductor.cpu"
    other = ModuleGenerationConfig.build(model_definitions.MLP, configs.EAGER, Architecture.CPU)
    assert other.id != gen.id


def test_presets_do_not_change_ids():
    gen = ModuleGenerationConfig.build(model_definitions.MLP, configs.EAGER, Architecture.CPU)
    a = RunConfig.build(gen, configs.INFERENCE_BS1, devices.C2_STANDARD_16, presets=("x86_64",))
    b = RunConfig.build(gen, configs.INFERENCE_BS1, devices.C2_STANDARD_16, presets=("smoke",))
    assert a.id == b.id == hash_composite_id([gen.id, configs.INFERENCE_BS1.id, devices.C2_STANDARD_16.id])


def test_run_config_rejects_module_for_another_architecture():
    gen = ModuleGenerationConfig.build(model_definitions.MLP, configs.EAGER, Architecture.CUDA)
    try:
        RunConfig.build(gen, configs.INFERENCE_BS1, devices.C2_STANDARD_16)
    except ValueError as exc:
        assert "targets cuda" in str(exc)
    else:
        raise AssertionError("a CUDA module on a CPU device must be rejected")
