"""Lesson 9 (capstone): the sheet's checklist as an executable audit of a language model.

    report = audit(model)        # any PyTorch LM: tokens [B, n] -> logits [B, n, vocab_size]
    report                        # a table in a notebook; print(report) as text
    report.passed, report.status("K3"), report["K5"].evidence

The five checks (the end of the sheet, K1-K5 of the course specification) are decided by
*observing* the model, not by reading attribute names: forward hooks record what every module
receives and returns for a probe input the audit makes itself; experiments change one thing
(zero a sublayer's output, permute positions, nudge one row of the embedding) and watch what
moves; parameters are compared by identity and by storage.

* **K1** position enters before the first block: for a sequence that repeats one token, the first
  block's input differs from position to position, by the same term for every token (position is
  *added*; a module between the embedding and the first block, such as a layer norm, may transform
  the sum); and no block's input differs from the previous block's output (nothing is injected
  into the stream between blocks).
* **K2** every sublayer sits in a residual: with a sublayer's output forced to zero, the block's
  output must still depend on its input (the identity path goes around the sublayer); a block
  without the residual collapses to a constant. With every sublayer zeroed the block is the
  identity (pre-norm, ``x + Sublayer(LN(x))``) or a normalization of its input (post-norm,
  ``LN(x + Sublayer(x))``, whose output is that of its last layer norm); a block that then
  ignores its input has no identity path, one whose normalized output does not come from a layer
  norm normalizes the identity path itself. The placement must be the same in every block.
* **K3** the feed-forward sublayer (the one that does not mix positions) widens d_model to a
  hidden width d_ff > d_model and projects back, and acts on each position with the same weights:
  permuting positions commutes with it, and one position alone gives what it gets in the sequence.
* **K4** every block maps [..., d_model] to the same shape, and no two blocks share a module or a
  parameter storage.
* **K5** if the output projection is tied, its weight is the embedding matrix itself (one Parameter
  object): a copy with equal values fails (it will drift apart in training), so does a second
  Parameter over the same storage (two gradients, counted twice). An untied model passes K5 as
  "not tied": the check only constrains tied models (the sheet: "if weight tying is used").

Limits, stated rather than hidden: K1 sees position that is *added* to the stream; a second,
relative mechanism inside attention (rotary, ALiBi) is not looked for. K3 recognises the
feed-forward sublayer as the one that does not mix positions, and reads d_ff as the input width of
the layer that projects back to d_model (or, for weights used directly, ``x @ W``, from the shape
of the last matrix with d_model on one side). K4 compares the parameters registered in each
block: a tensor that blocks share without registering it (held in a plain list, say) is not seen.
The probes are small (2 sequences of 8 tokens).

What the audit cannot decide it reports as *undecided*, with the reason; it never guesses. Hints
(``embedding=``, ``blocks=``, ``output=``, ``vocab_size=``, ``probe_tokens=``, ``forward=``) help it
on models it cannot decode by itself.
"""

from __future__ import annotations

import copy
import html
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from . import _validate as check
from .model import TransformerLM

__all__ = [
    "CHECKS",
    "STATUSES",
    "CheckResult",
    "AuditReport",
    "audit",
    "TorchEncoderLM",
    "PositionAfterFirstBlockLM",
    "MissingResidualLM",
    "NarrowFeedForwardLM",
    "PerPositionFeedForwardLM",
    "ReusedBlockLM",
    "CopiedOutputLM",
    "BROKEN_MODELS",
    "broken_model",
]

#: The checklist at the end of the sheet, one line per check.
CHECKS = {
    "K1": "Positional encoding is added to the token embeddings before the first block.",
    "K2": "Every sublayer is wrapped in a residual connection; layer norm placement is deliberate.",
    "K3": "The feed-forward block expands then contracts (d_model -> d_ff -> d_model), same weights at every position.",
    "K4": "Every block takes and returns d_model, and has its own weights.",
    "K5": "If weights are tied, the output projection is the embedding matrix itself.",
}
STATUSES = ("passed", "failed", "undecided")
_MARK = {"passed": "✓", "failed": "✗", "undecided": "?"}
_COLOR = {"passed": "#1a7f37", "failed": "#cf222e", "undecided": "#9a6700"}


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------
@dataclass
class CheckResult:
    """Lesson 9. The verdict on one check: ``status`` is "passed", "failed" or "undecided";
    ``finding`` one sentence; ``evidence`` the observations behind it (modules, shapes, tensors)."""

    check: str
    status: str
    finding: str
    evidence: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        lines = [f"{_MARK[self.status]} {self.check} {self.status}: {self.finding}"]
        lines += [f"    - {e}" for e in self.evidence]
        return "\n".join(lines)


