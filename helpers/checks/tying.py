"""Lesson 8 exercise checks: entering and leaving the vector space, and weight tying.

Each check prints a one-line verdict starting with a tick, or raises
:class:`~helpers.checks.ExerciseFailed` naming what is wrong. These are the instant feedback of
the visible check cells; grades come from hidden tests judged outside the student's kernel. No
check holds a reference answer or a table of expected values: each compares the answer with a
measurement or an inline relation it must satisfy, and no verdict shows an expected value.

* :func:`check_embed_one_hot` (C8.1): an embedding lookup without indexing.
* :func:`check_parameters_saved` (C8.4): the number of parameters tying saves.
* :func:`check_tie_math_layout` (C8.3, transfer): tie a model whose output projection is kept in
  the formula's layout [d_model, vocab_size] (:class:`MathLayoutLM`), where lesson 8's one-liner
  does not fit.
* :func:`check_shared_names` (C8.3): which ``state_dict`` entries hold the embedding's storage.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..grading import CallNames
from ..model import TransformerLM
from ..params import count_parameters
from ._core import as_number, as_tensor, call, call_described, fail, passed

__all__ = [
    "check_embed_one_hot",
    "check_parameters_saved",
    "check_tie_math_layout",
    "check_shared_names",
    "MathLayoutLM",
    "Unembed",
    "FORBIDDEN",
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


# --- exercise 1 (C8.1) ---------------------------------------------------------------------------


#: The torch operations this exercise forbids, as ``TorchFunctionMode`` names them, with the way a
#: student writes them. Each reads entries of a tensor by position (or leaves torch to do so):
#: ``W_E[ids]`` and every other ``x[...]``, ``F.embedding``, a loop over the rows (``unbind``) ...
#: The grader refuses the same names (tools/grading/spec.py, ``l8_ex1``, with the ``name.overload``
#: forms of ``torch.ops.aten``) whatever tensor they are applied to, so this check refuses them on
#: any tensor too: what passes here is graded the same.
FORBIDDEN = {
    "__getitem__": "x[...] (W_E[ids], and any other indexing, e.g. ids[:, None])",
    "index": "torch.ops.aten.index",
    "_unsafe_index": "torch.ops.aten._unsafe_index",
    "index_select": "index_select",
    "embedding": "F.embedding / nn.Embedding",
    "embedding_bag": "F.embedding_bag",
    "_embedding_bag": "F.embedding_bag",
    "gather": "gather",
    "take": "take",
    "take_along_dim": "take_along_dim",
    "select": "select",
    "slice": "torch.ops.aten.slice",
    "narrow": "narrow",
    "unbind": "unbind (or a loop over a tensor's rows)",
    "split": "split",
    "split_with_sizes": "split_with_sizes",
    "unsafe_split": "unsafe_split",
    "chunk": "chunk",
    "tensor_split": "tensor_split",
    "vsplit": "vsplit",
    "hsplit": "hsplit",
    "masked_select": "masked_select",
    "as_strided": "as_strided",
    "unfold": "unfold",
    "numpy": ".numpy() (indexing outside torch)",
    "__array__": "numpy.asarray (indexing outside torch)",
    "tolist": ".tolist() (indexing outside torch)",
    "untyped_storage": "the raw storage",
}


def check_embed_one_hot(embed_one_hot) -> None:
    """Exercise 1 (C8.1): ``embed_one_hot(ids, W_E)`` returns the embeddings of ``ids``,
    [n, d_model], equal to the rows ``W_E[ids]``, computed **without indexing**: an answer that
    calls one of :data:`FORBIDDEN` (on ``W_E`` or on any other tensor) is refused, here and by
    the grader."""
    ex = "Exercise 1 (embedding lookup as a one-hot product)"
    g = torch.Generator().manual_seed(8)
    vocab_size, d_model = 10, 4
    W_E = torch.randn(vocab_size, d_model, generator=g)  # [V, d]
    # ids that never use the last token: one_hot without num_classes then gives too few columns
    for ids in (torch.tensor([3, 1, 4, 1, 5]), torch.tensor([0, 9, 2])):
        hints = {
            "cannot be multiplied": "F.one_hot(ids) makes only max(ids)+1 columns; pass "
            "num_classes, the vocabulary size (the number of rows of W_E).",
            "same dtype": "F.one_hot returns integers (torch.long); convert it to W_E's dtype "
            "before the product.",
        }
        shown = f"{ids.tolist()}, W_E"
        calls = CallNames()  # only the answer runs under it
        with calls:
            got = _call_with_hints(
                ex, embed_one_hot, ids, W_E, name="embed_one_hot", hints=hints, shown=shown
            )
        used = dict.fromkeys(n.split(".")[0] for n in calls.order)  # aten's name.overload
        indexing = [FORBIDDEN[n] for n in used if n in FORBIDDEN]
        if indexing:
            fail(
                ex,
                f"your answer indexes ({'; '.join(indexing)}): this exercise gets the rows "
                "without any indexing, as a product of a one-hot matrix (F.one_hot) with W_E.",
            )
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (len(ids), vocab_size):
            fail(
                ex,
                f"your answer has shape {list(got.shape)} = [n, vocab_size]: that is the one-hot "
                f"matrix itself; multiply it by W_E to get [n, d_model] = {[len(ids), d_model]}.",
            )
        got = as_tensor(ex, got, shape=(len(ids), d_model), layout="[n, d_model]")
        _differs(ex, got, W_E[ids], name=f"embed_one_hot({ids.tolist()}, W_E)", atol=1e-6)
    passed(
        ex,
        "one_hot(i) @ W_E picks out row i of W_E, exactly what nn.Embedding looks up, "
        "and your answer never indexed.",
    )


# --- exercise 2 (C8.4) ---------------------------------------------------------------------------


def check_parameters_saved(parameters_saved) -> None:
    """Exercise 2 (C8.4): ``parameters_saved(vocab_size, d_model)``, the number of parameters
    tying removes from a model whose output projection has no bias. Compared with a measurement:
    a ``TransformerLM`` of those sizes built untied and tied (on the meta device, nothing
    allocated), counted with ``count_parameters``."""
    ex = "Exercise 2 (parameters saved by tying)"
    for vocab_size, d_model in ((50_000, 768), (50_257, 768), (32_000, 4096), (58, 48)):
        got = call(ex, parameters_saved, vocab_size, d_model, name="parameters_saved")
        got = as_number(ex, got, name=f"parameters_saved({vocab_size}, {d_model})", integer=True)
        counts = []  # measured, not a formula: an untied and a tied model, on the meta device
        for tie in (False, True):
            with torch.device("meta"):
                model = TransformerLM(
                    vocab_size=vocab_size, d_model=d_model, n_layers=1, n_heads=2, max_len=4,
                    tie_weights=tie,
                )  # fmt: skip
            counts.append(count_parameters(model))
        measured = counts[0] - counts[1]
        if got == measured:
            continue
        where = f"parameters_saved({vocab_size}, {d_model}) returned {got:,}"
        if got == 2 * measured:
            fail(ex, f"{where}, twice the saving: tying removes one of the two matrices, not both.")
        if got in (measured + vocab_size, measured + d_model):
            fail(
                ex,
                f"{where}: the output projection here has no bias (nn.Linear(..., bias=False)); "
                f"the saving is the matrix alone.",
            )
        if got == vocab_size + d_model:
            fail(ex, f"{where}: that adds the two sizes; count the entries of the matrix instead.")
        fail(
            ex,
            f"{where}, which is not what an untied and a tied model of those sizes differ by "
            "(count_parameters of both).",
        )
    passed(
        ex,
        "your count agrees with an untied and a tied model built at four sizes, the sheet's "
        "worked example among them.",
    )


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


# --- the models of exercise 4 ---------------------------------------------------------------------


def _untied_model(seed: int = 0) -> TransformerLM:
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(seed)
        return TransformerLM(
            vocab_size=20, d_model=8, n_layers=1, n_heads=2, max_len=16, tie_weights=False
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
    whose storage is the embedding's: a tied model, an untied one, an untied one whose output
    matrix holds a copy of the embedding's values, and one whose output is a second Parameter over
    the embedding's storage. The check finds those entries by experiment
    (which entries change when the embedding is written in place)."""
    ex = "Exercise 4 (which state_dict entries hold the embedding)"
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(2)
        tied = TransformerLM(vocab_size=20, d_model=8, n_layers=1, n_heads=2, max_len=16)
    alias = _untied_model(3)  # two Parameter objects, one storage: nn.Parameter(W_E.data)
    alias.lm_head.weight = nn.Parameter(alias.token_embedding.weight.data)
    cases = (
        ("a tied model", tied),
        ("an untied model", _untied_model()),
        ("an untied model whose lm_head holds a copy of the embedding's values", _copied_model()),
        ("a model whose lm_head is a second Parameter over the embedding's storage", alias),
    )
    for label, model in cases:
        got = call(ex, shared_names, model, name="shared_names")
        if got is None:
            fail(ex, f"shared_names(model) returned None for {label}: return a list of names.")
        if isinstance(got, str) or not isinstance(got, list | tuple | set):
            fail(ex, f"shared_names should return a list of names, got a {type(got).__name__}.")
        got_sorted = sorted(str(n) for n in got)
        keys = set(model.state_dict())
        unknown = [n for n in got_sorted if n not in keys]
        if unknown:
            fail(ex, f"for {label} you returned {unknown[0]!r}, which is not a state_dict name.")
        # the entries that hold the embedding's storage, by experiment: write into the embedding
        # in place, see which entries change, put it back
        before = {k: v.detach().clone() for k, v in model.state_dict().items()}
        weight = model.token_embedding.weight
        with torch.no_grad():
            kept = weight.detach().clone()
            weight.add_(1.0)
            moved = sorted(
                k for k, v in model.state_dict().items() if not torch.equal(v, before[k])
            )
            weight.copy_(kept)
        if got_sorted == moved:
            continue
        if label.startswith("a tied") and got_sorted == ["token_embedding.weight"]:
            fail(
                ex,
                f"for {label} you returned only {got_sorted}: parameters() and named_parameters() "
                "yield a shared tensor once, under its first name; state_dict() lists it under "
                "every module that holds it. Loop over model.state_dict().items().",
            )
        if "second Parameter" in label and got_sorted == ["token_embedding.weight"]:
            fail(
                ex,
                f"for {label} you returned only {got_sorted}: two Parameter objects can share one "
                "storage (nn.Parameter(W.data) does); compare data_ptr(), not the objects.",
            )
        if "copy" in label and len(got_sorted) > 1:
            fail(
                ex,
                f"for {label} you returned {got_sorted}: equal values are not shared storage. "
                "Compare tensor.data_ptr() with model.token_embedding.weight.data_ptr(), not values.",
            )
        fail(
            ex,
            f"for {label} you returned {got_sorted}: those are not the entries that share the "
            "embedding's storage (writing into the embedding changes another set).",
        )
    passed(
        ex,
        "state_dict() has one entry per (module, attribute) name, so a tied tensor appears twice; "
        "parameters() yields each tensor object once.",
    )
