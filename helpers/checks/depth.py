# Past ~450 lines on purpose: lesson 7's three exercise checks, one file per lesson as for every lesson
# (helpers/checks/<lesson>.py); each check's table of named mistakes sits beside the check that uses it.
"""Lesson 7 exercise checks: the parameter count of a stack (with and without biases), a
colleague's block with a bug in its residual stream, and the relative size of each block's
contribution to the residual stream.

Each check calls the student's answer on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` naming the mistake: None returned, not
implemented yet, the function raised, wrong type, wrong shape, NaN, a count that forgot the
attention's biases or the layer norms or the depth (or built a model instead of using the
formulas), a block that still normalizes the stream or is post-norm, the change of the norm
instead of the norm of the change ...

These checks are instant feedback only: the grade comes from hidden tests on other cases. What a
right answer gives is computed inside each check (from the course's own modules) and never
printed; nothing here is an answer to import.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from ..blocks import make_stack, run_stack
from ..grading import CallNames
from ._core import as_number, as_tensor, call, call_described, fail, passed

__all__ = ["check_parameter_count", "check_fixed_block", "check_relative_contributions"]


# --------------------------------------------------------------------------------------------
# Exercise 1: predict the parameter count of an L-block stack, with and without biases
# --------------------------------------------------------------------------------------------

# (d_model, n_layers, d_ff, bias): the bias=False cases tell the attention's biases (gone with
# bias=False) apart from the layer norms (kept), which cost the same with bias=True. Inputs only:
# the counts they are compared with are taken inside the check, from blocks built on the meta
# device, and never printed.
_COUNT_CASES = [
    (64, 1, 256, True),
    (64, 3, 256, True),
    (32, 6, 64, True),
    (48, 2, 100, True),
    (64, 3, 256, False),
    (32, 6, 64, False),
    (768, 12, 3072, True),
]

#: Torch functions that building or measuring a model calls, as TorchFunctionMode names them
#: (a parameter is made with ``torch.empty``; a size is read with ``numel``, ``size``, ``len``,
#: ``.shape`` or ``.nbytes`` (``__get__``), ...; ``torch.ops.aten``'s ``name.overload`` forms):
#: exercise 1 asks for the formulas, which call none of them. Its hidden tests forbid the same.
_MODEL_CALLS = tuple(
    f"{name}.{overload}" if overload else name
    for name, overloads in (
        ("empty", "memory_format"),
        ("empty_strided", "default"),
        ("numel", "default"),
        ("size", "int default"),
        ("sym_size", "int default"),
        ("sym_numel", "default"),
        ("__get__", ""),
        ("__len__", ""),
        ("stride", ""),
        ("element_size", ""),
        ("untyped_storage", ""),
    )
    for overload in ("", *overloads.split())
)


#: What the grader forbids per exercise (tools/grading/spec.py reads it from here).
FORBIDDEN = {"l7_ex1": _MODEL_CALLS}


# Each usual mistake: the parameters of one block it leaves out (a test on the parameter's name
# within a block, given bias), whether it counts one block only, and the verdict's hint.
def _names(*parts):
    return lambda name, bias: any(part in name for part in parts)


_COUNT_MISTAKES = [
    (
        lambda name, bias: False,
        True,
        "that is the count of ONE block: a stack of n_layers blocks that do not share weights "
        "has n_layers times as many.",
    ),
    (
        lambda name, bias: name.startswith("attn.sublayer.") and name.endswith(".bias"),
        False,
        "the attention's biases are missing: with bias=True each of its four projections "
        "W_Q, W_K, W_V and W_O has a bias of d_model values (your counts with bias=False are "
        "right).",
    ),
    (
        _names("norm."),
        False,
        "the layer norms are missing: each block has two LayerNorms (before attention and "
        "before the feed-forward), each with a scale and a shift, with or without bias.",
    ),
    (
        lambda name, bias: "sublayer." in name and name.endswith(".bias"),
        False,
        "the biases of the Linear layers are missing: with bias=True every Linear has a bias "
        "vector (d_model values for W_Q, W_K, W_V, W_O and W2, d_ff for W1).",
    ),
    (
        lambda name, bias: "norm." in name or ("sublayer." in name and name.endswith(".bias")),
        False,
        "the biases and the layer norms are missing: with bias=True each Linear has a bias, "
        "and each block always has two LayerNorms with a scale and a shift of d_model values.",
    ),
    (
        None,  # the bias=True count at every case
        False,
        "with bias=False the Linear layers have no biases, and you counted them anyway: "
        "count only their matrices there (the layer norms keep their scale and shift).",
    ),
    (
        lambda name, bias: not bias and name.endswith("norm.bias"),
        False,
        "bias=False removes the biases of the Linear layers only: each LayerNorm keeps its "
        "shift (beta) as well as its scale.",
    ),
    (
        lambda name, bias: not bias and "norm." in name,
        False,
        "bias=False removes the biases of the Linear layers only: the two LayerNorms keep "
        "their scale and shift.",
    ),
    (
        _names("ffn.norm."),
        False,
        "only one layer norm per block is counted; there are two (one per residual).",
    ),
    (_names("w2.bias"), False, "the feed-forward's second bias b2 (d_model values) is missing."),
    (_names("w1.bias"), False, "the feed-forward's first bias b1 (d_ff values) is missing."),
    (
        _names("k_proj.", "v_proj.", "out_proj."),
        False,
        "the attention has four d_model × d_model matrices (W_Q, W_K, W_V and the output W_O), "
        "each with a bias when bias=True.",
    ),
    (
        _names("out_proj."),
        False,
        "the output projection W_O of the attention is missing: four projections, not three.",
    ),
    (
        _names("w2."),
        False,
        "the feed-forward has two matrices, W1 (d_model × d_ff) and W2 (d_ff × d_model), "
        "plus (with bias=True) their biases.",
    ),
]


def check_parameter_count(fn) -> None:
    """Exercise 1 of lesson 7: ``fn(d_model, n_layers, d_ff, bias=True)`` returns the number of
    parameters of ``make_stack(n_layers, d_model, n_heads, d_ff=d_ff, bias=bias)``, from the
    formulas (it builds no model).

    Every case is evaluated before a verdict, so that a mistake is named by the one pattern that
    explains all the answers. The counts are taken here from blocks built on the meta device;
    a verdict says what is missing, never the count itself."""
    ex = "Exercise 1 (parameter count of a stack)"
    if callable(fn):
        try:
            inspect.signature(fn).bind(64, 1, 256, bias=True)
        except TypeError:
            fail(
                ex,
                "stack_parameter_count must take the argument bias: "
                "def stack_parameter_count(d_model, n_layers, d_ff, bias=True).",
            )
        except ValueError:  # no signature to read (a builtin): let the calls tell
            pass

    def answer(d, L, f, b):  # b None: bias left at its default
        kwargs = {} if b is None else {"bias": b}
        shown = f"{d}, {L}, {f}" + ("" if b is None else f", bias={b}")
        seen = CallNames()
        with seen:
            got = call_described(
                ex, fn, (d, L, f), kwargs, name="stack_parameter_count", shown=shown
            )
        used = sorted(seen.names & set(_MODEL_CALLS))
        if used:
            fail(
                ex,
                f"stack_parameter_count({shown}) builds or measures tensors (it called "
                f"{', '.join(used)}): use the formulas, not a model.",
            )
        return as_number(ex, got, name=f"stack_parameter_count({shown})", integer=True)

    answers = {case: answer(*case) for case in _COUNT_CASES}
    d, L, f, _ = _COUNT_CASES[1]
    if answer(d, L, f, None) != answers[d, L, f, True]:
        fail(
            ex,
            f"stack_parameter_count({d}, {L}, {f}) differs from stack_parameter_count({d}, {L}, "
            f"{f}, bias=True): bias must default to True, as in make_stack.",
        )

    built: dict[tuple, dict[str, int]] = {}

    def sizes(d, f, b):  # {parameter name within a block: its number of values}
        if (d, f, b) not in built:
            with torch.random.fork_rng(), torch.device("meta"):
                block = make_stack(1, d, 1, d_ff=f, bias=b)[0]
            built[d, f, b] = {name: p.numel() for name, p in block.named_parameters()}
        return built[d, f, b]

    def count(case, leave_out=lambda name, bias: False, one_block=False, bias=None):
        d, L, f, b = case
        b = b if bias is None else bias
        kept = sum(n for name, n in sizes(d, f, b).items() if not leave_out(name, case[3]))
        return kept if one_block else L * kept

    if all(answers[case] == count(case) for case in _COUNT_CASES):
        passed(
            ex,
            "the count is n_layers times one block's; n_heads does not enter it (the heads "
            "split d_model), and bias=False removes the Linear layers' biases only.",
        )
        return
    wrong = next(case for case in _COUNT_CASES if answers[case] != count(case))
    d, L, f, b = wrong
    returned = f"for d_model={d}, n_layers={L}, d_ff={f}, bias={b} you returned {answers[wrong]:,}"
    for leave_out, one_block, hint in _COUNT_MISTAKES:
        if leave_out is None:
            predicted = {case: count(case, bias=True) for case in _COUNT_CASES}
        else:
            predicted = {case: count(case, leave_out, one_block) for case in _COUNT_CASES}
        if all(answers[case] == predicted[case] for case in _COUNT_CASES):
            fail(ex, f"{returned}, which is not the stack's count: {hint}")
    fail(
        ex,
        f"{returned}, which is not the stack's count, and no single usual mistake explains your "
        "answers. Count, per block, the attention's four projections, the feed-forward's two "
        "Linear layers (with their biases when bias=True) and the two layer norms; then "
        "multiply by n_layers.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 2: find the bug in a colleague's pre-norm block
# --------------------------------------------------------------------------------------------

_BLOCK_PARTS = ("ln1", "attention", "ln2", "feedforward")


def _differs(ex: str, got: torch.Tensor, want: torch.Tensor, name: str, atol: float, rtol: float):
    """Fail saying how far ``got`` is from the right result, without printing that result."""
    got64, want64 = got.detach().double(), want.detach().double()
    if torch.allclose(got64, want64, atol=atol, rtol=rtol):
        return
    relative = ((got64 - want64).norm() / want64.norm().clamp_min(1e-12)).item()
    fail(
        ex,
        f"{name} differs from the right result (relative difference {relative:.2g} over all "
        "entries), and not in one of the usual ways.",
    )


def check_fixed_block(FixedBlock) -> None:
    """Exercise 2 of lesson 7. ``FixedBlock`` is the colleague's block (modules ``ln1``,
    ``attention``, ``ln2``, ``feedforward``) with ``forward`` repaired to the pre-norm block the
    exercise states. Its output is compared, on the instance's own modules (layer norms given
    random scales and shifts, so that ln1 and ln2 differ), with what those modules compute in a
    pre-norm block and in the usual wrong fixes, computed here."""
    ex = "Exercise 2 (find the bug in a block)"
    if FixedBlock is None:
        fail(
            ex,
            "FixedBlock is None: write it in the exercise cell above, run that cell, then this one.",
        )
    if not (isinstance(FixedBlock, type) and issubclass(FixedBlock, nn.Module)):
        fail(
            ex,
            "FixedBlock should be a class (class FixedBlock(ColleagueBlock): with a new forward), "
            f"got a {type(FixedBlock).__name__}.",
        )
    d_model, n_heads = 16, 2
    with torch.random.fork_rng():  # leave the notebook's random state as it was
        torch.manual_seed(0)
        blk = call(ex, FixedBlock, d_model, n_heads, name="FixedBlock")
    if not isinstance(blk, nn.Module):
        fail(ex, f"FixedBlock({d_model}, {n_heads}) is a {type(blk).__name__}, not a module.")
    for name in _BLOCK_PARTS:
        if not isinstance(getattr(blk, name, None), nn.Module):
            fail(
                ex,
                f"FixedBlock({d_model}, {n_heads}) has no module `{name}`: keep the colleague's "
                "__init__ (subclass ColleagueBlock and override only forward).",
            )
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name in ("ln1", "ln2"):  # distinct, non-trivial layer norms
            for pname, p in getattr(blk, name).named_parameters():
                offset = 1.0 if pname.endswith("weight") else 0.0  # scale near 1, shift near 0
                p.copy_(offset + 0.5 * torch.randn(p.shape, generator=g))
    x = 3.0 * torch.randn(2, 7, d_model, generator=g)  # [B, n, d], a stream of size about 12
    with torch.no_grad():
        got = call_described(ex, blk, (x,), name="FixedBlock.forward", shown="x")
        got = as_tensor(
            ex, got, name="FixedBlock(...)(x)", shape=x.shape, layout="[batch, n, d_model]"
        )
        ln1, attn, ln2, ffn = (getattr(blk, name) for name in _BLOCK_PARTS)
        h = x + attn(ln1(x))  # [B, n, d]: the attention half, right in the colleague's block
        right = h + ffn(ln2(h))  # [B, n, d]
        h_normed = ln2(h)
        post = ln1(x + attn(x))  # [B, n, d]: the post-norm attention half
        wrong = [
            (
                h_normed + ffn(h_normed),
                "the stream is still normalized: `x = self.ln2(x)` replaces the running vector by "
                "its layer norm, so every block throws away the size of what came before. Keep x "
                "and add the feed-forward's output of the normalized copy: x + FFN(LN2(x)).",
            ),
            (
                ln2(h + ffn(h)),
                "this normalizes the sum, LN2(x + FFN(x)): that is the post-norm form of the "
                "feed-forward half. A pre-norm block normalizes only the sublayer's input: "
                "x + FFN(LN2(x)).",
            ),
            (
                ln2(post + ffn(post)),
                "this is post-norm (LN(x + Sublayer(x)) for both halves); the colleague's block is "
                "meant to be pre-norm: x + Sublayer(LN(x)).",
            ),
            (
                ffn(ln2(h)),
                "the feed-forward's output replaces the stream: there is no residual around it "
                "any more. Add it to the stream: x + FFN(LN2(x)).",
            ),
            (
                h + ffn(h),
                "the feed-forward now reads the raw stream: ln2 is not used at all. In a pre-norm "
                "block each sublayer reads the layer norm of the stream: x + FFN(LN2(x)).",
            ),
            (
                h + ffn(ln1(h)),
                "the feed-forward's input goes through ln1, the attention's layer norm; each "
                "sublayer has its own (ln2 for the feed-forward), with its own learned scale and "
                "shift.",
            ),
            (
                h + ffn(ln2(x)),
                "the feed-forward reads LN2 of the block's INPUT, not of the stream after "
                "attention (that is the 'parallel' block of GPT-J and PaLM, another design): "
                "x' = x + MHA(LN1(x)), then x' + FFN(LN2(x')).",
            ),
        ]
    if torch.allclose(got, right, atol=1e-5, rtol=1e-4):
        passed(
            ex,
            "the feed-forward reads LN2 of the stream and adds its output to the stream itself: "
            "x' = x + MHA(LN1(x)), y = x' + FFN(LN2(x')), the pre-norm block.",
        )
        return
    for value, hint in wrong:
        if torch.allclose(got, value, atol=1e-5, rtol=1e-4):
            fail(ex, hint)
    _differs(ex, got, right, "FixedBlock(...)(x)", atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------------------------
# Exercise 3: the relative size of each block's contribution
# --------------------------------------------------------------------------------------------


def _test_streams() -> list[list[torch.Tensor]]:
    """Two streams: a real pre-norm stack at initialization, and one whose steps rotate each
    token's vector (its size never changes, yet every step changes it a lot)."""
    g = torch.Generator().manual_seed(7)
    with torch.random.fork_rng():  # leave the notebook's random state as it was
        torch.manual_seed(7)
        stack = make_stack(4, 16, 2)
        for p in stack.parameters():  # Xavier scale, so that each block visibly adds something
            if p.dim() == 2:
                nn.init.xavier_normal_(p)
    with torch.no_grad():
        _, real = run_stack(stack, torch.randn(2, 6, 16, generator=g), return_hidden=True)
    x = torch.randn(3, 5, 8, generator=g)  # [B, n, d]
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g))  # an orthogonal matrix: a rotation
    rotated = [x]
    for _ in range(3):
        rotated.append(rotated[-1] @ q)  # [B, n, d], same norms, different vectors
    return [[t.detach() for t in real], rotated]


