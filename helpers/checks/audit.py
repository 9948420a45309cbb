"""Checks for the exercises of lesson 9 (trust but verify): repair a broken model until the audit
passes.

Each check builds a fresh broken model (so a student's earlier attempt cannot leak in), applies the
student's repair, makes sure the repaired model still runs and returns float32 logits of the right
shape, then runs :func:`helpers.checklist.audit` on it and names what still fails, with the audit's own
evidence.
"""

from __future__ import annotations

import torch
from torch import nn

from ..checklist import (
    CopiedOutputLM,
    PositionAfterFirstBlockLM,
    ReusedBlockLM,
    audit,
)
from ..checklist.probe import first_tensor as _first_tensor
from ._core import as_tensor, call_described, fail, passed

__all__ = [
    "SETTINGS",
    "PositionAfterFirstBlockLM",
    "ReusedBlockLM",
    "CopiedOutputLM",
    "check_reused_blocks",
    "check_copied_output",
    "check_position_before_first_block",
]

#: The small settings every exercise model is built with.
SETTINGS = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=32)


def _call(exercise: str, fn, args: tuple, name: str, shown: str):
    """Call the student's ``fn(*args)``; every error becomes a one-line verdict."""
    return call_described(exercise, fn, args, name=name, shown=shown)


def _probe() -> torch.Tensor:
    return torch.randint(
        0, SETTINGS["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1)
    )


def _verify(exercise: str, model, focus: str, what: str = "your function") -> None:
    """The repaired ``model`` runs, gives [2, 8, vocab] float32 logits, and passes the audit."""
    if model is None:
        fail(exercise, f"{what} returned None: return the repaired model.")
    if not isinstance(model, nn.Module):
        fail(
            exercise,
            f"{what} should return the repaired model (an nn.Module), got a {type(model).__name__}.",
        )
    tokens = _probe()  # [2, 8]
    out = _call(exercise, model, (tokens,), "the repaired model", "tokens")
    logits = _first_tensor(out)
    if logits is None:
        fail(
            exercise,
            f"the repaired model returned {'None' if out is None else type(out).__name__}: "
            f"its forward must return the logits.",
        )
    want = [*tokens.shape, SETTINGS["vocab_size"]]
    if list(logits.shape) != want:
        fail(
            exercise,
            f"the repaired model's logits have shape {list(logits.shape)}, expected {want} "
            f"[batch, n, vocab_size].",
        )
    if logits.dtype != torch.float32:
        fail(
            exercise,
            f"the repaired model's logits have dtype {logits.dtype}; keep the model in float32.",
        )
    as_tensor(exercise, logits.detach(), name="the repaired model's logits")
    report = audit(model)
    result = report[focus]
    if result.status != "passed":
        verb = "still fails" if result.status == "failed" else "could not be decided"
        fail(exercise, f"{focus} {verb}: " + "; ".join(result.evidence))
    others = [r for r in report if r.status != "passed"]
    if others:
        r = others[0]
        fail(
            exercise,
            f"{focus} passes now, but {r.check} {'fails' if r.status == 'failed' else 'is undecided'}: "
            + "; ".join(r.evidence),
        )
    passed(exercise, f"the audit passes all five checks; {focus}: {result.finding}.")


def _fresh(cls):
    torch.manual_seed(0)
    return cls(**SETTINGS)


def check_reused_blocks(fix_reused_blocks) -> None:
    """Lesson 9, exercise 1 (K4). ``fix_reused_blocks(model)`` returns the model of
    :class:`ReusedBlockLM` repaired: an independent block (its own parameters) at every depth."""
    ex = "Exercise 1 (K4)"
    model = _call(ex, fix_reused_blocks, (_fresh(ReusedBlockLM),), "fix_reused_blocks", "model")
    _verify(ex, model, "K4", "fix_reused_blocks")


def check_copied_output(tie_output) -> None:
    """Lesson 9, exercise 2 (K5). ``tie_output(model)`` returns the model of
    :class:`CopiedOutputLM` repaired: the output projection's weight *is* the embedding's."""
    ex = "Exercise 2 (K5)"
    model = _call(ex, tie_output, (_fresh(CopiedOutputLM),), "tie_output", "model")
    _verify(ex, model, "K5", "tie_output")


def check_position_before_first_block(RepairedLM) -> None:
    """Lesson 9, exercise 3 (K1). ``RepairedLM`` subclasses :class:`PositionAfterFirstBlockLM`
    and overrides ``forward`` so that position is added once, before the first block."""
    ex = "Exercise 3 (K1)"
    if RepairedLM is None:
        fail(
            ex,
            "RepairedLM is None: write it in the exercise cell above, run that cell, then this one.",
        )
    if not (isinstance(RepairedLM, type) and issubclass(RepairedLM, nn.Module)):
        fail(
            ex,
            f"RepairedLM should be a model class (class RepairedLM(PositionAfterFirstBlockLM): ...), "
            f"got a {type(RepairedLM).__name__}.",
        )
    torch.manual_seed(0)
    model = _call(ex, lambda: RepairedLM(**SETTINGS), (), "RepairedLM", "**SETTINGS")
    _verify(ex, model, "K1", "RepairedLM(...)")
