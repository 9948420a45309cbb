"""Lesson 4, position: the helpers behind claims C4.1-C4.7 (the core notebook) and C4.8-C4.9 (its
companion 04b, Going further), the shipped length runs of C4.7 (tools/length_runs.py), the
exercise checks of both notebooks and their grading (honest answers written differently score
full marks through tools/grading), the explorer."""

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import helpers
from helpers import (
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    PositionOutOfRange,
    SinusoidalPositionalEncoding,
    TransformerLM,
    angle_rates,
    rotation_matrix,
    sinusoidal_encoding,
    sinusoidal_encoding_at,
    wavelengths,
)
from helpers.checks import ExerciseFailed, position_attention, position_encoding
from helpers.checks import position as checks
from helpers.length import (
    LengthRun,
    length_experiment,
    load_length_runs,
    loss_by_position,
    train_at_length,
)
from helpers.plots import position as plots

# ----------------------------------------------------------------------------------------------
# C4.1 attention without position is permutation-equivariant; position breaks it
# ----------------------------------------------------------------------------------------------


def _swap(x, i, j):
    perm = torch.arange(x.shape[1])
    perm[[i, j]] = perm[[j, i]]
    return x[:, perm]


@pytest.mark.parametrize("i,j", [(0, 5), (2, 3), (1, 7)])
def test_C4_1_attention_is_permutation_equivariant(i, j):
    attn = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        out, out_swapped = attn(x), attn(_swap(x, i, j))
    torch.testing.assert_close(out_swapped, _swap(out, i, j), atol=1e-6, rtol=1e-5)
    others = [p for p in range(8) if p not in (i, j)]
    torch.testing.assert_close(out_swapped[:, others], out[:, others], atol=1e-6, rtol=1e-5)


def test_C4_1_position_breaks_equivariance():
    attn = MultiHeadAttention(16, 4).eval()
    pe = SinusoidalPositionalEncoding(16)
    x = torch.randn(1, 8, 16)
    with torch.no_grad():
        out = attn(pe(x))
        out_swapped = attn(pe(_swap(x, 0, 5)))
    assert not torch.allclose(out_swapped, _swap(out, 0, 5), atol=1e-3)


# ----------------------------------------------------------------------------------------------
# C4.2 the formula, interleaved layout
# ----------------------------------------------------------------------------------------------


def test_C4_2_formula_float64():
    n, d = 4097, 512  # positions 0..4096
    got = sinusoidal_encoding(n, d, dtype=torch.float64).numpy()
    pos = np.arange(n, dtype=np.float64)[:, None]
    i = np.arange(d // 2, dtype=np.float64)[None, :]
    angle = pos / np.power(10000.0, 2 * i / d)  # [n, d/2], numpy, independent of torch
    want = np.empty((n, d))
    want[:, 0::2], want[:, 1::2] = np.sin(angle), np.cos(angle)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("pos", [0, 1, 7, 100, 1000, 4096])
@pytest.mark.parametrize("col", [0, 1, 2, 3, 100, 101, 510, 511])
def test_C4_2_formula_pointwise_math(pos, col):
    d = 512
    i = col // 2
    angle = pos / 10000 ** (2 * i / d)
    want = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    got = float(sinusoidal_encoding(4097, d, dtype=torch.float64)[pos, col])
    assert got == pytest.approx(want, abs=1e-12)


def test_C4_2_float32_default_and_shape():
    pe = sinusoidal_encoding(10, 8)
    assert pe.dtype == torch.float32 and pe.shape == (10, 8)
    assert torch.equal(pe[0, 0::2], torch.zeros(4)) and torch.equal(pe[0, 1::2], torch.ones(4))


def test_C4_2_rates_and_wavelengths():
    rates = angle_rates(8)
    torch.testing.assert_close(rates, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))
    torch.testing.assert_close(wavelengths(8), 2 * math.pi / rates)
    lam = wavelengths(512)
    assert lam[0] == pytest.approx(2 * math.pi) and torch.all(lam[1:] > lam[:-1])
    assert sinusoidal_encoding(5, 4, base=100.0)[3, 2] == pytest.approx(math.sin(3 / 10), abs=1e-6)


# ----------------------------------------------------------------------------------------------
# C4.3 no parameters, any position
# ----------------------------------------------------------------------------------------------


def test_C4_3_no_parameters_and_far_positions():
    module = SinusoidalPositionalEncoding(64)
    assert sum(p.numel() for p in module.parameters()) == 0
    assert "pe" not in module.state_dict()
    far = sinusoidal_encoding_at([100_000, 123_456_789], 64, dtype=torch.float64)
    assert torch.isfinite(far).all()
    assert float(far[0, 0]) == pytest.approx(math.sin(100_000), abs=1e-9)
    assert float(far[0, 3]) == pytest.approx(math.cos(100_000 / 10000 ** (2 / 64)), abs=1e-9)


def test_C4_3_module_grows_beyond_max_len():
    module = SinusoidalPositionalEncoding(16, max_len=8)
    x = torch.zeros(1, 20, 16)
    torch.testing.assert_close(module(x)[0], sinusoidal_encoding(20, 16))
    torch.testing.assert_close(module(x[:, :3], offset=50)[0], sinusoidal_encoding(53, 16)[50:])


# ----------------------------------------------------------------------------------------------
# C4.4 the learned table
# ----------------------------------------------------------------------------------------------


def test_C4_4_learned_is_a_trainable_table():
    module = LearnedPositionalEmbedding(max_len=32, d_model=16)
    params = list(module.parameters())
    assert sum(p.numel() for p in params) == 32 * 16
    assert all(p.requires_grad for p in params)
    x = torch.zeros(2, 32, 16)
    module(x).sum().backward()
    assert params[0].grad is not None and params[0].grad.abs().sum() > 0


@pytest.mark.parametrize("n,offset", [(33, 0), (1, 32), (10, 30)])
def test_C4_4_learned_refuses_positions_beyond_max_len(n, offset):
    module = LearnedPositionalEmbedding(max_len=32, d_model=16)
    with pytest.raises(PositionOutOfRange, match=r"max_len=32.*0\.\.31") as info:
        module(torch.zeros(1, n, 16), offset=offset)
    assert isinstance(info.value, IndexError)
    assert f"position {offset + n - 1} has no row" in str(info.value)


def test_C4_4_offset_beyond_the_table_gives_sensible_advice():
    module = LearnedPositionalEmbedding(max_len=32, d_model=16)
    with pytest.raises(PositionOutOfRange, match="use an offset below 32") as info:
        module(torch.zeros(1, 1, 16), offset=40)
    assert "at most -" not in str(info.value)


def test_C4_4_error_shows_as_one_line_in_a_notebook():
    with pytest.raises(PositionOutOfRange) as info:
        LearnedPositionalEmbedding(max_len=4, d_model=2)(torch.zeros(1, 5, 2))
    lines = info.value._render_traceback_()  # what IPython shows instead of a traceback
    assert len(lines) == 1 and "PositionOutOfRange" in lines[0] and "max_len=4" in lines[0]


def test_C4_4_learned_accepts_up_to_max_len():
    module = LearnedPositionalEmbedding(max_len=32, d_model=16)
    assert module(torch.zeros(1, 32, 16)).shape == (1, 32, 16)


# ----------------------------------------------------------------------------------------------
# C4.5 position added once, before the first block
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_C4_5_position_added_once_before_first_block(positional):
    model = TransformerLM(50, 16, 3, 2, max_len=32, positional=positional).eval()
    tokens = torch.randint(0, 50, (2, 10))
    inputs, outputs, calls = [], [], []

    def record(module, args, out):
        inputs.append(args[0])
        outputs.append(out)

    def count(module, args, out):
        calls.append(1)

    hooks = [b.register_forward_hook(record) for b in model.blocks]
    hooks.append(model.position.register_forward_hook(count))
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    scale = math.sqrt(16) if model.scale_embeddings else 1.0  # C8.6: sinusoidal scales by sqrt(d)
    assert model.scale_embeddings == (positional == "sinusoidal")
    expected = model.token_embedding(tokens) * scale + model.position.encoding(10)  # [B, n, d]
    torch.testing.assert_close(inputs[0], expected)
    for k in range(1, 3):
        assert torch.equal(inputs[k], outputs[k - 1])
    assert len(calls) == 1


