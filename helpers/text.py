"""The text the course trains on, and its character tokenizer (lessons 4, 5, 8 and 9).

* :func:`load_text`: a text shipped in ``helpers/data`` (read with :mod:`importlib.resources`:
  it ships with the installed package and nothing reaches the network);
* :class:`CharTokenizer`: one token per distinct character;
* :func:`split_ids`: the first 90% of the ids for training, the later 10% held out;
* :func:`ngram_loss`: the held-out loss of a counting model (unigram, bigram), the baselines a
  trained language model should beat (C8.6, C9.1).

The training loop that reads these ids is :mod:`helpers.training`.

    uniform guess    L_0 = ln(vocab_size)                                  (every token equally likely)
    unigram          L_1 = -(1/N) sum_t log p(x_{t+1}),  p(x) = (count(x) + 1) / (N + V)
"""

from __future__ import annotations

from importlib import resources

import torch

from . import _validate as check

__all__ = ["TEXTS", "load_text", "CharTokenizer", "split_ids", "ngram_loss"]

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
