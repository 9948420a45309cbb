"""Lesson 8, the full model with every positional kind and norm type (C4.8, C4.9, C5.8 inside
TransformerLM): shapes, causality, parameter counts by hand, the GPT-2 small count (C8.4) kept.
"""

import inspect
from dataclasses import fields, replace

import pytest
import torch
from torch import nn

import helpers
from helpers import (
    LayerNorm,
    RMSNorm,
    TransformerLM,
    count_parameters,
    parameter_breakdown,
)
from helpers.blocks import TransformerBlock
from helpers.model import GPT2_SMALL, POSITIONAL_OPTIONS, LMConfig, asdict, coherent_defaults
from helpers.params import lm_parameter_counts

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: tiny tensors


# --- TransformerLM with every option -----------------------------------------------------------


@pytest.mark.parametrize("positional", POSITIONAL_OPTIONS)
@pytest.mark.parametrize("norm_type", ["layer", "rms"])
@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_transformer_lm_every_positional_norm_type_and_placement(positional, norm_type, norm):
    model = TransformerLM(
        23, 16, 2, 2, max_len=12, positional=positional, norm=norm, norm_type=norm_type
    )
    tokens = torch.randint(0, 23, (2, 9))
    assert model(tokens).shape == (2, 9, 23)
    counts = lm_parameter_counts(
        23, 16, 2, max_len=12, positional=positional, norm=norm, norm_type=norm_type
    )
    assert count_parameters(model) == counts["total"] == parameter_breakdown(model)["total"]
    assert parameter_breakdown(model)["position"] == counts["position"]
    kinds = {type(m) for m in model.modules()}
    assert (RMSNorm in kinds) == (norm_type == "rms" and norm != "none")
    assert (LayerNorm in kinds) == (norm_type == "layer" and norm != "none")
    inside = positional if positional in ("rotary", "alibi") else "none"
    assert all(b.attention.positional == inside for b in model.blocks)
    if positional in ("rotary", "alibi", "none"):  # nothing added to the stream
        assert isinstance(model.position, nn.Identity)
        assert torch.equal(model.embed(tokens), model.token_embedding(tokens))
        assert (model.init_scheme, model.scale_embeddings) == ("gpt2", False)
    else:
        assert not torch.equal(model.embed(tokens), model.token_embedding(tokens))


@pytest.mark.parametrize("positional", ["rotary", "alibi", "none"])
def test_coherent_defaults_for_position_not_added(positional):
    assert coherent_defaults(positional) == ("gpt2", False)
    model = TransformerLM(20, 16, 1, 2, positional=positional, tie_weights=False, init="xavier")
    assert model.init_scheme == "xavier" and model.scale_embeddings is False  # still overridable


def test_count_parameters_by_hand_rotary_rms():
    vocab, d, layers, d_ff = 50, 32, 2, 128  # d_ff = 4 d_model (the default), GELU
    attention = 4 * (d * d + d)  # W_Q, W_K, W_V, W_O with biases; rotary adds nothing
    ffn = (d * d_ff + d_ff) + (d_ff * d + d)  # W1, b1, W2, b2
    norms = 2 * d  # two RMSNorms per block, a gain each, no bias
    by_hand = vocab * d + layers * (attention + ffn + norms) + d  # + the final RMSNorm's gain
    assert by_hand == 1600 + 2 * (4224 + 8352 + 64) + 32 == 26912
    model = TransformerLM(vocab, d, layers, 4, positional="rotary", norm_type="rms")
    assert count_parameters(model) == by_hand
    untied = TransformerLM(vocab, d, layers, 4, positional="alibi", tie_weights=False)
    assert count_parameters(untied) == by_hand + vocab * d + (2 * layers + 1) * d  # LN biases


def test_C8_4_gpt2_small_still_counts_124_439_808_and_rms_drops_the_norm_biases():
    config = asdict(GPT2_SMALL)
    assert config["norm_type"] == "layer"
    with torch.device("meta"):
        gpt2 = TransformerLM(**config)
        rms = TransformerLM(**{**config, "norm_type": "rms"})
        rotary = TransformerLM(**{**config, "positional": "rotary", "norm_type": "rms"})
    assert count_parameters(gpt2) == 124_439_808
    assert count_parameters(rms) == 124_439_808 - 25 * 768  # 25 norms lose their bias
    assert count_parameters(rotary) == 124_439_808 - 25 * 768 - 1024 * 768  # and the table


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: TransformerLM(10, 16, 1, 2, norm_type="batch"),
            ValueError,
            "norm_type must be one of 'layer', 'rms'; got 'batch'",
        ),
        (
            lambda: lm_parameter_counts(10, 16, 1, norm_type="rmsnorm"),
            ValueError,
            "norm_type must be one of",
        ),
        (
            lambda: TransformerLM(10, 16, 1, 2, positional="relative"),
            ValueError,
            "positional must be one of 'sinusoidal', 'learned', 'rotary', 'alibi', 'none'",
        ),
    ],
)
def test_bad_arguments_name_the_argument_and_what_is_allowed(call, error, match):
    """TransformerLM's positional and norm_type, lm_parameter_counts: a clear error for bad input."""
    with pytest.raises(error, match=match):
        call()


