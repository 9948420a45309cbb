"""K2: every sublayer is wrapped in a residual; the norm placement is the same in every block.

With one sublayer's own contribution removed (its output zeroed, or, for a sublayer that adds
its residual itself, ``residual + f(x)``, replaced by that residual) the block's output must still
depend on its input: the identity path goes around the sublayer. Then, with every sublayer's
contribution removed and the block fed ``3x + 0.5`` (not the output of a layer norm), the block
is the identity (pre-norm ``x + Sublayer(LN(x))``, or no norm), or a normalization of its input
(post-norm ``LN(x + Sublayer(x))``, whose output is then its last layer norm's): a normalization
is confirmed by feeding twice that input and seeing the same output. A block that then ignores
its input has no identity path; one that normalizes, but not through its last layer norm,
normalizes the identity path itself; one that is none of these still runs something the audit
did not take for a sublayer, and the check is undecided rather than guessing.
"""

from __future__ import annotations

from .discover import ModelView
from .probe import maxdiff, num, scale
from .report import CheckResult

__all__ = ["check_k2"]

_KINDS = {
    "pre": "pre-norm: x + Sublayer(LN(x)); with its sublayers zeroed the block is the identity",
    "post": "post-norm: LN(x + Sublayer(x)); with its sublayers zeroed the block normalizes its input",
    "none": "no layer norm: x + Sublayer(x)",
}


def _zero(subs):
    return {s.module: s.zeroed for s in subs}


def _ends_on_norm(v: ModelView, b: int, norms) -> bool:
    """Whether block ``b``'s output (a normal run) is the output of one of ``norms``."""
    _, hooks = v.run(v.tokens, [*v.blocks, *norms])
    y = v.block_call(hooks, b).y
    return any(
        c.y is not None and c.y.numel() == y.numel() and v.tol.same(c.y.reshape(y.shape), y)
        for m in norms
        for c in hooks.of(m)
    )  # a norm on the flattened stream [B*n, d] counts too


def _took(v: ModelView) -> dict[str, str]:
    subs = v.sublayers[0]
    norms = [v.name(m) for m in v.blocks[0].modules() if id(m) in v.norms]
    own = [s.name for s in subs if s.residual is not None]
    took = {
        "blocks": v.blocks_text(),
        f"sublayers of {v.block_names[0]}": ", ".join(s.name for s in subs) or "none found",
        f"norms of {v.block_names[0]}": ", ".join(norms) or "none found",
    }
    if own:
        took["adding their own residual"] = ", ".join(own)
    return took


