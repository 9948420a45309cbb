"""Gradient and activation diagnostics (lessons 5 and 7)."""

from __future__ import annotations

import torch
from torch import nn

from . import _validate as check
from .feedforward import FeedForward

__all__ = ["find_blocks", "feedforward_of", "next_token_loss", "gradient_norms"]


def find_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's blocks in order: ``model.blocks`` (an iterable of modules) or, for a bare
    ``nn.ModuleList``/``nn.Sequential`` of blocks, the model itself."""
    blocks = getattr(model, "blocks", None)
    if blocks is None and isinstance(model, nn.ModuleList | nn.Sequential):
        blocks = model
    if blocks is None:
        raise TypeError(
            f"model must have a .blocks attribute (an nn.ModuleList of blocks), as the course's "
            f"TransformerLM has; got {type(model).__name__} without one"
        )
    return list(blocks)


def feedforward_of(block: nn.Module) -> FeedForward:
    """The first :class:`FeedForward` inside ``block``."""
    for m in block.modules():
        if isinstance(m, FeedForward):
            return m
    raise TypeError(f"block {type(block).__name__} contains no helpers.FeedForward module")


def next_token_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting tokens[:, t+1] from tokens[:, :t+1] (lesson 8's loss)."""
    check.tensor("tokens", tokens, ndim=2, layout="[batch, n]")
    if tokens.shape[1] < 2:
        raise ValueError(
            f"tokens needs at least 2 positions to predict a next token, got shape {list(tokens.shape)}"
        )
    logits = model(tokens[:, :-1])  # [B, n-1, V]
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
    )


def gradient_norms(model: nn.Module, tokens: torch.Tensor) -> list[float]:
    """Lesson 5 (C5.2, C5.6). One float per block, in order: ``||dL/dW2||`` (Frobenius norm)
    of that block's feed-forward output weight, for the next-token loss on ``tokens``.

    Uses ``torch.autograd.grad`` on those weights only, so it leaves no ``.grad`` behind and
    does not change the model.
    """
    weights = [feedforward_of(b).w2.weight for b in find_blocks(model)]
    loss = next_token_loss(model, tokens)
    grads = torch.autograd.grad(loss, weights)
    return [float(g.norm()) for g in grads]
