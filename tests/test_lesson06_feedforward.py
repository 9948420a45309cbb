"""Lesson 6: the position-wise feed-forward block (claims C6.1-C6.5, checks, plots, explorer)."""

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F

from helpers import (
    FeedForward,
    MultiHeadAttention,
    attention_weights,
    count_parameters,
    gelu,
    gelu_tanh,
    relu,
    scaled_dot_product_attention,
    silu,
    swiglu_hidden,
)
from helpers.checks import ExerciseFailed
from helpers.checks import feedforward as checks
from helpers.feedforward import ffn_parameter_count, trace_shapes
from helpers.plots.feedforward import plot_activations, plot_shape_diagram
from helpers.widgets import feedforward_explorer
from helpers.widgets.feedforward import ffn_pieces

ROOT = Path(__file__).resolve().parent.parent


def _by_hand(ffn: FeedForward, x: torch.Tensor) -> torch.Tensor:
    w1, b1 = ffn.w1.weight.T, ffn.w1.bias  # [d_model, d_ff], [d_ff]
    w2, b2 = ffn.w2.weight.T, ffn.w2.bias  # [d_ff, d_model], [d_model]
    return torch.clamp(x @ w1 + b1, min=0) @ w2 + b2


# ---------------------------------------------------------------- C6.1 the formula


def test_C6_1_module_equals_formula_from_its_own_weights():
    ffn = FeedForward(16, 64, "relu")
    x = torch.randn(7, 16)
    torch.testing.assert_close(ffn(x), _by_hand(ffn, x))
    # and the hidden layer really is cut at zero: some units are inactive
    h = ffn.hidden(x)
    assert (h == 0).any() and (h > 0).any()


def test_C6_1_relu_gelu_silu_match_torch():
    x = torch.linspace(-6, 6, 2001, dtype=torch.float64)
    torch.testing.assert_close(relu(x), F.relu(x))
    torch.testing.assert_close(gelu(x), F.gelu(x))
    torch.testing.assert_close(gelu_tanh(x), F.gelu(x, approximate="tanh"))
    torch.testing.assert_close(silu(x), F.silu(x))


def test_C6_1_gelu_tanh_is_close_to_exact_but_not_equal():
    x = torch.linspace(-6, 6, 12001, dtype=torch.float64)
    gap = (gelu(x) - gelu_tanh(x)).abs().max().item()
    assert 1e-4 < gap < 1e-3  # about 4.7e-4, at |x| = 2.70


def test_C6_1_gelu_module_uses_exact_gelu():
    ffn = FeedForward(8, 32, "gelu")
    x = torch.randn(3, 8)
    want = F.gelu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
    torch.testing.assert_close(ffn(x), want)


# ---------------------------------------------------------------- C6.2 shapes


def test_C6_2_shape_table_from_real_tensors():
    ffn = FeedForward(512)
    assert ffn.d_ff == 2048
    rows = trace_shapes(ffn, torch.randn(10, 512))
    assert [r["shape_out"] for r in rows] == [(10, 2048), (10, 512)]
    assert rows[0]["shape_in"] == "[10, 512] x [512, 2048]"
    assert rows[1]["shape_in"] == "[10, 2048] x [2048, 512]"
    assert [tuple(r["tensor"].shape) for r in rows] == [(10, 2048), (10, 512)]
    # the last row's tensor is the module's output
    x = torch.randn(3, 512)
    torch.testing.assert_close(trace_shapes(ffn, x)[-1]["tensor"], ffn(x))


def test_C6_2_any_leading_axes():
    ffn = FeedForward(8, 20)
    assert ffn(torch.randn(2, 5, 8)).shape == (2, 5, 8)
    assert ffn.hidden(torch.randn(2, 5, 8)).shape == (2, 5, 20)


# ---------------------------------------------------------------- C6.3 ReLU / GELU / SwiGLU


def test_C6_3_swiglu_has_three_matrices_and_two_thirds_width():
    ffn = FeedForward(512, 2048, "swiglu")
    mats = [p for n, p in ffn.named_parameters() if n.endswith("weight")]
    assert len(mats) == 3
    assert ffn.d_hidden == swiglu_hidden(2048) == 1365 == round(2 * 2048 / 3)
    assert ffn.w1.weight.shape == ffn.w3.weight.shape == (1365, 512)
    assert ffn.w2.weight.shape == (512, 1365)
    relu_ffn = FeedForward(512, 2048, "relu")
    assert len([n for n, _ in relu_ffn.named_parameters() if n.endswith("weight")]) == 2


def test_C6_3_swiglu_parameter_count_matches_relu_exact_numbers():
    n_relu = count_parameters(FeedForward(512, 2048, "relu"))
    n_swiglu = count_parameters(FeedForward(512, 2048, "swiglu"))
    assert n_relu == 2_099_712
    assert n_swiglu == 2_099_882
    assert abs(n_swiglu - n_relu) / n_relu < 1e-4
    # weights alone: 2,097,152 vs 2,096,640
    assert count_parameters(FeedForward(512, 2048, "relu", bias=False)) == 2_097_152
    assert count_parameters(FeedForward(512, 2048, "swiglu", bias=False)) == 2_096_640