# ----------------------------------------------------------------------------------------------
# C4.6 the rotation, and the dot product depending on p - q only
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 17, 250])
def test_C4_6_same_rotation_for_every_position(k):
    d = 64
    r = rotation_matrix(k, d)
    p = torch.arange(0, 2000, 7)
    pe_p = sinusoidal_encoding_at(p, d, dtype=torch.float64)  # [m, d]
    pe_pk = sinusoidal_encoding_at(p + k, d, dtype=torch.float64)
    torch.testing.assert_close(pe_p @ r.T, pe_pk, atol=1e-9, rtol=0)
    torch.testing.assert_close(r @ r.T, torch.eye(d, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(rotation_matrix(-k, d), r.T, atol=1e-12, rtol=0)


def test_C4_6_dot_product_depends_only_on_offset():
    d, n = 128, 200
    sim = plots.similarity(sinusoidal_encoding(n, d, dtype=torch.float64))  # [n, n]
    for offset in range(-n + 1, n):
        diag = torch.diagonal(sim, offset)
        assert float(diag.max() - diag.min()) < 1e-9
    i = torch.arange(d // 2, dtype=torch.float64)
    for delta in [0, 1, 5, 50]:
        closed_form = float(torch.cos(delta * 10000 ** (-2 * i / d)).sum())
        assert float(sim[0, delta]) == pytest.approx(closed_form, abs=1e-9)
    assert float(sim[0, 0]) == pytest.approx(d / 2)


# ----------------------------------------------------------------------------------------------
# bad arguments: clear errors
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((10, 0), ValueError, "d_model must be a positive whole number, got 0"),
        ((10, -4), ValueError, "d_model must be a positive whole number"),
        ((10, 7), ValueError, "d_model must be even.*got 7"),
        ((-1, 8), ValueError, "n_positions must be a whole number >= 0, got -1"),
        ((3.0, 8), TypeError, "n_positions must be a whole number.*float 3.0"),
        ((2.5, 8), TypeError, "n_positions must be a whole number"),
        ((True, 8), TypeError, "n_positions must be a whole number"),
        ((10, 8.0), TypeError, "d_model must be a whole number"),
        (("10", 8), TypeError, "n_positions must be a whole number"),
        ((10, 8, 0.0), ValueError, "base must be a finite number > 0"),
        ((10, 8, -10.0), ValueError, "base must be a finite number > 0"),
    ],
)
def test_sinusoidal_encoding_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        sinusoidal_encoding(*args)


def test_zero_positions_is_an_empty_table():
    assert sinusoidal_encoding(0, 8).shape == (0, 8)


@pytest.mark.parametrize(
    "make,error,match",
    [
        (lambda: SinusoidalPositionalEncoding(7), ValueError, "d_model must be even"),
        (lambda: SinusoidalPositionalEncoding(0), ValueError, "d_model must be a positive"),
        (lambda: LearnedPositionalEmbedding(0, 8), ValueError, "max_len must be a positive"),
        (lambda: LearnedPositionalEmbedding(8.0, 8), TypeError, "max_len must be a whole"),
        (lambda: LearnedPositionalEmbedding(8, True), TypeError, "d_model must be a whole"),
        (lambda: rotation_matrix(1, 9), ValueError, "d_model must be even"),
        (lambda: rotation_matrix("3", 8), TypeError, "k must be a number"),
        (lambda: rotation_matrix(True, 8), TypeError, "k must be a number"),
        (lambda: sinusoidal_encoding_at([[1, 2]], 8), ValueError, "one-dimensional"),
        (lambda: sinusoidal_encoding_at("abc", 8), TypeError, "positions must be a 1-D tensor"),
        (lambda: sinusoidal_encoding_at([float("nan")], 8), ValueError, "positions must be finite"),
        (lambda: sinusoidal_encoding(4, 8, dtype="float32"), TypeError, "dtype must be a floating"),
        (lambda: rotation_matrix(math.inf, 8), ValueError, "k must be a finite number"),
        (lambda: sinusoidal_encoding(4, 1), ValueError, r"got 1; use 2$"),
        (
            lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 8, dtype=torch.long)),
            TypeError,
            "x must hold floating-point embeddings",
        ),
        (
            lambda: plots.plot_waves(sinusoidal_encoding(5, 8), columns=3),
            TypeError,
            "columns must be a sequence",
        ),
    ],
)
def test_constructors_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize(
    "module", [SinusoidalPositionalEncoding(16), LearnedPositionalEmbedding(32, 16)]
)
@pytest.mark.parametrize(
    "x,error,match",
    [
        (torch.zeros(4, 16), ValueError, r"3 dimensions \[batch, n, d_model\].*\[4, 16\]"),
        (torch.zeros(1, 4, 12), ValueError, "d_model=16"),
        ([[0.0] * 16], TypeError, "must be a torch.Tensor"),
    ],
)
def test_modules_reject_wrong_input_shapes(module, x, error, match):
    with pytest.raises(error, match=match):
        module(x)


def test_modules_bad_offset():
    with pytest.raises(ValueError, match="offset must be a whole number >= 0"):
        SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 8), offset=-1)


# ----------------------------------------------------------------------------------------------
# the exercise checks: right answers pass, wrong ones get a verdict naming the problem
# ----------------------------------------------------------------------------------------------


def _raises(exc):
    def fn(*args):
        raise exc

    return fn


# ----------------------------------------------------------------------------------------------
# pictures and the explorer
# ----------------------------------------------------------------------------------------------


def test_plots_return_artists():
    pe = sinusoidal_encoding(50, 16)
    lines = plots.plot_waves(pe, columns=(0, 1, 6))
    assert len(lines) == 3 and np.allclose(lines[2].get_ydata(), pe[:, 6].numpy())
    image = plots.plot_heatmap(pe)
    assert image.get_array().shape == (50, 16)
    line = plots.plot_wavelengths(16)
    assert np.allclose(line.get_ydata(), wavelengths(16).numpy())
    sim = plots.plot_similarity(pe)
    assert sim.get_array().shape == (50, 50)
    with pytest.raises(ValueError, match="column must be < d_model=16"):
        plots.plot_waves(pe, columns=(16,))
    with pytest.raises(ValueError, match=r"pe must have 2 dimensions"):
        plots.plot_heatmap(pe[None])


def _artists(e):
    wave, heat, sim = e.figure.axes[:3]
    return (
        wave.lines[0].get_ydata().copy(),
        np.asarray(heat.images[0].get_array()).copy(),
        np.asarray(sim.images[0].get_array()).copy(),
    )


def _changed(a, b):
    return a.shape != b.shape or not np.allclose(a, b)


def test_positional_explorer_every_control_changes_the_plot():
    from helpers.widgets import positional_explorer

    assert plt.get_fignums() == []
    e = positional_explorer()
    try:
        assert bytes(e.image.value).startswith(b"\x89PNG")
        before = _artists(e)
        e.controls["pair"].value = 0
        after = _artists(e)
        assert _changed(before[0], after[0])  # the waves follow the pair
        np.testing.assert_allclose(after[0], sinusoidal_encoding(101, 64)[:, 0].numpy(), atol=1e-6)

        before = after
        e.controls["d_model"].value = 128
        after = _artists(e)
        assert all(_changed(b, a) for b, a in zip(before[1:], after[1:], strict=True))
        assert after[1].shape == (101, 128)

        before = after
        e.controls["positions"].value = (200, 260)
        after = _artists(e)
        assert all(_changed(b, a) for b, a in zip(before, after, strict=True))
        assert after[2].shape == (61, 61)
        np.testing.assert_allclose(
            after[0], sinusoidal_encoding_at(torch.arange(200, 261), 128)[:, 0].numpy(), atol=1e-5
        )

        # shrinking d_model clamps the pair slider, with one redraw
        e.controls["pair"].value = 60
        n = e.n_updates
        e.controls["d_model"].value = 16
        assert e.controls["pair"].max == 7 and e.controls["pair"].value == 7
        assert e.n_updates == n + 1
        assert "d_model = 16" in e.info.value
        assert plt.get_fignums() == []
    finally:
        e.close()
    assert plt.get_fignums() == []


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(d_model=12), ValueError, "multiple of 8"),
        (dict(d_model=7.0), TypeError, "d_model must be a whole number"),
        (dict(pair=40), ValueError, "pair must be between 0 and d_model/2 - 1 = 31"),
        (dict(positions=(50, 10)), ValueError, "0 <= start < stop"),
        (dict(positions=(0, 5000)), ValueError, "stop <= 2048"),
        (dict(positions=5), TypeError, r"positions must be a pair \(start, stop\)"),
        (dict(positions=(1, 2, 3)), TypeError, r"positions must be a pair \(start, stop\)"),
    ],
)
def test_positional_explorer_bad_arguments(kwargs, error, match):
    from helpers.widgets import positional_explorer

    with pytest.raises(error, match=match):
        positional_explorer(**kwargs)


def test_public_api():
    assert helpers.sinusoidal_encoding is sinusoidal_encoding
    from helpers import widgets

    assert callable(widgets.positional_explorer)


