"""Lesson 5 exercise checks: predicting what layer norm makes of a token scaled and shifted
(C5.3), fixing a given residual block (find the bug), telling a post-norm gradient curve from a
pre-norm one (C5.6); its companion 05b: RMSNorm from a layer norm (C5.8, transfer) and finding by
experiment which changes of its input a normalization ignores.

Instant feedback only: the grade comes from hidden tests that record the answers on cases these
checks never use (``helpers.grading``). Each check tests properties a right answer must have
(layer norm's own output on the tokens the check drew; what a pre-norm block does when its
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
    "check_layer_norm_prediction",
    "check_fixed_pre_norm",
    "check_post_norm_curve",
    "check_rms_from_layer_norm",
    "check_invariances",
    "FORBIDDEN",
    "FORBIDDEN_MATCHING",
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


def _torch_layer_norm(x, gamma, beta):
    """The check's own experiment: torch's layer norm over the last axis, eps = 0, float64."""
    return nn.functional.layer_norm(x.double(), x.shape[-1:], gamma.double(), beta.double(), 0.0)


def _affine_inputs():
    """Tokens far from mean 0, per-token factors of both signs (none near 0) and shifts."""
    g = torch.Generator().manual_seed(51)
    x, gamma, beta = (t.double() for t in _inputs())  # [2, 3, 8], [8], [8]
    sign = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], dtype=torch.float64)[..., None]
    a = sign * (0.5 + 2.5 * torch.rand(2, 3, 1, generator=g, dtype=torch.float64))  # [2, 3, 1]
    b = 4.0 * torch.randn(2, 3, 1, generator=g, dtype=torch.float64)  # [2, 3, 1]
    return x, gamma, beta, a, b


def check_layer_norm_prediction(predict) -> None:
    """Exercise 1 (predict, then verify; C5.3): ``predict(out, a, b, gamma, beta)`` is given
    ``out = LN(x)`` (learned ``gamma``, ``beta``, eps = 0) for tokens ``x`` [..., d_model] it
    does not see, and per-token numbers ``a`` (non-zero) and ``b`` [..., 1]; it returns
    ``LN(a * x + b)``. The check knows ``x``: it computes LN(a * x + b) itself and compares."""
    ex = "Exercise 1 (what layer norm keeps)"
    x, gamma, beta, a, b = _affine_inputs()
    out = _torch_layer_norm(x, gamma, beta)  # [2, 3, 8]
    truth = _torch_layer_norm(a * x + b, gamma, beta)  # the experiment: [2, 3, 8]
    got = call(ex, predict, out.clone(), a.clone(), b.clone(), gamma.clone(), beta.clone(),
               name="predict_layer_norm")  # fmt: skip
    got = as_tensor(ex, got, name="predict_layer_norm(out, a, b, gamma, beta)", shape=out.shape,
                    layout="[..., d_model], like out")  # fmt: skip
    got = got.double()
    if _close(got, truth):
        passed(ex, "on tokens you never saw, with factors of both signs and shifts, your "
                   "prediction is what layer norm gives (graded on hidden tokens, gains and "
                   "factors)")  # fmt: skip
        return
    positive = (a > 0).expand_as(out)  # [2, 3, 8]: the tokens whose factor is positive
    if _close(got, a * out + b) or _close(got, a * (out - beta) + beta + b):
        fail(ex, "you applied a and b to the output, but layer norm sees a * x + b before it "
                 "normalizes: the shift b goes out with the token's mean, and the factor a is "
                 "divided out with its standard deviation.")  # fmt: skip
    if _close(got, a * out) or _close(got, a * (out - beta) + beta):
        fail(ex, "the factor a does not survive: the standard deviation of a * x is |a| times "
                 "that of x, so dividing by it cancels |a|; only its sign can remain.")  # fmt: skip
    if _close(got[positive], truth[positive]) and not _close(got[~positive], truth[~positive]):
        if _close(got[~positive], out[~positive]):
            fail(ex, "right for the tokens whose a is positive; for a negative a, a * x - mean "
                     "points the other way, and dividing by the standard deviation (positive) "
                     "does not turn it back.")  # fmt: skip
        if _close(got, torch.sign(a) * out):
            fail(ex, "the sign of a flips the normalized token, gamma * x_hat, but beta is added "
                     "after normalizing: it does not flip.")  # fmt: skip
        fail(ex, "right for the tokens whose a is positive, not for those whose a is negative: "
                 "what does a negative factor do to x - mean, and to gamma and beta?")  # fmt: skip
    fail(ex, "not what layer norm gives for a * x + b. Try it: draw a token x, compute "
             "out = LN(x) and LN(a * x + b) with the lesson's LayerNorm, and compare them for "
             "a positive and a negative a; then write the rule from out, gamma and beta "
             "alone.")  # fmt: skip


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


#: What 05b's exercise 1 may not call (the grader's list in tools/grading/spec.py is this one):
#: RMSNorm itself (torch's, the course's) and the arithmetic of its formula, so that the answer
#: gets the normalization from a layer norm, as the exercise asks
FORBIDDEN = {
    "l5b_ex1": (
        "rms_norm", "rms_norm.default", "_fused_rms_norm", "_fused_rms_norm.default",
        "helpers.normalization.RMSNorm.forward", "helpers.normalization.RMSNorm.__init__",
    ),
}  # fmt: skip
#: ... and every call whose name starts with one of these (torch functions, Tensor methods and
#: ATen overloads alike): the square root, powers and the reductions of RMSNorm's formula
FORBIDDEN_MATCHING = {
    "l5b_ex1": (
        r"^_?(sqrt|rsqrt|pow|float_pow|square|mean|sum|nansum|var|std|norm|linalg_vector_norm|"
        r"frobenius_norm|linalg_norm|exp|log|reciprocal|hypot|cumsum|einsum|matmul|mm|bmm|mv|"
        r"dot|vdot|inner|tensordot)(\.|$)",
        r"^__(i|r)?(pow|matmul|truediv|div)__$",
        r"^(div|true_divide|divide)(\.|_|$)",
    ),
}  # fmt: skip


def _refused(ex: str, fn, args: tuple, name: str):
    """Call the answer under the grader's observer; refuse the calls 05b's exercise 1 forbids."""
    import re

    from ..grading import CallNames

    seen = CallNames()
    with seen:
        got = call(ex, fn, *args, name=name)
    used = sorted(
        n for n in seen.names
        if n in FORBIDDEN["l5b_ex1"] or any(re.search(p, n) for p in FORBIDDEN_MATCHING["l5b_ex1"])
    )  # fmt: skip
    if used:
        fail(ex, f"your answer calls {', '.join(used)}: that is RMSNorm computed by hand (or "
                 f"RMSNorm itself). The exercise is to get it from a layer norm, with only "
                 f"tensor building (cat, stack, slicing, negation) and the gain's product around "
                 f"it.")  # fmt: skip
    return got


def check_rms_from_layer_norm(rms_from_layer_norm) -> None:
    """Lesson 5, Going further (05b), exercise 1 (C5.8, transfer): ``rms_from_layer_norm(x, g,
    eps=1e-6)`` returns RMSNorm(x) = g * x / sqrt(mean(x**2) + eps) over the last axis, with a
    layer norm (F.layer_norm, nn.LayerNorm) doing the normalization: no
    RMSNorm, no square root, power or mean of its own. Compared with torch's own RMSNorm on
    tokens far from mean 0 and on tokens whose mean square is near eps."""
    ex = "Exercise 1 (RMSNorm from layer norm)"
    name = "rms_from_layer_norm"
    x, gamma, _ = (t.double() for t in _inputs())  # x: mean about 3, far from 0
    d = x.shape[-1]
    got = _refused(ex, rms_from_layer_norm, (x.clone(), gamma.clone()), name)
    got = as_tensor(ex, got, name=f"{name}(x, g)", shape=x.shape, layout="[..., d_model], like x")
    if not got.is_floating_point():  # any float dtype: the grade compares floatness, then values
        fail(ex, f"{name} returned dtype {got.dtype}: RMSNorm's output is a floating-point tensor.")
    truth = nn.functional.rms_norm(x, (d,), gamma, 1e-6)  # the check's experiment: [2, 3, 8]
    if not _close(got, truth):
        ln = nn.functional.layer_norm(x, (d,), gamma, None, 1e-6)
        if _close(got, ln):
            fail(ex, "that is layer norm of x itself: it takes each token's mean out first, and "
                     "these tokens have a mean far from 0, so it is not RMSNorm. C5.8: the two "
                     "agree on zero-mean tokens. Which zero-mean token has the same mean square "
                     "as x and contains x?")  # fmt: skip
        if _close(got, truth / gamma):
            fail(ex, "the normalization is right; the gain g is missing (multiply by g after "
                     "normalizing).")  # fmt: skip
        ratio = (got / truth).double()
        if bool((ratio > 0).all()) and _close(ratio, ratio.mean().expand_as(ratio), 1e-6):
            fail(ex, f"your output is RMSNorm times {ratio.mean().item():.4g} for every feature: "
                     "did the token you gave layer norm have the same mean square as x (count "
                     "its features)?")  # fmt: skip
        fail(ex, "not RMSNorm of x: compare your function with torch.nn.functional.rms_norm on a "
                 "token of your own, far from mean 0.")  # fmt: skip
    small = 1e-3 * _small_variance_inputs()  # mean(x**2) about 1e-6, near eps
    ones = torch.ones(d, dtype=torch.float64)
    for eps in (1e-6, 1e-4):
        args = (small.clone(), ones.clone(), eps)
        got = _refused(ex, rms_from_layer_norm, args, name)
        got = as_tensor(ex, got, name=f"{name}(x, 1, eps={eps:g})", shape=small.shape,
                        layout="[..., d_model], like x")  # fmt: skip
        if not _close(got, nn.functional.rms_norm(small, (d,), ones, eps), 1e-6):
            fail(ex, f"for tokens whose mean square is about 1e-6, near eps, {name}(x, g, "
                     f"eps={eps:g}) is not RMSNorm with that eps: pass eps on to the layer norm "
                     f"(its eps is added to the variance of what it is given, which is what "
                     f"RMSNorm adds it to if that variance is x's mean square).")  # fmt: skip
    passed(ex, "RMSNorm from a layer norm, gain and eps included, on tokens far from mean 0 "
               "(graded on hidden tokens; RMSNorm itself and its formula by hand score 0 "
               "there)")  # fmt: skip


# ------------------------------------------- 05b exercise 2 (exercise 5 before): invariances


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
    """Lesson 5, Going further (05b), exercise 2 (predict, then verify): ``invariances(norm, d_model)`` returns a pair of bools,
    whether ``norm`` gives the same output (to 1e-4) after a constant is added to every feature
    of each token, and after each token is multiplied by a positive number, found by trying it.
    Tried on normalizations of the check's own (not layer norm or RMSNorm), on two widths; one of
    them has an eps, so that a factor so small that eps decides (1e-3) is refused."""
    ex = "Exercise 2 (invariances)"
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
