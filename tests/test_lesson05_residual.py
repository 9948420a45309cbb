"""Lesson 5: residual connections and layer norm (claims C5.1-C5.6, checks, plots, explorer)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from torch import nn

from helpers import FeedForward, LayerNorm, Residual, TransformerLM, gradient_norms, make_stack
from helpers.checks import ExerciseFailed
from helpers.checks import residual as checks
from helpers.diagnostics import DeepStack, activation_scales, init_profile, silence_sublayers
from helpers.plots.residual import MYSTERY_CURVES, plot_mystery_curves, plot_per_layer
from helpers.widgets import norm_explorer


@pytest.fixture
def one_thread():
    """Small models run fastest, and reproducibly, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _ln_formula(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta


# ---------------------------------------------------------------- C5.1 the two formulas


def test_C5_1_layernorm_matches_torch_and_formula():
    x = 3 + 2 * torch.randn(4, 5, 16)
    ln, ref = LayerNorm(16), nn.LayerNorm(16)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(16))
        ln.bias.copy_(torch.randn(16))
        ref.weight.copy_(ln.weight)
        ref.bias.copy_(ln.bias)
    torch.testing.assert_close(ln(x), ref(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ln(x), _ln_formula(x, ln.weight, ln.bias))


def test_C5_1_ba_et_al_example():
    out = LayerNorm(4)(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    want = torch.tensor([[-1.341641, -0.447214, 0.447214, 1.341641]])
    torch.testing.assert_close(out, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_C5_1_residual_is_exactly_the_formula(norm):
    sub = FeedForward(16)
    res = Residual(sub, 16, norm=norm)
    with torch.no_grad():
        res.norm.weight.copy_(torch.randn(16)) if norm != "none" else None
    x = torch.randn(2, 7, 16)
    formulas = {
        "pre": lambda: x + sub(res.norm(x)),
        "post": lambda: res.norm(x + sub(x)),
        "none": lambda: x + sub(x),
    }
    assert torch.equal(res(x), formulas[norm]())


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_C5_1_residual_matches_torch_layernorm_formula(norm):
    sub = FeedForward(16)
    res = Residual(sub, 16, norm=norm)
    torch_ln = nn.LayerNorm(16)
    x = torch.randn(2, 7, 16)
    want = x + sub(torch_ln(x)) if norm == "pre" else torch_ln(x + sub(x))
    torch.testing.assert_close(res(x), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_C5_1_block_matches_torch_encoder_layer(norm):
    """The course's block computes what nn.TransformerEncoderLayer(norm_first=...) computes."""
    from helpers import TransformerBlock

    d, h = 16, 4
    ours = TransformerBlock(d, h, d_ff=32, norm=norm)
    ref = nn.TransformerEncoderLayer(
        d, h, 32, dropout=0.0, batch_first=True, norm_first=(norm == "pre")
    ).eval()
    mha, ffn = ours.attention, ours.feedforward
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(
            torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])
        )
        ref.self_attn.in_proj_bias.copy_(
            torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias])
        )
        ref.self_attn.out_proj.weight.copy_(mha.out_proj.weight)
        ref.self_attn.out_proj.bias.copy_(mha.out_proj.bias)
        ref.linear1.weight.copy_(ffn.w1.weight)
        ref.linear1.bias.copy_(ffn.w1.bias)
        ref.linear2.weight.copy_(ffn.w2.weight)
        ref.linear2.bias.copy_(ffn.w2.bias)
    x = torch.randn(2, 5, d)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- bad arguments


def test_residual_rejects_unknown_placement():
    with pytest.raises(
        ValueError, match=r"norm must be one of 'pre', 'post', 'none'; got 'middle'"
    ):
        Residual(FeedForward(8), 8, norm="middle")


def test_residual_rejects_sublayer_d_model_mismatch():
    with pytest.raises(ValueError, match=r"d_model=16 does not match the sublayer's d_model=8"):
        Residual(FeedForward(8), 16)


def test_residual_rejects_x_d_model_mismatch():
    with pytest.raises(ValueError, match=r"x has last dimension 8 .* d_model=16"):
        Residual(FeedForward(16), 16)(torch.randn(2, 3, 8))


