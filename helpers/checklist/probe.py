"""The audit's probing machinery: record what modules receive and return, replay them, compare.

Nothing here knows the checklist. :class:`Hooks` records every call of some modules during one
forward pass and may change what some of them return (``edit``) or receive (``stretch``);
:func:`replay` calls a recorded module again with its input (and any other tensor argument)
replaced; :class:`Tolerance` says when two tensors are equal *for the precision they were
computed in* (float32, float16 and bfloat16 round very differently); :class:`Layout` turns a
tensor of the stream in any of its layouts ([B, n, ...], [n, B, ...] or flattened [B*n, ...])
into [B, n, ...] and back, so that the checks can permute and pick positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..printing import fmt

__all__ = [
    "Failure",
    "Call",
    "Hooks",
    "Layout",
    "Tolerance",
    "first_tensor",
    "replace_first",
    "replay",
    "scale",
    "maxdiff",
    "params",
    "n_params",
    "storage",
    "resolve",
    "num",
]


class Failure(Exception):
    """Raised inside the audit when something it needs cannot be observed (-> undecided)."""


def first_tensor(obj):
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


def replace_first(obj, new: torch.Tensor):
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
    for a in [*args, *kwargs.values()]:
        if isinstance(a, torch.Tensor):
            return a
    return None


def scale(*ts: torch.Tensor) -> float:
    """The largest absolute value in ``ts`` (at least 1e-12)."""
    return max([float(t.detach().abs().max()) for t in ts if t.numel()] + [1e-12])


def maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())


def num(x: float, dtype) -> str:
    """A computed number for a message: 2 significant digits, stating the precision it came from."""
    return fmt(float(x), 2, computed_in=dtype if dtype in _FMT_DTYPES else torch.float32)


_FMT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


class Tolerance:
    """When two tensors computed in ``dtype`` count as equal, relative to the size of the values.

    ``tight`` is for results that only rounding can separate (a replay, a row of a position-wise
    map); ``loose`` for results that went through a normalization or a sum of terms. float32's
    are 1e-5 and 1e-4; half precision has 8 (float16: 11) significant bits instead of 24, so its
    tolerances are larger by the ratio of the unit roundoffs, capped so a real difference of a few
    percent still shows.
    """

    _TIGHT = {torch.float16: 4e-3, torch.bfloat16: 2e-2}
    _LOOSE = {torch.float16: 1e-2, torch.bfloat16: 6e-2}

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self.tight = self._TIGHT.get(dtype, 1e-5)
        self.loose = self._LOOSE.get(dtype, 1e-4)

    def same(self, a: torch.Tensor, b: torch.Tensor, loose: bool = False) -> bool:
        rtol = self.loose if loose else self.tight
        return a.shape == b.shape and maxdiff(a, b) <= rtol * max(scale(a, b), 1e-3)

    def varies(self, t: torch.Tensor, ref_scale: float, loose: bool = False) -> bool:
        """Whether ``t`` (a difference) is more than rounding, relative to ``ref_scale``."""
        rtol = self.loose if loose else self.tight
        return t.numel() > 0 and float(t.detach().abs().max()) > rtol * ref_scale


@dataclass
class Call:
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

    def tensors(self) -> list[torch.Tensor]:
        """The distinct floating tensors among the arguments, the input ``x`` first."""
        seen, out, flat = set(), [], []
        for a in [self.x, *self.args, *self.kwargs.values()]:
            flat += list(a) if isinstance(a, tuple) else [a]  # (cos, sin) of rotary, say
        for a in flat:
            if isinstance(a, torch.Tensor) and a.is_floating_point() and id(a) not in seen:
                seen.add(id(a))
                out.append(a)
        return out


class Hooks:
    """Context manager: record the calls of ``modules`` (all calls, in order of completion);
    ``edit`` maps a module to ``fn(call) -> new first output`` (zeroing a sublayer, nudging one
    entry); ``stretch`` maps a block to ``(a, b)``: its input x is replaced by ``a x + b``."""

    def __init__(self, modules=(), edit: dict | None = None, stretch: dict | None = None):
        self.modules = list({id(m): m for m in modules}.values())
        self.edit = edit or {}
        self.stretch = stretch or {}
        self.calls: list[Call] = []
        self._handles = []

    def __enter__(self):
        counter = [0]

        def record(module, args, kwargs, output):
            counter[0] += 1
            y = first_tensor(output)
            x = _input_tensor(args, kwargs)
            self.calls.append(
                # a copy: the model may change its output in place afterwards (Falcon's mlp_output += ...)
                Call(
                    module,
                    counter[0],
                    args,
                    kwargs,
                    x,
                    y.detach().clone() if y is not None else None,
                )
            )

        def edit(fn):
            def hook(module, args, kwargs, output):
                y = first_tensor(output)
                if y is None:
                    return output
                call = Call(module, 0, args, kwargs, _input_tensor(args, kwargs), y)
                return replace_first(output, fn(call))

            return hook

        def stretch(a, b):
            def hook(module, args, kwargs):
                x = _input_tensor(args, kwargs)
                new = x * a + b
                args = tuple(new if v is x else v for v in args)
                return args, {k: (new if v is x else v) for k, v in kwargs.items()}

            return hook

        for m, (a, b) in self.stretch.items():
            self._handles.append(m.register_forward_pre_hook(stretch(a, b), with_kwargs=True))
        for m, fn in self.edit.items():  # editing hooks first: the recording hooks see the edit
            self._handles.append(m.register_forward_hook(edit(fn), with_kwargs=True))
        for m in self.modules:
            self._handles.append(m.register_forward_hook(record, with_kwargs=True))
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        return False

    def of(self, module) -> list[Call]:
        return [c for c in self.calls if c.module is module]

    def first(self, module) -> Call | None:
        calls = self.of(module)
        return calls[0] if calls else None


def replay(
    call: Call,
    new_x: torch.Tensor | None = None,
    others: dict | None = None,
    module=None,
    grad: bool = False,
):
    """Call ``call.module`` (or ``module``, a copy of it) again with the same arguments: every
    occurrence of the recorded input (``self_attn(x, x, x)`` has three) replaced by ``new_x``, and
    every tensor whose ``id`` is a key of ``others`` by its value; returns the first output tensor
    (with ``grad=True`` recorded for autograd, so that a derivative in ``new_x`` can be taken)."""
    subs = dict(others or {})
    if new_x is not None:
        subs[id(call.x)] = new_x

    def sub(v):
        if isinstance(v, torch.Tensor) and id(v) in subs:
            return subs[id(v)]
        if isinstance(v, tuple) and any(id(t) in subs for t in v if isinstance(t, torch.Tensor)):
            return tuple(sub(t) for t in v)
        return v

    args = tuple(sub(a) for a in call.args)
    kwargs = {k: sub(v) for k, v in call.kwargs.items()}
    with torch.enable_grad() if grad else torch.no_grad():
        return first_tensor((module or call.module)(*args, **kwargs))


class Layout:
    """The layout of the residual stream, [B, n, d] or [n, B, d], and its flattened form [B*n, d]
    (a feed-forward run on ``x.reshape(-1, d_model)``). ``to_bn`` views any tensor of the stream's
    positions as [B, n, ...]; ``from_bn`` restores the original layout."""

    def __init__(self, batch: int, n: int, batch_first: bool):
        self.B, self.n, self.batch_first = batch, n, batch_first

    def knows(self, t: torch.Tensor) -> bool:
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            return False
        lead = (self.B, self.n) if self.batch_first else (self.n, self.B)
        return tuple(t.shape[:2]) == lead or (t.shape[0] == self.B * self.n and t.dim() >= 2)

    def to_bn(self, t: torch.Tensor) -> torch.Tensor:
        lead = (self.B, self.n) if self.batch_first else (self.n, self.B)
        if tuple(t.shape[:2]) != lead:  # flattened [B*n, ...]
            t = t.reshape(*lead, *t.shape[1:])
        return t if self.batch_first else t.transpose(0, 1)

    def from_bn(self, t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        if not self.batch_first:
            t = t.transpose(0, 1)
        return t.reshape(like.shape[0], *t.shape[2:]) if t.shape[:2] != like.shape[:2] else t

    def narrow(self, t: torch.Tensor, pos: int) -> torch.Tensor:
        """Position ``pos`` alone, in ``t``'s own layout ([B, 1, ...], [1, B, ...] or [B, ...])."""
        lead = (self.B, self.n) if self.batch_first else (self.n, self.B)
        bn = self.to_bn(t).narrow(1, pos, 1)
        if tuple(t.shape[:2]) != lead:  # flattened: [B*1, ...]
            return bn.reshape(self.B, *t.shape[1:])
        return bn if self.batch_first else bn.transpose(0, 1)

    def permute(self, t: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
        return self.from_bn(self.to_bn(t).index_select(1, perm.to(t.device)), t)


def params(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    return list(module.named_parameters(remove_duplicate=False))


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for _, p in params(module)}.values())


def storage(p: torch.Tensor) -> int:
    return p.untyped_storage().data_ptr()


def resolve(model: nn.Module, hint, what: str) -> nn.Module:
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


Edit = Callable[[Call], torch.Tensor]
