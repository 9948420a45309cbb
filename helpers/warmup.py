"""Lesson 5 (C5.7): a learning-rate warm-up, and a small training run that asks whether post-norm
needs it and pre-norm does not (the consequence Xiong et al. 2020 draw from C5.6).

    linear warm-up   lr_t = lr * min(1, (t + 1) / warmup_steps)      t = 0, 1, ..., steps - 1
                     (warmup_steps = 0: lr_t = lr from the first step)

The training loop is the course's one (:class:`helpers.training.TrainingRun`: AdamW, seeded
batches, one CPU thread, validation loss on fixed windows) with the warm-up schedule, Adam's betas
(0.9, 0.98) of Vaswani et al. 2017 and no gradient clipping: clipping also bounds the first
updates, which is what warm-up is for, and would blur the comparison.
"""

from __future__ import annotations

import torch

from . import _validate as check
from .model import TransformerLM
from .reproducible import default_dtype
from .text import CharTokenizer, load_text, split_ids
from .training import Schedule, TrainResult, train_lm

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
    return Schedule("warmup", warmup_steps).lr(step, lr)  # the loop's own schedule


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
    """Lesson 5 (C5.7). ``steps`` steps of the course's loop (:func:`helpers.training.train_lm`)
    with AdamW's betas 0.9, 0.98 as in Vaswani et al. 2017, no weight decay, no clipping, and the
    learning rate of :func:`warmup_lr` at each step; batches from
    ``torch.Generator().manual_seed(seed)``. Returns a :class:`helpers.training.TrainResult`
    (the loss of every step, validation loss before and after). ``dtype=torch.float64`` (the
    default) converts the model first, so that the printed losses are the same on any machine.
    """
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
    steps = check.positive_int("steps", steps)
    warmup_steps = check.positive_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_steps > steps:
        raise ValueError(
            f"warmup_steps must be at most steps ({steps}), got {warmup_steps}: "
            "the warm-up would not end within the run"
        )
    return train_lm(
        model, train_ids, val_ids, steps, batch_size, block_size, lr, seed, dtype,
        schedule=Schedule("warmup", warmup_steps), betas=(0.9, 0.98), clip_norm=None,
    )  # fmt: skip


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
