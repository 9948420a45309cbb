"""Lesson 8 (C8.5): a small text that ships with the course, a character tokenizer, and a short,
reproducible training loop, enough to compare a tied and an untied model honestly.

Everything is local (the text is package data, read with :mod:`importlib.resources`) and seeded:
batches come from a ``torch.Generator`` with a fixed seed, the model is built after
``torch.manual_seed``, and the validation loss is measured on a fixed set of windows, so the same
call gives the same numbers on the same machine.

    next-token loss  L = -(1/N) sum_t log softmax(logits_t)[x_{t+1}]       (cross-entropy, nats)
    uniform guess    L_0 = ln(vocab_size)                                  (every token equally likely)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources

import torch
from torch import nn

from . import _validate as check
from .model import TransformerLM
from .params import count_parameters
from .reproducible import default_dtype
from .reproducible import one_thread as _one_thread

__all__ = [
    "TEXTS",
    "load_text",
    "CharTokenizer",
    "split_ids",
    "get_batch",
    "evaluate",
    "TrainResult",
    "train_lm",
    "default_dtype",
    "train_char_model",
    "compare_tying",
    "ngram_loss",
]

#: Texts shipped in ``helpers/data`` (see the README there for their source): the names
#: :func:`load_text` accepts, and how many leading characters of the file each one is.
TEXTS = {"tiny_shakespeare": 31_742, "tiny_shakespeare_full": None}


def load_text(name: str = "tiny_shakespeare") -> str:
    """Lessons 8 and 9. The text ``name`` shipped with the course (no network). Both names read
    ``helpers/data/tiny_shakespeare.txt``, the tiny-shakespeare file of karpathy/char-rnn
    (1,115,394 characters, 65 distinct): ``tiny_shakespeare`` is its first 31,742 characters (the
    excerpt lessons 4, 5 and 8 train on), ``tiny_shakespeare_full`` all of it (lesson 9)."""
    check.choice("name", name, tuple(TEXTS))
    text = resources.files("helpers").joinpath("data", "tiny_shakespeare.txt")
    text = text.read_text(encoding="utf-8")
    return text if TEXTS[name] is None else text[: TEXTS[name]]


class CharTokenizer:
    """Lesson 8. One token per distinct character of ``text``: id i is the i-th character in
    sorted order, so ``vocab_size = len(set(text))`` (58 for the shipped text)."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text must not be empty: the vocabulary is its distinct characters")
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """str -> token ids, a 1-D ``torch.long`` tensor [len(text)]."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise ValueError(
                f"text contains characters this tokenizer has no id for: {unknown[:10]!r}; "
                f"it knows the {self.vocab_size} characters of the text it was built from"
            )
        return torch.tensor([self.stoi[c] for c in text], dtype=torch.long)  # [len(text)]

    def decode(self, ids) -> str:
        """token ids (a tensor or a list of ints) -> str."""
        if isinstance(ids, torch.Tensor) and ids.dim() > 1:
            raise ValueError(f"ids must be 1-D (one sequence), got shape {list(ids.shape)}")
        if isinstance(ids, str) or not isinstance(ids, torch.Tensor | list | tuple | range):
            raise TypeError(
                f"ids must be a tensor or a list of token ids, got {type(ids).__name__}"
            )
        ids = ids.reshape(-1).tolist() if isinstance(ids, torch.Tensor) else list(ids)
        not_int = [i for i in ids if isinstance(i, bool) or not isinstance(i, int)]
        if not_int:
            raise TypeError(f"ids must be whole numbers (token ids), got {not_int[:5]!r}")
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must be in 0..{self.vocab_size - 1}, got {bad[:5]}")
        return "".join(self.chars[i] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def split_ids(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Lesson 8. The first ``1 - val_fraction`` of the ids for training, the rest (a later,
    unseen stretch of the text) for validation."""
    check.tensor("ids", ids, ndim=1, layout="[n_tokens]")
    val_fraction = check.positive_float("val_fraction", val_fraction)
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction}")
    n_train = int(round(len(ids) * (1.0 - val_fraction)))
    return ids[:n_train], ids[n_train:]


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


