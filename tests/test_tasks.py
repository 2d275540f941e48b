"""Tasks (value, gradient, Jacobian) run in real worker processes and are checked for correctness."""

import dataclasses

import pytest
import torch

from benchmark_suites import configs, devices
from benchmark_suites.suite import X86_64, generate
from benchtrail.runner.run_cases import run_case
from benchtrail.suite.definitions import (
    CompileConfig,
    CompileMode,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Task,
)
from benchtrail.worker import tasks


def _cheap(rc: RunConfig) -> RunConfig:
    """The same case with one process and a few short samples (the quantity checked is the same)."""
    execution = dataclasses.replace(rc.execution_config, processes=1, min_samples=3, warmup_time_ms=10,
                                    min_sample_time_ms=0.2, timeout_s=300)
    return RunConfig.build(rc.module_generation_config, execution, rc.target_device)


def test_reference_backed_functions_pass_value_gradient_and_jacobian_checks():
    cases = [rc for rc in generate().select_run_configs((X86_64,))
             if rc.module_generation_config.model.reference_entry_point]
    quantities = {}
    for rc in cases:
        response = run_case(_cheap(rc))
        assert response.status == "ok", (rc.name, response.reason)
        c = response.answer.correctness
        assert c["ok"] and c["against"] == "reference", rc.name
        assert c["quantity"] == tasks.QUANTITY[rc.execution_config.task]
        assert c["max_abs_err"] <= c["atol"], rc.name
        function = rc.module_generation_config.model.entry_point
        quantities.setdefault(function,
                              set()).add((c["quantity"], rc.module_generation_config.compile_config.name))
    expected = {(q, cc) for q in ("value", "gradient", "jacobian") for cc in ("eager", "inductor")}
    assert quantities == {"benchmark_suites.models.functions:vrelu3": expected,
                          "benchmark_suites.models.functions:sqrl": expected}


def _bad_case(entry: str, task: Task) -> RunConfig:
    model = Model(f"model-{entry}", entry.replace("_", "-"), ("test",),
                  f"tests.benchmarks.bad_models:{entry}", ("256xf32",),
                  reference_entry_point="benchmark_suites.models.functions:vrelu3_reference")
    gen = ModuleGenerationConfig.build(model, CompileConfig("compile-eager", "eager", CompileMode.EAGER),
                                       devices.C2_STANDARD_16.architecture)
    execution = {Task.INFERENCE: configs.INFERENCE_BS1, Task.BACKWARD: configs.BACKWARD_BS1,
                 Task.JACOBIAN: configs.JACOBIAN}[task]
    return _cheap(RunConfig.build(gen, execution, devices.C2_STANDARD_16))


@pytest.mark.parametrize("entry, wrong", [("vrelu3_wrong_value", Task.INFERENCE),
                                          ("vrelu3_wrong_gradient", Task.BACKWARD),
                                          ("vrelu3_wrong_jacobian", Task.JACOBIAN)])
def test_a_wrong_implementation_is_caught_by_the_check_of_the_quantity_it_gets_wrong(entry, wrong):
    for task in (Task.INFERENCE, Task.BACKWARD, Task.JACOBIAN):
        response = run_case(_bad_case(entry, task))
        c = response.answer.correctness
        assert c["quantity"] == tasks.QUANTITY[task]
        if task is wrong:
            assert response.status == "mismatch" and not c["ok"], (entry, task)
            assert response.reason.startswith(f"{c['quantity']} differs from reference: max abs error")
            assert c["max_abs_err"] > c["atol"]
            assert response.samples  # a mismatch is still timed
        else:
            assert response.status == "ok" and c["ok"], (entry, task, response.reason)


def test_jacobian_mode_follows_the_shape_of_the_jacobian():
    x = (torch.zeros(3),)
    assert tasks.jacobian_mode(x, torch.zeros(()))== "jacrev"  # wide: one output
    assert tasks.jacobian_mode(x, torch.zeros(3)) == "jacrev"  # square
    assert tasks.jacobian_mode(x, torch.zeros(3, 4)) == "jacfwd"  # tall: more outputs than inputs


def test_jacobian_of_a_large_input_fails_the_case_with_the_limit():
    gen = next(g for g in generate().generation_configs if g.name == "vrelu3.eager.cpu")  # 65536 elements
    response = run_case(_cheap(RunConfig.build(gen, configs.JACOBIAN, devices.C2_STANDARD_16)))
    assert response.status == "failed"
    assert response.reason == (f"jacobian: the inputs have 65536 elements; the Jacobian task takes at most "
                                  f"{tasks.JACOBIAN_MAX_INPUT_ELEMENTS} (its result has n² entries)")
    assert set(response.phase_times_ms) == {"prep"}  # it failed while compiling; prep was recorded
    assert response.wall_time_ms >= response.phase_times_ms["prep"]


def test_backward_gradient_includes_parameters():
    model = torch.nn.Linear(3, 2)
    x = tasks.prepare_inputs(Task.BACKWARD, (torch.ones(4, 3),))
    grads = tasks.gradient(model, x)
    assert [g.shape for g in grads] == [torch.Size([4, 3]), torch.Size([2, 3]), torch.Size([2])]
    torch.testing.assert_close(grads[0], model.weight.sum(0).expand(4, 3))  # d(sum(xWᵀ+b))/dx
    torch.testing.assert_close(grads[1], torch.full((2, 3), 4.0))  # four rows of ones
    torch.testing.assert_close(grads[2], torch.full((2,), 4.0))