def test_copy_from_torch_encoder_layer_refuses_rms_and_rotary_blocks():
    layer = nn.TransformerEncoderLayer(16, 2, 64, dropout=0.0, batch_first=True)
    with pytest.raises(ValueError, match="norm_type='rms'"):
        helpers.blocks.copy_from_torch_encoder_layer(
            layer, TransformerBlock(16, 2, 64, norm="post", norm_type="rms")
        )
    with pytest.raises(ValueError, match="positional='rotary'"):
        helpers.blocks.copy_from_torch_encoder_layer(
            layer, TransformerBlock(16, 2, 64, norm="post", positional="rotary")
        )


# --- LMConfig: the one source of the model's settings -----------------------------------------


def test_the_keyword_constructor_takes_exactly_the_fields_of_lmconfig():
    """An option added to LMConfig but not to TransformerLM's keywords (or the reverse) fails."""
    params = list(inspect.signature(TransformerLM.__init__).parameters)[1:]
    assert params[:10] == [f.name for f in fields(LMConfig)][:10]  # the positional order
    assert set(params) == {f.name for f in fields(LMConfig)}


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"positional": "learned", "tie_weights": False, "init": "xavier"},
        {"positional": "rotary", "norm_type": "rms", "norm": "post", "activation": "swiglu"},
        {"positional": "alibi", "d_ff": 24, "scale_embeddings": True, "init": "torch"},
    ],
)
def test_from_config_of_model_config_rebuilds_the_same_model(options):
    torch.manual_seed(0)
    model = TransformerLM(11, 16, 2, 2, max_len=12, **options)
    assert isinstance(model.config, LMConfig)
    torch.manual_seed(0)
    again = TransformerLM.from_config(model.config)
    assert again.config == model.config
    assert [(k, v.shape) for k, v in again.state_dict().items()] == [
        (k, v.shape) for k, v in model.state_dict().items()
    ]
    assert (again.init_scheme, again.scale_embeddings) == (
        model.init_scheme,
        model.scale_embeddings,
    )
    assert again.tied == model.tied
    ids = torch.randint(0, 11, (2, 7), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(again(ids), model(ids), rtol=0, atol=0)


def test_model_config_keeps_init_and_scale_left_to_the_default_as_none():
    model = TransformerLM(11, 16, 1, 2)
    assert (model.config.init, model.config.scale_embeddings) == (None, None)
    assert (model.init_scheme, model.scale_embeddings) == coherent_defaults("sinusoidal")
    learned = replace(model.config, positional="learned")  # that scheme's own defaults again
    assert learned.resolved().init == "gpt2" and learned.resolved().scale_embeddings is False
    assert model.config.resolved() == replace(model.config, init="xavier", scale_embeddings=True)


def test_printed_model_is_as_before_the_config_held_init_and_scale():
    """Notebooks print models: the ten shape fields always, norm_type only when not "layer", and
    how the weights are drawn (init, scale_embeddings) never."""
    shape = (
        "vocab_size=11, d_model=16, n_layers=1, n_heads=2, d_ff=None, max_len=1024, "
        "positional=sinusoidal, norm=pre, activation=gelu, tie_weights=True"
    )
    assert TransformerLM(11, 16, 1, 2).extra_repr() == shape
    assert TransformerLM(11, 16, 1, 2, init="torch", scale_embeddings=False).extra_repr() == shape
    assert TransformerLM(11, 16, 1, 2, norm_type="rms").extra_repr() == shape + ", norm_type=rms"


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"d_model": 0}, ValueError, "d_model must be a positive whole number, got 0"),
        ({"n_heads": 2.0}, TypeError, "n_heads must be a whole number"),
        ({"d_ff": -1}, ValueError, "d_ff must be a positive whole number"),
        ({"activation": "tanh"}, ValueError, "activation must be one of 'relu', 'gelu'"),
        ({"norm": "middle"}, ValueError, "norm must be one of"),
        ({"tie_weights": "yes"}, TypeError, "tie_weights must be True or False"),
        ({"init": "he"}, ValueError, "init must be one of 'gpt2', 'xavier', 'torch'"),
        ({"scale_embeddings": 1}, TypeError, "scale_embeddings must be True, False or None"),
        ({"norm_type": "batch"}, ValueError, "norm_type must be one of 'layer', 'rms'"),
    ],
)
def test_lmconfig_checks_each_field_and_names_it(options, error, match):
    with pytest.raises(error, match=match):
        LMConfig(**{"vocab_size": 11, "d_model": 16, "n_layers": 1, "n_heads": 2} | options)


