"""Lesson 9, generation (C9.2): next_token_probs, generate (against Hugging Face's GPT-2 and its
TopKLogitsWarper), generate_text, the explorer and the exercise checks."""

import itertools
import math
import os
import warnings

import matplotlib.pyplot as plt
import pytest
import torch
from _models import explorer_model  # tests/ is on sys.path (no __init__.py)

from helpers import TransformerLM, generate, generate_text, next_token_probs
from helpers.generation import _cached_logits
from helpers.plots.generation import char_label
from helpers.text import CharTokenizer

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
SMALL = dict(vocab_size=13, d_model=16, n_layers=2, n_heads=2, max_len=12)


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    return TransformerLM(**{**SMALL, **overrides}).double()


def _prompt(batch=2, n=4, vocab=13, seed=1):
    return torch.randint(0, vocab, (batch, n), generator=torch.Generator().manual_seed(seed))


# --- next_token_probs ----------------------------------------------------------------------------


def test_C9_2_temperature_is_softmax_of_logits_over_T():
    logits = torch.randn(3, 7, generator=torch.Generator().manual_seed(0))
    for T in (0.25, 0.7, 1.0, 2.0, 10.0):
        probs = next_token_probs(logits, temperature=T)
        assert probs.dtype == torch.float64
        want = torch.softmax(logits.double() / T, dim=-1)
        torch.testing.assert_close(probs, want, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(probs.sum(-1), torch.ones(3, dtype=torch.float64))
    # a lower temperature puts more mass on the most likely token, a higher one less
    top = [float(next_token_probs(logits[0], T).max()) for T in (0.25, 1.0, 4.0)]
    assert top[0] > top[1] > top[2]


def test_C9_2_temperature_zero_is_argmax_with_the_lowest_id_on_a_tie():
    logits = torch.tensor([[0.5, 2.0, -1.0, 2.0], [3.0, 1.0, 3.0, 0.0]])
    probs = next_token_probs(logits, temperature=0)
    assert probs.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]
    assert torch.equal(probs.argmax(-1), torch.argmax(logits, dim=-1))
    # the limit T -> 0 of softmax(z / T), where the argmax is unique
    z = torch.tensor([0.1, 0.9, 0.3], dtype=torch.float64)
    torch.testing.assert_close(next_token_probs(z, 1e-3), next_token_probs(z, 0))


def test_C9_2_top_k_equals_huggingface_top_k_warper():
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers.generation.logits_process import TopKLogitsWarper

    g = torch.Generator().manual_seed(3)
    for k in (1, 2, 5, 19, 20):
        logits = torch.randn(4, 20, generator=g, dtype=torch.float64)
        warped = TopKLogitsWarper(top_k=k)(None, logits.clone())
        want = torch.softmax(warped, dim=-1)
        got = next_token_probs(logits, top_k=k)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
        assert ((got > 0).sum(-1) == k).all()  # random logits: no ties


def test_C9_2_top_k_keeps_every_logit_tied_with_the_k_th():
    logits = torch.tensor([1.0, 3.0, 2.0, 2.0, 0.0])
    probs = next_token_probs(logits, top_k=2)
    assert (probs > 0).tolist() == [False, True, True, True, False]
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers.generation.logits_process import TopKLogitsWarper

    warped = TopKLogitsWarper(top_k=2)(None, logits[None].double().clone())
    torch.testing.assert_close(probs, torch.softmax(warped, -1)[0])