class AuditReport:
    """Lesson 9. The result of :func:`audit`: one :class:`CheckResult` per check K1-K5.

    ``report.passed`` is True when all five passed; ``report.status("K3")``, ``report["K3"]``,
    ``report.failed`` (ids of failed checks), ``report.undecided``; ``report.found`` says which
    modules the audit took for the embedding, the blocks and the output projection.
    Displays as an HTML table in a notebook and as text with ``print``.
    """

    def __init__(self, results: dict[str, CheckResult], found: dict[str, str], title: str = ""):
        self.results = results
        self.found = found
        self.title = title

    def status(self, check_id: str) -> str:
        return self[check_id].status

    def __getitem__(self, check_id: str) -> CheckResult:
        if check_id not in self.results:
            raise KeyError(f"check must be one of {', '.join(self.results)}; got {check_id!r}")
        return self.results[check_id]

    def __iter__(self):
        return iter(self.results.values())

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results.values())

    @property
    def failed(self) -> list[str]:
        return [k for k, r in self.results.items() if r.status == "failed"]

    @property
    def undecided(self) -> list[str]:
        return [k for k, r in self.results.items() if r.status == "undecided"]

    def summary(self) -> str:
        counts = {s: sum(r.status == s for r in self) for s in STATUSES}
        return ", ".join(f"{n} {s}" for s, n in counts.items() if n)

    def __repr__(self) -> str:
        return f"<AuditReport {self.title or 'model'}: {self.summary()}>"

    def __str__(self) -> str:
        head = f"Audit of {self.title}" if self.title else "Audit"
        lines = [f"{head}: {self.summary()}"]
        lines += [f"  {k}: {v}" for k, v in self.found.items()]
        lines += [str(r) for r in self]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        found = "; ".join(f"<b>{e(k)}</b>: <code>{e(v)}</code>" for k, v in self.found.items())
        rows = []
        for r in self:
            ev = "".join(f"<li>{e(x)}</li>" for x in r.evidence)
            rows.append(
                f"<tr><td style='text-align:left;vertical-align:top'><b>{e(r.check)}</b></td>"
                f"<td style='text-align:left;vertical-align:top;white-space:nowrap;color:{_COLOR[r.status]}'>"
                f"<b>{_MARK[r.status]} {e(r.status)}</b></td>"
                f"<td style='text-align:left;vertical-align:top'>{e(r.finding)}"
                f"<ul style='margin:0;font-size:90%'>{ev}</ul></td></tr>"
            )
        head = e(f"Audit of {self.title}" if self.title else "Audit")
        return (
            f"<div><p><b>{head}</b>: {e(self.summary())}<br><small>{found}</small></p>"
            "<table><thead><tr><th style='text-align:left'>check</th>"
            "<th style='text-align:left'>verdict</th>"
            "<th style='text-align:left'>finding and evidence</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )


# --------------------------------------------------------------------------------------------
# Observing a model: hooks, replays, comparisons
# --------------------------------------------------------------------------------------------
def _first_tensor(obj):
    """The first tensor in a module's output (a tensor, a tuple/list, a dict or a ModelOutput)."""
    if isinstance(obj, torch.Tensor):
        return obj
    logits = getattr(obj, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, list | tuple):
        for item in obj:
            if isinstance(item, torch.Tensor):
                return item
    return None


def _replace_first(obj, new: torch.Tensor):
    """``obj`` with its first tensor replaced by ``new`` (for hooks that change an output)."""
    if isinstance(obj, torch.Tensor):
        return new
    if isinstance(obj, tuple | list):
        items = list(obj)
        for i, item in enumerate(items):
            if isinstance(item, torch.Tensor):
                items[i] = new
                return type(obj)(items) if isinstance(obj, list) else tuple(items)
    return obj


def _input_tensor(args, kwargs):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
    for a in kwargs.values():
        if isinstance(a, torch.Tensor):
            return a
    return None


def _scale(*ts: torch.Tensor) -> float:
    return max([float(t.detach().abs().max()) for t in ts if t.numel()] + [1e-12])


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())


def _same(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-5) -> bool:
    """Equal up to float32 rounding, relative to the size of the values."""
    return a.shape == b.shape and _maxdiff(a, b) <= rtol * max(_scale(a, b), 1e-3)


def _g(x: float) -> str:
    return f"{x:.3g}"


@dataclass
class _Call:
    module: nn.Module
    order: int
    args: tuple
    kwargs: dict
    x: torch.Tensor | None  # the first tensor input (a reference, not a copy)
    y: torch.Tensor | None  # the first tensor output, detached

    @property
    def x_shape(self):
        return list(self.x.shape) if self.x is not None else None

    @property
    def y_shape(self):
        return list(self.y.shape) if self.y is not None else None


class _Hooks:
    """Context manager: record the calls of ``modules`` (all calls, in order) and optionally
    replace the output of some modules by zeros."""

    def __init__(self, modules=(), zero=(), stretch=()):
        self.modules = list({id(m): m for m in modules}.values())
        self.zero = list({id(m): m for m in zero}.values())
        self.stretch = list({id(m): m for m in stretch}.values())
        self.calls: list[_Call] = []
        self._handles = []

    def __enter__(self):
        counter = [0]

        def record(module, args, kwargs, output):
            counter[0] += 1
            y = _first_tensor(output)
            self.calls.append(
                _Call(
                    module,
                    counter[0],
                    args,
                    kwargs,
                    _input_tensor(args, kwargs),
                    y.detach() if y is not None else None,
                )
            )

        def zero(module, args, kwargs, output):
            y = _first_tensor(output)
            return _replace_first(output, torch.zeros_like(y)) if y is not None else output

        def stretch(module, args, kwargs):
            # x -> 3 x + 0.5: an input no layer norm produced (so LN(x) != x afterwards)
            x = _input_tensor(args, kwargs)
            new = x * 3.0 + 0.5
            args = tuple(new if a is x else a for a in args)
            return args, {k: (new if v is x else v) for k, v in kwargs.items()}

        for m in self.stretch:
            self._handles.append(m.register_forward_pre_hook(stretch, with_kwargs=True))
        # zeroing hooks first, so that the recording hooks see the zeroed output
        for m in self.zero:
            self._handles.append(m.register_forward_hook(zero, with_kwargs=True))
        for m in self.modules:
            self._handles.append(m.register_forward_hook(record, with_kwargs=True))
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        return False

    def of(self, module) -> list[_Call]:
        return [c for c in self.calls if c.module is module]

    def first(self, module) -> _Call | None:
        calls = self.of(module)
        return calls[0] if calls else None


def _replay(call: _Call, new_x: torch.Tensor):
    """Call ``call.module`` again with the same arguments, every occurrence of the recorded input
    tensor (``self_attn(x, x, x)`` has three) replaced by ``new_x``; returns the first tensor."""
    old = call.x
    args = tuple(new_x if a is old else a for a in call.args)
    kwargs = {k: (new_x if v is old else v) for k, v in call.kwargs.items()}
    with torch.no_grad():
        return _first_tensor(call.module(*args, **kwargs))


def _params(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    return list(module.named_parameters(remove_duplicate=False))


def _n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for _, p in _params(module)}.values())


def _storage(p: torch.Tensor) -> int:
    return p.untyped_storage().data_ptr()


class _Failure(Exception):
    """Raised inside the audit when something it needs cannot be observed (-> undecided)."""