# ----------------------------------------------------------------------------------------------
# C8.6 preview (lesson 4, C4.5): token vector length against the position vector's sqrt(d/2)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options,low,high",
    [
        ({}, 0.5, 2.0),  # default for sinusoidal: Xavier init, scaled by sqrt(d): comparable
        ({"scale_embeddings": False}, 0.1, 0.5),
        ({"init": "gpt2", "scale_embeddings": False}, 0.0, 0.1),  # the token drowns
    ],
)
def test_C8_6_preview_token_norm_against_position_norm(options, low, high):
    torch.manual_seed(0)
    lm = TransformerLM(100, 32, 1, 4, **options)
    rows = lm.token_embedding.weight.detach().double()  # [100, 32]
    scale = math.sqrt(32) if lm.scale_embeddings else 1.0
    pe_norm = sinusoidal_encoding(1, 32, dtype=torch.float64)[0].norm()
    assert float(pe_norm) == pytest.approx(4.0)  # sqrt(d_model / 2)
    ratio = float((rows * scale).norm(dim=1).mean() / pe_norm)
    assert low < ratio < high


# ----------------------------------------------------------------------------------------------
# C4.9 a causal mask is not permutation-equivariant
# ----------------------------------------------------------------------------------------------

ORDER = [0, 4, 2, 3, 1, 5]  # positions 1 and 4 swapped


def _causal_pair(seed=0):
    torch.manual_seed(seed)
    first = MultiHeadAttention(16, 4, causal=True).double().eval()
    second = MultiHeadAttention(16, 4, causal=True).double().eval()
    return first, second


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_C4_9_causal_attention_is_not_permutation_equivariant(seed):
    first, _ = _causal_pair(seed)
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    with torch.no_grad():
        out, out_swapped = first(x), first(x[:, ORDER])
    follows = [torch.allclose(out_swapped[0, p], out[0, ORDER[p]], atol=1e-9) for p in range(6)]
    # row 0 sees x0 only and row 5 the whole set, both times; rows 1..4 see other prefixes
    assert follows == [True, False, False, False, False, True]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_C4_9_two_causal_layers_see_the_order_of_earlier_tokens(seed):
    first, second = _causal_pair(seed)
    x = torch.randn(1, 6, 16, dtype=torch.float64)

    def two(z):
        h = z + first(z)
        return h + second(h)

    with torch.no_grad():
        one_layer = (first(x)[0, -1], first(x[:, ORDER])[0, -1])
        two_layers = (two(x)[0, -1], two(x[:, ORDER])[0, -1])
    torch.testing.assert_close(*one_layer, rtol=0, atol=1e-12)  # a set: order invisible
    change = (two_layers[0] - two_layers[1]).norm() / two_layers[0].norm()
    assert change > 1e-3


def test_C4_9_unmasked_last_layer_stays_blind_to_order():
    """The control: without the mask, two layers still only permute (C4.1), so the difference
    above comes from the mask."""
    torch.manual_seed(0)
    a, b = MultiHeadAttention(16, 4).double().eval(), MultiHeadAttention(16, 4).double().eval()
    x = torch.randn(1, 6, 16, dtype=torch.float64)

    def two(z):
        h = z + a(z)
        return h + b(h)

    with torch.no_grad():
        torch.testing.assert_close(two(x[:, ORDER]), two(x)[:, ORDER], rtol=0, atol=1e-12)


def test_C4_9_uniform_causal_attention_encodes_position_in_its_length():
    torch.manual_seed(0)
    values = torch.randn(2000, 64, 16, dtype=torch.float64)
    zeros = torch.zeros(2000, 64, 1, dtype=torch.float64)
    out, weights = helpers.scaled_dot_product_attention(zeros, zeros, values, causal=True)
    torch.testing.assert_close(out[:, 9], values[:, :10].mean(dim=1))  # the mean of the prefix
    length = out.norm(dim=-1).mean(dim=0)  # [64]
    assert bool((length[1:] < length[:-1]).all())
    expected = torch.sqrt(16 / torch.arange(1, 65, dtype=torch.float64))
    assert torch.allclose(length, expected, rtol=0.05)


# ----------------------------------------------------------------------------------------------
# C4.7 defined is not working: train at one length, measure at longer ones (helpers.length)
# ----------------------------------------------------------------------------------------------

TINY = dict(d_model=16, n_layers=1, n_heads=2, steps=20, batch_size=8)


@pytest.fixture(scope="module")
def tiny_run():
    return train_at_length(16, **TINY)


def test_C4_7_tiny_run_measures_every_length(tiny_run):
    assert isinstance(tiny_run, LengthRun) and tiny_run.train_len == 16
    assert len(tiny_run.result.train_losses) == 20
    assert tiny_run.model.token_embedding.weight.dtype == torch.float64
    losses = tiny_run.losses_at([16, 32, 64])
    assert list(losses) == [16, 32, 64]
    assert all(math.isfinite(v) and 0 < v < 10 for v in losses.values())
    assert losses[16] == pytest.approx(tiny_run.result.val_loss, abs=1e-12)


def test_C4_7_is_reproducible(tiny_run):
    again = train_at_length(16, **TINY)
    assert again.result.train_losses == tiny_run.result.train_losses
    assert again.loss_at(32) == tiny_run.loss_at(32)


def test_C4_7_loss_by_position_averages_to_evaluate(tiny_run):
    per_position = loss_by_position(tiny_run.model, tiny_run.val_ids, 64)
    assert per_position.shape == (64,) and per_position.dtype == torch.float64
    assert float(per_position.mean()) == pytest.approx(tiny_run.loss_at(64), abs=1e-9)


def test_C4_7_causal_prefix_is_unchanged_by_a_longer_window(tiny_run):
    ids = tiny_run.val_ids[:129][None]  # [1, 129]
    with torch.no_grad():
        long = tiny_run.model(ids)[:, :16]
        short = tiny_run.model(ids[:, :16])
    torch.testing.assert_close(long, short, rtol=0, atol=1e-12)


def test_C4_7_learned_position_cannot_run_beyond_its_training_length():
    run = train_at_length(16, "learned", **TINY)
    assert math.isfinite(run.loss_at(16))
    with pytest.raises(PositionOutOfRange, match="position 31 has no row.*max_len=16"):
        run.loss_at(32)
    with pytest.raises(PositionOutOfRange):
        loss_by_position(run.model, run.val_ids, 17)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(train_len=1), ValueError, "train_len must be a whole number >= 2"),
        (dict(train_len=32.0), TypeError, "train_len must be a whole number"),
        (dict(positional="fourier"), ValueError, "positional must be one of"),
        (dict(init="normal"), ValueError, "init must be one of"),
        (dict(scale_embeddings="yes"), TypeError, "scale_embeddings must be True, False or None"),
        (dict(dtype=torch.int64), ValueError, "dtype must be torch.float32 or torch.float64"),
        (dict(text=5), TypeError, "text must be a str"),
        (dict(text="abcdefgh" * 10, train_len=32), ValueError, "text is too short"),
        (dict(steps=0), ValueError, "steps must be a positive whole number"),
    ],
)
def test_C4_7_train_at_length_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        train_at_length(**kwargs)


@pytest.mark.parametrize(
    "lengths,error,match",
    [
        ([], ValueError, "at least one sequence length"),
        (32, TypeError, "lengths must be a list of whole numbers"),
        ([32, 1], ValueError, "each length must be a whole number >= 2"),
        ([32, 64.0], TypeError, "each length must be a whole number"),
        ([10_000], ValueError, "too short"),
    ],
)
def test_C4_7_losses_at_bad_arguments(tiny_run, lengths, error, match):
    with pytest.raises(error, match=match):
        tiny_run.losses_at(lengths)


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((torch.nn.Linear(2, 2), torch.arange(10), 4), TypeError, "model must be a TransformerLM"),
        (("model", torch.arange(10)[None], 4), ValueError, "ids must have 1 dimensions"),
        (("model", torch.arange(10), 0), ValueError, "n must be a positive whole number"),
        (("model", torch.arange(10), 20), ValueError, "too short"),
    ],
)
def test_C4_7_loss_by_position_bad_arguments(tiny_run, args, error, match):
    args = tuple(tiny_run.model if a == "model" else a for a in args)
    with pytest.raises(error, match=match):
        loss_by_position(*args)


# ----------------------------------------------------------------------------------------------
# Exercise 1 (predict, then verify): which pair tells two positions apart
# ----------------------------------------------------------------------------------------------


