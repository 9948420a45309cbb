"""Lesson 7, stacking: the helpers behind claims C7.1-C7.3, the equivalence with PyTorch's
``nn.TransformerEncoderLayer``, the exercise checks, the explorer."""

import contextlib
import copy
import io
import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from torch import nn

from helpers import (
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    TransformerBlock,
    TransformerLM,
    count_parameters,
)
from helpers.blocks import (
    copy_from_torch_encoder_layer,
    make_shared_stack,
    make_stack,
    run_stack,
    shared_tensors,
    stream_statistics,
)
from helpers.checks import ExerciseFailed
from helpers.checks import depth as checks
from helpers.plots import depth as plots
from tools.grading.spec import spec_for  # noqa: E402
from tools.grading.verdicts import judge, read_records  # noqa: E402

# ----------------------------------------------------------------------------------------------
# C7.1 every block maps [batch, n, d_model] to the same shape, so any number of blocks stack
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize("shape", [(1, 1, 32), (3, 7, 32), (2, 16, 32)])
def test_C7_1_block_preserves_shape(norm, shape):
    block = TransformerBlock(32, 4, norm=norm)
    x = torch.randn(*shape)
    assert block(x).shape == x.shape


@pytest.mark.parametrize("depth", [1, 2, 6, 12])
def test_C7_1_any_number_of_blocks_stack(depth):
    stack = make_stack(depth, 32, 4)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        y, hidden = run_stack(stack, x, return_hidden=True)
    assert y.shape == x.shape
    assert len(hidden) == depth + 1 and all(h.shape == x.shape for h in hidden)
    assert hidden[0] is x and torch.equal(hidden[-1], y)


def test_C7_1_language_model_returns_every_state():
    model = TransformerLM(50, 32, 3, 4)
    tokens = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        logits, hidden = model(tokens, return_hidden=True)
    assert logits.shape == (2, 9, 50)
    assert [tuple(h.shape) for h in hidden] == [(2, 9, 32)] * 4


def test_C7_1_run_stack_names_a_block_that_changes_the_shape():
    class Widen(nn.Module):
        d_model = 8

        def forward(self, x):
            return torch.cat([x, x], dim=-1)

    with pytest.raises(ValueError, match="block 0 changed the shape"):
        run_stack([Widen()], torch.randn(1, 2, 8))


# ----------------------------------------------------------------------------------------------
# C7.2 no weight sharing; count(L) = base + L * per_block exactly
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model,n_heads", [(512, 8), (64, 4), (768, 12)])
def test_C7_2_feedforward_holds_two_thirds_of_a_block(d_model, n_heads):
    block = TransformerBlock(d_model, n_heads)
    frac = count_parameters(block.feedforward) / count_parameters(block)
    assert 0.65 < frac < 2 / 3
    if d_model == 512:
        assert count_parameters(block) == 3_152_384
        assert count_parameters(block.feedforward) == 2_099_712
        assert count_parameters(block.attention) == 1_050_624


def test_C7_2_every_block_owns_distinct_tensors():
    stack = make_stack(6, 32, 4)
    assert shared_tensors(stack) == []
    ptrs = [p.data_ptr() for p in stack.parameters()]
    assert len(ptrs) == len(set(ptrs)) == 6 * len(list(stack[0].parameters()))
    ids = {id(p) for b in stack for p in b.parameters()}
    assert len(ids) == len(ptrs)


def test_C7_2_blocks_start_different_and_stay_independent():
    stack = make_stack(2, 16, 2)
    assert not torch.equal(stack[0].attention.q_proj.weight, stack[1].attention.q_proj.weight)
    with torch.no_grad():
        stack[0].attention.q_proj.weight.zero_()
    assert stack[1].attention.q_proj.weight.abs().sum() > 0


@pytest.mark.slow  # about 1 s on an idle machine, 5-6 s on a loaded one
def test_C7_2_equal_copies_at_different_depths_get_different_gradients_and_drift_apart():
    """The notebook's experiment, smaller: four exact copies of one block start as the shared
    stack's function; each depth gets its own gradient (the shared block gets their sum), and a
    few steps of training make the copies different functions (here 3 steps: 0.42)."""
    torch.manual_seed(3)
    shared = make_shared_stack(4, 32, 4).double()
    own = nn.ModuleList(copy.deepcopy(shared[0]) for _ in range(4))
    teacher = make_stack(4, 32, 4).double()
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    with torch.no_grad():
        target = run_stack(teacher, x)
        assert torch.equal(run_stack(own, x), run_stack(shared, x))
    for stack in (own, shared):
        (run_stack(stack, x) - target).pow(2).mean().backward()
    g = torch.stack([b.attention.q_proj.weight.grad for b in own])  # [4, d, d]
    torch.testing.assert_close(g.sum(0), shared[0].attention.q_proj.weight.grad, rtol=1e-12, atol=0)
    cos = torch.cosine_similarity(g[0].flatten(), g[3].flatten(), dim=0)
    assert cos < 0.9
    optimizer = torch.optim.SGD(own.parameters(), lr=0.05)
    for _ in range(3):
        optimizer.zero_grad()
        (run_stack(own, x) - target).pow(2).mean().backward()
        optimizer.step()
    with torch.no_grad():
        outs = [b(x) for b in own]
    drift = (outs[3] - outs[0]).norm() / (outs[0] - x).norm()
    assert drift > 0.05


def test_C7_2_language_model_blocks_own_distinct_tensors():
    model = TransformerLM(40, 32, 4, 4)
    assert shared_tensors(model.blocks) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(vocab_size=100, d_model=32, n_heads=4),
        dict(vocab_size=100, d_model=48, n_heads=6, norm="post", positional="learned", max_len=64),
        dict(vocab_size=257, d_model=64, n_heads=8, d_ff=100, tie_weights=False),
        dict(vocab_size=50257, d_model=768, n_heads=12, d_ff=3072, positional="learned"),
    ],
)
def test_C7_2_count_is_base_plus_depth_times_per_block(kwargs):
    def count(L):
        with torch.device("meta"):
            return count_parameters(TransformerLM(n_layers=L, **kwargs))

    c1, c2 = count(1), count(2)
    per_block, base = c2 - c1, 2 * c1 - c2
    with torch.device("meta"):
        assert per_block == count_parameters(
            TransformerBlock(kwargs["d_model"], kwargs["n_heads"], kwargs.get("d_ff"))
        )
    for L in (3, 4, 6, 12):
        assert count(L) == base + L * per_block


