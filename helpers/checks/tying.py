"""Lesson 8 exercise checks: entering and leaving the vector space, and weight tying.

Each check prints a one-line verdict starting with a tick, or raises
:class:`~helpers.checks.ExerciseFailed` naming what is wrong. These are the instant feedback of
the visible check cells; grades come from hidden tests judged outside the student's kernel. No
check holds a reference answer or a table of expected values: each compares the answer with a
measurement or an inline relation it must satisfy, and no verdict shows an expected value.

* :func:`check_rows_that_learn` (C8.1, C8.3, predict then verify): which rows of the embedding a
  batch's loss sends a gradient to, tied and untied.
* :func:`check_tie_math_layout` (C8.3, transfer): tie a model whose output projection is kept in
  the formula's layout [d_model, vocab_size] (:class:`MathLayoutLM`), where lesson 8's one-liner
  does not fit.
* :func:`check_predicted_cosine` (C8.6, predict then verify): the cosine of two different tokens
  at one position, from the ratio of their norms.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..model import LMConfig, seeded_model
from ..params import count_parameters
from ._core import as_number, as_tensor, call, call_described, fail, passed

__all__ = [
    "check_rows_that_learn",
    "check_tie_math_layout",
    "check_predicted_cosine",
    "MathLayoutLM",
    "Unembed",
    "COSINE_RATIOS",
    "COSINE_TOLERANCE",
]


def _call_with_hints(
    exercise: str, fn, *args, name: str, hints: dict[str, str], shown: str | None = None
):
    """``call`` the student's function; if it raised, add the hint whose key is in the message."""
    try:
        return call_described(exercise, fn, args, name=name, shown=shown)
    except Exception as e:  # ExerciseFailed from ``call``
        problem = getattr(e, "problem", str(e))
        for key, hint in hints.items():
            if key in problem:
                fail(exercise, f"{problem} Hint: {hint}")
        raise


# --- comparisons that never show the expected values -------------------------------------------


def _differs(ex: str, got: torch.Tensor, want: torch.Tensor, name: str, atol: float = 1e-5):
    """Fail, naming the size and place of the largest difference (never the expected value),
    unless ``got`` is within ``atol + 1e-4 |want|`` of ``want``."""
    got64, want64 = got.detach().to(torch.float64), want.detach().to(torch.float64)
    if torch.allclose(got64, want64, atol=atol, rtol=1e-4):
        return
    diff = (got64 - want64).abs()
    where = [int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)]
    fail(ex, f"{name} is not right: it is off by up to {float(diff.max()):.3g} (at index {where}).")


# --- exercise 1 (C8.1, C8.3): which rows of W_E learn from a batch ------------------------------


def _row_numbers(ex: str, got, call_text: str) -> list[int]:
    """The student's rows as a sorted list of distinct Python ints (a list, tuple, set, range,
    1-D integer tensor or array); anything else is a verdict."""
    if got is None:
        fail(ex, f"{call_text} returned None: return the row numbers, e.g. [1, 3, 4].")
    if isinstance(got, torch.Tensor | np.ndarray):
        tensor = torch.as_tensor(got)
        if tensor.dtype == torch.bool:
            fail(
                ex,
                f"{call_text} returned a mask of {tensor.dtype}; return the row numbers "
                "themselves (e.g. mask.nonzero().flatten().tolist()).",
            )
        if tensor.is_floating_point() or tensor.dim() > 1:
            fail(
                ex,
                f"{call_text} returned a tensor of shape {list(tensor.shape)} and dtype "
                f"{tensor.dtype}; return the row numbers as a list of whole numbers.",
            )
        got = tensor.tolist()
    if isinstance(got, str | bytes | dict) or not isinstance(got, list | tuple | set | range):
        fail(ex, f"{call_text} should return a list of row numbers, got a {type(got).__name__}.")
    rows = []
    for item in got:
        if isinstance(item, torch.Tensor | np.generic) and getattr(item, "ndim", 0) == 0:
            item = item.item()
        if isinstance(item, bool) or not isinstance(item, int):
            fail(ex, f"{call_text} holds {item!r}; each entry should be a row number (an int).")
        rows.append(int(item))
    return sorted(set(rows))


