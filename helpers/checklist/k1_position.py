"""K1: position is added to the token embeddings before the first block (and nowhere else).

Three observations. (1) For a sequence that repeats one token, the first block's input must
differ from position to position, by the same term for every token: position is *added*
(``h = E[t] + P[pos]``; a module between the embedding and the first block, such as BERT's layer
norm, may transform the sum, and is then named as the place). (2) No block's input differs from
the previous block's output: nothing is injected into the stream between blocks. (3) No attention
sees order by itself: a sublayer that mixes positions is replayed with the *earlier* positions of
its input reversed; without a mechanism of its own its output at the last position does not move
(attention is a weighted sum over a set, and a causal mask still lets the last position see them
all). If it moves, position enters inside attention, which the sheet's rule excludes (COURSE.md
C4.8), and the report names the mechanism each such sublayer was seen to have
(:mod:`.mechanism`: a local window, rotary, ALiBi, T5's relative bias, position by absolute
index), or says that the probe cannot tell.
"""

from __future__ import annotations

import copy

import torch

from .discover import ModelView, Sublayer
from .mechanism import LONG_N, observe_mechanism
from .probe import Call, Layout, maxdiff, num, replay, scale
from .report import CheckResult

__all__ = ["check_k1"]


def _additive(v: ModelView, t: torch.Tensor, diff: bool = False):
    """Rows 0 and 1 of ``t`` (each one token repeated): does ``t`` depend on the token and on the
    position, and is the change from position 0 the same for both tokens?"""
    s1, s2 = v.rows(t.detach(), 0), v.rows(t.detach(), 1)  # [n, d] each
    p1, p2 = s1 - s1[:1], s2 - s2[:1]  # [n, d]: how position changes the vector
    if diff:
        return maxdiff(p1, p2)
    varies = v.tol.varies(p1, scale(s1))  # with the position
    token = v.tol.varies(s1[:1] - s2[:1], scale(s1, s2))  # with the token
    return varies and token and v.tol.same(p1, p2, loose=True)


def _added_before(v: ModelView, tokens: torch.Tensor, first: Call) -> str:
    """The place between the embedding and the first block (a module's input or output, outside
    the blocks) where position is added; "" if there is none."""
    inside = {id(m) for b in v.blocks for m in b.modules()}
    outside = [m for m in v.model.modules() if m is not v.model and id(m) not in inside]
    _, hooks = v.run(tokens, [*outside, v.blocks[0]])
    start = next(c.order for c in hooks.calls if c.module is v.blocks[0])
    for c in hooks.calls:
        if c.order >= start or c.module is v.blocks[0]:
            break
        for kind, t in (("the input", c.x), ("the output", c.y)):
            if (
                isinstance(t, torch.Tensor)
                and t.is_floating_point()
                and list(t.shape) == list(first.x.shape)
                and _additive(v, t)
            ):
                return f"{kind} of {v.name(c.module)}"
    return ""


def _order_effect(v: ModelView, s: Sublayer, module=None, x=None, cast=None) -> float:
    """Relative change of the last position's output when the earlier positions are reversed."""
    call = s.call
    x = call.x.detach() if x is None else x
    perm = torch.cat([torch.arange(v.n - 2, -1, -1), torch.tensor([v.n - 1])])
    others = {}
    if cast is not None:  # a float32 copy: every floating argument in float32
        others = {id(t): t.detach().to(cast) for t in call.tensors() if t is not call.x}
    r = s.residual_of(call)

    def out(inp):
        y = replay(call, inp, others, module=module)
        if r is not None:  # residual + f(x): look at f(x)
            y = y - others.get(id(r), r).reshape(y.shape)
        return v.layout.to_bn(y.double())

    y, yp = out(x), out(v.layout.permute(x, perm))
    spread = maxdiff(y, y[:, -1:].expand_as(y))  # how much the output varies over positions
    return maxdiff(y[:, -1], yp[:, -1]) / max(spread, 1e-30)