def right_best_pair(p, q, d):
    pe = sinusoidal_encoding_at([p, q], d, dtype=torch.float64)
    return int((pe[0] - pe[1]).reshape(d // 2, 2).norm(dim=1).argmax())


def test_check_best_pair_right_answers(capsys):
    checks.check_best_pair(right_best_pair)
    checks.check_best_pair(lambda p, q, d: torch.tensor(right_best_pair(p, q, d)))
    checks.check_best_pair(lambda p, q, d: np.int64(right_best_pair(p, q, d)))
    checks.check_best_pair(lambda p, q, d: float(right_best_pair(p, q, d)))
    # the closed form 2|sin((q - p) w_i / 2)|, in float32
    checks.check_best_pair(
        lambda p, q, d: int(torch.sin((q - p) * angle_rates(d).float() / 2).abs().argmax())
    )
    out = capsys.readouterr().out
    assert "✓ Exercise 1" in out and "pair 5" in out and "159 full turns" in out


def _gaps(p, q, d):
    """The distance each pair's (sin, cos) point moves between positions p and q (a test aid)."""
    pe = sinusoidal_encoding_at([p, q], d, dtype=torch.float64)
    return (pe[0] - pe[1]).reshape(d // 2, 2).norm(dim=1)


def _column_in_range(p, q, d):
    """The column 2i+1 of the best pair i where that column is also a valid pair index."""
    i = right_best_pair(p, q, d)
    return 2 * i + 1 if 0 < i and 2 * i + 1 < d // 2 else i


def test_check_best_pair_cases_have_a_clear_winner():
    for p, q, d in position_encoding._BEST_PAIR_CASES:
        gaps = _gaps(p, q, d).sort(descending=True).values
        assert float(gaps[1] / gaps[0]) < 0.98, (p, q, d)


def _sin_only(p, q, d):
    pe = sinusoidal_encoding_at([p, q], d, dtype=torch.float64)
    return int((pe[1, 0::2] - pe[0, 0::2]).abs().argmax())


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (lambda p, q, d: None, "returned None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (_raises(ValueError("bad")), "raised ValueError: bad"),
        (lambda p, q, d: 0, "pair 0 turns fastest.*159 full turns.*modulo 2π"),
        (lambda p, q, d: d // 2 - 1, "the slowest pair barely moves"),
        (lambda p, q, d: 2 * right_best_pair(p, q, d), "only d_model/2 = 8 pairs.*a column index"),
        (_column_in_range, "did you return a column index"),
        (lambda p, q, d: right_best_pair(p, q, d) + 1, "numbered from 0"),
        (lambda p, q, d: int(_gaps(p, q, d).argmin()), "tells them apart worst"),
        (_sin_only, "compare both columns"),
        (lambda p, q, d: 99, "only d_model/2 = 8 pairs"),
        (lambda p, q, d: float(_gaps(p, q, d).max()), "not a distance"),
        (lambda p, q, d: _gaps(p, q, d), r"shape \[8\].*not the distances"),
        (lambda p, q, d: str(right_best_pair(p, q, d)), r"'5' \(a str\)"),
        (lambda p, q, d: True, r"a bool"),
        (lambda p, q, d: float("nan"), "the float nan"),
    ],
)
def test_check_best_pair_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match) as info:
        checks.check_best_pair(fn)
    assert info.value.exercise.startswith("Exercise 1")
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------------------------
# Issue 15: the installed checks hold no answer, and no verdict shows one
# ----------------------------------------------------------------------------------------------


def test_checks_hold_no_reference_answer():
    import inspect

    modules = (checks, position_encoding, position_attention)  # the lessons' module and its parts
    for name in ("check_encoding", "pair_gaps", "_table_answers", "_table", "_estimated_base"):
        for module in modules:
            assert not hasattr(module, name), f"{module.__name__}.{name} is back"
    import ast

    # as code (a name, an attribute, an import), not as text: FORBIDDEN names the helpers that
    # exercises 5 and 6 may not call, as strings, and the docstrings say so
    tree = ast.Module(
        body=[node for m in modules for node in ast.parse(inspect.getsource(m)).body],
        type_ignores=[],
    )
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    for helper in ("wavelengths", "rotation_matrix", "angle_rates", "apply_rotary", "alibi_bias",
                   "alibi_slopes"):  # fmt: skip
        assert helper not in used, f"a check compares with helpers.{helper}, the answer itself"


def _failing_case(message):
    """(p, q, d) or (i, d) of the case a verdict is about: the numbers in its first call."""
    return tuple(int(v) for v in message.split("(", 1)[1].split(")", 1)[0].split(", "))


@pytest.mark.parametrize(
    "fn",
    [
        lambda p, q, d: 0,
        lambda p, q, d: d // 2 - 1,
        lambda p, q, d: right_best_pair(p, q, d) + 1,
        lambda p, q, d: int(_gaps(p, q, d).argmin()),
        _sin_only,
        _column_in_range,
        lambda p, q, d: 3,
    ],
)
def test_check_best_pair_verdict_does_not_name_the_best_pair(fn):
    with pytest.raises(ExerciseFailed) as info:
        checks.check_best_pair(fn)
    message = str(info.value).split(":", 1)[1]  # after the exercise's name
    p, q, d = _failing_case(message)
    want = right_best_pair(p, q, d)
    assert not re.search(rf"\bpair {want}\b", message.split("returned", 1)[1]), message


# ----------------------------------------------------------------------------------------------
# C4.8 position inside attention (04b): the notebook's experiments, its exercises 1 and 2, the explorer
# ----------------------------------------------------------------------------------------------


def test_C4_8_rope_score_depends_on_offset_only_and_added_pe_does_not():
    """The notebook's experiment: random q, k (float64), 72 query positions per offset."""
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 16, dtype=torch.float64, generator=g)
    p = torch.arange(30, 530, 7)
    pe = sinusoidal_encoding_at(torch.arange(600), 16, dtype=torch.float64)
    for offset in (-30, -1, 0, 3, 30):
        j = p + offset
        rope = (
            helpers.apply_rotary(q.expand(len(p), 16), p)
            * helpers.apply_rotary(k.expand(len(p), 16), j)
        ).sum(1)
        assert float(rope.max() - rope.min()) < 1e-9
        want = q @ rotation_matrix(-offset, 16) @ k  # q^T R_(p-j) k, RoFormer's q^T Θ_(j-p) k
        torch.testing.assert_close(rope, want.expand(len(p)))
        added = ((q + pe[p]) * (k + pe[j])).sum(1)
        assert float(added.max() - added.min()) > 1.0


def test_C4_8_alibi_steeper_slope_attends_closer():
    g = torch.Generator().manual_seed(2)
    q = torch.randn(8, 64, 16, dtype=torch.float64, generator=g)
    k = torch.randn(8, 64, 16, dtype=torch.float64, generator=g)
    back = (torch.arange(64)[:, None] - torch.arange(64)[None, :]).clamp(min=0)
    bias = helpers.alibi_bias(8, 64, dtype=torch.float64)
    reach = (helpers.attention_weights(q, k, causal=True, bias=bias) * back).sum(-1).mean(-1)
    plain = (helpers.attention_weights(q, k, causal=True) * back).sum(-1).mean(-1).mean()
    assert all(reach[h] < reach[h + 1] for h in range(7))
    assert reach[0] < 0.2 * plain < reach[-1] < plain


def right_rotary_half_split(x, positions):
    n, d = x.shape
    half = d // 2
    rates = 1.0 / 10000 ** (2 * torch.arange(half, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * rates[None, :]
    c, s = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x1, x2 = x[:, :half], x[:, half:]
    return torch.cat([c * x1 - s * x2, s * x1 + c * x2], dim=1)


def _half_split_by_library(x, positions):
    """An independent right answer: the course's interleaved rotary after permuting columns
    (Llama column j is course column to_course[j]: i -> 2i, i + d/2 -> 2i+1;
    tests/test_lesson04_position_in_attention.py checks this on Llama)."""
    d = x.shape[-1]
    to_course = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    course = torch.empty_like(x)
    course[..., to_course] = x
    return helpers.apply_rotary(course, positions)[..., to_course]


def test_C4_8_half_split_solution_equals_library_after_the_permutation():
    x = torch.randn(7, 12, dtype=torch.float64)
    positions = torch.tensor([0, 4, 9, 100, 2, 31, 1500])
    torch.testing.assert_close(
        right_rotary_half_split(x, positions),
        _half_split_by_library(x, positions),
        rtol=0,
        atol=1e-12,
    )


def test_check_rotary_half_split_right_answers(capsys):
    checks.check_rotary_half_split(right_rotary_half_split)
    checks.check_rotary_half_split(lambda x, p: right_rotary_half_split(x.float(), p))  # float32
    checks.check_rotary_half_split(lambda x, p: right_rotary_half_split(x, p).numpy())
    assert "✓ Exercise 1 (rotary" in capsys.readouterr().out


def _rate_without_2(x, positions):
    n, d = x.shape
    half = d // 2
    angles = positions.double()[:, None] / 10000 ** (torch.arange(half, dtype=torch.float64) / d)
    c, s = torch.cos(angles), torch.sin(angles)
    return torch.cat([c * x[:, :half] - s * x[:, half:], s * x[:, :half] + c * x[:, half:]], dim=1)


def _interleaved(x, positions):  # pairs (2i, 2i + 1), written out: the layout of lesson 4
    n, d = x.shape
    rates = 1.0 / 10000 ** (2 * torch.arange(d // 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * rates[None, :]
    c, s = torch.cos(angles), torch.sin(angles)
    out = torch.empty_like(x)
    out[:, 0::2] = c * x[:, 0::2] - s * x[:, 1::2]
    out[:, 1::2] = s * x[:, 0::2] + c * x[:, 1::2]
    return out


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (lambda x, p: None, "is None"),
        (_interleaved, "interleaved layout"),
        (lambda x, p: helpers.apply_rotary(x, p), "calls helpers.positional.apply_rotary"),
        (lambda x, p: right_rotary_half_split(x, -p), "turns the wrong way"),
        (_rate_without_2, "not turned by the angle position·w_1"),
        (lambda x, p: x, "not turned by the angle"),
        (lambda x, p: 2 * right_rotary_half_split(x, p), "length"),
        (lambda x, p: right_rotary_half_split(x, p)[:, :-1], r"shape \[6, 7\]"),
        (lambda x, p: right_rotary_half_split(x, p).long(), "dtype"),
        (lambda x, p: right_rotary_half_split(x, p + 1), "at position 0 the vector changed"),
    ],
)
def test_check_rotary_half_split_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match):
        checks.check_rotary_half_split(fn)


def right_alibi_bias_for(n_heads, n):
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = [2 ** (-8 * h / closest) for h in range(1, closest + 1)]
    slopes += [2 ** (-8 * j / (2 * closest)) for j in range(1, 2 * (n_heads - closest), 2)]
    m = torch.tensor(slopes, dtype=torch.float64)
    idx = torch.arange(n, dtype=torch.float64)
    return -m[:, None, None] * (idx[:, None] - idx[None, :]).abs()


@pytest.mark.parametrize("n_heads", [1, 3, 6, 8, 12, 24, 32])
def test_C4_8_alibi_exercise_solution_equals_library(n_heads):
    torch.testing.assert_close(
        right_alibi_bias_for(n_heads, 6), helpers.alibi_bias(n_heads, 6, dtype=torch.float64)
    )


def test_check_alibi_bias_right_answers(capsys):
    checks.check_alibi_bias(right_alibi_bias_for)
    checks.check_alibi_bias(lambda h, n: right_alibi_bias_for(h, n).float())  # float32
    checks.check_alibi_bias(lambda h, n: right_alibi_bias_for(h, n).numpy())
    out = capsys.readouterr().out
    assert "✓ Exercise 2 (ALiBi" in out and "1/4, 1/16, 1/64, 1/256, 1/2, 1/8" in out


def _naive_slopes(n_heads, n):  # 2^(-8h/H) for every H: right only for powers of two
    m = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)
    idx = torch.arange(n, dtype=torch.float64)
    return -m[:, None, None] * (idx[:, None] - idx[None, :]).abs()


def _even_extra(n_heads, n):  # the 2nd, 4th, ... slopes of 2N heads
    c = 2 ** math.floor(math.log2(n_heads))
    s = [2 ** (-8 * h / c) for h in range(1, c + 1)]
    s += [2 ** (-8 * j / (2 * c)) for j in range(2, 2 * (n_heads - c) + 1, 2)]
    idx = torch.arange(n, dtype=torch.float64)
    return (
        -torch.tensor(s, dtype=torch.float64)[:, None, None] * (idx[:, None] - idx[None, :]).abs()
    )


def _extra_first(n_heads, n):  # the right slopes, the extra ones first
    b = right_alibi_bias_for(n_heads, n)
    c = 2 ** math.floor(math.log2(n_heads))
    return torch.cat([b[c:], b[:c]]) if c != n_heads else b


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (_naive_slopes, "not a power of two; the paper's recipe"),
        (_even_extra, "take the 1st, 3rd"),
        (_extra_first, "first 2 slopes must be those of 2 heads"),
        (lambda h, n: -right_alibi_bias_for(h, n), "m_h > 0"),
        (lambda h, n: right_alibi_bias_for(h, n) - 1, "diagonal"),
        (lambda h, n: -(right_alibi_bias_for(h, n) ** 2), "straight line"),
        (lambda h, n: right_alibi_bias_for(h, n)[:, :, :-1], r"shape \[1, 5, 4\]"),
        (lambda h, n: torch.tril(right_alibi_bias_for(h, n)), "not symmetric"),
        (lambda h, n: 2 * right_alibi_bias_for(h, n), "power of two"),
        (lambda h, n: right_alibi_bias_for(h, n).long(), "dtype"),
    ],
)
def test_check_alibi_bias_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match):
        checks.check_alibi_bias(fn)


