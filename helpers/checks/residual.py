"""Lesson 5 exercise checks: layer norm from the formula, fixing a given residual block (find the
bug), telling a post-norm gradient curve from a pre-norm one, RMSNorm from the formula (C5.8), and
finding by experiment which changes of its input a normalization ignores.

Instant feedback only: the grade comes from hidden tests that record the answers on cases these
checks never use (``helpers.grading``). Each check tests properties a right answer must have
(each token's mean and variance, how gamma, beta and eps act; what a pre-norm block does when its
sublayer is silent; a classification by the relative signal of C5.6 that follows the
curves, not their order), prints ``✓ …``
when they hold and raises :class:`ExerciseFailed` naming the problem when they do not. No
verdict shows an expected value.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from ..diagnostics import init_profile
from ._core import as_tensor, call, fail, passed

__all__ = [
    "check_layer_norm",
    "check_fixed_pre_norm",
    "check_post_norm_curve",
    "check_rms_norm",
    "check_invariances",
]


def _small_variance_inputs():
    """Tokens whose features differ by about 1e-3 (variance about 1e-6, below eps = 1e-5), in
    float64: here sqrt(var + eps) and sqrt(var) + eps are far apart."""
    g = torch.Generator().manual_seed(6)
    return 1.0 + 1e-3 * torch.randn(2, 3, 8, generator=g, dtype=torch.float64)  # [2, 3, 8]


def _inputs():
    g = torch.Generator().manual_seed(5)
    x = 3.0 + 2.0 * torch.randn(2, 3, 8, generator=g)  # [B=2, n=3, d_model=8], mean far from 0
    gamma = 1.0 + 0.5 * torch.randn(8, generator=g)  # [d_model]
    beta = 0.5 * torch.randn(8, generator=g)  # [d_model]
    return x, gamma, beta


def _close(a, b, tol: float = 1e-4) -> bool:
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    return a.shape == b.shape and torch.allclose(a, b, atol=tol, rtol=tol)


def _ratio_close(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-3) -> bool:
    """``a`` and ``b`` (positive, of any size) equal to a relative ``rtol``."""
    return a.shape == b.shape and bool(((a - b).abs() <= rtol * b.abs()).all())


def _centred(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return x - x.mean(dim=dim, keepdim=True)


def _spread(x: torch.Tensor) -> torch.Tensor:
    """Each token's mean square deviation over its features (the biased variance), [..., 1]."""
    return (_centred(x.double()) ** 2).mean(dim=-1, keepdim=True)


def _unit(ex, layer_norm, x, eps=None, what="x"):
    """The student's layer norm of ``x`` with gamma = 1, beta = 0, checked for shape and dtype."""
    d = x.shape[-1]
    ones, zeros = torch.ones(d, dtype=x.dtype), torch.zeros(d, dtype=x.dtype)
    extra = {} if eps is None else {"eps": eps}
    got = call(ex, layer_norm, x.clone(), ones, zeros, name="layer_norm", **extra)
    shown = f"layer_norm({what}, gamma=1, beta=0{'' if eps is None else f', eps={eps:g}'})"
    got = as_tensor(ex, got, name=shown, shape=x.shape, layout="[..., d_model], like x")
    if got.dtype != x.dtype:
        fail(ex, f"{shown} returned dtype {got.dtype}; keep the input's dtype {x.dtype}.")
    return got


