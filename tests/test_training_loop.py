"""The course's one training loop (helpers.training.TrainingRun), which lessons 4, 5, 8 and 9 run:
its schedules, its evaluation cadence, its arguments, and that every lesson's run goes through it.

The reference below is the plain loop written out by hand (AdamW, seeded windows, zero_grad,
backward, optional clipping, step), in the order the three loops of the course used before they
were one; the shared loop must give the very same losses, bit for bit.
"""

import pytest
import torch
from torch import nn

import helpers
import helpers.training as training
from helpers import TransformerLM
from helpers.length import train_at_length
from helpers.pretrain import Corpus, Pretraining
from helpers.reproducible import default_dtype
from helpers.text import CharTokenizer, load_text, split_ids
from helpers.training import Schedule, TrainingRun, evaluate, get_batch, train_lm
from helpers.warmup import train_with_warmup

F64 = torch.float64


@pytest.fixture(scope="module")
def ids():
    text = load_text()
    return split_ids(CharTokenizer(text).encode(text))


def _model(seed=0, vocab=58, **options):
    torch.manual_seed(seed)
    with default_dtype(F64):
        return TransformerLM(vocab, 16, 1, 2, max_len=16, **options)


def _reference(model, train_ids, val_ids, steps, batch_size, block_size, lr, seed, *,
               lrs=None, betas=(0.9, 0.999), clip=1.0, eval_every=None):  # fmt: skip
    """The loop written out by hand; ``lrs[t]`` the rate of step t (None: ``lr`` throughout)."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=0.0)
    losses, val = [], {0: evaluate(model, val_ids, block_size)}
    model.train()
    for t in range(steps):
        if lrs is not None:
            for group in optimizer.param_groups:
                group["lr"] = lrs[t]
        tokens = get_batch(train_ids, batch_size, block_size, generator)
        loss = model.loss(tokens)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
        if (eval_every and (t + 1) % eval_every == 0) or t + 1 == steps:
            val[t + 1] = evaluate(model, val_ids, block_size)
    return losses, val


def test_the_loop_equals_the_loop_written_out_constant_rate_and_clipping(ids):
    train_ids, val_ids = ids
    with helpers.reproducible.one_thread():
        ref_losses, ref_val = _reference(_model(), train_ids, val_ids, 12, 4, 16, 5e-3, 3,
                                         eval_every=5)  # fmt: skip
    result = train_lm(_model(), train_ids, val_ids, 12, 4, 16, 5e-3, 3, eval_every=5)
    assert result.train_losses == ref_losses  # exactly
    assert dict(zip(result.val_steps, result.val_losses, strict=True)) == ref_val
    assert result.val_steps == [0, 5, 10, 12]


def test_the_loop_equals_the_loop_written_out_warm_up_betas_no_clipping(ids):
    """Lesson 5's runs: the warm-up rate at each step, betas (0.9, 0.98), no clipping."""
    train_ids, val_ids = ids
    lrs = [1e-2 * min(1.0, (t + 1) / 4) for t in range(10)]
    with helpers.reproducible.one_thread():
        ref_losses, ref_val = _reference(_model(norm="post"), train_ids, val_ids, 10, 4, 16,
                                         1e-2, 1, lrs=lrs, betas=(0.9, 0.98), clip=None)  # fmt: skip
    result = train_with_warmup(_model(norm="post"), train_ids, val_ids, steps=10, warmup_steps=4,
                               lr=1e-2, batch_size=4, block_size=16, seed=1)  # fmt: skip
    assert result.train_losses == ref_losses
    assert (result.initial_val_loss, result.val_loss) == (ref_val[0], ref_val[10])
    assert result.val_steps == [0, 10]  # no cadence asked: the start and the end
    # and the warm-up does change the run (the schedule is really applied)
    flat = train_lm(_model(norm="post"), train_ids, val_ids, 10, 4, 16, 1e-2, 1,
                    betas=(0.9, 0.98), clip_norm=None)  # fmt: skip
    assert flat.train_losses[0] == result.train_losses[0]  # the same first batch and weights
    assert flat.train_losses[1:] != result.train_losses[1:]


def test_clipping_is_applied_when_asked(ids):
    train_ids, val_ids = ids
    clipped = train_lm(_model(), train_ids, val_ids, 6, 4, 16, 5e-2, 0, clip_norm=1e-3)
    free = train_lm(_model(), train_ids, val_ids, 6, 4, 16, 5e-2, 0, clip_norm=None)
    assert clipped.train_losses[0] == free.train_losses[0]
    assert clipped.train_losses[1:] != free.train_losses[1:]