@pytest.mark.parametrize(
    "fn", [_naive_slopes, _even_extra, lambda h, n: 2 * right_alibi_bias_for(h, n)]
)
def test_check_alibi_bias_verdict_does_not_show_the_slopes(fn):
    with pytest.raises(ExerciseFailed) as info:
        checks.check_alibi_bias(fn)
    message = str(info.value)
    assert not re.search(r"\d\.\d", message), message  # no slope value, only the recipe


# ---- the review's holes (04b's l4b_ex1, l4b_ex2): unit vectors only, the library helpers not refused


NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CORE, FURTHER = "04_positional_encoding.ipynb", "04b_position_inside_attention.ipynb"


def _solution_of(grade_id: str):
    """The notebook's solution cell for ``grade_id``, executed: the function it defines."""
    import nbformat

    path = NOTEBOOKS / (FURTHER if grade_id.startswith("l4b_") else CORE)
    nb = nbformat.read(str(path), as_version=4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    space = {"torch": torch, "math": math}
    exec(cell.source, space)  # noqa: S102 - the course's own solution cell
    return next(v for k, v in space.items() if callable(v) and k not in ("torch", "math"))


def _one_line_failure(check, fn) -> str:
    with pytest.raises(ExerciseFailed) as info:
        check(fn)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_check_rotary_half_split_passes_the_notebooks_solution(capsys):
    checks.check_rotary_half_split(_solution_of("l4b_ex1"))
    assert capsys.readouterr().out.startswith("✓ Exercise 1 (rotary")


def test_check_rotary_half_split_refuses_x_normalized_first():
    """f(|x|)·R_p x passed the unit vectors; random rows of other lengths refuse it."""
    message = _one_line_failure(
        checks.check_rotary_half_split,
        lambda x, p: right_rotary_half_split(x / x.norm(dim=1, keepdim=True), p),
    )
    assert "came out with length 1" in message and "do not normalize x" in message


def test_check_rotary_half_split_refuses_a_length_keeping_answer_that_is_not_linear():
    """R_p |x| keeps every length and is right on every unit vector e_c (all >= 0), but it is
    not R_p x: the basis expansion of a random row catches it."""
    message = _one_line_failure(
        checks.check_rotary_half_split, lambda x, p: right_rotary_half_split(x.abs(), p)
    )
    assert "did not come out as R_p x" in message and "linear" in message


@pytest.mark.parametrize(
    "fn, name",
    [
        (_half_split_by_library, "helpers.positional.apply_rotary"),
        (
            lambda x, p: (
                torch.stack(
                    [helpers.rotation_matrix(int(q), x.shape[1], dtype=torch.float64) for q in p]
                )
                @ x[..., None]
            )[..., 0],
            "helpers.positional.rotation_matrix",
        ),
    ],
)
def test_check_rotary_half_split_refuses_the_library_helpers(fn, name):
    """Right values (the library after a permutation) but the forbidden call: refused, named."""
    message = _one_line_failure(checks.check_rotary_half_split, fn)
    assert "your answer calls" in message and name in message
    assert "write it from the formula" in message


@pytest.mark.parametrize("how", ["rotary_in_pass", "_turn"])
def test_check_rotary_half_split_refuses_the_models_own_rotary(how):
    """The model's unchecked rotary (or the turn both use), after the same permutation: refused."""
    import helpers.positional as pos

    def by_model(x, p):
        d = x.shape[-1]
        perm = torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2], 1).flatten()
        inv = torch.argsort(perm)
        inter = x[..., perm]  # half-split -> interleaved
        if how == "rotary_in_pass":  # positions 0..n-1 only: place each row at its position
            p = torch.as_tensor(p).long()
            rows = inter.new_zeros(int(p.max()) + 1, d)
            rows[p] = inter
            out = pos.rotary_in_pass(rows, base=10000.0)[p]
        else:
            ang = torch.as_tensor(p, dtype=torch.float64)[:, None] * pos.angle_rates(d)[None]
            out = pos._turn(inter, torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype))
        return out[..., inv]

    message = _one_line_failure(checks.check_rotary_half_split, by_model)
    assert f"helpers.positional.{how}" in message and "write it from the formula" in message