def check_layer_norm(layer_norm) -> None:
    """Exercise 1: ``layer_norm(x, gamma, beta, eps=1e-5)``, the formula of the lesson's "The
    formulas" section, over the last axis, without a normalization function of torch."""
    ex = "Exercise 1 (layer norm)"
    x, gamma, beta = _inputs()
    unit = _unit(ex, layer_norm, x)  # [2, 3, 8]
    if not _close(unit.double().mean(-1), torch.zeros(x.shape[:-1])):
        if _close(unit.double().mean(0), torch.zeros(x.shape[1:])):
            fail(ex, "you normalized across the batch (axis 0), which is batch norm; layer norm "
                     "uses each token's own features, the last axis.")  # fmt: skip
        if _close(unit.double().mean(1), torch.zeros(x.shape[0], x.shape[2])):
            fail(ex, "you normalized across positions (axis 1); layer norm uses each token's own "
                     "features, the last axis.")  # fmt: skip
        fail(ex, "with gamma = 1 and beta = 0 each token's output should have mean 0 over its "
                 "features (the last axis): subtract each token's own mean.")  # fmt: skip
    var = _spread(x)  # [2, 3, 1] biased variance of each token, float64
    denominator2 = var / _spread(unit)  # what the answer divided (x - mean) by, squared
    if not _close(_centred(x.double()), unit.double() * denominator2.sqrt(), 1e-3):
        fail(ex, "with gamma = 1 and beta = 0 each token's output should be its x - mean divided "
                 "by one number per token, sqrt(var + eps).")  # fmt: skip
    if not _ratio_close(denominator2, var + 1e-5):
        d = x.shape[-1]
        if _ratio_close(denominator2, var * d / (d - 1) + 1e-5):
            fail(ex, "you used the unbiased variance (divided by d_model - 1); layer norm divides "
                     "by d_model: unbiased=False.")  # fmt: skip
        if _ratio_close(denominator2, torch.ones_like(var)):
            fail(ex, "you subtracted the mean but did not divide by the standard deviation "
                     "sqrt(var + eps).")  # fmt: skip
        fail(ex, "each token's x - mean should be divided by sqrt(var + eps), var the mean of "
                 "(x - mean)**2 over the token's features; your answer divides by another number.")  # fmt: skip
    got = call(ex, layer_norm, x.clone(), gamma.clone(), beta.clone(), name="layer_norm")
    got = as_tensor(
        ex, got, name="layer_norm(x, gamma, beta)", shape=x.shape, layout="[..., d_model], like x"
    )
    if got.dtype != x.dtype:
        fail(ex, f"layer_norm returned dtype {got.dtype}; keep the input's dtype {x.dtype}.")
    if not _close(got, gamma * unit + beta):
        if _close(got, unit):
            fail(ex, "you did not apply the learned scale gamma and shift beta.")
        fail(ex, "layer_norm(x, gamma, beta) should be gamma * layer_norm(x, 1, 0) + beta: scale "
                 "and shift after normalizing, feature by feature.")  # fmt: skip
    small = _small_variance_inputs()  # float64, variance about 1e-6
    var = _spread(small)
    for eps in (None, 1e-3):
        unit = _unit(ex, layer_norm, small, eps=eps, what="x of variance about 1e-6")
        eps_value = 1e-5 if eps is None else eps
        spread = _spread(unit)
        denominator2 = var / spread if bool((spread > 0).all()) else torch.zeros_like(var)
        if _ratio_close(denominator2, var + eps_value):
            continue
        if _ratio_close(denominator2, (var.sqrt() + eps_value) ** 2):
            fail(ex, "you added eps outside the square root, sqrt(var) + eps; the formula has it "
                     "inside, sqrt(var + eps): for a token whose variance is near eps or below "
                     "the two differ a lot.")  # fmt: skip
        if _ratio_close(denominator2, var):
            fail(ex, "you left eps out: divide by sqrt(var + eps), not sqrt(var) (for a token "
                     "whose variance is near eps or below the two differ a lot).")  # fmt: skip
        if eps is not None and _ratio_close(denominator2, var + 1e-5):
            fail(ex, "layer_norm(x, gamma, beta, eps=1e-3) still used eps = 1e-5: use the eps "
                     "argument, not a fixed number.")  # fmt: skip
        fail(ex, "for tokens of variance about 1e-6 your answer does not divide by "
                 "sqrt(var + eps) (is eps where the formula has it?).")  # fmt: skip
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
    if not _close(flat, torch.zeros(1, 4)):
        fail(ex, "a token whose features are all equal should come out as beta (here 0): "
                 "x - mean is 0 for each feature.")  # fmt: skip
    passed(ex, "each token comes out with mean 0 and variance var / (var + eps) before gamma and "
               "beta, eps inside the square root (graded on hidden cases; torch's own layer-norm "
               "functions score 0 there)")  # fmt: skip


