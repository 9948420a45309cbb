"""Lesson 5, RMSNorm (C5.8): the formula, torch.nn.RMSNorm as the reference, its relation to layer
norm, and the residual and the block with norm_type.
"""

import pytest
import torch
from torch import nn

from helpers import (
    LayerNorm,
    RMSNorm,
    count_parameters,
)
from helpers.blocks import TransformerBlock
from helpers.normalization import Residual

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: tiny tensors


# --- C5.8 RMSNorm --------------------------------------------------------------------------------


def test_C5_8_rmsnorm_formula_and_torch_reference():
    norm = RMSNorm(12)
    assert norm.eps == 1e-6 and count_parameters(norm) == 12  # one gain, no bias
    with torch.no_grad():
        norm.weight.copy_(torch.randn(12))
    x = torch.randn(3, 5, 12) * 3 + 2  # not zero-mean
    g = norm.weight
    torch.testing.assert_close(norm(x), x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g)
    ref = nn.RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        ref.weight.copy_(norm.weight)
    torch.testing.assert_close(norm(x), ref(x))
    norm64, ref64 = RMSNorm(12, eps=0.3).double(), nn.RMSNorm(12, eps=0.3).double()
    with torch.no_grad():
        ref64.weight.copy_(norm64.weight.copy_(torch.randn(12, dtype=F64)))
    torch.testing.assert_close(norm64(x.double()), ref64(x.double()), rtol=0, atol=1e-14)


def test_C5_8_rmsnorm_equals_layernorm_without_bias_on_zero_mean_input():
    """torch.nn.LayerNorm computes (x - E[x]) / sqrt(Var[x] + eps) * gamma (+ beta), eps inside
    the square root, as RMSNorm's x / sqrt(mean(x^2) + eps) * g: on zero-mean x, Var[x] is
    mean(x^2), so the two agree for the same eps (a large eps shows the placement matters)."""
    for eps in (1e-6, 0.5):
        x = torch.randn(4, 7, 10, dtype=F64)
        x = x - x.mean(-1, keepdim=True)  # zero mean across the features
        rms, ours = RMSNorm(10, eps=eps).double(), LayerNorm(10, eps=eps).double()
        torch_ln = nn.LayerNorm(10, eps=eps, bias=False).double()
        with torch.no_grad():
            g = torch.randn(10, dtype=F64)
            for m in (rms, ours, torch_ln):
                m.weight.copy_(g)
        torch.testing.assert_close(rms(x), ours(x), rtol=0, atol=1e-13)
        torch.testing.assert_close(rms(x), torch_ln(x), rtol=0, atol=1e-13)
        shifted = x + 1.0  # not zero-mean: layer norm subtracts the mean, RMSNorm does not
        assert (rms(shifted) - ours(shifted)).abs().max() > 1e-2


def test_C5_8_residual_and_block_take_norm_type():
    sub = nn.Linear(8, 8)
    assert isinstance(Residual(sub, 8, "pre", "rms").norm, RMSNorm)
    assert isinstance(Residual(sub, 8, "post").norm, LayerNorm)
    block = TransformerBlock(16, 2, norm_type="rms", positional="rotary", causal=True)
    assert block.norm_type == "rms" and block.positional == "rotary"
    assert isinstance(block.attn.norm, RMSNorm) and isinstance(block.ffn.norm, RMSNorm)
    assert block(torch.randn(2, 5, 16)).shape == (2, 5, 16)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: TransformerBlock(16, 2, norm_type="batch"),
            ValueError,
            "norm_type must be one of 'layer', 'rms'",
        ),
        (
            lambda: Residual(nn.Identity(), 8, norm_type="group"),
            ValueError,
            "norm_type must be one of",
        ),
        (lambda: RMSNorm(8, eps=0), ValueError, "eps must be a finite number > 0"),
        (lambda: RMSNorm(8)(torch.zeros(2, 6)), ValueError, "d_model=8"),
        (
            lambda: RMSNorm(8)(torch.zeros(2, 8, dtype=torch.long)),
            TypeError,
            "x must hold floating",
        ),
    ],
)
def test_bad_arguments_name_the_argument_and_what_is_allowed(call, error, match):
    """RMSNorm and norm_type: a clear error for bad input."""
    with pytest.raises(error, match=match):
        call()
