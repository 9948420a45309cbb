"""Lesson 7 exercise checks: the parameter count of a stack (with and without biases), a
colleague's block with a bug in its residual stream, and the relative size of each block's
contribution to the residual stream.

Each check calls the student's answer on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` naming the mistake: None returned, not
implemented yet, the function raised, wrong type, wrong shape, NaN, a count that forgot the
attention's biases or the layer norms or the depth, a block that still normalizes the stream or
is post-norm, the change of the norm instead of the norm of the change ...
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from ..blocks import make_stack, run_stack
from ..params import count_parameters
from ._core import as_number, as_tensor, call, call_described, expect_close, fail, passed

__all__ = ["check_parameter_count", "check_fixed_block", "check_relative_contributions"]


# --------------------------------------------------------------------------------------------
# Exercise 1: predict the parameter count of an L-block stack, with and without biases
# --------------------------------------------------------------------------------------------

# (d_model, n_layers, d_ff, bias): the bias=False cases tell the attention's biases (4 d, gone
# with bias=False) apart from the layer norms (4 d, kept), which cost the same with bias=True
_COUNT_CASES = [
    (64, 1, 256, True),
    (64, 3, 256, True),
    (32, 6, 64, True),
    (48, 2, 100, True),
    (64, 3, 256, False),
    (32, 6, 64, False),
    (768, 12, 3072, True),
]


def _true_count(d_model: int, n_layers: int, d_ff: int, bias: bool = True) -> int:
    """Counted, not computed: the blocks are built on the meta device (nothing is allocated)."""
    with torch.device("meta"):
        return count_parameters(make_stack(n_layers, d_model, 1, d_ff=d_ff, bias=bias))


def _parts(d: int, f: int, b: bool) -> tuple[int, int, int]:
    """attention, feed-forward, layer norms of one block."""
    return 4 * d * d + (4 * d if b else 0), 2 * d * f + (f + d if b else 0), 4 * d


def _count_mistakes():
    """(count of the mistake as a function of d, L, f, bias; the verdict's hint)."""

    def per(d, f, b):
        return sum(_parts(d, f, b))

    return [
        (
            lambda d, L, f, b: per(d, f, b),
            "that is the count of ONE block: a stack of n_layers blocks that do not share weights "
            "has n_layers times as many (count = n_layers × per_block).",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - (4 * d if b else 0)),
            "the attention's biases are missing: with bias=True each of its four projections "
            "W_Q, W_K, W_V and W_O has a bias of d_model values, 4 × d_model per block "
            "(your counts with bias=False are right).",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - 4 * d),
            "the layer norms are missing: each block has two LayerNorms (before attention and "
            "before the feed-forward), each with gamma and beta: 4 × d_model per block, with or "
            "without bias.",
        ),
        (
            lambda d, L, f, b: L * (4 * d * d + 2 * d * f + 4 * d),
            "the biases of the Linear layers are missing: with bias=True every Linear has a bias "
            "vector (d_model for W_Q, W_K, W_V, W_O and W2, d_ff for W1).",
        ),
        (
            lambda d, L, f, b: L * (4 * d * d + 2 * d * f),
            "the biases and the layer norms are missing: with bias=True each Linear has a bias, "
            "and each block always has two LayerNorms with a scale and a shift of d_model values.",
        ),
        (
            lambda d, L, f, b: L * per(d, f, True),
            "with bias=False the Linear layers have no biases, and you counted them anyway: "
            "count only their matrices there (the layer norms keep their scale and shift).",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - (0 if b else 2 * d)),
            "bias=False removes the biases of the Linear layers only: each LayerNorm keeps its "
            "shift (beta) as well as its scale, 4 × d_model per block.",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - (0 if b else 4 * d)),
            "bias=False removes the biases of the Linear layers only: the two LayerNorms keep "
            "their scale and shift, 4 × d_model per block.",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - 2 * d),
            "only one layer norm per block is counted; there are two (one per residual), "
            "4 × d_model values per block.",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - (d if b else 0)),
            "the feed-forward's second bias b2 (d_model values) is missing.",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - (f if b else 0)),
            "the feed-forward's first bias b1 (d_ff values) is missing.",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - 3 * (d * d + (d if b else 0))),
            "the attention has four d_model × d_model matrices (W_Q, W_K, W_V and the output W_O), "
            "each with a bias when bias=True: 4 (d_model² + d_model).",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - (d * d + (d if b else 0))),
            "the output projection W_O of the attention is missing: four projections, not three.",
        ),
        (
            lambda d, L, f, b: L * (per(d, f, b) - d * f - (d if b else 0)),
            "the feed-forward has two matrices, W1 (d_model × d_ff) and W2 (d_ff × d_model), "
            "plus (with bias=True) their biases (d_ff and d_model).",
        ),
    ]