def _float32_effect(v: ModelView, s: Sublayer) -> float:
    """The order effect on a float32 copy of the sublayer, its input scaled to RMS 4."""
    try:
        m32 = copy.deepcopy(s.module).float()
        x = s.call.x.detach().float()
        x = x / x.pow(2).mean().sqrt().clamp_min(1e-12)
        return _order_effect(v, s, m32, x * 4.0, torch.float32)
    except Exception:  # noqa: BLE001 - not copyable or not replayable in float32
        return 0.0


def _long_calls(v: ModelView, subs: list[Sublayer]):
    """The sublayers' calls on a probe of :data:`LONG_N` positions of the audit's own (a longer
    probe shows more distances), with its layout; the audit's own calls if the model refuses it."""
    if v.n >= LONG_N:
        return {id(s.module): s.call for s in subs}, v.layout, ""
    gen = torch.Generator().manual_seed(1_000_003 + v.seed)
    tokens = torch.randint(0, v.vocab, (v.B, LONG_N), generator=gen)
    try:
        _, hooks = v.run(tokens, [s.module for s in subs])
        calls = {id(s.module): hooks.first(s.module) for s in subs}
        if all(c is not None and c.x is not None for c in calls.values()):
            return calls, Layout(v.B, LONG_N, v.layout.batch_first), ""
    except Exception:  # noqa: BLE001 - a model with a shorter reach: the audit's own probe
        pass
    calls = {id(s.module): s.call for s in subs}
    return (
        calls,
        v.layout,
        f" (on the audit's probe of {v.n} positions: the model did not run on {LONG_N})",
    )


def _inside_attention(v: ModelView, seen: dict | None = None) -> tuple[list[str], str, list[str]]:
    """Evidence, the finding's name of what attention does with position ("" if nothing) and the
    mixing sublayers tested; ``seen`` gets each moved sublayer's observed mechanism."""
    tested, ev, moved = [], [], []
    for subs in v.sublayers:
        for s in subs:
            if v.kind(s)[0] != "mixing":
                continue
            tested.append(s.name)
            effect, dtype = _order_effect(v, s), v.dtype
            if (
                effect <= v.tol.loose and v.dtype != torch.float32
            ):  # too weak to see in half precision
                effect, dtype = _float32_effect(v, s), torch.float32
            where = " on a float32 copy of it, input at RMS 4" if dtype != v.dtype else ""
            if effect > (v.tol.loose if dtype == v.dtype else 1e-4):
                moved.append((s, effect, dtype, where))
    if not moved:
        return ev, "", tested
    calls, layout, short = _long_calls(v, [s for s, *_ in moved])
    groups: dict[str, list] = {}
    for s, effect, dtype, where in moved:
        call = calls[id(s.module)]
        mech = observe_mechanism(s.module, call, layout, s.residual_of(call), seed=v.seed)
        if seen is not None:
            seen[s.name] = mech
        groups.setdefault(mech.label(), []).append((s, effect, dtype, where, mech))
    names = []
    for label, members in groups.items():
        s, effect, dtype, where, mech = members[0]
        others = [m[0].name for m in members[1:]]
        ev.append(
            f"{s.name} ({type(s.module).__name__}) sees order by itself: with the earlier "
            f"positions of its input reversed, its output at the last position changes "
            f"(relative effect {num(effect, dtype)}{where}); attention with no position of its own "
            f"would not move. What it does with position, on a float64 copy{short}: "
            + "; ".join(mech.notes)
            + (f". The same in {', '.join(others)}" if others else "")
        )
        where_in = (
            f" in {', '.join(m[0].name for m in members)}"
            if len(groups) > 1 or len(members) < len(tested)
            else ""
        )
        names.append(label + where_in)
    return ev, "; ".join(names), tested