def _rows_with_gradient(tokens: torch.Tensor, vocab_size: int, tied: bool, seed: int) -> list:
    """The measurement: one backward pass of a TransformerLM's next-token loss on ``tokens``;
    the rows of the embedding whose gradient is not zero."""
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        config = LMConfig(vocab_size, 8, 1, 2, max_len=16, positional="learned", tie_weights=tied)
        model = seeded_model(config, seed, torch.float64)
    model.loss(tokens).backward()
    grad = model.token_embedding.weight.grad  # [V, d]
    return (grad.abs().amax(dim=1) > 0).nonzero().flatten().tolist()


def check_rows_that_learn(rows_that_learn) -> None:
    """Exercise 1 (C8.1, C8.3, predict then verify): ``rows_that_learn(tokens, vocab_size,
    tied)`` returns the rows of the embedding W_E whose gradient of ``model.loss(tokens)`` is not
    zero, for a ``TransformerLM`` of that vocabulary, tied or untied. Compared with a
    measurement: such a model, built here, one backward pass, on batches where some tokens occur
    only as the last token of a row (a target, never an input)."""
    ex = "Exercise 1 (which rows of W_E learn from a batch)"
    g = torch.Generator().manual_seed(18)
    cases = [
        (torch.tensor([[3, 1, 4, 1, 7], [9, 2, 6, 5, 11]]), 12),  # 7 and 11: targets only
        (torch.tensor([[0, 0, 0]]), 6),  # one input token
        (torch.randint(0, 30, (3, 6), generator=g), 30),
    ]
    for number, (tokens, vocab_size) in enumerate(cases):
        inputs = set(tokens[:, :-1].flatten().tolist())
        everywhere = set(tokens.flatten().tolist())
        for tied in (False, True):
            kind = "tied" if tied else "untied"
            call_text = f"rows_that_learn(tokens, {vocab_size}, tied={tied})"
            got = call(ex, rows_that_learn, tokens, vocab_size, tied, name="rows_that_learn")
            got = _row_numbers(ex, got, call_text)
            measured = _rows_with_gradient(tokens, vocab_size, tied, seed=number)
            if got == measured:
                continue
            if not all(0 <= r < vocab_size for r in got):
                fail(ex, f"{call_text} holds rows outside 0..{vocab_size - 1}.")
            if not tied and set(got) == everywhere and everywhere != inputs:
                fail(
                    ex,
                    f"for the {kind} model your rows include tokens that occur only as the last "
                    "token of a row: model.loss(tokens) reads tokens[:, :-1] and predicts "
                    "tokens[:, 1:], so a token that is only ever a target is never looked up.",
                )
            if not tied and len(got) == vocab_size:
                fail(
                    ex,
                    f"for the {kind} model you answered every row: untied, the exit has its own "
                    "matrix (lm_head.weight), and W_E is only looked up at the entrance; a "
                    "lookup's gradient reaches only the rows it read.",
                )
            if tied and set(got) in (inputs, everywhere):
                fail(
                    ex,
                    f"for the {kind} model you answered only the tokens of the batch: tied, W_E "
                    "is also the output projection, every position's logits use every row, and "
                    "the softmax gives every token some probability, so every row receives a "
                    "gradient through the exit.",
                )
            extra, missing = len(set(got) - set(measured)), len(set(measured) - set(got))
            fail(
                ex,
                f"for the {kind} model on case {number + 1}, your answer has {extra} row(s) "
                f"that get no gradient and misses {missing} that do (measured by one backward "
                "pass).",
            )
    passed(
        ex,
        "untied, only the rows looked up at the entrance (the inputs, tokens[:, :-1]) learn "
        "from a batch; tied, the exit's gradient reaches every row, since every token gets a "
        "logit from W_E.",
    )


# --- exercise 2 (C8.3, transfer): tying in another layout ----------------------------------------


