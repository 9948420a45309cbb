"""Lesson 8: what one training step reads and how the held-out loss is measured. A step reads
``batch_size`` random windows of ``block_size + 1`` consecutive ids (:func:`get_batch`, from a
seeded generator); the held-out loss is the mean next-token loss over consecutive,
non-overlapping windows (:func:`evaluate`, the same windows every call):

    L = -(1/N) sum_t log softmax(logits_t)[x_{t+1}]       (nats per token, over every window)
"""

from __future__ import annotations

import torch

from . import _validate as check
from .model import TransformerLM

__all__ = ["get_batch", "evaluate"]


def get_batch(
    ids: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator
) -> torch.Tensor:
    """Lesson 8. ``batch_size`` random windows of ``block_size + 1`` consecutive ids, [B, block_size+1].

    The model reads the first ``block_size`` of each window and predicts the last ``block_size``
    (:meth:`TransformerLM.loss` shifts by one). Start positions are drawn from ``generator``, so a
    seeded generator gives the same batches every run.
    """
    check.tensor("ids", ids, ndim=1, layout="[n_tokens]")
    batch_size = check.positive_int("batch_size", batch_size)
    block_size = check.positive_int("block_size", block_size)
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            "generator must be a torch.Generator, e.g. torch.Generator().manual_seed(0), "
            f"got {type(generator).__name__}"
        )
    if len(ids) < block_size + 1:
        raise ValueError(
            f"block_size={block_size} needs at least {block_size + 1} ids, got {len(ids)}"
        )
    starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)  # [B]
    return torch.stack([ids[s : s + block_size + 1] for s in starts.tolist()])  # [B, block+1]


@torch.no_grad()
def evaluate(
    model: TransformerLM, ids: torch.Tensor, block_size: int, batch_size: int = 32
) -> float:
    """Lesson 8. Mean next-token loss over consecutive, non-overlapping windows of ``ids``
    (the same windows every call: no randomness)."""
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
    check.tensor("ids", ids, ndim=1, layout="[n_tokens]")
    block_size = check.positive_int("block_size", block_size)
    batch_size = check.positive_int("batch_size", batch_size)
    n_windows = (len(ids) - 1) // block_size
    if n_windows < 1:
        raise ValueError(f"ids is too short ({len(ids)}) for one window of block_size={block_size}")
    windows = torch.stack(
        [ids[i * block_size : i * block_size + block_size + 1] for i in range(n_windows)]
    )  # [n_windows, block+1]
    was_training = model.training
    model.eval()
    total = 0.0
    for chunk in windows.split(batch_size):
        total += float(model.loss(chunk)) * len(chunk)
    model.train(was_training)
    return total / n_windows
