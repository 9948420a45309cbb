"""Lesson 7 exercise checks: the parameter count of a stack, a stack that owns its weights, and
the relative size of each block's contribution to the residual stream.

Each check calls the student's function on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` naming the mistake: None returned, not
implemented yet, the function raised, wrong type, wrong shape, NaN, a count that forgot the
biases or the layer norms or the depth, a stack that reuses one block, the change of the norm
instead of the norm of the change ...
"""

from __future__ import annotations

import torch
from torch import nn

from ..blocks import TransformerBlock, make_stack, run_stack, shared_tensors
from ..params import count_parameters
from ._core import as_number, as_tensor, call, expect_close, fail, passed

__all__ = ["check_parameter_count", "check_independent_stack", "check_relative_contributions"]


# --------------------------------------------------------------------------------------------
# Exercise 1: predict the parameter count of an L-block stack
# --------------------------------------------------------------------------------------------

_COUNT_CASES = [(64, 1, 256), (64, 3, 256), (32, 6, 64), (48, 2, 100), (768, 12, 3072)]


def _true_count(d_model: int, n_layers: int, d_ff: int) -> int:
    """Counted, not computed: the blocks are built on the meta device (nothing is allocated)."""
    with torch.device("meta"):
        return count_parameters(make_stack(n_layers, d_model, 1, d_ff=d_ff))


def _count_mistakes(d: int, L: int, f: int) -> list[tuple[int, str]]:
    attn, ffn, norms = 4 * (d * d + d), 2 * d * f + f + d, 4 * d
    per_block = attn + ffn + norms
    return [
        (
            per_block,
            "that is the count of ONE block: a stack of n_layers blocks that do not share weights "
            "has n_layers times as many (count = n_layers × per_block).",
        ),
        (
            L * (4 * d * d + 2 * d * f + norms),
            "the biases are missing: every Linear has a bias vector (d_model for W_Q, W_K, W_V, "
            "W_O and W2, d_ff for W1).",
        ),
        (
            L * (4 * d * d + 2 * d * f),
            "the biases and the layer norms are missing: each Linear has a bias, and each block has "
            "two LayerNorms with a scale and a shift of d_model values each.",
        ),
        (
            L * (attn + ffn),
            "the layer norms are missing: each block has two LayerNorms (before attention and "
            "before the feed-forward), each with gamma and beta: 4 × d_model per block.",
        ),
        (
            L * (attn + ffn + 2 * d),
            "only one layer norm per block is counted; there are two (one per residual), "
            "4 × d_model values per block.",
        ),
        (
            L * (d * d + d + ffn + norms),
            "the attention has four d_model × d_model matrices (W_Q, W_K, W_V and the output W_O), "
            "each with a bias: 4 (d_model² + d_model).",
        ),
        (
            L * (3 * (d * d + d) + ffn + norms),
            "the output projection W_O of the attention is missing: 4 (d_model² + d_model), not 3.",
        ),
        (
            L * (attn + d * f + f + norms),
            "the feed-forward has two matrices, W1 (d_model × d_ff) and W2 (d_ff × d_model), "
            "plus their biases (d_ff and d_model).",
        ),
    ]