def test_C7_2_gpt2_small_count():
    with torch.device("meta"):
        model = TransformerLM(50257, 768, 12, 12, 3072, positional="learned")
        block = TransformerBlock(768, 12, 3072)
    assert count_parameters(block) == 7_087_872
    assert count_parameters(model) == 124_439_808


@pytest.mark.parametrize("depth", [1, 2, 6, 12])
def test_C7_2_shared_stack_count_does_not_grow(depth):
    shared = make_shared_stack(depth, 32, 4)
    one = count_parameters(TransformerBlock(32, 4))
    assert count_parameters(shared) == one
    assert count_parameters(make_stack(depth, 32, 4)) == depth * one
    if depth > 1:
        pairs = shared_tensors(shared)
        assert len(pairs) == (depth - 1) * len(list(shared[0].parameters()))
        assert all(i == 0 for i, _, _, _ in pairs)


def test_C7_2_shared_stack_applies_one_block_repeatedly():
    shared = make_shared_stack(3, 16, 2)
    x = torch.randn(2, 4, 16)
    with torch.no_grad():
        want = shared[0](shared[0](shared[0](x)))
        got = run_stack(shared, x)
    torch.testing.assert_close(got, want)


def test_C7_2_shared_tensors_sees_shared_memory_not_only_shared_objects():
    a, b = TransformerBlock(8, 2), TransformerBlock(8, 2)
    b.attention.q_proj.weight = nn.Parameter(
        a.attention.q_proj.weight.data
    )  # new object, same memory
    pairs = shared_tensors([a, b])
    assert pairs == [(0, "attn.sublayer.q_proj.weight", 1, "attn.sublayer.q_proj.weight")]


def test_C7_2_shared_gradients_accumulate():
    shared = make_shared_stack(3, 8, 2)
    run_stack(shared, torch.randn(1, 3, 8)).sum().backward()
    grads = [b.attention.q_proj.weight.grad for b in shared]
    assert all(g is grads[0] for g in grads)


# ----------------------------------------------------------------------------------------------
# Equivalence with torch.nn.TransformerEncoderLayer (dropout 0), both norm placements
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm,norm_first", [("pre", True), ("post", False)])
@pytest.mark.parametrize("d_model,n_heads,d_ff", [(32, 4, 64), (64, 8, 256), (24, 3, 50)])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_block_matches_torch_encoder_layer(norm, norm_first, d_model, n_heads, d_ff, mode):
    layer = nn.TransformerEncoderLayer(
        d_model,
        n_heads,
        d_ff,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
    )
    with torch.no_grad():  # make the layer norms non-trivial so that they are really compared
        for ln in (layer.norm1, layer.norm2):
            ln.weight.normal_(1.0, 0.2)
            ln.bias.normal_(0.0, 0.2)
    block = copy_from_torch_encoder_layer(
        layer, TransformerBlock(d_model, n_heads, d_ff, norm=norm)
    )
    getattr(layer, mode)()
    getattr(block, mode)()
    x = torch.randn(3, 11, d_model)
    with torch.no_grad():
        torch.testing.assert_close(block(x), layer(x), atol=1e-5, rtol=1e-5)


def test_copy_checks_the_match():
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
    with pytest.raises(ValueError, match="norm placement"):
        copy_from_torch_encoder_layer(layer, TransformerBlock(16, 4, 32, norm="post"))
    with pytest.raises(ValueError, match="n_heads"):
        copy_from_torch_encoder_layer(layer, TransformerBlock(16, 2, 32))
    with pytest.raises(ValueError, match="d_ff"):
        copy_from_torch_encoder_layer(layer, TransformerBlock(16, 4, 64))
    with pytest.raises(ValueError, match="d_model"):
        copy_from_torch_encoder_layer(layer, TransformerBlock(32, 4, 32))
    with pytest.raises(ValueError, match="activation"):
        copy_from_torch_encoder_layer(layer, TransformerBlock(16, 4, 32, activation="gelu"))
    with pytest.raises(ValueError, match="causal"):
        copy_from_torch_encoder_layer(layer, TransformerBlock(16, 4, 32, causal=True))
    with pytest.raises(TypeError, match="layer must be"):
        copy_from_torch_encoder_layer(TransformerBlock(16, 4), TransformerBlock(16, 4))
    with pytest.raises(TypeError, match="block must be"):
        copy_from_torch_encoder_layer(layer, layer)


# ----------------------------------------------------------------------------------------------
# C7.3 the residual stream
# ----------------------------------------------------------------------------------------------


def _block_parts(block, h):
    """The two sublayer outputs a block adds to the stream (pre-norm)."""
    a = block.attention(block.attn.norm(h))  # [B, n, d]
    f = block.feedforward(block.ffn.norm(h + a))  # [B, n, d]
    return a, f


def test_C7_3_pre_norm_stream_is_h0_plus_every_sublayer_output():
    torch.manual_seed(1)
    model = TransformerLM(64, 32, 6, 4, norm="pre", init="xavier").eval()
    tokens = torch.randint(0, 64, (2, 10))
    with torch.no_grad():
        _, hidden = model(tokens, return_hidden=True)
        total = hidden[0].clone()
        for l, block in enumerate(model.blocks):
            a, f = _block_parts(block, hidden[l])
            torch.testing.assert_close(hidden[l + 1] - hidden[l], a + f, atol=1e-5, rtol=1e-5)
            total = total + a + f
    torch.testing.assert_close(hidden[-1], total, atol=1e-4, rtol=1e-5)


def test_C7_3_post_norm_stream_is_renormalized_not_summed():
    torch.manual_seed(1)
    model = TransformerLM(64, 32, 6, 4, norm="post", init="xavier").eval()
    tokens = torch.randint(0, 64, (2, 10))
    with torch.no_grad():
        _, hidden = model(tokens, return_hidden=True)
        block = model.blocks[2]
        a = block.attention(hidden[2])
        f = block.feedforward(block.attn.norm(hidden[2] + a))
    assert not torch.allclose(hidden[3] - hidden[2], a + f, atol=1e-2)
    norms = torch.stack([h.norm(dim=-1) for h in hidden[1:]])  # [L, B, n]
    torch.testing.assert_close(norms, torch.full_like(norms, math.sqrt(32)), atol=1e-3, rtol=1e-4)


