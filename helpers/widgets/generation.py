"""Lesson 9 explorer: a model writes. Temperature, top-k, a seed and the prompt; the generated
text and the next-token distribution after the prompt, the tokens top-k keeps shaded.

Each update generates :data:`N_NEW` characters with :func:`helpers.generation.generate_text`
(seeded: the same settings give the same text; ``context=max_len``, a sliding window of the
length the model was trained at) and redraws the bars of the :data:`N_BARS` most
likely next characters in place (``set_height``, ``set_color``, the tick labels): one figure for
the explorer's life, never one per update.
"""

from __future__ import annotations

import copy
import html

import ipywidgets as widgets
import torch

from ..generation import _check_model, generate, next_token_probs
from ..plots.generation import (
    char_label,
    describe_distribution,
    plot_next_token_distribution,
    style_bars,
    top_tokens,
)
from ._base import Explorer, new_figure, slider
from ._controls import FloatSlider

__all__ = ["generation_explorer", "default_model", "N_NEW", "N_BARS", "DEFAULT_PROMPT"]

N_NEW = 200  # characters generated per update
N_BARS = 20  # the most likely next characters shown
FIRST_CHUNK = 8  # characters written before the text is first shown (streaming)
CHUNK = 48  # characters written between two updates of the shown text
DEFAULT_PROMPT = "First Citizen:"


def default_model():
    """What is shown when no model is given: the course's longer run, the
    :class:`~helpers.checkpoint.Checkpoint` of :func:`helpers.checkpoint.load_checkpoint`
    (``helpers/data/lesson9_model.pt``: d_model 96, 3 layers, context 96, 2,000 steps; its
    ``model`` float64 in eval mode, its ``tokenizer``)."""
    from ..checkpoint import load_checkpoint

    return load_checkpoint()