def check_fixed_pre_norm(fixed_pre_norm) -> None:
    """Exercise 2 (find the bug): ``fixed_pre_norm(x, sublayer, norm)`` must return what a
    pre-norm residual block computes (the lesson's "The formulas" section)."""
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
        if not _close(got, want):
            mistakes = [
                (norm(x) + sublayer(norm(x)), "that is still the given block's output: `x = "
                 "self.norm(x)` overwrote x, so it adds the normalized x, LN(x) + Sublayer(LN(x)); "
                 "pre-norm adds x itself, so that the identity path stays unnormalized"),
                (norm(x + sublayer(x)), "that is post-norm, LayerNorm(x + Sublayer(x)); pre-norm "
                 "normalizes the sublayer's input only and adds x untouched"),
                (sublayer(norm(x)), "the residual is missing: add x back"),
                (x + norm(sublayer(x)), "you normalized the sublayer's output; pre-norm normalizes "
                 "its input"),
                (x + sublayer(x), "the layer norm is missing: the sublayer should see the "
                 "normalized x"),
                (x + sublayer(nn.functional.layer_norm(x, x.shape[-1:])), "you normalized with a "
                 "layer norm of your own; call the `norm` you are given, it has its own learned "
                 "scale and shift"),
            ]  # fmt: skip
            for wrong, why in mistakes:
                if _close(got, wrong):
                    fail(ex, why + ".")
        silent = lambda h: torch.zeros_like(h)  # noqa: E731 - a sublayer whose output is 0
        quiet = call(ex, pre_norm_residual, x.clone(), silent, norm, name="fixed_pre_norm")
        quiet = as_tensor(ex, quiet, name="fixed_pre_norm(x, silent sublayer, norm)",
                          shape=x.shape, layout="[B, n, d_model]")  # fmt: skip
        if not torch.equal(quiet, x):
            fail(ex, "with a sublayer that outputs 0 a pre-norm block returns x exactly (C5.5); "
                     "yours does not: the identity path must carry x itself, untouched.")  # fmt: skip
        if not _close(got, want):
            fail(ex, "your block returns x when the sublayer outputs 0, but with a working "
                     "sublayer it does not add what the sublayer makes of the normalized x.")  # fmt: skip
    passed(ex, "x + Sublayer(LayerNorm(x)): the bug was `x = self.norm(x)`, which overwrote x, so "
               "the block added the normalized x; now the identity path x is never normalized "
               "(graded on hidden cases)")  # fmt: skip


@functools.cache
def _own_pair() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A pre-norm and a post-norm 6-block gradient curve of the check's own (neither the plotted
    pair nor a graded one), built on first use, in about a tenth of a second."""
    settings = dict(d_model=32, seeds=(2,), batch=4, n=16, vocab_size=200, dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):  # the caller's random stream is left as it was
        pre = init_profile("pre", 6, **settings).gradients
        post = init_profile("post", 6, **settings).gradients
    return tuple(pre), tuple(post)


def _letter(ex, fn, a, b, what):
    answer = call(ex, fn, list(a), list(b), name="which_curve_is_post_norm")
    if answer is None:
        fail(ex, f'which_curve_is_post_norm({what}) returned None: return "A" or "B".')
    if type(answer) is not str:
        fail(ex, f'return the letter "A" or "B" as a string, got a {type(answer).__name__}.')
    if answer not in ("A", "B"):
        fail(ex, f'return exactly "A" or "B" (one capital letter), got {answer[:20]!r}.')
    return answer


def check_post_norm_curve(which_curve_is_post_norm) -> None:
    """Exercise 3: ``which_curve_is_post_norm(curve_a, curve_b)`` gets the per-layer gradient norms
    of two models of the same depth at initialization, one pre-norm and one post-norm (lists of
    floats, layer 1 first), and returns "A" or "B"."""
    ex = "Exercise 3 (which curve is post-norm?)"
    pre, post = _own_pair()
    first = _letter(ex, which_curve_is_post_norm, pre, post, "curve_a, curve_b")
    swapped = _letter(ex, which_curve_is_post_norm, post, pre, "curve_a, curve_b")
    if first == swapped:
        both_fall = pre[-1] < pre[0] and post[-1] < post[0]
        why = (
            "In this pair both curves fall toward the last layers, post-norm's too (at this size "
            "it rises for some models and falls for others), so a rule that asks of one curve "
            "whether it rises, or that compares a curve with a fixed threshold, gives the same "
            "letter either way. "
            if both_fall
            else ""
        )
        fail(ex, f'given the same two curves in the other order your function still says '
                 f'"{first}". {why}What C5.6 found robust compares the two curves: which one '
                 f'falls much more from its first layer to its last, and which ends lower? '
                 f'That curve is pre-norm\'s.')  # fmt: skip
    scaled = _letter(
        ex,
        which_curve_is_post_norm,
        [10 * v for v in pre],
        [10 * v for v in post],
        "curve_a, curve_b",
    )
    if scaled != first:
        fail(ex, "multiplying both curves by 10 changed your answer: the placement shows in the "
                 "curves' shapes and in how they compare, not in their units.")  # fmt: skip
    if first != "B":
        fail(ex, "on a pair of 6-block curves (another seed and width than the plot's) your "
                 "function picked the pre-norm curve, the one that falls much more from its first "
                 "layer to its last and ends lower: that is pre-norm's signature in C5.6, so the "
                 "other curve is post-norm's.")  # fmt: skip
    passed(ex, "your function told post-norm's curve from pre-norm's on a pair of its own, in "
               "either order (graded on hidden pairs: other seeds, widths and depths)")  # fmt: skip


# ---------------------------------------------------------------- exercise 4: RMSNorm (C5.8)


def _mean_square(x: torch.Tensor) -> torch.Tensor:
    """Each token's mean of x**2 over its features, in float64, [..., 1]."""
    return x.double().pow(2).mean(dim=-1, keepdim=True)


