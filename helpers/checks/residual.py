"""Lesson 5 exercise checks: layer norm from the formula, fixing a given residual block (find the
bug), and reading a plot.

Each check calls the student's function on fixed inputs, prints ``✓ …`` when the answer is right
and raises :class:`ExerciseFailed` naming the problem (and, for the usual mistakes, which mistake)
when it is not.
"""

from __future__ import annotations

import torch
from torch import nn

from ..plots.residual import MYSTERY_CURVES
from ..printing import fmt
from ._core import as_tensor, call, expect_close, fail, passed

__all__ = ["check_layer_norm", "check_fixed_pre_norm", "check_post_norm_curve"]

# A worked example of the formula (not an example from Ba et al. 2016): biased variance, eps -> 0.
WORKED_INPUT = [1.0, 2.0, 3.0, 4.0]
WORKED_OUTPUT = [-1.341641, -0.447214, 0.447214, 1.341641]


def _layer_norm(x, gamma, beta, eps=1e-5, dim=-1, unbiased=False, eps_outside=False):
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    if eps_outside:
        return gamma * (x - mean) / (torch.sqrt(var) + eps) + beta
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta


def _small_variance_inputs():
    """Tokens whose features differ by about 1e-3 (variance about 1e-6, below eps = 1e-5), in
    float64: here sqrt(var + eps) and sqrt(var) + eps are far apart."""
    g = torch.Generator().manual_seed(6)
    x = 1.0 + 1e-3 * torch.randn(2, 3, 8, generator=g, dtype=torch.float64)  # [2, 3, 8]
    gamma = 1.0 + 0.5 * torch.randn(8, generator=g, dtype=torch.float64)  # [d_model]
    beta = 0.5 * torch.randn(8, generator=g, dtype=torch.float64)  # [d_model]
    return x, gamma, beta


def _inputs():
    g = torch.Generator().manual_seed(5)
    x = 3.0 + 2.0 * torch.randn(2, 3, 8, generator=g)  # [B=2, n=3, d_model=8], mean far from 0
    gamma = 1.0 + 0.5 * torch.randn(8, generator=g)  # [d_model]
    beta = 0.5 * torch.randn(8, generator=g)  # [d_model]
    return x, gamma, beta


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(
        a.detach().double(), b.detach().double(), atol=1e-4, rtol=1e-4
    )


def check_layer_norm(layer_norm) -> None:
    """Exercise 1: ``layer_norm(x, gamma, beta, eps=1e-5)`` must return
    ``gamma * (x - mean) / sqrt(var + eps) + beta``, mean and biased variance over the last axis."""
    ex = "Exercise 1 (layer norm)"
    x, gamma, beta = _inputs()
    want = _layer_norm(x, gamma, beta)
    got = call(ex, layer_norm, x.clone(), gamma.clone(), beta.clone(), name="layer_norm")
    if isinstance(got, torch.Tensor) and got.is_floating_point() and torch.isnan(got).any():
        fail(ex, "layer_norm returned NaN: did you divide by sqrt(var + eps), with eps inside?")
    got = as_tensor(
        ex, got, name="layer_norm(x, gamma, beta)", shape=x.shape, layout="[B, n, d_model]"
    )
    if got.dtype != x.dtype:
        fail(ex, f"layer_norm returned dtype {got.dtype}; keep the input's dtype {x.dtype}.")
    if not _close(got, want):
        mistakes = [
            (_layer_norm(x, gamma, beta, unbiased=True), "you used the unbiased variance "
             "(divided by d_model - 1); layer norm divides by d_model: unbiased=False"),
            (_layer_norm(x, gamma, beta, dim=0), "you normalized across the batch (axis 0), "
             "which is batch norm; layer norm uses each token's own features, the last axis"),
            (_layer_norm(x, gamma, beta, dim=1), "you normalized across positions (axis 1); "
             "layer norm uses each token's own features, the last axis"),
            (_layer_norm(x, 1.0, 0.0), "you did not apply the learned scale gamma and shift beta"),
            ((x - x.mean(-1, keepdim=True)) * gamma + beta, "you subtracted the mean but did "
             "not divide by the standard deviation sqrt(var + eps)"),
        ]  # fmt: skip
        for wrong, why in mistakes:
            if _close(got, wrong):
                fail(ex, why + ".")
        expect_close(ex, got, want, name="layer_norm(x, gamma, beta)")
    small, g_small, b_small = _small_variance_inputs()
    got = call(ex, layer_norm, small.clone(), g_small.clone(), b_small.clone(), name="layer_norm")
    name = "layer_norm(x, gamma, beta) for tokens of variance about 1e-6"
    got = as_tensor(ex, got, name=name, shape=small.shape, layout="[B, n, d_model]")
    if not _close(got, _layer_norm(small, g_small, b_small)):
        if _close(got, _layer_norm(small, g_small, b_small, eps_outside=True)):
            fail(ex, "you added eps outside the square root, sqrt(var) + eps; the formula has it "
                     "inside, sqrt(var + eps): for a token whose variance is near eps or below "
                     "the two differ a lot.")  # fmt: skip
        if _close(got, _layer_norm(small, g_small, b_small, eps=0.0)):
            fail(ex, "you left eps out: divide by sqrt(var + eps), not sqrt(var) (for a token "
                     "whose variance is near eps or below the two differ a lot).")  # fmt: skip
        expect_close(ex, got, _layer_norm(small, g_small, b_small), name=name)
    one = call(
        ex,
        layer_norm,
        torch.tensor([WORKED_INPUT], dtype=torch.float64),
        torch.ones(4, dtype=torch.float64),
        torch.zeros(4, dtype=torch.float64),
        name="layer_norm",
    )
    one = as_tensor(ex, one, name="layer_norm([[1, 2, 3, 4]], 1, 0)", shape=(1, 4))
    expect_close(ex, one, torch.tensor([WORKED_OUTPUT]), name="layer_norm([[1, 2, 3, 4]], 1, 0)")
    flat = call(
        ex, layer_norm, torch.full((1, 4), 2.0), torch.ones(4), torch.zeros(4), name="layer_norm"
    )
    if (
        isinstance(flat, torch.Tensor)
        and flat.is_floating_point()
        and not torch.isfinite(flat).all()
    ):
        fail(ex, "for a token whose features are all equal (variance 0) layer_norm returned NaN or "
                 "inf: add eps inside the square root, sqrt(var + eps).")  # fmt: skip
    flat = as_tensor(ex, flat, name="layer_norm([[2, 2, 2, 2]], 1, 0)", shape=(1, 4))
    expect_close(ex, flat, torch.zeros(1, 4), name="layer_norm([[2, 2, 2, 2]], 1, 0)")
    row = ", ".join(fmt(v, decimals=4) for v in one[0].to(torch.float64))
    passed(ex, f"LN([1, 2, 3, 4]) = [{row}], the worked example of the formula, and eps sits "
               "inside the square root")  # fmt: skip