def _stream(**kwargs):
    torch.manual_seed(0)
    model = TransformerLM(256, 64, 12, 4, norm="pre", **kwargs).double().eval()
    tokens = torch.randint(0, 256, (4, 32))
    with torch.no_grad():
        _, hidden = model(tokens, return_hidden=True)
    return model, tokens, hidden


def test_C7_3_pre_norm_stream_grows_with_depth():
    _, _, hidden = _stream(init="xavier")
    contribution, stream = stream_statistics(hidden)
    assert contribution.shape == (12,) and stream.shape == (13,)
    assert contribution.dtype == torch.float64
    assert (stream[1:] > stream[:-1]).all()
    assert stream[-1] / stream[0] > 2
    assert (contribution > 0.5 * stream[0]).all()
    # contributions of similar size, added in nearly orthogonal directions: ||h_L||^2 is close to
    # ||h_0||^2 + sum ||delta_l||^2 (a random walk), far from (||h_0|| + sum ||delta_l||)^2
    steps = torch.stack(hidden[1:]) - torch.stack(hidden[:-1])
    unit = steps / steps.norm(dim=-1, keepdim=True)
    cosines = torch.einsum("lbnd,mbnd->lmbn", unit, unit).mean(dim=(2, 3))
    assert cosines[~torch.eye(12, dtype=torch.bool)].abs().mean() < 0.2
    walk = math.sqrt(stream[0] ** 2 + (contribution**2).sum())
    assert 0.8 < stream[-1] / walk < 1.3
    assert stream[-1] < 0.5 * (stream[0] + contribution.sum())


@pytest.mark.slow  # about 1 s on an idle machine, 5-6 s on a loaded one
def test_C7_3_gpt2_init_and_its_residual_scaling():
    """GPT-2's init (learned positions, std 0.02, no scaling): contributions about as large as
    the embeddings; dividing the residual output projections by sqrt(2 L) shrinks them."""
    model, tokens, hidden = _stream(positional="learned")
    assert model.init_scheme == "gpt2" and not model.scale_embeddings
    contribution, stream = stream_statistics(hidden)
    assert 0.5 < contribution.mean() / stream[0] < 2 and stream[-1] > 2 * stream[0]
    with torch.no_grad():
        for blk in model.blocks:
            blk.attention.out_proj.weight /= math.sqrt(24)
            blk.feedforward.w2.weight /= math.sqrt(24)
        _, scaled = model(tokens, return_hidden=True)
    contribution_scaled, stream_scaled = stream_statistics(scaled)
    assert 3 < contribution.mean() / contribution_scaled.mean() < 8
    assert stream_scaled[-1] < 1.5 * stream_scaled[0]


def test_C7_3_stream_statistics_values():
    h0 = torch.zeros(1, 2, 3)
    h1 = torch.tensor([[[3.0, 4.0, 0.0], [0.0, 0.0, 1.0]]])
    contribution, stream = stream_statistics([h0, h1])
    torch.testing.assert_close(contribution, torch.tensor([3.0]))
    torch.testing.assert_close(stream, torch.tensor([0.0, 3.0]))


@pytest.mark.parametrize(
    "hidden,error,match",
    [
        (torch.zeros(2, 3, 4), ValueError, "list"),
        ([torch.zeros(2, 3, 4)], ValueError, "at least two"),
        ([torch.zeros(2, 3, 4), torch.zeros(2, 3, 5)], ValueError, r"hidden\[1\] has shape"),
        ([torch.zeros(2, 3, 4), torch.zeros(3, 4)], ValueError, "3 dimensions"),
        ([torch.zeros(2, 3, 4), "h1"], TypeError, "torch.Tensor"),
    ],
)
def test_stream_statistics_bad_arguments(hidden, error, match):
    with pytest.raises(error, match=match):
        stream_statistics(hidden)


# ----------------------------------------------------------------------------------------------
# bad arguments
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("factory", [MultiHeadAttention, TransformerBlock])
def test_n_heads_must_divide_d_model(factory):
    with pytest.raises(ValueError, match="n_heads must divide d_model"):
        factory(30, 4)


@pytest.mark.parametrize("factory", [make_stack, make_shared_stack])
def test_stack_n_heads_must_divide_d_model(factory):
    with pytest.raises(ValueError, match="n_heads must divide d_model"):
        factory(2, 30, 4)


@pytest.mark.parametrize(
    "depth,error", [(0, ValueError), (-1, ValueError), (2.0, TypeError), ("2", TypeError)]
)
@pytest.mark.parametrize("factory", [make_stack, make_shared_stack])
def test_depth_must_be_at_least_one(factory, depth, error):
    with pytest.raises(error, match="n_layers"):
        factory(depth, 16, 2)


def test_language_model_depth_must_be_at_least_one():
    with pytest.raises(ValueError, match="n_layers"):
        TransformerLM(10, 16, 0, 2)


@pytest.mark.parametrize(
    "x,match",
    [
        (torch.zeros(2, 5, 17), "d_model=16"),
        (torch.zeros(5, 16), "3 dimensions"),
        (torch.zeros(1, 2, 5, 16), "3 dimensions"),
    ],
)
def test_block_rejects_wrong_input_shape(x, match):
    with pytest.raises(ValueError, match=match):
        TransformerBlock(16, 2)(x)
    with pytest.raises(ValueError, match=match):
        run_stack(make_stack(2, 16, 2), x)


def test_block_rejects_non_tensor():
    with pytest.raises(TypeError, match="torch.Tensor"):
        TransformerBlock(16, 2)([[1.0] * 16])


@pytest.mark.parametrize(
    "stack,error,match",
    [
        ([], ValueError, "at least one block"),
        (nn.ModuleList(), ValueError, "at least one block"),
        (TransformerBlock(16, 2), TypeError, "single TransformerBlock"),
        ([torch.zeros(3)], TypeError, r"stack\[0\]"),
        (5, TypeError, "sequence of blocks"),
    ],
)
def test_run_stack_bad_stack(stack, error, match):
    with pytest.raises(error, match=match):
        run_stack(stack, torch.zeros(1, 2, 16))
    if not isinstance(stack, nn.ModuleList) or len(stack):
        return
    with pytest.raises(error, match=match):
        shared_tensors(stack)


# ----------------------------------------------------------------------------------------------
# plots
# ----------------------------------------------------------------------------------------------