def test_C9_2_top_k_then_temperature():
    logits = torch.randn(2, 9, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    kth = logits.topk(3, dim=-1).values[:, -1:]
    want = torch.softmax(logits.masked_fill(logits < kth, -math.inf) / 0.5, dim=-1)
    torch.testing.assert_close(next_token_probs(logits, 0.5, top_k=3), want)


# --- generate ------------------------------------------------------------------------------------


def test_C9_2_generate_keeps_the_prompt_and_adds_tokens():
    model = _model()
    prompt = _prompt()
    out = generate(model, prompt, 5, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 9) and out.dtype == torch.long
    assert torch.equal(out[:, :4], prompt)
    assert ((0 <= out) & (out < SMALL["vocab_size"])).all()
    assert torch.equal(generate(model, prompt, 0), prompt)
    method = model.generate(prompt, 5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(method, out)


def _greedy_by_full_forward(model, tokens, n, window=None):
    """The loop of C9.2 written plainly: the whole sequence (or its last ``window``) each step."""
    with torch.no_grad():
        for _ in range(n):
            context = tokens if window is None else tokens[:, -window:]
            nxt = model(context)[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
    return tokens


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rotary", "alibi", "none"])
def test_C9_2_greedy_is_the_argmax_of_the_full_forward_at_every_step(positional):
    model = _model(positional=positional).eval()
    prompt = _prompt(n=3)
    steps = 14  # past max_len = 12: a learned table then sees only the last 12 tokens
    window = 12 if positional == "learned" else None
    want = _greedy_by_full_forward(model, prompt, steps, window)
    assert torch.equal(generate(model, prompt, steps, temperature=0), want)


@pytest.mark.parametrize(
    ("positional", "norm", "norm_type", "activation"),
    list(
        itertools.product(
            ["sinusoidal", "learned", "rotary", "alibi", "none"],
            ["pre", "post"],
            ["layer", "rms"],
            ["relu", "swiglu"],
        )
    ),
)
def test_C9_2_cached_steps_equal_the_full_forward(positional, norm, norm_type, activation):
    model = _model(positional=positional, norm=norm, norm_type=norm_type, activation=activation)
    model.eval()
    tokens = _prompt(n=12, seed=2)
    caches = [[] for _ in model.blocks]
    with torch.no_grad():
        got = [_cached_logits(model, tokens[:, :5], caches, 0)]
        got += [_cached_logits(model, tokens[:, t : t + 1], caches, t) for t in range(5, 12)]
        want = model(tokens)[:, 4:]
    torch.testing.assert_close(torch.stack(got, dim=1), want, rtol=1e-10, atol=1e-12)


def _to_hf_gpt2(model: TransformerLM):
    """A Hugging Face GPT2LMHeadModel with the course model's weights (learned positions,
    pre-norm, exact GELU, tied, LayerNorm eps 1e-5, biases everywhere: GPT-2's design)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    hf = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.d_model,
            n_layer=c.n_layers, n_head=c.n_heads, n_inner=model.blocks[0].feedforward.d_ff,
            activation_function="gelu", layer_norm_epsilon=1e-5, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
        )
    ).double()  # fmt: skip
    hf.config._attn_implementation = "eager"
    with torch.no_grad():
        t = hf.transformer
        t.wte.weight.copy_(model.token_embedding.weight)
        t.wpe.weight.copy_(model.position.table.weight)
        for layer, block in zip(t.h, model.blocks, strict=True):
            mha, ffn = block.attention, block.feedforward
            layer.ln_1.weight.copy_(block.attn.norm.weight)
            layer.ln_1.bias.copy_(block.attn.norm.bias)
            qkv = [mha.q_proj, mha.k_proj, mha.v_proj]  # Conv1D stores [in, out]
            layer.attn.c_attn.weight.copy_(torch.cat([p.weight.T for p in qkv], dim=1))
            layer.attn.c_attn.bias.copy_(torch.cat([p.bias for p in qkv]))
            layer.attn.c_proj.weight.copy_(mha.out_proj.weight.T)
            layer.attn.c_proj.bias.copy_(mha.out_proj.bias)
            layer.ln_2.weight.copy_(block.ffn.norm.weight)
            layer.ln_2.bias.copy_(block.ffn.norm.bias)
            layer.mlp.c_fc.weight.copy_(ffn.w1.weight.T)
            layer.mlp.c_fc.bias.copy_(ffn.w1.bias)
            layer.mlp.c_proj.weight.copy_(ffn.w2.weight.T)
            layer.mlp.c_proj.bias.copy_(ffn.w2.bias)
        t.ln_f.weight.copy_(model.final_norm.weight)
        t.ln_f.bias.copy_(model.final_norm.bias)
    assert hf.lm_head.weight.data_ptr() == t.wte.weight.data_ptr()
    return hf.eval()


@pytest.mark.slow  # importing transformers' generation takes several seconds
def test_C9_2_greedy_equals_huggingface_gpt2_generate():
    config = dict(vocab_size=29, d_model=32, n_layers=2, n_heads=4, max_len=24)
    torch.manual_seed(4)
    model = TransformerLM(**config, positional="learned").double()
    with torch.no_grad():  # non-trivial norms and biases, so that a mapping slip shows
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    hf = _to_hf_gpt2(model)
    prompt = _prompt(batch=3, n=5, vocab=29, seed=6)
    with torch.no_grad():
        torch.testing.assert_close(hf(prompt).logits, model(prompt), rtol=1e-10, atol=1e-10)
        want = hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=19, do_sample=False,
            pad_token_id=0, eos_token_id=None,
        )  # fmt: skip
    assert want.shape == (3, 24)
    assert torch.equal(generate(model, prompt, 19, temperature=0), want)


def test_C9_2_seeded_sampling_is_reproducible():
    model = _model()
    prompt = _prompt()
    a = generate(
        model, prompt, 20, temperature=1.3, top_k=5, generator=torch.Generator().manual_seed(7)
    )
    b = generate(
        model, prompt, 20, temperature=1.3, top_k=5, generator=torch.Generator().manual_seed(7)
    )
    c = generate(
        model, prompt, 20, temperature=1.3, top_k=5, generator=torch.Generator().manual_seed(8)
    )
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(0)
    d = generate(model, prompt, 20)
    torch.manual_seed(0)
    assert torch.equal(d, generate(model, prompt, 20))  # None: the global random state


def _chi2_999(dof: int) -> float:
    """The 0.999 quantile of chi-square with ``dof`` degrees of freedom (Wilson-Hilferty)."""
    z = 3.090232
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.slow
@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, None), (0.6, None), (2.0, 4)])
def test_C9_2_sampling_frequencies_match_the_probabilities(temperature, top_k):
    model = _model(seed=3)
    draws = 20_000
    prompt = _prompt(batch=1, n=4).expand(draws, 4)  # the same prompt in every row
    out = generate(model, prompt, 1, temperature, top_k, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        probs = next_token_probs(model.eval()(prompt[:1])[0, -1], temperature, top_k)
    counts = torch.bincount(out[:, -1], minlength=SMALL["vocab_size"]).double()
    kept = probs > 0
    assert counts[~kept].sum() == 0  # nothing outside the top k is ever drawn
    expected = draws * probs[kept]
    chi2 = float(((counts[kept] - expected) ** 2 / expected).sum())
    assert chi2 < _chi2_999(int(kept.sum()) - 1), chi2


def test_C9_2_generate_restores_the_mode_and_records_no_graph():
    model = _model().train()
    out = generate(model, _prompt(), 3)
    assert model.training and not out.requires_grad
    model.eval()
    generate(model, _prompt(), 3)
    assert not model.training
    threads = torch.get_num_threads()
    generate(model, _prompt(), 3)
    assert torch.get_num_threads() == threads


def test_C9_2_generate_does_not_touch_the_global_random_state_with_a_generator():
    model = _model()
    torch.manual_seed(11)
    before = torch.get_rng_state()
    generate(model, _prompt(), 5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(torch.get_rng_state(), before)


_BAD = [
    (dict(tokens=torch.zeros(1, 0, dtype=torch.long)), ValueError, "at least one token"),
    (dict(tokens=torch.zeros(0, 3, dtype=torch.long)), ValueError, "at least one token"),
    (dict(max_new_tokens=-1), ValueError, "max_new_tokens must be a whole number >= 0"),
    (dict(max_new_tokens=2.0), TypeError, "max_new_tokens must be a whole number"),
    (dict(temperature=-0.5), ValueError, "temperature must be a finite number >= 0"),
    (dict(temperature=float("nan")), ValueError, "temperature must be a finite number >= 0"),
    (dict(temperature=float("inf")), ValueError, "temperature must be a finite number >= 0"),
    (dict(temperature="hot"), TypeError, "temperature must be a number"),
    (dict(top_k=0), ValueError, "top_k must be None .* from 1 to vocab_size=13"),
    (dict(top_k=14), ValueError, "top_k must be None .* from 1 to vocab_size=13, got 14"),
    (dict(top_k=2.5), TypeError, "top_k must be None"),
    (dict(tokens=torch.tensor([[1, 13]])), ValueError, r"ids in 0\.\.12 .*from 1 to 13"),
    (dict(tokens=torch.tensor([[-1, 2]])), ValueError, r"ids in 0\.\.12"),
    (dict(tokens=torch.tensor([[1.0, 2.0]])), TypeError, "integer token ids"),
    (dict(tokens=torch.tensor([1, 2])), ValueError, r"2 dimensions \[batch, n\]"),
    (dict(tokens=[[1, 2]]), TypeError, "tokens must be a torch.Tensor"),
    (dict(generator=0), TypeError, "generator must be None .* or a torch.Generator"),
]


@pytest.mark.parametrize(("change", "error", "match"), _BAD)
def test_C9_2_generate_bad_arguments(change, error, match):
    args = dict(tokens=_prompt(), max_new_tokens=3, temperature=1.0, top_k=None, generator=None)
    args.update(change)
    with pytest.raises(error, match=match):
        generate(_model(), **args)


def test_C9_2_prompt_longer_than_a_learned_table_is_refused():
    model = _model(positional="learned")
    with pytest.raises(ValueError, match="max_len=12 rows: give a prompt of at most 12 tokens"):
        generate(model, _prompt(n=13), 1)
    generate(_model(positional="sinusoidal"), _prompt(n=13), 1)  # no table: any length


def test_generate_needs_the_course_model():
    with pytest.raises(TypeError, match="model must be a helpers.TransformerLM"):
        generate(torch.nn.Linear(2, 2), _prompt(), 1)


def test_next_token_probs_bad_arguments():
    with pytest.raises(TypeError, match="logits must be a torch.Tensor"):
        next_token_probs([1.0, 2.0])
    with pytest.raises(TypeError, match="floating-point"):
        next_token_probs(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="last axis"):
        next_token_probs(torch.tensor(1.0))
    with pytest.raises(ValueError, match="NaN"):
        next_token_probs(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="top_k .* vocab_size=2, got 3"):
        next_token_probs(torch.tensor([1.0, 2.0]), top_k=3)
    with pytest.raises(ValueError, match="temperature"):
        next_token_probs(torch.tensor([1.0, 2.0]), temperature=-1)


# --- generate_text -------------------------------------------------------------------------------


def _text_model():
    tokenizer = CharTokenizer("abcdefgh ijklm")
    return _model(vocab_size=tokenizer.vocab_size), tokenizer


def test_C9_2_generate_text_returns_the_prompt_and_the_new_characters():
    model, tokenizer = _text_model()
    text = generate_text(model, tokenizer, "abc", 10, generator=torch.Generator().manual_seed(0))
    assert isinstance(text, str) and len(text) == 13 and text.startswith("abc")
    again = generate_text(model, tokenizer, "abc", 10, generator=torch.Generator().manual_seed(0))
    assert text == again
    greedy = generate_text(model, tokenizer, "abc", 10, temperature=0)
    ids = generate(model, tokenizer.encode("abc")[None], 10, temperature=0)
    assert greedy == tokenizer.decode(ids[0])


def test_C9_2_generate_text_names_unknown_characters():
    model, tokenizer = _text_model()
    with pytest.raises(ValueError) as info:
        generate_text(model, tokenizer, "abZ!", 5)
    message = str(info.value)
    assert "'!'" in message and "'Z'" in message and "abZ!" in message
    try:
        tokenizer.encode("abZ!")
    except ValueError as e:
        assert str(e) in message  # the tokenizer's own message, intact


def test_generate_text_bad_arguments():
    model, tokenizer = _text_model()
    with pytest.raises(ValueError, match="prompt must not be empty"):
        generate_text(model, tokenizer, "", 3)
    with pytest.raises(TypeError, match="prompt must be a str"):
        generate_text(model, tokenizer, 3, 3)
    with pytest.raises(TypeError, match="tokenizer must be a CharTokenizer"):
        generate_text(model, "abc", "a", 3)
    with pytest.raises(ValueError, match="tokenizer has 14 characters but the model's vocab"):
        generate_text(_model(), tokenizer, "a", 3)


def test_no_figure_is_left_open_by_generation():
    before = plt.get_fignums()
    generate(_model(), _prompt(), 3)
    assert plt.get_fignums() == before


# --- the explorer --------------------------------------------------------------------------------


def _explorer_model():
    return explorer_model()


def _bars(explorer):
    ax = explorer.figure.axes[0]
    return ax, ax.patches


def test_C9_2_explorer_shows_the_text_and_the_distribution_and_updates_in_place():
    from helpers.plots.generation import DROPPED, KEPT
    from helpers.widgets import generation_explorer
    from helpers.widgets.generation import N_BARS, N_NEW

    model, tokenizer = _explorer_model()
    before = plt.get_fignums()
    explorer = generation_explorer(model, tokenizer, prompt="abc")
    try:
        assert list(explorer.controls)[0] == "temperature"  # the browser test moves the first
        assert explorer.controls["prompt"].continuous_update is False
        assert "untrained" not in explorer.info.value
        ax, bars = _bars(explorer)
        bars = list(bars)
        n_bars = min(N_BARS, tokenizer.vocab_size)
        assert len(bars) == n_bars
        text = explorer.state["text"]
        assert len(text) == 3 + N_NEW and text.startswith("abc")
        same = generate_text(
            model, tokenizer, "abc", N_NEW, generator=torch.Generator().manual_seed(0), context=16
        )
        assert text == same and text[3:] in explorer.info.value
        with torch.no_grad():
            logits = model(tokenizer.encode("abc")[None])[0, -1]
        for T in (1.0, 0.5, 1.7):
            explorer.controls["temperature"].value = T
            probs = next_token_probs(logits, T)
            ids = explorer.state["ids"]
            assert [b.get_height() for b in bars] == pytest.approx(probs[ids].tolist())
            assert sorted(probs.tolist(), reverse=True)[:n_bars] == pytest.approx(
                [b.get_height() for b in bars]
            )
        heights = [b.get_height() for b in bars]
        explorer.controls["top_k"].value = 4
        assert [b.get_height() for b in bars] == heights  # top-k shades, the heights stay
        colors = [b.get_facecolor() for b in bars]
        from matplotlib.colors import to_rgba

        assert colors.count(to_rgba(KEPT)) == 4 and colors.count(to_rgba(DROPPED)) == n_bars - 4
        kept_ids = set(explorer.state["ids"][:4].tolist())
        new = [tokenizer.stoi[c] for c in explorer.state["text"][3:]]
        assert set(new) <= set(range(tokenizer.vocab_size))
        first = explorer.state["text"][3]
        assert tokenizer.stoi[first] in kept_ids  # the first new character is one top-k kept
        explorer.controls["top_k"].value = 0
        assert colors != [b.get_facecolor() for b in bars]
        assert all(b.get_facecolor() == to_rgba(KEPT) for b in bars)  # 0 = off: all kept
        explorer.controls["temperature"].value = 0.0
        assert sorted(b.get_height() for b in bars)[-1] == 1.0  # greedy: one-hot
        greedy = generate_text(model, tokenizer, "abc", N_NEW, temperature=0, context=16)
        assert explorer.state["text"] == greedy
        old = explorer.state["text"]
        explorer.controls["temperature"].value = 1.0
        explorer.controls["seed"].value = 5
        assert explorer.state["text"] != old
        explorer.controls["prompt"].value = "pon"
        assert explorer.state["text"].startswith("pon")
        assert all(a is b for a, b in zip(_bars(explorer)[1], bars, strict=True))  # same bars
        shown = [t.get_text() for t in ax.get_xticklabels()]
        assert shown == [char_label(tokenizer.chars[i]) for i in explorer.state["ids"].tolist()]
        assert plt.get_fignums() == before
    finally:
        explorer.close()


def test_C9_2_explorer_reports_bad_prompts_in_place():
    from helpers.widgets import generation_explorer

    model, tokenizer = _explorer_model()
    explorer = generation_explorer(model, tokenizer, prompt="abc")
    try:
        heights = [b.get_height() for b in _bars(explorer)[1]]
        explorer.controls["prompt"].value = "abZ"
        assert "&#x27;Z&#x27;" in explorer.info.value and "no id for" in explorer.info.value
        assert [b.get_height() for b in _bars(explorer)[1]] == heights  # the last good one stays
        explorer.controls["prompt"].value = ""
        assert "prompt is empty" in explorer.info.value
        explorer.controls["prompt"].value = "ab"
        assert "<pre" in explorer.info.value
    finally:
        explorer.close()


@pytest.mark.slow  # 23 updates of 200 characters each
def test_explorer_keeps_one_figure_over_many_updates():
    import gc

    from matplotlib.figure import Figure

    from helpers.widgets import generation_explorer

    model, tokenizer = _explorer_model()
    explorer = generation_explorer(model, tokenizer, prompt="ab")
    try:
        gc.collect()

        def count():
            with warnings.catch_warnings():  # isinstance wakes torch's deprecated aliases
                warnings.simplefilter("ignore")
                return sum(isinstance(o, Figure) for o in gc.get_objects())

        figures = count()
        for i in range(12):
            explorer.controls["seed"].value = i
            explorer.controls["top_k"].value = i % 5
        gc.collect()
        assert count() == figures
        assert plt.get_fignums() == []
        assert explorer.n_updates == 1 + 11 + 11  # seed 0 and top_k 0 at i = 0 change nothing
    finally:
        explorer.close()


def test_C9_2_explorer_writes_from_the_last_max_len_characters():
    # a sinusoidal model is fed at most max_len characters (the length it was trained at), the
    # sliding window of generate(context=max_len); without it the text would differ
    from helpers.widgets import generation_explorer
    from helpers.widgets.generation import N_NEW

    model, tokenizer = _explorer_model()  # sinusoidal, max_len 16
    prompt = "abcdefghij klmnop:\nabc"  # 22 characters: longer than the window
    explorer = generation_explorer(model, tokenizer, prompt=prompt)
    try:
        g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
        windowed = generate_text(model, tokenizer, prompt, N_NEW, generator=g(), context=16)
        whole = generate_text(model, tokenizer, prompt, N_NEW, generator=g())
        assert explorer.state["text"] == windowed and windowed != whole
        with torch.no_grad():  # the bars: the prompt's last 16 characters
            logits = model(tokenizer.encode(prompt)[None, -16:])[0, -1]
        heights = sorted((b.get_height() for b in _bars(explorer)[1]), reverse=True)
        assert heights == pytest.approx(
            sorted(next_token_probs(logits).tolist(), reverse=True)[:20]
        )
    finally:
        explorer.close()


@pytest.mark.slow  # loads the shipped run and writes 200 characters with it (about 2 s)
def test_explorer_default_is_the_shipped_longer_run_and_says_so():
    from helpers.checkpoint import load_checkpoint
    from helpers.text import load_text
    from helpers.widgets import generation_explorer
    from helpers.widgets.generation import DEFAULT_PROMPT, N_NEW

    explorer = generation_explorer()
    try:
        ck = load_checkpoint()
        assert explorer.tokenizer.vocab_size == len(set(load_text("tiny_shakespeare_full")))
        assert explorer.tokenizer.chars == ck.tokenizer.chars
        config = explorer.model.config
        assert (config.d_model, config.n_layers, config.max_len) == (96, 3, 96)
        assert not explorer.model.training
        writer = explorer.writer  # the float32 copy that writes: the weights as trained
        for name, w in writer.state_dict().items():
            assert w.dtype == torch.float32 and torch.equal(w, ck.model.state_dict()[name].float())
        for name, w in explorer.model.state_dict().items():  # the shipped weights, float64
            assert w.dtype == torch.float64 and torch.equal(w, ck.model.state_dict()[name])
        info = explorer.info.value
        assert "untrained" not in info and "longer run" in info and "2,000 steps" in info
        text = generate_text(
            ck.model, ck.tokenizer, DEFAULT_PROMPT, N_NEW,
            generator=torch.Generator().manual_seed(0), context=96,
        )  # fmt: skip
        assert explorer.state["text"] == text and len(text) == len(DEFAULT_PROMPT) + N_NEW
        assert plt.get_fignums() == []
    finally:
        explorer.close()


def test_explorer_default_model_is_the_checkpoint():
    from helpers.checkpoint import Checkpoint
    from helpers.widgets.generation import default_model

    ck = default_model()
    assert isinstance(ck, Checkpoint) and ck.steps == 2000
    assert ck.model.config.max_len == ck.settings["block_size"] == 96


def test_explorer_bad_arguments():
    from helpers.widgets import generation_explorer

    model, tokenizer = _explorer_model()
    with pytest.raises(TypeError, match="tokenizer must be a helpers.text.CharTokenizer"):
        generation_explorer(model, "abc")
    with pytest.raises(ValueError, match="pass the tokenizer the model was trained with"):
        generation_explorer(model, CharTokenizer("xyz"))
    with pytest.raises(TypeError, match="model must be a helpers.TransformerLM"):
        generation_explorer(torch.nn.Linear(2, 2), tokenizer)
    with pytest.raises(TypeError, match="prompt must be a str"):
        generation_explorer(model, tokenizer, prompt=3)


# --- the exercise checks -------------------------------------------------------------------------

from helpers.checks import ExerciseFailed  # noqa: E402
from helpers.checks import generation as checks  # noqa: E402


def _failure(check, fn) -> str:
    with pytest.raises(ExerciseFailed) as info:
        check(fn)
    message = info.value.problem
    assert "\n" not in message
    return message


def _stub(*args):
    raise NotImplementedError()


# exercise 1: the temperature at which the top token has probability q


def _top(z, T):
    return torch.softmax(z.double() / T, dim=-1).max().item()


def temperature_bisect_log(logits, q):  # bisection on log T (the notebook's way)
    lo, hi = math.log(0.01), math.log(100.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _top(logits, math.exp(mid)) > q else (lo, mid)
    return math.exp((lo + hi) / 2)


def temperature_bisect_beta(logits, q):  # bisection on the inverse temperature, in float32
    lo, hi = 0.01, 100.0  # beta = 1 / T: p_max rises with beta
    while hi - lo > 1e-9 * hi:
        mid = (lo + hi) / 2
        p = torch.softmax(logits.float() * mid, dim=-1).max()
        lo, hi = (mid, hi) if p < q else (lo, mid)
    return torch.tensor(1 / ((lo + hi) / 2))  # a 0-d tensor is a number too


def temperature_newton(logits, q):  # Newton on log T with the library's softmax
    z = logits.double()
    u = 0.0  # log T
    for _ in range(200):
        p = next_token_probs(z, temperature=math.exp(u))
        top = int(p.argmax())
        # d p_max / d log T = -p_max * (z_max - E_p[z]) / T
        grad = -float(p[top] * (z[top] - (p * z).sum())) / math.exp(u)
        if abs(float(p[top]) - q) < 1e-12 or grad == 0:
            break
        u = min(max(u - (float(p[top]) - q) / grad, math.log(0.01)), math.log(100.0))
    return math.exp(u)


def temperature_grid_then_bisect(logits, q):  # a coarse scan for the bracket, then halving
    Ts = [10 ** (k / 4) for k in range(-8, 9)]
    i = next(k for k, T in enumerate(Ts) if _top(logits, T) <= q)
    lo, hi = Ts[i - 1], Ts[i]
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _top(logits, mid) > q else (lo, mid)
    return hi


HONEST_TEMPERATURES = (
    temperature_bisect_log,
    temperature_bisect_beta,
    temperature_newton,
    temperature_grid_then_bisect,
)


@pytest.mark.parametrize("answer", HONEST_TEMPERATURES, ids=lambda f: f.__name__)
def test_check_temperature_for_accepts_right_answers_written_differently(answer, capsys):
    checks.check_temperature_for(answer)
    assert capsys.readouterr().out.startswith("✓ Exercise 1")


def _two_token(logits, q):
    top2 = logits.double().topk(2).values
    return float((top2[0] - top2[1]) / math.log(q / (1 - q)))


def _wrong_direction(logits, q):  # the halving kept the wrong half: ends at an end
    lo, hi = 0.01, 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _top(logits, mid) > q else (mid, hi)
    return (lo + hi) / 2


def _early_stop(logits, q):  # 8 halvings of [0.01, 100] on log T: not close enough
    lo, hi = math.log(0.01), math.log(100.0)
    for _ in range(8):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _top(logits, math.exp(mid)) > q else (lo, mid)
    return math.exp((lo + hi) / 2)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_stub, "not implemented yet"),
        (lambda z, q: None, "is None"),
        (lambda z, q: torch.softmax(z, -1), "should be a number"),
        (lambda z, q: -temperature_bisect_log(z, q), "a temperature is > 0"),
        (lambda z, q: 1 / temperature_bisect_log(z, q), "inverse temperature"),
        (_two_token, "the other tokens take their share"),
        (_early_stop, "search further"),
        (_wrong_direction, "the top probability falls as T grows"),
        (lambda z, q: 1.0, "not"),
        (lambda z, q: temperature_bisect_log(z.div_(1.0).mul_(2), q), "in place"),
    ],
)
def test_check_temperature_for_names_the_problem(answer, expected):
    assert expected in _failure(checks.check_temperature_for, answer)


def test_top_probability_is_softmax_max_and_refuses_bad_arguments():
    z = torch.tensor([1.0, 3.0, 2.0])
    assert checks.top_probability(z, 1.0) == pytest.approx(float(torch.softmax(z, -1)[1]))
    assert checks.top_probability(z, 1e-3) == pytest.approx(1.0)
    for bad in (0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="temperature"):
            checks.top_probability(z, bad)
    with pytest.raises(ValueError, match="1-D"):
        checks.top_probability(z[None], 1.0)


def _exercise_cells():
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "09_the_full_model.ipynb", as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}


def test_C9_2_honest_temperatures_score_full_marks_through_the_grader(tmp_path, monkeypatch):
    """The hidden cases of l9_ex1, run with the notebook's solution as the reference and with each
    honest variant, judged by tools/grading's verdicts: all full marks; a wrong answer loses."""
    import json

    from tools.grading.verdicts import judge

    cells = _exercise_cells()
    hidden = cells["l9_ex1_check"].source
    hidden = hidden[hidden.index("### BEGIN HIDDEN TESTS") : hidden.index("### END HIDDEN TESTS")]
    logits = 2 * torch.randn(65, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def records(answer):
        log = tmp_path / f"{answer.__name__}.jsonl"
        monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
        import helpers.grading as grading

        grading._cases.clear()
        space = {"torch": torch, "temperature_for": answer, "logits": logits}
        exec(hidden, space)  # noqa: S102 - the course's own hidden cells
        out = {}
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            out.setdefault(entry["case"], []).append(entry)
        return out

    space = {"torch": torch, "math": math, "fmt": lambda x, decimals=3: f"{x:.{decimals}f}",
             "logits": logits, "print": lambda *a: None}  # fmt: skip
    exec(cells["l9_ex1"].source, space)  # noqa: S102 - the notebook's solution
    reference = records(space["temperature_for"])
    assert len(reference) == 4
    for answer in HONEST_TEMPERATURES:
        assert judge("l9_ex1", reference, records(answer)).correct, answer.__name__
    for wrong in (_two_token, _early_stop, _wrong_direction):
        assert not judge("l9_ex1", reference, records(wrong)).correct, wrong.__name__


# exercise 2: the most likely pair of next ids (greedy is not the most likely text)


def pair_right(model, tokens):  # the notebook's way: log-probabilities of all V^2 pairs at once
    with torch.no_grad():
        first = torch.log_softmax(model(tokens[None])[0, -1], dim=-1)
        V = first.shape[0]
        after = torch.cat([tokens.expand(V, -1), torch.arange(V)[:, None]], dim=1)
        second = torch.log_softmax(model(after)[:, -1], dim=-1)
    best = int((first[:, None] + second).argmax())
    return best // V, best % V


def pair_loop_of_log_sums(model, tokens):  # log p(a) + log p(b | a), every pair in one loop
    with torch.no_grad():
        log_first = torch.log_softmax(model(tokens[None])[0, -1], -1)
        log_second = {
            a: torch.log_softmax(model(torch.cat([tokens, torch.tensor([a])])[None])[0, -1], -1)
            for a in range(len(log_first))
        }
    pairs = itertools.product(range(len(log_first)), repeat=2)
    return torch.tensor(
        max(pairs, key=lambda ab: float(log_first[ab[0]] + log_second[ab[0]][ab[1]]))
    )


def pair_with_next_token_probs(model, tokens):  # the course's softmax, one first id at a time
    with torch.no_grad():
        first = next_token_probs(model(tokens[None])[0, -1], temperature=1.0)
        scores = []
        for a, p_a in enumerate(first.tolist()):
            logits = model(torch.cat([tokens, torch.tensor([a])])[None])[0, -1]
            scores.append(p_a * next_token_probs(logits, temperature=1.0))
    table = torch.stack(scores)  # [V, V]
    return [int(i) for i in divmod(int(table.argmax()), len(first))]


def _pair_greedy(model, tokens):
    with torch.no_grad():
        a = int(model(tokens[None])[0, -1].argmax())
        b = int(model(torch.cat([tokens, torch.tensor([a])])[None])[0, -1].argmax())
    return a, b


def _pair_raw_logits(model, tokens):
    with torch.no_grad():
        z1 = model(tokens[None])[0, -1]
        V = len(z1)
        z2 = model(torch.cat([tokens.expand(V, -1), torch.arange(V)[:, None]], 1))[:, -1]
    return divmod(int((z1[:, None] + z2).argmax()), V)


def _pair_second_step_alone(model, tokens):
    with torch.no_grad():
        V = model.config.vocab_size
        after = torch.cat([tokens.expand(V, -1), torch.arange(V)[:, None]], 1)
        z2 = torch.log_softmax(model(after)[:, -1], -1)
    return divmod(int(z2.argmax()), V)


def _pair_flat_index(model, tokens):
    a, b = pair_right(model, tokens)
    return a * model.config.vocab_size + b


def test_check_most_likely_pair_accepts_right_answers(capsys):
    for answer in (pair_right, pair_loop_of_log_sums, pair_with_next_token_probs):
        checks.check_most_likely_pair(answer)
        assert capsys.readouterr().out.startswith("✓ Exercise 2")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_stub, "not implemented yet"),
        (_pair_greedy, "which is the greedy pair"),
        (_pair_raw_logits, "you added raw logits"),
        (_pair_second_step_alone, "the likeliest second step alone"),
        (_pair_flat_index, "returned one number"),
        (lambda m, t: torch.tensor(pair_right(m, t), dtype=torch.float64), "whole numbers"),
        (lambda m, t: (*pair_right(m, t), 0), "returned 3 values"),
        (lambda m, t: (m.config.vocab_size, 0), "a whole number in 0..10"),
        (lambda m, t: None, "returned None"),
    ],
)
def test_check_most_likely_pair_names_the_problem(answer, expected):
    message = _failure(checks.check_most_likely_pair, answer)
    assert expected in message and "\n" not in message, message


def test_check_most_likely_pair_has_prompts_where_greedy_is_not_the_most_likely():
    """The exercise's point, and what its pass message says: on some of the check's prompts the
    greedy pair is not the most likely one (here 4 of 9), so the greedy loop cannot pass."""
    differs = 0
    for model, tokens in checks._pair_cases():
        table = checks.pair_log_probs(model, tokens)
        best = divmod(int(table.argmax()), model.config.vocab_size)
        differs += _pair_greedy(model, tokens) != best
        assert best == tuple(pair_right(model, tokens))
    assert differs >= 2


def test_check_most_likely_pair_passes_the_notebooks_solution_with_its_message(capsys):
    """The notebook's solution cell passes, and the verdict is the one stored in the notebook."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "notebooks/09_the_full_model.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    by_id = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in cells}
    space = {"torch": torch}
    exec("".join(by_id["l9_ex2"]["source"]), space)  # noqa: S102 - the course's own solution
    checks.check_most_likely_pair(space["most_likely_pair"])
    stored = "".join("".join(o.get("text", "")) for o in by_id["l9_ex2_check"]["outputs"])
    assert capsys.readouterr().out == stored


# exercise 3


def top_p_right(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # the mass of the more likely tokens
    keep_sorted = before < p  # kept while the sum before it has not reached p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_unnormalized(logits, p):
    probs = torch.softmax(logits, dim=-1)
    return probs * (top_p_right(logits, p) > 0)


def _top_p_strictly_below(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep_sorted = sorted_probs.cumsum(dim=-1) < p  # drops the token that reaches p
    keep_sorted[..., 0] = True  # (avoids the empty set, so the mass message shows)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_strictly_below_empty(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep_sorted = sorted_probs.cumsum(dim=-1) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_one_too_many(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep_sorted = torch.roll(before < p, 1, dims=-1) | (before < p)  # one more
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_ascending(logits, p):
    return top_p_right(-logits, p) * 0 + top_p_right(logits, p).flip(-1)


def _top_p_least_likely(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1)  # ascending: the least likely first
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before < p)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_sorted_order(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, _ = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    kept = sorted_probs * (before < p)
    return kept / kept.sum(dim=-1, keepdim=True)


def test_check_top_p_filter_accepts_the_right_answer(capsys):
    checks.check_top_p_filter(top_p_right)
    assert capsys.readouterr().out.startswith("✓ Exercise 3")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_stub, "not implemented yet"),
        (_top_p_unnormalized, "renormalize them"),
        (_top_p_strictly_below, "less than p"),
        (_top_p_strictly_below_empty, "kept no token"),
        (_top_p_one_too_many, "not the smallest set"),
        (_top_p_least_likely, "less likely than one it drops"),
        (_top_p_sorted_order, "in sorted order"),
        (lambda z, p: torch.softmax(z, -1), "not the smallest set"),
        (
            lambda z, p: top_p_right(z, p) ** 2 / (top_p_right(z, p) ** 2).sum(-1, keepdim=True),
            "scaled by one factor",
        ),
        (lambda z, p: top_p_right(z.transpose(0, -1), p).transpose(0, -1), ""),
    ],
)
def test_check_top_p_filter_names_the_problem(answer, expected):
    assert expected in _failure(checks.check_top_p_filter, answer)


def test_checks_never_show_an_expected_value():
    """The verdicts name what is wrong, never the right numbers: a wrong answer's message holds
    no probability of the right answer."""
    message = _failure(checks.check_temperature_for, _two_token)
    assert "expected" not in message
    message = _failure(checks.check_most_likely_pair, _pair_greedy)
    assert "expected" not in message


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(5)
    state = torch.get_rng_state()
    checks.check_most_likely_pair(pair_right)
    checks.check_top_p_filter(top_p_right)
    assert torch.equal(torch.get_rng_state(), state)


def test_C9_2_exercises_1_and_2_forbid_no_function():
    """Exercise 1 may use any function (next_token_probs); exercise 2's answer, the most likely
    pair, is computed by no course function, so none is refused (its check takes
    next_token_probs too)."""
    from tools.grading.spec import spec_for

    assert not spec_for("l9_ex1").forbid and not spec_for("l9_ex2").forbid


# ---- context: a sliding window of the last `context` tokens --------------------------------------


@pytest.mark.parametrize("positional", ["sinusoidal", "rotary", "learned"])
def test_C9_2_context_feeds_only_the_last_context_tokens(positional):
    from helpers import TransformerLM

    torch.manual_seed(3)
    model = TransformerLM(11, 16, 2, 2, max_len=8, positional=positional).double()
    prompt = torch.randint(0, 11, (2, 10 if positional != "learned" else 6))
    out = model.generate(prompt, 9, temperature=0.0, context=5)
    assert out.shape == (2, prompt.shape[1] + 9) and torch.equal(out[:, : prompt.shape[1]], prompt)
    with torch.no_grad():
        for t in range(prompt.shape[1], out.shape[1]):  # every new token: argmax of the window
            window = out[:, max(0, t - 5) : t]
            assert torch.equal(out[:, t], model(window)[:, -1].argmax(-1))


def test_context_bad_arguments():
    from helpers import TransformerLM

    model = TransformerLM(11, 16, 1, 2, max_len=8, positional="learned")
    prompt = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="context must be at most .* max_len=8"):
        model.generate(prompt, 2, context=9)
    with pytest.raises(ValueError, match="context"):
        model.generate(prompt, 2, context=0)
    with pytest.raises(TypeError, match="context"):
        model.generate(prompt, 2, context=2.5)


# ---- the cache against the plain loop: the same tokens -------------------------------------------


def _sample_by_full_forward(model, tokens, n, temperature, top_k, generator, window=None):
    """C9.2's sampling loop written plainly, no cache: the whole sequence (or its last
    ``window`` tokens) through the model at every step, the same draw as ``generate`` (on one
    thread too, as it runs)."""
    from helpers.reproducible import one_thread

    with torch.no_grad(), one_thread():
        for _ in range(n):
            context = tokens if window is None else tokens[:, -window:]
            probs = next_token_probs(model(context)[:, -1], temperature, top_k)
            nxt = (
                probs.argmax(-1, keepdim=True)
                if temperature == 0
                else torch.multinomial(probs, 1, generator=generator)
            )
            tokens = torch.cat([tokens, nxt], dim=1)
    return tokens


@pytest.mark.parametrize(
    ("positional", "norm", "context"),
    [("sinusoidal", "pre", 6), ("learned", "post", None), ("rotary", "pre", 5),
     ("alibi", "post", 7), ("none", "pre", None)],
)  # fmt: skip
def test_C9_2_cached_generation_draws_the_tokens_of_the_plain_loop(positional, norm, context):
    model = _model(positional=positional, norm=norm, n_layers=3).eval()
    prompt = _prompt(n=4, seed=5)
    window = context or (SMALL["max_len"] if positional == "learned" else None)
    compared = 0
    for seed, temperature, top_k in [(0, 1.0, None), (1, 0.7, 3), (2, 1.6, None), (3, 0.0, None),
                                     (4, 1.2, 8), (5, 0.4, 1)]:  # fmt: skip
        got = generate(
            model, prompt, 16, temperature, top_k, torch.Generator().manual_seed(seed), context
        )
        want = _sample_by_full_forward(
            model, prompt, 16, temperature, top_k, torch.Generator().manual_seed(seed), window
        )
        assert torch.equal(got, want), (seed, temperature, top_k)
        compared += 1
    assert compared == 6


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rotary", "alibi", "none"])
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_C9_2_a_window_in_one_pass_gives_the_full_forward_s_last_logits(positional, norm):
    model = _model(positional=positional, norm=norm, n_layers=3).eval()
    tokens = _prompt(n=12, seed=4)
    with torch.no_grad():
        got = _cached_logits(model, tokens, [[] for _ in model.blocks], 0)  # last block: 1 row
        want = model(tokens)[:, -1]
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_C9_2_the_shipped_model_writes_the_same_text_with_and_without_the_cache():
    from helpers.checkpoint import load_checkpoint

    shipped = load_checkpoint()
    writer = shipped.model.to(torch.float32)  # the explorer's writer: float32
    prompt = shipped.tokenizer.encode("First Citizen:")[None]
    context = writer.config.max_len  # 96: past it, the window slides
    for seed, temperature, top_k in [(0, 1.0, None), (1, 0.8, 10)]:
        got = generate(writer, prompt, 110, temperature, top_k, torch.Generator().manual_seed(seed),
                       context)  # fmt: skip
        want = _sample_by_full_forward(
            writer, prompt, 110, temperature, top_k, torch.Generator().manual_seed(seed), context
        )
        assert torch.equal(got, want), (seed, temperature, top_k)


# hidden cases: their seeds come from helpers.grading.hidden_seed


def _hidden_inputs(grade_id, namespace, tmp_path, monkeypatch, seed_shift=None):
    """The inputs' fingerprints the hidden block of ``grade_id``'s check cell records; with
    ``seed_shift``, as a grader with a secret would run it (``hidden_seed`` returning another
    seed than the notebook's default)."""
    import json

    import helpers.grading as grading

    hidden = _exercise_cells()[f"{grade_id}_check"].source
    hidden = hidden.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
    log = tmp_path / f"{grade_id}-{len(list(tmp_path.iterdir()))}.jsonl"
    asked = []
    with monkeypatch.context() as m:  # undone on return: the next run starts from the default
        m.setenv("HELPERS_GRADING_LOG", str(log))
        m.setattr(grading, "_cases", {})
        if seed_shift is not None:

            def secret_seed(exercise, default):
                asked.append((exercise, default))
                return default + seed_shift

            m.setattr(grading, "hidden_seed", secret_seed)
        exec(compile(hidden, grade_id, "exec"), {"torch": torch, **namespace})  # noqa: S102
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return [e["inputs"] for e in entries if e.get("kind") == "case"], asked


def test_l9_hidden_cases_take_their_seeds_from_hidden_seed(tmp_path, monkeypatch):
    """Each exercise's hidden cases ask hidden_seed(its grade_id, the seed written today): by
    default they are the notebook's cases (stored outputs unchanged); with another seed (a
    grader's secret) every case changes: each is built in the hidden cell from its own seed, none
    from a notebook global the student's cells could rebind (l9_ex1's fourth case once read
    `logits`)."""
    logits = 2 * torch.randn(65, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    answers = {
        "l9_ex1": {"temperature_for": lambda z, q: 1.0, "logits": logits},
        "l9_ex2": {"greedy_decode": lambda model, tokens, n: tokens},
        "l9_ex3": {"top_p_filter": lambda z, p: torch.softmax(z, dim=-1)},
    }
    defaults = {"l9_ex1": 91, "l9_ex2": 92, "l9_ex3": 95}
    for grade_id, namespace in answers.items():
        public, _ = _hidden_inputs(grade_id, namespace, tmp_path, monkeypatch)
        again, asked = _hidden_inputs(grade_id, namespace, tmp_path, monkeypatch, seed_shift=0)
        assert asked == [(grade_id, defaults[grade_id])], asked
        assert again == public  # the default seed: the notebook's own cases
        secret, _ = _hidden_inputs(grade_id, namespace, tmp_path, monkeypatch, seed_shift=1000)
        assert len(secret) == len(public) >= 3
        drawn = [a != b for a, b in zip(public, secret, strict=True)]
        assert all(drawn), drawn  # every case drawn: none reads a notebook global