@dataclass
class TrainResult:
    """What :func:`train_lm` measured: the loss of every step, validation loss before and after,
    and the validation curve: ``val_losses[k]`` measured after ``val_steps[k]`` steps (0 and the
    last step always; every ``eval_every`` steps in between if asked)."""

    train_losses: list[float] = field(default_factory=list)
    initial_val_loss: float = math.nan
    val_loss: float = math.nan
    n_parameters: int = 0
    val_steps: list[int] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)

    def val_loss_at(self, step: int) -> float:
        """The validation loss measured after ``step`` steps (one of ``val_steps``)."""
        if step not in self.val_steps:
            raise ValueError(
                f"step must be one of the measured steps {self.val_steps}, got {step!r}"
            )
        return self.val_losses[self.val_steps.index(step)]


def train_lm(
    model: TransformerLM,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    steps: int = 300,
    batch_size: int = 32,
    block_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    dtype: torch.dtype | None = None,
    eval_every: int | None = None,
) -> TrainResult:
    """Lesson 8 (C8.5). ``steps`` AdamW steps on random windows of ``train_ids``; batches drawn
    from ``torch.Generator().manual_seed(seed)``. Returns a :class:`TrainResult`.

    Runs on one CPU thread (the previous setting is restored afterwards): the sums inside each
    matrix product then happen in the same order from run to run, so a second call gives the
    same numbers on the same machine (another CPU or PyTorch build may differ in the last
    digits); and for a model this small more threads only add overhead. ``dtype=torch.float64``
    converts the model first, so that the losses it reports are the same on every machine to
    far below the digits a lesson prints (CONTRIBUTING.md, "Numbers in stored outputs").
    A model converted here was initialized in float32, and float32 random draws differ between
    CPU kernel paths (measured: the initial weights of one seed differ between torch's AVX2 and
    portable kernels; float64 draws do not); build it under :func:`default_dtype` (as
    :func:`train_char_model` does) for a run that is float64 from its first weight.
    ``eval_every`` (steps) also measures the validation loss during training (the curve in
    :class:`TrainResult`); evaluation draws no random numbers, so the run itself is unchanged.
    """
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
    steps = check.positive_int("steps", steps)
    lr = check.positive_float("lr", lr)
    check.tensor("train_ids", train_ids, ndim=1, layout="[n_tokens]")
    check.tensor("val_ids", val_ids, ndim=1, layout="[n_tokens]")
    batch_size = check.positive_int("batch_size", batch_size)
    block_size = check.positive_int("block_size", block_size)
    seed = check.positive_int("seed", seed, minimum=0)
    if eval_every is not None:
        eval_every = check.positive_int("eval_every", eval_every)
    if dtype is not None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        model.to(dtype)
    with _one_thread():
        return _train(
            model, train_ids, val_ids, steps, batch_size, block_size, lr, seed, eval_every
        )


def _train_step(model, optimizer, train_ids, batch_size, block_size, generator) -> float:
    """One step of the course's training loop (lesson 8's :func:`train_lm`, lesson 9's
    :mod:`helpers.pretrain`): ``batch_size`` windows drawn from ``generator``, the next-token
    loss, its gradient clipped to norm 1, one ``optimizer`` step. Returns the batch's loss."""
    tokens = get_batch(train_ids, batch_size, block_size, generator)  # [B, block+1]
    loss = model.loss(tokens)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def _train(
    model, train_ids, val_ids, steps, batch_size, block_size, lr, seed, eval_every=None
) -> TrainResult:
    generator = torch.Generator().manual_seed(seed)
    result = TrainResult(n_parameters=count_parameters(model))
    result.initial_val_loss = evaluate(model, val_ids, block_size)
    result.val_steps.append(0)
    result.val_losses.append(result.initial_val_loss)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for step in range(1, steps + 1):
        loss = _train_step(model, optimizer, train_ids, batch_size, block_size, generator)
        result.train_losses.append(loss)
        if eval_every and step % eval_every == 0 and step < steps:
            result.val_steps.append(step)
            result.val_losses.append(evaluate(model, val_ids, block_size))
    result.val_loss = evaluate(model, val_ids, block_size)
    result.val_steps.append(steps)
    result.val_losses.append(result.val_loss)
    return result


#: What :func:`train_char_model` passes on to :class:`TransformerLM` besides the sizes.
MODEL_OPTIONS = ("positional", "norm", "activation", "tie_weights", "init", "scale_embeddings")