def test_plots_draw_given_data():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    arts = plots.plot_parameter_count([1, 2, 3], [10, 20, 30], [10, 10, 10], ax=ax1)
    assert list(arts["independent"].get_ydata()) == [10, 20, 30]
    assert list(arts["shared"].get_ydata()) == [10, 10, 10]
    arts = plots.plot_residual_stream([1.0, 2.0], [5.0, 6.0, 7.0], ax=ax2)
    assert list(arts["stream"].get_xdata()) == [0, 1, 2]
    assert list(arts["contribution"].get_xdata()) == [1, 2]
    plt.close(fig)


def test_plots_bad_arguments():
    with pytest.raises(ValueError, match="same length"):
        plots.plot_parameter_count([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="one value more"):
        plots.plot_residual_stream([1.0, 2.0], [1.0, 2.0])
    with pytest.raises(TypeError, match="sequence of numbers"):
        plots.plot_residual_stream(["a"], [1.0, 2.0])


# ----------------------------------------------------------------------------------------------
# exercise checks
# ----------------------------------------------------------------------------------------------


def _count_right(d_model, n_layers, d_ff, bias=True):
    attention = 4 * d_model**2 + (4 * d_model if bias else 0)
    feedforward = 2 * d_model * d_ff + (d_ff + d_model if bias else 0)
    return n_layers * (attention + feedforward + 4 * d_model)


def test_check_parameter_count_accepts_right_answer(capsys):
    checks.check_parameter_count(_count_right)
    assert "✓" in capsys.readouterr().out


def test_check_parameter_count_cases_are_real_counts():
    for d, L, f, b in checks._COUNT_CASES:
        with torch.device("meta"):
            stack = make_stack(L, d, 1, d_ff=f, bias=b)
        assert count_parameters(stack) == _count_right(d, L, f, b)


def test_depth_checks_ship_no_answer():
    """Issue 15: nothing importable computes an exercise's answer, and no verdict prints it."""
    for name in (
        "_true_count",
        "_parts",
        "_count_mistakes",
        "_block_variants",
        "_reference_relative",
    ):
        assert not hasattr(checks, name), name
    with pytest.raises(ExerciseFailed) as info:
        checks.check_parameter_count(lambda d, L, f, bias=True: _count_right(d, L, f, bias) + 1)
    message = str(info.value)
    assert (
        f"{_count_right(64, 1, 256):,}" not in message
        and str(_count_right(64, 1, 256)) not in message
    )
    assert "-1" not in message and "+1" not in message


def _count_from_a_model(d, L, f, bias=True):
    with torch.device("meta"):
        return count_parameters(make_stack(L, d, 1, d_ff=f, bias=bias))


def _count_from_shapes(d, L, f, bias=True):
    stack = make_stack(L, d, 1, d_ff=f, bias=bias)
    return sum(math.prod(p.shape) for p in stack.parameters())


@pytest.mark.parametrize("fn", [_count_from_a_model, _count_from_shapes])
def test_check_parameter_count_refuses_a_model(fn):
    """The exercise asks for the formulas; the hidden tests forbid the same torch calls."""
    with pytest.raises(ExerciseFailed, match="use the formulas, not a model"):
        checks.check_parameter_count(fn)


def _raise_not_implemented(*args, **kwargs):
    raise NotImplementedError()


def _raise_other(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


def _without(part):
    """A count that leaves out one part of each block, given as a function of (d, f, bias)."""
    return lambda d, L, f, bias=True: _count_right(d, L, f, bias) - L * part(d, f, bias)


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (_raise_not_implemented, "not implemented yet"),
        (_raise_other, "raised ZeroDivisionError"),
        (lambda d, L, f, bias=True: None, "is None"),
        (lambda d, L, f, bias=True: "many", "should be a number"),
        (lambda d, L, f, bias=True: float("nan"), "not a finite number"),
        (lambda d, L, f, bias=True: _count_right(d, L, f, bias) + 0.5, "whole number"),
        (lambda d, L, f, bias=True: _count_right(d, 1, f, bias), "count of ONE block"),
        # issue 14 point 11: the attention's biases (4 d) cost what the layer norms cost (4 d)
        # with bias=True; the bias=False cases tell them apart, and the verdict says which
        (_without(lambda d, f, b: 4 * d if b else 0), "the attention's biases are missing"),
        (_without(lambda d, f, b: 4 * d), "the layer norms are missing"),
        (
            lambda d, L, f, bias=True: L * (4 * d * d + 2 * d * f + 4 * d),
            "Linear layers are missing",
        ),
        (lambda d, L, f, bias=True: L * (4 * d * d + 2 * d * f), "biases and the layer norms"),
        (lambda d, L, f, bias=True: _count_right(d, L, f), "you counted them anyway"),
        (_without(lambda d, f, b: 0 if b else 2 * d), "keeps its shift"),
        (_without(lambda d, f, b: 0 if b else 4 * d), "keep their scale and shift"),
        (_without(lambda d, f, b: 2 * d), "only one layer norm"),
        (_without(lambda d, f, b: d if b else 0), "second bias b2"),
        (_without(lambda d, f, b: f if b else 0), "first bias b1"),
        (_without(lambda d, f, b: d * d + (d if b else 0)), "output projection W_O"),
        (_without(lambda d, f, b: 3 * (d * d + (d if b else 0))), "four d_model × d_model"),
        (_without(lambda d, f, b: d * f + (d if b else 0)), "two matrices, W1"),
        (lambda d, L, f, bias=True: _count_right(d, L, f, bias) + 1, "no single usual mistake"),
        # two mistakes at once: no single pattern explains the answers, so the verdict gives
        # the formulas instead of naming a wrong cause
        (
            lambda d, L, f, bias=True: _count_right(d, L, f) - 4 * d * L,
            r"no single usual mistake explains your answers\. Count, per block",
        ),
        (lambda d, L, f: _count_right(d, L, f), "must take the argument bias"),
        (lambda d, L, f, bias=False: _count_right(d, L, f, bias), "bias must default to True"),
    ],
)
def test_check_parameter_count_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match):
        checks.check_parameter_count(fn)


def test_check_parameter_count_names_the_attention_biases_not_the_layer_norms():
    """Issue 14 point 11: the verdict for missing attention biases must not blame the norms."""
    with pytest.raises(ExerciseFailed) as info:
        checks.check_parameter_count(_without(lambda d, f, b: 4 * d if b else 0))
    message = str(info.value)
    assert "W_Q, W_K, W_V and W_O" in message and "layer norms are missing" not in message


def test_check_parameter_count_accepts_tensor_and_numpy_ints(capsys):
    checks.check_parameter_count(
        lambda d, L, f, bias=True: torch.tensor(_count_right(d, L, f, bias))
    )
    checks.check_parameter_count(lambda d, L, f, bias=True: np.int64(_count_right(d, L, f, bias)))
    assert capsys.readouterr().out.count("✓") == 2