@pytest.mark.parametrize(
    "fn, names",
    [
        (lambda h, n: helpers.alibi_bias(h, n, dtype=torch.float64), "alibi_bias"),
        (
            lambda h, n: (
                -helpers.positional.alibi_slopes(h)[:, None, None]
                * (torch.arange(n)[:, None] - torch.arange(n)[None]).abs()
            ),
            "alibi_slopes",
        ),
    ],
)
def test_check_alibi_bias_refuses_the_library_helpers(fn, names):
    message = _one_line_failure(checks.check_alibi_bias, fn)
    assert f"helpers.positional.{names}" in message and "write it from the formula" in message


def test_check_alibi_bias_passes_the_notebooks_solution(capsys):
    checks.check_alibi_bias(_solution_of("l4b_ex2"))
    assert capsys.readouterr().out.startswith("✓ Exercise 2 (ALiBi")


def test_grading_spec_forbids_what_the_visible_checks_refuse():
    from tools.grading.spec import spec_for

    for ex in ("l4b_ex1", "l4b_ex2"):
        assert spec_for(ex).forbid == checks.FORBIDDEN[ex]


def test_C4_8_positional_explorer_scheme_changes_the_right_panel():
    from helpers.widgets import positional_explorer

    assert plt.get_fignums() == []
    e = positional_explorer(positions=(100, 140))
    try:
        sim_axes = e.figure.axes[2]
        before = _artists(e)
        torch.testing.assert_close(
            torch.from_numpy(before[2]),
            sinusoidal_encoding_at(torch.arange(100, 141), 64, dtype=torch.float64)
            @ sinusoidal_encoding_at(torch.arange(100, 141), 64, dtype=torch.float64).T,
        )
        e.controls["scheme"].value = "rotary"
        rope = _artists(e)
        assert _changed(before[2], rope[2]) and not _changed(before[0], rope[0])  # waves kept
        s = torch.from_numpy(rope[2])  # [41, 41]: q_p·k_j
        for delta in range(-40, 41):  # a function of j - p only
            diagonal = torch.diagonal(s, delta)
            assert float(diagonal.max() - diagonal.min()) < 1e-9
        assert not torch.allclose(s, s.T, atol=1e-3)  # not symmetric, unlike PE(p)·PE(q)
        assert "q_p·k_q" in sim_axes.get_title() and "RoPE" in e.info.value
        n = e.n_updates
        e.controls["positions"].value = (1500, 1540)  # the same offsets far away: the same picture
        assert e.n_updates == n + 1
        np.testing.assert_allclose(_artists(e)[2], rope[2], rtol=0, atol=1e-9)

        e.controls["scheme"].value = "alibi"
        alibi = _artists(e)[2]
        idx = np.arange(41)
        np.testing.assert_array_equal(alibi, -0.5 * np.abs(idx[:, None] - idx[None, :]))
        assert "ALiBi" in sim_axes.get_title() and "m = 0.5" in e.info.value
        e.controls["scheme"].value = "sinusoidal"
        assert sim_axes.get_title() == "PE(p)·PE(q)"
        assert plt.get_fignums() == []
    finally:
        e.close()
    assert plt.get_fignums() == []


@pytest.mark.parametrize("scheme", ["relative", "RoPE", None, 3])
def test_positional_explorer_bad_scheme(scheme):
    from helpers.widgets import positional_explorer

    with pytest.raises(ValueError, match="scheme must be one of 'sinusoidal', 'rotary', 'alibi'"):
        positional_explorer(scheme=scheme)


# ----------------------------------------------------------------------------------------------
# C4.7 the shipped runs (tools/length_runs.py -> helpers/data/lesson4_length.json)
# ----------------------------------------------------------------------------------------------


def test_C4_7_shipped_runs_match_their_schema_and_settings():
    shipped = load_length_runs()
    s = shipped.settings
    assert (s["train_len"], s["lengths"], s["steps"]) == (32, [32, 64, 128, 256], 400)
    assert s["seeds"] == [0, 1, 2, 3, 4] and s["kinds"] == ["sinusoidal", "rotary", "alibi", "none"]
    assert (s["init"], s["scale_embeddings"], s["dtype"]) == ("xavier", True, "float64")
    assert shipped.tool == "tools/length_runs.py" and shipped.cpu_seconds > 0
    for kind in s["kinds"]:
        runs = shipped.results[kind]
        assert [r["seed"] for r in runs] == s["seeds"]
        for r in runs:
            assert sorted(r["losses"], key=int) == ["32", "64", "128", "256"]
            assert len(r["per_position"]) == 256
            # the per-position losses average to the loss at 256: the same windows (evaluate)
            assert math.fsum(r["per_position"]) / 256 == pytest.approx(r["losses"]["256"], abs=1e-9)


def test_C4_7_a_shipped_file_that_does_not_match_its_schema_is_refused(tmp_path):
    import json

    from helpers.length import LENGTH_RESULTS_SCHEMA, LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA
    from helpers.shipped import DATA, load_results

    record = json.loads((DATA / f"{LENGTH_RUNS}.json").read_text())
    del record["results"]["sinusoidal"][0]["per_position"]
    (tmp_path / f"{LENGTH_RUNS}.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="per_position"):
        load_results(LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA, LENGTH_RESULTS_SCHEMA, folder=tmp_path)


@pytest.mark.slow
def test_C4_7_the_tool_rerun_at_one_seed_agrees_with_the_shipped_seeds(tmp_path):
    """tools/length_runs.py at reduced size (seed 0 of the two schemes whose length behaviour
    the notebooks assert, same settings otherwise): each loss agrees with the shipped seeds
    within their spread, and (float64, one thread) equals the shipped seed 0 to 1e-9 here."""

    from helpers.length import LENGTH_RESULTS_SCHEMA, LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA
    from helpers.shipped import agrees_within_spread, load_results
    from tools import length_runs

    kinds = ["sinusoidal", "alibi"]
    assert length_runs.main(["--kinds", *kinds, "--seeds", "0", "--out", str(tmp_path)]) == 0
    fresh = load_results(LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA, LENGTH_RESULTS_SCHEMA, tmp_path)
    shipped = load_length_runs()
    for kind in kinds:
        (run,) = fresh.results[kind]
        for n, loss in run["losses"].items():
            ok, sentence = agrees_within_spread(
                loss, [r["losses"][n] for r in shipped.results[kind]]
            )
            assert ok, f"{kind} at {n}: {sentence}"
            assert loss == pytest.approx(shipped.results[kind][0]["losses"][n], abs=1e-9)


@pytest.mark.slow
def test_C4_7_the_shipped_rotary_runs_turn_the_way_apply_rotary_turns_today(tmp_path):
    """The rotary rows of lesson4_length.json were trained with RoFormer's direction (the one
    helpers.apply_rotary has): seed 0 run again (float64, one thread) equals the shipped seed 0 to
    1e-9; a run turning the other way is another draw and differs by about 0.01 or more."""
    from helpers.length import LENGTH_RESULTS_SCHEMA, LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA
    from helpers.shipped import load_results
    from tools import length_runs

    assert length_runs.main(["--kinds", "rotary", "--seeds", "0", "--out", str(tmp_path)]) == 0
    fresh = load_results(LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA, LENGTH_RESULTS_SCHEMA, tmp_path)
    (run,) = fresh.results["rotary"]
    shipped = load_length_runs().results["rotary"][0]
    for n, loss in run["losses"].items():
        assert loss == pytest.approx(shipped["losses"][n], abs=1e-9), n


def test_C4_7_length_experiment_holds_init_fixed_and_refuses_bad_arguments():
    settings, results = length_experiment(
        ["sinusoidal", "rotary"], [0], steps=2, d_model=16, n_layers=1, n_heads=2, lengths=[16, 32]
    )
    assert settings["init"] == "xavier" and settings["scale_embeddings"] is True
    assert [list(r[0]["losses"]) for r in results.values()] == [["16", "32"], ["16", "32"]]
    with pytest.raises(ValueError, match="each kind must be one of"):
        length_experiment(["learned"], [0])
    with pytest.raises(ValueError, match="at least one position scheme"):
        length_experiment([], [0])
    with pytest.raises(ValueError, match="at least one seed"):
        length_experiment(["sinusoidal"], [])


# ----------------------------------------------------------------------------------------------
# Exercise 2 (core): the offset q - p from two rows of the table
# ----------------------------------------------------------------------------------------------


def _offset_by_slowest_pair(pe_p, pe_q):
    d = pe_p.shape[0]
    i = d // 2 - 1
    a = math.atan2(float(pe_q[2 * i]), float(pe_q[2 * i + 1]))
    b = math.atan2(float(pe_p[2 * i]), float(pe_p[2 * i + 1]))
    return round(math.remainder(a - b, 2 * math.pi) * 10000 ** (2 * i / d))


def _offset_reading_pair(i, wrap=True):
    def offset(pe_p, pe_q):
        d = pe_p.shape[0]
        j = i % (d // 2)
        a = math.atan2(float(pe_q[2 * j]), float(pe_q[2 * j + 1]))
        a -= math.atan2(float(pe_p[2 * j]), float(pe_p[2 * j + 1]))
        return round((math.remainder(a, 2 * math.pi) if wrap else a) * 10000 ** (2 * j / d))

    return offset


def test_check_offset_between_right_answers(capsys):
    checks.check_offset_between(_offset_by_slowest_pair)
    checks.check_offset_between(lambda p, q: torch.tensor(_offset_by_slowest_pair(p, q)))
    checks.check_offset_between(lambda p, q: float(_offset_by_slowest_pair(p, q)))
    out = capsys.readouterr().out
    assert "✓ Exercise 2" in out and "pair 6 repeats every 6283" in out


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (lambda p, q: None, "returned None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (_raises(IndexError("bad")), "raised IndexError: bad"),
        (lambda p, q: -_offset_by_slowest_pair(p, q), "that is p - q"),
        (lambda p, q: _offset_by_slowest_pair(p, q) + 0.25, "round your estimate"),
        (lambda p, q: torch.zeros(3), r"shape \[3\]"),
        (lambda p, q: "3", r"'3' \(a str\)"),
        (_offset_reading_pair(0), "what pair 0 alone gives.*repeats every 6.283"),
        (_offset_reading_pair(-2), "what pair 6 alone gives.*slowly"),
        (_offset_reading_pair(-1, wrap=False), "off by the slowest pair's wavelength.*Wrap"),
        (lambda p, q: _offset_by_slowest_pair(p, q) + 1, "not q - p"),
    ],
)
def test_check_offset_between_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match) as info:
        checks.check_offset_between(fn)
    assert info.value.exercise.startswith("Exercise 2")
    assert "\n" not in str(info.value)


