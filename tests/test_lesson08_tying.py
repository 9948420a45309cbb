"""Lesson 8: embeddings, the output projection and weight tying (C8.1-C8.5), the parameter
formulas, the training helper, the explorer and the exercise checks."""

import json
import math
from dataclasses import asdict
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import GPT2_SMALL, TransformerLM, count_parameters, sinusoidal_encoding
from helpers.checks import ExerciseFailed
from helpers.checks import tying as checks
from helpers.checks.tying import MathLayoutLM
from helpers.model import coherent_defaults
from helpers.params import lm_parameter_counts, tying_saving
from helpers.reproducible import default_dtype
from helpers.text import CharTokenizer, load_text, ngram_loss, split_ids
from helpers.training import compare_tying, evaluate, get_batch, train_char_model, train_lm

SMALL = dict(vocab_size=23, d_model=16, n_layers=2, n_heads=2, max_len=16)


def _model(tie=True, seed=0, **overrides):
    torch.manual_seed(seed)
    return TransformerLM(**{**SMALL, **overrides}, tie_weights=tie)


def _meta_count(tie, **config):
    with torch.device("meta"):
        model = TransformerLM(**config, tie_weights=tie)
    assert model.token_embedding.weight.is_meta
    return count_parameters(model)


# --- C8.1 ------------------------------------------------------------------------------------------


def test_C8_1_lookup_equals_one_hot_times_table():
    model = _model()
    W_E = model.token_embedding.weight  # [V, d]
    assert tuple(W_E.shape) == (SMALL["vocab_size"], SMALL["d_model"])
    ids = torch.tensor([0, 5, 22, 5, 7])
    one_hot = F.one_hot(ids, num_classes=SMALL["vocab_size"]).float()  # [n, V]
    torch.testing.assert_close(one_hot @ W_E, model.token_embedding(ids), rtol=0, atol=0)


# --- C8.2 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tie", [True, False])
def test_C8_2_one_logit_per_token_per_position(tie):
    model = _model(tie)
    tokens = torch.randint(0, SMALL["vocab_size"], (3, 11))
    logits = model(tokens)
    assert tuple(logits.shape) == (3, 11, SMALL["vocab_size"])
    assert tuple(model.lm_head.weight.shape) == (SMALL["vocab_size"], SMALL["d_model"])
    assert model.lm_head.bias is None


# --- C8.3 ------------------------------------------------------------------------------------------


def test_C8_3_tied_is_the_same_tensor_and_logits_use_it():
    model = _model(True)
    assert model.tied
    assert model.lm_head.weight is model.token_embedding.weight
    assert model.lm_head.weight.data_ptr() == model.token_embedding.weight.data_ptr()
    tokens = torch.randint(0, SMALL["vocab_size"], (2, 9))
    logits, hidden = model(tokens, return_hidden=True)
    h = model.final_norm(hidden[-1])
    torch.testing.assert_close(logits, h @ model.token_embedding.weight.T)


def test_C8_3_untied_has_its_own_matrix():
    model = _model(False)
    assert not model.tied
    assert model.lm_head.weight.data_ptr() != model.token_embedding.weight.data_ptr()