def check_parameter_count(fn) -> None:
    """Exercise 1 of lesson 7: ``fn(d_model, n_layers, d_ff, bias=True)`` returns the number of
    parameters of ``make_stack(n_layers, d_model, n_heads, d_ff=d_ff, bias=bias)`` (pre-norm
    blocks; ``bias`` switches the biases of every Linear; the layer norms always keep theirs).

    Every case is evaluated before a verdict, so that a mistake is named by the one pattern that
    explains all the answers (forgetting the attention's biases and forgetting the layer norms
    both cost 4 d_model with bias=True; only the first is right with bias=False)."""
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
    answers = {}
    for d, L, f, b in _COUNT_CASES:
        shown = f"{d}, {L}, {f}, bias={b}"
        got = call_described(
            ex, fn, (d, L, f), {"bias": b}, name="stack_parameter_count", shown=shown
        )
        answers[(d, L, f, b)] = as_number(
            ex, got, name=f"stack_parameter_count({shown})", integer=True
        )
    wants = {case: _true_count(*case) for case in _COUNT_CASES}
    if answers == wants:
        passed(
            ex,
            "count = n_layers × (4 d² + 2·d·d_ff + 4d, plus 4d + d_ff + d with biases), e.g. GPT-2 "
            f"small's 12 blocks hold {_true_count(768, 12, 3072):,} parameters.",
        )
        return
    wrong = [case for case in _COUNT_CASES if answers[case] != wants[case]]
    for mistake, hint in _count_mistakes():
        if all(answers[case] == mistake(*case) for case in _COUNT_CASES):
            d, L, f, b = wrong[0]
            fail(
                ex,
                f"for d_model={d}, n_layers={L}, d_ff={f}, bias={b} you returned "
                f"{answers[wrong[0]]:,}, the stack has {wants[wrong[0]]:,}: {hint}",
            )
    d, L, f, b = case = wrong[0]
    fail(
        ex,
        f"for d_model={d}, n_layers={L}, d_ff={f}, bias={b} you returned {answers[case]:,}, the "
        f"stack has {wants[case]:,} (off by {answers[case] - wants[case]:+,}). Count per block: "
        "attention 4 d² (+ 4d biases), feed-forward 2·d·d_ff (+ d_ff + d biases), two layer "
        "norms 4d (always); then multiply by n_layers.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 2: find the bug in a colleague's pre-norm block
# --------------------------------------------------------------------------------------------

_BLOCK_PARTS = ("ln1", "attention", "ln2", "feedforward")


def _block_variants(blk, x: torch.Tensor) -> tuple[torch.Tensor, list[tuple[torch.Tensor, str]]]:
    """The pre-norm output of ``blk``'s own modules on x, and the outputs of the usual wrong fixes."""
    ln1, attn, ln2, ffn = (getattr(blk, name) for name in _BLOCK_PARTS)
    h = x + attn(ln1(x))  # [B, n, d]: the attention half, right in the colleague's block
    right = h + ffn(ln2(h))  # [B, n, d]
    h_normed = ln2(h)
    post = ln1(x + attn(x))  # [B, n, d]: the post-norm attention half
    wrong = [
        (
            h_normed + ffn(h_normed),
            "the stream is still normalized: `x = self.ln2(x)` replaces the running vector by its "
            "layer norm, so every block throws away the size of what came before. Keep x and add "
            "the feed-forward's output of the normalized copy: x + FFN(LN2(x)).",
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
            "the feed-forward's output replaces the stream: there is no residual around it any "
            "more. Add it to the stream: x + FFN(LN2(x)).",
        ),
        (
            h + ffn(h),
            "the feed-forward now reads the raw stream: ln2 is not used at all. In a pre-norm "
            "block each sublayer reads the layer norm of the stream: x + FFN(LN2(x)).",
        ),
        (
            h + ffn(ln1(h)),
            "the feed-forward's input goes through ln1, the attention's layer norm; each sublayer "
            "has its own (ln2 for the feed-forward), with its own learned scale and shift.",
        ),
        (
            h + ffn(ln2(x)),
            "the feed-forward reads LN2 of the block's INPUT, not of the stream after attention "
            "(that is the 'parallel' block of GPT-J and PaLM, another design): x' = x + MHA(LN1(x)), "
            "then x' + FFN(LN2(x')).",
        ),
    ]
    return right, wrong


def check_fixed_block(FixedBlock) -> None:
    """Exercise 2 of lesson 7. ``FixedBlock`` is the colleague's block (modules ``ln1``,
    ``attention``, ``ln2``, ``feedforward``) with ``forward`` repaired to the pre-norm block
    ``x' = x + MHA(LN1(x)); y = x' + FFN(LN2(x'))``. Its output is compared, on the instance's own
    modules (layer norms given random scales and shifts, so that ln1 and ln2 differ), with the
    right block and with the usual wrong fixes."""
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
        right, wrong = _block_variants(blk, x)
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
    expect_close(ex, got, right, name="FixedBlock(...)(x)", atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------------------------
# Exercise 3: the relative size of each block's contribution
# --------------------------------------------------------------------------------------------


def _reference_relative(hidden: list[torch.Tensor]) -> torch.Tensor:
    h = torch.stack([t.detach().double() for t in hidden])  # [L+1, B, n, d]
    change = (h[1:] - h[:-1]).norm(dim=-1)  # [L, B, n]
    return (change / h[:-1].norm(dim=-1)).mean(dim=(1, 2))  # [L]


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
        want = _reference_relative(hidden)
        h = torch.stack([t.double() for t in hidden])  # [L+1, B, n, d]
        norms = h.norm(dim=-1)  # [L+1, B, n]
        change = (h[1:] - h[:-1]).norm(dim=-1)  # [L, B, n]
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
        expect_close(ex, got64, want, name="relative_contributions(hidden)", rtol=1e-4, atol=1e-6)
    passed(ex, "each block's contribution, relative to the stream it is added to.")
