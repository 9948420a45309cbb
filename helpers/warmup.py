"""Lesson 5 (C5.7): a learning-rate warm-up, and a small training run that asks whether post-norm
needs it and pre-norm does not (the consequence Xiong et al. 2020 draw from C5.6).

    linear warm-up   lr_t = lr * min(1, (t + 1) / warmup_steps)      t = 0, 1, ..., steps - 1
                     (warmup_steps = 0: lr_t = lr from the first step)

The training loop is :func:`helpers.training.train_lm`'s (AdamW, seeded batches, one CPU thread,
validation loss on fixed windows), with the schedule added and no gradient clipping: clipping also
bounds the first updates, which is what warm-up is for, and would blur the comparison.
"""

from __future__ import annotations

import torch

from . import _validate as check
from .model import TransformerLM
from .params import count_parameters
from .training import (
    CharTokenizer,
    TrainResult,
    _one_thread,
    default_dtype,
    evaluate,
    get_batch,
    load_text,
    split_ids,
)

__all__ = ["warmup_lr", "train_with_warmup", "WARMUP_RUNS", "compare_warmup"]

#: The three runs of C5.7: (norm placement, with warm-up?).
WARMUP_RUNS = {
    "post-norm, warm-up": ("post", True),
    "post-norm, no warm-up": ("post", False),
    "pre-norm, no warm-up": ("pre", False),
}


def warmup_lr(step: int, lr: float, warmup_steps: int) -> float:
    """Lesson 5 (C5.7). ``lr * min(1, (step + 1) / warmup_steps)``: a linear ramp from
    ``lr / warmup_steps`` at step 0 to ``lr`` at step ``warmup_steps - 1``, then constant.
    ``warmup_steps=0`` means no warm-up (``lr`` at every step)."""
    step = check.positive_int("step", step, minimum=0)
    lr = check.positive_float("lr", lr)
    warmup_steps = check.positive_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_steps == 0:
        return lr
    return lr * min(1.0, (step + 1) / warmup_steps)


def train_with_warmup(
    model: TransformerLM,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    steps: int = 120,
    warmup_steps: int = 40,
    lr: float = 3e-3,
    batch_size: int = 8,
    block_size: int = 16,
    seed: int = 0,
    dtype: torch.dtype | None = torch.float64,
) -> TrainResult:
    """Lesson 5 (C5.7). ``steps`` AdamW steps (betas 0.9, 0.98 as in Vaswani et al. 2017, no
    weight decay, no clipping) with the learning rate of :func:`warmup_lr` at each step; batches
    from ``torch.Generator().manual_seed(seed)``. Returns a :class:`helpers.training.TrainResult`
    (the loss of every step, validation loss before and after). ``dtype=torch.float64`` (the
    default) converts the model first, so that the printed losses are the same on any machine.
    """
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
    check.tensor("train_ids", train_ids, ndim=1, layout="[n_tokens]")
    check.tensor("val_ids", val_ids, ndim=1, layout="[n_tokens]")
    steps = check.positive_int("steps", steps)
    warmup_steps = check.positive_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_steps > steps:
        raise ValueError(
            f"warmup_steps must be at most steps ({steps}), got {warmup_steps}: "
            "the warm-up would not end within the run"
        )
    lr = check.positive_float("lr", lr)
    batch_size = check.positive_int("batch_size", batch_size)
    block_size = check.positive_int("block_size", block_size)
    seed = check.positive_int("seed", seed, minimum=0)
    if dtype is not None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        model.to(dtype)
    with _one_thread():
        generator = torch.Generator().manual_seed(seed)
        result = TrainResult(n_parameters=count_parameters(model))
        result.initial_val_loss = evaluate(model, val_ids, block_size)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0
        )
        model.train()
        for step in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = warmup_lr(step, lr, warmup_steps)
            tokens = get_batch(train_ids, batch_size, block_size, generator)  # [B, block+1]
            loss = model.loss(tokens)  # scalar
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            result.train_losses.append(loss.item())
        result.val_loss = evaluate(model, val_ids, block_size)
    return result


def compare_warmup(
    d_model: int = 32,
    n_layers: int = 4,
    n_heads: int = 4,
    steps: int = 120,
    warmup_steps: int = 40,
    lr: float = 3e-3,
    batch_size: int = 8,
    block_size: int = 16,
    seed: int = 0,
    dtype: torch.dtype | None = torch.float64,
) -> dict[str, TrainResult]:
    """Lesson 5 (C5.7). The three runs of :data:`WARMUP_RUNS` on the shipped text (character
    level, last 10% held out), each a :class:`TransformerLM` with the course's defaults
    (sinusoidal position, Xavier init, sqrt(d_model) scaling, GELU, tied), built after
    ``torch.manual_seed(seed)`` and trained by :func:`train_with_warmup` on the same batches.
    Returns ``{run name: TrainResult}`` in the order of :data:`WARMUP_RUNS`. With
    ``dtype=torch.float64`` the models are drawn in float64 (float32 random draws differ between
    CPU kernel paths, float64 draws do not).
    """
    text = load_text()
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    results = {}
    for name, (norm, warm) in WARMUP_RUNS.items():
        torch.manual_seed(seed)
        with default_dtype(dtype or torch.get_default_dtype()):  # float64 draws: any CPU path
            model = TransformerLM(
                tokenizer.vocab_size, d_model, n_layers, n_heads, max_len=block_size, norm=norm
            )
        results[name] = train_with_warmup(
            model, train_ids, val_ids, steps, warmup_steps if warm else 0, lr, batch_size,
            block_size, seed, dtype,
        )  # fmt: skip
    return results