def check_parameter_count(fn) -> None:
    """Exercise 1 of lesson 7: ``fn(d_model, n_layers, d_ff)`` returns the number of parameters of
    ``make_stack(n_layers, d_model, n_heads, d_ff=d_ff)`` (pre-norm blocks, biases everywhere)."""
    ex = "Exercise 1 (parameter count of a stack)"
    for d, L, f in _COUNT_CASES:
        got = call(ex, fn, d, L, f, name="stack_parameter_count")
        got = as_number(ex, got, name=f"stack_parameter_count({d}, {L}, {f})", integer=True)
        want = _true_count(d, L, f)
        if got == want:
            continue
        where = (
            f"for d_model={d}, n_layers={L}, d_ff={f} you returned {got:,}, the stack has {want:,}"
        )
        for value, hint in _count_mistakes(d, L, f):
            if got == value:
                fail(ex, f"{where}: {hint}")
        fail(
            ex,
            f"{where} (off by {got - want:+,}). Count per block: attention 4 (d² + d), "
            f"feed-forward 2·d·d_ff + d_ff + d, two layer norms 4d; then multiply by n_layers.",
        )
    passed(
        ex,
        "count = n_layers × (4(d² + d) + 2·d·d_ff + d_ff + d + 4d), e.g. GPT-2 small's 12 "
        f"blocks hold {_true_count(768, 12, 3072):,} parameters.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 2: a stack whose blocks own their weights
# --------------------------------------------------------------------------------------------


def check_independent_stack(fn) -> None:
    """Exercise 2 of lesson 7: ``fn(n_layers, d_model, n_heads)`` returns n_layers
    :class:`TransformerBlock` that do not share any parameter tensor (an ``nn.ModuleList``)."""
    ex = "Exercise 2 (a stack that owns its weights)"
    for n_layers, d_model, n_heads in [(3, 32, 4), (1, 16, 2), (5, 24, 3)]:
        args = f"make_independent_stack({n_layers}, {d_model}, {n_heads})"
        with torch.random.fork_rng():  # leave the notebook's random state as it was
            stack = call(ex, fn, n_layers, d_model, n_heads, name="make_independent_stack")
        if stack is None:
            fail(ex, f"{args} returned None: did you forget to `return` the stack?")
        if isinstance(stack, TransformerBlock):
            fail(
                ex,
                f"{args} returned a single block; return a stack of {n_layers} blocks (an nn.ModuleList).",
            )
        if not isinstance(stack, nn.ModuleList | nn.Sequential | list | tuple):
            fail(
                ex,
                f"{args} should return an nn.ModuleList of blocks, got a {type(stack).__name__}.",
            )
        if not isinstance(stack, nn.ModuleList | nn.Sequential):
            fail(
                ex,
                f"{args} returned a plain {type(stack).__name__}: wrap the blocks in nn.ModuleList(...) "
                "so that PyTorch sees their parameters (model.parameters(), .to(), saving).",
            )
        blocks = list(stack)
        if len(blocks) != n_layers:
            fail(ex, f"{args} holds {len(blocks)} blocks, expected {n_layers}.")
        for i, b in enumerate(blocks):
            if not isinstance(b, TransformerBlock):
                fail(
                    ex, f"block {i} of {args} is a {type(b).__name__}, expected a TransformerBlock."
                )
            if b.d_model != d_model or b.attention.n_heads != n_heads:
                fail(
                    ex,
                    f"block {i} of {args} has d_model={b.d_model}, n_heads={b.attention.n_heads}; "
                    f"expected d_model={d_model}, n_heads={n_heads} (pass the arguments on).",
                )
        pairs = shared_tensors(blocks)
        if pairs:
            i, name_i, j, name_j = pairs[0]
            n_same = sum(1 for p in pairs if p[0] == i and p[2] == j)
            fail(
                ex,
                f"blocks {i} and {j} of {args} share their parameter tensors ({n_same} of them, e.g. "
                f"{name_j}): the stack reuses one block. `[block] * n` repeats the SAME module; build "
                "a new TransformerBlock for every layer (a loop or a comprehension).",
            )
        with torch.device("meta"):
            per_block = count_parameters(TransformerBlock(d_model, n_heads))
        total = count_parameters(stack)
        if total != n_layers * per_block:
            fail(
                ex,
                f"{args} has {total:,} parameters, expected n_layers × per_block = "
                f"{n_layers} × {per_block:,} = {n_layers * per_block:,}.",
            )
        x = torch.randn(2, 5, d_model, generator=torch.Generator().manual_seed(0))  # [B, n, d]
        try:
            with torch.no_grad():
                y = run_stack(blocks, x)
        except Exception as e:  # noqa: BLE001 - any failure of the stack becomes a verdict
            fail(
                ex,
                f"running the blocks of {args} on a [2, 5, {d_model}] input raised {type(e).__name__}: {e}",
            )
        if not torch.isfinite(y).all():
            fail(ex, f"the blocks of {args} produce NaN or infinite values on a random input.")
    passed(ex, "every block owns its tensors, and the count is exactly n_layers × per_block.")


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