def _rms_unit(ex, rms_norm, x, eps=None, what="x"):
    """The student's RMSNorm of ``x`` with g = 1, checked for shape, dtype and finiteness."""
    ones = torch.ones(x.shape[-1], dtype=x.dtype)
    extra = {} if eps is None else {"eps": eps}
    got = call(ex, rms_norm, x.clone(), ones, name="rms_norm", **extra)
    shown = f"rms_norm({what}, g=1{'' if eps is None else f', eps={eps:g}'})"
    got = as_tensor(ex, got, name=shown, shape=x.shape, layout="[..., d_model], like x")
    if got.dtype != x.dtype:
        fail(ex, f"{shown} returned dtype {got.dtype}; keep the input's dtype {x.dtype}.")
    return got


def check_rms_norm(rms_norm) -> None:
    """Exercise 4: ``rms_norm(x, g, eps=1e-6)``, RMSNorm from its formula (C5.8),
    ``g * x / sqrt(mean(x**2) + eps)`` over the last axis, without a normalization function of
    torch or the course's ``RMSNorm``. Properties only: each token is multiplied by one positive
    number, whose square is 1 / (mean(x**2) + eps); then g scales feature by feature."""
    ex = "Exercise 4 (RMSNorm)"
    x, gamma, _ = _inputs()  # x: mean about 3, far from 0
    x = x.double()
    unit = _rms_unit(ex, rms_norm, x).double()  # [2, 3, 8]
    factor = (unit * x).sum(-1, keepdim=True) / (x * x).sum(-1, keepdim=True)  # [2, 3, 1]
    if not _close(unit, factor * x, 1e-6):
        if _close(unit.mean(-1), torch.zeros(x.shape[:-1]), 1e-6):
            fail(ex, "your output has mean 0 for every token: you subtracted the mean, as layer "
                     "norm does; RMSNorm does not re-centre, it only divides each token by its "
                     "root mean square.")  # fmt: skip
        fail(ex, "with g = 1 each token's output should be x itself times one number per token, "
                 "1 / sqrt(mean(x**2) + eps), the same for all its features.")  # fmt: skip
    if not bool((factor > 0).all()):
        fail(ex, "your output points the other way from x (a negative factor): divide by the "
                 "root mean square, a positive number.")  # fmt: skip
    ms = _mean_square(x)  # [2, 3, 1]
    denominator2 = 1 / factor**2  # what the answer divided x by, squared
    if not _ratio_close(denominator2, ms + 1e-6):
        d = x.shape[-1]
        var = _spread(x)
        if _ratio_close(denominator2, var + 1e-6):
            fail(ex, "you divided by the standard deviation sqrt(var + eps); RMSNorm divides by "
                     "the root mean square sqrt(mean(x**2) + eps), with no mean taken out of "
                     "x**2.")  # fmt: skip
        if _ratio_close(denominator2, d * ms + 1e-6) or _ratio_close(denominator2, d * ms):
            fail(ex, "you divided by the square root of the sum of x**2 (the vector's length); "
                 "RMSNorm uses the mean of x**2 over the features.")  # fmt: skip
        if _ratio_close(denominator2, (ms + 1e-6) ** 2):
            fail(ex, "you divided by mean(x**2) + eps itself: take its square root.")
        fail(ex, "each token should be divided by sqrt(mean(x**2) + eps), the mean over its own "
                 "features (the last axis); your answer divides by another number.")  # fmt: skip
    got = call(ex, rms_norm, x.clone(), gamma.double().clone(), name="rms_norm")
    got = as_tensor(ex, got, name="rms_norm(x, g)", shape=x.shape, layout="[..., d_model], like x")
    if not _close(got, gamma.double() * unit):
        if _close(got, unit):
            fail(ex, "you did not apply the learned gain g.")
        if _close(got, gamma.double() * unit + gamma.double()) or _close(
            got, gamma.double() * (unit + 1)
        ):
            fail(ex, "you added something after scaling: RMSNorm has a gain g and no bias.")
        fail(ex, "rms_norm(x, g) should be g * rms_norm(x, 1): scale feature by feature after "
                 "dividing by the root mean square.")  # fmt: skip
    small = 1e-3 * _small_variance_inputs()  # mean(x**2) about 1e-6, near eps
    ms = _mean_square(small)
    for eps in (None, 1e-4):
        eps_value = 1e-6 if eps is None else eps
        unit = _rms_unit(ex, rms_norm, small, eps=eps, what="x of mean(x**2) about 1e-6").double()
        factor = (unit * small).sum(-1, keepdim=True) / (small * small).sum(-1, keepdim=True)
        denominator2 = 1 / factor**2
        if _ratio_close(denominator2, ms + eps_value):
            continue
        if _ratio_close(denominator2, (ms.sqrt() + eps_value) ** 2):
            fail(ex, "you added eps outside the square root, sqrt(mean(x**2)) + eps; the formula "
                     "has it inside, sqrt(mean(x**2) + eps): for a token whose mean square is "
                     "near eps the two differ a lot.")  # fmt: skip
        if _ratio_close(denominator2, ms):
            fail(ex, "you left eps out: divide by sqrt(mean(x**2) + eps).")
        if eps is not None and _ratio_close(denominator2, ms + 1e-6):
            fail(ex, "rms_norm(x, g, eps=1e-4) still used eps = 1e-6: use the eps argument, not a "
                     "fixed number.")  # fmt: skip
        fail(ex, "for tokens whose mean square is about 1e-6 your answer does not divide by "
                 "sqrt(mean(x**2) + eps) (is eps where the formula has it?).")  # fmt: skip
    zero = call(ex, rms_norm, torch.zeros(1, 4), torch.ones(4), name="rms_norm")
    if (
        isinstance(zero, torch.Tensor)
        and zero.is_floating_point()
        and not torch.isfinite(zero).all()
    ):
        fail(ex, "for a token of zeros rms_norm returned NaN or inf: add eps inside the square "
                 "root.")  # fmt: skip
    zero = as_tensor(ex, zero, name="rms_norm([[0, 0, 0, 0]], 1)", shape=(1, 4))
    if not _close(zero, torch.zeros(1, 4)):
        fail(ex, "a token of zeros should come out as zeros: RMSNorm only rescales x.")
    passed(ex, "each token is x times one positive number, 1 / sqrt(mean(x**2) + eps), then the "
               "gain g, eps inside the square root, no mean taken out and no bias (graded on "
               "hidden cases; torch's normalization functions and the course's RMSNorm score 0 "
               "there)")  # fmt: skip