def _sgd_step(model):
    batch = torch.randint(
        0, SMALL["vocab_size"], (4, 9), generator=torch.Generator().manual_seed(1)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt.zero_grad()
    model.loss(batch).backward()
    opt.step()


def test_C8_3_one_step_moves_both_while_a_copy_diverges():
    tied = _model(True)
    before = tied.token_embedding.weight.detach().clone()
    _sgd_step(tied)
    assert tied.lm_head.weight is tied.token_embedding.weight
    assert not torch.equal(tied.token_embedding.weight, before)

    copied = _model(False)
    with torch.no_grad():
        copied.lm_head.weight.copy_(copied.token_embedding.weight)
    assert torch.equal(copied.lm_head.weight, copied.token_embedding.weight)
    _sgd_step(copied)
    assert not torch.equal(copied.lm_head.weight, copied.token_embedding.weight)


def test_C8_3_tied_gradient_is_the_sum_of_both_uses():
    """The shared matrix's gradient = gradient through the embedding + through the output."""
    tied = _model(True)
    untied = _model(False)
    untied.load_state_dict(tied.state_dict())  # same values, two matrices
    assert torch.equal(untied.lm_head.weight, untied.token_embedding.weight)
    batch = torch.randint(0, SMALL["vocab_size"], (2, 8))
    tied.loss(batch).backward()
    untied.loss(batch).backward()
    torch.testing.assert_close(
        tied.token_embedding.weight.grad,
        untied.token_embedding.weight.grad + untied.lm_head.weight.grad,
    )


def test_C8_3_state_dict_twice_parameters_once():
    model = _model(True)
    state = model.state_dict()
    ptr = model.token_embedding.weight.data_ptr()
    shared = sorted(k for k, v in state.items() if v.data_ptr() == ptr)
    assert shared == ["lm_head.weight", "token_embedding.weight"]
    params = list(model.parameters())
    assert sum(p is model.token_embedding.weight for p in params) == 1
    assert len(list(model.named_parameters(remove_duplicate=False))) == len(params) + 1
    # a tied state_dict loads back into a tied model and keeps it tied
    fresh = _model(True, seed=5)
    fresh.load_state_dict(state)
    assert fresh.tied and torch.equal(fresh.token_embedding.weight, model.token_embedding.weight)


# --- C8.4 ------------------------------------------------------------------------------------------


def test_C8_4_worked_example_saves_38_400_000():
    config = dict(vocab_size=50_000, d_model=768, n_layers=12, n_heads=12, positional="learned")
    saved = _meta_count(False, **config) - _meta_count(True, **config)
    assert saved == 38_400_000 == 50_000 * 768 == tying_saving(50_000, 768)


def test_C8_4_gpt2_small_counts_on_meta_device():
    config = {k: v for k, v in asdict(GPT2_SMALL).items() if k != "tie_weights"}
    assert _meta_count(True, **config) == 124_439_808
    assert _meta_count(False, **config) == 163_037_184


@pytest.mark.parametrize(
    "config",
    [
        dict(vocab_size=50257, d_model=768, n_layers=12, n_heads=12, d_ff=3072),
        dict(vocab_size=100, d_model=32, n_layers=3, n_heads=4, positional="sinusoidal"),
        dict(vocab_size=7, d_model=24, n_layers=2, n_heads=3, norm="post", activation="relu"),
        dict(vocab_size=300, d_model=64, n_layers=1, n_heads=8, norm="none", max_len=50),
        dict(vocab_size=512, d_model=48, n_layers=2, n_heads=4, activation="swiglu", d_ff=100),
    ],
)
@pytest.mark.parametrize("tie", [True, False])
def test_C8_4_formula_matches_count_parameters(config, tie):
    counts = lm_parameter_counts(
        config["vocab_size"],
        config["d_model"],
        config["n_layers"],
        d_ff=config.get("d_ff"),
        max_len=config.get("max_len", 1024),
        positional=config.get("positional", "learned"),
        norm=config.get("norm", "pre"),
        activation=config.get("activation", "gelu"),
        tie_weights=tie,
    )
    full = {"positional": "learned", **config}
    assert counts["total"] == _meta_count(tie, **full)
    parts = ("embedding", "position", "blocks", "final_norm", "output")
    assert counts["total"] == sum(counts[p] for p in parts)


# --- C8.5 and the training helper ---------------------------------------------------------------


def test_text_ships_with_the_package_and_tokenizes():
    text = load_text()
    assert 20_000 < len(text) < 100_000 and text.startswith("First Citizen:")
    tok = CharTokenizer(text)
    assert tok.vocab_size == len(set(text)) == 58
    ids = tok.encode(text[:100])
    assert ids.dtype == torch.long and tok.decode(ids) == text[:100]
    with pytest.raises(ValueError, match="no id"):
        tok.encode("€")
    with pytest.raises(ValueError, match="name must be one of"):
        load_text("war_and_peace")


def test_batches_are_reproducible_with_a_seeded_generator():
    ids = torch.arange(200)
    a = get_batch(ids, 4, 8, torch.Generator().manual_seed(3))
    b = get_batch(ids, 4, 8, torch.Generator().manual_seed(3))
    assert tuple(a.shape) == (4, 9) and torch.equal(a, b)
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(4, 8, dtype=torch.long))  # consecutive
    with pytest.raises(ValueError, match="block_size"):
        get_batch(torch.arange(5), 2, 8, torch.Generator())


def test_train_lm_lowers_the_loss():
    text = load_text()
    tok = CharTokenizer(text)
    train_ids, val_ids = split_ids(tok.encode(text))
    assert len(val_ids) == round(0.1 * len(text))
    val_ids = val_ids[:641]  # 40 windows of 16: enough to see the loss fall, and quick
    model = _model(True, vocab_size=tok.vocab_size, max_len=16)
    result = train_lm(model, train_ids, val_ids, steps=20, batch_size=8, block_size=16, lr=1e-2)
    assert len(result.train_losses) == 20
    assert result.val_loss < result.initial_val_loss
    assert result.val_loss == pytest.approx(evaluate(model, val_ids, 16))


@pytest.mark.slow
def test_C8_5_tied_vs_untied_is_reproducible_and_honest():
    kwargs = dict(steps=40, d_model=32, batch_size=8, block_size=16)
    threads = torch.get_num_threads()
    first, again = compare_tying(**kwargs), compare_tying(**kwargs)
    uniform = math.log(58)
    for name in ("tied", "untied"):
        r = first[name]
        assert math.isfinite(r.val_loss) and r.val_loss < r.initial_val_loss
        assert r.val_loss < uniform
        assert r.train_losses == again[name].train_losses  # same seed, same numbers
        assert r.val_loss == again[name].val_loss
    assert first["untied"].n_parameters - first["tied"].n_parameters == 58 * 32
    assert torch.get_num_threads() == threads  # one thread while training, then restored


# --- bad arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize("vocab_size", [0, -5])
def test_bad_vocab_size_is_rejected(vocab_size):
    with pytest.raises(ValueError, match="vocab_size"):
        TransformerLM(vocab_size, 16, 1, 2)
    with pytest.raises(ValueError, match="vocab_size"):
        lm_parameter_counts(vocab_size, 16, 1)
    with pytest.raises(ValueError, match="vocab_size"):
        tying_saving(vocab_size, 16)


def test_bad_vocab_size_type_is_rejected():
    with pytest.raises(TypeError, match="vocab_size"):
        TransformerLM(100.0, 16, 1, 2)


def test_unknown_positional_kind_is_rejected():
    with pytest.raises(ValueError, match="positional must be one of 'sinusoidal', 'learned'"):
        TransformerLM(10, 16, 1, 2, positional="spiral")
    with pytest.raises(ValueError, match="positional"):
        lm_parameter_counts(10, 16, 1, positional="spiral")


def test_token_ids_out_of_range_are_rejected():
    model = _model(True)
    with pytest.raises(ValueError, match=r"tokens must hold ids in 0\.\.22"):
        model(torch.tensor([[1, 2, 23]]))
    with pytest.raises(ValueError, match="tokens must hold ids"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="integer token ids"):
        model(torch.zeros(1, 3))


def test_tie_weights_must_be_a_bool_in_the_formula():
    with pytest.raises(TypeError, match="tie_weights"):
        lm_parameter_counts(10, 16, 1, tie_weights="yes")


