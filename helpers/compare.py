"""Lesson 8 (going further): the course's model next to a real one, layer by layer.

``compare_hidden_states(ours, reference, tokens)`` runs a :class:`~helpers.TransformerLM` and a
reference (a Hugging Face causal LM, the zoo's GPT, or another course model) on the same tokens
and compares the residual stream after the embeddings, after every block, and the logits::

    difference_l = max |h_l(ours) - h_l(reference)|,   l = 0 (embeddings), 1..L, logits

the first l above a tolerance is where a conversion went wrong (:class:`LayerComparison`).
The references: ``gpt2_reference`` (random weights in GPT-2's layout, offline) and
``pretrained_gpt2`` (GPT-2 small's real weights from the hub, only when called).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from . import _validate as check
from .convert import _transformers, from_huggingface
from .model import TransformerLM

__all__ = ["compare_hidden_states", "LayerComparison", "gpt2_reference", "pretrained_gpt2"]


@dataclass(frozen=True)
class LayerComparison:
    """Lesson 8 (going further). Two models' hidden states side by side: ``names[i]`` ("embeddings",
    "block 1", ..., "logits") and ``max_differences[i]``, the largest |ours - theirs| there;
    ``first_different`` names the first above ``atol`` (None: they agree everywhere)."""

    names: tuple[str, ...]
    max_differences: tuple[float, ...]
    atol: float

    @property
    def first_different(self) -> str | None:
        return next(
            (n for n, m in zip(self.names, self.max_differences, strict=True) if m > self.atol),
            None,
        )

    def __str__(self) -> str:
        lines = [
            f"{n:>12s}  max |difference| {m:.1e}"
            for n, m in zip(self.names, self.max_differences, strict=True)
        ]
        verdict = self.first_different
        lines.append(
            f"equal within {self.atol:g} at every layer"
            if verdict is None
            else f"they part at {verdict} (first difference above {self.atol:g})"
        )
        return "\n".join(lines)


def _reference_states(reference: nn.Module, tokens: torch.Tensor):
    """The reference's [h_0, ..., h_L] and logits. A course model: its return_hidden. Hugging
    Face's models: output_hidden_states, whose last entry is after the final norm, so h_L is read
    off the last block's output by a hook. The zoo's GPT: hooks on its embedding sum (``drop``)
    and on every block."""
    from .zoo.gpt import GPT

    if isinstance(reference, TransformerLM):
        logits, hidden = reference(tokens, return_hidden=True)
        return list(hidden), logits
    states = []

    def keep(module, inputs, output):
        states.append(output[0] if isinstance(output, tuple) else output)

    zoo = isinstance(reference, GPT)
    if zoo:
        watched = [reference.transformer.drop, *reference.transformer.h]
    else:
        watched = [
            reference.model.layers[-1]
            if hasattr(reference, "model")
            else reference.transformer.h[-1]
        ]
    hooks = [m.register_forward_hook(keep) for m in watched]
    try:
        if zoo:
            return states, reference(tokens)[0]
        out = reference(tokens, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    return [*out.hidden_states[:-1], states[-1]], out.logits


def compare_hidden_states(
    ours: TransformerLM, reference: nn.Module, tokens: torch.Tensor, atol: float = 1e-4
) -> LayerComparison:
    """Lesson 8 (going further). Run ``ours`` (``return_hidden=True``) and ``reference`` (a Hugging
    Face causal LM with ``output_hidden_states=True``, the zoo's GPT, or another TransformerLM)
    on ``tokens``
    [batch, n] and compare the residual stream after the embeddings, after every block, and the
    logits: ``max |h_l(ours) - h_l(reference)|`` for each. ``first_different`` names the first
    layer above ``atol``: where a conversion went wrong."""
    if not isinstance(ours, TransformerLM):
        raise TypeError(f"ours must be a helpers.TransformerLM, got {type(ours).__name__}")
    if not isinstance(reference, nn.Module):
        raise TypeError(f"reference must be a torch.nn.Module, got {type(reference).__name__}")
    check.token_ids("tokens", tokens, ours.config.vocab_size)
    atol = check.positive_float("atol", atol)
    with torch.no_grad():
        logits, hidden = ours(tokens, return_hidden=True)
        theirs, their_logits = _reference_states(reference, tokens)
    if len(theirs) != len(hidden):
        raise ValueError(
            f"the models differ in depth: ours has {len(hidden) - 1} blocks, the reference "
            f"{len(theirs) - 1}"
        )
    names = ["embeddings", *(f"block {i}" for i in range(1, len(hidden))), "logits"]
    pairs = [*zip(hidden, theirs, strict=True), (logits, their_logits)]
    diffs = tuple(float((a.double() - b.double()).abs().max()) for a, b in pairs)
    return LayerComparison(tuple(names), diffs, atol)


def gpt2_reference(
    seed: int = 0,
    *,
    vocab_size: int = 50257,
    n_positions: int = 1024,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    source: str = "zoo",
) -> nn.Module:
    """Lesson 8 (going further). A model in GPT-2's layout with random weights drawn after
    ``torch.manual_seed(seed)``, built offline: ``source="zoo"`` (the default) the zoo's GPT
    (:class:`helpers.zoo.gpt.GPT`: GPT-2's names, fused ``c_attn``, the same arithmetic; about a
    second, and no optional package), ``source="huggingface"`` Hugging Face's ``GPT2LMHeadModel``
    from a ``GPT2Config`` of these sizes, dropout off (needs transformers, whose import alone takes
    10 to 20 s on two cores). By default GPT-2's vocabulary and context with two narrow blocks,
    small enough for a live lesson; GPT-2 small is ``d_model=768, n_layers=12, n_heads=12``.
    In eval mode."""
    from .zoo.gpt import GPT

    check.choice("source", source, ("zoo", "huggingface"))
    sizes = dict(vocab_size=vocab_size, n_positions=n_positions, d_model=d_model)
    for name, value in (*sizes.items(), ("n_layers", n_layers), ("n_heads", n_heads)):
        check.positive_int(name, value)
    if d_model % n_heads:
        raise ValueError(f"n_heads must divide d_model, got d_model={d_model}, n_heads={n_heads}")
    T = _transformers() if source == "huggingface" else None  # before any weight is drawn
    torch.manual_seed(check.positive_int("seed", seed, minimum=0))
    if T is None:
        gpt = GPT(block_size=n_positions, vocab_size=vocab_size, n_layer=n_layers,
                  n_head=n_heads, n_embd=d_model)  # fmt: skip
        return gpt.eval()
    config = T.GPT2Config(
        vocab_size=vocab_size, n_positions=n_positions, n_embd=d_model, n_layer=n_layers,
        n_head=n_heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    return T.GPT2LMHeadModel(config).eval()


def pretrained_gpt2(name: str = "gpt2"):
    """Lesson 8 (going further). GPT-2's real weights from the Hugging Face hub (``"gpt2"``:
    GPT-2 small, about 550 MB the first time, cached afterwards) converted to the course's model,
    and GPT-2's tokenizer: returns ``(model, tokenizer)``. Reaches the network: the lesson calls it
    only when the student sets its flag. Raises ``ModuleNotFoundError`` without transformers and
    ``OSError`` when the hub cannot be reached."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a model name on the hub such as 'gpt2', got {name!r}")
    T = _transformers()
    reference = T.GPT2LMHeadModel.from_pretrained(name).eval()
    return from_huggingface(reference), T.AutoTokenizer.from_pretrained(name)