def check_k1(v: ModelView) -> CheckResult:
    ev, not_added = [], False
    t1, t2 = int(v.tokens[0, 0]), int(v.tokens[1, 0])
    if t1 == t2:
        t2 = (t1 + 1) % v.vocab
    same = torch.tensor([[(t1, t2)[i % 2]] * v.n for i in range(v.B)])  # [B, n]: t1, t2 repeated
    _, hooks = v.run(same, v.blocks)
    calls = [c for c in hooks.calls if any(c.module is e for e in v.blocks)]
    x0 = calls[0].x.detach()
    seq = v.rows(x0, 0)  # [n, d]: token t1 at every position
    spread = maxdiff(seq, seq[:1].expand_as(seq))
    first = v.block_names[0]
    failed = no_position = False
    if not v.tol.varies(seq - seq[:1], scale(seq)):
        failed = no_position = True
        ev.append(
            f"token {t1} repeated at positions 0..{v.n - 1}: the input of {first} is the same "
            f"vector at every position (max difference {num(spread, v.dtype)}): no position information "
            f"enters before the first block"
        )
    else:
        additive = _additive(v, x0)
        where = "" if additive else _added_before(v, same, calls[0])
        text = (
            f"token {t1} repeated at positions 0..{v.n - 1}: the input of {first} changes with "
            f"position (max difference {num(spread, v.dtype)} between positions)"
        )
        if additive:
            text += f"; the change is the same for token {t2}: a position term added to the token embedding"
        elif where:
            text += (
                f"; the change is the same for token {t2} at {where}: a position term is added to "
                f"the token embedding there, then transformed before {first}"
            )
        else:
            text += (
                f"; the change differs for token {t2} (by up to {num(_additive(v, x0, diff=True), v.dtype)}): "
                f"position is combined with the token embedding some other way than by adding it"
            )
        ev.append(text)
        failed = not_added = not (additive or where)
    between = len(ev)
    for b in range(1, len(calls)):
        prev, cur = calls[b - 1].y, calls[b].x.detach()
        if prev.shape == cur.shape and v.tol.same(prev, cur):
            continue
        failed = True
        if prev.shape == cur.shape:
            delta = v.rows(cur - prev, 0)  # [n, d]
            varies = v.tol.varies(delta - delta[:1], scale(delta))
            what = (
                "a term that differs by position (position injected after the first block)"
                if varies
                else "a term that is the same at every position"
            )
            ev.append(
                f"the input of {v.block_names[b]} is not the output of {v.block_names[b - 1]}: the "
                f"stream gains {what}, max |difference| {num(maxdiff(cur, prev), v.dtype)}"
            )
        else:
            ev.append(
                f"the input of {v.block_names[b]} {list(cur.shape)} is not the output of "
                f"{v.block_names[b - 1]} {list(prev.shape)}"
            )
    between_ok = len(ev) == between
    mechanisms: dict = {}
    inside, mechanism, tested = _inside_attention(v, mechanisms)
    ev += inside
    took = {"embedding": v.name(v.embedding), "blocks": v.blocks_text()}
    took["attention (mixing sublayers)"] = (
        ", ".join(tested[:4]) + (" ..." if len(tested) > 4 else "") or "none found"
    )
    if mechanism:
        label = mechanism
        finding = (
            f"position enters inside attention ({label}), not added to the token embeddings: the "
            f"sheet's rule fails"
            if no_position
            else f"position is added before the first block, and also enters inside attention ({label}): "
            f"the sheet's rule fails"
        )
        return CheckResult("K1", "failed", finding, ev, took, mechanisms)
    if not failed:
        if tested:
            ev.append(
                f"with the earlier positions of their input reversed, {len(tested)} attention "
                f"sublayers keep their last position's output: no position mechanism inside attention"
            )
        ev.append(
            f"each of {v.block_names[1]} onwards receives exactly the previous block's output: "
            f"nothing is added between blocks"
            if len(calls) > 1
            else "there is one block, so nothing can be added between blocks"
        )
        return CheckResult("K1", "passed", "position enters once, before the first block", ev, took)
    if no_position and between_ok:
        ev.append(
            "no attention sublayer sees order by itself either: the model has no position encoding "
            "(a causal mask alone still lets it learn order, C4.9)"
            if tested
            else "found no attention sublayer to test for a position mechanism inside it"
        )
        return CheckResult(
            "K1", "failed", "no position information enters before the first block", ev, took
        )
    if not_added and between_ok:
        return CheckResult(
            "K1", "failed", "position is not added to the token embeddings", ev, took
        )
    return CheckResult(
        "K1", "failed", "position does not enter (only) before the first block", ev, took
    )