def _resolve(model: nn.Module, hint, what: str):
    """A module given directly, or as a dotted attribute path of ``model``."""
    if isinstance(hint, str):
        try:
            return model.get_submodule(hint)
        except AttributeError as e:
            raise ValueError(f"{what}={hint!r} is not a submodule of the model: {e}") from None
    if not isinstance(hint, nn.Module):
        raise TypeError(
            f"{what} must be a torch.nn.Module of the model or its dotted name, got {type(hint).__name__}"
        )
    return hint


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------
class _Auditor:
    def __init__(self, model, vocab_size, embedding, blocks, output, probe_tokens, forward, seed):
        self.model = model
        self.gen = torch.Generator().manual_seed(int(seed))
        self.names = {}
        for name, m in model.named_modules(remove_duplicate=False):
            self.names.setdefault(id(m), name or "(model)")
        self.forward_fn = forward
        self.use_cache_kw = "use_cache" in inspect.signature(model.forward).parameters
        self.vocab_hint = vocab_size
        self.embedding_hint = embedding
        self.blocks_hint = blocks
        self.output_hint = output
        self.probe_hint = probe_tokens
        self.found: dict[str, str] = {}
        first = next(iter(model.parameters()), None)
        self.device = first.device if first is not None else torch.device("cpu")

    # ---- running the model ----
    def run(self, tokens, modules=(), zero=(), stretch=()) -> tuple[torch.Tensor, _Hooks]:
        tokens = tokens.to(self.device)
        with _Hooks(modules, zero, stretch) as hooks, torch.enable_grad():
            if self.forward_fn is not None:
                out = self.forward_fn(self.model, tokens)
            elif self.use_cache_kw:
                out = self.model(tokens, use_cache=False)
            else:
                out = self.model(tokens)
        logits = _first_tensor(out)
        if logits is None:
            raise _Failure(
                f"the model returned {type(out).__name__}, not logits; pass forward=lambda model, tokens: ..."
            )
        return logits.detach(), hooks

    def name(self, m) -> str:
        return self.names.get(id(m), type(m).__name__)

    # ---- discovery ----
    def discover(self):
        model = self.model
        embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding)]
        if self.embedding_hint is not None:
            embeddings = [self.embedding_hint]
        if not embeddings:
            raise _Failure("no nn.Embedding in the model; pass embedding=<the token embedding>")
        sizes = [m.weight.shape[0] for m in embeddings]
        v0 = self.vocab_hint or min(sizes)
        n = 8
        if self.probe_hint is not None:
            tokens = self.probe_hint  # [B >= 2, n], checked by audit()
            n = tokens.shape[1]
        else:
            tokens = torch.randint(0, v0, (2, n), generator=self.gen)
        if self.embedding_hint is not None:
            emb = embeddings[0]  # taken as given: it may be used without being called
        else:
            _, hooks = self.run(tokens, embeddings)
            emb = next(
                (
                    c.module
                    for c in hooks.calls
                    if c.x is not None
                    and c.x.shape == tokens.shape
                    and torch.equal(c.x.cpu(), tokens)
                ),
                None,
            )
        if emb is None:
            raise _Failure(
                "no embedding module is called with the token ids; pass embedding=<the token embedding>"
            )
        self.embedding = emb
        self.E = getattr(emb, "weight", None)  # [vocab_size, d_model]
        if not isinstance(self.E, torch.Tensor) or self.E.dim() != 2:
            raise _Failure(
                f"the embedding {self.name(emb)} has no 2-D .weight [vocab_size, d_model]"
            )
        self.vocab = int(self.vocab_hint or self.E.shape[0])
        self.d_model = int(self.E.shape[1])
        if self.probe_hint is None:
            tokens = torch.randint(0, self.vocab, (2, n), generator=self.gen)
            while torch.equal(tokens[0], tokens[1]):
                tokens = torch.randint(0, self.vocab, (2, n), generator=self.gen)
        self.tokens = tokens
        self.B, self.n = tokens.shape
        self.found["embedding"] = f"{self.name(emb)} {list(self.E.shape)}"

        # the blocks: the repeated shape-preserving modules of a ModuleList / Sequential
        if self.blocks_hint is not None:
            entries, prefix = self.blocks_hint
            names = [f"{prefix}.{i}" if prefix else self.name(b) for i, b in enumerate(entries)]
            candidates = [(entries, names)]
        else:
            candidates = []
            for cname, m in model.named_modules():
                if isinstance(m, nn.ModuleList | nn.Sequential) and len(m) >= 1:
                    entries = list(m)
                    if len({type(e) for e in entries}) == 1 and _n_params(entries[0]) > 0:
                        candidates.append((entries, [f"{cname}.{i}" for i in range(len(entries))]))
        if not candidates:
            raise _Failure("no ModuleList/Sequential of repeated blocks found; pass blocks=[...]")
        allm = [e for entries, _ in candidates for e in entries]
        logits, hooks = self.run(self.tokens, allm)
        self.logits = logits
        best = None
        for entries, names in candidates:
            calls = [c for c in hooks.calls if any(c.module is e for e in entries)]
            ok = len(calls) >= len(entries) and all(
                c.x is not None
                and c.y is not None
                and c.x.dim() == 3
                and c.x.shape[-1] == self.d_model
                and self.n in c.x.shape[:2]
                for c in calls
            )
            if ok:
                size = sum(_n_params(e) for e in {id(e): e for e in entries}.values())
                if best is None or size > best[0]:
                    best = (size, entries, names, calls)
        if best is None:
            raise _Failure(
                "found no stack of blocks that receive the [batch, n, d_model] stream; pass blocks=[...]"
            )
        _, self.blocks, self.block_names, calls = best
        self.block_calls = calls[: len(self.blocks)]
        x0 = self.block_calls[0].x
        if tuple(x0.shape[:2]) == (self.B, self.n):
            self.pos_axis, self.batch_axis = 1, 0
        elif tuple(x0.shape[:2]) == (self.n, self.B):
            self.pos_axis, self.batch_axis = 0, 1
        else:
            raise _Failure(f"cannot tell the position axis of the stream {list(x0.shape)}")
        self.hidden_shape = list(x0.shape)
        self.found["blocks"] = (
            f"{len(self.blocks)} x {type(self.blocks[0]).__name__} "
            f"({self.block_names[0]} ... {self.block_names[-1]})"
        )
        self.found["d_model"] = str(self.d_model)
        self.found["vocab_size"] = str(self.vocab)
        self.found["probe"] = (
            f"tokens {list(self.tokens.shape)} -> logits {list(self.logits.shape)}"
        )

        # everything inside the blocks, first call of each module
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

    def _is_norm(self, m) -> bool:
        """A normalization, by behaviour: shape-preserving and blind to the scale of its input."""
        call = self.inner.get(id(m))
        if call is None or call.x is None or call.y is None or call.x.shape != call.y.shape:
            return False
        if call.x.shape[-1] != self.d_model:
            return False
        if any(p.dim() != 1 or p.shape[0] != self.d_model for _, p in _params(m)):
            return False
        x = call.x.detach() / _scale(call.x)  # [..., d_model], max |x| = 1
        try:  # large inputs, so that eps inside the norm does not matter
            y1, y2 = _replay(call, x * 100.0), _replay(call, x * 1000.0)
        except Exception:  # noqa: BLE001 - a module that cannot be replayed is not a norm
            return False
        return y1 is not None and _same(y1, y2, 1e-4) and not _same(y1, x * 100.0, 1e-4)

    def _contains_norm(self, m) -> bool:
        return any(id(d) in self.norms for d in m.modules())

    def _qualifies(self, m) -> bool:
        call = self.inner.get(id(m))
        return (
            call is not None
            and call.y is not None
            and list(call.y.shape) == self.hidden_shape
            and _n_params(m) > 0
            and not self._contains_norm(m)
        )

    def _is_wrapper(self, m) -> bool:
        """x + child(x) with no norm: a residual wrapper, look inside for the sublayer."""
        call = self.inner[id(m)]
        if call.x is None or call.x.shape != call.y.shape:
            return False
        for d in m.modules():
            if d is m or not self._qualifies(d):
                continue
            inner = self.inner[id(d)]
            if _same(call.y, call.x.detach() + inner.y, 1e-4):
                return True
        return False

    def _sublayers(self, block) -> list[nn.Module]:
        found = []

        def visit(module):
            for child in module.children():
                if self._qualifies(child) and not self._is_wrapper(child):
                    found.append(child)
                else:
                    visit(child)

        visit(block)
        return sorted(found, key=lambda m: self.inner_order.get(id(m), 0))

    def block_out(self, hooks: _Hooks, b: int) -> torch.Tensor:
        calls = [c for c in hooks.calls if any(c.module is e for e in self.blocks)]
        return calls[b]

    def rows(self, t: torch.Tensor, i: int) -> torch.Tensor:
        return t.select(self.batch_axis, i)

    # ---- K1 ----
    def k1(self) -> CheckResult:
        ev, not_added = [], False
        t1, t2 = int(self.tokens[0, 0]), int(self.tokens[1, 0])
        if t1 == t2:
            t2 = (t1 + 1) % self.vocab
        same = torch.tensor([[t1] * self.n, [t2] * self.n])  # [2, n]: one token repeated
        _, hooks = self.run(same, self.blocks)
        calls = [c for c in hooks.calls if any(c.module is e for e in self.blocks)]
        x0 = calls[0].x.detach()  # [2, n, d] (or [n, 2, d])
        seq = self.rows(x0, 0)  # [n, d]: token t1 at every position
        spread = _maxdiff(seq, seq[:1].expand_as(seq))
        first = self.block_names[0]
        failed = False
        if spread <= 1e-5 * _scale(seq):
            failed = True
            ev.append(
                f"token {t1} repeated at positions 0..{self.n - 1}: the input of {first} is the same "
                f"vector at every position (max difference {_g(spread)}): no position information "
                f"enters before the first block"
            )
        else:
            additive = self._additive(x0)
            where = "" if additive else self._added_before(same, calls[0])
            ev.append(
                f"token {t1} repeated at positions 0..{self.n - 1}: the input of {first} changes with "
                f"position (max difference {_g(spread)} between positions)"
                + (
                    f"; the change is the same for token {t2}: a position term added to the token embedding"
                    if additive
                    else f"; the change is the same for token {t2} at {where}: a position term is "
                    f"added to the token embedding there, then transformed before {first}"
                    if where
                    else f"; the change differs for token {t2} (by up to {_g(self._additive(x0, diff=True))}): "
                    f"position is combined with the token embedding some other way than by adding it"
                )
            )
            failed = not_added = not (additive or where)
        for b in range(1, len(calls)):
            prev, cur = calls[b - 1].y, calls[b].x.detach()
            if prev.shape != cur.shape or not _same(prev, cur):
                failed = True
                if prev.shape == cur.shape:
                    delta = self.rows(cur - prev, 0)  # [n, d]
                    varies = _maxdiff(delta, delta[:1].expand_as(delta)) > 1e-5 * _scale(delta)
                    what = (
                        "a term that differs by position (position injected after the first block)"
                        if varies
                        else "a term that is the same at every position"
                    )
                    ev.append(
                        f"the input of {self.block_names[b]} is not the output of "
                        f"{self.block_names[b - 1]}: the stream gains {what}, max |difference| "
                        f"{_g(_maxdiff(cur, prev))}"
                    )
                else:
                    ev.append(
                        f"the input of {self.block_names[b]} {list(cur.shape)} is not the output of "
                        f"{self.block_names[b - 1]} {list(prev.shape)}"
                    )
        if not failed:
            ev.append(
                f"each of {self.block_names[1]} onwards receives exactly the previous block's "
                f"output: nothing is added between blocks"
                if len(calls) > 1
                else "there is one block, so nothing can be added between blocks"
            )
            return CheckResult("K1", "passed", "position enters once, before the first block", ev)
        if not_added and len(ev) == 1:  # nothing wrong between blocks, only the addition
            return CheckResult("K1", "failed", "position is not added to the token embeddings", ev)
        return CheckResult(
            "K1", "failed", "position does not enter (only) before the first block", ev
        )

    def _additive(self, t: torch.Tensor, diff: bool = False):
        """For rows 0 and 1 of ``t`` (each one token repeated): does ``t`` depend on the token and
        on the position, and is the change from position 0 the same for both tokens
        (``h = E[t] + P[pos]``)?"""
        s1, s2 = self.rows(t.detach(), 0), self.rows(t.detach(), 1)  # [n, d] each
        p1, p2 = s1 - s1[:1], s2 - s2[:1]  # [n, d]: how position changes the vector
        if diff:
            return _maxdiff(p1, p2)
        varies = _maxdiff(p1, 0 * p1) > 1e-5 * _scale(s1)  # with the position
        token = _maxdiff(s1[:1], s2[:1]) > 1e-5 * _scale(s1, s2)  # with the token
        return varies and token and _same(p1, p2, 1e-4)

    def _added_before(self, tokens: torch.Tensor, first: _Call) -> str:
        """Name the place, between the embedding and the first block (a module's input or
        output, outside the blocks), where position is added; "" if there is none."""
        inside = {id(m) for b in self.blocks for m in b.modules()}
        outside = [m for m in self.model.modules() if m is not self.model and id(m) not in inside]
        _, hooks = self.run(tokens, [*outside, self.blocks[0]])
        start = next(c.order for c in hooks.calls if c.module is self.blocks[0])
        for c in hooks.calls:
            if c.order >= start or c.module is self.blocks[0]:
                break
            for kind, t in (("the input", c.x), ("the output", c.y)):
                if (
                    isinstance(t, torch.Tensor)
                    and t.is_floating_point()
                    and list(t.shape) == list(first.x.shape)
                    and self._additive(t)
                ):
                    return f"{kind} of {self.name(c.module)}"
        return ""

    # ---- K2 ----
    def k2(self) -> CheckResult:
        ev, failed, placements, unwrapped = [], False, [], False
        for b, (block, subs) in enumerate(zip(self.blocks, self.sublayers, strict=True)):
            bname = self.block_names[b]
            named = len(ev)  # evidence lines so far: was this block already named?
            if not subs:
                return CheckResult(
                    "K2",
                    "undecided",
                    f"found no sublayer in {bname}",
                    [
                        f"no module inside {bname} returns the stream's shape {self.hidden_shape} "
                        f"without containing a normalization; pass blocks= to point at the blocks"
                    ],
                )
            for s in subs:
                _, hooks = self.run(self.tokens, self.blocks, zero=[s])
                call = self.block_out(hooks, b)
                d = _maxdiff(self.rows(call.y, 0), self.rows(call.y, 1))
                if d <= 1e-5 * max(_scale(call.y), 1e-3):
                    failed = unwrapped = True
                    ev.append(
                        f"with {self.name(s)} ({type(s).__name__}) zeroed, {bname} returns the same "
                        f"output for two different inputs (max difference {_g(d)}): nothing goes around "
                        f"this sublayer, it is not wrapped in a residual"
                    )
            # every sublayer zeroed, and the block fed 3x + 0.5 (not the output of a layer norm)
            _, hooks = self.run(self.tokens, self.blocks, zero=subs, stretch=[block])
            call = self.block_out(hooks, b)
            norms_in_block = [m for m in block.modules() if id(m) in self.norms]
            if _same(call.y, call.x.detach(), 1e-4):
                placements.append("pre" if norms_in_block else "none")
            elif _maxdiff(self.rows(call.y, 0), self.rows(call.y, 1)) > 1e-5 * _scale(call.y):
                # post-norm ends on its layer norm: the block's output is that norm's output
                if norms_in_block and not self._ends_on_norm(b, norms_in_block):
                    placements.append("normalized skip")
                    failed = True
                    ev.append(
                        f"with its sublayers zeroed {bname} normalizes its input, yet its output is "
                        f"not the output of one of its layer norms: the identity path itself is "
                        f"normalized (as in LN(x) + Sublayer(LN(x))), neither pre-norm "
                        f"x + Sublayer(LN(x)) nor post-norm LN(x + Sublayer(x))"
                    )
                else:
                    placements.append("post")
            else:
                placements.append("no identity path")
                failed = unwrapped = True
                if len(ev) == named:  # no single sublayer was to blame: they are combined bare
                    ev.append(
                        f"with all its sublayers zeroed, {bname} returns the same output for two "
                        f"different inputs: the sublayers' outputs are combined with no identity path "
                        f"around them (a residual block computes x + Sublayer(...))"
                    )
        kinds = {
            "pre": "pre-norm: x + Sublayer(LN(x)); with its sublayers zeroed the block is the identity",
            "post": "post-norm: LN(x + Sublayer(x)); with its sublayers zeroed the block normalizes its input",
            "none": "no layer norm: x + Sublayer(x)",
        }
        self.found["norm placement"] = placements[0] if len(set(placements)) == 1 else "mixed"
        if not failed:
            names = ", ".join(sorted({type(s).__name__ for subs in self.sublayers for s in subs}))
            n_subs = sum(len(s) for s in self.sublayers)
            ev.insert(
                0,
                f"{n_subs} sublayers ({names}) in {len(self.blocks)} blocks; zeroing any one of them "
                f"leaves the block's output depending on its input: an identity path goes around each",
            )
            if len(set(placements)) != 1:
                return CheckResult(
                    "K2",
                    "failed",
                    "residuals present, but norm placement differs between blocks",
                    [*ev, "placement per block: " + ", ".join(placements)],
                )
            ev.append(
                kinds.get(placements[0], "placement not recognised")
                + f" (all {len(placements)} blocks)"
            )
            return CheckResult(
                "K2",
                "passed",
                f"every sublayer is in a residual; norm placement: {placements[0]} in every block",
                ev,
            )
        self.found["norm placement"] = ", ".join(dict.fromkeys(placements))
        if not unwrapped:
            return CheckResult(
                "K2", "failed", "the identity path is normalized: neither pre- nor post-norm", ev
            )
        return CheckResult("K2", "failed", "a sublayer is not wrapped in a residual", ev)

    def _ends_on_norm(self, b: int, norms: list[nn.Module]) -> bool:
        """Whether block ``b``'s output (a normal run) is the output of one of ``norms``."""
        _, hooks = self.run(self.tokens, [*self.blocks, *norms])
        y = self.block_out(hooks, b).y
        return any(c.y is not None and _same(c.y, y) for m in norms for c in hooks.of(m))

    # ---- K3 ----
    def _mixes(self, call: _Call) -> bool:
        x = call.x.detach()
        xp = x.clone()
        first = xp.select(self.pos_axis, 0)
        first += torch.randn(first.shape, generator=self.gen).to(x) * _scale(x)
        y, yp = _replay(call, x), _replay(call, xp)
        rest = slice(1, None)
        idx = [slice(None)] * y.dim()
        idx[self.pos_axis] = rest
        return not _same(y[tuple(idx)], yp[tuple(idx)], 1e-5)

    def _hidden_width(self, s) -> tuple[int, str]:
        call = self.inner[id(s)]
        contracting = []
        for d in s.modules():
            c = self.inner.get(id(d))
            if d is s or c is None or c.x is None or c.y is None or _n_params(d) == 0:
                continue
            if c.y.shape[-1] == self.d_model and c.x.shape[-1] != self.d_model:
                contracting.append((c.order, d, c))
        if contracting:
            _, d, c = max(contracting, key=lambda t: t[0])
            return int(c.x.shape[-1]), f"{self.name(d)} {c.x_shape} -> {c.y_shape}"
        # no submodule projects back (weights used directly, x @ W1 ... @ W2): read the hidden
        # width from the last matrix that has d_model on one side only
        mats = [
            (pname, p)
            for pname, p in s.named_parameters()
            if p.dim() == 2 and (p.shape[0] == self.d_model) != (p.shape[1] == self.d_model)
        ]
        if mats:
            pname, p = mats[-1]
            w = int(p.shape[1] if p.shape[0] == self.d_model else p.shape[0])
            return w, f"weight {self.name(s)}.{pname} {list(p.shape)}"
        w = int(call.x.shape[-1])
        return w, f"{self.name(s)} {call.x_shape} -> {call.y_shape}"

    def k3(self) -> CheckResult:
        ev, failed = [], False
        for b, subs in enumerate(self.sublayers):
            bname = self.block_names[b]
            ffns = []
            for s in subs:
                try:
                    mixes = self._mixes(self.inner[id(s)])
                except Exception as e:  # noqa: BLE001
                    return CheckResult(
                        "K3",
                        "undecided",
                        f"could not re-run {self.name(s)}",
                        [f"calling it again raised {type(e).__name__}: {e}"],
                    )
                if not mixes:
                    ffns.append(s)
            if not ffns:
                return CheckResult(
                    "K3",
                    "undecided",
                    f"found no position-wise sublayer in {bname}",
                    [
                        "every sublayer found mixes positions (changing position 0 changes later "
                        "outputs); the feed-forward block may be inlined in the block's forward"
                    ],
                )
            for f in ffns:
                call = self.inner[id(f)]
                width, where = self._hidden_width(f)
                if width <= self.d_model:
                    failed = True
                    ev.append(
                        f"{self.name(f)}: hidden width {width} <= d_model {self.d_model} "
                        f"(contracting layer {where}): it does not expand"
                    )
                elif b == 0:
                    ev.append(
                        f"{self.name(f)}: d_model {self.d_model} -> d_ff {width} -> d_model "
                        f"{self.d_model} (contracting layer {where}); d_ff/d_model = {_g(width / self.d_model)}"
                    )
                x = call.x.detach()
                perm = torch.randperm(self.n, generator=self.gen)
                while self.n > 1 and torch.equal(perm, torch.arange(self.n)):
                    perm = torch.randperm(self.n, generator=self.gen)
                perm = perm.to(x.device)
                y = _replay(call, x)
                yp = _replay(call, x.index_select(self.pos_axis, perm))
                if not _same(yp, y.index_select(self.pos_axis, perm)):
                    failed = True
                    ev.append(
                        f"{self.name(f)}: permuting the positions of its input does not just permute "
                        f"its output (max difference {_g(_maxdiff(yp, y.index_select(self.pos_axis, perm)))}): "
                        f"its weights depend on the position"
                    )
                    continue
                last = self.n - 1
                alone = _replay(call, x.narrow(self.pos_axis, last, 1))
                if not _same(alone, y.narrow(self.pos_axis, last, 1)):
                    failed = True
                    ev.append(
                        f"{self.name(f)}: position {last} alone gives a different output than inside "
                        f"the sequence (max difference {_g(_maxdiff(alone, y.narrow(self.pos_axis, last, 1)))})"
                    )
                elif b == 0:
                    ev.append(
                        f"{self.name(f)}: permuting positions commutes with it, and position {last} "
                        f"alone gives the same output: the same weights act on each position"
                    )
        if failed:
            return CheckResult(
                "K3", "failed", "a feed-forward block does not expand, or is not position-wise", ev
            )
        ev.append(f"the same holds in all {len(self.blocks)} blocks")
        return CheckResult(
            "K3",
            "passed",
            "every feed-forward expands then contracts, same weights at every position",
            ev,
        )

    # ---- K4 ----
    def k4(self) -> CheckResult:
        ev, failed = [], False
        for b, call in enumerate(self.block_calls):
            if call.x.shape != call.y.shape or call.y.shape[-1] != self.d_model:
                failed = True
                ev.append(
                    f"{self.block_names[b]} maps {call.x_shape} to {call.y_shape}, not d_model={self.d_model} to d_model"
                )
        shapes_ok = not failed
        seen: dict[int, int] = {}
        for b, blk in enumerate(self.blocks):
            if id(blk) in seen:
                failed = True
                ev.append(
                    f"{self.block_names[b]} is the same module object as {self.block_names[seen[id(blk)]]}: "
                    f"one block is reused at several depths ({sum(1 for c in self.block_calls if c.module is blk)} calls)"
                )
            else:
                seen[id(blk)] = b
        owners: dict[int, tuple[int, str]] = {}
        shared = []
        for b, blk in enumerate(self.blocks):
            if seen.get(id(blk)) != b:
                continue
            for pname, p in _params(blk):
                if p.numel() == 0:
                    continue
                key = _storage(p)
                if key in owners and owners[key][0] != b:
                    shared.append((owners[key], (b, pname), list(p.shape)))
                else:
                    owners.setdefault(key, (b, pname))
        for (b1, n1), (b2, n2), shape in shared[:3]:
            failed = True
            ev.append(
                f"{self.block_names[b1]}.{n1} and {self.block_names[b2]}.{n2} {shape} share one storage: "
                f"the blocks share weights"
            )
        if len(shared) > 3:
            ev.append(f"... {len(shared) - 3} more shared parameters")
        if shapes_ok:
            ev.append(
                f"every one of the {len(self.blocks)} blocks maps {self.hidden_shape} to {self.hidden_shape}"
            )
        if failed:
            return CheckResult(
                "K4",
                "failed",
                "blocks do not all map d_model to d_model with their own weights",
                ev,
            )
        per = sorted({_n_params(b) for b in self.blocks})
        ev.append(
            f"no module or parameter storage is shared between blocks ({', '.join(map(str, per))} parameters per block)"
        )
        return CheckResult(
            "K4", "passed", "every block maps d_model to d_model and owns its weights", ev
        )

    # ---- K5 ----
    def _output_module(self):
        if self.output_hint is not None:
            return self.output_hint
        owners = [m for m in self.model.modules() if any(True for _ in m.parameters(recurse=False))]
        _, hooks = self.run(self.tokens, owners)
        vocab_out = [c for c in hooks.calls if c.y is not None and c.y.shape[-1] == self.vocab]
        return vocab_out[-1].module if vocab_out else None

    def k5(self) -> CheckResult:
        ev = []
        E = self.E
        out = self._output_module()
        W, wname = None, None
        if out is not None:
            for pname, p in out.named_parameters(recurse=False):
                if p.dim() == 2 and set(p.shape) == {self.vocab, self.d_model}:
                    W, wname = p, f"{self.name(out)}.{pname}"
        # experiment: nudge the embedding row of a token that is not in the probe
        unused = sorted(set(range(self.vocab)) - set(self.tokens.flatten().tolist()))
        moved = None
        if unused:
            v = unused[0]
            with torch.no_grad():
                saved = E[v].clone()
                E[v] += torch.randn(E.shape[1], generator=self.gen).to(E) * _scale(E)
                try:
                    logits, _ = self.run(self.tokens)
                finally:
                    E[v].copy_(saved)
            moved = _maxdiff(logits[..., v], self.logits[..., v])
            moved_txt = f"changing row {v} of the embedding (token {v} is not in the probe) " + (
                f"changes logit {v} by up to {_g(moved)}"
                if moved > 1e-4 * _scale(self.logits)
                else f"leaves logit {v} unchanged"
            )
        self.found["output projection"] = (
            f"{wname} {list(W.shape)}"
            if W is not None
            else "no module with a [vocab, d_model] weight found"
        )
        ename = f"{self.name(self.embedding)}.weight"
        if W is not None and W is E:
            ev.append(f"{wname} is {ename}: the same Parameter object {list(E.shape)}")
            if moved is not None:
                ev.append(moved_txt)
            return CheckResult(
                "K5", "passed", "tied: the output projection is the embedding matrix itself", ev
            )
        if W is not None and _storage(W) == _storage(E):
            ev.append(
                f"{wname} and {ename} are two Parameter objects over the same storage: each gets its own "
                f"gradient, the optimizer updates the numbers twice, and they count twice as parameters"
            )
            return CheckResult(
                "K5", "failed", "tied through shared storage, not the same tensor", ev
            )
        if W is not None and (
            (W.shape == E.shape and torch.equal(W, E))
            or (W.shape == E.T.shape and torch.equal(W, E.T))
        ):
            ev.append(
                f"{wname} {list(W.shape)} has equal values to {ename}, but different storage: a copy, "
                f"which training will pull apart"
            )
            if moved is not None:
                ev.append(moved_txt)
            return CheckResult(
                "K5", "failed", "the output projection is a copy of the embedding", ev
            )
        if W is not None:
            ev.append(f"{wname} {list(W.shape)} is a separate matrix with its own values")
            if moved is not None:
                ev.append(moved_txt)
            return CheckResult(
                "K5",
                "passed",
                "not tied: a separate output matrix (K5 only constrains tied models)",
                ev,
            )
        if moved is not None and moved > 1e-4 * _scale(self.logits):
            ev.append(moved_txt + ": the logits are computed from the embedding matrix itself")
            return CheckResult(
                "K5", "passed", "tied: the logits use the embedding matrix itself", ev
            )
        return CheckResult(
            "K5",
            "undecided",
            "could not find the output projection",
            ["no module produced vocab-sized outputs from a [vocab, d_model] weight; pass output="],
        )


