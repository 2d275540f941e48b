"""Behavioural tests for the benchmark model factories."""

from __future__ import annotations

import math

import pytest
import torch

from benchmark_suites.models import functions, gpt2, micro, mlp, resnet


def _n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def test_resnet18_has_torchvision_parameter_count() -> None:
    assert _n_params(resnet.resnet18()) == 11_689_512


def test_resnet18_maps_image_to_1000_logits() -> None:
    model = resnet.resnet18()
    assert not model.training
    with torch.no_grad():
        out = model(torch.randn(1, 3, 224, 224))
    assert out.shape == (1, 1000)
    assert torch.isfinite(out).all()


def test_gpt2_block_has_gpt2_small_parameter_count() -> None:
    d, h = 768, 3072
    layer_norms = 2 * (d + d)
    c_attn = d * 3 * d + 3 * d
    attn_c_proj = d * d + d
    c_fc = d * h + h
    mlp_c_proj = h * d + d
    expected = layer_norms + c_attn + attn_c_proj + c_fc + mlp_c_proj
    assert expected == 7_087_872
    assert _n_params(gpt2.gpt2_block()) == expected


def test_gpt2_block_preserves_embedding_shape() -> None:
    model = gpt2.gpt2_block()
    assert not model.training
    with torch.no_grad():
        out = model(torch.randn(1, 128, 768))
    assert out.shape == (1, 128, 768)


def test_gpt2_block_is_causal() -> None:
    model = gpt2.gpt2_block()
    x = torch.randn(1, 128, 768)
    x_changed = x.clone()
    x_changed[:, 100] = torch.randn(768)
    with torch.no_grad():
        out, out_changed = model(x), model(x_changed)
    torch.testing.assert_close(out_changed[:, :100], out[:, :100])
    assert (out_changed[:, 100] - out[:, 100]).abs().max() > 1e-2
    # Later positions attend to token 100, so they change too.
    assert (out_changed[:, 101:] - out[:, 101:]).abs().max() > 1e-4


def test_vrelu3_matches_reference_on_all_pieces() -> None:
    x = torch.cat([torch.linspace(-3.0, 3.0, 1001), torch.tensor([0.0, 1.0, -0.0])])
    x = torch.cat([x, torch.randn(65536)])
    torch.testing.assert_close(functions.vrelu3()(x), functions.vrelu3_reference()(x))


def test_vrelu3_known_values() -> None:
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0])
    expected = torch.tensor([0.0, 0.0, 0.125 / 3, 1.0 / 3, 4.0 / 3])
    torch.testing.assert_close(functions.vrelu3()(x), expected)
    torch.testing.assert_close(functions.vrelu3_reference()(x), expected)


@pytest.mark.parametrize("shift", [-2.0, 2.0])
def test_sqrl_matches_reference_for_both_sum_signs(shift: float) -> None:
    x = torch.randn(4, 4) + shift
    assert (x.sum() < 0) == (shift < 0)
    torch.testing.assert_close(functions.sqrl()(x), functions.sqrl_reference()(x))


def test_sqrl_known_values() -> None:
    ones = torch.ones(4, 4)
    # Positive sum: t = 0.5 * 1**2 = 0.5 everywhere.
    pos = torch.tensor(math.sin(0.5) * 0.5)
    # Negative sum: t = -0.125 * -1 = 0.125 everywhere.
    neg = torch.tensor(math.sin(0.125) * 0.125)
    for make in (functions.sqrl, functions.sqrl_reference):
        torch.testing.assert_close(make()(ones), pos)
        torch.testing.assert_close(make()(-ones), neg)


def test_gelu_exact_and_tanh_differ_slightly() -> None:
    x = torch.randn(4096)
    diff = (micro.gelu_exact()(x) - micro.gelu_tanh()(x)).abs().max().item()
    assert 1e-5 < diff < 1e-2


def test_mlp_maps_batch_to_10_logits() -> None:
    with torch.no_grad():
        assert mlp.mlp()(torch.randn(32, 784)).shape == (32, 10)


def test_matmul_computes_matrix_product() -> None:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    out = micro.matmul()(a, b)
    assert out.shape == (1024, 1024)
    torch.testing.assert_close(out, torch.mm(a, b))


@pytest.mark.parametrize(
    ("factory", "shape"),
    [
        (micro.gelu_exact, (8, 128, 768)),
        (micro.gelu_tanh, (8, 128, 768)),
        (micro.layer_norm, (8, 128, 768)),
        (micro.conv2d, (1, 64, 56, 56)),
    ],
)
def test_micro_module_preserves_input_shape(factory, shape: tuple[int, ...]) -> None:
    module = factory()
    assert not module.training
    with torch.no_grad():
        assert module(torch.randn(shape)).shape == shape


def test_softmax_normalises_last_dim() -> None:
    out = micro.softmax()(torch.randn(8, 128, 768))
    assert out.shape == (8, 128, 768)
    torch.testing.assert_close(out.sum(-1), torch.ones(8, 128))
