"""The full model's hot path (issue 40): inside ``TransformerLM``/``TransformerBlock`` the course's
layers use torch's fused kernels and do not re-check their arguments, and the result is the
formula's; called on their own, the layers keep their formula path, their checks and the
attention weights."""

import pytest
import torch
from torch.nn import functional as F

from helpers import LayerNorm, MultiHeadAttention, RMSNorm, TransformerLM
from helpers import _validate as check
from helpers.blocks import TransformerBlock


def _formula_logits(model: TransformerLM, tokens: torch.Tensor) -> torch.Tensor:
    """The model's logits with every layer called on its own (the formula path)."""
    h = model.embed(tokens)
    for block in model.blocks:
        h = block.ffn(block.attn(h))  # a Residual called directly: not inside a model's pass
    return model.lm_head(model.final_norm(h))


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rotary", "alibi", "none"])
@pytest.mark.parametrize(
    ("norm", "norm_type", "activation"),
    [("pre", "layer", "gelu"), ("post", "rms", "relu"), ("pre", "rms", "swiglu"),
     ("none", "layer", "gelu")],
)  # fmt: skip
def test_model_with_fused_kernels_equals_the_formula_in_float64(
    positional, norm, norm_type, activation
):
    torch.manual_seed(0)
    model = TransformerLM(
        13, 16, 2, 4, max_len=32, positional=positional, norm=norm, norm_type=norm_type,
        activation=activation,
    ).double()  # fmt: skip
    tokens = torch.randint(0, 13, (3, 20))
    torch.testing.assert_close(model(tokens), _formula_logits(model, tokens), rtol=0, atol=1e-12)


def test_non_causal_block_with_fused_attention_equals_the_formula():
    torch.manual_seed(0)
    block = TransformerBlock(16, 4, causal=False, activation="gelu").double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    torch.testing.assert_close(block(x), block.ffn(block.attn(x)), rtol=0, atol=1e-12)


def test_model_uses_the_fused_kernels_inside_its_pass(monkeypatch):
    calls = []
    for name in ("layer_norm", "gelu", "scaled_dot_product_attention"):
        real = getattr(F, name)
        monkeypatch.setattr(
            F, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k)
        )
    torch.manual_seed(0)
    model = TransformerLM(13, 16, 2, 4, max_len=16)
    model(torch.randint(0, 13, (2, 8)))
    # 2 blocks x (2 layer norms, 1 GELU, 1 attention) + the final layer norm
    assert calls.count("layer_norm") == 5
    assert calls.count("gelu") == 2
    assert calls.count("scaled_dot_product_attention") == 2


def test_layers_called_on_their_own_compute_from_the_formula(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a fused kernel was called outside a model's pass")

    for name in ("layer_norm", "rms_norm", "gelu", "scaled_dot_product_attention"):
        monkeypatch.setattr(F, name, refuse)
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    LayerNorm(8)(x)
    RMSNorm(8)(x)
    mha = MultiHeadAttention(8, 2, causal=True)
    mha(x)
    assert mha.last_weights is not None and mha.last_weights.shape == (2, 2, 5, 5)


@pytest.mark.parametrize("positional", ["sinusoidal", "rotary", "alibi"])
def test_model_checks_its_input_once_per_call(monkeypatch, positional):
    counts = {"tensor": 0, "floating_like": 0, "token_ids": 0}
    for name in counts:
        real = getattr(check, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            counts[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(check, name, counted)
    torch.manual_seed(0)
    model = TransformerLM(13, 16, 3, 4, max_len=16, positional=positional)
    tokens = torch.randint(0, 13, (2, 9))
    model.loss(tokens)
    # loss(): token_ids (which calls tensor once) and next_token_loss's shape check; nothing
    # in the embedding, the 3 blocks, their residuals, norms, attention (rotary's turn of q and
    # k, ALiBi's bias included) or feed-forward
    assert counts == {"tensor": 2, "floating_like": 0, "token_ids": 1}
    for name in counts:
        counts[name] = 0
    model(tokens)
    assert counts == {"tensor": 1, "floating_like": 0, "token_ids": 1}


def test_bad_input_is_still_refused_at_the_entry_with_a_clear_error():
    model = TransformerLM(13, 16, 1, 4, max_len=16)
    with pytest.raises(ValueError, match="tokens must hold ids in 0..12"):
        model(torch.tensor([[0, 13]]))
    block = TransformerBlock(16, 4)
    with pytest.raises(ValueError, match="d_model=16"):
        block(torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        LayerNorm(8)(torch.randn(2, 4))


def test_attention_weights_are_kept_inside_a_model_when_asked():
    torch.manual_seed(0)
    model = TransformerLM(13, 16, 1, 4, max_len=16, positional="alibi").double()
    tokens = torch.randint(0, 13, (2, 6))
    mha = model.blocks[0].attention
    fused = model(tokens)
    assert mha.last_weights is None  # not formed by the fused kernel
    mha.keep_weights = True
    explicit = model(tokens)
    torch.testing.assert_close(fused, explicit, rtol=0, atol=1e-12)
    w = mha.last_weights
    assert w.shape == (2, 4, 6, 6)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6, dtype=torch.float64))
    assert torch.all(w.triu(1) == 0)  # causal


def test_rotary_inside_a_models_pass_is_apply_rotary_bit_for_bit():
    from helpers.positional import apply_rotary, rotary_in_pass

    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(3, 2, 11, 8, dtype=dtype)  # [B, h, n, d_head]
        for base in (10000.0, 500000.0):
            assert torch.equal(rotary_in_pass(x, base=base), apply_rotary(x, base=base))
            assert torch.equal(
                rotary_in_pass(x[..., :5, :], base=base), apply_rotary(x[..., :5, :], base=base)
            )
    # the table is made once per (n, d, base, dtype, device) and outside autograd: a pass under
    # no_grad first, then a training pass, both work and agree
    model = TransformerLM(13, 16, 1, 4, max_len=16, positional="rotary").double()
    tokens = torch.randint(0, 13, (2, 9))
    with torch.inference_mode():
        first = model(tokens)
    model.loss(tokens).backward()
    torch.testing.assert_close(model(tokens).detach(), first.clone(), rtol=0, atol=0)
