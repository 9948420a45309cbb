"""Hugging Face models built from tiny configurations, for the audit (lesson 10).

Random weights from a configuration: nothing is downloaded, no tokenizer is needed, and the
environment variable ``HF_HUB_OFFLINE=1`` is set before ``transformers`` is imported, so nothing
reaches the network. ``transformers`` is *optional*: the course's environment
(``requirements.txt``) does not install it, the test environment (``requirements-dev.txt``) pins
it. :func:`transformers_available` says whether it is there; :func:`hf_model` raises a
``ModuleNotFoundError`` that says how to install it when it is not.
"""

from __future__ import annotations

import importlib.util
import os

import torch
from torch import nn

from .. import _validate as check

__all__ = ["FAMILIES", "TRANSFORMERS_PIN", "transformers_available", "hf_model"]

#: The version the course tests with (requirements-dev.txt).
TRANSFORMERS_PIN = "transformers==5.24.0"

#: The families :func:`hf_model` builds, and where each puts position.
FAMILIES = {
    "gpt2": "GPT-2: a learned position table added to the token embeddings",
    "llama": "Llama: rotary position inside attention, RMSNorm, SwiGLU",
    "gpt_neox": "GPT-NeoX: rotary position on part of each head, attention and MLP in parallel",
}


def transformers_available() -> bool:
    """Lesson 10. True when the ``transformers`` package can be imported here (False also when
    an environment blocks it, ``sys.modules["transformers"] = None``)."""
    try:
        return importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):  # ValueError: blocked, sys.modules entry without a spec
        return False


def hf_model(
    family: str, *, vocab_size: int = 96, d_model: int = 48, seed: int = 0, **overrides
) -> nn.Module:
    """Lesson 10. A Hugging Face causal language model of ``family`` (a key of :data:`FAMILIES`)
    from a tiny configuration: ``vocab_size`` tokens, ``d_model`` wide, 2 layers, 4 heads, a
    context of 64, feed-forward width 4 d_model (GPT-2, GPT-NeoX) or 128 (Llama, SwiGLU), random
    weights drawn after ``torch.manual_seed(seed)``; ``overrides`` set configuration fields.
    Its forward maps token ids [B, n] to an output whose ``.logits`` are [B, n, vocab_size]."""
    check.choice("family", family, FAMILIES)
    vocab_size = check.positive_int("vocab_size", vocab_size)
    d_model = check.positive_int("d_model", d_model)
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of the 4 heads, got {d_model}")
    if not transformers_available():
        raise ModuleNotFoundError(
            "transformers is not installed, so no Hugging Face model can be built here; it is "
            f"optional for the course: `python -m pip install {TRANSFORMERS_PIN}` adds it"
        )
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach the network, whatever is asked
    import transformers as T

    # token ids 0 as begin/end of text: GPT-2's default 50256 lies outside a tiny vocabulary
    ids = dict(bos_token_id=0, eos_token_id=0)
    if family == "gpt2":
        config = T.GPT2Config(
            vocab_size=vocab_size,
            n_embd=d_model,
            n_layer=2,
            n_head=4,
            n_positions=64,
            **ids,
        )
        cls = T.GPT2LMHeadModel
    elif family == "llama":
        config = T.LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=d_model,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            max_position_embeddings=64,
            **ids,
        )
        cls = T.LlamaForCausalLM
    else:
        config = T.GPTNeoXConfig(
            vocab_size=vocab_size,
            hidden_size=d_model,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=4 * d_model,
            max_position_embeddings=64,
            **ids,
        )
        cls = T.GPTNeoXForCausalLM
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise ValueError(f"{type(config).__name__} has no setting {key!r}")
        setattr(config, key, value)
    torch.manual_seed(check.positive_int("seed", seed, minimum=0))
    model = cls(config)
    return model.eval()