class ColleagueBlock(nn.Module):
    """The notebook's exercise 2: meant to be pre-norm, but it normalizes the stream."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.d_model = d_model
        self.ln1 = LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.ln2 = LayerNorm(d_model)
        self.feedforward = FeedForward(d_model)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        x = self.ln2(x)
        x = x + self.feedforward(x)
        return x


def _fixed(forward):
    return type("FixedBlock", (ColleagueBlock,), {"forward": forward})


def _pre(s, x):
    h = x + s.attention(s.ln1(x))
    return h + s.feedforward(s.ln2(h))


def test_check_fixed_block_accepts_right_answer(capsys):
    checks.check_fixed_block(_fixed(_pre))
    assert "✓" in capsys.readouterr().out


def _as_transformer_block(s, x):
    """The course's own pre-norm TransformerBlock, given this block's weights."""
    block = TransformerBlock(s.d_model, s.attention.n_heads)
    block.attn.norm.load_state_dict(s.ln1.state_dict())
    block.attention.load_state_dict(s.attention.state_dict())
    block.ffn.norm.load_state_dict(s.ln2.state_dict())
    block.feedforward.load_state_dict(s.feedforward.state_dict())
    return block(x)


def test_check_fixed_block_agrees_with_transformer_block(capsys):
    """The check's notion of right is the course's own pre-norm block, with the same weights."""
    torch.manual_seed(0)
    fixed = _fixed(_pre)(16, 2)
    with torch.no_grad():
        for p in fixed.parameters():
            p.normal_()
        x = torch.randn(2, 5, 16)
        # float32, outputs of size ~100: the block's fused kernels (F.layer_norm, F.gelu, fused
        # attention) round differently from the formula, by ~1e-6 relative
        torch.testing.assert_close(fixed(x), _as_transformer_block(fixed, x), rtol=1e-5, atol=1e-4)
    checks.check_fixed_block(_fixed(_as_transformer_block))
    assert "✓" in capsys.readouterr().out


def _post_ffn(s, x):
    h = x + s.attention(s.ln1(x))
    return s.ln2(h + s.feedforward(h))


def _post(s, x):
    h = s.ln1(x + s.attention(x))
    return s.ln2(h + s.feedforward(h))


class _NoLn2(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.feedforward = FeedForward(d_model)


@pytest.mark.parametrize(
    "answer,match",
    [
        (None, "is None"),
        (_pre, "should be a class"),
        (ColleagueBlock, "the stream is still normalized"),
        (_fixed(ColleagueBlock.forward), "the stream is still normalized"),
        (_fixed(_post_ffn), "post-norm form of the feed-forward half"),
        (_fixed(_post), "this is post-norm"),
        (_fixed(lambda s, x: s.feedforward(s.ln2(x + s.attention(s.ln1(x))))), "no residual"),
        (
            _fixed(lambda s, x: (lambda h: h + s.feedforward(h))(x + s.attention(s.ln1(x)))),
            "ln2 is not used",
        ),
        (
            _fixed(lambda s, x: (lambda h: h + s.feedforward(s.ln1(h)))(x + s.attention(s.ln1(x)))),
            "goes through ln1",
        ),
        (
            _fixed(lambda s, x: x + s.attention(s.ln1(x)) + s.feedforward(s.ln2(x))),
            "'parallel' block",
        ),
        (_fixed(lambda s, x: 1.01 * _pre(s, x)), "differs from the right result"),
        (_fixed(lambda s, x: None), "is None"),
        (_fixed(lambda s, x: _pre(s, x)[0]), "has shape"),
        (_fixed(lambda s, x: _pre(s, x) * float("nan")), "NaN"),
        (_fixed(lambda s, x: _pre(s, x).long()), "dtype"),
        (_fixed(_raise_not_implemented), "not implemented yet"),
        (_fixed(_raise_other), "raised ZeroDivisionError"),
        (_NoLn2, "no module `ln2`"),
        (type("Broken", (ColleagueBlock,), {"__init__": _raise_other}), "raised ZeroDivisionError"),
    ],
)
def test_check_fixed_block_wrong_answers(answer, match):
    with pytest.raises(ExerciseFailed, match=match):
        checks.check_fixed_block(answer)


def _relative_right(hidden):
    h = torch.stack(hidden)  # [L+1, B, n, d]
    change = (h[1:] - h[:-1]).norm(dim=-1)  # [L, B, n]
    return (change / h[:-1].norm(dim=-1)).mean(dim=(1, 2))


def test_check_relative_contributions_accepts_right_answer(capsys):
    checks.check_relative_contributions(_relative_right)
    checks.check_relative_contributions(
        lambda hidden: torch.stack(
            [
                ((b - a).norm(dim=-1) / a.norm(dim=-1)).mean()
                for a, b in zip(hidden[:-1], hidden[1:], strict=True)
            ]
        )
    )
    checks.check_relative_contributions(lambda hidden: _relative_right(hidden).numpy())
    assert capsys.readouterr().out.count("✓") == 3


def _norms(hidden):
    return torch.stack(hidden).norm(dim=-1)  # [L+1, B, n]


@pytest.mark.parametrize(
    "fn,match",
    [
        (None, "is None"),
        (_raise_not_implemented, "not implemented yet"),
        (_raise_other, "raised ZeroDivisionError"),
        (lambda hidden: None, "is None"),
        (lambda hidden: [1.0, 2.0], "should be a torch.Tensor"),
        (lambda hidden: _relative_right(hidden).to(torch.int64), "dtype torch.int64"),
        (lambda hidden: _relative_right(hidden) * float("nan"), "NaN"),
        (lambda hidden: torch.zeros(7), r"shape \[7\]"),
        (lambda hidden: torch.cat([_relative_right(hidden), torch.zeros(1)]), "one per state"),
        (
            lambda hidden: (
                (torch.stack(hidden)[1:] - torch.stack(hidden)[:-1]).norm(dim=-1)
                / torch.stack(hidden)[:-1].norm(dim=-1)
            ),
            "one value per token",
        ),
        (
            lambda hidden: ((_norms(hidden)[1:] - _norms(hidden)[:-1]) / _norms(hidden)[:-1]).mean(
                dim=(1, 2)
            ),
            "SIZE of the stream",
        ),
        (
            lambda hidden: (
                (torch.stack(hidden)[1:] - torch.stack(hidden)[:-1]).norm(dim=-1).mean(dim=(1, 2))
            ),
            "not divided",
        ),
        (
            lambda hidden: (
                (torch.stack(hidden)[1:] - torch.stack(hidden)[:-1]).norm(dim=-1)
                / _norms(hidden)[1:]
            ).mean(dim=(1, 2)),
            "AFTER the block",
        ),
        (
            lambda hidden: (_norms(hidden)[1:] - _norms(hidden)[:-1]).mean(dim=(1, 2)),
            "SIZE of the stream",
        ),
        (
            lambda hidden: (_norms(hidden)[1:] / _norms(hidden)[:-1]).mean(dim=(1, 2)),
            "how much the stream grew",
        ),
        (lambda hidden: _relative_right(hidden) * 1.1, "relative difference 0.1 "),
    ],
)
def test_check_relative_contributions_wrong_answers(fn, match):
    with pytest.raises(ExerciseFailed, match=match):
        checks.check_relative_contributions(fn)


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    want = torch.rand(3)
    torch.manual_seed(123)
    checks.check_fixed_block(_fixed(_pre))
    checks.check_parameter_count(_count_right)
    checks.check_relative_contributions(_relative_right)
    torch.testing.assert_close(torch.rand(3), want)


# ---- the hidden tests (issue 15): what they record, judged as tools/coursework.py judges -----

_NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "07_stacking_blocks.ipynb"


def _notebook_cells() -> dict[str, str]:
    nb = json.loads(_NOTEBOOK.read_text(encoding="utf-8"))
    cells = {}
    for c in nb["cells"]:
        source = "".join(c["source"])
        gid = c["metadata"].get("nbgrader", {}).get("grade_id")
        cells[gid or ("colleague" if "class ColleagueBlock" in source else None)] = source
    return cells


def _hidden_records(exercise, answer, tmp_path, monkeypatch):
    """The notebook's hidden block of ``exercise`` run on ``answer`` (a solution cell's source),
    recording as under the grader; returns {case: [entries]}."""
    import helpers.grading

    cells = _notebook_cells()
    log = tmp_path / f"{exercise}-{len(list(tmp_path.iterdir()))}.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    monkeypatch.setattr(helpers.grading, "_cases", {})
    namespace = {"torch": torch, "nn": nn, "make_stack": make_stack, "run_stack": run_stack}
    namespace.update(LayerNorm=LayerNorm, MultiHeadAttention=MultiHeadAttention)
    namespace.update(FeedForward=FeedForward, TransformerBlock=TransformerBlock)
    namespace.update(count_parameters=count_parameters, d_model=64, n_heads=4, per_block=49_984)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(cells["colleague"], namespace)
    exec(answer, namespace)
    check = cells[f"{exercise}_check"]
    exec(check[check.index("### BEGIN HIDDEN TESTS") :], namespace)
    _hidden_records.namespace = namespace
    return read_records(log)[0].get(exercise, {})


_VISIBLE = {
    "l7_ex1": (checks.check_parameter_count, "stack_parameter_count"),
    "l7_ex2": (checks.check_fixed_block, "FixedBlock"),
    "l7_ex3": (checks.check_relative_contributions, "relative_contributions"),
}


def _edit(exercise, old, new):
    source = _notebook_cells()[exercise]
    assert old in source, old
    return source.replace(old, new)


_REFERENCE: dict[str, dict] = {}
_RETURN1 = "return n_layers * (attention + feedforward + layer_norms)"
_RETURN3 = "return (change / h[:-1].norm(dim=-1)).mean(dim=(1, 2))"
_HIDDEN_ANSWERS = [
    (
        "l7_ex1",
        "float",
        _edit("l7_ex1", _RETURN1, _RETURN1.replace("n_layers", "1.0 * n_layers")),
        True,
    ),
    (
        "l7_ex1",
        "tensor",
        _edit("l7_ex1", _RETURN1, _RETURN1.replace("n_layers", "torch.tensor(n_layers)")),
        True,
    ),
    (
        "l7_ex1",
        "counts a model",
        "def stack_parameter_count(d_model, n_layers, d_ff, bias=True):\n"
        "    with torch.device('meta'):\n"
        "        return count_parameters(make_stack(n_layers, d_model, 1, d_ff=d_ff, bias=bias))",
        "forbids",
    ),
    (  # honest, written differently: each weight's shape listed, the biases and norms summed
        "l7_ex1",
        "shapes listed",
        "def stack_parameter_count(d_model, n_layers, d_ff, bias=True):\n"
        "    shapes = [(d_model, d_model)] * 4 + [(d_model, d_ff), (d_ff, d_model)]\n"
        "    weights = sum(rows * cols for rows, cols in shapes)\n"
        "    biases = [d_model] * 4 + [d_ff, d_model] if bias else []\n"
        "    norms = [d_model] * 4  # gamma and beta of two LayerNorms\n"
        "    return n_layers * (weights + sum(biases) + sum(norms))",
        True,
    ),
    (  # honest: one block at a time, in a loop
        "l7_ex1",
        "loop over blocks",
        "def stack_parameter_count(d_model, n_layers, d_ff, bias=True):\n"
        "    total = 0\n"
        "    for _ in range(n_layers):\n"
        "        total += 4 * d_model**2 + 2 * d_model * d_ff + 4 * d_model\n"
        "        if bias:\n"
        "            total += 5 * d_model + d_ff\n"
        "    return total",
        True,
    ),
    (  # honest: the polynomial expanded, the bias flag used as 0 or 1
        "l7_ex1",
        "polynomial",
        "def stack_parameter_count(d_model, n_layers, d_ff, bias=True):\n"
        "    return n_layers * (4 * d_model**2 + 2 * d_model * d_ff + 4 * d_model"
        " + int(bias) * (5 * d_model + d_ff))",
        True,
    ),
    ("l7_ex1", "no attention biases", _edit("l7_ex1", "(4 * d_model if bias else 0)", "0"), False),
    (
        "l7_ex1",
        "norms lose beta",
        _edit("l7_ex1", "2 * 2 * d_model", "(4 if bias else 2) * d_model"),
        False,
    ),
    ("l7_ex1", "default bias=False", _edit("l7_ex1", "bias=True", "bias=False"), False),
    (  # honest, written differently: the stream updated in place, twice
        "l7_ex2",
        "two updates",
        "class FixedBlock(ColleagueBlock):\n"
        "    def forward(self, x):\n"
        "        x = x + self.attention(self.ln1(x))\n"
        "        x = x + self.feedforward(self.ln2(x))\n"
        "        return x",
        True,
    ),
    (  # honest: a loop over (norm, sublayer) pairs
        "l7_ex2",
        "loop over sublayers",
        "class FixedBlock(ColleagueBlock):\n"
        "    def forward(self, x):\n"
        "        for norm, sublayer in ((self.ln1, self.attention), (self.ln2, self.feedforward)):\n"
        "            x = x + sublayer(norm(x))\n"
        "        return x",
        True,
    ),
    (  # honest: a new module built the same way, one expression for the output
        "l7_ex2",
        "from scratch",
        "class FixedBlock(nn.Module):\n"
        "    def __init__(self, d_model, n_heads):\n"
        "        super().__init__()\n"
        "        self.ln1 = LayerNorm(d_model)\n"
        "        self.attention = MultiHeadAttention(d_model, n_heads)\n"
        "        self.ln2 = LayerNorm(d_model)\n"
        "        self.feedforward = FeedForward(d_model)\n"
        "\n"
        "    def forward(self, x):\n"
        "        a = self.attention(self.ln1(x))\n"
        "        return x + a + self.feedforward(self.ln2(x + a))",
        True,
    ),
    ("l7_ex2", "the colleague's block", "FixedBlock = ColleagueBlock", False),
    ("l7_ex2", "ln1 for both", _edit("l7_ex2", "self.ln2(h)", "self.ln1(h)"), False),
    ("l7_ex2", "parallel", _edit("l7_ex2", "self.ln2(h)", "self.ln2(x)"), False),
    (
        "l7_ex2",
        "float32",
        _edit("l7_ex2", "h = x +", "x = x.float()\n        self.float()\n        h = x +"),
        True,
    ),
    (  # honest, written differently: one pair of neighbouring states at a time
        "l7_ex3",
        "loop over pairs",
        "def relative_contributions(hidden):\n"
        "    out = []\n"
        "    for before, after in zip(hidden[:-1], hidden[1:]):\n"
        "        out.append(((after - before).norm(dim=-1) / before.norm(dim=-1)).mean())\n"
        "    return torch.stack(out)",
        True,
    ),
    (  # honest: tokens flattened, torch.linalg.vector_norm and diff
        "l7_ex3",
        "vector_norm of diff",
        "def relative_contributions(hidden):\n"
        "    h = torch.stack(hidden).flatten(1, -2)  # [L+1, tokens, d_model]\n"
        "    change = torch.linalg.vector_norm(h.diff(dim=0), dim=-1)\n"
        "    return (change / torch.linalg.vector_norm(h[:-1], dim=-1)).mean(dim=1)",
        True,
    ),
    (  # honest: in numpy, the norms written out
        "l7_ex3",
        "numpy by hand",
        "import numpy as np\n"
        "\n"
        "\n"
        "def relative_contributions(hidden):\n"
        "    h = np.stack([t.detach().numpy() for t in hidden])\n"
        "    change = np.sqrt(((h[1:] - h[:-1]) ** 2).sum(axis=-1))\n"
        "    return (change / np.sqrt((h[:-1] ** 2).sum(axis=-1))).mean(axis=(1, 2))",
        True,
    ),
    ("l7_ex3", "numpy", _edit("l7_ex3", _RETURN3, _RETURN3 + ".numpy()"), True),
    (
        "l7_ex3",
        "float32",
        _edit("l7_ex3", "torch.stack(hidden)", "torch.stack(hidden).float()"),
        True,
    ),
    (
        "l7_ex3",
        "divides by h_l",
        _edit("l7_ex3", "h[:-1].norm(dim=-1))", "h[1:].norm(dim=-1))"),
        False,
    ),
    (
        "l7_ex3",
        "ratio of means",
        _edit(
            "l7_ex3",
            _RETURN3,
            "return change.mean(dim=(1, 2)) / h[:-1].norm(dim=-1).mean(dim=(1, 2))",
        ),
        False,
    ),
]


@pytest.mark.parametrize(
    "exercise,what,answer,right",
    _HIDDEN_ANSWERS,
    ids=[f"{e}-{w}" for e, w, _, _ in _HIDDEN_ANSWERS],
)
def test_hidden_tests_grade_what_the_visible_check_says(
    exercise, what, answer, right, tmp_path, monkeypatch
):
    """The solution's records against an answer's: the forms the visible check accepts (float or
    tensor counts, numpy results, float32) earn the points, each usual mistake on a hidden case
    loses them, and a count taken from a model is refused as the exercise's rule says."""
    if exercise not in _REFERENCE:  # the solution's records, once per exercise
        _REFERENCE[exercise] = _hidden_records(
            exercise, _notebook_cells()[exercise], tmp_path, monkeypatch
        )
    reference = _REFERENCE[exercise]
    assert len(reference) >= 3 and all("value" in r[0] for r in reference.values())
    assert judge(exercise, reference, reference).correct
    verdict = judge(exercise, reference, _hidden_records(exercise, answer, tmp_path, monkeypatch))
    if right == "forbids":
        assert not verdict.correct and "which the exercise forbids" in verdict.message
    else:
        assert verdict.correct is right, verdict.message
    check, name = _VISIBLE[exercise]
    answered = _hidden_records.namespace[name]
    if right is True:  # the visible check agrees with the grade
        with contextlib.redirect_stdout(io.StringIO()):
            check(answered)
    else:
        with pytest.raises(ExerciseFailed):
            check(answered)