def test_residual_rejects_sublayer_output_of_another_shape():
    with pytest.raises(ValueError, match=r"sublayer must return a tensor of the same shape"):
        Residual(nn.Linear(8, 4), 8)(torch.randn(2, 3, 8))


def test_residual_rejects_non_module_and_layernorm_bad_args():
    with pytest.raises(TypeError, match="sublayer must be a torch.nn.Module"):
        Residual(lambda x: x, 8)
    with pytest.raises(ValueError, match="d_model must be a positive whole number"):
        LayerNorm(0)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        LayerNorm(4)([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="eps must be a finite number > 0"):
        LayerNorm(4, eps=0)


def test_diagnostics_bad_args():
    with pytest.raises(ValueError, match="norm='pre' needs residual=True"):
        DeepStack(16, 8, 2, residual=False, norm="pre")
    with pytest.raises(TypeError, match="residual must be True or False"):
        DeepStack(16, 8, 2, residual="yes")
    with pytest.raises(ValueError, match="where must be one of"):
        activation_scales(
            DeepStack(16, 8, 2), torch.zeros(1, 4, dtype=torch.long), where="everywhere"
        )
    with pytest.raises(ValueError, match="norm must be one of"):
        init_profile("middle", 2)
    with pytest.raises(ValueError, match="seeds must name at least one seed"):
        init_profile("pre", 2, seeds=())
    with pytest.raises(TypeError, match="no MultiHeadAttention or FeedForward"):
        silence_sublayers(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="seeds must be a sequence of whole numbers, got 5"):
        init_profile("pre", 2, seeds=5)
    with pytest.raises(ValueError, match="batch must be a positive whole number, got 0"):
        init_profile("pre", 2, batch=0)
    with pytest.raises(ValueError, match="has no blocks"):
        activation_scales(nn.ModuleList(), torch.zeros(1, 4, dtype=torch.long))


# ---------------------------------------------------------------- gradient_norms itself


def test_gradient_norms_one_float_per_block_and_no_side_effect():
    model = TransformerLM(50, 16, 3, 2, max_len=16)
    tokens = torch.randint(0, 50, (2, 9))
    norms = gradient_norms(model, tokens)
    assert len(norms) == 3 and all(isinstance(g, float) and g > 0 for g in norms)
    assert all(p.grad is None for p in model.parameters())
    # the same as an explicit backward pass on the next-token loss
    model.loss(tokens).backward()
    want = [float(b.feedforward.w2.weight.grad.norm()) for b in model.blocks]
    np.testing.assert_allclose(norms, want, rtol=1e-5)


# ---------------------------------------------------------------- C5.2 residuals keep gradients usable


def test_C5_2_gradients_vanish_without_residuals_and_stay_with_them(one_thread):
    tokens = torch.randint(0, 256, (8, 33))
    spread = {}
    for residual in (False, True):
        torch.manual_seed(0)
        g = gradient_norms(DeepStack(256, 64, 16, residual=residual), tokens)
        spread[residual] = max(g) / min(g)
        if not residual:
            assert (
                g[0] < g[-1] * 1e-4
            )  # the first layer's gradient is 4+ orders of magnitude smaller
    assert spread[False] > 1e4
    assert spread[True] < 2.0


# ---------------------------------------------------------------- C5.3 per-token normalization, drift


def test_C5_3_each_token_mean_zero_var_one_then_scale_and_shift():
    x = 5 + 3 * torch.randn(3, 4, 32)
    ln = LayerNorm(32)
    y = ln(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(3, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(3, 4), atol=1e-3, rtol=0)
    assert [p.shape for p in ln.parameters()] == [torch.Size([32]), torch.Size([32])]
    assert all(p.requires_grad for p in ln.parameters())
    with torch.no_grad():
        ln.weight.fill_(2.0)
        ln.bias.fill_(0.5)
    torch.testing.assert_close(ln(x), 2.0 * y + 0.5)


def test_C5_3_activation_scale_drifts_without_layernorm(one_thread):
    tokens = torch.randint(0, 1000, (8, 32))
    scale, ffn_in = {}, {}
    for norm in ("none", "pre", "post"):
        torch.manual_seed(0)
        model = TransformerLM(1000, 128, 12, 4, 512, max_len=32, norm=norm, activation="relu",
                              init="xavier", scale_embeddings=True)  # fmt: skip
        scale[norm] = activation_scales(model, tokens)
        ffn_in[norm] = activation_scales(model, tokens, where="sublayer_input")
        assert len(scale[norm]) == 13 and len(ffn_in[norm]) == 12
    s = scale["none"]
    assert all(b > a for a, b in zip(s, s[1:], strict=False))  # grows at every layer
    assert s[-1] > 100 * s[0]  # more than a hundredfold, as the lesson says
    assert ffn_in["none"][-1] > 100 * ffn_in["none"][0]
    np.testing.assert_allclose(scale["post"][1:], 1.0, atol=1e-3)  # normalized after every block
    np.testing.assert_allclose(ffn_in["pre"], 1.0, atol=1e-3)  # every sublayer sees scale 1


# ---------------------------------------------------------------- C5.4 independent of the batch


def test_C5_4_layernorm_independent_of_batch_batchnorm_not():
    torch.manual_seed(0)
    batch = torch.randn(8, 16)
    token = batch[3:4]
    ln = LayerNorm(16)
    assert torch.equal(ln(token)[0], ln(batch)[3])
    assert torch.equal(ln(batch[2:5])[1], ln(batch)[3])
    bn = nn.BatchNorm1d(16).train()
    in_8, in_4 = bn(batch)[3], bn(batch[:4])[3]
    assert not torch.allclose(in_8, in_4, atol=1e-3)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        bn(token)


# ---------------------------------------------------------------- C5.5 the unnormalized path


def test_C5_5_silent_sublayers_pre_norm_identity_post_norm_not():
    x = 2 + 3 * torch.randn(2, 6, 16)
    pre = silence_sublayers(make_stack(4, 16, 2, norm="pre"))
    post = silence_sublayers(make_stack(4, 16, 2, norm="post"))
    h_pre, h_post = x, x
    for b_pre, b_post in zip(pre, post, strict=True):
        h_pre, h_post = b_pre(h_pre), b_post(h_post)
    assert torch.equal(h_pre, x)
    assert not torch.allclose(h_post, x, atol=1e-2)
    torch.testing.assert_close(h_post, nn.functional.layer_norm(x, (16,)), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- C5.6 Xiong et al. 2020, at init


@pytest.fixture(scope="module")
def xiong():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = {(n, L): init_profile(n, L).gradients for n in ("pre", "post") for L in (3, 12)}
    torch.set_num_threads(threads)
    return out


def test_C5_6_post_norm_last_layers_larger_and_growing(xiong):
    pre, post = xiong["pre", 12], xiong["post", 12]
    assert post[-1] / post[0] > 1  # post-norm grows with layer index
    assert pre[-1] / pre[0] < 1  # pre-norm does not
    assert post[-1] > pre[-1]


def test_C5_6_across_depth_pre_norm_last_layer_falls_post_does_not(xiong):
    assert xiong["pre", 12][-1] < 0.5 * xiong["pre", 3][-1]
    assert xiong["post", 12][-1] >= 0.9 * xiong["post", 3][-1]
    assert xiong["pre", 3][-1] > xiong["post", 3][-1]  # the gap opens with depth


# ---------------------------------------------------------------- exercise checks


def _ln_right(x, gamma, beta, eps=1e-5):
    return _ln_formula(x, gamma, beta, eps)


def _raise_not_implemented(*args):
    raise NotImplementedError()


def _raise_other(*args):
    raise KeyError("oops")


def test_check_layer_norm_accepts_right_answer(capsys):
    checks.check_layer_norm(_ln_right)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (None, "is None"),
        (_raise_not_implemented, "not implemented yet"),
        (_raise_other, "raised KeyError"),
        (lambda x, g, b, eps=1e-5: None, "is None: did you forget to `return`"),
        (lambda x, g, b, eps=1e-5: _ln_right(x, g, b)[0], "has shape"),
        (lambda x, g, b, eps=1e-5: _ln_right(x, g, b).double(), "dtype torch.float64"),
        (lambda x, g, b, eps=1e-5: _ln_right(x, g, b).long(), "dtype torch.int64"),
        (lambda x, g, b, eps=1e-5: _ln_right(x, g, b) * float("nan"), "NaN"),
        (
            lambda x, g, b, eps=1e-5: g * (x - x.mean(-1, keepdim=True))
            / torch.sqrt(x.var(-1, keepdim=True) + eps) + b,
            "unbiased variance",
        ),
        (lambda x, g, b, eps=1e-5: _ln_right(x, 1.0, 0.0), "scale gamma and shift beta"),
        (
            lambda x, g, b, eps=1e-5: g * (x - x.mean(-1, keepdim=True))
            / x.var(-1, keepdim=True, unbiased=False).sqrt() + b,
            "add eps inside the square root",
        ),
        (lambda x, g, b, eps=1e-5: _ln_right(x, g, b) + 0.1, "largest difference"),
    ],
    ids=["none-fn", "not-implemented", "raises", "returns-none", "shape", "float64", "int",
         "nan", "unbiased", "no-gamma-beta", "no-eps", "off-by-0.1"],
)  # fmt: skip
def test_check_layer_norm_rejects(fn, message):
    with pytest.raises(ExerciseFailed, match=message):
        checks.check_layer_norm(fn)


def test_check_layer_norm_batch_axis_mistake_is_named():
    def batch_norm_like(x, g, b, eps=1e-5):
        mean = x.mean(0, keepdim=True)
        var = x.var(0, keepdim=True, unbiased=False)
        return g * (x - mean) / torch.sqrt(var + eps) + b

    with pytest.raises(ExerciseFailed, match="across the batch"):
        checks.check_layer_norm(batch_norm_like)


def test_check_pre_norm_accepts_right_answer(capsys):
    checks.check_pre_norm_residual(lambda x, sub, norm: x + sub(norm(x)))
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (None, "is None"),
        (_raise_not_implemented, "not implemented yet"),
        (_raise_other, "raised KeyError"),
        (lambda x, s, n: None, "forget to `return`"),
        (lambda x, s, n: (x + s(n(x)))[:, 0], "has shape"),
        (lambda x, s, n: (x + s(n(x))).long(), "dtype torch.int64"),
        (lambda x, s, n: x * float("nan"), "NaN"),
        (lambda x, s, n: n(x + s(x)), "that is post-norm"),
        (lambda x, s, n: s(n(x)), "residual is missing"),
        (lambda x, s, n: x + n(s(x)), "normalized the sublayer's output"),
        (lambda x, s, n: x + s(x), "layer norm is missing"),
        (lambda x, s, n: n(x) + s(n(x)), "added the normalized x"),
        (lambda x, s, n: x + s(nn.functional.layer_norm(x, (8,))), "call the `norm` you are given"),
        (lambda x, s, n: x + s(n(x)) + 1, "largest difference"),
    ],
    ids=["none-fn", "not-implemented", "raises", "returns-none", "shape", "int", "nan",
         "post-norm", "no-residual", "norm-after", "no-norm", "normalized-x", "own-norm",
         "off-by-1"],
)  # fmt: skip
def test_check_pre_norm_rejects(fn, message):
    with pytest.raises(ExerciseFailed, match=message):
        checks.check_pre_norm_residual(fn)


