"""Lesson 9, training the full model (helpers.pretrain): C9.1 and C9.3, resuming, bad input.

Small models on the shipped excerpt, so the whole file runs in a few seconds; the lesson's own
run (the whole text, C9.1's measured figures) is executed by the notebook under nbval.
"""

from __future__ import annotations

import math
import os
import signal
from unittest import mock

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from helpers.paired import TWO_LOOK_LEVEL  # noqa: E402
from helpers.plots.pretrain import plot_losses, plot_side_by_side  # noqa: E402
from helpers.pretrain import (  # noqa: E402
    LESSON_CONFIG,
    Corpus,
    PretrainConfig,
    Pretraining,
    pretrain,
)
from helpers.side_by_side import (  # noqa: E402
    AA_INIT_OFFSET,
    BASE_INIT,
    FACTORS,
    SHEET_FACTORS,
    GridRun,
    SideBySide,
    rule_summary,
    side_by_side,
)
from helpers.text import load_text  # noqa: E402
from helpers.training import CHECKPOINT_EVERY, train_char_model  # noqa: E402

TINY = dict(d_model=16, n_layers=1, n_heads=2, block_size=16, batch_size=4, lr=5e-3, eval_every=4)


@pytest.fixture(scope="module")
def corpus():
    return Corpus.from_text(load_text(), val_tokens=512)  # the 31,742-character excerpt


def _same_state(a: Pretraining, b: Pretraining, curves: bool = True) -> None:
    assert a.step == b.step
    assert a.result.train_losses == b.result.train_losses  # exactly, not approximately
    if curves:  # (a run asked for 6 steps also measures the held-out loss at step 6)
        assert a.result.val_steps == b.result.val_steps
        assert a.result.val_losses == b.result.val_losses
    for (name, p), q in zip(
        a.model.state_dict().items(), b.model.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        sa, sb = a.optimizer.state.get(p, {}), b.optimizer.state.get(q, {})
        assert sa.keys() == sb.keys()
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k
    assert torch.equal(a.generator.get_state(), b.generator.get_state())


# --- C9.1 ----------------------------------------------------------------------------------------


def test_C9_1_corpus_and_baselines(corpus):
    assert corpus.tokenizer.vocab_size == 58
    assert len(corpus.val_ids) == 513
    assert corpus.uniform == pytest.approx(math.log(58))
    assert corpus.bigram < corpus.unigram < corpus.uniform  # context helps a counting model too
    assert corpus.baselines == {
        "uniform": corpus.uniform,
        "unigram": corpus.unigram,
        "bigram": corpus.bigram,
    }


def test_C9_1_the_shipped_text_by_default():
    full = Corpus.from_text(val_tokens=64)
    assert full.tokenizer.vocab_size == 65
    assert len(full.train_ids) == round(1_115_394 * 0.9)


@pytest.mark.slow
def test_C9_1_training_goes_well_below_both_baselines(corpus):
    run = pretrain(60, corpus, progress="none", d_model=32, n_layers=2, n_heads=4,
                   block_size=32, batch_size=8, lr=5e-3, eval_every=20)  # fmt: skip
    assert run.result.val_steps == [0, 20, 40, 60]
    assert run.val_loss < corpus.unigram - 0.3 < corpus.uniform - 0.3
    assert run.val_loss < run.result.initial_val_loss
    assert len(run.result.train_losses) == 60 and run.seconds > 0
    assert run.model.config.positional == "sinusoidal" and run.model.tied  # the default model
    assert next(run.model.parameters()).dtype == torch.float64


def test_C9_1_the_loop_is_lesson_8s(corpus):
    """Pretraining is the course's one loop (helpers.training.TrainingRun), lesson 8's: the same
    model, the same batches and updates give the very same training losses."""
    run = Pretraining(corpus, **TINY, seed=3).train(8, "none")
    lesson8 = train_char_model(load_text(), 16, 1, 2, steps=8, batch_size=4, block_size=16,
                               lr=5e-3, seed=3, dtype=torch.float64)  # fmt: skip
    assert run.result.train_losses == lesson8.train_losses


def test_C9_1_lesson_config_is_the_coherent_default_model():
    assert LESSON_CONFIG.dtype == torch.float64
    assert (LESSON_CONFIG.positional, LESSON_CONFIG.norm, LESSON_CONFIG.activation) == (
        "sinusoidal",
        "pre",
        "gelu",
    )
    assert LESSON_CONFIG.tie_weights is True


# --- resuming and rerunning ----------------------------------------------------------------------


def _interrupt_at(run: Pretraining, call: int, how: str):
    """Make the run's ``call``-th optimizer step (1-based) be interrupted *after* it changed the
    weights: by raising KeyboardInterrupt, or by a real SIGINT to this process."""
    original = run.optimizer.step
    count = {"n": 0}

    def step(*args, **kwargs):
        out = original(*args, **kwargs)
        count["n"] += 1
        if count["n"] == call:
            if how == "raise":
                raise KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGINT)  # Python raises KeyboardInterrupt here
        return out

    run.optimizer.step = step
    return lambda: setattr(run.optimizer, "step", original)


