"""Lesson 8, the full model with every positional kind and norm type (C4.8, C4.9, C5.8 inside
TransformerLM): shapes, causality, parameter counts by hand, the GPT-2 small count (C8.4) kept.
"""

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
from helpers.model import GPT2_SMALL, POSITIONAL_OPTIONS, asdict, coherent_defaults
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
