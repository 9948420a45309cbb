"""Lesson 8 (going further) exercise check: a foreign checkpoint into the course's model.

* :func:`check_load_gpt2_layout` (exercise 4, transfer): ``load_gpt2_layout(model, state_dict)``
  copies a checkpoint in GPT-2's layout (Hugging Face's names, Conv1D weights stored [in, out],
  q, k and v fused in ``c_attn``) into a :class:`~helpers.TransformerLM` of GPT-2's options.

The checkpoints come from the zoo's GPT (:func:`helpers.zoo.gpt.gpt2_state_dict`), a model of
GPT-2's layout written another way; the check compares the loaded model's logits with that GPT's
own (an independent computation, not a reference answer) and never shows an expected value. The
course's converters (:mod:`helpers.convert`) compute the answer outright: an answer that calls
them is refused, here and by the grade (``FORBIDDEN_MATCHING``, tools/grading/spec.py).
"""

from __future__ import annotations

import re

import torch

from ..grading import CallNames
from ..model import TransformerLM
from ..zoo.gpt import GPT, gpt2_state_dict
from ._core import ExerciseFailed, call_described, fail, passed

__all__ = [
    "check_load_gpt2_layout",
    "foreign_checkpoint",
    "gpt2_options_model",
    "FORBIDDEN_MATCHING",
    "LOGITS_TOLERANCE",
]

#: Names (re.search) an answer may not call: the course's converters hold the mapping itself.
FORBIDDEN_MATCHING = {"l8_ex4": (r"^helpers\.convert\.",)}
#: float32: loaded logits within this of the foreign model's (measured about 1e-7 here)
LOGITS_TOLERANCE = 1e-5

_HINTS = {
    "a leaf Variable that requires grad": "copying into a parameter in place needs "
    "`with torch.no_grad():` around the copies.",
    "size mismatch": "a Conv1D weight is stored [in, out], nn.Linear's [out, in]: transpose it.",
    "must match the size": "a Conv1D weight is stored [in, out], nn.Linear's [out, in]: "
    "transpose it.",
    "Missing key": "load_state_dict needs every name of the course's model, lm_head.weight too.",
}


def foreign_checkpoint(
    seed: int, vocab_size: int, d_model: int, n_layers: int, n_heads: int, n_positions: int
) -> tuple[dict, GPT]:
    """Lesson 8, exercise 4. A random checkpoint in GPT-2's layout and the model it came from:
    ``(state_dict, gpt)``, the zoo's GPT drawn after ``torch.manual_seed(seed)`` (torch's global
    random state is left as it was) with these sizes, its LayerNorms' gains and biases drawn too
    (so a norm left at 1 and 0 shows)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        gpt = GPT(block_size=n_positions, vocab_size=vocab_size, n_layer=n_layers,
                  n_head=n_heads, n_embd=d_model).eval()  # fmt: skip
        with torch.no_grad():
            for module in gpt.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.weight.normal_(1.0, 0.2)
                    module.bias.normal_(0.0, 0.2)
                if isinstance(module, torch.nn.Linear) and module.bias is not None:
                    module.bias.normal_(0.0, 0.02)
    return gpt2_state_dict(gpt), gpt


def gpt2_options_model(state_dict: dict, n_heads: int) -> TransformerLM:
    """Lesson 8, exercise 4. A fresh course model with GPT-2's options and the sizes of
    ``state_dict`` (learned positions, pre-norm LayerNorm, GELU's tanh form, tied, biases)."""
    vocab_size, d_model = state_dict["transformer.wte.weight"].shape
    n_positions = state_dict["transformer.wpe.weight"].shape[0]
    n_layers = len({k.split(".")[2] for k in state_dict if k.startswith("transformer.h.")})
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return TransformerLM(
            vocab_size, d_model, n_layers, n_heads, max_len=n_positions, positional="learned",
            activation="gelu_tanh",
        )  # fmt: skip


def _load(ex: str, load_gpt2_layout, model, state_dict):
    """Call the answer under the grader's profiler; refuse the converters by name; add a hint."""
    calls = CallNames()
    try:
        with calls:
            got = call_described(
                ex, load_gpt2_layout, (model, state_dict), name="load_gpt2_layout",
                shown="model, state_dict",
            )  # fmt: skip
    except ExerciseFailed as e:
        hint = next((h for key, h in _HINTS.items() if key in e.problem), None)
        if hint is None:
            raise
        fail(ex, f"{e.problem} Hint: {hint}")
    used = sorted(
        n for n in calls.names if any(re.search(p, n) for p in FORBIDDEN_MATCHING["l8_ex4"])
    )
    if used:
        fail(ex, f"your answer calls {', '.join(used)}, which maps the checkpoint for you: copy "
                 "the tensors yourself.")  # fmt: skip
    return got


def check_load_gpt2_layout(load_gpt2_layout) -> None:
    """Exercise 4 (transfer): ``load_gpt2_layout(model, state_dict)`` fills ``model`` (a
    TransformerLM with GPT-2's options) from a GPT-2-layout ``state_dict`` and returns it; its
    logits must equal those of the GPT the checkpoint came from, at three sizes, with the
    embedding still tied and the checkpoint left unchanged."""
    ex = "Exercise 4 (a foreign checkpoint)"
    sizes = [(41, 24, 1, 2, 12), (57, 32, 2, 4, 16), (29, 48, 3, 3, 20)]
    for seed, (vocab, d, layers, heads, positions) in enumerate(sizes, start=5):
        state, gpt = foreign_checkpoint(seed, vocab, d, layers, heads, positions)
        kept = {k: v.clone() for k, v in state.items()}
        model = gpt2_options_model(state, heads)
        got = _load(ex, load_gpt2_layout, model, state)
        if got is not model:
            fail(ex, "load_gpt2_layout must fill the model it was given and `return model`; got "
                     f"{'None' if got is None else 'a ' + type(got).__name__}.")  # fmt: skip
        if not model.tied:
            fail(ex, "the model is no longer tied: lm_head.weight must stay the embedding's own "
                     "tensor (copy into token_embedding.weight, do not replace it).")  # fmt: skip
        if any(not torch.equal(state[k], v) for k, v in kept.items()):
            fail(ex, "the checkpoint was changed in place: transpose or split copies of it.")
        tokens = torch.randint(
            0, vocab, (2, positions), generator=torch.Generator().manual_seed(seed)
        )
        with torch.no_grad():
            ours, theirs = model(tokens), gpt(tokens)[0]  # [B, n, V] each
        difference = float((ours - theirs).abs().max())
        if not difference <= LOGITS_TOLERANCE:
            fail(ex, f"at d_model={d}, {layers} block(s), {heads} heads, the loaded model's logits "
                     f"are off by up to {difference:.3g} from the checkpoint's own model: check "
                     "each Conv1D transpose, the order q, k, v in c_attn, and every LayerNorm.")  # fmt: skip
    passed(ex, f"at {len(sizes)} sizes the course's model, given the foreign checkpoint, computes "
               "its model's logits: Conv1D's [in, out] turned into nn.Linear's [out, in], c_attn "
               "split into q, k, v, and the embedding still tied.")  # fmt: skip