def check_relative_contributions(fn) -> None:
    """Exercise 3 of lesson 7: ``fn(hidden)`` with ``hidden = [h_0, ..., h_L]`` (each
    [batch, n, d_model]) returns a tensor [L]: for block l, the mean over tokens of
    ``||h_l - h_{l-1}|| / ||h_{l-1}||``."""
    ex = "Exercise 3 (relative contribution of each block)"
    for hidden in _test_streams():
        L = len(hidden) - 1
        got = call(ex, fn, [h.clone() for h in hidden], name="relative_contributions")
        got = as_tensor(ex, got, name="relative_contributions(hidden)")
        if got.dim() == 3 and tuple(got.shape) == (L, *hidden[0].shape[:2]):
            fail(
                ex,
                f"you returned one value per token, shape {list(got.shape)}; average over the batch "
                f"and positions to get one number per block, shape [{L}].",
            )
        if tuple(got.shape) == (L + 1,):
            fail(
                ex,
                f"you returned {L + 1} values, one per state h_0..h_L; a contribution is between two "
                f"states, so there are {L} (one per block).",
            )
        if tuple(got.shape) != (L,):
            fail(
                ex,
                f"relative_contributions(hidden) has shape {list(got.shape)}, expected [{L}] (one value per block).",
            )
        h = torch.stack([t.double() for t in hidden])  # [L+1, B, n, d]
        norms = h.norm(dim=-1)  # [L+1, B, n]
        change = (h[1:] - h[:-1]).norm(dim=-1)  # [L, B, n]
        want = (change / norms[:-1]).mean(dim=(1, 2))  # [L], computed here, never printed
        mistakes = [
            (
                ((norms[1:] - norms[:-1]) / norms[:-1]).mean(dim=(1, 2)),
                "you measured how much the SIZE of the stream changed, (||h_l|| - ||h_(l-1)||) / "
                "||h_(l-1)||; the contribution is the size of the CHANGE, ||h_l - h_(l-1)||, which is "
                "large even when the stream only turns.",
            ),
            (
                (norms[1:] - norms[:-1]).mean(dim=(1, 2)),
                "you measured how much the SIZE of the stream changed, ||h_l|| - ||h_(l-1)||; the "
                "contribution is the size of the CHANGE, ||h_l - h_(l-1)||, divided by ||h_(l-1)||.",
            ),
            (
                ((norms[1:] - norms[:-1]).abs() / norms[:-1]).mean(dim=(1, 2)),
                "you measured |‖h_l‖ - ‖h_(l-1)‖|, the change of the stream's size; take the norm of "
                "the difference, ||h_l - h_(l-1)||, instead.",
            ),
            (
                change.mean(dim=(1, 2)),
                "the sizes are not divided by ||h_(l-1)||: the question asks for the contribution "
                "relative to the stream it is added to.",
            ),
            (
                (change / norms[1:]).mean(dim=(1, 2)),
                "you divided by ||h_l||, the stream AFTER the block; divide by ||h_(l-1)||, the "
                "stream the block's contribution is added to.",
            ),
            (
                (norms[1:] / norms[:-1]).mean(dim=(1, 2)),
                "you computed ||h_l|| / ||h_(l-1)||, how much the stream grew; the contribution "
                "is the difference h_l - h_(l-1) (its norm, divided by ||h_(l-1)||).",
            ),
            (
                change.mean(dim=(1, 2)) / norms[:-1].mean(dim=(1, 2)),
                "you divided the mean change by the mean stream size; divide token by token, "
                "||h_l - h_(l-1)|| / ||h_(l-1)|| for each token, then take the mean.",
            ),
        ]
        got64 = got.detach().double()
        if torch.allclose(got64, want, rtol=1e-4, atol=1e-6):
            continue
        for value, hint in mistakes:
            if torch.allclose(got64, value, rtol=1e-4, atol=1e-6):
                fail(ex, hint)
        _differs(ex, got64, want, "relative_contributions(hidden)", atol=1e-6, rtol=1e-4)
    passed(ex, "each block's contribution, relative to the stream it is added to.")