class Unembed(nn.Module):
    """An output projection kept in the formula's layout: ``weight`` [d_model, vocab_size],
    ``logits = h @ weight`` (``nn.Linear`` would store the transpose, [vocab_size, d_model])."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_model, vocab_size) / math.sqrt(d_model))  # [d, V]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.weight  # [..., d] @ [d, V] -> [..., V]


class MathLayoutLM(nn.Module):
    """Lesson 8, exercise 2. A tiny untied language model written from the formula:
    ``h = tanh(mix(W_E[ids]))`` (``mix`` stands in for the blocks), ``logits = h @ W_out`` with
    ``W_out = unembed.weight`` of shape [d_model, vocab_size]."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)  # W_E [V, d]
        self.mix = nn.Linear(d_model, d_model)  # a stand-in for the blocks
        self.unembed = Unembed(d_model, vocab_size)  # W_out [d, V]

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.mix(self.embed(ids)))  # [B, n, d]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.unembed(self.hidden(ids))  # [B, n, d] -> [B, n, V]


def _math_layout_model(seed: int = 0) -> MathLayoutLM:
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(seed)
        return MathLayoutLM(vocab_size=20, d_model=8)


_TRANSPOSE_HINT = (
    "Unembed computes h @ weight with weight [d_model, vocab_size], while W_E is "
    "[vocab_size, d_model]: the output must use the transpose, W_E.T, computed from "
    "model.embed.weight when the model runs."
)


def _logits(ex: str, model: nn.Module, ids: torch.Tensor, when: str) -> torch.Tensor:
    try:
        return model(ids)
    except Exception as e:  # noqa: BLE001 - the student's module, turned into a verdict
        message = " ".join(str(e).split())
        hint = f" Hint: {_TRANSPOSE_HINT}" if "cannot be multiplied" in message else ""
        if "dtype" in message and "double()" in when:
            hint = (
                " Hint: the output uses a tensor that was computed once, when you tied the model "
                "(a stored W_E.T), so it did not follow model.double(); compute W_E.T from "
                "model.embed.weight inside forward."
            )
        fail(ex, f"running the tied model {when} raised {type(e).__name__}: {message[:200]}{hint}")