# --- the explorer -----------------------------------------------------------------------------


def test_tying_explorer_updates_in_place_without_pyplot():
    from helpers.widgets import tying_explorer

    before = set(plt.get_fignums())
    explorer = tying_explorer()
    try:
        bars = explorer.figure.axes[0].patches
        widths = lambda: [round(p.get_width(), 9) for p in bars]  # noqa: E731
        start = widths()
        assert "124,439,808" in explorer.info.value and "38,597,376" in explorer.info.value
        assert "tied to W_E (saves 38.60 M)" in explorer.figure.axes[0].texts[-1].get_text()

        explorer.controls["vocab_size"].value = 32_000
        after_vocab = widths()
        assert after_vocab != start
        assert "24,576,000" in explorer.info.value  # 32,000 x 768 saved

        explorer.controls["d_model"].value = 512
        after_d = widths()
        assert after_d != after_vocab

        explorer.controls["n_layers"].value = 4
        after_depth = widths()
        assert after_depth[2] != after_d[2]  # the blocks bar

        explorer.controls["tie"].value = False
        untied = widths()
        assert untied[3] > 0 and after_depth[3] == 0  # the output bar appears
        assert explorer.figure.axes[0].texts[-1].get_text().strip().endswith(" M")
        counts = lm_parameter_counts(32_000, 512, 4, tie_weights=False)
        assert f"{counts['total']:,}" in explorer.info.value
        assert untied[3] == pytest.approx(counts["output"] / 1e6)
        assert explorer.n_updates == 5
        assert set(plt.get_fignums()) == before
    finally:
        explorer.close()
    assert set(plt.get_fignums()) == before


def test_tying_explorer_counts_match_a_real_model():
    """The explorer's formula against count_parameters, at a few control settings."""
    for vocab, d, layers, tie in [(1000, 64, 1, True), (5000, 128, 3, False)]:
        counts = lm_parameter_counts(vocab, d, layers, tie_weights=tie)
        config = dict(vocab_size=vocab, d_model=d, n_layers=layers, n_heads=4, positional="learned")
        assert counts["total"] == _meta_count(tie, **config)


# --- the exercise checks ----------------------------------------------------------------------


def _raises_not_implemented(*args):
    raise NotImplementedError()


def _raises_key_error(*args):
    raise KeyError("oops")


def _failure(check, fn) -> str:
    with pytest.raises(ExerciseFailed) as info:
        check(fn)
    return str(info.value)


# exercise 1 (C8.1, C8.3): which rows of W_E learn from a batch --------------------------------


def _rows_right(tokens, vocab_size, tied):
    if tied:
        return list(range(vocab_size))
    return sorted(set(tokens[:, :-1].flatten().tolist()))


def _rows_unique(tokens, vocab_size, tied):  # the same, as a tensor of ids
    return torch.arange(vocab_size) if tied else torch.unique(tokens[:, :-1])


def _rows_by_backward(tokens, vocab_size, tied):
    """Verify rather than predict: one backward pass through a plain embedding + output layer."""
    torch.manual_seed(5)
    emb = nn.Embedding(vocab_size, 4)
    out = emb.weight if tied else nn.Parameter(torch.randn(vocab_size, 4))
    logits = torch.tanh(emb(tokens[:, :-1])) @ out.T
    F.cross_entropy(logits.reshape(-1, vocab_size), tokens[:, 1:].reshape(-1)).backward()
    return [i for i in range(vocab_size) if emb.weight.grad[i].abs().sum() > 0]


def test_check_rows_that_learn_accepts_right_answers(capsys):
    for answer in (_rows_right, _rows_unique, _rows_by_backward):
        checks.check_rows_that_learn(answer)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, "is None"),
        (_raises_not_implemented, "not implemented yet"),
        (_raises_key_error, "raised KeyError"),
        (lambda t, V, tied: None, "returned None"),
        (lambda t, V, tied: 3, "should return a list"),
        (lambda t, V, tied: "0, 1", "should return a list"),
        (lambda t, V, tied: [0.0, 1.0], "should be a row number"),
        (lambda t, V, tied: torch.ones(V, dtype=torch.bool), "a mask"),
        (lambda t, V, tied: torch.ones(V), "whole numbers"),
        (lambda t, V, tied: [V + 3], "outside"),
        (  # every token of the batch, targets too
            lambda t, V, tied: list(range(V)) if tied else sorted(set(t.flatten().tolist())),
            "only as the last token of a row",
        ),
        (lambda t, V, tied: list(range(V)), "untied, the exit has its own matrix"),
        (lambda t, V, tied: sorted(set(t[:, :-1].flatten().tolist())), "tied, W_E is also"),
        (lambda t, V, tied: sorted(set(t.flatten().tolist())), "only as the last token"),
        (
            lambda t, V, tied: list(range(V)) if tied else sorted(set(t[:, 1:].flatten().tolist())),
            "row(s) that get no gradient",
        ),
    ],
)
def test_check_rows_that_learn_names_the_problem(answer, expected):
    message = _failure(checks.check_rows_that_learn, answer)
    assert expected in message and "\n" not in message


def test_C8_1_a_lookup_s_gradient_reaches_only_the_rows_it_read():
    """What exercise 1 rests on, measured on the course's model: untied, the input tokens' rows;
    tied, every row (the exit's softmax reaches them all)."""
    tokens = torch.tensor([[3, 1, 4, 1, 7], [9, 2, 6, 5, 11]])
    for tie, want in ((False, [1, 2, 3, 4, 5, 6, 9]), (True, list(range(12)))):
        assert checks._rows_with_gradient(tokens, 12, tie, seed=0) == want


# exercise 3 (C8.6): two tokens at one position -------------------------------------------------