def train_char_model(
    text: str | None = None,
    d_model: int = 48,
    n_layers: int = 2,
    n_heads: int = 4,
    steps: int = 250,
    batch_size: int = 16,
    block_size: int = 32,
    lr: float = 5e-3,
    seed: int = 0,
    dtype: torch.dtype | None = None,
    eval_every: int | None = None,
    **model_options,
) -> TrainResult:
    """Lesson 8 (C8.5, C8.6). Build a character-level :class:`TransformerLM` for ``text``
    (default: the shipped text, last 10% held out) after ``torch.manual_seed(seed)``, in
    ``dtype`` if given (:func:`default_dtype`: float64 from the first random draw), and train it
    with :func:`train_lm`. ``model_options`` go to the model: ``positional``, ``norm``,
    ``activation``, ``tie_weights``, ``init``, ``scale_embeddings`` (their defaults are the
    model's, see :func:`helpers.model.coherent_defaults`). Returns the :class:`TrainResult`.
    """
    unknown = sorted(set(model_options) - set(MODEL_OPTIONS))
    if unknown:
        raise TypeError(
            f"train_char_model got unknown model options {unknown}; allowed: "
            f"{', '.join(MODEL_OPTIONS)}"
        )
    if dtype is not None and dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    if text is not None and not isinstance(text, str):
        raise TypeError(
            f"text must be a str (or None for the shipped text), got {type(text).__name__}"
        )
    text = load_text() if text is None else text
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    seed = check.positive_int("seed", seed, minimum=0)
    torch.manual_seed(seed)
    with default_dtype(torch.get_default_dtype() if dtype is None else dtype):
        model = TransformerLM(
            tokenizer.vocab_size, d_model, n_layers, n_heads, max_len=block_size, **model_options
        )
    return train_lm(
        model,
        train_ids,
        val_ids,
        steps,
        batch_size,
        block_size,
        lr,
        seed,
        dtype=dtype,
        eval_every=eval_every,
    )


def compare_tying(
    text: str | None = None,
    d_model: int = 48,
    n_layers: int = 2,
    n_heads: int = 4,
    steps: int = 250,
    batch_size: int = 16,
    block_size: int = 32,
    lr: float = 5e-3,
    seed: int = 0,
    dtype: torch.dtype | None = None,
    eval_every: int | None = None,
) -> dict[str, TrainResult]:
    """Lesson 8 (C8.5). Train a tied and an untied :class:`TransformerLM` (learned positions) at
    the same settings (same seed for the weights and the batches) on ``text`` (default: the
    shipped text, character-level, last 10% held out), with :func:`train_char_model`; with
    ``dtype=torch.float64`` the models are float64 from their first weight; ``eval_every``
    records each run's validation curve.
    Returns ``{"tied": ..., "untied": ...}``.
    """
    return {
        name: train_char_model(
            text,
            d_model,
            n_layers,
            n_heads,
            steps,
            batch_size,
            block_size,
            lr,
            seed,
            dtype,
            eval_every,
            positional="learned",
            tie_weights=tie,
        )
        for name, tie in (("tied", True), ("untied", False))
    }


def ngram_loss(
    train_ids: torch.Tensor, val_ids: torch.Tensor, vocab_size: int, order: int = 1
) -> float:
    """Lesson 8 (C8.6). The validation loss (nats per token) of a counting model, a baseline
    that a trained language model should beat, computed in float64.

    ``order=1`` (unigram): p(x) = (count(x) + 1) / (N + V), the character frequencies of
    ``train_ids``, ignoring the context. ``order=2`` (bigram): p(y | x) = (count(x y) + 1) /
    (count(x) + V), the previous character only. Add-one smoothing, so unseen events keep a
    finite loss. Returns -mean log p over ``val_ids`` (for order 2, over its consecutive pairs).
    """
    check.tensor("train_ids", train_ids, ndim=1, layout="[n_tokens]")
    check.tensor("val_ids", val_ids, ndim=1, layout="[n_tokens]")
    vocab_size = check.positive_int("vocab_size", vocab_size)
    if isinstance(order, bool) or order not in (1, 2):
        raise ValueError(f"order must be 1 (unigram) or 2 (bigram), got {order!r}")
    for name, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        check.token_ids(name, ids[None], vocab_size)
        if len(ids) < order:
            raise ValueError(f"{name} needs at least {order} ids for order={order}")
    if order == 1:
        counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0  # [V]
        log_p = (counts / counts.sum()).log()  # [V]
        return float(-log_p[val_ids].mean())
    pairs = train_ids[:-1] * vocab_size + train_ids[1:]  # [N-1]: pair (x, y) as one index
    counts = torch.bincount(pairs, minlength=vocab_size * vocab_size).double()
    counts = counts.reshape(vocab_size, vocab_size) + 1.0  # [V, V]: count(x y) + 1
    log_p = (counts / counts.sum(dim=1, keepdim=True)).log()  # [V, V]: log p(y | x)
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())