@pytest.mark.parametrize("d_model", [64, 256, 768, 1024])
def test_C6_3_swiglu_matches_relu_within_small_tolerance(d_model):
    n_relu = ffn_parameter_count(d_model, 4 * d_model, "relu")
    n_swiglu = ffn_parameter_count(d_model, 4 * d_model, "swiglu")
    # rounding 2/3 d_ff to a whole number and the extra bias b3 leave a small gap (0.45 % at 64)
    assert abs(n_swiglu - n_relu) / n_relu < 5e-3


def test_C6_3_swiglu_forward_is_gated():
    ffn = FeedForward(6, 12, "swiglu")
    x = torch.randn(4, 6)
    want = ffn.w2(F.silu(ffn.w1(x)) * ffn.w3(x))
    torch.testing.assert_close(ffn(x), want)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_model,d_ff", [(512, 2048), (8, None), (3, 7), (5, 1), (16, 3)])
def test_C6_3_formula_equals_count_parameters(activation, bias, d_model, d_ff):
    ffn = FeedForward(d_model, d_ff, activation, bias=bias)
    assert ffn_parameter_count(d_model, d_ff, activation, bias) == count_parameters(ffn)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_explorer_pieces_add_up_to_count_parameters(activation):
    pieces = ffn_pieces(24, 72, activation)
    assert pieces["total"] == count_parameters(FeedForward(24, 72, activation))
    ffn = FeedForward(24, 72, activation)
    assert pieces["W1"] == ffn.w1.weight.numel() and pieces["W2"] == ffn.w2.weight.numel()
    assert pieces["W3"] == (ffn.w3.weight.numel() if activation == "swiglu" else 0)


# ---------------------------------------------------------------- C6.4 position-wise


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_C6_4_position_by_position_equals_whole_sequence(activation):
    ffn = FeedForward(16, 48, activation)
    x = torch.randn(2, 9, 16)  # [B, n, d_model]
    whole = ffn(x)
    one_by_one = torch.stack([ffn(x[:, i]) for i in range(9)], dim=1)
    torch.testing.assert_close(whole, one_by_one)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_C6_4_commutes_with_permuting_positions(activation):
    ffn = FeedForward(16, 48, activation)
    x = torch.randn(2, 9, 16)
    perm = torch.randperm(9)
    torch.testing.assert_close(ffn(x[:, perm]), ffn(x)[:, perm])


def test_C6_4_changing_one_position_changes_only_that_output():
    ffn = FeedForward(16, 48)
    x = torch.randn(1, 6, 16)
    x2 = x.clone()
    x2[0, 3] += 1.0
    changed = (ffn(x2) - ffn(x)).abs().amax(dim=-1)[0]  # [n]
    assert changed[3] > 1e-3
    assert torch.all(changed[torch.arange(6) != 3] == 0)


# ---------------------------------------------------------------- C6.5 linear vs nonlinear


def _attention_weights_from(n=6, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5 for _ in range(3))
    return w_q, w_k, w_v, g


def test_C6_5_attention_is_linear_in_the_values_once_weights_are_computed_from_the_input():
    n, d = 6, 16
    w_q, w_k, _, g = _attention_weights_from(n, d)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    q, k = x @ w_q, x @ w_k  # the weights come from the input
    v1, v2 = torch.randn(2, n, d, generator=g, dtype=torch.float64)
    a, b = 2.5, -1.3
    mixed, weights = scaled_dot_product_attention(q, k, a * v1 + b * v2)
    out1, out2 = (
        scaled_dot_product_attention(q, k, v1)[0],
        scaled_dot_product_attention(q, k, v2)[0],
    )
    torch.testing.assert_close(mixed, a * out1 + b * out2, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, attention_weights(q, k))
    # and attention mixes positions: changing one value row changes every output row
    v3 = v1.clone()
    v3[2] += 1.0
    assert ((scaled_dot_product_attention(q, k, v3)[0] - out1).abs().amax(dim=-1) > 1e-6).all()


def test_C6_5_attention_scores_are_a_quadratic_form_in_the_input():
    n, d = 6, 16
    w_q, w_k, _, g = _attention_weights_from(n, d, seed=1)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)

    def scores(z):
        return (z @ w_q) @ (z @ w_k).T / d**0.5

    torch.testing.assert_close(scores(2 * x), 4 * scores(x))
    torch.testing.assert_close(scores(-x), scores(x))  # even: a linear map would flip the sign


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_C6_5_attention_is_not_linear_in_its_input(seed):
    n, d = 6, 64
    w_q, w_k, w_v, g = _attention_weights_from(n, d, seed=seed)

    def attn(z):
        return scaled_dot_product_attention(z @ w_q, z @ w_k, z @ w_v)[0]

    x1, x2 = torch.randn(2, n, d, generator=g, dtype=torch.float64)
    a, b = 2.5, -1.3
    superposed = a * attn(x1) + b * attn(x2)
    gap = (attn(a * x1 + b * x2) - superposed).norm() / superposed.norm()
    assert gap > 0.1  # a clear margin: rounding is ~1e-15
    # the control: with the weights frozen (computed once), the same map is linear
    weights = scaled_dot_product_attention(x1 @ w_q, x1 @ w_k, x1 @ w_v)[1]

    def frozen(z):
        return weights @ (z @ w_v)

    torch.testing.assert_close(frozen(a * x1 + b * x2), a * frozen(x1) + b * frozen(x2))