def _cos_right(ratio):
    return 1 / (1 + ratio**2)


def _cos_from_vectors(ratio):
    """Another honest way: build three orthogonal vectors exactly and measure."""
    e = torch.eye(3, dtype=torch.float64)
    t1, t2, p = ratio * e[0], ratio * e[1], e[2]
    return float(F.cosine_similarity(t1 + p, t2 + p, dim=0))


def _cos_tensor(ratio):  # a 0-d tensor counts as a number
    r = torch.as_tensor(ratio, dtype=torch.float64)
    return torch.reciprocal(1 + r * r)


def test_check_predicted_cosine_accepts_right_answers(capsys):
    for answer in (_cos_right, _cos_from_vectors, _cos_tensor):
        checks.check_predicted_cosine(answer)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, "is None"),
        (_raises_not_implemented, "not implemented yet"),
        (lambda r: None, "is None"),
        (lambda r: float("nan"), "not a finite number"),
        (lambda r: torch.ones(2), "should be a number"),
        (lambda r: 1 / (1 + r), "their squared norms that add"),
        (lambda r: (1 + r * r) ** -0.5, "the cosine between t + p and p itself"),
        (lambda r: r * r / (1 + r * r), "at ratio 0 the tokens add nothing"),
        (lambda r: 1 / (1 + 2 * r * r), "lower than the cosine measured"),
        (lambda r: 1 / (1 + 0.5 * r * r), "higher than the cosine measured"),
        (lambda r: 1 + r, "between -1 and 1"),
    ],
)
def test_check_predicted_cosine_names_the_problem(answer, expected):
    message = _failure(checks.check_predicted_cosine, answer)
    assert expected in message and "\n" not in message


def test_C8_6_the_measured_cosine_is_the_large_d_limit():
    """The check's measurement (random vectors in 16,384 dimensions) is within 0.002 of
    1 / (1 + ratio^2), well inside the 0.005 the exercise allows."""
    for ratio in checks.COSINE_RATIOS:
        assert abs(checks._measured_cosine(ratio) - 1 / (1 + ratio**2)) < 0.002, ratio


def test_verdicts_never_show_the_expected_value():
    """Issue 15: a wrong answer is told what is wrong, never the right number or rows."""
    rows = _failure(
        checks.check_rows_that_learn,
        lambda t, V, tied: list(range(V)) if tied else sorted(set(t[:, 1:].flatten().tolist())),
    )
    assert "[1, 2, 3" not in rows and "expected" not in rows
    cosine = _failure(checks.check_predicted_cosine, lambda r: 1 / (1 + r * r) + 0.02 * r)
    assert "0.8" not in cosine and "expected" not in cosine


def test_checks_never_leak_a_traceback_from_inside():
    """Whatever the student's function does, the check raises ExerciseFailed, nothing else."""
    weird = [lambda *a: object(), lambda *a: [1, 2, "x"], lambda *a: 1 / 0, lambda *a: {1: 2}]
    for check in (
        checks.check_rows_that_learn,
        checks.check_tie_math_layout,
        checks.check_predicted_cosine,
    ):
        for fn in weird:
            with pytest.raises(ExerciseFailed):
                check(fn)


# --- bad arguments found on a second read: a clear error, never a traceback from inside ------------


def test_loss_checks_its_tokens():
    model = _model(True)
    with pytest.raises(ValueError, match="2 dimensions"):
        model.loss(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="at least 2 positions"):
        model.loss(torch.tensor([[1]]))
    with pytest.raises(TypeError, match="torch.Tensor"):
        model.loss([[1, 2]])


def test_init_weights_needs_a_module():
    from helpers.model import init_weights

    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        init_weights("model")


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda m, ids: evaluate("model", ids, 4), TypeError, "model must be a TransformerLM"),
        (lambda m, ids: evaluate(m, list(range(20)), 4), TypeError, "ids must be a torch.Tensor"),
        (lambda m, ids: evaluate(m, ids, 4, batch_size=0), ValueError, "batch_size"),
        (
            lambda m, ids: train_lm(m, ids, list(range(50)), steps=1),
            TypeError,
            "val_ids must be a torch.Tensor",
        ),
        (
            lambda m, ids: train_lm(m, ids, ids, steps=1, batch_size=2, block_size=4, seed="x"),
            TypeError,
            "seed",
        ),
        (lambda m, ids: get_batch(ids, 2, 4, 5), TypeError, "generator must be a torch.Generator"),
        (lambda m, ids: split_ids(ids, "0.1"), TypeError, "val_fraction"),
        (lambda m, ids: CharTokenizer("abc").encode(5), TypeError, "text must be a str"),
        (lambda m, ids: CharTokenizer("abc").decode("ab"), TypeError, "ids must be a tensor"),
        (lambda m, ids: CharTokenizer("abc").decode([0.5]), TypeError, "whole numbers"),
    ],
)
def test_training_helpers_bad_arguments(call, error, match):
    model = _model(True)
    ids = torch.arange(50) % SMALL["vocab_size"]
    with pytest.raises(error, match=match):
        call(model, ids)


def test_plot_training_curves_bad_arguments():
    from helpers.plots.tying import plot_training_curves
    from helpers.training import TrainResult

    with pytest.raises(TypeError, match="results must be a non-empty dict"):
        plot_training_curves([1, 2])
    with pytest.raises(TypeError, match="must be a TrainResult"):
        plot_training_curves({"tied": 1})
    with pytest.raises(ValueError, match="no training losses"):
        plot_training_curves({"tied": TrainResult()})
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        plot_training_curves({"tied": TrainResult(train_losses=[1.0])}, ax="x")


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(vocab_size=500), ValueError, "vocab_size must be from 1,000 to 256,000"),
        (dict(d_model=8192), ValueError, "d_model must be from 64 to 4,096"),
        (dict(n_layers=100), ValueError, "n_layers"),
        (dict(tie="no"), TypeError, "tie must be True or False"),
    ],
)
def test_tying_explorer_bad_arguments(kwargs, error, match):
    from helpers.widgets import tying_explorer

    with pytest.raises(error, match=match):
        tying_explorer(**kwargs)


