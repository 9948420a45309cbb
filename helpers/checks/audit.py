"""Checks for the exercises of lesson 10 (trust but verify): repair a broken model until the audit
passes, then audit a model nobody explained.

Each repair check builds a fresh broken model (so a student's earlier attempt cannot leak in),
applies the student's repair, makes sure the repaired model still runs and returns float32 logits
of the right shape, then runs :func:`helpers.checklist.audit` on it and names what still fails,
with the audit's own evidence.

The open-ended audit (exercise 4, :func:`check_audit_verdicts`, in
:mod:`helpers.checks.audit_verdicts` and re-exported here): the check makes sure the
verdicts are five, readable, agree with the audit wherever the audit itself decides (running it
live on the model), and agree with the check's own experiments on the checks the audit leaves
undecided (:func:`undecided_by_experiment`), so that the check's verdict is the grade's; the
written explanation is graded by the instructor.
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
from ..model import LMConfig, TransformerLM
from ..params import count_parameters
from ._core import as_tensor, call_described, fail, passed
from .audit_verdicts import (
    VERDICTS,
    check_audit_verdicts,
    normalized_verdicts,
    undecided_by_experiment,
)

__all__ = [
    "SETTINGS",
    "PositionAfterFirstBlockLM",
    "ReusedBlockLM",
    "CopiedOutputLM",
    "MatrixHead",
    "TransposedHeadLM",
    "check_reused_blocks",
    "check_copied_output",
    "check_tie_transposed",
    "check_position_before_first_block",
    "blocks_with_the_same_weights",
    "repaired_logits_problem",
    "undecided_by_experiment",
    "VERDICTS",
    "normalized_verdicts",
    "check_audit_verdicts",
]

#: The small model every exercise model is built with; :data:`SETTINGS` its keywords
#: (``{"vocab_size": 100, "d_model": 32, "n_layers": 2, "n_heads": 4, "max_len": 32}``).
AUDIT_MODEL = LMConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=32)
SETTINGS = AUDIT_MODEL.keywords()


def _call(exercise: str, fn, args: tuple, name: str, shown: str):
    """Call the student's ``fn(*args)``; every error becomes a one-line verdict."""
    return call_described(exercise, fn, args, name=name, shown=shown)


def _probe() -> torch.Tensor:
    return torch.randint(
        0, SETTINGS["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1)
    )


def _verify(
    exercise: str, model, focus: str, what: str = "your function", tied: bool = False
) -> str:
    """The repaired ``model`` runs, gives [2, 8, vocab] float32 logits, and passes the audit;
    returns what the pass message says about it."""
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
    if tied and result.status == "passed" and not result.finding.startswith("tied"):
        fail(
            exercise,
            f"the model is still untied ({result.finding}): the output projection must use the "
            "embedding matrix itself.",
        )
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
    return f"the audit passes all five checks; {focus}: {result.finding}."


def _fresh(cls):
    torch.manual_seed(0)
    return cls(**SETTINGS)


def blocks_with_the_same_weights(model) -> list[str]:
    """Lesson 10, exercise 1 (what the check and the hidden test read). The pairs of ``model``'s
    blocks (``model.blocks``) that hold equal values in one of their weight matrices (a
    parameter of two or more dimensions), as ``"blocks.1 and blocks.0 (attention.w_q.weight)"``:
    deep copies of one block are independent but identical, not freshly initialized. Empty when
    every block's matrices differ from every other's."""
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList):
        raise TypeError(f"model.blocks must be an nn.ModuleList, got {type(blocks).__name__}")
    same = []
    for j in range(len(blocks)):
        for i in range(j):
            mine = dict(blocks[j].named_parameters())
            for name, p in blocks[i].named_parameters():
                q = mine.get(name)
                if (
                    p.dim() >= 2
                    and q is not None
                    and q.shape == p.shape
                    and torch.equal(q.detach(), p.detach())
                ):
                    same.append(f"blocks.{j} and blocks.{i} ({name})")
                    break
    return same


def _outside_blocks(model) -> dict[str, torch.Tensor]:
    return {
        name: p.detach().clone()
        for name, p in model.named_parameters()
        if not name.startswith("blocks.")
    }