def check_tie_math_layout(tie_math_layout) -> None:
    """Exercise 2 (C8.3, transfer): ``tie_math_layout(model)`` takes an untied
    :class:`MathLayoutLM` and returns it tied: no [d_model, vocab_size] parameter left (the count
    drops by exactly vocab_size x d_model), logits ``h @ W_E^T`` computed from the very tensor
    ``model.embed.weight`` (a change to it shows in the logits; the gradient of the output reaches
    it), also after ``model.double()``."""
    ex = "Exercise 2 (tie a model kept in the formula's layout)"
    model = _math_layout_model()
    W_E = model.embed.weight
    V, d = W_E.shape
    count_before = count_parameters(model)
    old_out = model.unembed.weight.detach().clone()  # [d, V]
    model_out_size = old_out.numel()  # the matrix tying removes, as the given model holds it
    embedding_before = W_E.detach().clone()  # [V, d]
    hints = {
        "cannot assign": "a module's weight must be an nn.Parameter or None, and W_E.T is "
        "neither. The output module has to compute with model.embed.weight itself; for example "
        "replace model.unembed by a small module that holds the embedding and returns "
        "h @ embedding.weight.T.",
    }
    got = _call_with_hints(
        ex, tie_math_layout, model, name="tie_math_layout", hints=hints, shown="model"
    )
    if got is None:
        fail(ex, "tie_math_layout(model) returned None: end it with `return model`.")
    if got is not model:
        fail(
            ex,
            f"tie_math_layout(model) returned a {type(got).__name__}, not the model it was given: "
            "tie `model` in place and `return model`.",
        )
    if getattr(getattr(model, "embed", None), "weight", None) is not W_E or not torch.equal(
        W_E.detach(), embedding_before
    ):
        fail(ex, "model.embed.weight was replaced or changed: keep the embedding, tie the output.")
    ids = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(3))  # [B, n]
    logits = _logits(ex, model, ids, "on token ids")
    logits = as_tensor(ex, logits, name="model(ids)", shape=(2, 6, V), layout="[B, n, vocab_size]")
    with torch.no_grad():
        h = model.hidden(ids)  # [B, n, d]
        want = h @ W_E.T  # [B, n, V]
    if torch.allclose(logits, h @ old_out, atol=1e-6):
        fail(
            ex,
            "the logits are still h @ the old W_out: the output does not use the embedding yet.",
        )
    saved = count_before - count_parameters(model)
    others = [
        n
        for n, p in model.named_parameters()
        if p is not W_E and tuple(p.shape) in ((d, V), (V, d))
    ]
    if others:
        fail(
            ex,
            f"the model still has a second parameter of the embedding's size ({others[0]}, "
            f"{saved:,} parameters saved): nn.Parameter(...) of W_E.T, of a "
            "copy or of .data makes a new matrix that the optimizer trains on its own. The output "
            "must compute with model.embed.weight itself.",
        )
    if saved != model_out_size:
        fail(
            ex,
            f"the model lost {saved:,} parameters: tying removes the output matrix and nothing "
            "else.",
        )
    _differs(ex, logits.detach(), want, name="model(ids)")
    # the very same tensor: a change to W_E shows in the logits, and the output's gradient reaches it
    with torch.no_grad():
        W_E[ids[0, 0]] += 1.0  # one row of the embedding, in place
        changed = model(ids) - model.hidden(ids) @ W_E.T  # [B, n, V]: zero if the output uses W_E
    if not torch.allclose(changed, torch.zeros_like(changed), atol=1e-5):
        fail(
            ex,
            "after a change to model.embed.weight the logits are no longer h @ W_E.T: the output "
            "uses a copy of the embedding, not the tensor itself.",
        )
    model.zero_grad(set_to_none=True)
    weights = torch.randn(2, 6, V, generator=torch.Generator().manual_seed(4))  # [B, n, V]
    (model(ids) * weights).sum().backward()
    got_grad = None if W_E.grad is None else W_E.grad.detach().clone()
    E = W_E.detach().clone().requires_grad_(True)  # [V, d]: the reference, one matrix
    mix_w, mix_b = (p.detach() for p in (model.mix.weight, model.mix.bias))
    h_ref = torch.tanh(nn.functional.linear(nn.functional.embedding(ids, E), mix_w, mix_b))
    (h_ref @ E.T * weights).sum().backward()  # both uses of one W_E: entrance and exit
    if got_grad is None or not torch.allclose(got_grad, E.grad, atol=1e-5, rtol=1e-4):
        fail(
            ex,
            "the gradient of the logits does not reach model.embed.weight through the output "
            "(was W_E detached, or used through .data?): tied, one matrix receives the gradient "
            "of both uses.",
        )
    model.double()
    ids2 = torch.randint(0, V, (1, 5), generator=torch.Generator().manual_seed(5))
    logits64 = _logits(ex, model, ids2, "after model.double()")
    if not isinstance(logits64, torch.Tensor) or logits64.dtype != torch.float64:
        fail(
            ex,
            "after model.double() the logits are not float64: the output uses a tensor that was "
            "computed once (a stored W_E.T) instead of model.embed.weight when the model runs.",
        )
    with torch.no_grad():
        want64 = model.hidden(ids2) @ model.embed.weight.T
    _differs(ex, logits64.detach(), want64, name="model(ids) after model.double()")
    passed(
        ex,
        f"no second matrix ({saved:,} parameters saved), and the logits are h @ W_E.T with the "
        "embedding tensor itself, in any layout: tying is one tensor used at both doors.",
    )


# --- exercise 3 (C8.6, predict then verify): two tokens at one position ----------------------------

#: The ratios ||token|| / ||position|| the visible check tries (the hidden tests try others).
COSINE_RATIOS = (0.0, 0.03, 0.5, 1.0, 1.41, 3.0, 10.0)
#: How far an answer may be from the measured cosine, here and in the grade (spec.py, l8_ex3).
COSINE_TOLERANCE = 0.005


_DRAWS: dict = {}


