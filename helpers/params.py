"""Counting parameters (lessons 6 to 8).

A tensor shared by two modules (the tied embedding and output projection, lesson 8) is one set
of numbers to learn, so it counts once.
"""

from __future__ import annotations

from torch import nn

from . import _validate as check
from .feedforward import ffn_parameter_count
from .model import POSITIONAL_OPTIONS
from .normalization import NORM_PLACEMENTS, NORM_TYPES

__all__ = ["count_parameters", "parameter_breakdown", "lm_parameter_counts", "tying_saving"]


def _check_module(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Lessons 6-8. The number of distinct parameter values in ``model``.

    ``sum(p.numel() for p in unique parameters)``: a Parameter reachable from two modules
    counts once. Works on the meta device (nothing is allocated).
    """
    seen: set[int] = set()
    total = 0
    for _, p in _check_module(model).named_parameters(remove_duplicate=False):
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Lessons 7-8. Parameters per top-level child of ``model`` (a shared tensor counts in the
    first child that owns it), plus ``"total"``; the values add up to the total."""
    seen: set[int] = set()
    parts: dict[str, int] = {}
    for name, child in _check_module(model).named_children():
        n = 0
        for _, p in child.named_parameters(remove_duplicate=False):
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        parts[name] = n
    own = sum(p.numel() for p in model.parameters(recurse=False) if id(p) not in seen)
    if own:
        parts["(own)"] = own
    parts["total"] = sum(parts.values())
    return parts


def lm_parameter_counts(
    vocab_size: int,
    d_model: int,
    n_layers: int,
    d_ff: int | None = None,
    max_len: int = 1024,
    positional: str = "learned",
    norm: str = "pre",
    activation: str = "gelu",
    tie_weights: bool = True,
    norm_type: str = "layer",
) -> dict[str, int]:
    """Lesson 8 (C8.4). The parameters of a :class:`~helpers.model.TransformerLM`, from formulas.

    No model is built, so this is instant at any size (the lesson 8 explorer uses it; the tests
    check it against :func:`count_parameters` on the meta device)::

        embedding  = vocab_size * d_model                       (W_E, C8.1)
        position   = max_len * d_model if learned, else 0       (sinusoidal, rotary, alibi, none:
                                                                 no parameters)
        per block  = 4 (d_model^2 + d_model)                    (W_Q, W_K, W_V, W_O and biases)
                   + FFN(d_model, d_ff, activation)             (lesson 6)
                   + 2 * norm_size if norm != "none"            (two norms)
        blocks     = n_layers * per block
        final_norm = norm_size if norm == "pre" else 0
        output     = 0 if tie_weights else vocab_size * d_model (tied: W_E itself, C8.3)

    where ``norm_size`` is 2 d_model for LayerNorm (gamma and beta) and d_model for RMSNorm
    (``norm_type="rms"``: the gain only, C5.8).

    Returns a dict with those keys plus ``"per_block"`` and ``"total"`` (``per_block`` is not
    part of the sum). The saving from tying is ``vocab_size * d_model`` (:func:`tying_saving`).
    """
    vocab_size = check.positive_int("vocab_size", vocab_size)
    d_model = check.positive_int("d_model", d_model)
    n_layers = check.positive_int("n_layers", n_layers)
    max_len = check.positive_int("max_len", max_len)
    check.choice("positional", positional, POSITIONAL_OPTIONS)
    check.choice("norm", norm, NORM_PLACEMENTS)
    check.choice("norm_type", norm_type, NORM_TYPES)
    if not isinstance(tie_weights, bool):
        raise TypeError(f"tie_weights must be True or False, got {tie_weights!r}")
    attention = 4 * (d_model * d_model + d_model)
    ffn = ffn_parameter_count(d_model, d_ff, activation)
    norm_size = 2 * d_model if norm_type == "layer" else d_model  # [gamma, beta] or [g]
    norms = 0 if norm == "none" else 2 * norm_size
    per_block = attention + ffn + norms
    counts = {
        "embedding": vocab_size * d_model,
        "position": max_len * d_model if positional == "learned" else 0,
        "blocks": n_layers * per_block,
        "final_norm": norm_size if norm == "pre" else 0,
        "output": 0 if tie_weights else vocab_size * d_model,
    }
    counts["total"] = sum(counts.values())
    counts["per_block"] = per_block
    return counts


def tying_saving(vocab_size: int, d_model: int) -> int:
    """Lesson 8 (C8.4). Parameters saved by tying: the output matrix that is no longer learned,
    ``vocab_size * d_model`` (50,000 x 768 = 38,400,000)."""
    return check.positive_int("vocab_size", vocab_size) * check.positive_int("d_model", d_model)