def check_fixed_pre_norm(fixed_pre_norm) -> None:
    """Exercise 2 (find the bug): the lesson shows a "pre-norm" block whose forward is
    ``x = self.norm(x); return x + self.sublayer(x)``; ``fixed_pre_norm(x, sublayer, norm)`` must
    return the pre-norm formula ``x + sublayer(norm(x))``."""
    ex = "Exercise 2 (find the bug)"
    pre_norm_residual = fixed_pre_norm
    x, gamma, beta = _inputs()
    g = torch.Generator().manual_seed(7)
    sublayer = nn.Linear(8, 8)
    norm = nn.LayerNorm(8)
    with torch.no_grad():
        sublayer.weight.copy_(torch.randn(8, 8, generator=g) / 8**0.5)
        sublayer.bias.copy_(torch.randn(8, generator=g))
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        want = x + sublayer(norm(x))  # [B, n, d_model]
        got = call(ex, pre_norm_residual, x.clone(), sublayer, norm, name="fixed_pre_norm")
        got = as_tensor(ex, got, name="fixed_pre_norm(x, sublayer, norm)", shape=x.shape,
                        layout="[B, n, d_model]")  # fmt: skip
        if _close(got, want):
            passed(ex, "x + Sublayer(LayerNorm(x)): the bug was `x = self.norm(x)`, which "
                       "overwrote x, so the block added the normalized x; now the identity path "
                       "x is never normalized")  # fmt: skip
            return
        mistakes = [
            (norm(x) + sublayer(norm(x)), "that is still the given block's output: `x = "
             "self.norm(x)` overwrote x, so it adds the normalized x, LN(x) + Sublayer(LN(x)); "
             "pre-norm adds x itself, so that the identity path stays unnormalized"),
            (norm(x + sublayer(x)), "that is post-norm, LayerNorm(x + Sublayer(x)); pre-norm "
             "normalizes the sublayer's input only and adds x untouched"),
            (sublayer(norm(x)), "the residual is missing: add x back, x + Sublayer(LayerNorm(x))"),
            (x + norm(sublayer(x)), "you normalized the sublayer's output; pre-norm normalizes "
             "its input: x + Sublayer(LayerNorm(x))"),
            (x + sublayer(x), "the layer norm is missing: x + Sublayer(LayerNorm(x))"),
            (x + sublayer(nn.functional.layer_norm(x, x.shape[-1:])), "you normalized with a "
             "layer norm of your own; call the `norm` you are given, it has its own learned "
             "scale and shift"),
        ]  # fmt: skip
        for wrong, why in mistakes:
            if _close(got, wrong):
                fail(ex, why + ".")
        expect_close(ex, got, want, name="fixed_pre_norm(x, sublayer, norm)")


def check_post_norm_curve(which_curve_is_post_norm) -> None:
    """Exercise 3: ``which_curve_is_post_norm()`` returns "A" or "B" for the plot of
    :func:`helpers.plots.residual.plot_mystery_curves`."""
    ex = "Exercise 3 (which curve is post-norm?)"
    answer = call(ex, which_curve_is_post_norm, name="which_curve_is_post_norm")
    if answer is None:
        fail(ex, 'which_curve_is_post_norm() returned None: return "A" or "B".')
    if not isinstance(answer, str):
        fail(ex, f'return the letter "A" or "B" as a string, got a {type(answer).__name__}.')
    letter = answer.strip().upper().removeprefix("CURVE").strip()
    if letter not in MYSTERY_CURVES:
        fail(ex, f'return "A" or "B", got {answer!r}.')
    if MYSTERY_CURVES[letter] != "post":
        fail(
            ex,
            f"curve {letter} is the pre-norm model: its gradient falls steeply toward the last "
            "layer and ends lower; post-norm's ends higher and does not fall like that (C5.6): "
            "look for the curve that ends higher.",
        )
    passed(
        ex,
        f"curve {letter} is post-norm: it ends higher and does not fall like pre-norm's, which "
        "drops steeply toward the last layer",
    )