@pytest.mark.parametrize("how", ["raise", "sigint"])
def test_interrupted_run_resumes_to_exactly_the_uninterrupted_result(corpus, how):
    whole = Pretraining(corpus, **TINY).train(12, "none")
    partial = Pretraining(corpus, **TINY).train(6, "none")  # the state after 6 completed steps
    run = Pretraining(corpus, **TINY)
    undo = _interrupt_at(run, 7, how)
    # Python's own SIGINT handler, as in a kernel (pytest-xdist's workers ignore SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run.train(12, "none")
    finally:
        signal.signal(signal.SIGINT, previous)
    undo()
    _same_state(run, partial, curves=False)  # consistent at its last completed step
    assert run.result.val_steps == [0, 4]
    run.train(12, "none")
    _same_state(run, whole)


def test_interrupt_during_evaluation_rolls_back_the_step(corpus, monkeypatch):
    import helpers.training as training_module  # the loop's module: where it evaluates

    whole = Pretraining(corpus, **TINY).train(12, "none")
    run = Pretraining(corpus, **TINY)
    real = training_module.evaluate
    calls = {"n": 0}

    def evaluate(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the measurement after step 8
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(training_module, "evaluate", evaluate)
    with pytest.raises(KeyboardInterrupt):
        run.train(12, "none")
    assert run.step == 7 and run.result.val_steps == [0, 4]
    monkeypatch.setattr(training_module, "evaluate", real)
    run.train(12, "none")
    _same_state(run, whole)


def _interrupt_at_calls(run: Pretraining, calls: set[int]):
    """Raise KeyboardInterrupt after each of the run's optimizer steps numbered in ``calls``."""
    original = run.optimizer.step
    count = {"n": 0}

    def step(*args, **kwargs):
        out = original(*args, **kwargs)
        count["n"] += 1
        if count["n"] in calls:
            raise KeyboardInterrupt
        return out

    run.optimizer.step = step
    return lambda: setattr(run.optimizer, "step", original)


def test_the_run_is_copied_at_checkpoints_not_every_step(corpus):
    real = Pretraining._snapshot
    with mock.patch.object(Pretraining, "_snapshot", autospec=True, side_effect=real) as copies:
        run = Pretraining(corpus, **{**TINY, "eval_every": 40}).train(120, "none")
    # at the start of train, after each of the 3 evaluations, and at steps 50 and 100
    assert copies.call_count == 1 + 3 + 120 // CHECKPOINT_EVERY
    assert run.step == 120


def test_interrupted_far_from_a_checkpoint_resumes_exactly(corpus):
    settings = {**TINY, "eval_every": 100}  # no evaluation before step 60: only step 0's copy
    whole = Pretraining(corpus, **settings).train(60, "none")
    partial = Pretraining(corpus, **settings).train(29, "none")
    run = Pretraining(corpus, **settings)
    undo = _interrupt_at_calls(run, {30})
    with pytest.raises(KeyboardInterrupt):
        run.train(60, "none")
    undo()
    _same_state(run, partial, curves=False)  # 29 steps run again from the copy at step 0
    run.train(60, "none")
    _same_state(run, whole)


def test_interrupted_again_while_rolling_back_stays_at_the_checkpoint(corpus):
    settings = {**TINY, "eval_every": 100}
    whole = Pretraining(corpus, **settings).train(60, "none")
    run = Pretraining(corpus, **settings)
    fresh = Pretraining(corpus, **settings)
    undo = _interrupt_at_calls(run, {30, 35})  # 35: the 5th step of the catching up
    with pytest.raises(KeyboardInterrupt):
        run.train(60, "none")
    undo()
    assert run.step == 0 and run.result.train_losses == [] and run.result.val_steps == [0]
    _same_state(run, fresh)
    run.train(60, "none")
    _same_state(run, whole)


def test_training_in_two_calls_equals_one(corpus):
    one = Pretraining(corpus, **TINY).train(12, "none")
    two = Pretraining(corpus, **TINY).train(8, "none").train(12, "none")
    _same_state(one, two)
    assert two.train(12, "none").step == 12  # already there: nothing more


def test_a_new_run_starts_from_scratch_and_leaves_no_state_behind(corpus):
    torch.manual_seed(123)
    rng, dtype, threads = torch.get_rng_state(), torch.get_default_dtype(), torch.get_num_threads()
    a = Pretraining(corpus, **TINY).train(5, "none")
    assert torch.equal(torch.get_rng_state(), rng)  # the global random state untouched
    assert torch.get_default_dtype() == dtype and torch.get_num_threads() == threads
    b = Pretraining(corpus, **TINY).train(5, "none")
    _same_state(a, b)
    assert a.model is not b.model and a.optimizer is not b.optimizer


def test_interrupt_message_says_how_to_continue(corpus, capsys):
    run = Pretraining(corpus, **TINY)
    undo = _interrupt_at(run, 3, "raise")
    with pytest.raises(KeyboardInterrupt):
        run.train(10, "none")
    undo()
    out = capsys.readouterr().out
    assert "step 2 of 10" in out and "train(10)" in out


# --- the progress display -------------------------------------------------------------------------


def test_progress_widget_updates_at_most_four_times_a_second(corpus, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda w: shown.append(w))
    run = Pretraining(corpus, **TINY)
    values = []
    run.train(20, "widget")
    (box,) = shown
    bar, label = box.children
    assert bar.value == 20 and bar.max == 20 and bar.bar_style == "success"
    assert "step 20 / 20" in label.value and "held-out" in label.value
    # count the updates of a second run
    shown.clear()
    run2 = Pretraining(corpus, **TINY)
    import helpers.progress as progress_module

    real = progress_module._WidgetProgress._show

    def counting(self, *args, **kwargs):
        values.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(progress_module._WidgetProgress, "_show", counting)
    run2.train(40, "widget")
    assert len(values) <= run2.seconds / progress_module._WidgetProgress.INTERVAL_S + 2


def test_progress_text_and_none(corpus, capsys):
    Pretraining(corpus, **TINY).train(4, "none")
    assert capsys.readouterr().out == ""
    Pretraining(corpus, **TINY).train(4, "auto")  # plain Python: no kernel, nothing shown
    assert capsys.readouterr().out == ""
    Pretraining(corpus, **TINY).train(4, "text")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "step 4 / 4" in out


# --- C9.3 ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid(corpus):
    return side_by_side(steps=6, seeds=(0, 1), corpus=corpus, **TINY)


def test_C9_3_one_factor_at_a_time_at_equal_budget(grid, corpus):
    rows = grid.table()
    assert [(r["factor"], r["choice"]) for r in rows] == [
        (f, c) for f in SHEET_FACTORS for c in FACTORS[f]
    ]
    base = grid.runs[("position", "sinusoidal")]
    for factor in SHEET_FACTORS:  # the base model is trained once and shared by every factor
        first = next(iter(FACTORS[factor]))
        assert grid.runs[(factor, first)] is base
    for runs in grid.runs.values():
        assert [r.seed for r in runs] == [0, 1]
        assert all(r.val_steps == [0, 4, 6] for r in runs)  # the same budget for every choice
    V, d = corpus.tokenizer.vocab_size, TINY["d_model"]
    tied, untied = grid.row("tying", "tied"), grid.row("tying", "untied")
    assert untied["parameters"] - tied["parameters"] == V * d
    learned = grid.row("position", "learned")
    assert learned["parameters"] - tied["parameters"] == TINY["block_size"] * d
    for r in rows:
        finals = [x.val_loss for x in grid.runs[(r["factor"], r["choice"])]]
        assert r["finals"] == finals and r["mean"] == pytest.approx(sum(finals) / 2)
        assert r["spread"] == pytest.approx(max(finals) - min(finals))


def test_C9_3_each_row_differs_from_the_base_in_its_named_factor_only(grid):
    # the model options each run was built with: the factor's own fields changed, nothing else;
    # in particular the initialization and embedding scale are the base's in every sheet row
    base = grid.runs[("position", "sinusoidal")][0].options
    assert {k: base[k] for k in BASE_INIT} == BASE_INIT
    for (factor, choice), runs in grid.runs.items():
        for r in runs:
            changed = {k for k in base if r.options[k] != base[k]}
            assert changed == {k for k, v in FACTORS[factor][choice].items() if base[k] != v}
            assert {k: r.options[k] for k in BASE_INIT} == BASE_INIT, (factor, choice)


def test_C9_3_initialization_is_a_factor_and_position_is_shown_both_ways(corpus):
    g = side_by_side(
        steps=2, seeds=(0,), corpus=corpus, factors=["initialization", "position, GPT-2 init"],
        **TINY,
    )  # fmt: skip
    gpt2 = g.runs[("initialization", "GPT-2, unscaled")]
    assert g.runs[("position, GPT-2 init", "sinusoidal")] is gpt2  # the group's reference
    for choice in ("learned", "rotary"):
        r = g.runs[("position, GPT-2 init", choice)][0]
        assert (r.options["init"], r.options["scale_embeddings"]) == ("gpt2", False)
    assert g.reference("position, GPT-2 init") == "sinusoidal"


def test_C9_3_aa_runs_share_the_batches_and_change_the_initial_draw(corpus):
    g = side_by_side(steps=4, seeds=(0, 1, 2), corpus=corpus, factors=["tying"], aa=2, **TINY)
    base = g.runs[("tying", "tied")]
    assert g.base_runs is base and len(g.aa_runs) == 2
    for m, comparison in enumerate(g.aa_runs, start=1):
        assert [r.seed for r in comparison] == [0, 1, 2]
        assert [r.init_seed for r in comparison] == [AA_INIT_OFFSET * m + s for s in (0, 1, 2)]
        assert all(r.options == base[0].options for r in comparison)
        # another initial draw: the held-out loss differs already at step 0
        assert all(
            a.val_losses[0] != b.val_losses[0] for a, b in zip(comparison, base, strict=True)
        )
    # compared in disjoint pairs: the base's runs with repeat 1; repeat 2 is left over (no run
    # enters two comparisons, so the comparisons are independent given the batches)
    diffs = g.aa_differences()
    assert diffs == [[a.val_loss - b.val_loss for a, b in zip(g.aa_runs[0], base, strict=True)]]
    rate = g.aa_rate()
    assert rate.comparisons == 1 and rate.claimed == TWO_LOOK_LEVEL
    assert "measured on 1 disjoint A/A comparisons" in rule_summary(g)


def test_C9_3_verdicts_follow_the_rule_and_need_three_seeds(grid, corpus):
    assert grid.verdict("tying", "untied") is None  # 2 seeds: the rule refuses
    assert grid.row("tying", "untied")["verdict"] == "too few seeds (2)"
    assert "too few for the rule" in rule_summary(grid)
    g = side_by_side(steps=4, seeds=(0, 1, 2), corpus=corpus, factors=["tying"], **TINY)
    v = g.verdict("tying", "untied")
    d = g.differences("tying", "untied")
    assert (
        list(v.differences)
        == d
        == [
            u.val_loss - t.val_loss
            for t, u in zip(g.runs[("tying", "tied")], g.runs[("tying", "untied")], strict=True)
        ]
    )
    assert g.row("tying", "untied")["verdict"] == v.text
    assert g.verdict("tying", "tied") is None  # the reference is not compared with itself


def test_C9_3_grid_round_trips_through_its_data(corpus):
    import json

    g = side_by_side(steps=2, seeds=(0, 1, 2), corpus=corpus, factors=["tying"], aa=1, **TINY)
    back = SideBySide.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back.table() == g.table() and back.base == g.base
    assert back.runs[("tying", "tied")] is back.base_runs  # shared runs are shared again
    assert back.aa_differences() == g.aa_differences()


def test_C9_3_past_the_training_length(grid):
    sin, learned, rot = (grid.row("position", c) for c in ("sinusoidal", "learned", "rotary"))
    assert math.isfinite(sin["at_long"]) and math.isfinite(rot["at_long"])
    assert learned["at_long"] is None and "cannot run" in learned["long_note"]
    assert "0..15" in learned["long_note"]
    assert all(grid.row("tying", c)["at_long"] is None for c in ("tied", "untied"))


def test_C9_3_runs_differ_by_their_choice_only(grid):
    # different choices give different models (the factor reached the model) ...
    finals = {k: tuple(r.val_loss for r in v) for k, v in grid.runs.items()}
    assert len(set(finals.values())) == 7  # 7 distinct models: base + 6 variants
    # ... and seeds change the weights and the batches
    assert len({r.val_loss for r in grid.runs[("norm placement", "post-norm")]}) == 2


def test_C9_3_table_text_and_markdown(grid):
    lines = grid.lines()
    assert len(lines) == 11 and "cannot run" in lines[2] and "too few seeds (2)" in lines[2]
    md = grid.markdown().splitlines()
    assert len(md) == 12 and md[0].startswith("| factor | choice | parameters | final held-out")
    finals = ", ".join(f"{x:.3f}" for x in grid.row("position", "learned")["finals"])
    assert md[3].startswith("| position | learned | ") and f"| {finals} |" in md[3]


def test_C9_3_some_factors_only(corpus):
    small = side_by_side(steps=2, seeds=(5,), corpus=corpus, factors=["tying"], **TINY)
    assert list(small.runs) == [("tying", "tied"), ("tying", "untied")]
    assert isinstance(small, SideBySide) and isinstance(small.runs[("tying", "tied")][0], GridRun)


def test_plots(grid, corpus):
    import matplotlib.pyplot as plt

    run = Pretraining(corpus, **TINY).train(4, "none")
    ax = plot_losses(run)
    assert len(ax.lines) == 5  # training, held-out, three baselines
    axes = plot_side_by_side(grid)
    assert (
        len(axes) == 4 and len(axes[0].lines) == 3 * 3 + 1
    )  # 3 choices x (mean + 2 seeds) + unigram
    plt.close("all")


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(d_model=0), ValueError, "d_model"),
        (dict(block_size=1), ValueError, "block_size"),
        (dict(lr=-1.0), ValueError, "lr"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(dtype=torch.float16), ValueError, "dtype"),
        (dict(tie_weights="yes"), TypeError, "tie_weights"),
        (dict(positional="relative"), ValueError, "positional"),
        (dict(steps=10), TypeError, "unknown settings"),
    ],
)
def test_bad_settings(corpus, kwargs, error, words):
    with pytest.raises(error, match=words):
        Pretraining(corpus, **{**TINY, **kwargs})