def check_k2(v: ModelView) -> CheckResult:
    ev, failed, placements, unwrapped = [], False, [], False
    took = _took(v)
    for b, (block, subs) in enumerate(zip(v.blocks, v.sublayers, strict=True)):
        bname = v.block_names[b]
        named = len(ev)  # evidence lines so far: was this block already named?
        if not subs:
            return CheckResult(
                "K2",
                "undecided",
                f"found no sublayer in {bname}",
                [
                    f"no module inside {bname} returns the stream's shape {v.hidden_shape} (or "
                    f"[B*n, d_model]) without containing a normalization; pass blocks= to point "
                    f"at the blocks"
                ],
                took,
            )
        for s in subs:
            _, hooks = v.run(v.tokens, v.blocks, edit=_zero([s]))
            y = v.block_call(hooks, b).y
            d = maxdiff(v.rows(y, 0), v.rows(y, 1))
            if not v.tol.varies(v.rows(y, 0) - v.rows(y, 1), max(scale(y), 1e-3)):
                failed = unwrapped = True
                ev.append(
                    f"with {s.name} ({type(s.module).__name__}) zeroed, {bname} returns the same "
                    f"output for two different inputs (max difference {num(d, v.dtype)}): nothing "
                    f"goes around this sublayer, it is not wrapped in a residual"
                )
            elif s.residual is not None and b == 0:
                where = s.residual[1]
                ev.append(
                    f"{s.name} adds its residual itself (argument {where!r}: changing it by δ "
                    f"changes the output by exactly δ); zeroing it means returning that residual"
                )
        # every sublayer zeroed, the block fed 3x + 0.5 (not the output of a layer norm), and 6x + 1
        _, hooks = v.run(v.tokens, v.blocks, edit=_zero(subs), stretch={block: (3.0, 0.5)})
        call = v.block_call(hooks, b)
        _, hooks2 = v.run(v.tokens, v.blocks, edit=_zero(subs), stretch={block: (6.0, 1.0)})
        y2 = v.block_call(hooks2, b).y
        norms_in_block = [m for m in block.modules() if id(m) in v.norms]
        if v.tol.same(call.y, call.x.detach(), loose=True):
            placements.append("pre" if norms_in_block else "none")
        elif not v.tol.varies(v.rows(call.y, 0) - v.rows(call.y, 1), scale(call.y)):
            placements.append("no identity path")
            failed = unwrapped = True
            if len(ev) == named:  # no single sublayer was to blame: they are combined bare
                ev.append(
                    f"with all its sublayers zeroed, {bname} returns the same output for two "
                    f"different inputs: the sublayers' outputs are combined with no identity path "
                    f"around them (a residual block computes x + Sublayer(...))"
                )
        elif v.tol.same(call.y, y2, loose=True):  # blind to the input's scale: it normalizes
            bare = v.bare_weights(b)
            if bare:  # what it normalizes may still pass through an inline computation
                return CheckResult(
                    "K2",
                    "undecided",
                    f"{bname} computes something inline that the audit cannot zero",
                    [
                        f"with {', '.join(s.name for s in subs)} zeroed, {bname} normalizes its "
                        f"input (twice the input, the same output), but it also uses weights of its "
                        f"own outside any sublayer: {', '.join(bare)}; a computation inlined in its "
                        f"forward with bare tensors has no module to zero, so the audit cannot tell "
                        f"whether an identity path goes around it (a normalized identity path, a "
                        f"post-norm, and an inline sublayer on a normalized input with no residual "
                        f"all normalize); zero those weights on a copy of the model to find out"
                    ],
                    took,
                )
            if norms_in_block and not _ends_on_norm(v, b, norms_in_block):
                placements.append("normalized skip")
                failed = True
                ev.append(
                    f"with its sublayers zeroed {bname} normalizes its input (twice the input, the "
                    f"same output), yet its output is not the output of one of its layer norms: the "
                    f"identity path itself is normalized (as in LN(x) + Sublayer(LN(x))), neither "
                    f"pre-norm x + Sublayer(LN(x)) nor post-norm LN(x + Sublayer(x))"
                )
            else:
                placements.append("post")
        else:
            return CheckResult(
                "K2",
                "undecided",
                f"with its sublayers zeroed, {bname} is neither the identity nor a normalization",
                [
                    f"with {', '.join(s.name for s in subs)} zeroed, {bname} still changes its input "
                    f"(by up to {num(maxdiff(call.y, call.x) / scale(call.x), v.dtype)} of its scale), and twice the input does not give "
                    f"the same output: it runs something the audit did not take for a sublayer "
                    + (
                        f"(it uses weights of its own outside any sublayer: "
                        f"{', '.join(v.bare_weights(b))}: a computation inlined in its forward)"
                        if v.bare_weights(b)
                        else "(a computation inlined in the block's forward, say)"
                    )
                    + "; pass blocks= if these are not the blocks"
                ],
                took,
            )
    v.found["norm placement"] = placements[0] if len(set(placements)) == 1 else "mixed"
    if not failed:
        names = ", ".join(sorted({type(s.module).__name__ for subs in v.sublayers for s in subs}))
        n_subs = sum(len(s) for s in v.sublayers)
        ev.insert(
            0,
            f"{n_subs} sublayers ({names}) in {len(v.blocks)} blocks; zeroing any one of them "
            f"leaves the block's output depending on its input: an identity path goes around each",
        )
        if len(set(placements)) != 1:
            return CheckResult(
                "K2",
                "failed",
                "residuals present, but norm placement differs between blocks",
                [*ev, "placement per block: " + ", ".join(placements)],
                took,
            )
        ev.append(
            _KINDS.get(placements[0], "placement not recognised")
            + f" (all {len(placements)} blocks)"
        )
        return CheckResult(
            "K2",
            "passed",
            f"every sublayer is in a residual; norm placement: {placements[0]} in every block",
            ev,
            took,
        )
    v.found["norm placement"] = ", ".join(dict.fromkeys(placements))
    if not unwrapped:
        return CheckResult(
            "K2", "failed", "the identity path is normalized: neither pre- nor post-norm", ev, took
        )
    return CheckResult("K2", "failed", "a sublayer is not wrapped in a residual", ev, took)
