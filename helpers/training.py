# Past ~450 lines on purpose: one job (the course's one loop), its rollback kept beside the step it undoes.
"""The course's one training loop (lessons 4, 5, 8 and 9), and lesson 8's tied/untied runs.

Every lesson that trains a model trains it here: lesson 4's length experiment
(:func:`helpers.length.train_at_length`, C4.7), lesson 5's warm-up runs
(:func:`helpers.warmup.train_with_warmup`, C5.7), lesson 8's runs (:func:`train_lm`,
:func:`train_char_model`, :func:`compare_tying`, C8.5, C8.6) and lesson 9's
(:class:`helpers.pretrain.Pretraining`, C9.1, C9.3). What differs between them is an argument of
:class:`TrainingRun`: the learning-rate schedule, the evaluation cadence, Adam's betas, clipping.

    next-token loss  L = -(1/N) sum_t log softmax(logits_t)[x_{t+1}]       (cross-entropy, nats)
    one step t       g = grad L on batch_size random windows (drawn from a seeded generator)
                     g <- g * min(1, clip_norm / ||g||)                    (clip_norm None: as is)
                     AdamW(betas, weight decay 0) with the rate lr_t = lr * s(t)
    schedule s(t)    constant: 1;   warm-up: min(1, (t + 1) / warmup_steps)   (t = 0, 1, ...)
    evaluation       the held-out loss at step 0, after every eval_every steps, and at the end

Everything is seeded and runs on one CPU thread, so the same call gives the same numbers on the
same machine; the text and its tokenizer come from :mod:`helpers.text`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields, replace

import torch
from torch import nn

from . import _validate as check
from .batches import evaluate, get_batch
from .model import LESSON_MODEL, LMConfig, TransformerLM, seeded_model
from .params import count_parameters
from .progress import PROGRESS, make_progress
from .reproducible import default_dtype, one_thread
from .schedules import SCHEDULES, Schedule

# The text and its tokenizer live in helpers.text, a step's windows and the held-out loss in
# helpers.batches, the learning-rate schedules in helpers.schedules; importable from here too.
from .text import TEXTS, CharTokenizer, load_text, ngram_loss, split_ids

__all__ = [
    "SCHEDULES",
    "Schedule",
    "get_batch",
    "evaluate",
    "TrainResult",
    "TrainingRun",
    "train_lm",
    "train_char_model",
    "compare_tying",
    "LESSON_TRAINING",
    # from helpers.text and helpers.reproducible, importable from here as before
    "TEXTS",
    "load_text",
    "CharTokenizer",
    "split_ids",
    "ngram_loss",
    "default_dtype",
]


@dataclass(frozen=True)
class TrainingDefaults:
    """Lessons 8 and 9. The lesson model's training settings: ``batch_size`` windows per step,
    AdamW at the rate ``lr`` (the lesson model's sizes are :data:`helpers.model.LESSON_MODEL`)."""

    batch_size: int
    lr: float


#: A failed step is rolled back from a copy of the run taken at the start of each ``train``
#: call, after every evaluation and every CHECKPOINT_EVERY steps (copying every step cost about
#: 2 % of lesson 9's step); the steps since are run again (:meth:`TrainingRun._roll_back`).
CHECKPOINT_EVERY = 50

#: How the lesson model (:data:`helpers.model.LESSON_MODEL`) is trained in lessons 8 and 9:
#: batches of 16, AdamW at 5e-3; every run of the lesson model takes them from here.
LESSON_TRAINING = TrainingDefaults(batch_size=16, lr=5e-3)


@dataclass
class TrainResult:
    """What a :class:`TrainingRun` measured: the loss of every step, validation loss before and
    after, and the validation curve: ``val_losses[k]`` measured after ``val_steps[k]`` steps (0
    and the last step always; every ``eval_every`` steps in between if asked)."""

    train_losses: list[float] = field(default_factory=list)
    initial_val_loss: float = math.nan
    val_loss: float = math.nan
    n_parameters: int = 0
    val_steps: list[int] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)

    def val_loss_at(self, step: int) -> float:
        """The validation loss measured after ``step`` steps (one of ``val_steps``)."""
        if step not in self.val_steps:
            raise ValueError(
                f"step must be one of the measured steps {self.val_steps}, got {step!r}"
            )
        return self.val_losses[self.val_steps.index(step)]