def test_bad_train_arguments(corpus):
    run = Pretraining(corpus, **TINY).train(4, "none")
    with pytest.raises(ValueError, match="already at step 4"):
        run.train(3)
    with pytest.raises(ValueError, match="steps"):
        run.train(0)
    with pytest.raises(TypeError, match="steps"):
        run.train(5.0)
    with pytest.raises(ValueError, match="progress"):
        run.train(5, progress="bar")
    assert run.step == 4


def test_bad_corpus():
    with pytest.raises(TypeError, match="corpus"):
        Pretraining("some text")
    with pytest.raises(TypeError, match="text"):
        Corpus.from_text(b"bytes")
    with pytest.raises(ValueError, match="val_tokens"):
        Corpus.from_text("abcdefghij" * 10, val_tokens=50)
    tiny = Corpus.from_text("abcdefghij" * 10, val_tokens=5)
    with pytest.raises(ValueError, match="block_size"):
        Pretraining(tiny, **TINY)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(seeds=3), TypeError, "seeds"),
        (dict(seeds=(1, 1)), ValueError, "distinct"),
        (dict(seeds=()), ValueError, "seeds"),
        (dict(factors=["depth"]), ValueError, "factor"),
        (dict(factors=[]), ValueError, "factors"),
        (dict(positional="rotary"), TypeError, "grid's own choices"),
        (dict(init="gpt2"), TypeError, "grid's own choices"),
        (dict(init_seed=3), TypeError, "grid's own choices"),
        (dict(seeds=(0, 1000)), ValueError, "below 1000"),
        (dict(aa=-1), ValueError, "aa"),
        (dict(level=0), ValueError, "level"),
        (dict(level=1.5), ValueError, "level"),
        (dict(long_factor=1), ValueError, "long_factor"),
        (dict(steps=0), ValueError, "steps"),
        (dict(corpus="text"), TypeError, "corpus"),
    ],
)
def test_bad_side_by_side_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        side_by_side(**{"steps": 1, "seeds": (0,), **TINY, **kwargs})


def test_config_is_validated_on_its_own():
    with pytest.raises(ValueError, match="eval_every"):
        PretrainConfig(eval_every=0)


def test_with_val_tokens_measures_on_fewer_characters(corpus):
    small = corpus.with_val_tokens(100)
    assert torch.equal(small.val_ids, corpus.val_ids[:101])
    assert small.tokenizer is corpus.tokenizer and small.train_ids is corpus.train_ids
    assert small.uniform == corpus.uniform and small.unigram != corpus.unigram
    with pytest.raises(ValueError, match="val_tokens"):
        corpus.with_val_tokens(513)