def _measured_cosine(ratio: float, d_model: int = 16384, pairs: int = 64) -> float:
    """The measurement: ``pairs`` pairs of random token vectors t1, t2 of norm ``ratio`` added to
    one random position vector p of norm 1, in ``d_model`` dimensions (float64); the mean of
    cos(t1 + p, t2 + p). Its spread from the draw is about 0.001 at these sizes. The random
    directions are drawn once (seeded) and scaled for each ratio."""
    if (d_model, pairs) not in _DRAWS:
        g = torch.Generator().manual_seed(86)
        p = torch.randn(d_model, generator=g, dtype=torch.float64)
        t = torch.randn(2, pairs, d_model, generator=g, dtype=torch.float64)  # [2, pairs, d]
        _DRAWS[d_model, pairs] = (p / p.norm(), t / t.norm(dim=-1, keepdim=True))
    p, t = _DRAWS[d_model, pairs]  # [d], [2, pairs, d]: unit vectors
    h1, h2 = ratio * t[0] + p, ratio * t[1] + p  # [pairs, d] each: two tokens at one position
    return float(torch.nn.functional.cosine_similarity(h1, h2, dim=-1).mean())


def check_predicted_cosine(predicted_cosine) -> None:
    """Exercise 3 (C8.6, predict then verify): ``predicted_cosine(ratio)`` is the cosine
    similarity of two different tokens at the same position, h1 = t1 + p and h2 = t2 + p, when
    each token vector has ``ratio`` times the norm of the position vector p and the three point in
    unrelated directions (a large d_model). Compared with a measurement on random vectors in
    16,384 dimensions (:func:`_measured_cosine`) at :data:`COSINE_RATIOS`, within
    :data:`COSINE_TOLERANCE`."""
    ex = "Exercise 3 (two tokens at one position)"
    answers = {}
    for ratio in COSINE_RATIOS:
        got = call(ex, predicted_cosine, ratio, name="predicted_cosine")
        answers[ratio] = as_number(ex, got, name=f"predicted_cosine({ratio})")
    if not all(-1.0 <= v <= 1.0 for v in answers.values()):
        fail(ex, "a cosine lies between -1 and 1; some of your values do not.")
    if abs(answers[0.0] - 1.0) > COSINE_TOLERANCE:
        fail(
            ex,
            "at ratio 0 the tokens add nothing, so both vectors are p itself and their cosine is "
            "1; your answer says otherwise.",
        )

    def everywhere(formula) -> bool:  # the answer is this (wrong) formula at every ratio tried
        return all(abs(answers[r] - formula(r)) < COSINE_TOLERANCE / 2 for r in COSINE_RATIOS)

    for ratio in COSINE_RATIOS[1:]:
        measured = _measured_cosine(ratio)
        got = answers[ratio]
        if abs(got - measured) <= COSINE_TOLERANCE:
            continue
        if everywhere(lambda r: 1 / (1 + r)):
            fail(
                ex,
                f"at ratio {ratio} your cosine is off from the measured one by more than "
                f"{COSINE_TOLERANCE}: in many dimensions unrelated vectors are nearly orthogonal, "
                "so it is their squared norms that add (||t + p||^2 = ||t||^2 + ||p||^2), not "
                "their norms.",
            )
        if everywhere(lambda r: 1 / math.sqrt(1 + r * r)):
            fail(
                ex,
                f"at ratio {ratio} your value is the cosine between t + p and p itself (how much a "
                "token's vector still points along the position); the question is the angle "
                "between two different tokens' vectors, t1 + p and t2 + p.",
            )
        side = "higher" if got > measured else "lower"
        fail(
            ex,
            f"predicted_cosine({ratio}) is {side} than the cosine measured on random vectors in "
            f"16,384 dimensions, by more than {COSINE_TOLERANCE}: work out the dot product and the "
            "norms of t1 + p and t2 + p, keeping only the terms that do not vanish when t1, t2 "
            "and p are orthogonal.",
        )
    passed(
        ex,
        "your prediction matches two random tokens at one position in 16,384 dimensions at "
        f"{len(COSINE_RATIOS)} ratios, from a token that vanishes (ratio 0) to one that dominates "
        "(ratio 10).",
    )
