"""Counting parameters (lessons 6 to 8).

A tensor shared by two modules (the tied embedding and output projection, lesson 8) is one set
of numbers to learn, so it counts once.
"""

from __future__ import annotations

from torch import nn

__all__ = ["count_parameters", "parameter_breakdown"]


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