# ---------------------------------------------------------------- exercise 5: invariances


def _centre(x):
    return x - x.mean(dim=-1, keepdim=True)


def _unit_length(x):
    return x / x.norm(dim=-1, keepdim=True)


def _range_scaled(x):
    c = x - x.mean(dim=-1, keepdim=True)
    return c / c.abs().amax(dim=-1, keepdim=True)


#: eps of the check's own normalization with an eps: with it, the factors that pass here (from
#: about 0.4 up) are those that find the lesson's layer norm (eps 1e-5 on the variance)
#: invariant to 1e-4
_EPS = 1e-4


def _max_scaled(x):
    return x / torch.sqrt(x.pow(2).amax(dim=-1, keepdim=True) + _EPS)


#: The check's own normalizations (none of them is the exercise's question), with what each one
#: ignores by construction: (a constant added to every feature, a positive factor).
_OWN_NORMS = (
    ("x - mean(x)", _centre, (True, False), "subtracting the mean removes any constant added"),
    ("x / ||x||", _unit_length, (False, True), "a positive factor cancels in x / ||x||"),
    ("tanh(x)", torch.tanh, (False, False), "tanh changes with both"),
    ("(x - mean) / max|x - mean|", _range_scaled, (True, True), "the constant is subtracted and "
     "the factor cancels"),
    # with an eps, as the lesson's norms have: a positive factor cancels as long as eps is small
    # next to factor²·max(x²) (a factor from about 0.4 up); a tiny factor measures eps instead
    (f"x / sqrt(max(x²) + eps), eps = {_EPS:g},", _max_scaled, (False, True), "a positive "
     "factor cancels, up to eps, which is far below max(x²) here"),
)  # fmt: skip