def test_check_post_norm_curve_accepts_right_answer(capsys):
    right = next(k for k, v in MYSTERY_CURVES.items() if v == "post")
    checks.check_post_norm_curve(lambda: right)
    checks.check_post_norm_curve(lambda: f" curve {right.lower()} ")
    assert capsys.readouterr().out.count("✓") == 2


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (None, "is None"),
        (_raise_not_implemented, "not implemented yet"),
        (_raise_other, "raised KeyError"),
        (lambda: None, "returned None"),
        (lambda: 1, "as a string, got a int"),
        (lambda: "C", 'return "A" or "B", got \'C\''),
        (lambda: next(k for k, v in MYSTERY_CURVES.items() if v == "pre"), "is the pre-norm model"),
    ],
    ids=["none-fn", "not-implemented", "raises", "returns-none", "not-a-string", "unknown",
         "picked-pre-norm"],
)  # fmt: skip
def test_check_post_norm_curve_rejects(fn, message):
    with pytest.raises(ExerciseFailed, match=message):
        checks.check_post_norm_curve(fn)


# ---------------------------------------------------------------- plots


def test_plot_per_layer_draws_one_line_per_curve(no_open_figures):
    fig = Figure()
    ax = fig.subplots()
    lines = plot_per_layer({"a": [1.0, 2.0, 3.0], "b": [0.5, 0.25]}, ax=ax)
    assert [line.get_label() for line in lines] == ["a", "b"]
    np.testing.assert_array_equal(lines[0].get_xdata(), [1, 2, 3])
    assert ax.get_yscale() == "log"
    with pytest.raises(TypeError, match="curves must be a non-empty dict"):
        plot_per_layer({}, ax=ax)
    with pytest.raises(ValueError, match="must hold finite numbers"):
        plot_per_layer({"a": [1.0, float("nan")]}, ax=ax)
    with pytest.raises(TypeError, match="must be a sequence of numbers"):
        plot_per_layer({"a": "123"}, ax=ax)
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes or None, got str"):
        plot_per_layer({"a": [1.0]}, ax="left")


