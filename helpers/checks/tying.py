"""Lesson 8 exercise checks: entering and leaving the vector space, and weight tying.

Each check prints a one-line verdict starting with a tick, or raises
:class:`~helpers.checks.ExerciseFailed` naming what is wrong.

* :func:`check_embed_one_hot` (C8.1): an embedding lookup written as ``one_hot(ids) @ W_E``.
* :func:`check_parameters_saved` (C8.4): the number of parameters tying saves.
* :func:`check_tie` (C8.3): tie the output projection of a given model to its embedding.
* :func:`check_shared_names` (C8.3): which ``state_dict`` entries hold the embedding's storage.
"""

from __future__ import annotations

import torch
from torch import nn

from ..model import TransformerLM
from ..params import count_parameters
from ._core import as_number, as_tensor, call, expect_close, fail, passed

__all__ = ["check_embed_one_hot", "check_parameters_saved", "check_tie", "check_shared_names"]


def _call_with_hints(exercise: str, fn, *args, name: str, hints: dict[str, str]):
    """``call`` the student's function; if it raised, add the hint whose key is in the message."""
    try:
        return call(exercise, fn, *args, name=name)
    except Exception as e:  # ExerciseFailed from ``call``
        problem = getattr(e, "problem", str(e))
        for key, hint in hints.items():
            if key in problem:
                fail(exercise, f"{problem} Hint: {hint}")
        raise


# --- exercise 1 (C8.1) ---------------------------------------------------------------------------


def check_embed_one_hot(embed_one_hot) -> None:
    """Exercise 1 (C8.1): ``embed_one_hot(ids, W_E)`` -> ``one_hot(ids, vocab_size) @ W_E``,
    shape [n, d_model], equal to the rows ``W_E[ids]``."""
    ex = "Exercise 1 (embedding lookup as a one-hot product)"
    g = torch.Generator().manual_seed(8)
    vocab_size, d_model = 10, 4
    W_E = torch.randn(vocab_size, d_model, generator=g)  # [V, d]
    # ids that never use the last token: one_hot without num_classes then gives too few columns
    for ids in (torch.tensor([3, 1, 4, 1, 5]), torch.tensor([0, 9, 2])):
        hints = {
            "cannot be multiplied": "F.one_hot(ids) makes only max(ids)+1 columns; pass "
            "num_classes=W_E.shape[0] (the vocabulary size), and multiply one_hot @ W_E.",
            "same dtype": "F.one_hot returns integers (torch.long); convert it with .float() "
            "(or .to(W_E.dtype)) before the product.",
        }
        got = _call_with_hints(ex, embed_one_hot, ids, W_E, name="embed_one_hot", hints=hints)
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (len(ids), vocab_size):
            fail(
                ex,
                f"your answer has shape {list(got.shape)} = [n, vocab_size]: that is the one-hot "
                f"matrix itself; multiply it by W_E to get [n, d_model] = {[len(ids), d_model]}.",
            )
        got = as_tensor(ex, got, shape=(len(ids), d_model), layout="[n, d_model]")
        expect_close(ex, got, W_E[ids], name=f"embed_one_hot({ids.tolist()}, W_E)", atol=1e-6)
    passed(ex, "one_hot(i) @ W_E picks out row i of W_E, exactly what nn.Embedding looks up.")


# --- exercise 2 (C8.4) ---------------------------------------------------------------------------


def check_parameters_saved(parameters_saved) -> None:
    """Exercise 2 (C8.4): ``parameters_saved(vocab_size, d_model)``, the number of parameters
    tying saves: one vocab_size x d_model matrix."""
    ex = "Exercise 2 (parameters saved by tying)"
    for vocab_size, d_model in ((50_000, 768), (50_257, 768), (32_000, 4096), (58, 48)):
        got = call(ex, parameters_saved, vocab_size, d_model, name="parameters_saved")
        got = as_number(ex, got, name=f"parameters_saved({vocab_size}, {d_model})", integer=True)
        want = vocab_size * d_model
        if got == want:
            continue
        where = f"parameters_saved({vocab_size}, {d_model}) returned {got:,}"
        if got == 2 * want:
            fail(ex, f"{where}, twice the saving: tying removes one of the two matrices, not both.")
        if got in (want + vocab_size, want + d_model):
            fail(
                ex,
                f"{where}: the output projection here has no bias (nn.Linear(..., bias=False)); "
                f"the saving is the matrix alone.",
            )
        if got == vocab_size + d_model:
            fail(
                ex, f"{where}: a vocab_size x d_model matrix has vocab_size times d_model entries."
            )
        fail(ex, f"{where}, expected {want:,} (one vocab_size x d_model matrix).")
    passed(ex, "tying saves one vocab_size x d_model matrix; 50,000 x 768 = 38,400,000.")


# --- exercise 3 (C8.3) ---------------------------------------------------------------------------


def _untied_model(seed: int = 0) -> TransformerLM:
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(seed)
        return TransformerLM(
            vocab_size=20, d_model=8, n_layers=1, n_heads=2, max_len=16, tie_weights=False
        )