def test_C6_5_multi_head_attention_is_not_linear_in_its_input():
    torch.manual_seed(7)
    mha = MultiHeadAttention(64, n_heads=4, bias=False).double()  # no bias: no affine offset
    x1, x2 = torch.randn(2, 1, 6, 64, dtype=torch.float64)
    a, b = 2.5, -1.3
    with torch.no_grad():
        superposed = a * mha(x1) + b * mha(x2)
        gap = (mha(a * x1 + b * x2) - superposed).norm() / superposed.norm()
    assert gap > 0.1


def test_C6_5_feedforward_is_not_linear():
    ffn = FeedForward(16, 64)
    x = torch.randn(16)
    # an affine combination (weights 1/2, 1/2): any linear or affine map would satisfy it
    lhs = ffn(0.5 * x + 0.5 * (-x))
    rhs = 0.5 * ffn(x) + 0.5 * ffn(-x)
    gap = (lhs - rhs).norm() / rhs.norm()
    assert gap > 0.1
    # an affine map with the same weights but no ReLU would satisfy it exactly
    affine = lambda z: (z @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias  # noqa: E731
    torch.testing.assert_close(affine(0.5 * x + 0.5 * (-x)), 0.5 * affine(x) + 0.5 * affine(-x))


@pytest.mark.parametrize("bad", ["tanh", "ReLU", None, 3])
def test_unknown_activation_raises(bad):
    with pytest.raises(ValueError, match="activation must be one of 'relu', 'gelu', 'swiglu'"):
        FeedForward(8, activation=bad)
    with pytest.raises(ValueError, match="activation"):
        ffn_parameter_count(8, 32, bad)


@pytest.mark.parametrize("bad", [0, -4])
def test_d_ff_not_positive_raises(bad):
    with pytest.raises(ValueError, match="d_ff must be a positive whole number"):
        FeedForward(8, bad)
    with pytest.raises(ValueError, match="d_ff"):
        ffn_parameter_count(8, bad)
    with pytest.raises(ValueError, match="d_ff"):
        swiglu_hidden(bad)


def test_d_ff_float_and_d_model_bad_raise():
    with pytest.raises(TypeError, match="d_ff must be a whole number"):
        FeedForward(8, 32.0)
    with pytest.raises(ValueError, match="d_model"):
        FeedForward(0)
    with pytest.raises(TypeError, match="d_model"):
        ffn_parameter_count("512")


def test_wrong_last_dimension_of_x_raises():
    ffn = FeedForward(8, 32)
    with pytest.raises(ValueError, match=r"x has last dimension 7 .*d_model=8"):
        ffn(torch.randn(3, 7))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        ffn([[1.0] * 8])
    with pytest.raises(ValueError, match="last dimension"):
        trace_shapes(ffn, torch.randn(3, 9))
    with pytest.raises(TypeError, match="ffn must be a helpers.FeedForward"):
        trace_shapes(torch.nn.Linear(8, 8), torch.randn(3, 8))


@pytest.mark.parametrize(
    "x,error,match",
    [
        (torch.zeros(2, 8, dtype=torch.long), TypeError, "floating-point.*torch.int64"),
        (torch.zeros(2, 8, dtype=torch.float64), TypeError, "dtype torch.float64 but the block"),
        (torch.tensor(1.0), ValueError, "0-dimensional"),
    ],
)
def test_wrong_dtype_or_scalar_x_raises_a_clear_error(x, error, match):
    ffn = FeedForward(8, 32)
    with pytest.raises(error, match=match):
        ffn(x)
    with pytest.raises(error, match=match):
        trace_shapes(ffn, x)
    assert ffn.double()(torch.zeros(2, 8, dtype=torch.float64)).dtype == torch.float64


@pytest.mark.parametrize("fn", [relu, gelu, gelu_tanh, silu])
def test_activations_reject_non_tensors(fn):
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        fn([1.0, 2.0])


def test_plot_helpers_reject_bad_arguments():
    with pytest.raises(ValueError, match="name must be one of"):
        plot_activations(names=("relu", "sigmoid"), ax=_ax())
    with pytest.raises(ValueError, match="x_range"):
        plot_activations(x_range=(2, -2), ax=_ax())
    with pytest.raises(ValueError, match="at least two"):
        plot_shape_diagram([(3, 4)], ax=_ax())
    with pytest.raises(ValueError, match="names"):
        plot_shape_diagram([(3, 4), (3, 8)], names=["x"], ax=_ax())
    with pytest.raises(TypeError, match="x_range must be a pair"):
        plot_activations(x_range=(1, 2, 3), ax=_ax())
    with pytest.raises(TypeError, match="n_points must be a whole number"):
        plot_activations(n_points=10.5, ax=_ax())
    with pytest.raises(TypeError, match="shapes must be a list of tensor shapes"):
        plot_shape_diagram([3, 4], ax=_ax())
    assert set(plot_activations(names="gelu", ax=_ax())) == {"gelu"}  # one name, not its letters


def test_explorer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="activation"):
        feedforward_explorer(activation="tanh")
    with pytest.raises(ValueError, match="d_model"):
        feedforward_explorer(d_model=4)
    with pytest.raises(ValueError, match="multiple"):
        feedforward_explorer(multiple=0)