def _betas(betas) -> tuple[float, float]:
    if (
        not isinstance(betas, tuple | list)
        or len(betas) != 2
        or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in betas)
        or not all(0.0 <= b < 1.0 for b in betas)
    ):
        raise ValueError(f"betas must be two numbers in [0, 1), like (0.9, 0.999); got {betas!r}")
    return float(betas[0]), float(betas[1])


class TrainingRun:
    """The course's training loop: one run of ``model`` on ``train_ids``, resumable.

    ``TrainingRun(model, train_ids, val_ids, batch_size=, block_size=, lr=, seed=, schedule=,
    eval_every=, betas=, clip_norm=, dtype=)`` converts the model to ``dtype`` if given (see
    :func:`train_lm`), makes the AdamW optimizer (``betas``, no weight decay) and
    the batch generator ``torch.Generator().manual_seed(seed)``, and measures the held-out loss
    at step 0. ``train(steps)`` then trains *up to* step ``steps`` (see the module's formulas):
    each step draws ``batch_size`` windows of ``block_size + 1`` ids (:func:`get_batch`), takes
    the next-token loss, clips its gradient to norm ``clip_norm`` (None: no clipping), sets the
    rate of ``schedule`` (a :class:`Schedule`; None: constant) and steps the optimizer. The
    held-out loss (:func:`evaluate`) is measured every ``eval_every`` steps (None: never in
    between) and at the end of each ``train`` call; everything lands in ``result``
    (:class:`TrainResult`), and ``seconds`` adds up the time spent training.

    Interrupted (KeyboardInterrupt, or any error inside a step, the evaluation included), the
    step in flight is rolled back (weights, optimizer state, batch generator): the run stays at
    its last completed step, and ``train(steps)`` again continues with exactly the numbers of a
    run that was never interrupted (the rollback re-runs the steps since the last copy of the
    run, :data:`CHECKPOINT_EVERY`). Training and evaluation run on one CPU thread.
    """

    def __init__(
        self,
        model: TransformerLM,
        train_ids: torch.Tensor,
        val_ids: torch.Tensor,
        *,
        batch_size: int = 32,
        block_size: int = 64,
        lr: float = 3e-3,
        seed: int = 0,
        schedule: Schedule | None = None,
        eval_every: int | None = None,
        betas=(0.9, 0.999),
        clip_norm: float | None = 1.0,
        dtype: torch.dtype | None = None,
    ):
        if not isinstance(model, TransformerLM):
            raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
        self.lr = check.positive_float("lr", lr)
        check.tensor("train_ids", train_ids, ndim=1, layout="[n_tokens]")
        check.tensor("val_ids", val_ids, ndim=1, layout="[n_tokens]")
        self.batch_size = check.positive_int("batch_size", batch_size)
        self.block_size = check.positive_int("block_size", block_size)
        seed = check.positive_int("seed", seed, minimum=0)
        if eval_every is not None:
            eval_every = check.positive_int("eval_every", eval_every)
        schedule = Schedule() if schedule is None else schedule
        if not isinstance(schedule, Schedule):
            raise TypeError(
                "schedule must be a helpers.training.Schedule (Schedule() constant, "
                f"Schedule('warmup', n)) or None, got {type(schedule).__name__}"
            )
        if clip_norm is not None:
            clip_norm = check.positive_float("clip_norm", clip_norm)
        if dtype is not None:
            if dtype not in (torch.float32, torch.float64):
                raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
            model.to(dtype)  # after every check: a refused call leaves the model as it was
        self.model, self.train_ids, self.val_ids = model, train_ids, val_ids
        self.schedule, self.eval_every, self.clip_norm = schedule, eval_every, clip_norm
        self.betas = _betas(betas)
        self.seed = seed
        # foreach: one call per update for all the weights (measured bit-identical in float64
        # to torch's one-tensor-at-a-time loop on the lesson 9 run)
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=self.lr, betas=self.betas, weight_decay=0.0, foreach=True
        )
        self.generator = torch.Generator().manual_seed(seed)
        self.step = 0
        self._checkpoint = None  # (step, snapshot): the last completed step the loop copied
        self.seconds = 0.0
        self.result = TrainResult(n_parameters=count_parameters(model))
        with one_thread():
            initial = evaluate(model, val_ids, self.block_size)
        self.result.initial_val_loss = self.result.val_loss = initial
        self.result.val_steps.append(0)
        self.result.val_losses.append(initial)

    @property
    def val_loss(self) -> float:
        """The held-out loss at the last measured step."""
        return self.result.val_losses[-1]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(step={self.step}, parameters={self.result.n_parameters:,})"

    # -- one step ------------------------------------------------------------------------------
    def _update(self) -> float:
        """Step ``self.step`` -> ``self.step + 1``: the batch, the loss, its gradient, the
        update. Returns the batch's loss (before the update)."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.schedule.lr(self.step, self.lr)
        tokens = get_batch(self.train_ids, self.batch_size, self.block_size, self.generator)
        loss = self.model.loss(tokens)  # [B, block+1] -> scalar
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        self.optimizer.step()
        return loss.item()

    def _snapshot(self):
        # what a step changes: the weights, the optimizer's state, the batch generator (and the
        # global generator, which a model's dropout would draw from)
        params = list(self.model.parameters())
        state = self.optimizer.state
        return (
            [p.detach().clone() for p in params],
            [
                {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in state[p].items()}
                if p in state
                else None
                for p in params
            ],
            self.generator.get_state(),
            torch.get_rng_state(),
        )

    def _restore(self, snapshot) -> None:
        weights, states, generator_state, global_state = snapshot
        with torch.no_grad():
            for p, w, st in zip(self.model.parameters(), weights, states, strict=True):
                p.copy_(w)
                p.grad = None
                if st is None:
                    self.optimizer.state.pop(p, None)
                else:  # copies: the snapshot may be restored again
                    self.optimizer.state[p] = {
                        k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in st.items()
                    }
        self.generator.set_state(generator_state)
        torch.set_rng_state(global_state)

    def _save_checkpoint(self) -> None:
        self._checkpoint = (self.step, self._snapshot())

    def _back_to(self, step: int, snapshot) -> None:
        # the state and the records of the completed step ``step`` (the snapshot's)
        self._restore(snapshot)
        self.step = step
        del self.result.train_losses[step:]
        while self.result.val_steps[-1] > step:
            self.result.val_steps.pop()
            self.result.val_losses.pop()
        self.result.val_loss = self.result.val_losses[-1]

    def _roll_back(self, completed: int) -> None:
        """After a failed step: back to step ``completed``, the last completed one. The state
        there is rebuilt from the last checkpoint (a completed step at most CHECKPOINT_EVERY
        steps earlier, with no evaluation in between) by running the same steps again: one CPU
        thread and the same batches give the same numbers bit for bit, so the result is the
        state the run had. Interrupted again while it catches up, the run stays at the
        checkpoint (a completed step too), its records cut there."""
        start, snapshot = self._checkpoint
        recorded = self.result.train_losses[start:completed]
        self._back_to(start, snapshot)
        try:
            for expected in recorded:
                loss = self._update()
                if loss != expected:  # the rollback relies on determinism: say if it fails
                    raise RuntimeError(
                        f"re-running step {self.step + 1} to roll back gave the loss {loss!r}, "
                        f"not the {expected!r} it gave before"
                    )
                self.step += 1
                self.result.train_losses.append(loss)
        except BaseException:
            self._back_to(start, snapshot)
            raise
        self._save_checkpoint()

    # -- the loop ------------------------------------------------------------------------------
    def train(self, steps: int, progress: str = "none") -> TrainingRun:
        """Train up to ``steps`` steps in total (a run at step 100 asked for 250 does 150 more;
        one already there does nothing). Returns the run itself.

        ``progress`` (:mod:`helpers.progress`): ``"widget"`` a progress bar and a live readout,
        ``"text"`` one line at the end, ``"none"`` nothing, ``"auto"`` the widget in a Jupyter
        kernel and nothing elsewhere. Interrupted, the step in flight is rolled back and the interrupt raised again.
        """
        steps = check.positive_int("steps", steps)
        check.choice("progress", progress, PROGRESS)
        if steps < self.step:
            raise ValueError(
                f"steps counts the total number of steps: this run is already at step "
                f"{self.step}, so steps must be >= {self.step}, got {steps} (build a new "
                f"{type(self).__name__} to start again)"
            )
        display = make_progress(progress, self.step, steps)
        start = time.perf_counter()
        try:
            with one_thread():
                self.model.train()
                self._save_checkpoint()
                while self.step < steps:
                    step = self.step + 1
                    try:
                        loss = self._update()
                        val = None
                        if step == steps or (self.eval_every and step % self.eval_every == 0):
                            val = evaluate(self.model, self.val_ids, self.block_size)
                    except BaseException:
                        self._roll_back(self.step)  # back to the last completed step
                        raise
                    self.step = step  # the step is complete: commit it
                    self.result.train_losses.append(loss)
                    if val is not None:
                        self.result.val_steps.append(step)
                        self.result.val_losses.append(val)
                        self.result.val_loss = val
                    if val is not None or step % CHECKPOINT_EVERY == 0:
                        self._save_checkpoint()
                    display.update(self, steps, start)
        except KeyboardInterrupt:
            display.interrupted(self, steps)
            raise
        finally:
            self.seconds += time.perf_counter() - start
        display.done(self, steps)
        return self


def train_lm(
    model: TransformerLM,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    steps: int = 300,
    batch_size: int = 32,
    block_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    dtype: torch.dtype | None = None,
    eval_every: int | None = None,
    *,
    schedule: Schedule | None = None,
    betas=(0.9, 0.999),
    clip_norm: float | None = 1.0,
) -> TrainResult:
    """Lessons 4, 5 and 8 (C4.7, C5.7, C8.5). ``steps`` steps of the course's loop
    (:class:`TrainingRun`: AdamW, batches drawn from ``torch.Generator().manual_seed(seed)``,
    gradient clipped to norm ``clip_norm``, the rate of ``schedule``, constant by default) in
    one call. Returns the :class:`TrainResult`.

    Runs on one CPU thread (the previous setting is restored afterwards): the sums inside each
    matrix product then happen in the same order from run to run, so a second call gives the
    same numbers on the same machine (another CPU or PyTorch build may differ in the last
    digits); and for a model this small more threads only add overhead. ``dtype=torch.float64``
    converts the model first, so that the losses it reports are the same on every machine to
    far below the digits a lesson prints (CONTRIBUTING.md, "Numbers in stored outputs").
    A model converted here was initialized in float32, and float32 random draws differ between
    CPU kernel paths (measured: the initial weights of one seed differ between torch's AVX2 and
    portable kernels; float64 draws do not); build it under :func:`default_dtype` (as
    :func:`train_char_model` does) for a run that is float64 from its first weight.
    ``eval_every`` (steps) also measures the validation loss during training (the curve in
    :class:`TrainResult`); evaluation draws no random numbers, so the run itself is unchanged.
    """
    steps = check.positive_int("steps", steps)
    run = TrainingRun(
        model, train_ids, val_ids, batch_size=batch_size, block_size=block_size, lr=lr,
        seed=seed, schedule=schedule, eval_every=eval_every, betas=betas, clip_norm=clip_norm,
        dtype=dtype,
    )  # fmt: skip
    return run.train(steps).result


#: What :func:`train_char_model` passes on to :class:`TransformerLM` besides what it sets itself
#: (the text's vocabulary, the sizes it takes, the context): every other field of LMConfig.
MODEL_OPTIONS = tuple(
    f.name
    for f in fields(LMConfig)
    if f.name not in ("vocab_size", "d_model", "n_layers", "n_heads", "max_len")
)


def train_char_model(
    text: str | None = None,
    d_model: int = LESSON_MODEL.d_model,
    n_layers: int = LESSON_MODEL.n_layers,
    n_heads: int = LESSON_MODEL.n_heads,
    steps: int = 250,
    batch_size: int = LESSON_TRAINING.batch_size,
    block_size: int = 32,
    lr: float = LESSON_TRAINING.lr,
    seed: int = 0,
    dtype: torch.dtype | None = None,
    eval_every: int | None = None,
    **model_options,
) -> TrainResult:
    """Lesson 8 (C8.5, C8.6). Build a character-level :class:`TransformerLM` for ``text``
    (default: the shipped text, last 10% held out) after ``torch.manual_seed(seed)``, in
    ``dtype`` if given (:func:`default_dtype`: float64 from the first random draw), and train it
    with :func:`train_lm`. The model is :data:`helpers.model.LESSON_MODEL` with the text's
    vocabulary, these sizes and ``max_len=block_size``; ``model_options`` are its other
    :class:`~helpers.model.LMConfig` fields (:data:`MODEL_OPTIONS`: ``positional``, ``norm``,
    ``activation``, ``tie_weights``, ``init``, ``scale_embeddings``, ...; their defaults are the
    model's, see :func:`helpers.model.coherent_defaults`). Returns the :class:`TrainResult`.
    """
    unknown = sorted(set(model_options) - set(MODEL_OPTIONS))
    if unknown:
        raise TypeError(
            f"train_char_model got unknown model options {unknown}; allowed: "
            f"{', '.join(MODEL_OPTIONS)}"
        )
    if dtype is not None and dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    if text is not None and not isinstance(text, str):
        raise TypeError(
            f"text must be a str (or None for the shipped text), got {type(text).__name__}"
        )
    text = load_text() if text is None else text
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    seed = check.positive_int("seed", seed, minimum=0)
    config = replace(
        LESSON_MODEL, vocab_size=tokenizer.vocab_size, d_model=d_model, n_layers=n_layers,
        n_heads=n_heads, max_len=block_size, **model_options,
    )  # fmt: skip
    model = seeded_model(config, seed, dtype)
    return train_lm(
        model,
        train_ids,
        val_ids,
        steps,
        batch_size,
        block_size,
        lr,
        seed,
        dtype=dtype,
        eval_every=eval_every,
    )


def compare_tying(
    text: str | None = None,
    d_model: int = LESSON_MODEL.d_model,
    n_layers: int = LESSON_MODEL.n_layers,
    n_heads: int = LESSON_MODEL.n_heads,
    steps: int = 250,
    batch_size: int = LESSON_TRAINING.batch_size,
    block_size: int = 32,
    lr: float = LESSON_TRAINING.lr,
    seed: int = 0,
    dtype: torch.dtype | None = None,
    eval_every: int | None = None,
) -> dict[str, TrainResult]:
    """Lesson 8 (C8.5). Train a tied and an untied :class:`TransformerLM` (learned positions) at
    the same settings (same seed for the weights and the batches) on ``text`` (default: the
    shipped text, character-level, last 10% held out), with :func:`train_char_model`; with
    ``dtype=torch.float64`` the models are float64 from their first weight; ``eval_every``
    records each run's validation curve.
    Returns ``{"tied": ..., "untied": ...}``.
    """
    return {
        name: train_char_model(
            text,
            d_model,
            n_layers,
            n_heads,
            steps,
            batch_size,
            block_size,
            lr,
            seed,
            dtype,
            eval_every,
            positional="learned",
            tie_weights=tie,
        )
        for name, tie in (("tied", True), ("untied", False))
    }
