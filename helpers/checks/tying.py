"""Lesson 8 exercise checks: entering and leaving the vector space, and weight tying.

Each check prints a one-line verdict starting with a tick, or raises
:class:`~helpers.checks.ExerciseFailed` naming what is wrong.

* :func:`check_embed_one_hot` (C8.1): an embedding lookup written as ``one_hot(ids) @ W_E``.
* :func:`check_parameters_saved` (C8.4): the number of parameters tying saves.
* :func:`check_tie_math_layout` (C8.3, transfer): tie a model whose output projection is kept in
  the formula's layout [d_model, vocab_size] (:class:`MathLayoutLM`), where lesson 8's one-liner
  does not fit.
* :func:`check_tie` (C8.3): tie the output projection of a ``TransformerLM`` to its embedding
  (kept for instructors; the lesson's exercise 3 is now the transfer above).
* :func:`check_shared_names` (C8.3): which ``state_dict`` entries hold the embedding's storage.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..model import TransformerLM
from ..params import count_parameters
from ._core import as_number, as_tensor, call, call_described, expect_close, fail, passed

__all__ = [
    "check_embed_one_hot",
    "check_parameters_saved",
    "check_tie_math_layout",
    "check_tie",
    "check_shared_names",
    "MathLayoutLM",
    "Unembed",
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


# --- exercise 1 (C8.1) ---------------------------------------------------------------------------


#: Tensor operations that read rows of a table by position instead of multiplying it: any of
#: them applied to W_E (or to a tensor made from it) means the answer indexed the table.
_INDEXING = {
    "__getitem__": "W_E[...]",
    "index_select": "index_select",
    "embedding": "F.embedding / nn.Embedding",
    "embedding_bag": "F.embedding_bag",
    "gather": "gather",
    "take": "take",
    "take_along_dim": "take_along_dim",
    "select": "select",
    "narrow": "narrow",
    "unbind": "unbind (or a loop over the rows)",
    "__iter__": "a loop over the rows",
    "split": "split",
    "chunk": "chunk",
    "tensor_split": "tensor_split",
    "masked_select": "masked_select",
    "numpy": ".numpy() (indexing outside torch)",
    "tolist": ".tolist() (indexing outside torch)",
}


#: Matrix products: their result is the answer, no longer the table, so it is not followed further
#: (slicing the product is not indexing W_E).
_PRODUCTS = {
    "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "einsum", "tensordot", "linear",
    "inner", "addmm", "chain_matmul",
}  # fmt: skip


def _recording_table(table: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    """``table`` as a tensor subclass that records the name of every torch operation applied to
    it or to any tensor computed from it (up to a matrix product, whose result is a plain tensor
    again); returns (the recording tensor, the list of names)."""
    names: list[str] = []

    class RecordedTable(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", str(func))
            names.append(name)
            out = super().__torch_function__(func, types, args, kwargs or {})
            if name in _PRODUCTS and isinstance(out, cls):
                out = out.as_subclass(torch.Tensor)
            return out

    return table.as_subclass(RecordedTable), names


def check_embed_one_hot(embed_one_hot) -> None:
    """Exercise 1 (C8.1): ``embed_one_hot(ids, W_E)`` -> ``one_hot(ids, vocab_size) @ W_E``,
    shape [n, d_model], equal to the rows ``W_E[ids]``, computed **without indexing** ``W_E``:
    the table is handed over as a tensor that records what is done to it, and an answer that
    reads its rows by position (``W_E[ids]``, ``index_select``, ``F.embedding``, a loop over the
    rows, ...) is refused."""
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
        table, used = _recording_table(W_E)
        got = _call_with_hints(
            ex,
            embed_one_hot,
            ids,
            table,
            name="embed_one_hot",
            hints=hints,
            shown=f"{ids.tolist()}, W_E",
        )
        indexing = [_INDEXING[n] for n in dict.fromkeys(used) if n in _INDEXING]
        if indexing:
            fail(
                ex,
                f"your answer reads rows of W_E by indexing ({', '.join(indexing)}): the task is "
                "to get them without indexing, as the product F.one_hot(ids, num_classes) @ W_E.",
            )
        if isinstance(got, torch.Tensor):
            got = got.as_subclass(torch.Tensor)  # a plain tensor again, for the checks below
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (len(ids), vocab_size):
            fail(
                ex,
                f"your answer has shape {list(got.shape)} = [n, vocab_size]: that is the one-hot "
                f"matrix itself; multiply it by W_E to get [n, d_model] = {[len(ids), d_model]}.",
            )
        got = as_tensor(ex, got, shape=(len(ids), d_model), layout="[n, d_model]")
        expect_close(ex, got, W_E[ids], name=f"embed_one_hot({ids.tolist()}, W_E)", atol=1e-6)
    passed(
        ex,
        "one_hot(i) @ W_E picks out row i of W_E, exactly what nn.Embedding looks up, "
        "and your answer never indexed W_E.",
    )


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


# --- exercise 3 (C8.3, transfer): tying in another layout ----------------------------------------


class Unembed(nn.Module):
    """An output projection kept in the formula's layout: ``weight`` [d_model, vocab_size],
    ``logits = h @ weight`` (``nn.Linear`` would store the transpose, [vocab_size, d_model])."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_model, vocab_size) / math.sqrt(d_model))  # [d, V]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.weight  # [..., d] @ [d, V] -> [..., V]


class MathLayoutLM(nn.Module):
    """Lesson 8, exercise 3. A tiny untied language model written from the formula:
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
    """Exercise 3 (C8.3, transfer): ``tie_math_layout(model)`` takes an untied
    :class:`MathLayoutLM` and returns it tied: no [d_model, vocab_size] parameter left (the count
    drops by exactly vocab_size x d_model), logits ``h @ W_E^T`` computed from the very tensor
    ``model.embed.weight`` (a change to it shows in the logits; the gradient of the output reaches
    it), also after ``model.double()``."""
    ex = "Exercise 3 (tie a model kept in the formula's layout)"
    model = _math_layout_model()
    W_E = model.embed.weight
    V, d = W_E.shape
    count_before = count_parameters(model)
    old_out = model.unembed.weight.detach().clone()  # [d, V]
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
            f"{saved:,} parameters saved instead of {V * d:,}): nn.Parameter(...) of W_E.T, of a "
            "copy or of .data makes a new matrix that the optimizer trains on its own. The output "
            "must compute with model.embed.weight itself.",
        )
    if saved != V * d:
        fail(
            ex,
            f"the model lost {saved:,} parameters; tying should remove exactly {V}*{d}={V * d:,} "
            "(the output matrix), nothing else.",
        )
    expect_close(ex, logits.detach(), want, name="model(ids)", atol=1e-5, rtol=1e-5)
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
    expect_close(ex, logits64.detach(), want64, name="model(ids) after model.double()")
    passed(
        ex,
        f"no second matrix ({V * d:,} parameters saved), and the logits are h @ W_E.T with the "
        "embedding tensor itself, in any layout: tying is one tensor used at both doors.",
    )


# --- the TransformerLM version of exercise 3 (C8.3) ---------------------------------------------------------------------------


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