# ---------------------------------------------------------------- plots


def _ax():
    from matplotlib.figure import Figure

    return Figure().subplots()


def test_plot_activations_draws_the_functions():
    lines = plot_activations(ax=_ax())
    assert set(lines) == {"relu", "gelu", "gelu_tanh", "silu"}
    x = torch.from_numpy(lines["gelu"].get_xdata())
    torch.testing.assert_close(torch.from_numpy(lines["gelu"].get_ydata()), F.gelu(x))
    assert plt.get_fignums() == []


def test_shape_diagram_is_drawn_from_the_shapes_given():
    ffn = FeedForward(512)
    rows = trace_shapes(ffn, torch.randn(4, 512))
    art = plot_shape_diagram([(4, 512), rows[0]["shape_out"], rows[1]["shape_out"]], ax=_ax())
    assert [r.get_height() for r in art["bars"]] == [512, 2048, 512]
    assert "[4, 2048]" in art["labels"][1].get_text()
    assert "expand" in art["arrows"][0].get_text() and "contract" in art["arrows"][1].get_text()


def test_plot_without_ax_makes_a_pyplot_figure():
    plot_activations()
    assert len(plt.get_fignums()) == 1  # closed by the autouse fixture


# ---------------------------------------------------------------- explorer


def _state(e):
    ax_shape, ax_params, ax_curve = e.figure.axes
    return (
        [p.get_height() for p in ax_shape.patches],
        [p.get_height() for p in ax_params.patches],
        ax_curve.lines[-1].get_ydata().tolist(),
        e.info.value,
    )


def test_explorer_updates_in_place_for_every_control():
    e = feedforward_explorer()
    try:
        assert plt.get_fignums() == []
        heights, params, curve, info = _state(e)
        assert heights == [512, 2048, 512]
        assert sum(params) == 2_099_712 and "2,099,712" in info
        n_artists = len(e.figure.axes[0].patches) + len(e.figure.axes[2].lines)
        png = e.image.value

        e.controls["d_model"].value = 256
        h2, p2, c2, i2 = _state(e)
        assert h2 == [256, 1024, 256] and p2 != params and i2 != info and c2 == curve
        assert e.image.value != png

        e.controls["multiple"].value = 2
        h3, p3, _, _ = _state(e)
        assert h3 == [256, 512, 256] and p3 != p2

        e.controls["activation"].value = "gelu"
        _, p4, c4, _ = _state(e)
        assert c4 != curve and p4 == p3  # same counts, new curve
        torch.testing.assert_close(
            torch.tensor(c4, dtype=torch.float64),
            F.gelu(torch.linspace(-4, 4, 161, dtype=torch.float64)),
        )

        e.controls["activation"].value = "swiglu"
        h5, p5, c5, i5 = _state(e)
        assert h5 == [256, swiglu_hidden(512), 256] and p5[1] > 0 and c5 != c4
        assert sum(p5) == count_parameters(FeedForward(256, 512, "swiglu"))
        assert "round(2/3" in i5

        # nothing was added: the same artists were updated
        assert len(e.figure.axes[0].patches) + len(e.figure.axes[2].lines) == n_artists
        assert e.n_updates == 5
        assert plt.get_fignums() == []
    finally:
        e.close()
    e.close()  # closing twice is harmless


# ---------------------------------------------------------------- exercise checks


def _raises(exc):
    def fn(*args):
        raise exc

    return fn


def _collapse(W1, b1, W2, b2):
    return W1 @ W2, b1 @ W2 + b2


def _collapse_by_probing(W1, b1, W2, b2):
    """Another honest way: run the map without the ReLU on 0 (gives c) and on the identity."""
    d = W1.shape[0]

    def affine(z):
        return (z @ W1 + b1) @ W2 + b2

    c = affine(torch.zeros(1, d, dtype=W1.dtype))[0]
    return affine(torch.eye(d, dtype=W1.dtype)) - c, c


def _collapse_einsum(W1, b1, W2, b2):
    M = torch.einsum("ij,jk->ik", W1, W2)
    return M.numpy(), torch.matmul(b1, W2) + b2  # a numpy M counts as a tensor too