def check_tie(tie) -> None:
    """Exercise 3 (C8.3): ``tie(model)`` makes ``model.lm_head.weight`` the very same Parameter
    as ``model.token_embedding.weight`` (keeping the embedding's values) and returns the model."""
    ex = "Exercise 3 (tie the output projection to the embedding)"
    model = _untied_model()
    embedding_before = model.token_embedding.weight.detach().clone()  # [V, d]
    count_before = count_parameters(model)
    hints = {
        "cannot assign": "a module's weight must be an nn.Parameter; assign the embedding's "
        "Parameter itself (model.lm_head.weight = model.token_embedding.weight), not .T, .data "
        "or .clone(): nn.Linear already computes h @ weight.T.",
    }
    got = _call_with_hints(ex, tie, model, name="tie", hints=hints)
    if got is None:
        fail(ex, "tie(model) returned None: end it with `return model`.")
    if got is not model:
        fail(
            ex,
            f"tie(model) returned a {type(got).__name__}, not the model it was given: tie the "
            f"weights of `model` in place and `return model`.",
        )
    head = getattr(getattr(model, "lm_head", None), "weight", None)
    emb = getattr(getattr(model, "token_embedding", None), "weight", None)
    if not isinstance(head, torch.Tensor) or not isinstance(emb, torch.Tensor):
        fail(
            ex,
            "model.lm_head.weight or model.token_embedding.weight is missing or not a tensor: "
            "keep both layers and only make the output use the embedding's Parameter.",
        )
    if tuple(head.shape) != tuple(emb.shape):
        fail(
            ex,
            f"lm_head.weight has shape {list(head.shape)}, the embedding {list(emb.shape)}: "
            f"nn.Linear stores its weight as [out_features, in_features] = [vocab_size, d_model], "
            f"the embedding's own layout, so assign it without transposing (the Linear computes "
            f"h @ weight.T for you).",
        )
    if head is not emb:
        same_values = head.dtype == emb.dtype and torch.equal(head.detach(), emb.detach())
        if same_values and head.data_ptr() == emb.data_ptr():
            fail(
                ex,
                "lm_head.weight and the embedding share their memory (equal data_ptr) but are two "
                "different Parameter objects (did you wrap it in nn.Parameter(...)?): "
                "parameters() and the optimizer then see two tensors and count the matrix twice. "
                "Assign the Parameter object itself: "
                "model.lm_head.weight = model.token_embedding.weight.",
            )
        if same_values:
            fail(
                ex,
                "lm_head.weight holds the same values as the embedding but is a different tensor "
                "with its own memory (data_ptr differs): that is a copy, which training would "
                "pull apart. Assign the Parameter object itself: "
                "model.lm_head.weight = model.token_embedding.weight.",
            )
        fail(
            ex,
            "model.lm_head.weight is not model.token_embedding.weight: they are two different "
            "tensors. Assign the Parameter object itself: "
            "model.lm_head.weight = model.token_embedding.weight.",
        )
    if not isinstance(emb, nn.Parameter):
        fail(
            ex, "the shared weight is no longer an nn.Parameter, so the optimizer would not see it."
        )
    if emb.dtype != embedding_before.dtype:
        fail(ex, f"the shared weight has dtype {emb.dtype}, expected {embedding_before.dtype}.")
    if not torch.isfinite(emb).all():
        fail(ex, "the shared weight contains NaN or infinite values.")
    if not torch.equal(emb.detach(), embedding_before):
        fail(
            ex,
            "the two layers share one tensor, but it no longer holds the embedding's values: "
            "you tied them the other way round (the embedding now uses the output matrix) or "
            "changed the values. Keep the embedding: model.lm_head.weight = "
            "model.token_embedding.weight.",
        )
    saved = count_before - count_parameters(model)
    V, d = embedding_before.shape
    if saved != V * d:
        fail(
            ex,
            f"the model lost {saved:,} parameters; tying should remove exactly {V}*{d}={V * d:,}.",
        )
    passed(
        ex, f"one tensor, two uses; the model now counts {count_parameters(model):,} parameters."
    )


# --- exercise 4 (C8.3) ---------------------------------------------------------------------------


def _copied_model() -> TransformerLM:
    """Untied, but lm_head holds a copy of the embedding's values (equal values, own storage)."""
    model = _untied_model(1)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.token_embedding.weight)
    return model


def check_shared_names(shared_names) -> None:
    """Exercise 4 (C8.3): ``shared_names(model)`` returns the names of the ``state_dict`` entries
    whose storage is the embedding's (``data_ptr``): both names for a tied model, one for an
    untied model, even when its output matrix holds a copy of the same values."""
    ex = "Exercise 4 (which state_dict entries hold the embedding)"
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(2)
        tied = TransformerLM(vocab_size=20, d_model=8, n_layers=1, n_heads=2, max_len=16)
    cases = (
        ("a tied model", tied, ["lm_head.weight", "token_embedding.weight"]),
        ("an untied model", _untied_model(), ["token_embedding.weight"]),
        (
            "an untied model whose lm_head holds a copy of the embedding's values",
            _copied_model(),
            ["token_embedding.weight"],
        ),
    )
    for label, model, want in cases:
        got = call(ex, shared_names, model, name="shared_names")
        if got is None:
            fail(ex, f"shared_names(model) returned None for {label}: return a list of names.")
        if isinstance(got, str) or not isinstance(got, list | tuple | set):
            fail(ex, f"shared_names should return a list of names, got a {type(got).__name__}.")
        got_sorted = sorted(str(n) for n in got)
        if got_sorted == want:
            continue
        if label.startswith("a tied") and got_sorted == ["token_embedding.weight"]:
            fail(
                ex,
                f"for {label} you returned only {got_sorted}: parameters() and named_parameters() "
                "yield a shared tensor once, under its first name; state_dict() lists it under "
                "every module that holds it. Loop over model.state_dict().items().",
            )
        if "copy" in label and got_sorted == ["lm_head.weight", "token_embedding.weight"]:
            fail(
                ex,
                f"for {label} you returned {got_sorted}: equal values are not shared storage. "
                "Compare tensor.data_ptr() with model.token_embedding.weight.data_ptr(), not values.",
            )
        fail(ex, f"for {label} you returned {sorted(got, key=str)}, expected {want}.")
    passed(
        ex,
        "state_dict() has one entry per (module, attribute) name, so a tied tensor appears twice; "
        "parameters() yields each tensor object once.",
    )
