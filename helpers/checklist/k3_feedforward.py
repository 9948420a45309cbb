"""K3: the feed-forward expands then contracts (d_model -> d_ff -> d_model), same weights at
every position.

The feed-forward of a block is found by what it does (:meth:`ModelView.kind`), not by its name: a
sublayer that does not mix positions and is nonlinear (the course's ``FeedForward``, GPT-2's
``mlp``), or a linear one whose input is a position-wise widening of the stream passed through an
elementwise function (``fc2(act(fc1(x)))`` inlined in the block, as PyTorch's encoder layer, OPT
and BERT have it). A linear sublayer fed by something that mixes positions (an attention output
projection) is a *projection*, not a feed-forward, and is only listed. d_ff is the input width of
the layer that projects back to d_model (for weights used directly, ``x @ W``, read from the last
matrix with d_model on one side). Then: permuting positions (of every input of the stream's
shape, a residual included) commutes with it, and one position alone gives what it gets inside
the sequence.
"""

from __future__ import annotations

import torch

from .discover import ModelView, Sublayer
from .probe import maxdiff, n_params, num, replay
from .report import CheckResult

__all__ = ["check_k3"]


def _hidden_width(v: ModelView, s: Sublayer) -> tuple[int, str]:
    call = s.call
    contracting = []
    for d in s.module.modules():
        c = v.inner.get(id(d))
        if d is s.module or c is None or c.x is None or c.y is None or n_params(d) == 0:
            continue
        if c.y.shape[-1] == v.d_model and c.x.shape[-1] != v.d_model:
            contracting.append((c.order, d, c))
    if contracting:
        _, d, c = max(contracting, key=lambda t: t[0])
        return int(c.x.shape[-1]), f"{v.name(d)} {c.x_shape} -> {c.y_shape}"
    if call.x.shape[-1] != v.d_model:  # the sublayer is the contracting layer itself
        return int(call.x.shape[-1]), f"{s.name} {call.x_shape} -> {call.y_shape}"
    mats = [
        (pname, p)
        for pname, p in s.module.named_parameters()
        if p.dim() == 2 and (p.shape[0] == v.d_model) != (p.shape[1] == v.d_model)
    ]
    if mats:
        pname, p = mats[-1]
        w = int(p.shape[1] if p.shape[0] == v.d_model else p.shape[0])
        return w, f"weight {s.name}.{pname} {list(p.shape)}"
    return int(call.x.shape[-1]), f"{s.name} {call.x_shape} -> {call.y_shape}"


def _stream_args(v: ModelView, s: Sublayer) -> list[torch.Tensor]:
    """The call's inputs laid out along the positions: x, and a residual or a second stream."""
    return [
        t
        for t in s.call.tensors()
        if v.layout.knows(t) and t.shape[-1] in (s.call.x.shape[-1], v.d_model)
    ]


def _position_wise(v: ModelView, s: Sublayer) -> str:
    """ "" if the same weights act on every position, else the evidence against it."""
    call, ts = s.call, _stream_args(v, s)
    perm = torch.randperm(v.n, generator=v.gen)
    while v.n > 1 and torch.equal(perm, torch.arange(v.n)):
        perm = torch.randperm(v.n, generator=v.gen)
    y = replay(call)
    yp = replay(call, others={id(t): v.layout.permute(t, perm) for t in ts})
    want = v.layout.permute(y, perm)
    if not v.tol.same(yp, want):
        return (
            f"{s.name}: permuting the positions of its input does not just permute its output (max "
            f"difference {num(maxdiff(yp, want), v.dtype)}): its weights depend on the position"
        )
    last = v.n - 1
    alone = replay(call, others={id(t): v.layout.narrow(t, last) for t in ts})
    there = v.layout.narrow(y, last)
    if not v.tol.same(alone, there):
        return (
            f"{s.name}: position {last} alone gives a different output than inside the sequence "
            f"(max difference {num(maxdiff(alone, there), v.dtype)})"
        )
    return ""


def check_k3(v: ModelView) -> CheckResult:
    ev, failed = [], False
    took: dict[str, str] = {}
    for b, subs in enumerate(v.sublayers):
        bname = v.block_names[b]
        ffns, projections = [], []
        for s in subs:
            try:
                kind, partner = v.kind(s)
            except Exception as e:  # noqa: BLE001
                return CheckResult(
                    "K3",
                    "undecided",
                    f"could not re-run {s.name}",
                    [f"calling it again raised {type(e).__name__}: {e}"],
                    took,
                )
            if kind == "feed-forward":
                ffns.append((s, partner))
            elif kind == "projection":
                projections.append(s)
        if b == 0:
            took["feed-forward"] = (
                ", ".join(f"{p} -> {s.name}" if p else s.name for s, p in ffns) or "none found"
            )
            took["attention"] = (
                ", ".join(s.name for s in subs if v.kind(s)[0] == "mixing") or "none found"
            )
            if projections:
                took["linear projections (not feed-forward)"] = ", ".join(
                    s.name for s in projections
                )
        if not ffns:
            mixing = [s.name for s in subs if v.kind(s)[0] == "mixing"]
            return CheckResult(
                "K3",
                "undecided",
                f"found no feed-forward sublayer in {bname}",
                [
                    f"none of the sublayers of {bname} is a feed-forward: "
                    + "; ".join(
                        part
                        for part in (
                            f"{', '.join(mixing)} mix positions" if mixing else "",
                            f"{', '.join(s.name for s in projections)} are linear maps (a "
                            f"feed-forward is nonlinear: max(0, x W1 + b1) W2 + b2)"
                            if projections
                            else "",
                        )
                        if part
                    )
                    + "; a feed-forward computed inline in the block's forward, with bare tensors, "
                    "has no module to observe"
                    + (
                        f" ({bname} uses weights of its own outside any sublayer: "
                        f"{', '.join(v.bare_weights(b))}: read their shapes, and test the "
                        f"computation by experiment)"
                        if v.bare_weights(b)
                        else ""
                    )
                    + "; pass blocks= if these are not the blocks"
                ],
                took,
            )
        for f, partner in ffns:
            width, where = _hidden_width(v, f)
            label = f"{partner} -> {f.name}" if partner else f.name
            if width <= v.d_model:
                failed = True
                ev.append(
                    f"{label}: hidden width {width} <= d_model {v.d_model} (contracting layer "
                    f"{where}): it does not expand"
                )
            elif b == 0:
                ev.append(
                    f"{label}: d_model {v.d_model} -> d_ff {width} -> d_model {v.d_model} "
                    f"(contracting layer {where}); d_ff/d_model = {num(width / v.d_model, torch.float64)}"
                )
            against = _position_wise(v, f)
            if against:
                failed = True
                ev.append(against)
            elif b == 0:
                ev.append(
                    f"{label}: permuting positions commutes with it, and position {v.n - 1} alone "
                    f"gives the same output: the same weights act on each position"
                )
        if b == 0 and projections:
            ev.append(
                f"not taken for a feed-forward: {', '.join(s.name for s in projections)} (linear, "
                f"and not fed by a position-wise widening of the stream: an attention output projection)"
            )
    if failed:
        return CheckResult(
            "K3",
            "failed",
            "a feed-forward block does not expand, or is not position-wise",
            ev,
            took,
        )
    ev.append(f"the same holds in all {len(v.blocks)} blocks")
    return CheckResult(
        "K3",
        "passed",
        "every feed-forward expands then contracts, same weights at every position",
        ev,
        took,
    )