def _hidden_offset_cases():
    """The (p, q, d_model) of the notebook's hidden tests for exercise 2: the public default of
    its ``hidden_cases`` call, and what its draw gives under 200 secrets (random streams)."""
    import ast
    import random

    cell = _cells_of("l4_ex2")[2]
    tree = ast.parse(cell)
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_hidden_cases"
    )
    cases = list(ast.literal_eval(call.args[1]))
    draw = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_offset_case")
    space = {"_math": math}
    exec(compile(ast.Module([draw], []), "<l4_ex2 hidden draw>", "exec"), space)
    for seed in range(200):
        cases.append(space["_offset_case"](random.Random(seed)))
    return cases


def test_check_offset_between_cases_are_readable_and_need_the_slowest_pair():
    hidden = [(d, p, q - p) for p, q, d in _hidden_offset_cases()]
    for d, p, k in [*position_encoding._OFFSET_CASES, *hidden]:  # the promise the exercise makes
        longest = 2 * math.pi * 10000 ** ((d - 2) / d)
        assert abs(k) < longest / 2 and p >= 0 and p + k >= 0, (d, p, k)
    # some case defeats every pair but the slowest one, wrapped or not
    for i in (0, -2):
        with pytest.raises(ExerciseFailed):
            checks.check_offset_between(_offset_reading_pair(i))


# ----------------------------------------------------------------------------------------------
# Exercise 3 (core, transfer): a probe for permutation-equivariance
# ----------------------------------------------------------------------------------------------


def _probe_roll(layer, x):
    order = torch.arange(x.shape[1]).roll(1)
    with torch.no_grad():
        return torch.allclose(layer(x[:, order]), layer(x)[:, order])


def test_check_permutation_probe_right_answers(capsys):
    checks.check_permutation_probe(_probe_roll)
    checks.check_permutation_probe(lambda layer, x: np.bool_(_probe_roll(layer, x)))
    checks.check_permutation_probe(lambda layer, x: torch.tensor(_probe_roll(layer, x)))
    out = capsys.readouterr().out
    assert "✓ Exercise 3" in out and "causal self-attention: no" in out


def test_check_permutation_probe_layers_are_what_they_are_said_to_be():
    """Every visible layer is what its label says for every transposition of rows."""
    n, d = 6, 8
    x = torch.randn(1, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for layer, equivariant in position_encoding._probe_layers(n, d):
        for i in range(n):
            for j in range(i + 1, n):
                order = list(range(n))
                order[i], order[j] = j, i
                with torch.no_grad():
                    same = torch.allclose(layer(x[:, order]), layer(x)[:, order], atol=1e-9)
                assert same == equivariant, (layer.name, i, j)


def test_check_permutation_probe_leaves_the_callers_random_stream_alone():
    torch.manual_seed(11)
    want = torch.rand(3)
    torch.manual_seed(11)
    checks.check_permutation_probe(_probe_roll)
    assert torch.equal(torch.rand(3), want)


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (
            lambda layer, x: True,
            r"causal self-attention, x\) returned True.*not permutation-equivariant",
        ),
        (
            lambda layer, x: False,
            r"without a mask, x\) returned False.*Did you permute the output rows",
        ),
        (lambda layer, x: "yes", r"'yes' \(a str\); return True or False"),
        (lambda layer, x: 1, r"1 \(a int\); return True or False"),
        (
            lambda layer, x: torch.allclose(layer(x[:, [1, 0, 2, 3, 4, 5]]), layer(x)),
            "Did you permute the output rows",
        ),
        (
            lambda layer, x: torch.equal(
                layer(x[:, [1, 0, 2, 3, 4, 5]]), layer(x)[:, [1, 0, 2, 3, 4, 5]]
            ),
            # which layer shows the rounding first depends on the machine's kernels (the
            # plain one here, 1.1e-16 apart; "each row minus the mean" on another): either way
            # the verdict gives the size and asks for a tolerance
            "to within.*with a tolerance",
        ),
        (lambda layer, x: torch.allclose(layer(x), layer(x)), "really permute something"),
    ],
)
def test_check_permutation_probe_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match) as info:
        checks.check_permutation_probe(fn)
    assert info.value.exercise.startswith("Exercise 3")
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------------------------
# Grading, both ways: honest answers written differently score full marks through tools/grading
# (the hidden tests of the notebooks, run here with each answer); wrong ones score nothing
# ----------------------------------------------------------------------------------------------

