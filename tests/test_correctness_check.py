"""The correctness check (benchtrail.worker.correctness): the relative error's denominator near zero,
and a reference that raises, which is a failed check with the exception, never no check."""

import pytest
import torch

from benchtrail.suite import functions
from benchtrail.suite.definitions import ModuleGenerationConfig, Task
from benchtrail.worker.build import build_model
from benchtrail.worker.correctness import TOLERANCES, check_task, compare_outputs
from benchtrail.worker.inputs import model_inputs

MODULE = "tests.benchmarks.raising_references"
FP32_RTOL, FP32_ATOL = TOLERANCES[torch.float32]


def test_a_near_zero_reference_gives_a_finite_relative_error_when_the_check_passes():
    result = compare_outputs(torch.tensor([1e-30, 1.0]), torch.tensor([0.0, 1.0]))
    # |expected| below atol divides by atol: 1e-30 / 1e-3, not 1e-30 / finfo.tiny (about 8.5e7).
    assert result["ok"] and result["max_abs_err"] == pytest.approx(1e-30)
    assert result["max_rel_err"] == pytest.approx(1e-27) and result["max_rel_err"] <= 1.01


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_a_passing_element_has_a_relative_error_of_at_most_one_plus_rtol(dtype):
    rtol, atol = TOLERANCES[dtype]
    expected = torch.tensor([0.0, atol / 10, atol / 2, atol, 2 * atol, 1.0, -3.0], dtype=torch.float64)
    # at the edge of the pass rule, a little inside so that rounding to dtype keeps it passing
    actual = expected + 0.9 * (atol + rtol * expected.abs())
    result = compare_outputs(actual.to(dtype), expected.to(dtype))
    assert result["ok"], result
    assert 0.5 < result["max_rel_err"] <= 1 + rtol, result


def test_a_clearly_wrong_value_near_zero_still_fails_with_its_relative_error_against_atol():
    result = compare_outputs(torch.tensor([0.5, 1.0]), torch.tensor([0.0, 1.0]))
    assert not result["ok"] and result["max_abs_err"] == pytest.approx(0.5)
    assert result["max_rel_err"] == pytest.approx(0.5 / FP32_ATOL) and (result["atol"], result["rtol"]) == (
        FP32_ATOL, FP32_RTOL)


@pytest.fixture(scope="module")
def gens() -> dict[str, ModuleGenerationConfig]:
    suite = functions.suite_of(functions.discover([MODULE]))
    return {rc.module_generation_config.model.name: rc.module_generation_config for rc in suite.run_configs}


def _check(gen: ModuleGenerationConfig, task: Task = Task.INFERENCE, actual=None):
    inputs = model_inputs(gen.model, "cpu")
    if actual is None:
        with torch.no_grad():
            actual = build_model(gen.model, "cpu")(*inputs)
    return check_task(task, gen, inputs, actual, "cpu")


def _error_dict(message: str, rtol: float = FP32_RTOL, atol: float = FP32_ATOL, quantity: str = "value"):
    return {"ok": False, "quantity": quantity, "against": "reference", "max_abs_err": None,
            "max_rel_err": None, "atol": atol, "rtol": rtol, "error": message}


def test_a_reference_that_raises_is_a_failed_check_naming_the_exception(gens):
    assert _check(gens[f"{MODULE}.boom[n=4]"]) == _error_dict("the reference raised ValueError: boom")


def test_a_reference_that_raises_a_type_error_is_a_failed_check_for_every_task(gens):
    gen = gens[f"{MODULE}.wrong_type[n=4]"]
    expected = _error_dict("the reference raised TypeError: unsupported operand type(s) for +: 'Tensor' "
                           "and 'str'")
    assert _check(gen) == expected
    x = model_inputs(gen.model, "cpu")[0].requires_grad_()
    for task, quantity in ((Task.BACKWARD, "gradient"), (Task.JACOBIAN, "jacobian")):
        assert _check(gen, task, (torch.ones_like(x),)) == {**expected, "quantity": quantity}


def test_the_tolerances_of_a_raising_reference_are_those_of_the_least_precise_output_dtype(gens):
    gen = gens[f"{MODULE}.boom[n=4]"]
    message = "the reference raised ValueError: boom"
    bf16_rtol, _ = TOLERANCES[torch.bfloat16]
    mixed = (torch.ones(4), {"half": torch.ones(2, dtype=torch.bfloat16), "index": torch.arange(3)})
    assert _check(gen, actual=mixed) == _error_dict(message, rtol=bf16_rtol, atol=FP32_ATOL)
    fp16_rtol, fp16_atol = TOLERANCES[torch.float16]
    half = torch.ones(4, dtype=torch.float16)
    assert _check(gen, actual=half) == _error_dict(message, fp16_rtol, fp16_atol)
    assert _check(gen, actual=torch.arange(4)) == _error_dict(message)  # no float: fp32's


def test_a_long_message_is_cut(gens):
    c = _check(gens[f"{MODULE}.long_message[n=4]"])
    assert not c["ok"] and c["error"].startswith("the reference raised ValueError: long long ")
    assert len(c["error"]) == 300 and c["error"].endswith("...")


def test_a_module_benchmark_whose_reference_factory_raises_is_a_failed_check(gens):
    c = _check(gens[f"{MODULE}.scaled[n=4]"])
    assert c == _error_dict(f"the reference raised ModuleError: {MODULE}.scaled[n=4]: the module factory "
                            "raised ValueError: no reference module of size 4")