def test_check_collapse_right_answers(capsys):
    for answer in (_collapse, _collapse_by_probing, _collapse_einsum):
        checks.check_collapse(answer)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize(
    "answer,expected",
    [
        (None, "is None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (lambda *a: None, "returned None"),
        (lambda W1, b1, W2, b2: W1 @ W2, "two things"),
        (lambda W1, b1, W2, b2: (W1 @ W2, b1 @ W2 + b2, 0), "two things"),
        (lambda W1, b1, W2, b2: (W2 @ W1, b1 @ W2 + b2), r"\[d_ff, d_ff\]: that is W2 @ W1"),
        (lambda W1, b1, W2, b2: (W1 @ W2, b2), "c holds b2 alone"),
        (lambda W1, b1, W2, b2: (W1 @ W2, b1), r"\[d_ff\]: b1 is added before W2"),
        (lambda W1, b1, W2, b2: (W1 @ W2, b1 + b2), "a vector that enters before W2"),
        (lambda W1, b1, W2, b2: (W1 @ W2, (b1 @ W2 + b2)[None]), "one vector added to every row"),
        (lambda W1, b1, W2, b2: (W1 @ W2, b1 @ W2 - b2), "M is right; c is not"),
        (lambda W1, b1, W2, b2: (W1 @ W2 * 1.01, b1 @ W2 + b2), "entries"),
        (lambda W1, b1, W2, b2: (torch.relu(W1) @ W2, b1 @ W2 + b2), "entries"),
        (lambda W1, b1, W2, b2: (W1 @ W2 * float("nan"), b1 @ W2 + b2), "NaN"),
        (lambda W1, b1, W2, b2: ((W1 @ W2).long(), b1 @ W2 + b2), "floating-point"),
    ],
)
def test_check_collapse_wrong_answers(answer, expected):
    with pytest.raises(ExerciseFailed, match=expected) as info:
        checks.check_collapse(answer)
    assert "\n" not in str(info.value)


def test_check_collapse_names_the_wrong_order_even_when_the_weights_are_square():
    """With d_ff == d_model, W2 @ W1 has the right shape: the check names the order itself."""

    def wrong_order_when_square(W1, b1, W2, b2):
        if W1.shape[0] == W1.shape[1]:
            return W2 @ W1, b1 @ W2 + b2
        return _collapse(W1, b1, W2, b2)

    with pytest.raises(ExerciseFailed, match="wrong order"):
        checks.check_collapse(wrong_order_when_square)


def _coarse_grid(points):
    def answer(f, g, lo, hi):
        x = torch.linspace(lo, hi, points, dtype=torch.float64)
        return float(x[(f(x) - g(x)).abs().argmax()])

    return answer


def test_check_most_different_input_explains_a_coarse_grid():
    """Issue 14 point 11: a 101-point grid (answer +-0.72) is told what is wrong, with numbers;
    issue 15: never where the peak is, nor the peak's height."""
    assert abs(abs(_coarse_grid(101)(F.relu, F.gelu, -4.0, 4.0)) - 0.72) < 1e-12
    with pytest.raises(ExerciseFailed) as info:
        checks.check_most_different_input(_coarse_grid(101))
    message = str(info.value)
    for words in (
        "f = relu, g = gelu on [-4, 4]",
        "-0.72 is near a peak but not within 0.005",
        "101-point grid",
        "(step 0.08)",
        "0.01 apart or closer",
    ):
        assert words in message, (words, message)
    for answer in ("0.752", "0.7518", "0.16997", "0.1700", "0.0318"):
        assert answer not in message, (answer, message)


@pytest.mark.parametrize("points,passes", [(801, True), (8001, True), (401, False), (201, False)])
def test_check_most_different_input_tolerance_matches_the_question(points, passes, capsys):
    """Within 0.005 of a peak passes: a step of 0.01 (801 points on [-4, 4]) is fine enough,
    0.02 is not."""
    if passes:
        checks.check_most_different_input(_coarse_grid(points))
        assert capsys.readouterr().out.startswith("✓")
    else:
        with pytest.raises(ExerciseFailed, match=f"{points}-point"):
            checks.check_most_different_input(_coarse_grid(points))


# ---------------------------------------------------------------- exercise 4: mixing (transfer)


def _nudge_every_position(f, n=6, d_model=8):
    x = torch.randn(n, d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    base = f(x)
    for i in range(n):
        nudged = x.clone()
        nudged[i] += 1.0
        moved = (f(nudged) - base).abs().amax(dim=-1)
        if (moved[torch.arange(n) != i] > 1e-9).any():
            return True
    return False


def _permutation_test(f):
    x = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    return not torch.allclose(f(x[perm]), f(x)[perm])


def _nudge_last_only(f):
    x = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    nudged = x.clone()
    nudged[-1] += 1.0
    return bool(((f(nudged) - f(x)).abs().amax(dim=-1)[:-1] > 1e-9).any())


def test_check_mixes_positions_right_answers(capsys):
    checks.check_mixes_positions(_nudge_every_position)
    out = capsys.readouterr().out
    assert out.count("✓") == 1 and "graded by hidden tests" in out


def test_check_mixes_positions_catches_a_one_position_nudge():
    """The hidden tests refuse a test that nudges one position only (a running sum mixes, but
    nudging the last position moves no other row): the visible check refuses it too."""
    with pytest.raises(ExerciseFailed, match="changes one position only"):
        checks.check_mixes_positions(_nudge_last_only)


def test_check_mixes_positions_catches_a_permutation_test():
    """Self-attention commutes with permuting positions (C4.9) and mixes them (C6.5)."""
    with pytest.raises(ExerciseFailed, match="says self-attention does not mix positions"):
        checks.check_mixes_positions(_permutation_test)


def test_check_mixes_positions_leaves_the_random_state_alone():
    state = torch.random.get_rng_state()
    checks.check_mixes_positions(_nudge_every_position)
    assert torch.equal(state, torch.random.get_rng_state())


@pytest.mark.parametrize(
    "answer,expected",
    [
        (None, "is None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (lambda f: True, "says the feed-forward block itself mixes positions.*C6.4"),
        (lambda f: False, "says self-attention does not mix positions.*C6.5"),
        (lambda f: not _nudge_every_position(f), "says the feed-forward block itself mixes"),
        (lambda f: None, "is None: did you forget to `return` True or False"),
        (lambda f: 1, r"should return True or False \(a bool\), got 1 \(int\)"),
        (lambda f: "True", "got 'True' \\(str\\)"),
        (lambda f: torch.zeros(3), "got a tensor of shape \\[3\\]"),
        (lambda f: torch.tensor(_nudge_every_position(f)), r"wrap it in bool\(\.\.\.\)"),
        (
            lambda f: f(torch.randn(8)),
            r"raised ValueError: each function takes x of shape \[n, 8\]",
        ),
    ],
)
def test_check_mixes_positions_wrong_answers(answer, expected):
    with pytest.raises(ExerciseFailed, match=expected) as info:
        checks.check_mixes_positions(answer)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- hidden tests (issue 15)


def _notebook_cell(grade_id):
    nb = json.loads((ROOT / "notebooks" / "06_feed_forward.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return "".join(cell["source"])
    raise AssertionError(f"no cell {grade_id}")


def _hidden_records(grade_id, namespace, tmp_path, monkeypatch):
    """Run the hidden block of a check cell with ``namespace`` and return what it recorded."""
    source = _notebook_cell(f"{grade_id}_check")
    hidden = source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
    log = tmp_path / f"{grade_id}-{len(list(tmp_path.iterdir()))}.jsonl"  # one log per run
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    import helpers.grading

    monkeypatch.setattr(helpers.grading, "_cases", {})
    exec(compile(hidden, grade_id, "exec"), {"torch": torch, **namespace})
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _solution(grade_id):
    namespace = {"torch": torch, "relu": relu, "gelu": gelu}
    exec(_notebook_cell(grade_id), namespace)
    return namespace


def _jacobian_mixes(f, n=5):
    """The truth from an independent method: any nonzero off-diagonal block of the Jacobian."""
    x = torch.randn(n, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    jac = torch.autograd.functional.jacobian(f, x, vectorize=True)  # [n, 8, n, 8]
    across = jac.abs().amax(dim=(1, 3))  # [n, n]: output row i w.r.t. input row j
    return bool((across[~torch.eye(n, dtype=torch.bool)] > 1e-9).any())


def _nudge_first_only(f):
    x = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    nudged = x.clone()
    nudged[0] += 1.0
    return bool(((f(nudged) - f(x)).abs().amax(dim=-1)[1:] > 1e-9).any())


def _position_dependent(f):  # "does it treat every position alike": not the question
    x = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    return not torch.allclose(f(x.roll(1, 0)), f(x).roll(1, 0))


def _axis_confused(f):  # nudges one feature of every row: a change along the vector, not a row
    x = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    nudged = x.clone()
    nudged[:, 0] += 1.0
    return bool(((f(nudged) - f(x)).abs() > 1e-9).all())


@pytest.mark.slow  # several seconds on a shared machine
def test_exercise3_hidden_suspects_solution_agrees_with_the_jacobian(tmp_path, monkeypatch):
    """The solution's records (what graded answers are compared with) are the Jacobian's truth,
    and each wrong method of the lesson's tests misjudges some hidden case."""
    solution = _solution("l6_ex3")["mixes_positions"]
    truth = _hidden_records("l6_ex3", {"mixes_positions": _jacobian_mixes}, tmp_path, monkeypatch)
    got = _hidden_records("l6_ex3", {"mixes_positions": solution}, tmp_path, monkeypatch)
    assert len(truth) >= 8 and all("value" in r for r in truth), truth  # one case per suspect
    assert [r["value"] for r in got] == [r["value"] for r in truth]
    flat = [r["value"] for r in truth]
    assert True in flat and False in flat
    for method in (_permutation_test, _nudge_last_only, _nudge_first_only, _position_dependent):
        wrong = _hidden_records("l6_ex3", {"mixes_positions": method}, tmp_path, monkeypatch)
        assert [r.get("value") for r in wrong] != [r["value"] for r in truth], method.__name__
    for method in (lambda f: True, lambda f: False, _axis_confused):
        wrong = _hidden_records("l6_ex3", {"mixes_positions": method}, tmp_path, monkeypatch)
        assert [r.get("value") for r in wrong] != [r["value"] for r in truth]


def test_hidden_cases_record_plain_data_and_differ_from_the_visible_ones(tmp_path, monkeypatch):
    ex1 = _hidden_records("l6_ex1", _solution("l6_ex1"), tmp_path, monkeypatch)
    # the pair by name (M, c), so that a grade's comment says which part differs
    shapes = [[r["value"]["M"]["tensor"]["shape"], r["value"]["c"]["tensor"]["shape"]] for r in ex1]
    assert shapes == [[[3, 3], [3]], [[7, 7], [7]], [[5, 5], [5]]]
    assert [r["value"]["M"]["tensor"]["dtype"] for r in ex1] == ["torch.float64"] * 2 + [
        "torch.float32"
    ]
    ex2 = _hidden_records("l6_ex2", _solution("l6_ex2"), tmp_path, monkeypatch)
    assert len(ex2) == 3 and all(0 <= r["value"] < 1e-4 for r in ex2), ex2  # at a peak


def test_no_answer_ships_in_the_checks_module():
    """Issue 15: no answer constant, reference function or suspect table in helpers.checks."""
    import inspect

    source = inspect.getsource(checks)
    for leaked in ("0.7517", "0.752", "0.1699", "2,099,712", "2099712", "def suspects", "_ARGMAX"):
        assert leaked not in source, leaked
    assert not [name for name in dir(checks) if name.startswith("_reference")]


def test_check_collapse_never_shows_the_expected_values():
    with pytest.raises(ExerciseFailed, match=r"in \d+ of \d+ entries") as info:
        checks.check_collapse(lambda W1, b1, W2, b2: (W1 @ W2 * 1.01, b1 @ W2 + b2 + 0.1))
    assert "expected" not in str(info.value) and "got" not in str(info.value)


def _grid_answer(f, g, lo, hi):
    x = torch.linspace(lo, hi, 8001, dtype=torch.float64)
    return float(x[(f(x) - g(x)).abs().argmax()])


def _step_by_step(f, g, lo, hi):
    """Another honest way: a Python loop over points 0.002 apart, the best kept."""
    best, x = None, lo
    while x <= hi:
        t = torch.tensor([x], dtype=torch.float64)
        gap = float((f(t) - g(t)).abs()[0])
        best = (gap, x) if best is None or gap > best[0] else best
        x += 0.002
    return best[1]


def test_check_most_different_input_right_answers(capsys):
    checks.check_most_different_input(_grid_answer)
    checks.check_most_different_input(_step_by_step)
    checks.check_most_different_input(lambda *a: torch.tensor(_grid_answer(*a)))
    out = capsys.readouterr().out
    assert out.count("✓") == 3


def test_check_most_different_input_pass_message_does_not_say_how_many_answers(capsys):
    """The exercise asks the student to predict whether the answer is unique: the ✓ confirms x,
    it does not answer that question (nor name the other sign)."""
    checks.check_most_different_input(_grid_answer)
    out = capsys.readouterr().out
    assert "✓" in out
    for giveaway in ("either", "even", "too", "both", "-0.75"):
        assert giveaway not in out, giveaway


def _signed_the_wrong_way(f, g, lo, hi):
    x = torch.linspace(lo, hi, 8001, dtype=torch.float64)
    return float(x[(g(x) - f(x)).argmax()])  # g - f, not |f - g|


@pytest.mark.parametrize(
    "answer,expected",
    [
        (None, "is None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (_raises(IndexError("index 9000 is out of bounds")), "raised IndexError"),
        (lambda *a: None, "is None"),
        (lambda *a: float("nan"), "not a finite number"),
        (lambda *a: torch.tensor([0.75, -0.75]), "should be a number"),
        (lambda *a: "0.75", "should be a number"),
        (lambda *a: 4751, "index of the largest"),  # argmax index instead of x
        (lambda *a: 0.16997, "size of the largest difference"),
        (_signed_the_wrong_way, "elsewhere in"),
        (lambda *a: 0.0, "elsewhere in"),
        (lambda *a: 0.5, "elsewhere in"),
        (lambda *a: 0.75, "outside the range"),  # ReLU and GELU's peak, hard-coded
        (lambda f, g, lo, hi: abs(_grid_answer(f, g, lo, hi)), "outside the range"),
        (lambda *a: 0.7518 * 1.01, "so flat near its peak"),  # 1 % off: flat gap, wrong place
        (lambda *a: -0.76, "best point of the 201-point"),
        (lambda *a: 12.5, "outside the range"),
    ],
)
def test_check_most_different_input_wrong_answers(answer, expected):
    with pytest.raises(ExerciseFailed, match=expected):
        checks.check_most_different_input(answer)


def test_checks_never_leak_a_traceback_from_inside():
    # a student function returning a wrong type must give a verdict, not a TypeError
    for check, bad in [
        (checks.check_collapse, lambda *a: [1, 2]),
        (checks.check_collapse, lambda *a: {"M": 1, "c": 2}),
        (checks.check_most_different_input, lambda *a: object()),
        (checks.check_mixes_positions, lambda f: object()),
        (checks.check_mixes_positions, lambda f: f(object())),
    ]:
        with pytest.raises(ExerciseFailed):
            check(bad)


def test_exact_maximiser_of_relu_gelu_gap():
    # d/dx [x Phi(-x)] = Phi(-x) - x phi(x) = 0 at x = 0.75179...
    x = 0.7517916
    phi = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    Phi_minus = 0.5 * math.erfc(x / math.sqrt(2))
    assert abs(Phi_minus - x * phi) < 1e-6


def _judged(grade_id, namespace, tmp_path, monkeypatch):
    """The grader's verdict (tools/grading) on ``namespace``'s answer against the solution's."""

    from tools.grading.verdicts import judge

    def by_case(entries):
        return {e["case"]: [e] for e in entries}

    reference = _hidden_records(grade_id, _solution(grade_id), tmp_path, monkeypatch)
    student = _hidden_records(grade_id, namespace, tmp_path, monkeypatch)
    return judge(grade_id, by_case(reference), by_case(student))


@pytest.mark.slow  # several seconds on a shared machine
def _most_different_by_golden_sections(f, g, lo, hi):
    """Another honest way: a coarse scan, then a golden-section search around its best point."""
    points = torch.linspace(lo, hi, 401, dtype=torch.float64)
    start = int((f(points) - g(points)).abs().argmax())
    a, b = float(points[max(start - 1, 0)]), float(points[min(start + 1, 400)])

    def gap(x):
        t = torch.tensor([x], dtype=torch.float64)
        return float((f(t) - g(t)).abs()[0])

    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        a, b = (a, d) if gap(c) > gap(d) else (c, b)
    return (a + b) / 2


def _mixes_by_columns_of_the_jacobian(f, n=4):
    """Another honest way: autograd, one output row at a time, its gradient w.r.t. the others."""
    x = torch.randn(n, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    x.requires_grad_(True)
    out = f(x)
    for i in range(n):
        for k in range(8):
            (g,) = torch.autograd.grad(out[i, k], x, retain_graph=True, allow_unused=True)
            if g is not None and (g[torch.arange(n) != i].abs() > 1e-9).any():
                return True
    return False


@pytest.mark.slow  # several seconds on a shared machine
def test_grader_verdicts_on_lesson6_answers(tmp_path, monkeypatch):
    """Honest answers written differently score full marks through the grader; near misses and
    the wrong methods score 0."""

    def judged(grade_id, name, answer):
        return _judged(grade_id, {name: answer}, tmp_path, monkeypatch)

    for honest in (_collapse, _collapse_by_probing, _collapse_einsum):
        assert judged("l6_ex1", "collapse", honest).correct, honest.__name__
    for wrong in (
        lambda W1, b1, W2, b2: (W1 @ W2, b2),
        lambda W1, b1, W2, b2: (W1 @ W2 * 1.001, b1 @ W2 + b2),
        lambda W1, b1, W2, b2: ((W1 @ W2).T, b1 @ W2 + b2),
    ):
        assert not judged("l6_ex1", "collapse", wrong).correct
    for honest in (_grid_answer, _most_different_by_golden_sections, _step_by_step):
        assert judged("l6_ex2", "most_different_input", honest).correct, honest.__name__
    for wrong in (lambda *a: 0.7518, lambda *a: 0.72, _signed_the_wrong_way):
        assert not judged("l6_ex2", "most_different_input", wrong).correct
    solution = _solution("l6_ex3")["mixes_positions"]
    for honest in (solution, _jacobian_mixes, _mixes_by_columns_of_the_jacobian):
        assert judged("l6_ex3", "mixes_positions", honest).correct
    for method in (_permutation_test, _nudge_last_only, _nudge_first_only, _position_dependent):
        verdict = judged("l6_ex3", "mixes_positions", method)
        assert not verdict.correct and "hidden case" in verdict.message, method.__name__


def test_lesson6_exercises_forbid_nothing():

    from tools.grading.spec import spec_for

    for exercise in ("l6_ex1", "l6_ex2", "l6_ex3"):
        assert spec_for(exercise).forbid == () and spec_for(exercise).forbid_matching == ()
    assert (spec_for("l6_ex2").rtol, spec_for("l6_ex2").atol) == (0.0, 0.005)