def test_hidden_forbidden_names_are_the_visible_checks():
    assert set(spec_for("l7_ex1").forbid) == set(checks._MODEL_CALLS)


def test_exercise_failed_renders_as_one_line():
    with pytest.raises(ExerciseFailed) as info:
        checks.check_parameter_count(None)
    lines = info.value._render_traceback_()
    assert len(lines) == 1 and "Exercise 1" in lines[0]


# ----------------------------------------------------------------------------------------------
# the explorer, driven without a browser
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def explorer():
    from helpers.widgets import depth_explorer

    e = depth_explorer()
    yield e
    e.close()


def _lines(e):
    ax_count, ax_stream = e.figure.axes
    return ax_count.lines, ax_stream.lines


def test_explorer_starts_with_defaults(explorer):
    assert explorer.values == {"depth": 6, "d_model": 64, "norm": "pre"}
    (independent, shared, marker), (stream, contribution) = _lines(explorer)
    assert len(stream.get_xdata()) == 7 and len(contribution.get_xdata()) == 6
    assert marker.get_ydata()[0] == independent.get_ydata()[5]
    assert "count(6)" in explorer.info.value and explorer.image.value[:4] == b"\x89PNG"
    assert plt.get_fignums() == []


def test_explorer_depth_changes_the_plots(explorer):
    from helpers.widgets import depth as depth_widget

    (_, _, marker), (stream, contribution) = _lines(explorer)
    before = marker.get_ydata()[0]
    misses = depth_widget._full_stack_statistics.cache_info().misses
    explorer.controls["depth"].value = 3
    assert len(stream.get_xdata()) == 4 and len(contribution.get_ydata()) == 3
    assert marker.get_ydata()[0] < before
    assert "count(3)" in explorer.info.value
    # changing the depth reuses the cached model of these settings: nothing is rebuilt
    assert depth_widget._full_stack_statistics.cache_info().misses == misses
    assert plt.get_fignums() == []


