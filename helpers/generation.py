"""Lesson 9 (C9.2): leaving the vector space for good, from logits to text.

The model gives one row of logits z [vocab_size] for the next token. A token is drawn from::

    p = softmax(z / T)                          T > 0, the temperature
    T -> 0:   p = one-hot(argmax z)             greedy decoding
    top-k:    z_i -> -inf unless z_i >= z_(k)   (z_(k) the k-th largest logit), then softmax

and appended to the sequence; the longer sequence goes back into the model for the next token
(autoregressive generation, Radford et al. 2018/2019; top-k: Fan et al. 2018).

* :func:`next_token_probs`: logits -> probabilities, in float64.
* :func:`generate`: the loop, on token ids; ``TransformerLM.generate`` calls it (the model
  class takes that method from :class:`GenerationMixin`, so this module needs nothing of
  :mod:`helpers.model` and the model's module imports this one, not the other way round).
* :func:`generate_text`: the same from a string prompt, through a tokenizer, back to a string.

How the model is run: the prompt goes through the model once and each new token after it only
needs its own row, because causal attention lets no position see a later one. The keys and
values of earlier positions are kept (a "KV cache", as in Hugging Face's ``generate``) instead of
being recomputed; :func:`_cached_logits` computes with the model's own modules and the tests check
that it equals ``model(tokens)[:, -1]`` for every positional scheme, norm and activation.
"""

from __future__ import annotations

import math
import numbers

import torch

from . import _validate as check
from .positional import alibi_slopes, apply_rotary
from .reproducible import one_thread as _one_thread

__all__ = ["next_token_probs", "generate", "generate_text", "context_length", "GenerationMixin"]


# --- checking the arguments ---------------------------------------------------------------------


def _temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(
            f"temperature must be a number >= 0 (0 means greedy, the argmax), got "
            f"{temperature!r} ({type(temperature).__name__})"
        )
    value = float(temperature)
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"temperature must be a finite number >= 0 (0 means greedy, the argmax), got {value}"
        )
    return value


def _top_k(top_k, vocab_size: int) -> int | None:
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise TypeError(
            f"top_k must be None (keep every token) or a whole number from 1 to vocab_size="
            f"{vocab_size}, got {top_k!r} ({type(top_k).__name__})"
        )
    if not 1 <= top_k <= vocab_size:
        raise ValueError(
            f"top_k must be None (keep every token) or a whole number from 1 to vocab_size="
            f"{vocab_size}, got {top_k}"
        )
    return int(top_k)


def _generator(generator) -> torch.Generator | None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            "generator must be None (torch's global random state) or a torch.Generator, for "
            f"example torch.Generator().manual_seed(0); got {type(generator).__name__}"
        )
    return generator


# --- logits -> probabilities ----------------------------------------------------------------------


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None):
    """Lesson 9 (C9.2). The probabilities of the next token, ``softmax(logits / T)``, in float64.

    ``logits`` [..., vocab_size] (any floating dtype; computed in float64 so that the sampled
    tokens do not depend on the CPU's kernels). ``temperature`` T >= 0: T = 1 is the model's own
    distribution, T < 1 sharpens it, T > 1 flattens it, and T = 0 is greedy: a one-hot vector at
    the argmax (on a tie, the lowest id, as ``torch.argmax``). ``top_k`` (None: every token) keeps
    the tokens whose logit is at least the k-th largest, sets the others' probability to 0 and
    renormalizes the rest; tokens tied with the k-th largest are all kept (so more than k tokens
    survive a tie, as in Hugging Face's ``TopKLogitsWarper``). Returns a float64 tensor of the
    shape of ``logits`` whose last axis sums to 1.
    """
    check.tensor("logits", logits, layout="[..., vocab_size]")
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(
            f"logits must have a last axis of vocab_size >= 1 entries [..., vocab_size], got "
            f"shape {list(logits.shape)}"
        )
    if not logits.is_floating_point():
        raise TypeError(f"logits must hold floating-point numbers, got dtype {logits.dtype}")
    temperature = _temperature(temperature)
    top_k = _top_k(top_k, logits.shape[-1])
    z = logits.detach().to(torch.float64)  # [..., V]
    if torch.isnan(z).any() or (z == float("inf")).any():
        raise ValueError("logits must not contain NaN or +inf")
    if not torch.isfinite(z.amax(dim=-1)).all():
        raise ValueError("logits must have at least one finite entry in every row")
    if temperature == 0:  # the limit T -> 0 of softmax(z / T): all the mass on the argmax
        best = z.argmax(dim=-1, keepdim=True)  # [..., 1]: the first (lowest id) on a tie
        return torch.zeros_like(z).scatter_(-1, best, 1.0)
    if top_k is not None and top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # [..., 1]: the k-th largest logit
        z = z.masked_fill(z < kth, float("-inf"))  # the rest can never be drawn
    return torch.softmax(z / temperature, dim=-1)  # [..., V]


# --- running the model ----------------------------------------------------------------------------


def context_length(model) -> int | None:
    """How many tokens :func:`generate` feeds the model at most: ``max_len`` for a learned
    position table (it has no row beyond), None (no limit: the whole sequence) for the other
    schemes."""
    config = model.config
    return config.max_len if config.positional == "learned" else None


