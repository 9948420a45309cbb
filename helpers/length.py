"""Lesson 4 (C4.7): defined is not working. Train the course's model at one sequence length, then
measure it at longer ones.

The sinusoidal table is *defined* at every position (C4.3), so a model that adds it can be run on
sequences longer than any it was trained on; whether it still predicts well there is a question
for an experiment. A learned table cannot even be asked (C4.4): it has no row for a later position.

    train:    next-token loss on random windows of ``train_len`` tokens      (helpers.training)
    measure:  mean next-token loss on the held-out text, cut into consecutive windows of n tokens,
              for n = train_len, 2 train_len, ...                          (helpers.training.evaluate)

Everything is seeded and, by default, computed in float64, so the losses a lesson prints are the
same on every machine (CONTRIBUTING.md, "Numbers in stored outputs"). Press et al. (2022) measured
the same question at scale ("Train short, test long").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from . import _validate as check
from .model import INITS, LESSON_MODEL, POSITIONAL_OPTIONS, LMConfig, TransformerLM, seeded_model
from .reproducible import one_thread as _one_thread
from .text import CharTokenizer, load_text, split_ids
from .training import LESSON_TRAINING, TrainResult, evaluate, train_lm

__all__ = [
    "LengthRun",
    "train_at_length",
    "loss_by_position",
    "length_experiment",
    "load_length_runs",
    "LENGTH_RUNS",
    "EVAL_TOKENS",
    "LENGTH_SETTINGS_SCHEMA",
    "LENGTH_RESULTS_SCHEMA",
]


def _lengths(lengths) -> list[int]:
    if isinstance(lengths, int | bool) or not isinstance(lengths, Iterable):
        raise TypeError(
            f"lengths must be a list of whole numbers (sequence lengths), got {lengths!r} "
            f"({type(lengths).__name__})"
        )
    lengths = list(lengths)
    if not lengths:
        raise ValueError("lengths must hold at least one sequence length, got an empty list")
    return [check.positive_int("each length", n, minimum=2) for n in lengths]


#: Held-out windows are evaluated this many tokens at a time (as few windows as that holds): the
#: activations of long windows then stay small, and a lesson that measures them stays under its
#: memory budget (600 MB). The mean loss is the same sum, in chunks.
EVAL_TOKENS = 1024


@dataclass
class LengthRun:
    """Lesson 4 (C4.7). A model trained at one sequence length, and the held-out text to measure it.

    ``loss_at(n)`` is the mean next-token loss on the held-out text cut into windows of ``n``
    tokens (``helpers.training.evaluate``); ``losses_at([32, 64, ...])`` does it for each length.
    For a learned position table, a length above ``train_len`` raises
    :class:`~helpers.PositionOutOfRange`: the table has no row there.
    """

    model: TransformerLM
    train_len: int
    val_ids: torch.Tensor
    result: TrainResult

    def loss_at(self, n: int) -> float:
        """Mean next-token loss over windows of ``n`` tokens of the held-out text, evaluated
        :data:`EVAL_TOKENS` tokens at a time."""
        n = check.positive_int("n", n, minimum=2)
        with _one_thread():
            return evaluate(self.model, self.val_ids, n, batch_size=max(1, EVAL_TOKENS // n))

    def losses_at(self, lengths) -> dict[int, float]:
        """``{n: loss_at(n)}`` for each sequence length ``n`` of ``lengths``."""
        return {n: self.loss_at(n) for n in _lengths(lengths)}


def train_at_length(
    train_len: int = 32,
    positional: str = "sinusoidal",
    *,
    init: str | None = None,
    scale_embeddings: bool | None = None,
    d_model: int = LESSON_MODEL.d_model,
    n_layers: int = LESSON_MODEL.n_layers,
    n_heads: int = LESSON_MODEL.n_heads,
    steps: int = 400,
    batch_size: int = LESSON_TRAINING.batch_size,
    lr: float = LESSON_TRAINING.lr,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    text: str | None = None,
) -> LengthRun:
    """Lesson 4 (C4.7). Train a :class:`~helpers.TransformerLM` on windows of ``train_len`` tokens.

    The model is the course's, with its coherent defaults (C8.6: sinusoidal position with Xavier
    init and sqrt(d_model) scaling; learned position with GPT-2's init) unless ``init`` and
    ``scale_embeddings`` are given (``TransformerLM``'s own options: a comparison of position
    schemes holds them fixed), and ``max_len=train_len`` (the sinusoidal table grows on demand;
    the learned one has exactly ``train_len`` rows). ``positional`` is any scheme the model
    knows: the sheet's ``"sinusoidal"`` and ``"learned"`` (C4.7), position inside attention,
    ``"rotary"`` and ``"alibi"`` (C4.8), or ``"none"`` (C4.9).
    Character-level on ``text`` (default: the shipped excerpt of tiny-shakespeare, last 10% held
    out), ``steps`` AdamW steps of ``batch_size`` random windows, seeded by ``seed``. The model is
    built in ``dtype`` (float64 by default: its initial weights are drawn in float64, the same on
    every machine, and so are the printed losses).
    Returns a :class:`LengthRun`; measure it with ``run.losses_at([32, 64, 128, 256])``.
    """
    train_len = check.positive_int("train_len", train_len, minimum=2)
    check.choice("positional", positional, POSITIONAL_OPTIONS)
    if init is not None:
        check.choice("init", init, INITS)
    if scale_embeddings is not None and not isinstance(scale_embeddings, bool):
        raise TypeError(
            f"scale_embeddings must be True, False or None (the model's default for the "
            f"positional scheme), got {scale_embeddings!r}"
        )
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    if text is not None and not isinstance(text, str):
        raise TypeError(
            f"text must be a str (or None for the shipped text), got {type(text).__name__}"
        )
    text = load_text() if text is None else text
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    if len(val_ids) < train_len + 1:
        raise ValueError(
            f"text is too short: its held-out tenth has {len(val_ids)} tokens, fewer than one "
            f"window of train_len={train_len} (+1)"
        )
    config = LMConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        max_len=train_len,
        positional=positional,
        init=init,
        scale_embeddings=scale_embeddings,
    )
    # float64 from the first weight (float32 draws differ between CPUs)
    model = seeded_model(config, seed, dtype)
    result = train_lm(
        model, train_ids, val_ids, steps, batch_size, train_len, lr, seed, dtype=dtype
    )
    return LengthRun(model=model, train_len=train_len, val_ids=val_ids, result=result)


@torch.no_grad()
def loss_by_position(model: TransformerLM, ids: torch.Tensor, n: int) -> torch.Tensor:
    """Lesson 4 (C4.7). The next-token loss at each position 0..n-2 of windows of ``n + 1`` ids.

    ``ids`` is cut into consecutive windows of ``n + 1`` tokens (as ``evaluate`` does with
    ``block_size = n``); the model reads the first ``n`` of each and predicts the next; entry t is
    the cross-entropy of predicting the token after position t, averaged over the windows
    (evaluated :data:`EVAL_TOKENS` tokens at a time).
    Returns a tensor [n] in the model's dtype.
    """
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
    check.tensor("ids", ids, ndim=1, layout="[n_tokens]")
    n = check.positive_int("n", n)
    n_windows = (len(ids) - 1) // n
    if n_windows < 1:
        raise ValueError(f"ids is too short ({len(ids)}) for one window of n={n} (+1) tokens")
    windows = torch.stack([ids[i * n : i * n + n + 1] for i in range(n_windows)])  # [W, n+1]
    was_training = model.training
    model.eval()
    losses = []
    with _one_thread():
        for chunk in windows.split(max(1, EVAL_TOKENS // n)):  # EVAL_TOKENS tokens at a time
            logits = model(chunk[:, :-1])  # [w, n, V]
            losses.append(
                nn.functional.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none")
            )  # [w, n]
    model.train(was_training)
    return torch.cat(losses).mean(dim=0)  # [W, n] -> [n]


# --------------------------------------------------------------------------------------------
# The experiment behind C4.7 (and 04b's comparison of schemes), shipped as data
# --------------------------------------------------------------------------------------------

#: The name of the shipped results (``helpers/data/lesson4_length.json``, written by
#: ``tools/length_runs.py``).
LENGTH_RUNS = "lesson4_length"

#: What ``tools/length_runs.py`` ran: the model and training settings of :func:`train_at_length`,
#: the seeds, the position schemes, and the lengths each model was measured at.
LENGTH_SETTINGS_SCHEMA = {
    "train_len": int,
    "lengths": [int],
    "steps": int,
    "seeds": [int],
    "kinds": [str],
    "d_model": int,
    "n_layers": int,
    "n_heads": int,
    "batch_size": int,
    "lr": float,
    "init": str,
    "scale_embeddings": bool,
    "dtype": str,
    "text": str,
}

#: What it measured: for each scheme, one entry per seed, the held-out loss at each length
#: (keys are the lengths as text) and the loss at each position 0..max(lengths)-1 of the
#: longest windows (:func:`loss_by_position`).
LENGTH_RESULTS_SCHEMA = {str: [{"seed": int, "losses": {str: float}, "per_position": [float]}]}


def length_experiment(
    kinds=("sinusoidal",),
    seeds=(0,),
    *,
    train_len: int = 32,
    lengths=(32, 64, 128, 256),
    steps: int = 400,
    init: str = "xavier",
    scale_embeddings: bool = True,
    d_model: int = LESSON_MODEL.d_model,
    n_layers: int = LESSON_MODEL.n_layers,
    n_heads: int = LESSON_MODEL.n_heads,
    batch_size: int = LESSON_TRAINING.batch_size,
    lr: float = LESSON_TRAINING.lr,
    progress=None,
) -> tuple[dict, dict]:
    """Lesson 4 (C4.7; 04b compares the schemes). For each position scheme of ``kinds`` and each
    seed of ``seeds``: :func:`train_at_length` at ``train_len`` (float64, the shipped text), then
    the held-out loss at every length of ``lengths`` and the loss at each position of the longest
    windows (:func:`loss_by_position`). Every scheme gets the same initialization and embedding
    scale (``init``, ``scale_embeddings``; the defaults are the sinusoidal model's), so the rows
    differ in the position scheme only. A learned table cannot run beyond ``train_len``, so
    ``"learned"`` is refused here (C4.4 shows why).

    Returns ``(settings, results)`` in the form of :data:`LENGTH_SETTINGS_SCHEMA` and
    :data:`LENGTH_RESULTS_SCHEMA`; ``progress(kind, seed)``, if given, is called before each run.
    """
    kinds = list(kinds)
    if not kinds:
        raise ValueError("kinds must name at least one position scheme, got an empty list")
    for kind in kinds:
        check.choice("each kind", kind, tuple(k for k in POSITIONAL_OPTIONS if k != "learned"))
    seeds = [check.positive_int("each seed", seed, minimum=0) for seed in seeds]
    if not seeds:
        raise ValueError("seeds must hold at least one seed, got an empty list")
    lengths = _lengths(lengths)
    settings = {
        "train_len": check.positive_int("train_len", train_len, minimum=2),
        "lengths": lengths,
        "steps": check.positive_int("steps", steps),
        "seeds": seeds,
        "kinds": kinds,
        "d_model": d_model,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "batch_size": batch_size,
        "lr": float(lr),
        "init": check.choice("init", init, INITS),
        "scale_embeddings": bool(scale_embeddings),
        "dtype": "float64",
        "text": "tiny_shakespeare",
    }
    results: dict[str, list] = {}
    for kind in kinds:
        for seed in seeds:
            if progress is not None:
                progress(kind, seed)
            run = train_at_length(
                train_len, kind, init=init, scale_embeddings=scale_embeddings, d_model=d_model,
                n_layers=n_layers, n_heads=n_heads, steps=steps, batch_size=batch_size, lr=lr,
                seed=seed,
            )  # fmt: skip
            per_position = loss_by_position(run.model, run.val_ids, max(lengths))  # [n]
            results.setdefault(kind, []).append(
                {
                    "seed": seed,
                    "losses": {str(n): loss for n, loss in run.losses_at(lengths).items()},
                    "per_position": [float(v) for v in per_position],
                }
            )
    return settings, results


def load_length_runs():
    """Lesson 4 (C4.7) and 04b (C4.8). The shipped results of ``tools/length_runs.py``
    (``helpers/data/lesson4_length.json``), checked against :data:`LENGTH_SETTINGS_SCHEMA` and
    :data:`LENGTH_RESULTS_SCHEMA`: a :class:`helpers.shipped.ShippedResults` (``.settings``,
    ``.results``, ``.seconds``, ``.cpu_seconds``)."""
    from .shipped import load_results

    return load_results(LENGTH_RUNS, LENGTH_SETTINGS_SCHEMA, LENGTH_RESULTS_SCHEMA)