def test_from_config_refuses_anything_but_an_lmconfig():
    with pytest.raises(TypeError, match="config must be a helpers.model.LMConfig, got dict"):
        TransformerLM.from_config(asdict(GPT2_SMALL))


# --- the options a real checkpoint needs (issue 39: GPT-2's and Llama's exact settings) ---------


def test_gelu_tanh_feed_forward_is_gpt2s_gelu_new():
    torch.manual_seed(0)
    ffn = helpers.FeedForward(8, 20, activation="gelu_tanh").double()
    x = torch.randn(3, 8, dtype=F64) * 3
    expected = ffn.w2(torch.nn.functional.gelu(ffn.w1(x), approximate="tanh"))
    torch.testing.assert_close(ffn(x), expected, rtol=0, atol=1e-12)
    exact = ffn.w2(torch.nn.functional.gelu(ffn.w1(x)))
    assert (ffn(x) - exact).abs().max() > 1e-6  # not the erf form


def test_swiglu_explicit_hidden_width_and_no_biases():
    ffn = helpers.FeedForward(16, 64, activation="swiglu", bias=False, d_hidden=37)
    assert ffn.d_hidden == 37 and ffn.w1.bias is None and ffn.w3.weight.shape == (37, 16)
    assert count_parameters(ffn) == 3 * 16 * 37
    from helpers.feedforward import ffn_parameter_count

    assert ffn_parameter_count(16, 64, "swiglu", bias=False, d_hidden=37) == 3 * 16 * 37
    with pytest.raises(ValueError, match="d_hidden sets SwiGLU's hidden width.*d_ff=37"):
        helpers.FeedForward(16, 64, activation="relu", d_hidden=37)


def test_block_passes_norm_eps_rotary_base_and_hidden_width():
    block = TransformerBlock(
        16, 2, 64, activation="swiglu", norm_type="rms", positional="rotary", bias=False,
        rotary_base=500.0, norm_eps=1e-3, d_hidden=40,
    )  # fmt: skip
    assert block.attn.norm.eps == block.ffn.norm.eps == 1e-3
    assert block.attention.rotary_base == 500.0 and block.feedforward.d_hidden == 40
    assert all(m.bias is None for m in block.modules() if isinstance(m, nn.Linear))
    default = TransformerBlock(16, 2)
    assert default.attn.norm.eps == 1e-5 and default.attention.rotary_base == 10000.0
    assert TransformerBlock(16, 2, norm_type="rms").attn.norm.eps == 1e-6


def test_lmconfig_checkpoint_options_reach_every_module():
    model = TransformerLM(
        40, 16, 2, 2, positional="rotary", norm_type="rms", activation="swiglu", bias=False,
        d_hidden=24, norm_eps=1e-3, rotary_base=500.0,
    )  # fmt: skip
    assert model.config.d_hidden == 24 and model.config.bias is False
    assert all(m.bias is None for m in model.modules() if isinstance(m, nn.Linear))
    assert all(b.feedforward.d_hidden == 24 for b in model.blocks)
    assert all(b.attention.rotary_base == 500.0 for b in model.blocks)
    norms = [m for m in model.modules() if isinstance(m, RMSNorm)]
    assert len(norms) == 5 and all(n.eps == 1e-3 for n in norms)  # 2 per block + the final one
    assert count_parameters(model) == 40 * 16 + 2 * (4 * 16 * 16 + 3 * 16 * 24 + 2 * 16) + 16
    assert "bias=False" in repr(model) and "rotary_base=500.0" in repr(model)
    with torch.device("meta"):  # defaults: every earlier model unchanged
        gpt2 = TransformerLM.from_config(GPT2_SMALL)
    assert "bias" not in gpt2.extra_repr() and gpt2.final_norm.eps == 1e-5


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(d_hidden=24), "d_hidden sets SwiGLU's hidden width; with activation='gelu'"),
        (dict(bias=1), "bias must be True or False"),
        (dict(norm_eps=0.0), "norm_eps"),
        (dict(rotary_base=-1.0), "rotary_base"),
    ],
)
def test_lmconfig_checkpoint_options_refuse_bad_values_by_name(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        helpers.LMConfig(40, 16, 2, 2, **options)