def _check_model(model):
    if not isinstance(model, GenerationMixin):  # only the course's TransformerLM is one
        raise TypeError(
            f"model must be a helpers.TransformerLM (the course's language model), got "
            f"{type(model).__name__}"
        )
    return model


def _attend_cached(
    mha, x: torch.Tensor, cache: list, offset: int, last_only: bool = False
) -> torch.Tensor:
    """The attention of ``mha`` for the rows x [B, m, d] at positions offset..offset+m-1, given
    the keys and values of positions 0..offset-1 in ``cache`` ([K, V] or empty; extended here).
    ``last_only``: the output of the last row only [B, 1, d] (every row still gives its key and
    value)."""
    b, m, d = x.shape
    q = mha._split(mha.q_proj(x[:, -1:] if last_only else x))  # [B, h, m or 1, d_head]
    k = mha._split(mha.k_proj(x))  # [B, h, m, d_head]
    v = mha._split(mha.v_proj(x))  # [B, h, m, d_head]
    positions = torch.arange(offset, offset + m)  # [m]
    if mha.positional == "rotary":
        k = apply_rotary(k, positions, base=mha.rotary_base)
    if last_only:
        positions, m = positions[-1:], 1  # the queries: the last row only
    if mha.positional == "rotary":
        q = apply_rotary(q, positions, base=mha.rotary_base)
    if cache:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # [B, h, t, dh]
    cache[:] = [k, v]
    t = k.shape[2]  # keys 0..t-1
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, h, m, t]
    keys = torch.arange(t, dtype=torch.float64)
    if mha.positional == "alibi":
        distance = (positions.to(torch.float64)[:, None] - keys[None, :]).abs()  # [m, t]
        bias = -alibi_slopes(mha.n_heads)[:, None, None] * distance[None]  # [h, m, t]
        scores = scores + bias.to(scores.dtype)
    if mha.causal:
        future = keys[None, :] > positions.to(torch.float64)[:, None]  # [m, t]: key after query
        scores = scores.masked_fill(future, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # [B, h, m, d_head]
    return mha.out_proj(out.transpose(1, 2).reshape(b, m, d))  # [B, m, d_model]


def _residual(residual, x: torch.Tensor, sublayer, last_only: bool = False) -> torch.Tensor:
    """x [B, m, d] through one residual sublayer; ``last_only``: ``sublayer`` returns the last
    row only, and so does this [B, 1, d]."""
    skip = x[:, -1:] if last_only else x
    if residual.norm_placement == "pre":
        return skip + sublayer(residual.norm(x))
    if residual.norm_placement == "post":
        return residual.norm(skip + sublayer(x))
    return skip + sublayer(x)


def _cached_logits(model, tokens: torch.Tensor, caches: list, offset: int) -> torch.Tensor:
    """The logits of the last of ``tokens`` [B, m] (at positions offset..offset+m-1), the
    earlier positions' keys and values being in ``caches`` (one list per block): equal to
    ``model(all tokens so far)[:, -1]`` (tested), at the cost of m positions instead of all.
    The last block computes its last row only: no later block reads the others."""
    h = model.token_embedding(tokens)  # [B, m, d]
    if model.scale_embeddings:
        h = h * math.sqrt(model.config.d_model)
    if model.config.positional in ("sinusoidal", "learned"):
        h = model.position(h, offset=offset)  # [B, m, d]: rows offset..offset+m-1 of the table
    last = len(model.blocks) - 1
    for i, (block, cache) in enumerate(zip(model.blocks, caches, strict=True)):
        mha, only = block.attention, i == last
        h = _residual(
            block.attn, h, lambda x, m=mha, c=cache, o=only: _attend_cached(m, x, c, offset, o),
            last_only=only,
        )  # fmt: skip
        h = _residual(block.ffn, h, block.feedforward)  # position by position
    return model.lm_head(model.final_norm(h[:, -1:]))[:, -1]  # [B, V]


def generate(
    model,
    tokens: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    context: int | None = None,
) -> torch.Tensor:
    """Lesson 9 (C9.2). Continue ``tokens`` [batch, n] (integer ids, n >= 1) by
    ``max_new_tokens`` tokens; returns the ids [batch, n + max_new_tokens] (torch.long), the
    prompt first (``max_new_tokens=0`` returns the prompt).

    Each step computes the logits of the last position, turns them into probabilities with
    :func:`next_token_probs` (float64; ``temperature`` 0 is greedy, the argmax, lowest id on a
    tie; ``top_k`` keeps the k largest logits, ties with the k-th all kept) and draws the next
    token with ``torch.multinomial(probs, 1, generator=generator)`` (for T = 0 the one-hot makes
    the draw the argmax; no random number is drawn then). A seeded ``torch.Generator`` makes the
    text reproducible; None uses torch's global random state.

    What the model sees: with a learned position table (``positional="learned"``) the last
    ``max_len`` tokens (the table has no row beyond; a prompt longer than ``max_len`` is refused).
    With the other schemes (sinusoidal, rotary, ALiBi, none) nothing limits the length and the
    whole sequence is fed, also past the length the model was trained at (C4.7 and C9.3 measure
    what that costs). ``context`` (a whole number >= 1) feeds at most the last ``context``
    tokens instead, a sliding window recomputed at every step once the text is longer: give the
    length the model was trained at to keep it where it learned (for a learned table at most
    ``max_len``; a prompt longer than ``context`` is cut to its last ``context`` tokens). The
    model runs in eval mode under ``torch.no_grad()`` on one CPU thread, and its mode and torch's
    thread count are restored afterwards.
    """
    model = _check_model(model)
    vocab_size = model.config.vocab_size
    check.token_ids("tokens", tokens, vocab_size)
    if tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(
            "tokens must hold a prompt of at least one token in each of at least one row "
            f"[batch >= 1, n >= 1], got shape {list(tokens.shape)}"
        )
    max_new_tokens = check.positive_int("max_new_tokens", max_new_tokens, minimum=0)
    temperature = _temperature(temperature)
    top_k = _top_k(top_k, vocab_size)
    generator = _generator(generator)
    limit = context_length(model)
    n = tokens.shape[1]
    if context is not None:
        context = check.positive_int("context", context)
        if limit is not None and context > limit:
            raise ValueError(
                f"context must be at most this model's learned position table's max_len="
                f"{limit}, got {context}"
            )
        limit = context
    elif limit is not None and n > limit:
        raise ValueError(
            f"tokens has {n} positions but this model's learned position table has max_len="
            f"{limit} rows: give a prompt of at most {limit} tokens (for example tokens[:, "
            f"-{limit}:])"
        )
    out = tokens.to(torch.long)
    if max_new_tokens == 0:
        return out.clone()
    was_training = model.training
    model.eval()
    try:  # one thread: faster for these small products, and the same sums on any machine
        with torch.no_grad(), _one_thread():
            caches = [[] for _ in model.blocks]
            start = 0 if limit is None else max(0, n - limit)  # a prompt cut to the window
            logits = _cached_logits(model, out[:, start:], caches, 0)  # the prompt, once
            new = []
            for step in range(max_new_tokens):
                probs = next_token_probs(logits, temperature, top_k)  # [B, V] float64
                if temperature == 0:
                    token = probs.argmax(dim=-1, keepdim=True)  # the one-hot's only 1
                else:
                    token = torch.multinomial(probs, 1, generator=generator)  # [B, 1]
                new.append(token)
                if step == max_new_tokens - 1:
                    break
                length = n - start + len(new)  # what the cache holds, plus the new token
                if start == 0 and (limit is None or length <= limit):
                    logits = _cached_logits(model, token, caches, length - 1)
                else:  # the window of the last `limit` tokens, recomputed (as model(window))
                    window = torch.cat([out, *new], dim=1)[:, -limit:]
                    logits = _cached_logits(model, window, [[] for _ in model.blocks], 0)
            return torch.cat([out, *new], dim=1)
    finally:
        model.train(was_training)


class GenerationMixin:
    """Lesson 9 (C9.2). What :class:`helpers.TransformerLM` takes from this module: its
    ``generate`` method, which is :func:`generate` on the model itself."""

    def generate(
        self,
        tokens: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        context: int | None = None,
    ) -> torch.Tensor:
        """Lesson 9 (C9.2). tokens [batch, n] -> ids [batch, n + max_new_tokens]: each new token
        drawn from softmax(logits / temperature) of the last position (temperature 0: greedy,
        the argmax; ``top_k``: only the k largest logits; ``generator``: a seeded
        ``torch.Generator`` for reproducible text; ``context``: feed at most the last ``context``
        tokens). See :func:`helpers.generation.generate`."""
        return generate(self, tokens, max_new_tokens, temperature, top_k, generator, context)


def generate_text(
    model,
    tokenizer,
    prompt: str,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    context: int | None = None,
) -> str:
    """Lesson 9 (C9.2). ``prompt`` followed by ``max_new_tokens`` generated characters (a str):
    the prompt is encoded with ``tokenizer`` (a :class:`~helpers.text.CharTokenizer`), the
    ids continued by :func:`generate` (``context`` as there) and decoded. A prompt with characters the tokenizer does
    not know raises a ValueError that names them."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if not prompt:
        raise ValueError("prompt must not be empty: the model needs at least one character")
    for attr in ("encode", "decode", "vocab_size"):
        if not hasattr(tokenizer, attr):
            raise TypeError(
                "tokenizer must be a CharTokenizer (encode, decode, vocab_size), got "
                f"{type(tokenizer).__name__}"
            )
    model = _check_model(model)
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} characters but the model's vocab_size is "
            f"{model.config.vocab_size}: use the tokenizer the model was trained with"
        )
    try:
        ids = tokenizer.encode(prompt)  # [n]
    except ValueError as e:  # unknown characters: the tokenizer's message names them
        raise ValueError(f"prompt {prompt[:40]!r}: {e}") from None
    out = generate(model, ids[None], max_new_tokens, temperature, top_k, generator, context)
    return tokenizer.decode(out[0])