def test_explorer_d_model_changes_the_counts_and_stream(explorer):
    (independent, shared, _), (stream, _) = _lines(explorer)
    counts, flat, norms = (
        list(independent.get_ydata()),
        list(shared.get_ydata()),
        list(stream.get_ydata()),
    )
    explorer.controls["d_model"].value = 32
    assert list(independent.get_ydata()) != counts and list(shared.get_ydata()) != flat
    assert list(stream.get_ydata()) != norms
    assert np.ptp(shared.get_ydata()) == 0  # the shared stack stays flat
    assert plt.get_fignums() == []


def test_explorer_norm_changes_the_stream(explorer):
    (independent, _, _), (stream, contribution) = _lines(explorer)
    counts, pre, pre_c = (
        list(independent.get_ydata()),
        np.array(stream.get_ydata()),
        np.array(contribution.get_ydata()),
    )
    explorer.controls["norm"].value = "post"
    post = np.array(stream.get_ydata())
    assert not np.allclose(post, pre) and not np.allclose(contribution.get_ydata(), pre_c)
    np.testing.assert_allclose(post[1:], math.sqrt(64), rtol=1e-3)  # post-norm: ||h_l|| = sqrt(d)
    assert pre[-1] > 1.5 * pre[0]  # pre-norm: the stream grows (1.95 times over 6 blocks)
    # post-norm drops the final LayerNorm (2 * d_model) and nothing else
    assert np.allclose(np.array(counts) - np.array(independent.get_ydata()), 2 * 64)
    assert plt.get_fignums() == []