HONEST = {
    "l4_ex1": {
        "closed form": """
def best_pair(p, q, d_model):
    rates = helpers.angle_rates(d_model)
    return int(torch.sin((q - p) * rates / 2).abs().argmax())
""",
        "a loop over the pairs": """
def best_pair(p, q, d_model):
    best, farthest = 0, -1.0
    for i in range(d_model // 2):
        w = 1 / 10000 ** (2 * i / d_model)
        gap = math.hypot(math.sin(p * w) - math.sin(q * w), math.cos(p * w) - math.cos(q * w))
        if gap > farthest:
            best, farthest = i, gap
    return best
""",
        "numpy": """
import numpy as np
def best_pair(p, q, d_model):
    pe = helpers.sinusoidal_encoding_at([p, q], d_model, dtype=torch.float64).numpy()
    return np.argmax(np.linalg.norm((pe[0] - pe[1]).reshape(-1, 2), axis=1))
""",
    },
    "l4_ex2": {
        "angles wrapped with remainder": """
def offset_between(pe_p, pe_q):
    d = pe_p.shape[0]
    a = math.atan2(pe_q[-2], pe_q[-1]) - math.atan2(pe_p[-2], pe_p[-1])
    return round(math.remainder(a, 2 * math.pi) / helpers.angle_rates(d)[-1].item())
""",
        "complex numbers": """
def offset_between(pe_p, pe_q):
    d = len(pe_p)
    z_p = torch.complex(pe_p[1::2], pe_p[0::2])  # cos + i sin, one per pair
    z_q = torch.complex(pe_q[1::2], pe_q[0::2])
    turned = torch.angle(z_q * z_p.conj())[-1]  # in (-pi, pi]
    return int(torch.round(turned * 10000 ** ((d - 2) / d)))
""",
        "search over offsets with the rotation": """
def offset_between(pe_p, pe_q):
    d = pe_p.shape[0]
    i = d // 2 - 1
    w = 10000 ** (-2 * i / d)
    half = int(math.pi / w) + 1
    k = torch.arange(-half, half + 1, dtype=torch.float64)
    s, c = pe_p[2 * i], pe_p[2 * i + 1]
    turned_s = s * torch.cos(k * w) + c * torch.sin(k * w)  # R_k applied to the slowest pair
    turned_c = c * torch.cos(k * w) - s * torch.sin(k * w)
    miss = (turned_s - pe_q[2 * i]) ** 2 + (turned_c - pe_q[2 * i + 1]) ** 2
    return int(k[miss.argmin()])
""",
    },
    "l4_ex3": {
        "a random order": """
def is_permutation_equivariant(layer, x):
    n = x.shape[1]
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    while torch.equal(order, torch.arange(n)):
        order = torch.randperm(n)
    with torch.no_grad():
        return bool((layer(x[:, order]) - layer(x)[:, order]).abs().max() < 1e-8)
""",
        "every swap of neighbours": """
def is_permutation_equivariant(layer, x):
    out = layer(x).detach()
    for i in range(x.shape[1] - 1):
        order = list(range(x.shape[1]))
        order[i], order[i + 1] = order[i + 1], order[i]
        if not torch.allclose(layer(x[:, order]).detach(), out[:, order]):
            return False
    return True
""",
        "first and last swapped": """
def is_permutation_equivariant(layer, x):
    n = x.shape[1]
    order = [n - 1, *range(1, n - 1), 0]
    with torch.no_grad():
        a, b = layer(x[:, order]), layer(x)[:, order]
    return torch.allclose(a, b, rtol=0, atol=1e-10)
""",
    },
    "l4b_ex1": {
        "complex numbers": """
def rotary_half_split(x, positions):
    n, d = x.shape
    w = 10000 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    z = torch.complex(x[:, : d // 2], x[:, d // 2 :]) * torch.polar(
        torch.ones(n, d // 2, dtype=torch.float64), positions.double()[:, None] * w
    )
    return torch.cat([z.real, z.imag], dim=1)
""",
        "a loop with math": """
def rotary_half_split(x, positions):
    n, d = x.shape
    out = x.clone()
    for r in range(n):
        for i in range(d // 2):
            a = float(positions[r]) / 10000 ** (2 * i / d)
            c, s = math.cos(a), math.sin(a)
            out[r, i] = c * x[r, i] - s * x[r, i + d // 2]
            out[r, i + d // 2] = s * x[r, i] + c * x[r, i + d // 2]
    return out
""",
        "a 2x2 matrix per pair": """
def rotary_half_split(x, positions):
    n, d = x.shape
    h = d // 2
    a = positions.double()[:, None] / 10000 ** (2 * torch.arange(h, dtype=torch.float64) / d)
    rot = torch.stack([torch.cos(a), -torch.sin(a), torch.sin(a), torch.cos(a)], -1).reshape(n, h, 2, 2)
    pairs = torch.stack([x[:, :h], x[:, h:]], -1)  # [n, h, 2]
    out = (rot @ pairs[..., None])[..., 0]  # [n, h, 2]
    return torch.cat([out[..., 0], out[..., 1]], dim=1)
""",
    },
    "l4b_ex2": {
        "slopes by their ratio": """
def alibi_bias_for(n_heads, n):
    def geometric(h):
        first = 2 ** (-8 / h)
        return [first ** (k + 1) for k in range(h)]
    big = 1 << (n_heads.bit_length() - 1)
    slopes = geometric(big) + geometric(2 * big)[0::2][: n_heads - big]
    d = torch.arange(n, dtype=torch.float64)
    return -torch.tensor(slopes, dtype=torch.float64)[:, None, None] * (d[None, :] - d[:, None]).abs()
""",
        "python lists": """
def alibi_bias_for(n_heads, n):
    closest = 1
    while closest * 2 <= n_heads:
        closest *= 2
    m = [2 ** (-8 * (h + 1) / closest) for h in range(closest)]
    m += [2 ** (-8 * (2 * j + 1) / (2 * closest)) for j in range(n_heads - closest)]
    return torch.tensor([[[-mh * abs(p - q) for q in range(n)] for p in range(n)] for mh in m], dtype=torch.float64)
""",
        "torch throughout": """
def alibi_bias_for(n_heads, n):
    closest = 2 ** int(math.log2(n_heads))
    h = torch.arange(1, closest + 1, dtype=torch.float64)
    extra = 2 * torch.arange(n_heads - closest, dtype=torch.float64) + 1
    m = torch.cat([2 ** (-8 * h / closest), 2 ** (-8 * extra / (2 * closest))])
    pos = torch.arange(n, dtype=torch.float64)
    return -(m[:, None, None] * torch.cdist(pos[:, None], pos[:, None], p=1)[None])
""",
    },
}

#: Wrong answers that a grade must not reward: each scores 0 through the grader.
WRONG_GRADED = {
    "l4_ex2": """
def offset_between(pe_p, pe_q):  # the slowest pair, the angles not wrapped
    d = pe_p.shape[0]
    a = math.atan2(pe_q[-2], pe_q[-1]) - math.atan2(pe_p[-2], pe_p[-1])
    return round(a * 10000 ** ((d - 2) / d))
""",
    "l4_ex3": """
def is_permutation_equivariant(layer, x):  # permutes the input only
    order = torch.arange(x.shape[1]).roll(1)
    return torch.allclose(layer(x[:, order]), layer(x))
""",
    "l4b_ex1": """
def rotary_half_split(x, positions):  # the interleaved layout, the course's apply_rotary
    return helpers.apply_rotary(x, positions)
""",
}


def _cells_of(grade_id: str):
    """The notebook's first code cell (its imports), and the solution and check cells of one
    exercise, as source text."""
    import nbformat

    path = NOTEBOOKS / (FURTHER if grade_id.startswith("l4b_") else CORE)
    nb = nbformat.read(str(path), as_version=4)
    first = next(  # after the Colab set-up cell (tools/colab_cell.py)
        c
        for c in nb.cells
        if c.cell_type == "code" and "course-setup" not in c.metadata.get("tags", [])
    ).source
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells}
    imports = "\n".join(line for line in first.splitlines() if not line.startswith("%"))
    return imports, by_id[grade_id], by_id[f"{grade_id}_check"]


def _graded_records(grade_id, answer, log, monkeypatch, honest=True):
    """Run the exercise's check cell (visible check and hidden tests) after ``answer``, as the
    grader's kernel does, and read the records the hidden tests wrote. An honest answer must
    pass the visible check too; for a wrong one only the hidden tests run (a failed visible
    check would stop the cell before them, which scores 0 as well)."""
    import contextlib
    import io

    from helpers import grading

    imports, _, check_cell = _cells_of(grade_id)
    if not honest:  # the hidden tests alone: they must tell a wrong answer apart by themselves
        check_cell = check_cell[check_cell.index("### BEGIN HIDDEN TESTS") :]
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    monkeypatch.setattr(grading, "_cases", {})
    space: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(imports, space)  # noqa: S102 - the course's own cells
        exec(answer, space)  # noqa: S102
        try:
            exec(check_cell, space)  # noqa: S102
        except ExerciseFailed:
            if honest:
                raise
    from tools.grading.verdicts import read_records

    records, bad = read_records(log)
    assert not bad
    return records.get(grade_id, {})


@pytest.mark.parametrize(
    "grade_id,variant", [(g, v) for g, variants in HONEST.items() for v in variants]
)
def test_honest_answers_written_differently_score_full_marks(
    grade_id, variant, tmp_path, monkeypatch
):
    from tools.grading.verdicts import judge

    _, solution, _ = _cells_of(grade_id)
    reference = _graded_records(grade_id, solution, tmp_path / "ref.jsonl", monkeypatch)
    got = _graded_records(grade_id, HONEST[grade_id][variant], tmp_path / "got.jsonl", monkeypatch)
    assert reference, f"{grade_id}: the hidden tests recorded nothing"
    verdict = judge(grade_id, reference, got)
    assert verdict.correct, f"{grade_id} ({variant}): {verdict.message}"


@pytest.mark.parametrize("grade_id", list(WRONG_GRADED))
def test_wrong_answers_score_nothing(grade_id, tmp_path, monkeypatch):
    from tools.grading.verdicts import judge

    _, solution, _ = _cells_of(grade_id)
    reference = _graded_records(grade_id, solution, tmp_path / "ref.jsonl", monkeypatch)
    got = _graded_records(
        grade_id, WRONG_GRADED[grade_id], tmp_path / "got.jsonl", monkeypatch, honest=False
    )
    assert got, f"{grade_id}: the hidden tests recorded nothing for the wrong answer"
    verdict = judge(grade_id, reference, got)
    assert not verdict.correct and "hidden case" in verdict.message, verdict.message
