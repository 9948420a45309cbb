# Past ~450 lines on purpose: one job (finding a model's parts from one observed forward pass); the
# rules that name a module (embedding, block, sublayer, norm, output projection) read best side by side.
"""What the audit takes for what: the embedding, the blocks, their sublayers and norms, the
feed-forward, the output projection, all found by observing one forward pass, not by names.

:class:`ModelView` runs the model on a probe it makes itself and records what modules receive and
return. The *token embedding* is the module called with the token ids; the *blocks* the repeated
modules of a ModuleList/Sequential that receive the [batch, n, d_model] stream; a *sublayer* a
module inside a block that returns the stream (in its layout or flattened to [B*n, d_model]) and
contains no normalization; a *norm* a shape-preserving module blind to the scale of its input.
A sublayer may add its own residual (Bloom: ``mlp(x, residual) = residual + f(x)``): then one of
its other arguments passes through it unchanged, and "zeroing" it means returning that argument.
Sublayers are then sorted by what they do (:meth:`ModelView.kind`): *mixing* (changing one
position of any of its inputs changes other positions of its output: attention, cross-attention
included), *feed-forward* (position-wise and nonlinear, or the linear layer that projects back
from a position-wise expansion), or *projection* (position-wise and linear on something that mixed
positions: an attention output projection). The *output projection* is the last module whose own
2-D weight is [vocab_size, d] (either way round, d the embedding's width, which is d_model unless
the model projects between them, as OPT can) and that returns vocab-sized outputs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import nn

from .probe import Call, Failure, Hooks, Layout, Tolerance, first_tensor, n_params, params, replay
from .probe import scale as _scale

__all__ = ["ModelView", "Sublayer"]

_PROBE_N = 8


@dataclass
class Sublayer:
    module: nn.Module
    name: str
    call: Call  # its first call in the normal probe
    residual: tuple | None = None  # ("arg", i) or ("kw", name): the residual it adds itself

    def residual_of(self, call: Call) -> torch.Tensor | None:
        if self.residual is None:
            return None
        where, key = self.residual
        return call.args[key] if where == "arg" else call.kwargs[key]

    def zeroed(self, call: Call) -> torch.Tensor:
        """What the sublayer returns with its own contribution removed."""
        r = self.residual_of(call)
        return torch.zeros_like(call.y) if r is None else r.reshape(call.y.shape)


class ModelView:
    """The model as the checks see it; :meth:`discover` fills it, or raises :class:`Failure`."""

    def __init__(self, model, vocab_size, embedding, blocks, output, probe_tokens, forward, seed):
        self.model = model
        self.seed = int(seed)
        self.gen = torch.Generator().manual_seed(self.seed)
        self.names = {}
        for name, m in model.named_modules(remove_duplicate=False):
            self.names.setdefault(id(m), name or "(model)")
        self.forward_fn = forward
        self.use_cache_kw = "use_cache" in inspect.signature(model.forward).parameters
        self.vocab_hint, self.embedding_hint = vocab_size, embedding
        self.blocks_hint, self.output_hint, self.probe_hint = blocks, output, probe_tokens
        self.found: dict[str, str] = {}
        self._kinds: dict[int, tuple[str, str]] = {}
        first = next(iter(model.parameters()), None)
        self.device = first.device if first is not None else torch.device("cpu")
        self.dtype = first.dtype if first is not None and first.is_floating_point() else None

    # ---- running the model ----
    def run(self, tokens, modules=(), edit=None, stretch=None) -> tuple[torch.Tensor, Hooks]:
        tokens = tokens.to(self.device)
        with Hooks(modules, edit, stretch) as hooks, torch.enable_grad():
            if self.forward_fn is not None:
                out = self.forward_fn(self.model, tokens)
            elif self.use_cache_kw:
                out = self.model(tokens, use_cache=False)
            else:
                out = self.model(tokens)
        logits = first_tensor(out)
        if logits is None:
            raise Failure(
                f"the model returned {type(out).__name__}, not logits; pass forward=lambda model, tokens: ..."
            )
        return logits.detach(), hooks

    def name(self, m) -> str:
        return self.names.get(id(m), type(m).__name__)

    def block_call(self, hooks: Hooks, b: int) -> Call:
        return [c for c in hooks.calls if any(c.module is e for e in self.blocks)][b]

    def rows(self, t: torch.Tensor, i: int) -> torch.Tensor:
        """Sequence ``i`` of a stream tensor, [n, ...]."""
        return self.layout.to_bn(t)[i]

    def bare_weights(self, b: int) -> list[str]:
        """The matrices block ``b`` uses directly in its own forward ("name [shape]"): parameters
        registered on the block itself (or in a ParameterList/ParameterDict of it), so inside no
        module the audit can hook, zero or replay: a computation inlined with bare tensors."""
        block = self.blocks[b]
        owners = [(block, "")] + [
            (m, f"{n}.")
            for n, m in block.named_children()
            if isinstance(m, nn.ParameterList | nn.ParameterDict)
        ]
        return [
            f"{prefix}{name} {list(p.shape)}"
            for owner, prefix in owners
            for name, p in owner.named_parameters(recurse=False)
            if p.dim() >= 2
        ]

    def blocks_text(self) -> str:
        if len(self.blocks) == 1:
            return self.block_names[0]
        return f"{self.block_names[0]} ... {self.block_names[-1]}"

    # ---- discovery ----
    def discover(self):
        self._find_embedding()
        self._find_blocks()
        self._find_inside()

    def _probe_failed(self, e: Exception, what: str) -> Failure:
        return Failure(
            f"running the model on the probe tokens {list(self.tokens.shape)} ({what}) raised "
            f"{type(e).__name__}: {e}; if it accepts fewer positions, or other token ids, pass "
            f"probe_tokens= (a [batch >= 2, n] tensor of ids it accepts)"
        )

    def _find_embedding(self):
        embeddings = [m for m in self.model.modules() if isinstance(m, nn.Embedding)]
        if self.embedding_hint is not None:
            embeddings = [self.embedding_hint]
        if not embeddings:
            raise Failure("no nn.Embedding in the model; pass embedding=<the token embedding>")
        v0 = self.vocab_hint or min(
            getattr(m, "weight", torch.empty(2, 0)).shape[0] for m in embeddings
        )
        if self.probe_hint is not None:
            self.tokens = self.probe_hint  # [B >= 2, n], checked by audit()
        else:
            self.tokens = torch.randint(0, v0, (2, _PROBE_N), generator=self.gen)
        if self.embedding_hint is not None:
            emb = embeddings[0]  # taken as given: it may be used without being called
        else:
            try:
                _, hooks = self.run(self.tokens, embeddings)
            except Failure:
                raise
            except Exception as e:  # noqa: BLE001 - reported with the hint that helps
                raise self._probe_failed(e, "finding the embedding") from None
            emb = next(
                (
                    c.module
                    for c in hooks.calls
                    if c.x is not None
                    and c.x.shape == self.tokens.shape
                    and torch.equal(c.x.cpu(), self.tokens)
                ),
                None,
            )
        if emb is None:
            raise Failure(
                "no embedding module is called with the token ids; pass embedding=<the token embedding>"
            )
        self.embedding = emb
        self.E = getattr(emb, "weight", None)  # [vocab_size, d_model]
        if not isinstance(self.E, torch.Tensor) or self.E.dim() != 2:
            raise Failure(
                f"the embedding {self.name(emb)} has no 2-D .weight [vocab_size, d_model]"
            )
        self.vocab = int(self.vocab_hint or self.E.shape[0])
        self.d_embed = self.d_model = int(self.E.shape[1])  # d_model: the blocks' width, below
        if self.probe_hint is None:
            while True:
                tokens = torch.randint(0, self.vocab, (2, _PROBE_N), generator=self.gen)
                if not torch.equal(tokens[0], tokens[1]):
                    break
            self.tokens = tokens
        self.B, self.n = self.tokens.shape
        self.found["embedding"] = f"{self.name(emb)} {list(self.E.shape)}"

    def _find_blocks(self):
        if self.blocks_hint is not None:
            entries, prefix = self.blocks_hint
            names = [f"{prefix}.{i}" if prefix else self.name(b) for i, b in enumerate(entries)]
            candidates = [(entries, names)]
        else:
            candidates = []
            for cname, m in self.model.named_modules():
                if isinstance(m, nn.ModuleList | nn.Sequential) and len(m) >= 1:
                    entries = list(m)
                    if len({type(e) for e in entries}) == 1 and n_params(entries[0]) > 0:
                        candidates.append((entries, [f"{cname}.{i}" for i in range(len(entries))]))
        if not candidates:
            raise Failure("no ModuleList/Sequential of repeated blocks found; pass blocks=[...]")
        try:
            self.logits, hooks = self.run(self.tokens, [e for es, _ in candidates for e in es])
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001
            raise self._probe_failed(e, "finding the blocks") from None
        best = None
        for entries, names in candidates:
            calls = [c for c in hooks.calls if any(c.module is e for e in entries)]
            ok = (
                len(calls) >= len(entries)
                and all(
                    c.x is not None
                    and c.y is not None
                    and c.x.dim() == 3
                    and c.x.shape[-1] == calls[0].x.shape[-1]  # one width: the stream's d_model
                    and self.n in c.x.shape[:2]
                    for c in calls
                )
            )
            if ok:
                size = sum(n_params(e) for e in {id(e): e for e in entries}.values())
                if best is None or size > best[0]:
                    best = (size, entries, names, calls)
        if best is None:
            raise Failure(
                "found no stack of blocks that receive the [batch, n, d_model] stream; pass blocks=[...]"
            )
        _, self.blocks, self.block_names, calls = best
        self.block_calls = calls[: len(self.blocks)]
        x0 = self.block_calls[0].x
        if tuple(x0.shape[:2]) not in ((self.B, self.n), (self.n, self.B)):
            raise Failure(f"cannot tell the position axis of the stream {list(x0.shape)}")
        self.d_model = int(x0.shape[-1])  # OPT's project_in may widen the embedding first
        if self.d_model != self.d_embed:
            self.found["embedding"] += (
                f", projected to d_model {self.d_model} before the first block"
            )
        self.layout = Layout(self.B, self.n, batch_first=tuple(x0.shape[:2]) == (self.B, self.n))
        self.hidden_shape = list(x0.shape)
        self.dtype = x0.dtype
        self.tol = Tolerance(x0.dtype)
        self.found["blocks"] = (
            f"{len(self.blocks)} x {type(self.blocks[0]).__name__} ({self.blocks_text()})"
        )
        self.found["d_model"] = str(self.d_model)
        self.found["vocab_size"] = str(self.vocab)
        self.found["probe"] = (
            f"tokens {list(self.tokens.shape)} -> logits {list(self.logits.shape)}"
        )
        if x0.dtype != torch.float32:
            self.found["precision"] = str(x0.dtype).replace("torch.", "")

    def _find_inside(self):
        inside = {}
        for b in self.blocks:
            for m in b.modules():
                if m is not b:
                    inside[id(m)] = m
        _, hooks = self.run(self.tokens, list(inside.values()))
        self.inner = {id(m): hooks.first(m) for m in inside.values()}
        self.inner_order = {id(m): c.order for m in inside.values() if (c := hooks.first(m))}
        self.norms = {id(m) for m in inside.values() if self._is_norm(m)}
        self.sublayers = [self._sublayers(b) for b in self.blocks]

    def stream_like(self, t) -> bool:
        """The stream's shape, or its flattening [B*n, d_model]."""
        if not isinstance(t, torch.Tensor) or t.shape[-1] != self.d_model:
            return False
        return list(t.shape) == self.hidden_shape or list(t.shape) == [
            self.B * self.n,
            self.d_model,
        ]

    def _is_norm(self, m) -> bool:
        """A normalization, by behaviour: shape-preserving and blind to the scale of its input."""
        call = self.inner.get(id(m))
        if call is None or call.x is None or call.y is None or call.x.shape != call.y.shape:
            return False
        if call.x.shape[-1] != self.d_model or not call.x.is_floating_point():
            return False
        if any(p.dim() != 1 or p.shape[0] != self.d_model for _, p in params(m)):
            return False
        x = call.x.detach() / _scale(call.x)  # max |x| = 1; x 4 and x 32 stay finite in float16
        try:
            y1, y2 = replay(call, x * 4.0), replay(call, x * 32.0)
        except Exception:  # noqa: BLE001 - a module that cannot be replayed is not a norm
            return False
        return (
            y1 is not None
            and self.tol.same(y1, y2, loose=True)
            and not self.tol.same(y1, x * 4.0, loose=True)
        )

    def contains_norm(self, m) -> bool:
        return any(id(d) in self.norms for d in m.modules())

    def _qualifies(self, m) -> bool:
        call = self.inner.get(id(m))
        return (
            call is not None
            and self.stream_like(call.y)
            and n_params(m) > 0
            and not self.contains_norm(m)
        )

    def _is_wrapper(self, m) -> bool:
        """x + child(x) with no norm: a residual wrapper, look inside for the sublayer."""
        call = self.inner[id(m)]
        if call.x is None or call.x.shape != call.y.shape:
            return False
        for d in m.modules():
            if d is not m and self._qualifies(d):
                inner = self.inner[id(d)]
                if inner.y.shape == call.y.shape and self.tol.same(
                    call.y, call.x.detach() + inner.y, loose=True
                ):
                    return True
        return False

    def _own_residual(self, call: Call) -> tuple | None:
        """The argument the module adds to its output unchanged (``residual + f(x)``), if any:
        changing it by δ changes the output by exactly δ."""
        slots = [("arg", i, a) for i, a in enumerate(call.args)]
        slots += [("kw", k, v) for k, v in call.kwargs.items()]
        for where, key, r in slots:
            if not isinstance(r, torch.Tensor) or r is call.x or not r.is_floating_point():
                continue
            if r.numel() != call.y.numel() or r.shape[-1] != self.d_model:
                continue
            delta = torch.randn(r.shape, generator=self.gen).to(r) * _scale(r)
            try:
                moved = replay(call, others={id(r): r + delta})
            except Exception:  # noqa: BLE001 - not replayable with that argument changed
                continue
            if moved is not None and self.tol.same(
                moved - call.y, delta.reshape(call.y.shape), loose=True
            ):
                return (where, key)
        return None

    def _sublayers(self, block) -> list[Sublayer]:
        found = []

        def visit(module):
            for child in module.children():
                if self._qualifies(child) and not self._is_wrapper(child):
                    call = self.inner[id(child)]
                    found.append(Sublayer(child, self.name(child), call, self._own_residual(call)))
                else:
                    visit(child)

        visit(block)
        return sorted(found, key=lambda s: self.inner_order.get(id(s.module), 0))

    # ---- what a sublayer does ----
    def mixes(self, call: Call) -> bool:
        """Whether changing one position of any of the call's stream inputs (the query and, for
        cross-attention, the keys and values) changes the output at other positions."""
        y = self.layout.to_bn(replay(call))
        for t in call.tensors():
            if t.dim() < 2:
                continue
            if self.layout.knows(t):
                bn = self.layout.to_bn(t).clone()
                bn[:, 0] += torch.randn(bn[:, 0].shape, generator=self.gen).to(t) * _scale(t)
                new = self.layout.from_bn(bn, t)
            elif (
                t is not call.x
                and t.shape[0] == self.B
                and t.shape[-1] == self.d_model
                and t.dim() == 3
            ):
                new = t.clone()  # another sequence (an encoder's output): change its position 0
                new[:, 0] += torch.randn(new[:, 0].shape, generator=self.gen).to(t) * _scale(t)
            else:
                continue
            yp = self.layout.to_bn(replay(call, others={id(t): new}))
            if not self.tol.same(y[:, 1:], yp[:, 1:]):
                return True
        return False

    def affine(self, call: Call) -> bool:
        """Whether the module is an affine map of its input: f((a + b) / 2) = (f(a) + f(b)) / 2."""
        x = call.x.detach().float()
        x = x / x.pow(2).mean().sqrt().clamp_min(1e-12)  # RMS 1, then far apart: a = 4x, b = -4x
        a = (4.0 * x).to(call.x.dtype)
        b = (-4.0 * x + torch.randn(x.shape, generator=self.gen)).to(call.x.dtype)
        ya, yb, ym = replay(call, a), replay(call, b), replay(call, (a + b) / 2)
        return self.tol.same(ym, (ya + yb) / 2, loose=True)

    def kind(self, s: Sublayer) -> tuple[str, str]:
        """("mixing" | "feed-forward" | "projection", the expanding partner's name or "")."""
        if id(s.module) not in self._kinds:
            self._kinds[id(s.module)] = self._kind(s)
        return self._kinds[id(s.module)]

    def _kind(self, s: Sublayer) -> tuple[str, str]:
        if self.mixes(s.call):
            return "mixing", ""
        if s.residual is not None or not self.affine(s.call):
            return "feed-forward", ""
        partner = self._expanding_partner(s)
        return ("feed-forward", partner) if partner else ("projection", "")

    def _block_of(self, m) -> int:
        return next(b for b, blk in enumerate(self.blocks) if any(d is m for d in blk.modules()))

    def _expanding_partner(self, s: Sublayer) -> str:
        """For a linear sublayer: the position-wise module that widens the stream into its input,
        linked through an elementwise function (``fc2(act(fc1(x)))``), or "" if there is none
        (its input then comes from something that mixes positions: an attention output)."""
        b = self._block_of(s.module)
        inner_s = {id(d) for d in s.module.modules()}
        width = s.call.x.shape[-1]
        cands = []
        for m in self.blocks[b].modules():
            c = self.inner.get(id(m))
            if c is None or id(m) in inner_s or any(d is s.module for d in m.modules()):
                continue
            if id(m) in self.norms or n_params(m) == 0:  # a widening layer has weights
                continue
            if (
                c.order > s.call.order
                or c.x is None
                or c.y is None
                or c.x.shape[-1] != self.d_model
            ):
                continue
            if (
                c.y.shape[-1] != width
                or c.y.numel() != s.call.x.numel()
                or not self.layout.knows(c.y)
            ):
                continue
            cands.append(c)
        for c in sorted(cands, key=lambda c: -c.order):
            if not self.mixes(c) and self._linked_elementwise(c, s):
                return self.name(c.module)
        return ""

    def _linked_elementwise(self, e: Call, s: Sublayer) -> bool:
        """Nudging one entry of e's output changes exactly that entry of s's input."""
        p, j = self.n // 2, int(self.layout.to_bn(e.y)[0, self.n // 2].abs().argmin())

        def nudge(call):
            bn = self.layout.to_bn(call.y).clone()
            bn[0, p, j] += 2.0 * _scale(call.y) + 1.0
            return self.layout.from_bn(bn, call.y)

        _, hooks = self.run(self.tokens, [s.module], edit={e.module: nudge})
        new = hooks.first(s.module)
        if new is None or new.x is None or new.x.shape != s.call.x.shape:
            return False
        diff = (
            self.layout.to_bn(new.x.detach()).double()
            - self.layout.to_bn(s.call.x.detach()).double()
        ).abs()
        changed = diff > self.tol.tight * max(_scale(s.call.x), 1e-3)
        return bool(changed[0, p, j]) and int(changed.sum()) == 1

    # ---- the output projection ----
    def output_module(self):
        if self.output_hint is not None:
            return self.output_hint
        owners = [
            m
            for m in self.model.modules()
            if any(
                p.dim() == 2 and set(p.shape) == {self.vocab, self.d_embed}
                for p in m.parameters(recurse=False)
            )
        ]
        _, hooks = self.run(self.tokens, owners)
        vocab_out = [c for c in hooks.calls if c.y is not None and c.y.shape[-1] == self.vocab]
        return vocab_out[-1].module if vocab_out else None