def audit(
    model: nn.Module,
    *,
    vocab_size: int | None = None,
    embedding: nn.Module | str | None = None,
    blocks: Sequence[nn.Module] | str | None = None,
    output: nn.Module | str | None = None,
    probe_tokens: torch.Tensor | None = None,
    forward: Callable | None = None,
    seed: int = 0,
    title: str = "",
) -> AuditReport:
    """Lesson 9. Run the sheet's checklist K1-K5 on ``model`` by observing it; return the report.

    ``model`` maps token ids [batch, n] to logits [batch, n, vocab_size] (a tensor, a tuple whose
    first item is the logits, or an object with ``.logits``). The audit finds the token embedding
    (the module called with the token ids), the blocks (the ModuleList/Sequential of same-type
    modules that receive the [batch, n, d_model] stream), their sublayers (the modules inside a
    block that return the stream's shape and contain no normalization) and the output projection
    (the last module with a [vocab_size, d_model] weight producing vocab-sized outputs).

    Hints for models it cannot decode: ``embedding``, ``blocks`` (a list of modules, or the dotted
    name of their container), ``output`` (modules or dotted names), ``vocab_size``,
    ``probe_tokens`` ([batch >= 2, n] ids), ``forward(model, tokens) -> logits``.
    The model is put in eval mode for the audit and restored afterwards; its weights are unchanged.
    The audit runs torch on one thread (restored afterwards): its probes are tiny.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if vocab_size is not None:
        vocab_size = check.positive_int("vocab_size", vocab_size)
    seed = check.positive_int("seed", seed, minimum=0)
    if forward is not None and not callable(forward):
        raise TypeError(
            f"forward must be a function forward(model, tokens) -> logits, got {type(forward).__name__}"
        )
    embedding = None if embedding is None else _resolve(model, embedding, "embedding")
    output = None if output is None else _resolve(model, output, "output")
    if blocks is not None:
        if isinstance(blocks, str):
            container = _resolve(model, blocks, "blocks")
            if not isinstance(container, nn.ModuleList | nn.Sequential):
                raise TypeError(
                    f"blocks={blocks!r} must name the container of the blocks (an nn.ModuleList or "
                    f"nn.Sequential), got a {type(container).__name__}"
                )
            blocks = (list(container), blocks)
        elif isinstance(blocks, Sequence | nn.ModuleList | nn.Sequential) and all(
            isinstance(b, nn.Module) for b in blocks
        ):
            blocks = (list(blocks), "")
        else:
            raise TypeError(
                f"blocks must be a list of the model's blocks, their container or its dotted name, "
                f"got {type(blocks).__name__}"
            )
        if not blocks[0]:
            raise ValueError("blocks must name at least one block, got an empty list")
    if probe_tokens is not None:
        check.tensor("probe_tokens", probe_tokens, ndim=2, layout="[batch, n]")
        if probe_tokens.is_floating_point() or probe_tokens.is_complex():
            raise TypeError(
                f"probe_tokens must hold integer token ids (torch.long), got dtype {probe_tokens.dtype}"
            )
        if probe_tokens.shape[0] < 2 or probe_tokens.shape[1] < 2:
            raise ValueError(
                f"probe_tokens must hold at least 2 sequences of at least 2 tokens [batch >= 2, n >= 2], "
                f"got shape {list(probe_tokens.shape)}"
            )
        if torch.equal(probe_tokens[0], probe_tokens[1]):
            raise ValueError("probe_tokens: the first two sequences must differ (K2 compares them)")
        probe_tokens = probe_tokens.long()
    modes = {m: m.training for m in model.modules()}
    model.eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the probes are tiny: one thread is ~30x faster on a busy machine
    results: dict[str, CheckResult] = {}
    try:
        a = _Auditor(model, vocab_size, embedding, blocks, output, probe_tokens, forward, seed)
        try:
            a.discover()
        except Exception as e:  # noqa: BLE001 - a model the audit cannot read is reported, not raised
            reason = (
                str(e)
                if isinstance(e, _Failure)
                else f"running the model raised {type(e).__name__}: {e}"
            )
            for k in CHECKS:
                results[k] = CheckResult(
                    k, "undecided", "the audit could not read the model", [reason]
                )
            return AuditReport(results, a.found, title)
        for k, fn in (("K1", a.k1), ("K2", a.k2), ("K3", a.k3), ("K4", a.k4), ("K5", a.k5)):
            try:
                results[k] = fn()
            except _Failure as e:
                results[k] = CheckResult(k, "undecided", "could not be observed", [str(e)])
            except Exception as e:  # noqa: BLE001 - a model the audit cannot drive is reported, not raised
                results[k] = CheckResult(
                    k, "undecided", "the experiment failed", [f"{type(e).__name__}: {e}"]
                )
        return AuditReport(results, a.found, title)
    finally:
        torch.set_num_threads(threads)
        for m, mode in modes.items():
            m.training = mode


# --------------------------------------------------------------------------------------------
# A model built from PyTorch's own layers, and deliberately broken models (one per check)
# --------------------------------------------------------------------------------------------
class TorchEncoderLM(nn.Module):
    """Lesson 9. A causal LM from PyTorch's own ``nn.TransformerEncoderLayer`` (not the course's
    code): token embedding + learned position, ``n_layers`` layers (``norm_first`` True = pre-norm),
    a final LayerNorm for pre-norm, output projection tied to the embedding if ``tie_weights``."""

    def __init__(
        self,
        vocab_size: int = 100,
        d_model: int = 32,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int | None = None,
        max_len: int = 64,
        norm_first: bool = True,
        tie_weights: bool = True,
    ):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.tok = nn.Embedding(vocab_size, d_model)  # [V, d]
        self.pos = nn.Embedding(max_len, d_model)  # [max_len, d]
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first
            )
            for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size, bias=False)  # weight [V, d]
        if tie_weights:
            self.head.weight = self.tok.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(n, device=tokens.device))  # [B, n, d]
        mask = nn.Transformer.generate_square_subsequent_mask(n)  # [n, n], -inf above diagonal
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)  # [B, n, d]
        return self.head(self.ln_f(h))  # [B, n, V]


_SMALL = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=32)


class PositionAfterFirstBlockLM(TransformerLM):
    """Lesson 9, broken for K1: position is added *after* the first block, not before it."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.token_embedding(tokens)  # [B, n, d]: no position yet
        for i, block in enumerate(self.blocks):
            h = block(h)  # [B, n, d]
            if i == 0:
                h = self.position(h)  # the bug: position enters after block 0
        return self.lm_head(self.final_norm(h))  # [B, n, V]