def test_plot_mystery_curves_labels_follow_the_key():
    fig = Figure()
    ax = fig.subplots()
    a, b = plot_mystery_curves([3.0, 2.0, 1.0], [1.0, 1.5, 2.0], ax=ax)
    by_label = {"pre": [3.0, 2.0, 1.0], "post": [1.0, 1.5, 2.0]}
    assert a.get_label() == "curve A" and b.get_label() == "curve B"
    np.testing.assert_array_equal(a.get_ydata(), by_label[MYSTERY_CURVES["A"]])
    np.testing.assert_array_equal(b.get_ydata(), by_label[MYSTERY_CURVES["B"]])


# ---------------------------------------------------------------- explorer


def test_norm_explorer_driven_without_a_browser(no_open_figures, one_thread):
    explorer = norm_explorer()
    try:
        ax_grad, ax_scale = explorer.figure.axes
        grad_line, scale_line = ax_grad.lines[1], ax_scale.lines[1]
        assert ax_grad.get_yscale() == "log" and ax_scale.get_yscale() == "log"
        assert len(grad_line.get_xdata()) == 6 and len(scale_line.get_xdata()) == 7
        before = np.array(grad_line.get_ydata()), np.array(scale_line.get_ydata())
        image = explorer.image.value
        explorer.controls["placement"].value = "post"
        after = np.array(grad_line.get_ydata()), np.array(scale_line.get_ydata())
        assert not np.allclose(before[0], after[0]) and not np.allclose(before[1], after[1])
        np.testing.assert_allclose(after[1][1:], 1.0, atol=1e-3)  # post-norm: scale 1 per block
        assert explorer.image.value != image
        np.testing.assert_array_equal(ax_grad.lines[0].get_ydata(), before[0])  # grey: previous
        explorer.controls["placement"].value = "none"
        assert np.array(scale_line.get_ydata())[-1] > 10 * after[1][-1]  # drifts without LN
        explorer.controls["depth"].value = 9
        assert len(grad_line.get_xdata()) == 9 and len(scale_line.get_xdata()) == 10
        d64 = np.array(grad_line.get_ydata())
        explorer.controls["d_model"].value = 32
        assert not np.allclose(np.array(grad_line.get_ydata()), d64)
        assert "d_model 32" in explorer.info.value and "9 blocks" in explorer.info.value
        assert explorer.n_updates == 5
        assert plt.get_fignums() == []
    finally:
        explorer.close()
    assert plt.get_fignums() == []


def test_norm_explorer_bad_arguments():
    with pytest.raises(ValueError, match="placement must be one of"):
        norm_explorer(placement="middle")
    with pytest.raises(ValueError, match="depth must be between 1 and 24"):
        norm_explorer(depth=100)
    with pytest.raises(ValueError, match="d_model must be one of"):
        norm_explorer(d_model=48)