def _pair(ex, invariances, norm, d_model, what):
    answer = call(ex, invariances, norm, d_model, name="invariances")
    if answer is None:
        fail(ex, f"invariances({what}, {d_model}) returned None: return a pair of bools, "
                 f"(same_after_shift, same_after_scale).")  # fmt: skip
    if not isinstance(answer, tuple | list) or len(answer) != 2:
        fail(ex, f"invariances({what}, {d_model}) should return a pair (same_after_shift, "
                 f"same_after_scale), got a {type(answer).__name__}"
                 + (f" of length {len(answer)}" if isinstance(answer, tuple | list) else "") + ".")  # fmt: skip
    if not all(type(v) is bool for v in answer):
        kinds = ", ".join(type(v).__name__ for v in answer)
        fail(ex, f"invariances({what}, {d_model}) should return two Python bools, got {kinds}: "
                 f"wrap a comparison in bool(...).")  # fmt: skip
    return tuple(answer)


def check_invariances(invariances) -> None:
    """Exercise 5 (predict, then verify): ``invariances(norm, d_model)`` returns a pair of bools,
    whether ``norm`` gives the same output (to 1e-4) after a constant is added to every feature
    of each token, and after each token is multiplied by a positive number, found by trying it.
    Tried on normalizations of the check's own (not layer norm or RMSNorm), on two widths; one of
    them has an eps, so that a factor so small that eps decides (1e-3) is refused."""
    ex = "Exercise 5 (invariances)"
    with torch.random.fork_rng(devices=[]):  # the caller's random stream is left as it was
        torch.manual_seed(8)
        for what, norm, truth, why in _OWN_NORMS:
            for d_model in (6, 16):
                got = _pair(ex, invariances, norm, d_model, what)
                for i, change in enumerate(
                    ("adding a constant", "multiplying by a positive number")
                ):
                    if got[i] != truth[i]:
                        verdict = "does not change" if truth[i] else "changes"
                        if norm is _max_scaled and i == 1:  # x / ||x|| above passed
                            fail(ex, f"for {what} your answer says multiplying by a positive "
                                     f"number changes the output, but it does not ({why}): your "
                                     f"factor is probably so small (1e-3, say) that eps is no "
                                     f"longer small next to factor²·max(x²), and then eps, not "
                                     f"the normalization, decides; the property is about a "
                                     f"modest factor such as 2 or 3 (or a large one), where eps "
                                     f"does not matter.")  # fmt: skip
                        fail(ex, f"for {what} your answer says {change} "
                                 f"{'does not change' if got[i] else 'changes'} the output, but it "
                                 f"{verdict} it ({why}): compare norm(x) with norm of the changed "
                                 f"x on random x, with a modest constant and factor.")  # fmt: skip
    passed(ex, "your function found what each of five normalizations ignores, on two widths "
               "(graded on hidden cases: other normalizations, among them the lesson's)")  # fmt: skip