class _NoResidual(nn.Module):
    """The sublayer of a Residual with the ``x +`` left out: LN then sublayer (pre) or the reverse."""

    def __init__(self, residual: nn.Module):
        super().__init__()
        self.sublayer, self.norm = residual.sublayer, residual.norm
        self.norm_placement = residual.norm_placement

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_placement == "post":
            return self.norm(self.sublayer(x))  # no x + ...
        return self.sublayer(self.norm(x))  # no x + ...


class MissingResidualLM(TransformerLM):
    """Lesson 9, broken for K2: the last block's feed-forward is not wrapped in a residual."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks[-1].ffn = _NoResidual(self.blocks[-1].ffn)


class NarrowFeedForwardLM(TransformerLM):
    """Lesson 9, broken for K3: d_ff = d_model / 2, so the feed-forward narrows, then widens."""

    def __init__(self, vocab_size, d_model, n_layers, n_heads, **kwargs):
        kwargs["d_ff"] = d_model // 2
        super().__init__(vocab_size, d_model, n_layers, n_heads, **kwargs)


class _PerPositionFeedForward(nn.Module):
    """A feed-forward with a different pair of weight matrices for every position."""

    def __init__(self, template: nn.Module, n_positions: int):
        super().__init__()
        self.d_model = template.d_model
        self.per_position = nn.ModuleList(copy.deepcopy(template) for _ in range(n_positions))
        for ff in self.per_position:
            for p in ff.parameters():
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # [B, n, d]: position i goes through its own feed-forward per_position[i]
        return torch.stack([self.per_position[i](x[:, i]) for i in range(x.shape[1])], dim=1)


class PerPositionFeedForwardLM(TransformerLM):
    """Lesson 9, broken for K3: each position has its own feed-forward weights."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for block in self.blocks:
            block.ffn.sublayer = _PerPositionFeedForward(block.ffn.sublayer, self.config.max_len)