def test_every_lesson_trains_through_the_one_loop(ids, monkeypatch):
    """Lesson 4 (train_at_length), 5 (train_with_warmup), 8 (train_char_model) and 9
    (Pretraining) all step through TrainingRun._update: counted here."""
    calls = {"n": 0}
    real = TrainingRun._update

    def counting(self):
        calls["n"] += 1
        return real(self)

    monkeypatch.setattr(TrainingRun, "_update", counting)
    train_ids, val_ids = ids
    train_at_length(train_len=16, steps=2, d_model=16, n_layers=1, n_heads=2)
    train_with_warmup(_model(), train_ids, val_ids, steps=3, warmup_steps=1)
    training.train_char_model(d_model=16, n_layers=1, n_heads=2, steps=4, block_size=16)
    corpus = Corpus.from_text(load_text(), val_tokens=64)
    Pretraining(corpus, d_model=16, n_layers=1, n_heads=2, block_size=16, eval_every=2).train(
        5, "none"
    )
    assert calls["n"] == 2 + 3 + 4 + 5
    assert issubclass(Pretraining, TrainingRun)


def test_schedules():
    assert Schedule().lr(0, 3e-3) == 3e-3 and Schedule().lr(10_000, 3e-3) == 3e-3
    warm = Schedule("warmup", 4)
    assert [warm.lr(t, 1.0) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert Schedule("warmup", 0).lr(0, 2.0) == 2.0  # no warm-up
    with pytest.raises(ValueError, match="kind must be one of 'constant', 'warmup'"):
        Schedule("cosine")
    with pytest.raises(ValueError, match="warmup_steps is for kind='warmup'"):
        Schedule("constant", 3)
    with pytest.raises(ValueError, match="warmup_steps must be a whole number >= 0"):
        Schedule("warmup", -1)


def test_a_run_resumes_where_it_stopped(ids):
    train_ids, val_ids = ids
    whole = TrainingRun(_model(), train_ids, val_ids, batch_size=4, block_size=16, eval_every=3)
    whole.train(7)
    parts = TrainingRun(_model(), train_ids, val_ids, batch_size=4, block_size=16, eval_every=3)
    parts.train(4).train(7)
    assert parts.result.train_losses == whole.result.train_losses
    # evaluation draws nothing: measuring at the end of the first call (step 4) changes nothing
    assert parts.result.val_steps == [0, 3, 4, 6, 7] and whole.result.val_steps == [0, 3, 6, 7]
    assert parts.val_loss == whole.val_loss == whole.result.val_loss
    assert repr(parts) == f"TrainingRun(step=7, parameters={whole.result.n_parameters:,})"


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(block_size=2.0), TypeError, "block_size"),
        (dict(lr=0.0), ValueError, "lr must be a finite number > 0"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(eval_every=0), ValueError, "eval_every"),
        (dict(schedule="warmup"), TypeError, "schedule must be a helpers.training.Schedule"),
        (dict(betas=(0.9,)), ValueError, "betas must be two numbers in"),
        (dict(betas=(0.9, 1.0)), ValueError, "betas must be two numbers in"),
        (dict(clip_norm=-1.0), ValueError, "clip_norm"),
        (dict(dtype=torch.float16), ValueError, "dtype must be torch.float32 or torch.float64"),
    ],
)
def test_bad_arguments_name_the_argument(ids, kwargs, error, words):
    train_ids, val_ids = ids
    model = _model()
    with pytest.raises(error, match=words):
        TrainingRun(model, train_ids, val_ids, **{"block_size": 16, **kwargs})
    assert next(model.parameters()).dtype == F64  # a refused run leaves the model as it was


def test_bad_model_ids_and_steps(ids):
    train_ids, val_ids = ids
    with pytest.raises(TypeError, match="model must be a TransformerLM"):
        TrainingRun(nn.Linear(2, 2), train_ids, val_ids)
    with pytest.raises(ValueError, match="train_ids must have 1 dimensions"):
        TrainingRun(_model(), train_ids[None], val_ids, block_size=16)
    run = TrainingRun(_model(), train_ids, val_ids, block_size=16, batch_size=2).train(2)
    with pytest.raises(ValueError, match="already at step 2"):
        run.train(1)
    with pytest.raises(ValueError, match="progress must be one of"):
        run.train(3, progress="bar")
    assert run.step == 2


def test_text_names_are_importable_from_where_they_were():
    import helpers.text as text

    for name in ("TEXTS", "load_text", "CharTokenizer", "split_ids", "ngram_loss"):
        assert getattr(training, name) is getattr(text, name)
    assert helpers.CharTokenizer is text.CharTokenizer and helpers.load_text is text.load_text
    assert training.default_dtype is helpers.reproducible.default_dtype