def test_tying_explorer_reaches_the_lesson_s_suggestion():
    """The lesson suggests a 32,000-token vocabulary at d_model 4096: the sliders must allow it."""
    from helpers.widgets import tying_explorer

    explorer = tying_explorer(vocab_size=32_000, d_model=4096, n_layers=2)
    try:
        assert explorer.values["d_model"] == 4096 and explorer.values["vocab_size"] == 32_000
        assert f"{32_000 * 4096:,}" in explorer.info.value
    finally:
        explorer.close()


def test_tying_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    want = torch.rand(3)
    torch.manual_seed(123)
    checks.check_rows_that_learn(_rows_right)
    checks.check_tie_math_layout(_math_right)
    checks.check_predicted_cosine(_cos_right)
    torch.testing.assert_close(torch.rand(3), want)


# --- C8.6: the defaults keep token and position comparable ---------------------------------------


def test_C8_6_coherent_defaults():
    assert coherent_defaults("sinusoidal") == ("xavier", True)
    assert coherent_defaults("learned") == ("gpt2", False)
    with pytest.raises(ValueError, match="positional must be one of"):
        coherent_defaults("spiral")


@pytest.mark.parametrize(
    ("positional", "init", "scale"), [("sinusoidal", "xavier", True), ("learned", "gpt2", False)]
)
def test_C8_6_transformer_lm_defaults(positional, init, scale):
    model = TransformerLM(20, 16, 1, 2, max_len=8, positional=positional)
    assert (model.init_scheme, model.scale_embeddings) == (init, scale)
    explicit = TransformerLM(
        20, 16, 1, 2, max_len=8, positional=positional, init="torch", scale_embeddings=not scale
    )
    assert (explicit.init_scheme, explicit.scale_embeddings) == ("torch", not scale)


def _token_and_position_norms(d_model, **options):
    with default_dtype(torch.float64):
        torch.manual_seed(0)
        model = TransformerLM(50, d_model, 1, 4, max_len=50, **options)
    ids = torch.arange(50)[None]
    with torch.no_grad():
        token = model.token_embedding(ids)[0] * (d_model**0.5 if model.scale_embeddings else 1.0)
        position = model.embed(ids)[0] - token
    return token.norm(dim=1).mean().item(), position.norm(dim=1).mean().item()


@pytest.mark.parametrize("d_model", [48, 512])
def test_C8_6_unscaled_small_tokens_are_drowned_by_the_sinusoidal_encoding(d_model):
    token, position = _token_and_position_norms(d_model, init="gpt2", scale_embeddings=False)
    assert position == pytest.approx((d_model / 2) ** 0.5, rel=1e-6)  # sqrt(d/2): float32 table
    assert token == pytest.approx(0.02 * d_model**0.5, rel=0.1)
    assert token / position < 0.05


@pytest.mark.parametrize("d_model", [48, 512])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_C8_6_default_model_is_coherent(d_model, positional):
    token, position = _token_and_position_norms(d_model, positional=positional)
    assert 0.5 < token / position < 2


def test_C8_6_scale_embeddings_multiplies_the_token_by_sqrt_d():
    torch.manual_seed(0)
    model = TransformerLM(20, 16, 1, 2, max_len=8)
    ids = torch.tensor([[3, 1, 4]])
    pe = sinusoidal_encoding(3, 16)
    with torch.no_grad():
        torch.testing.assert_close(model.embed(ids)[0], model.token_embedding(ids)[0] * 4.0 + pe)


def test_C8_6_bad_defaults_arguments():
    with pytest.raises(TypeError, match="scale_embeddings must be True, False or None"):
        TransformerLM(20, 16, 1, 2, scale_embeddings=1)
    with pytest.raises(ValueError, match="init must be one of"):
        TransformerLM(20, 16, 1, 2, init="kaiming")


def test_C8_4_gpt2_configuration_keeps_its_count_with_the_new_defaults():
    config = {k: v for k, v in asdict(GPT2_SMALL).items() if k != "tie_weights"}
    with torch.device("meta"):
        model = TransformerLM(**config)  # learned positions: GPT-2 init, no scaling
    assert (model.init_scheme, model.scale_embeddings) == ("gpt2", False)
    assert count_parameters(model) == 124_439_808


def test_default_dtype_draws_in_float64_and_restores():
    before = torch.get_default_dtype()
    with default_dtype(torch.float64):
        model = TransformerLM(20, 16, 1, 2, max_len=8)
    assert torch.get_default_dtype() == before
    assert all(p.dtype == torch.float64 for p in model.parameters())
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        with default_dtype(torch.int64):
            pass
    assert torch.get_default_dtype() == before


def test_tying_survives_conversion_to_float64():
    model = _model(True)
    model.double()
    assert model.tied and model.token_embedding.weight.dtype == torch.float64