def test_explorer_counts_match_real_models(explorer):
    independent = explorer.figure.axes[0].lines[0].get_ydata()
    for L in (1, 5, 12):
        with torch.device("meta"):
            assert count_parameters(TransformerLM(256, 64, L, 4)) == independent[L - 1]


def test_explorer_leaves_the_global_random_state_alone():
    from helpers.widgets import depth as depth_widget

    depth_widget._full_stack_statistics.cache_clear()
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    e = depth_widget.depth_explorer(d_model=32)
    e.controls["norm"].value = "post"
    e.close()
    torch.testing.assert_close(torch.rand(3), want)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(depth=0), "depth"),
        (dict(depth=13), "depth"),
        (dict(d_model=50), "d_model"),
        (dict(norm="none"), "norm"),
    ],
)
def test_explorer_bad_arguments(kwargs, match):
    from helpers.widgets import depth_explorer

    with pytest.raises(ValueError, match=match):
        depth_explorer(**kwargs)


# ----------------------------------------------------------------------------------------------
# bad arguments found on a second read: each gives a clear error, not a traceback from torch
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x,error,match",
    [
        (torch.zeros(1, 3, 16, dtype=torch.float64), TypeError, "float64 but the block's weights"),
        (torch.zeros(1, 3, 16, dtype=torch.long), TypeError, "floating-point"),
    ],
)
def test_block_and_attention_reject_wrong_dtype(x, error, match):
    with pytest.raises(error, match=match):
        TransformerBlock(16, 2)(x)
    with pytest.raises(error, match=match):
        MultiHeadAttention(16, 2)(x)


def test_block_accepts_its_own_dtype():
    block = TransformerBlock(16, 2).double()
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    assert block(x).dtype == torch.float64


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((torch.tensor(1.0), torch.tensor(1.0)), ValueError, "at least 2 dimensions"),
        ((torch.ones(3), torch.ones(3)), ValueError, "at least 2 dimensions"),
        ((torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3)), TypeError, "floating-point"),
        ((torch.ones(2, 3), torch.ones(2, 3, dtype=torch.float64)), TypeError, "same dtype"),
        ((torch.ones(2, 2, 3), torch.ones(3, 2, 3)), ValueError, "leading"),
    ],
)
def test_attention_weights_bad_arguments(args, error, match):
    from helpers.attention import attention_weights

    with pytest.raises(error, match=match):
        attention_weights(*args)


@pytest.mark.parametrize(
    "v,error,match",
    [
        (torch.ones(3), ValueError, "at least 2 dimensions"),
        (torch.ones(2, 4, 3, dtype=torch.float64), TypeError, "dtype"),
        (torch.ones(3, 4, 3), ValueError, "leading"),
    ],
)
def test_scaled_dot_product_attention_bad_v(v, error, match):
    from helpers.attention import scaled_dot_product_attention

    q = k = torch.ones(2, 4, 3)
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, k, v)


def test_stream_statistics_rejects_integer_states():
    with pytest.raises(TypeError, match="floating-point"):
        stream_statistics([torch.ones(1, 2, 3, dtype=torch.long)] * 2)


def test_plots_reject_a_non_axes():
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        plots.plot_parameter_count([1, 2], [1, 2], ax="left")
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        plots.plot_residual_stream([1.0], [1.0, 2.0], ax=3)


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((3.0, 64, "pre"), ValueError, "whole number from 1 to 12"),
        (("3", 64, "pre"), ValueError, "whole number from 1 to 12"),
        ((3, [64], "pre"), TypeError, "d_model"),
        ((3, 64, "middle"), ValueError, "norm"),
    ],
)
def test_explorer_statistics_bad_arguments(args, error, match):
    from helpers.widgets.depth import depth_counts, stack_statistics

    with pytest.raises(error, match=match):
        stack_statistics(*args)
    if type(args[0]) is int:  # depth is right: the other argument is wrong
        with pytest.raises(error, match=match):
            depth_counts(*args[1:])