class ReusedBlockLM(TransformerLM):
    """Lesson 9, broken for K4: one block object at every depth (``[block] * n_layers``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = nn.ModuleList([self.blocks[0]] * self.config.n_layers)


class CopiedOutputLM(TransformerLM):
    """Lesson 9, broken for K5: the output projection holds a *copy* of the embedding matrix."""

    def __init__(self, *args, **kwargs):
        kwargs["tie_weights"] = False
        super().__init__(*args, **kwargs)
        self.lm_head.weight = nn.Parameter(self.token_embedding.weight.detach().clone())


#: One deliberately broken model per check (K3 has two).
BROKEN_MODELS = {
    "K1": PositionAfterFirstBlockLM,
    "K2": MissingResidualLM,
    "K3": NarrowFeedForwardLM,
    "K3-per-position": PerPositionFeedForwardLM,
    "K4": ReusedBlockLM,
    "K5": CopiedOutputLM,
}


def broken_model(flaw: str, seed: int = 0, **kwargs) -> TransformerLM:
    """Lesson 9. A small TransformerLM with one deliberate flaw, the one ``flaw`` (a key of
    :data:`BROKEN_MODELS`) names; ``kwargs`` override the small default settings."""
    check.choice("flaw", flaw, BROKEN_MODELS)
    torch.manual_seed(check.positive_int("seed", seed, minimum=0))
    return BROKEN_MODELS[flaw](**{**_SMALL, **kwargs})
