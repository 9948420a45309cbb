"""Helpers for the Transformer block course, lessons 4 to 10 (the block, the full model, the audit).

One module per lesson idea:

* lesson 4, :mod:`helpers.positional` (and :mod:`helpers.attention`): position
* lesson 5, :mod:`helpers.normalization`, :mod:`helpers.diagnostics`: residuals, layer norm
* lesson 6, :mod:`helpers.feedforward`: the feed-forward block
* lesson 7, :mod:`helpers.blocks`: the block, and stacking
* lesson 8, :mod:`helpers.model`, :mod:`helpers.params`: embeddings, output, weight tying;
  :mod:`helpers.convert` (going further): GPT-2's and Llama's checkpoints in the course's model,
  :mod:`helpers.compare`: the two compared layer by layer
* lesson 9, :mod:`helpers.generation`: from logits to text (greedy, temperature, top-k)
* lessons 4, 5, 8 and 9: :mod:`helpers.text` (the shipped text, the character tokenizer) and
  :mod:`helpers.training` (the course's one training loop)
* lesson 10 (capstone), :mod:`helpers.checklist`: ``audit(model)`` runs the checklist K1-K5;
  :mod:`helpers.zoo`, the models it is run on (imported on demand: ``from helpers import zoo``)

:mod:`helpers.widgets` holds one explorer per lesson, :mod:`helpers.checks` the exercise checks.
"""

from .attention import MultiHeadAttention, attention_weights, scaled_dot_product_attention
from .blocks import TransformerBlock, make_stack
from .checklist import AuditReport, audit
from .compare import compare_hidden_states
from .convert import from_huggingface, to_huggingface
from .diagnostics import gradient_norms, next_token_loss
from .feedforward import FeedForward, gelu, gelu_tanh, relu, silu, swiglu_hidden
from .generation import generate, generate_text, next_token_probs
from .model import GPT2_SMALL, LMConfig, TransformerLM, init_weights
from .normalization import LayerNorm, Residual, RMSNorm
from .params import count_parameters, parameter_breakdown
from .positional import (
    LearnedPositionalEmbedding,
    PositionOutOfRange,
    SinusoidalPositionalEncoding,
    alibi_bias,
    angle_rates,
    apply_rotary,
    rotation_matrix,
    sinusoidal_encoding,
    sinusoidal_encoding_at,
    wavelengths,
)
from .printing import fmt
from .text import CharTokenizer, load_text
from .training import Schedule, TrainingRun, train_lm

__version__ = "0.1.0"

__all__ = [
    "sinusoidal_encoding",
    "sinusoidal_encoding_at",
    "angle_rates",
    "wavelengths",
    "rotation_matrix",
    "apply_rotary",
    "alibi_bias",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "PositionOutOfRange",
    "attention_weights",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "LayerNorm",
    "RMSNorm",
    "Residual",
    "FeedForward",
    "relu",
    "gelu",
    "gelu_tanh",
    "silu",
    "swiglu_hidden",
    "TransformerBlock",
    "make_stack",
    "TransformerLM",
    "LMConfig",
    "GPT2_SMALL",
    "init_weights",
    "from_huggingface",
    "to_huggingface",
    "compare_hidden_states",
    "count_parameters",
    "parameter_breakdown",
    "gradient_norms",
    "next_token_loss",
    "next_token_probs",
    "generate",
    "generate_text",
    "fmt",
    "load_text",
    "CharTokenizer",
    "train_lm",
    "TrainingRun",
    "Schedule",
    "audit",
    "AuditReport",
]
