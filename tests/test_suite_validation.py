"""The suite validates itself (IREE's benchmark_collections check): run on every change."""

import importlib
from collections import defaultdict

import pytest

from benchmark_suites.suite import generate
from benchtrail.suite.definitions import SAFE_NAME, Architecture
from benchtrail.suite.names import slug
from benchtrail.worker.inputs import parse_input_spec

SUITE = generate()


def _all_objects():
    objs = {}
    for rc in SUITE.run_configs:
        gen = rc.module_generation_config
        for obj in (rc, gen, gen.model, gen.compile_config, rc.execution_config, rc.target_device):
            objs[(type(obj).__name__, obj.id, obj)] = obj
    for gen in SUITE.generation_configs:
        objs[(type(gen).__name__, gen.id, gen)] = gen
    return list(objs.values())


def test_ids_and_names_are_unique_per_kind():
    by_id, by_name = defaultdict(set), defaultdict(set)
    for obj in _all_objects():
        by_id[(type(obj).__name__, obj.id)].add(obj)
        by_name[(type(obj).__name__, obj.name)].add(obj)
    clashes = {k: v for k, v in {**by_id, **by_name}.items() if len(v) > 1}
    assert not clashes, f"clashing definitions: {clashes}"


def test_names_are_safe_for_paths_and_gcloud():
    """benchtrail's own suite keeps DESIGN.md's path-safe names (an adopter's may hold any printable text),
    so each is its own slug: the run directory and store layout of its runs never change."""
    bad = [o.name for o in _all_objects() if not SAFE_NAME.match(o.name) or ".." in o.name
           or any(c in o.name for c in "[]*?")]
    assert not bad
    assert [o.name for o in _all_objects() if slug(o.name) != o.name] == []
    assert all(SAFE_NAME.match(p) and ".." not in p for p in SUITE.presets)


def test_every_preset_selects_something_and_smoke_is_small_and_cpu_only():
    for preset in SUITE.presets:
        assert SUITE.select_run_configs((preset,)) or SUITE.select_generation_configs((preset,)), preset
    smoke = SUITE.select_run_configs(("smoke",))
    assert 2 <= len(smoke) <= 3
    assert {rc.target_device.architecture for rc in smoke} == {Architecture.CPU}


def test_meta_presets_expand_to_known_presets_and_never_smoke():
    for name, members in SUITE.meta_presets:
        assert set(members) <= set(SUITE.presets), name
        assert not any("smoke" in m for m in members), name
    assert dict(SUITE.meta_presets)["default"] == ("x86_64", "cuda", "comp-stats")


def test_suite_has_the_required_workloads_on_both_devices():
    names = {rc.module_generation_config.model.name for rc in SUITE.run_configs}
    assert {"matmul-1024", "gelu-exact", "gelu-tanh", "softmax", "layer-norm", "conv2d", "vrelu3", "sqrl",
            "mlp", "resnet18", "gpt2-block"} <= names
    cuda_only = {"inductor-max-autotune"}
    # x86_64 runs eager and Inductor modules; x86_64-large the export and AOTInductor ones (issue 18).
    for presets, arch in ((("x86_64", "x86_64-large"), Architecture.CPU), (("cuda",), Architecture.CUDA)):
        rcs = SUITE.select_run_configs(presets)
        assert {rc.target_device.architecture for rc in rcs} == {arch}
        expected = {"eager", "inductor", "export",
                    "aot-inductor"} | (cuda_only if presets == ("cuda",) else set())
        assert {rc.module_generation_config.compile_config.name for rc in rcs} == expected
    x86 = SUITE.select_run_configs(("x86_64",))
    assert {rc.module_generation_config.compile_config.name for rc in x86} == {"eager", "inductor"}
    assert {rc.module_generation_config.model.name for rc in x86} == names  # every model
    assert {rc.execution_config.task.value for rc in x86} == {"inference", "forward", "backward", "jacobian"}
    assert dict(SUITE.meta_presets)["all"] == ("x86_64", "x86_64-large", "cuda", "comp-stats",
                                               "comp-stats-large")


def test_comp_stats_keeps_its_floor_and_comp_stats_large_covers_five_models_with_each_compiler_on_cpu():
    gens = SUITE.select_generation_configs(("comp-stats",))
    by_config = defaultdict(set)
    for g in gens:
        assert g.target_architecture is Architecture.CPU
        by_config[g.compile_config.name].add(g.model.name)
    # The floor of every PR's compilation statistics (issue 18): the two real networks under Inductor, at
    # least one export and one AOTInductor module.
    assert {"resnet18", "gpt2-block"} <= by_config["inductor"]
    assert by_config["export"] and by_config["aot-inductor"] and "eager" not in by_config
    large = defaultdict(set)
    for g in SUITE.select_generation_configs(("comp-stats-large",)):
        large[g.compile_config.name].add(g.model.name)
    for name in ("inductor", "export", "aot-inductor"):
        assert len(large[name]) >= 5 and by_config[name] <= large[name], name
    assert SUITE.select_compile_sampling(("comp-stats",), gens[0]) == (1, 2)
    assert SUITE.select_compile_sampling(("comp-stats", "comp-stats-large"), gens[0]) == (5, 2)
    x86_only = next(rc.module_generation_config for rc in SUITE.select_run_configs(("x86_64",))
                    if rc.module_generation_config.model.name == "softmax")
    assert SUITE.select_compile_sampling(("x86_64", "comp-stats"), x86_only) == (1, 0)


@pytest.mark.parametrize("gen", SUITE.generation_configs, ids=lambda g: g.name)
def test_entry_points_load_and_input_specs_parse(gen):
    for entry in filter(None, (gen.model.entry_point, gen.model.reference_entry_point)):
        module, _, attr = entry.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))
    for spec in gen.model.input_specs:
        shape, _dtype = parse_input_spec(spec)
        assert all(d > 0 for d in shape)