def test_ngram_loss_baselines():
    ids = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    # unigram: counts 4 and 4, +1 each over V=3: p = 5/11 for 0 and 1
    assert ngram_loss(ids, ids, 3, order=1) == pytest.approx(-math.log(5 / 11))
    # bigram: 0 -> 1 four times (p = 5/7), 1 -> 0 three times (p = 4/6)
    want = -(4 * math.log(5 / 7) + 3 * math.log(4 / 6)) / 7
    assert ngram_loss(ids, ids, 3, order=2) == pytest.approx(want)
    text = load_text()
    tok = CharTokenizer(text)
    train_ids, val_ids = split_ids(tok.encode(text))
    uni = ngram_loss(train_ids, val_ids, tok.vocab_size)
    bi = ngram_loss(train_ids, val_ids, tok.vocab_size, order=2)
    assert bi < uni < math.log(tok.vocab_size)


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda ids: ngram_loss(ids, ids, 3, order=3), ValueError, "order must be 1"),
        (lambda ids: ngram_loss(ids, ids, 3, order=True), ValueError, "order must be 1"),
        (lambda ids: ngram_loss(ids, ids, 1), ValueError, "ids in 0..0"),
        (lambda ids: ngram_loss(ids.float(), ids, 3), TypeError, "integer token ids"),
        (lambda ids: ngram_loss(list(ids), ids, 3), TypeError, "train_ids must be a torch.Tensor"),
        (lambda ids: ngram_loss(ids, ids[:1], 3, order=2), ValueError, "at least 2 ids"),
        (lambda ids: train_char_model(steps=1, dropout=0.1), TypeError, "unknown model options"),
        (lambda ids: train_char_model(steps=1, dtype=torch.int64), ValueError, "dtype"),
        (lambda ids: train_char_model(text=5, steps=1), TypeError, "text must be a str"),
        (lambda ids: train_char_model(steps=1, seed=-1), ValueError, "seed"),
    ],
)
def test_C8_6_helpers_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.tensor([0, 1, 2, 1]))


def test_train_char_model_builds_in_float64_and_is_reproducible():
    text = load_text()[:3000]
    kwargs = dict(text=text, d_model=16, n_layers=1, steps=3, batch_size=4, block_size=8)
    a = train_char_model(dtype=torch.float64, positional="sinusoidal", **kwargs)
    b = train_char_model(dtype=torch.float64, positional="sinusoidal", **kwargs)
    assert a.train_losses == b.train_losses and a.val_loss == b.val_loss
    old = train_char_model(init="gpt2", scale_embeddings=False, dtype=torch.float64, **kwargs)
    assert old.initial_val_loss != a.initial_val_loss  # the options reach the model


# --- exercise 2: tying in the formula's layout (transfer) -----------------------------------------


class _TiedUnembed(nn.Module):
    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, h):
        return h @ self.embedding.weight.T


def _math_right(model):
    model.unembed = _TiedUnembed(model.embed)
    return model


def _math_right_patched(model):
    del model.unembed.weight
    model.unembed.forward = lambda h: h @ model.embed.weight.T
    return model


def _math_oneliner(model):
    model.unembed.weight = model.embed.weight
    return model


def _math_param_of_transpose(model):
    model.unembed.weight = nn.Parameter(model.embed.weight.T)
    return model


def _math_plain_transpose(model):
    model.unembed.weight = model.embed.weight.T
    return model


def _math_copy(model):
    model.unembed.weight = nn.Parameter(model.embed.weight.detach().T.clone())
    return model


def _math_data(model):
    model.unembed.weight.data = model.embed.weight.data.T
    return model


def _math_stale_view(model):
    del model.unembed.weight
    model.unembed.weight = model.embed.weight.T  # computed once: does not follow .double()
    return model


def _math_detached(model):
    model.unembed = _TiedUnembed(model.embed)
    model.unembed.forward = lambda h: h @ model.embed.weight.detach().T
    return model


def _math_frozen_copy(model):
    table = model.embed.weight.detach().clone()
    del model.unembed.weight
    model.unembed.forward = lambda h: h @ table.T
    return model


def _math_new_embedding(model):
    model.embed = nn.Embedding(20, 8)
    model.unembed = _TiedUnembed(model.embed)
    return model


def test_check_tie_math_layout_accepts_right_answers(capsys):
    checks.check_tie_math_layout(_math_right)
    checks.check_tie_math_layout(_math_right_patched)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, "is None"),
        (_raises_not_implemented, "not implemented yet"),
        (_raises_key_error, "raised KeyError"),
        (lambda m: None, "returned None"),
        (lambda m: MathLayoutLM(20, 8), "not the model it was given"),
        (lambda m: m, "still h @ the old W_out"),
        (_math_oneliner, "must use the transpose"),
        (_math_plain_transpose, "must be an nn.Parameter or None"),
        (_math_param_of_transpose, "still has a second parameter"),
        (_math_copy, "still has a second parameter"),
        (_math_data, "still has a second parameter"),
        (_math_stale_view, "did not follow model.double()"),
        (_math_detached, "gradient of the logits does not reach"),
        (_math_frozen_copy, "uses a copy of the embedding"),
        (_math_new_embedding, "model.embed.weight was replaced"),
    ],
)
def test_check_tie_math_layout_names_the_problem(answer, expected):
    message = _failure(checks.check_tie_math_layout, answer)
    assert expected in message and "\n" not in message


def test_math_layout_model_is_untied_and_in_the_formula_layout():
    model = MathLayoutLM(20, 8)
    assert tuple(model.unembed.weight.shape) == (8, 20)
    ids = torch.randint(0, 20, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), model.hidden(ids) @ model.unembed.weight)
    assert count_parameters(model) == 20 * 8 + (8 * 8 + 8) + 8 * 20


def test_eval_every_records_the_curve_without_changing_the_run():
    text = load_text()[:3000]
    kwargs = dict(text=text, d_model=16, n_layers=1, steps=6, batch_size=4, block_size=8)
    plain = train_char_model(dtype=torch.float64, **kwargs)
    curve = train_char_model(dtype=torch.float64, eval_every=2, **kwargs)
    assert curve.train_losses == plain.train_losses and curve.val_loss == plain.val_loss
    assert curve.val_steps == [0, 2, 4, 6] and plain.val_steps == [0, 6]
    assert curve.val_loss_at(0) == curve.initial_val_loss
    assert curve.val_loss_at(6) == curve.val_loss
    with pytest.raises(ValueError, match=r"step must be one of the measured steps \[0, 2, 4, 6\]"):
        curve.val_loss_at(3)
    with pytest.raises(ValueError, match="eval_every"):
        train_char_model(eval_every=0, **kwargs)


