"""Lesson 10: models the course did not write in its own style, shipped for the audit.

* :mod:`.gpt`: :class:`GPT`, a small GPT in the layout and naming of typical public GPT-2-style
  code (``GPTConfig``, fused ``c_attn``, ``wte``/``wpe``, ``c_fc``/``c_proj``,
  ``ln_1``/``ln_2``/``ln_f``, ``lm_head`` tied by assignment);
* :mod:`.huggingface`: :func:`hf_model`, Hugging Face's GPT-2, Llama and GPT-NeoX from tiny
  configurations (random weights, nothing downloaded), where the optional ``transformers`` is
  installed (:func:`transformers_available`);
* :mod:`.mystery`: :func:`mystery_model`, the model of the capstone's open-ended exercise.

The models live here, not in :mod:`helpers.checklist`, because they are what the audit is *run
on*: the audit's package never imports or names this one (``tests/test_audit_zoo.py`` checks),
so a verdict on one of these models cannot come from the audit knowing its code. The
deliberately broken variants of the course's own model stay in :mod:`helpers.checklist.broken`.
"""

from __future__ import annotations

from .gpt import GPT, GPTConfig
from .huggingface import FAMILIES, TRANSFORMERS_PIN, hf_model, transformers_available
from .mystery import mystery_model

__all__ = [
    "GPT",
    "GPTConfig",
    "FAMILIES",
    "TRANSFORMERS_PIN",
    "hf_model",
    "transformers_available",
    "mystery_model",
]
