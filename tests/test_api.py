"""The public API of `helpers` as the course specification states it (names and defaults)."""

import inspect
import subprocess
import sys

import pytest
import torch

import helpers

API = {
    "sinusoidal_encoding": ["n_positions", "d_model", "base"],
    "SinusoidalPositionalEncoding": ["d_model"],
    "LearnedPositionalEmbedding": ["max_len", "d_model"],
    "LayerNorm": ["d_model", "eps"],
    "Residual": ["sublayer", "d_model", "norm"],
    "FeedForward": ["d_model", "d_ff", "activation"],
    "MultiHeadAttention": ["d_model", "n_heads", "causal"],
    "TransformerBlock": ["d_model", "n_heads", "d_ff", "norm", "activation"],
    "TransformerLM": [
        "vocab_size",
        "d_model",
        "n_layers",
        "n_heads",
        "d_ff",
        "max_len",
        "positional",
        "norm",
        "activation",
        "tie_weights",
    ],
    "count_parameters": ["model"],
    "gradient_norms": ["model", "tokens"],
}
DEFAULTS = {
    ("sinusoidal_encoding", "base"): 10000.0,
    ("LayerNorm", "eps"): 1e-5,
    ("Residual", "norm"): "pre",
    ("FeedForward", "d_ff"): None,
    ("FeedForward", "activation"): "relu",
    ("MultiHeadAttention", "causal"): False,
    ("TransformerBlock", "norm"): "pre",
    ("TransformerBlock", "activation"): "relu",
    ("TransformerLM", "max_len"): 1024,
    ("TransformerLM", "positional"): "sinusoidal",
    ("TransformerLM", "norm"): "pre",
    ("TransformerLM", "activation"): "gelu",
    ("TransformerLM", "tie_weights"): True,
}


@pytest.mark.parametrize("name", sorted(API))
def test_public_names_and_parameters(name):
    obj = getattr(helpers, name)
    params = list(inspect.signature(obj).parameters)
    assert params[: len(API[name])] == API[name]
    for (owner, arg), default in DEFAULTS.items():
        if owner == name:
            assert inspect.signature(obj).parameters[arg].default == default


def test_explorers_named_in_the_specification_exist():
    from helpers import widgets

    for name in (
        "positional_explorer",
        "norm_explorer",
        "feedforward_explorer",
        "depth_explorer",
        "tying_explorer",
        "generation_explorer",
    ):
        assert callable(getattr(widgets, name))


def test_importable_from_any_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", "import helpers, helpers.widgets, helpers.checks; print('ok')"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_sinusoidal_encoding_dtype_and_layout():
    pe = helpers.sinusoidal_encoding(8, 16)
    assert pe.dtype == torch.float32 and pe.shape == (8, 16)
    assert torch.equal(pe[0, 0::2], torch.zeros(8)) and torch.equal(pe[0, 1::2], torch.ones(8))


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="vocab_size"):
        helpers.TransformerLM(0, 16, 1, 2)
    with pytest.raises(ValueError, match="positional"):
        helpers.TransformerLM(10, 16, 1, 2, positional="relative")
    with pytest.raises(ValueError, match="n_heads"):
        helpers.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="norm"):
        helpers.TransformerBlock(16, 2, norm="sandwich")
    with pytest.raises(ValueError, match="d_model=16"):
        helpers.TransformerBlock(16, 2)(torch.zeros(1, 3, 8))
    with pytest.raises(TypeError, match="count_parameters|model"):
        helpers.count_parameters("not a model")


def test_C8_4_parameter_breakdown_counts_the_tied_matrix_once():
    with torch.device("meta"):
        model = helpers.TransformerLM(**{**helpers.model.asdict(helpers.GPT2_SMALL)})
    parts = helpers.parameter_breakdown(model)
    assert parts["token_embedding"] == 50257 * 768 and parts["lm_head"] == 0
    assert parts["position"] == 1024 * 768 and parts["blocks"] == 12 * 7_087_872
    assert parts["total"] == helpers.count_parameters(model) == 124_439_808