def generation_explorer(model=None, tokenizer=None, prompt: str = DEFAULT_PROMPT) -> Explorer:
    """Lesson 9 (C9.2). Controls, in this order: ``temperature`` (0 = greedy, the argmax, up to
    2), ``top_k`` (0, or the vocabulary size, = off: every character can be drawn; k keeps the k
    most likely), ``seed``
    (of the ``torch.Generator`` that draws the characters) and ``prompt`` (a text box, applied
    on Enter or when it loses focus). Shows the prompt and :data:`N_NEW` generated characters,
    and the next-character distribution after the prompt, softmax(logits / T), as bars over the
    :data:`N_BARS` most likely characters, those top-k keeps in blue, the dropped ones grey.

    Each character is drawn from at most the last ``model.config.max_len`` characters (the
    length the model was trained at: ``generate_text(..., context=max_len)``, a sliding window),
    so the text stays where the model learned; the bars too are computed from the prompt's last
    ``max_len`` characters. The text is written by a float32 copy of ``model`` taken when the
    explorer is made (``explorer.writer``): the window recomputes up to ``max_len`` positions per
    character, and float32 keeps an update near a second (the shipped weights are float32, as
    trained; for the shipped run the copy wrote the same text as the float64 model in the
    tests). The bars come from ``model`` itself.

    ``model``: a trained :class:`~helpers.TransformerLM`; None loads the course's longer run
    (:func:`default_model`, :func:`helpers.checkpoint.load_checkpoint`: d_model 96, 3 layers,
    context 96, trained 2,000 steps on the training 90% of tiny-shakespeare) and, unless given, its
    tokenizer. ``tokenizer``: the :class:`~helpers.text.CharTokenizer` the model was trained
    with; None builds the one of ``load_text("tiny_shakespeare_full")`` (65 characters). A
    prompt the tokenizer cannot encode (or an empty one) is reported in the explorer, not
    raised.
    """
    from ..text import CharTokenizer, load_text

    if tokenizer is not None and not isinstance(tokenizer, CharTokenizer):
        raise TypeError(
            f"tokenizer must be a helpers.text.CharTokenizer or None, got "
            f"{type(tokenizer).__name__}"
        )
    shipped = default_model() if model is None else None
    if shipped is not None:
        model = shipped.model
        tokenizer = shipped.tokenizer if tokenizer is None else tokenizer
    elif tokenizer is None:
        tokenizer = CharTokenizer(load_text("tiny_shakespeare_full"))
    model = _check_model(model)
    context = model.config.max_len  # the length it was trained at
    writer = copy.deepcopy(model).to(torch.float32).eval()  # writes the text: float32 is faster
    vocab = model.config.vocab_size
    if tokenizer.vocab_size != vocab:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} characters but the model's vocab_size is "
            f"{vocab}: pass the tokenizer the model was trained with"
        )
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")

    controls = {
        "temperature": FloatSlider(
            value=1.0, min=0.0, max=2.0, step=0.05, description="temperature"
        ),
        "top_k": slider("top-k (0 = off)", 0, 0, vocab),
        "seed": slider("seed", 0, 0, 99),
        "prompt": widgets.Text(
            value=prompt,
            description="prompt",
            continuous_update=False,
            style={"description_width": "initial"},
        ),  # fmt: skip
    }
    fig, axes = new_figure(7.0, 2.3)
    ax = axes[0, 0]
    ax.tick_params(labelsize=8)
    ax.yaxis.label.set_size(8)
    labels = list(tokenizer.chars)
    zeros = torch.zeros(vocab, dtype=torch.float64)
    bars, _ = plot_next_token_distribution(
        zeros, torch.ones(vocab, dtype=torch.bool), labels, ax=ax, n=N_BARS
    )
    title = ax.set_title("", fontsize=9)
    state = {"text": "", "ids": None, "probs": None}
    logits_cache: dict[str, torch.Tensor] = {}
    note = (
        f"<i>The course's longer run (<code>helpers.checkpoint.load_checkpoint()</code>: "
        f"d_model {model.config.d_model}, {model.config.n_layers} layers, trained "
        f"{shipped.steps:,} steps at a context of {context} characters; each character is "
        f"written from the last {context}). Pass your own model, "
        f"<code>generation_explorer(model, tokenizer)</code>, to see what it writes.</i><br>"
        if shipped is not None
        else ""
    )

    def last_logits(text: str) -> torch.Tensor:
        if text not in logits_cache:
            logits_cache.clear()  # one prompt at a time
            ids = tokenizer.encode(text)[None, -context:]  # [1, <= max_len]: generate's window
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    logits_cache[text] = model(ids)[0, -1]  # [V]
            finally:
                model.train(was_training)
        return logits_cache[text]

    def update(temperature, top_k, seed, prompt):
        k = None if top_k in (0, vocab) else int(top_k)
        try:
            if not prompt:
                raise ValueError("the prompt is empty: type at least one character")
            try:
                tokenizer.encode(prompt)
            except ValueError as e:  # unknown characters: the tokenizer's message names them
                raise ValueError(f"prompt {prompt[:40]!r}: {e}") from None
            logits = last_logits(prompt)
        except ValueError as e:
            state["writing"] = None
            return f"{note}<span style='color:#b00'>{html.escape(str(e))}</span>"
        probs = next_token_probs(logits, temperature)  # [V] before top-k
        kept = next_token_probs(logits, temperature, k) > 0 if k else probs >= 0
        ids = top_tokens(probs, N_BARS)
        for bar, i in zip(bars, ids.tolist(), strict=True):
            bar.set_height(float(probs[i]))
        style_bars(bars, [bool(kept[i]) for i in ids.tolist()])
        ax.set_xticks(range(len(ids)), [char_label(labels[i]) for i in ids.tolist()])
        ax.set_ylim(0, max(float(probs[ids].max()), 1e-9) * 1.15)
        what = "greedy: all on the argmax" if temperature == 0 else f"T = {temperature:.2f}"
        kept_text = (
            "every character kept" if k is None else f"top-{k} kept (solid; dropped: hatched)"
        )
        title.set_text(f"next character after the prompt: {what}, {kept_text}")
        state.update(text=prompt, ids=ids, probs=probs, kept=kept, prompt=prompt)
        state["writing"] = (k, temperature, int(seed))
        return _shown(prompt, "")

    def _shown(prompt: str, new: str, busy: bool = True) -> str:
        return (
            f"{note}<pre style='white-space:pre-wrap;font-size:12px;margin:2px 0' "
            f"aria-busy='{str(busy).lower()}'>{html.escape(prompt)}<b>{html.escape(new)}</b></pre>"
        )

    def write(explorer, temperature, top_k, seed, prompt):
        """After the new bars are shown: write the text, shown as it grows (the first
        :data:`FIRST_CHUNK` characters at once, then :data:`CHUNK` at a time). The same generator
        carries on from chunk to chunk, so the text is the one ``generate_text`` writes in one
        call (the tests check it)."""
        if state.get("writing") is None:
            return
        k, temperature, seed = state["writing"]
        generator = torch.Generator().manual_seed(seed)
        ids = tokenizer.encode(prompt)[None]  # [1, n]
        written = 0
        while written < N_NEW:
            n = min(FIRST_CHUNK if written == 0 else CHUNK, N_NEW - written)
            ids = generate(writer, ids, n, temperature, k, generator, context)  # [1, n + ...]
            written += n
            new = tokenizer.decode(ids[0, -written:])
            explorer.info.value = _shown(prompt, new, busy=written < N_NEW)
        state["text"] = prompt + new

    def describe(temperature, top_k, seed, prompt):
        if state["probs"] is None or state.get("prompt") != prompt:
            return "No picture: the prompt cannot be encoded, so nothing was written."
        what = (
            " (greedy: all on the most likely)"
            if temperature == 0
            else f" at T = {temperature:.2f}"
        )
        return describe_distribution(ax, state["probs"], state["kept"], labels, state["ids"], what)

    explorer = Explorer(
        "Lesson 9: the model writes", controls, fig, update, describe=describe, after=write
    )
    explorer.state = state  # the last text, bars' ids and probabilities (tests read them)
    explorer.model, explorer.tokenizer, explorer.writer = model, tokenizer, writer
    fig.set_layout_engine("none")  # keep the first layout: an update only redraws
    return explorer
