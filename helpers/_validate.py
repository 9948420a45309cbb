"""Argument checks shared by every public helper.

Each check raises a ``ValueError`` or ``TypeError`` whose message names the argument, what was
given and what is allowed, so that a student sees one readable line instead of a shape-mismatch
traceback from deep inside PyTorch.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Iterable
from contextlib import contextmanager

import torch


def positive_int(name: str, value, *, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is a whole number >= ``minimum``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            raise TypeError(
                f"{name} must be a whole number (int), got the float {value!r}; "
                f"write {int(value)} instead of {value!r}"
            )
        raise TypeError(
            f"{name} must be a whole number (int), got {value!r} ({type(value).__name__})"
        )
    if value < minimum:
        allowed = "a positive whole number" if minimum == 1 else f"a whole number >= {minimum}"
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return int(value)


def positive_float(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite number > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def choice(name: str, value, allowed: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise naming the allowed values."""
    allowed = tuple(allowed)
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{name} must be one of {options}; got {value!r}")
    return value


def tensor(
    name: str, x, *, ndim: int | None = None, last_dim: int | None = None, layout: str = ""
) -> torch.Tensor:
    """Check that ``x`` is a tensor with ``ndim`` dimensions and last size ``last_dim``.

    ``layout`` names the expected axes (for example ``"[batch, n, d_model]"``) for the message.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor {layout}".rstrip() + f", got {type(x).__name__}"
        )
    if ndim is not None and x.dim() != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimensions {layout}".rstrip()
            + f", got shape {list(x.shape)} ({x.dim()} dimensions)"
        )
    if last_dim is not None and x.dim() == 0:
        raise ValueError(
            f"{name} must have at least one dimension {layout or '[..., d_model]'}".rstrip()
            + f" with d_model={last_dim}, got a 0-dimensional tensor (a single number)"
        )
    if last_dim is not None and x.shape[-1] != last_dim:
        raise ValueError(
            f"{name} has last dimension {x.shape[-1]} but this module was built for "
            f"d_model={last_dim}: expected shape {layout or '[..., d_model]'} with d_model={last_dim}, "
            f"got {list(x.shape)}"
        )
    return x


def floating_like(name: str, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Check that tensor ``x`` holds floating-point numbers of the weights' ``dtype`` (a clear
    error instead of torch's "mat1 and mat2 must have the same dtype"); autocast may mix dtypes."""
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must hold floating-point numbers (torch.float32), got dtype {x.dtype}"
        )
    if x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
        raise TypeError(
            f"{name} has dtype {x.dtype} but the block's weights are {dtype}: convert one of them "
            f"({name}.to({dtype}) or the module with .to({x.dtype}))"
        )
    return x


def token_ids(name: str, tokens, vocab_size: int) -> torch.Tensor:
    """Check a [batch, n] tensor of integer token ids in 0..vocab_size-1."""
    tensor(name, tokens, ndim=2, layout="[batch, n]")
    if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(
            f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}"
        )
    if tokens.numel() and tokens.device.type != "meta":
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= vocab_size:
            raise ValueError(
                f"{name} must hold ids in 0..{vocab_size - 1} (vocab_size={vocab_size}), "
                f"got values from {lo} to {hi}"
            )
    return tokens


class _Pass(threading.local):
    depth = 0


_PASS = _Pass()


@contextmanager
def model_pass():
    """Inside the ``with`` block a model's forward pass runs on inputs its public entry point
    (``TransformerLM.forward``/``loss``, ``TransformerBlock.forward``) has already checked: the
    course's layers called in it skip their own argument checks (:func:`checking` is False) and
    compute with torch's fused kernels (``F.layer_norm``, ``F.gelu``,
    ``F.scaled_dot_product_attention``), the same formulas. Called on their own, the layers check
    their arguments and compute from the formula, as the lessons build them."""
    _PASS.depth += 1
    try:
        yield
    finally:
        _PASS.depth -= 1


def checking() -> bool:
    """True unless inside :func:`model_pass`: a layer checks its arguments (and computes from its
    formula) only when called on its own."""
    return not _PASS.depth
