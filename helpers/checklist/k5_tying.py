"""K5: if the output projection is tied, its weight is the embedding matrix itself.

The output projection is the last module whose *own* 2-D weight is [vocab_size, d] (either
way round, d the embedding's width) and that returns vocab-sized outputs (BERT's prediction head owns only a bias; its
``decoder`` child is the projection). Tied means one Parameter object: a copy with equal values
fails (training pulls the two apart), so does a second Parameter over the same storage (two
gradients, counted twice). An untied model passes as "not tied": the sheet only constrains tied
models. An experiment backs each verdict: nudging the embedding row of a token absent from the
probe moves that token's logit only if the logits are computed from the embedding matrix; it
also finds tying done without any output module (``h @ E.T``).
"""

from __future__ import annotations

import torch

from .discover import ModelView
from .probe import maxdiff, num, scale, storage
from .report import CheckResult

__all__ = ["check_k5"]


def _nudge_unused_row(v: ModelView, E: torch.Tensor):
    """(token, how much its logit moved) when its embedding row is changed, or None."""
    unused = sorted(set(range(v.vocab)) - set(v.tokens.flatten().tolist()))
    if not unused:
        return None
    t = unused[0]
    with torch.no_grad():
        saved = E[t].clone()
        E[t] += torch.randn(E.shape[1], generator=v.gen).to(E) * scale(E)
        try:
            logits, _ = v.run(v.tokens)
        finally:
            E[t].copy_(saved)
    return t, maxdiff(logits[..., t], v.logits[..., t])


def check_k5(v: ModelView) -> CheckResult:
    ev, E = [], v.E
    out = v.output_module()
    W = wname = None
    if out is not None:
        for pname, p in out.named_parameters(recurse=False):
            if p.dim() == 2 and set(p.shape) == {v.vocab, v.d_embed}:
                W, wname = p, f"{v.name(out)}.{pname}"
    nudged = _nudge_unused_row(v, E)
    moved_txt, moves = "", False
    if nudged is not None:
        t, moved = nudged
        moves = v.tol.varies(torch.tensor(moved), scale(v.logits), loose=True)
        moved_txt = f"changing row {t} of the embedding (token {t} is not in the probe) " + (
            f"changes logit {t} by up to {num(moved, v.logits.dtype)}"
            if moves
            else f"leaves logit {t} unchanged"
        )
    v.found["output projection"] = (
        f"{wname} {list(W.shape)}" if W is not None else "no module with a [vocab, d] weight found"
    )
    ename = f"{v.name(v.embedding)}.weight"
    took = {
        "embedding": ename,
        "output projection": wname or (v.name(out) if out is not None else "none found"),
    }
    if W is not None and W is E:
        ev.append(f"{wname} is {ename}: the same Parameter object {list(E.shape)}")
        ev += [moved_txt] if moved_txt else []
        return CheckResult(
            "K5", "passed", "tied: the output projection is the embedding matrix itself", ev, took
        )
    if W is not None and storage(W) == storage(E):
        ev.append(
            f"{wname} and {ename} are two Parameter objects over the same storage: each gets its own "
            f"gradient, the optimizer updates the numbers twice, and they count twice as parameters"
        )
        return CheckResult(
            "K5", "failed", "tied through shared storage, not the same tensor", ev, took
        )
    if W is not None and (
        (W.shape == E.shape and torch.equal(W, E)) or (W.shape == E.T.shape and torch.equal(W, E.T))
    ):
        ev.append(
            f"{wname} {list(W.shape)} has equal values to {ename}, but different storage: a copy, "
            f"which training will pull apart"
        )
        ev += [moved_txt] if moved_txt else []
        return CheckResult(
            "K5", "failed", "the output projection is a copy of the embedding", ev, took
        )
    if W is not None:
        ev.append(f"{wname} {list(W.shape)} is a separate matrix with its own values")
        ev += [moved_txt] if moved_txt else []
        return CheckResult(
            "K5",
            "passed",
            "not tied: a separate output matrix (K5 only constrains tied models)",
            ev,
            took,
        )
    if moves:
        ev.append(moved_txt + ": the logits are computed from the embedding matrix itself")
        return CheckResult(
            "K5", "passed", "tied: the logits use the embedding matrix itself", ev, took
        )
    return CheckResult(
        "K5",
        "undecided",
        "could not find the output projection",
        [
            "no module with its own [vocab, d] weight returns vocab-sized outputs"
            + (f", and {moved_txt}" if moved_txt else "")
            + "; pass output=<the output projection>"
        ],
        took,
    )