# --- hidden tests through the grader: honest answers written differently get full marks ----------

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "08_embeddings_and_weight_tying.ipynb"


def _notebook_cell(grade_id):
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return "".join(cell["source"])
    raise AssertionError(f"no cell {grade_id}")


def _namespace(**answers):
    return {"torch": torch, "nn": nn, "F": F, "MathLayoutLM": MathLayoutLM,
            "count_parameters": count_parameters, **answers}  # fmt: skip


def _hidden_records(grade_id, namespace, tmp_path, monkeypatch):
    """Run the hidden block of a check cell with ``namespace`` and return what it recorded."""
    source = _notebook_cell(f"{grade_id}_check")
    hidden = source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
    log = tmp_path / f"{grade_id}-{len(list(tmp_path.iterdir()))}.jsonl"  # one log per run
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    import helpers.grading

    monkeypatch.setattr(helpers.grading, "_cases", {})
    exec(compile(hidden, grade_id, "exec"), _namespace(**namespace))
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _solution(grade_id):
    namespace = _namespace()
    exec(_notebook_cell(grade_id), namespace)
    return namespace


def _judged(grade_id, name, answer, tmp_path, monkeypatch):
    """The grader's verdict (tools/grading) on ``answer`` against the solution's records."""
    from tools.grading.verdicts import judge

    def by_case(entries):
        return {e["case"]: [e] for e in entries}

    reference = _hidden_records(grade_id, _solution(grade_id), tmp_path, monkeypatch)
    student = _hidden_records(grade_id, {name: answer}, tmp_path, monkeypatch)
    assert len(reference) >= 2 and all("value" in r for r in reference), reference
    return judge(grade_id, by_case(reference), by_case(student))


def _math_module_swap(model):
    """Another honest way: a new output module holding the model itself, no parameter of its own."""

    class Out(nn.Module):
        def forward(self, h):
            return torch.matmul(h, model.embed.weight.transpose(0, 1))

    model.unembed = Out()
    return model


@pytest.mark.slow  # several seconds on a shared machine
def test_grader_verdicts_on_lesson8_answers(tmp_path, monkeypatch):
    """Three honest answers per exercise score full marks through the grader's verdicts; the
    wrong ideas the checks name score 0."""

    def judged(grade_id, name, answer):
        return _judged(grade_id, name, answer, tmp_path, monkeypatch)

    for honest in (_rows_right, _rows_unique, _rows_by_backward):
        assert judged("l8_ex1", "rows_that_learn", honest).correct, honest.__name__
    for wrong in (
        lambda t, V, tied: list(range(V)) if tied else sorted(set(t.flatten().tolist())),
        lambda t, V, tied: sorted(set(t[:, :-1].flatten().tolist())),
    ):
        assert not judged("l8_ex1", "rows_that_learn", wrong).correct
    for honest in (_math_right, _math_right_patched, _math_module_swap):
        assert judged("l8_ex2", "tie_math_layout", honest).correct, honest.__name__
    for wrong in (_math_copy, _math_frozen_copy, _math_detached):
        assert not judged("l8_ex2", "tie_math_layout", wrong).correct, wrong.__name__
    for honest in (_cos_right, _cos_from_vectors, _cos_tensor):
        assert judged("l8_ex3", "predicted_cosine", honest).correct, honest.__name__
    for wrong in (lambda r: 1 / (1 + r), lambda r: (1 + r * r) ** -0.5):
        assert not judged("l8_ex3", "predicted_cosine", wrong).correct


def test_hidden_cases_differ_from_the_visible_ones(tmp_path, monkeypatch):
    rows = _hidden_records("l8_ex1", _solution("l8_ex1"), tmp_path, monkeypatch)
    assert len(rows) == 6 and all(isinstance(r["value"], list) for r in rows)
    cosines = _hidden_records("l8_ex3", _solution("l8_ex3"), tmp_path, monkeypatch)
    ratios = {0.2, 0.8, 2.0, 5.0}
    assert not ratios & set(checks.COSINE_RATIOS)
    assert [round(r["value"], 6) for r in cosines] == [
        round(1 / (1 + x * x), 6) for x in sorted(ratios)
    ]


def test_lesson8_grading_specs():
    from tools.grading.spec import spec_for

    assert spec_for("l8_ex1").forbid == () and spec_for("l8_ex2").forbid == ()
    spec = spec_for("l8_ex3")  # the visible check's tolerance, in the grade too
    assert (spec.rtol, spec.atol) == (0.0, checks.COSINE_TOLERANCE)


# --- C8.5, C8.6: the shipped runs (tools/tying_runs.py -> helpers/data/tying_runs.json) -----------


def test_C8_5_shipped_runs_hold_every_arm_seed_and_checkpoint_of_their_settings():
    from helpers.tying_runs import ARMS, SETTINGS, load_tying_runs

    runs = load_tying_runs()  # checked against the schemas on the way in
    assert runs.tool == "tools/tying_runs.py" and runs.settings == SETTINGS
    every = runs.settings["eval_every"]
    counts = {"tied": 60_960, "untied": 63_744, "tied_aa": 60_960}
    for comparison, arms in ARMS.items():
        assert set(runs.results[comparison]) == set(arms)
        last = runs.settings["steps"][comparison]
        for arm in arms:
            per_seed = runs.results[comparison][arm]
            assert sorted(per_seed, key=int) == [str(s) for s in SETTINGS["seeds"]]
            for run in per_seed.values():
                assert run["val_steps"] == list(range(0, last + 1, every))
                assert all(math.isfinite(x) for x in run["val_losses"])
                assert run["val_losses"][-1] < run["val_losses"][0]  # every run learned
                if comparison == "tying":
                    assert run["n_parameters"] == counts[arm]