class MatrixHead(nn.Module):
    """Lesson 10, exercise 2: an output projection stored the way the formula writes it,
    ``logits = h @ W`` with ``W`` of shape [d_model, vocab_size] (nn.Linear stores [out, in])."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.W = nn.Parameter(torch.randn(d_model, vocab_size) * d_model**-0.5)  # [d, V]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.W  # [B, n, d] @ [d, V] -> [B, n, V]


class TransposedHeadLM(TransformerLM):
    """Lesson 10, exercise 2: an untied model whose output projection is a :class:`MatrixHead`
    (its own [d_model, vocab_size] matrix), not an ``nn.Linear``."""

    def __init__(self, *args, **kwargs):
        kwargs["tie_weights"] = False
        super().__init__(*args, **kwargs)
        self.lm_head = MatrixHead(self.config.d_model, self.config.vocab_size)


def _same_model(exercise: str, given, returned, what: str) -> None:
    """A repair returns the model it was given (its embedding is still the same tensor)."""
    if returned is given:
        return
    emb = getattr(returned, "token_embedding", None)
    if not (isinstance(emb, nn.Module) and emb.weight is given.token_embedding.weight):
        fail(
            exercise,
            f"{what} returned a different model: repair the one you were given (its "
            "token_embedding must stay), do not build a new one.",
        )


def check_reused_blocks(fix_reused_blocks) -> None:
    """Lesson 10, exercise 1 (K4). ``fix_reused_blocks(model)`` returns the model of
    :class:`ReusedBlockLM` repaired: an independent block (its own parameters) at every depth."""
    ex = "Exercise 1 (K4)"
    given = _fresh(ReusedBlockLM)
    kept = _outside_blocks(given)
    model = _call(ex, fix_reused_blocks, (given,), "fix_reused_blocks", "model")
    if model is not None and isinstance(model, nn.Module):
        _same_model(ex, given, model, "fix_reused_blocks")
    message = _verify(ex, model, "K4", "fix_reused_blocks")
    for name, before in kept.items():
        after = dict(model.named_parameters()).get(name)
        if after is not None and not torch.equal(after.detach(), before):
            fail(
                ex,
                f"your repair changed {name}: a repair keeps the model it was given; draw fresh "
                "weights for the blocks only (init_weights(block), not init_weights(model)).",
            )
    same = blocks_with_the_same_weights(model)
    if same:
        fail(
            ex,
            f"every block has its own parameters now, but {same[0]} hold the same values: copies "
            "of one block are independent but identical; give each depth freshly initialized "
            "weights (init_weights(block)).",
        )
    passed(ex, message)


def check_copied_output(tie_output) -> None:
    """Lesson 10 (K5). ``tie_output(model)`` returns the model of :class:`CopiedOutputLM`
    repaired: the output projection's weight *is* the embedding's."""
    ex = "Exercise 2 (K5)"
    given = _fresh(CopiedOutputLM)
    model = _call(ex, tie_output, (given,), "tie_output", "model")
    if model is not None and isinstance(model, nn.Module):
        _same_model(ex, given, model, "tie_output")
    passed(ex, _verify(ex, model, "K5", "tie_output", tied=True))


def check_tie_transposed(tie_transposed) -> None:
    """Lesson 10, exercise 2 (K5, a new layout). ``tie_transposed(model)`` returns the
    :class:`TransposedHeadLM` it was given, tied: its logits computed with the embedding matrix
    itself, transposed, and one vocab_size x d_model matrix fewer to count."""
    ex = "Exercise 2 (K5)"
    given = _fresh(TransposedHeadLM)
    before = count_parameters(given)
    model = _call(ex, tie_transposed, (given,), "tie_transposed", "model")
    if model is not None and isinstance(model, nn.Module):
        _same_model(ex, given, model, "tie_transposed")
        saved = before - count_parameters(model)
        want = SETTINGS["vocab_size"] * SETTINGS["d_model"]
        if saved == 0:
            fail(
                ex,
                f"the model still counts {before:,} parameters, as before: it keeps an output "
                "matrix of its own (a copy counts too); use the embedding matrix itself.",
            )
        if saved != want:
            fail(
                ex,
                f"the tied model counts {count_parameters(model):,} parameters, {saved:,} fewer "
                f"than before; tying removes exactly one vocab_size x d_model matrix "
                f"({SETTINGS['vocab_size']} x {SETTINGS['d_model']}).",
            )
    passed(ex, _verify(ex, model, "K5", "tie_transposed", tied=True))


def check_position_before_first_block(RepairedLM) -> None:
    """Lesson 10, exercise 3 (K1). ``RepairedLM`` subclasses :class:`PositionAfterFirstBlockLM`
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
    if not issubclass(RepairedLM, PositionAfterFirstBlockLM) or "forward" not in vars(RepairedLM):
        fail(
            ex,
            "RepairedLM must subclass PositionAfterFirstBlockLM and define its own forward: "
            "repair the broken model, do not swap in another class.",
        )
    torch.manual_seed(0)
    model = _call(
        ex,
        lambda: RepairedLM(**SETTINGS, scale_embeddings=False),
        (),
        "RepairedLM",
        "**SETTINGS, scale_embeddings=False",
    )
    message = _verify(ex, model, "K1", "RepairedLM(...)")
    problem = repaired_logits_problem(model)
    if problem:
        fail(ex, f"K1 passes now, but {problem}")
    passed(ex, message)


def repaired_logits_problem(model, tokens=None) -> str | None:
    """Lesson 10, exercise 3. None when ``model`` (a repaired :class:`PositionAfterFirstBlockLM`)
    gives the logits the lesson's :class:`helpers.TransformerLM` computes with the same modules
    (``self.embed(tokens)``, every block in order, ``self.final_norm``, ``self.lm_head``); else
    what differs, in words (the final norm left out is named). ``tokens`` default: the check's
    probe [2, 8]."""
    if not isinstance(model, TransformerLM):
        raise TypeError(
            "model must be a TransformerLM (a repaired PositionAfterFirstBlockLM), got "
            f"{type(model).__name__}"
        )
    tokens = _probe() if tokens is None else tokens
    with torch.no_grad():
        got = _first_tensor(model(tokens))
        want = TransformerLM.forward(model, tokens)  # [B, n, V]: the lesson's order of steps
        if got is None or got.shape != want.shape:
            return "its forward does not return logits of the model's shape"
        if torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            return None
        h = model.embed(tokens)
        for block in model.blocks:
            h = block(h)
        if torch.allclose(got, model.lm_head(h), rtol=1e-4, atol=1e-5):
            return (
                "its logits skip the final norm: the last block's output goes through "
                "self.final_norm before self.lm_head."
            )
    gap = float((got.double() - want.double()).abs().max())
    return (
        f"its logits differ from those of the same modules run in the lesson's order "
        f"(self.embed(tokens), every block in order, self.final_norm, self.lm_head) by up to "
        f"{gap:.3g}."
    )