def test_C8_5_the_tool_refuses_bad_arms_and_seeds():
    from helpers.tying_runs import run_arm

    with pytest.raises(ValueError, match="comparison"):
        run_arm("depth", "tied", 0, 1)
    with pytest.raises(ValueError, match="arm"):
        run_arm("tying", "default", 0, 1)
    with pytest.raises(ValueError, match="seed"):
        run_arm("tying", "tied", -1, 1)


@pytest.mark.slow  # about ten seconds of training
def test_C8_5_C8_6_a_reduced_rerun_of_the_tool_agrees_with_the_shipped_runs(tmp_path):
    """tools/tying_runs.py rerun at reduced size (seed 0, 50 and 25 steps, the same settings
    otherwise) gives, at each checkpoint, values inside the shipped seeds' spread, and (same
    code, same seed, float64 on one thread) the shipped seed 0's values to 1e-9."""
    from helpers.shipped import agrees_within_spread
    from helpers.tying_runs import load_tying_runs
    from tools import tying_runs as tool

    args = ["--seeds", "0", "--tying-steps", "50", "--scale-steps", "25", "--out", str(tmp_path)]
    assert tool.main(args) == 0
    fresh, shipped = load_tying_runs(folder=tmp_path), load_tying_runs()
    assert fresh.settings["steps"] == {"tying": 50, "scale": 25}
    for comparison, arms in fresh.results.items():
        for arm, per_seed in arms.items():
            steps, values = per_seed["0"]["val_steps"], per_seed["0"]["val_losses"]
            for k, value in zip(steps, values, strict=True):
                at = shipped.results[comparison][arm]["0"]["val_steps"].index(k)
                over_seeds = [
                    run["val_losses"][at] for run in shipped.results[comparison][arm].values()
                ]
                ok, sentence = agrees_within_spread(value, over_seeds)
                assert ok, (comparison, arm, k, sentence)
                assert abs(value - over_seeds[0]) < 1e-9, (comparison, arm, k)


def test_C8_5_the_live_run_is_the_shipped_runs_first_steps():
    """compare_tying (the lesson's live run) and the tool's run_arm are the same runs."""
    from helpers.tying_runs import run_arm

    live = compare_tying(seed=1, steps=3, dtype=torch.float64, eval_every=3)
    for arm in ("tied", "untied"):
        tool = run_arm("tying", arm, 1, 3, {**_settings(), "eval_every": 3})
        assert (
            tool.val_losses == live[arm].val_losses and tool.train_losses == live[arm].train_losses
        )


def _settings():
    from helpers.tying_runs import SETTINGS

    return dict(SETTINGS)


def test_C8_5_paired_differences_figure_describes_its_means():
    """The C8.5 figure's description is computed from the curves: each comparison's mean over
    the seeds at the first and at the last step (changing the data changes the words)."""
    import matplotlib.pyplot as plt

    from helpers.figures import description_of
    from helpers.plots.tying import plot_paired_differences

    ax = plot_paired_differences(
        [25, 50], {"untied - tied": [[-0.30, 0.02], [-0.10, 0.00]], "A/A": [[0.04, 0.0]] * 3}
    )
    text = description_of(ax.figure)
    plt.close(ax.figure)
    assert (
        "'untied - tied' (solid, 2 seeds) has a mean of -0.20 at step 25 and 0.01 at step 50"
        in text
    )
    assert "'A/A' (dotted, 3 seeds) has a mean of 0.04 at step 25" in text


def test_plot_paired_differences_bad_arguments():
    from helpers.plots.tying import plot_paired_differences

    with pytest.raises(ValueError, match="steps must hold at least one step"):
        plot_paired_differences([], {"a": [[]]})
    with pytest.raises(TypeError, match="differences must be a dict of 1 to 3 comparisons"):
        plot_paired_differences([1], [[0.0]])
    with pytest.raises(TypeError, match="differences must be a dict of 1 to 3 comparisons"):
        plot_paired_differences([1], {k: [[0.0]] for k in "abcd"})
    with pytest.raises(ValueError, match=r"differences\['a'\] must hold one curve per seed"):
        plot_paired_differences([1, 2], {"a": [[0.0]]})


def test_C8_5_shipped_runs_resolve_what_the_lesson_says():
    # lesson 8's "what the run could see" after 1,000 steps, from the shipped runs: with the
    # spread of its own 8 paired differences the rule (paired t-test at 5%) detects 0.025 nats at
    # 80% power and 0.015 nats 41% of the time; with the A/A pair's spread it needs 0.057 nats
    from helpers.paired import decide, detectable_difference, power_at
    from helpers.tying_runs import load_tying_runs

    runs = load_tying_runs()
    tying, seeds = runs.results["tying"], [str(s) for s in runs.settings["seeds"]]

    def at_end(arm):
        return [tying[arm][s]["val_losses"][-1] - tying["tied"][s]["val_losses"][-1] for s in seeds]

    end = decide(at_end("untied"))
    assert not end.decided and len(seeds) == 8
    sd = end.se * len(seeds) ** 0.5
    sd_aa = (sum(x * x for x in at_end("tied_aa")) / len(seeds)) ** 0.5
    assert round(detectable_difference(8, sd), 3) == 0.025
    assert round(power_at(8, 0.015, sd), 2) == 0.41
    assert round(detectable_difference(8, sd_aa), 3) == 0.057
