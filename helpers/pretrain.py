"""Lesson 9 (C9.1, C9.3): the full model at work. Train the course's own :class:`TransformerLM`
on the whole shipped text, watch it learn, and train the sheet's choices side by side.

    next-token loss   L = -(1/N) sum_t log softmax(logits_t)[x_{t+1}]      (nats per character)
    uniform guess     L_0 = ln(vocab_size)                     (every character equally likely)
    unigram baseline  L_1 = -(1/N) sum_t log p(x_{t+1}),  p = character frequencies of the
                      training text (add-one smoothed), ignoring the context entirely

C9.1 asks that training bring L well below L_0 and L_1. The loop is lesson 8's
(:func:`helpers.training._train_step`: seeded windows from :func:`~helpers.training.get_batch`,
AdamW, gradient clipped to norm 1, one CPU thread), run by :class:`Pretraining` so that it can
show its progress and be interrupted and resumed:

* ``run = Pretraining()`` builds the model (float64 from its first weight, seeded, without
  touching torch's global random state) and measures the held-out loss at step 0;
* ``run.train(250)`` trains *up to* step 250 with a progress bar and a live loss readout in a
  notebook (nothing in plain Python); interrupted (the kernel's stop button, Ctrl-C), it rolls
  back the step in flight, so the run stays at its last completed step, and calling
  ``run.train(250)`` again continues to step 250 with exactly the numbers of an uninterrupted
  run (the model, the optimizer and the batch generator are all part of the run);
* a new ``Pretraining()`` starts again from scratch: nothing is kept between runs.

C9.3, :func:`side_by_side`: one factor at a time from the course's default model (sinusoidal
position, pre-norm, tied, GELU), each choice trained at the same budget (same steps, batches and
seeds), evaluated on the same held-out text; the positional choices also at twice the training
length, where a learned table cannot run at all (C4.4, C4.7).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import torch

from . import _validate as check
from .model import TransformerLM
from .params import count_parameters
from .positional import PositionOutOfRange
from .printing import fmt
from .training import (
    CharTokenizer,
    TrainResult,
    _one_thread,
    _train_step,
    default_dtype,
    evaluate,
    load_text,
    ngram_loss,
    split_ids,
)

__all__ = [
    "Corpus",
    "PretrainConfig",
    "LESSON_CONFIG",
    "Pretraining",
    "pretrain",
    "FACTORS",
    "SMALL_GRID",
    "GridRun",
    "SideBySide",
    "side_by_side",
    "plot_losses",
    "plot_side_by_side",
]

PROGRESS = ("auto", "widget", "text", "none")


@dataclass(frozen=True)
class Corpus:
    """Lesson 9. A text cut for training: its character tokenizer, the first 90% of its ids for
    training and ``val_tokens + 1`` ids of the held-out last 10% (from its start) to measure the
    loss on, with the two baselines of C9.1 (and the bigram one) on those same ids."""

    tokenizer: CharTokenizer
    train_ids: torch.Tensor  # [n_train]
    val_ids: torch.Tensor  # [val_tokens + 1]
    uniform: float  # ln(vocab_size)
    unigram: float  # helpers.training.ngram_loss(order=1) on val_ids
    bigram: float  # ngram_loss(order=2)

    @classmethod
    def from_text(cls, text: str | None = None, val_tokens: int = 8192) -> Corpus:
        """``text`` (default: the whole shipped tiny-shakespeare, ``load_text(
        "tiny_shakespeare_full")``), tokenized by characters, split 90/10 by
        :func:`~helpers.training.split_ids`; the loss is measured on the first ``val_tokens``
        predictions of the held-out part (all of it would cost seconds per measurement)."""
        if text is not None and not isinstance(text, str):
            raise TypeError(
                f"text must be a str (or None for the shipped text), got {type(text).__name__}"
            )
        val_tokens = check.positive_int("val_tokens", val_tokens, minimum=2)
        text = load_text("tiny_shakespeare_full") if text is None else text
        tokenizer = CharTokenizer(text)
        train_ids, held_out = split_ids(tokenizer.encode(text))
        if len(held_out) < val_tokens + 1:
            raise ValueError(
                f"val_tokens must be at most {len(held_out) - 1} for this text (its held-out "
                f"tenth has {len(held_out)} characters), got {val_tokens}"
            )
        val_ids = held_out[: val_tokens + 1]
        vocab = tokenizer.vocab_size
        return cls(
            tokenizer=tokenizer,
            train_ids=train_ids,
            val_ids=val_ids,
            uniform=math.log(vocab),
            unigram=ngram_loss(train_ids, val_ids, vocab, order=1),
            bigram=ngram_loss(train_ids, val_ids, vocab, order=2),
        )

    @property
    def baselines(self) -> dict[str, float]:
        return {"uniform": self.uniform, "unigram": self.unigram, "bigram": self.bigram}

    def with_val_tokens(self, val_tokens: int) -> Corpus:
        """The same text and tokenizer, the loss measured on the first ``val_tokens``
        predictions of the held-out part only (cheaper; the baselines measured on those)."""
        val_tokens = check.positive_int("val_tokens", val_tokens, minimum=2)
        if val_tokens + 1 > len(self.val_ids):
            raise ValueError(
                f"val_tokens must be at most {len(self.val_ids) - 1} (this corpus measures on "
                f"{len(self.val_ids)} held-out ids), got {val_tokens}"
            )
        val_ids = self.val_ids[: val_tokens + 1]
        vocab = self.tokenizer.vocab_size
        return replace(
            self,
            val_ids=val_ids,
            unigram=ngram_loss(self.train_ids, val_ids, vocab, order=1),
            bigram=ngram_loss(self.train_ids, val_ids, vocab, order=2),
        )


@dataclass(frozen=True)
class PretrainConfig:
    """Lesson 9. Everything a :class:`Pretraining` run depends on besides the text and the number
    of steps. The model options (``positional``, ``norm``, ``activation``, ``tie_weights``) default
    to :class:`TransformerLM`'s coherent defaults (C8.6); ``block_size`` is the training context,
    and the model's ``max_len``."""

    d_model: int = 48
    n_layers: int = 2
    n_heads: int = 4
    block_size: int = 64
    batch_size: int = 16
    lr: float = 5e-3
    seed: int = 0
    eval_every: int = 50
    positional: str = "sinusoidal"
    norm: str = "pre"
    activation: str = "gelu"
    tie_weights: bool = True
    dtype: torch.dtype = torch.float64

    def __post_init__(self):
        for name in ("d_model", "n_layers", "n_heads", "batch_size", "eval_every"):
            check.positive_int(name, getattr(self, name))
        check.positive_int("block_size", self.block_size, minimum=2)
        check.positive_int("seed", self.seed, minimum=0)
        check.positive_float("lr", self.lr)
        if not isinstance(self.tie_weights, bool):
            raise TypeError(f"tie_weights must be True or False, got {self.tie_weights!r}")
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {self.dtype!r}")

    def model_options(self) -> dict:
        return {k: getattr(self, k) for k in ("positional", "norm", "activation", "tie_weights")}


#: The lesson's run (C9.1): chosen by measurement on a 2-core machine, one thread, float64, where
#: d_model 128, 4 layers, context 128 took 1.8 s per step (about 12 steps in 22 s); this model
#: takes about 0.08 s per step (docs/SIDE_BY_SIDE.md and the lesson give the measured figures).
LESSON_CONFIG = PretrainConfig()


def _settings(settings: dict) -> PretrainConfig:
    unknown = sorted(set(settings) - set(PretrainConfig.__dataclass_fields__))
    if unknown:
        raise TypeError(
            f"unknown settings {unknown}; allowed: {', '.join(PretrainConfig.__dataclass_fields__)}"
        )
    return PretrainConfig(**settings)


class Pretraining:
    """Lesson 9 (C9.1). One training run of the course's :class:`TransformerLM`, resumable.

    ``Pretraining(corpus=None, **settings)`` builds the model (after ``torch.manual_seed(seed)``
    inside :func:`torch.random.fork_rng`, so torch's global random state is left as it was, and
    under :func:`~helpers.training.default_dtype`: float64 from the first draw), its AdamW
    optimizer and its batch generator ``torch.Generator().manual_seed(seed)``, and measures the
    held-out loss at step 0. ``settings`` are the fields of :class:`PretrainConfig`; ``corpus``
    a :class:`Corpus` (default: ``Corpus.from_text()``, the whole shipped text).

    ``train(steps)`` trains up to ``steps`` steps in total; the losses are kept in
    ``result`` (a :class:`~helpers.training.TrainResult`: every step's training loss, the
    held-out loss every ``eval_every`` steps and at the end), ``seconds`` adds up the time spent
    training.
    """

    def __init__(self, corpus: Corpus | None = None, **settings):
        self.config = _settings(settings)
        if corpus is None:
            corpus = Corpus.from_text()
        if not isinstance(corpus, Corpus):
            raise TypeError(
                f"corpus must be a helpers.pretrain.Corpus (Corpus.from_text(text)), got "
                f"{type(corpus).__name__}"
            )
        self.corpus = corpus
        c = self.config
        if len(corpus.val_ids) < c.block_size + 1:
            raise ValueError(
                f"block_size={c.block_size} is longer than the held-out ids "
                f"({len(corpus.val_ids)}): give the Corpus more val_tokens"
            )
        with torch.random.fork_rng(devices=[]):  # the caller's random state is left alone
            torch.manual_seed(c.seed)
            with default_dtype(c.dtype):
                self.model = TransformerLM(
                    corpus.tokenizer.vocab_size,
                    c.d_model,
                    c.n_layers,
                    c.n_heads,
                    max_len=c.block_size,
                    **c.model_options(),
                )
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=c.lr, weight_decay=0.0)
        self.generator = torch.Generator().manual_seed(c.seed)
        self.step = 0
        self.seconds = 0.0
        self.result = TrainResult(n_parameters=count_parameters(self.model))
        with _one_thread():
            self.result.initial_val_loss = evaluate(self.model, corpus.val_ids, c.block_size)
        self.result.val_steps.append(0)
        self.result.val_losses.append(self.result.initial_val_loss)
        self.result.val_loss = self.result.initial_val_loss

    # -- what the run measured ---------------------------------------------------------------
    @property
    def tokenizer(self) -> CharTokenizer:
        return self.corpus.tokenizer

    @property
    def val_loss(self) -> float:
        """The held-out loss at the last measured step."""
        return self.result.val_losses[-1]

    @property
    def baselines(self) -> dict[str, float]:
        """``{"uniform": ln V, "unigram": ..., "bigram": ...}`` on the same held-out ids."""
        return self.corpus.baselines

    def __repr__(self) -> str:
        return (
            f"Pretraining(step={self.step}, d_model={self.config.d_model}, "
            f"n_layers={self.config.n_layers}, parameters={self.result.n_parameters:,})"
        )

    # -- training ----------------------------------------------------------------------------
    def _snapshot(self):
        # what one step changes: the weights, the optimizer's state, the batch generator
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
        )

    def _restore(self, snapshot) -> None:
        weights, states, generator_state = snapshot
        with torch.no_grad():
            for p, w, st in zip(self.model.parameters(), weights, states, strict=True):
                p.copy_(w)
                p.grad = None
                if st is None:
                    self.optimizer.state.pop(p, None)
                else:
                    self.optimizer.state[p] = st
        self.generator.set_state(generator_state)

    def train(self, steps: int, progress: str = "auto") -> Pretraining:
        """Train up to ``steps`` steps in total (a run at step 100 asked for 250 does 150 more;
        one already there does nothing). Returns the run itself.

        ``progress``: ``"widget"`` a progress bar and a live readout (step, training loss,
        held-out loss, time), updated at most four times a second; ``"text"`` one line at the
        end; ``"none"`` nothing; ``"auto"`` the widget in a Jupyter kernel, nothing elsewhere.

        Interrupted (KeyboardInterrupt, or any error inside a step), the step in flight is
        rolled back (weights, optimizer state, batch generator), so the run is consistent at
        its last completed step; the interrupt is raised again, so a "Run All" stops there.
        Calling ``train(steps)`` again continues, with exactly the numbers of a run that was
        never interrupted.
        """
        steps = check.positive_int("steps", steps)
        check.choice("progress", progress, PROGRESS)
        if steps < self.step:
            raise ValueError(
                f"steps counts the total number of steps: this run is already at step "
                f"{self.step}, so steps must be >= {self.step}, got {steps} (build a new "
                "Pretraining to start again)"
            )
        c, data = self.config, self.corpus
        display = _Progress.make(progress, self.step, steps)
        start = time.perf_counter()
        try:
            with _one_thread():
                self.model.train()
                while self.step < steps:
                    snapshot = self._snapshot()
                    step = self.step + 1
                    try:
                        loss = _train_step(
                            self.model,
                            self.optimizer,
                            data.train_ids,
                            c.batch_size,
                            c.block_size,
                            self.generator,
                        )
                        val = None
                        if step % c.eval_every == 0 or step == steps:
                            val = evaluate(self.model, data.val_ids, c.block_size)
                    except BaseException:
                        self._restore(snapshot)  # back to the last completed step
                        raise
                    self.step = step  # the step is complete: commit it
                    self.result.train_losses.append(loss)
                    if val is not None:
                        self.result.val_steps.append(step)
                        self.result.val_losses.append(val)
                        self.result.val_loss = val
                    display.update(self, steps, start)
        except KeyboardInterrupt:
            display.interrupted(self, steps)
            raise
        finally:
            self.seconds += time.perf_counter() - start
        display.done(self, steps)
        return self


def pretrain(
    steps: int = 250, corpus: Corpus | None = None, progress: str = "auto", **settings
) -> Pretraining:
    """Lesson 9 (C9.1). ``Pretraining(corpus, **settings).train(steps, progress)``: build and
    train in one call (for a resumable run, keep the :class:`Pretraining` and call ``train``)."""
    return Pretraining(corpus, **settings).train(steps, progress)


class _Progress:
    """What ``Pretraining.train`` shows while it runs: nothing, one line, or a widget."""

    @staticmethod
    def make(mode: str, start: int, total: int) -> _Progress:
        if mode == "auto":
            mode = "widget" if _in_kernel() else "none"
        if mode == "widget":
            return _WidgetProgress(start, total)
        if mode == "text":
            return _TextProgress()
        return _Progress()

    def update(self, run: Pretraining, total: int, start: float) -> None:
        pass

    def interrupted(self, run: Pretraining, total: int) -> None:
        print(
            f"interrupted: the run is at step {run.step} of {total}; "
            f"call train({total}) again to continue"
        )

    def done(self, run: Pretraining, total: int) -> None:
        pass


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the course's requirements
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _readout(run: Pretraining, total: int, seconds: float | None = None) -> str:
    # the live readout: not a stored output (widget state), so plain formatting is fine here
    recent = run.result.train_losses[-20:]
    parts = [f"step {run.step} / {total}"]
    if recent:
        parts.append(f"training loss {sum(recent) / len(recent):.3f} (last {len(recent)} steps)")
    parts.append(f"held-out {run.val_loss:.3f} at step {run.result.val_steps[-1]}")
    if seconds is not None:
        parts.append(f"{seconds:.1f} s")
    return " · ".join(parts)


class _TextProgress(_Progress):
    def done(self, run, total):
        print(_readout(run, total, run.seconds))


class _WidgetProgress(_Progress):
    INTERVAL_S = 0.25  # at most four updates a second

    def __init__(self, start: int, total: int):
        import ipywidgets
        from IPython.display import display

        self.bar = ipywidgets.IntProgress(
            value=start, min=0, max=total, description="training", bar_style="info"
        )
        self.label = ipywidgets.HTML(f"step {start} / {total}")
        self.box = ipywidgets.HBox([self.bar, self.label])
        self.last = 0.0
        display(self.box)

    def _show(self, run, total, seconds=None, style="info"):
        self.bar.value = run.step
        self.bar.bar_style = style
        self.label.value = _readout(run, total, seconds)

    def update(self, run, total, start):
        now = time.perf_counter()
        if now - self.last >= self.INTERVAL_S:
            self.last = now
            self._show(run, total, run.seconds + now - start)

    def interrupted(self, run, total):
        self._show(run, total, run.seconds, style="warning")
        self.label.value += f" · interrupted: call train({total}) again to continue"

    def done(self, run, total):
        self._show(run, total, run.seconds, style="success")


# -- C9.3: the sheet's choices side by side -------------------------------------------------------

#: C9.3: each factor and its choices, the first being the base model's (the course's default:
#: sinusoidal, pre-norm, tied, GELU); each maps to the :class:`PretrainConfig` field it sets.
FACTORS = {
    "position": ("positional", {"sinusoidal": "sinusoidal", "learned": "learned", "rotary": "rotary"}),
    "norm placement": ("norm", {"pre-norm": "pre", "post-norm": "post"}),
    "tying": ("tie_weights", {"tied": True, "untied": False}),
    "activation": ("activation", {"GELU": "gelu", "ReLU": "relu", "SwiGLU": "swiglu"}),
}  # fmt: skip

#: The notebook's small grid: tiny models and a few steps, so that the whole grid (7 models,
#: 2 seeds) trains in about ten seconds here. tools/side_by_side.py runs the full one.
SMALL_GRID = dict(
    d_model=32, n_layers=2, n_heads=4, block_size=32, batch_size=8, lr=5e-3, eval_every=10
)


@dataclass
class GridRun:
    """Lesson 9 (C9.3). One trained model of the grid, summarized: its held-out curve, its final
    held-out loss, at twice the training length (None with the reason when it cannot run)."""

    seed: int
    n_parameters: int
    val_steps: list[int]
    val_losses: list[float]
    val_loss: float
    seconds: float
    loss_at_long: float | None = None
    long_note: str = ""


@dataclass
class SideBySide:
    """Lesson 9 (C9.3). What :func:`side_by_side` trained: ``runs[(factor, choice)]`` the runs of
    one choice (one per seed; the base model's runs are shared by the first choice of every
    factor), the settings, the steps and the baselines."""

    base: PretrainConfig
    steps: int
    seeds: tuple[int, ...]
    long_factor: int
    runs: dict[tuple[str, str], list[GridRun]] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def table(self) -> list[dict]:
        """One row per (factor, choice): ``factor``, ``choice``, ``seeds``, ``parameters``,
        ``mean`` and ``spread`` (max - min over the seeds) of the final held-out loss, and for
        the position rows ``at_long`` (the mean loss at ``long_factor`` times the training
        length) or ``long_note`` (why it could not be measured)."""
        rows = []
        for (factor, choice), runs in self.runs.items():
            finals = [r.val_loss for r in runs]
            row = {
                "factor": factor,
                "choice": choice,
                "seeds": [r.seed for r in runs],
                "parameters": runs[0].n_parameters,
                "mean": sum(finals) / len(finals),
                "spread": max(finals) - min(finals),
                "at_long": None,
                "long_note": "",
            }
            if factor == "position":
                longs = [r.loss_at_long for r in runs]
                if all(x is not None for x in longs):
                    row["at_long"] = sum(longs) / len(longs)
                else:
                    row["long_note"] = runs[0].long_note
            rows.append(row)
        return rows

    def row(self, factor: str, choice: str) -> dict:
        """The :meth:`table` row of one choice."""
        for r in self.table():
            if (r["factor"], r["choice"]) == (factor, choice):
                return r
        raise ValueError(f"no row ({factor!r}, {choice!r}); rows: {list(self.runs)}")

    def lines(self, decimals: int = 3) -> list[str]:
        """The table as aligned text lines (losses printed with :func:`helpers.printing.fmt`)."""
        long = f"at {self.long_factor}x length"
        out = [
            f"{'factor':<15}{'choice':<11}{'params':>8}{'mean':>8}{'spread':>8}  {long}",
        ]
        for r in self.table():
            at_long = fmt(r["at_long"], decimals=decimals) if r["at_long"] is not None else ""
            if r["long_note"]:
                at_long = r["long_note"]
            out.append(
                f"{r['factor']:<15}{r['choice']:<11}{r['parameters']:>8,}"
                f"{fmt(r['mean'], decimals=decimals):>8}{fmt(r['spread'], decimals=decimals):>8}"
                f"  {at_long}"
            )
        return out

    def markdown(self, decimals: int = 3) -> str:
        """The table in Markdown (the format tools/side_by_side.py writes)."""
        long = f"held-out loss at {self.long_factor}x the training length"
        head = (
            f"| factor | choice | seeds | parameters | mean held-out loss | spread (max - min) "
            f"| {long} |\n|---|---|---|---:|---:|---:|---|"
        )
        body = []
        for r in self.table():
            if r["at_long"] is not None:
                at_long = fmt(r["at_long"], decimals=decimals)
            else:
                at_long = r["long_note"] or "(not measured)"
            body.append(
                f"| {r['factor']} | {r['choice']} | {', '.join(map(str, r['seeds']))} "
                f"| {r['parameters']:,} | {fmt(r['mean'], decimals=decimals)} "
                f"| {fmt(r['spread'], decimals=decimals)} | {at_long} |"
            )
        return "\n".join([head, *body])


def _grid_run(run: Pretraining, long_factor: int) -> GridRun:
    summary = GridRun(
        seed=run.config.seed,
        n_parameters=run.result.n_parameters,
        val_steps=list(run.result.val_steps),
        val_losses=list(run.result.val_losses),
        val_loss=run.val_loss,
        seconds=run.seconds,
    )
    long = run.config.block_size * long_factor
    if len(run.corpus.val_ids) < long + 1:
        summary.long_note = f"held-out text shorter than one window of {long}"
        return summary
    try:
        with _one_thread():
            summary.loss_at_long = evaluate(run.model, run.corpus.val_ids, long)
    except PositionOutOfRange:
        summary.long_note = f"cannot run: the learned table has rows for positions 0..{run.config.block_size - 1} only"
    return summary


def side_by_side(
    steps: int = 60,
    seeds=(0, 1),
    corpus: Corpus | None = None,
    factors=None,
    long_factor: int = 2,
    **settings,
) -> SideBySide:
    """Lesson 9 (C9.3). Train the sheet's choices side by side at equal budget, one factor at a
    time from the base model (``settings``: the fields of :class:`PretrainConfig`, default
    :data:`SMALL_GRID`; its model options are the first choice of each factor in
    :data:`FACTORS`): every run has the same size, steps, batches and held-out text; each seed
    of ``seeds`` sets the initial weights and the batches. ``factors`` (default: all four of
    :data:`FACTORS`) picks some. The position rows are also measured at ``long_factor`` times
    the training length (the sinusoidal table and rotary are defined there; a learned table is
    not, and the row says so).

    Returns a :class:`SideBySide`: ``.table()``, ``.lines()``, ``.markdown()``, and the curves
    in ``.runs`` (:func:`plot_side_by_side`).
    """
    steps = check.positive_int("steps", steps)
    long_factor = check.positive_int("long_factor", long_factor, minimum=2)
    if isinstance(seeds, int | str) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a list of whole numbers, got {seeds!r}")
    seeds = tuple(check.positive_int("each seed", s, minimum=0) for s in seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be one or more distinct whole numbers, got {list(seeds)}")
    factors = list(FACTORS) if factors is None else list(factors)
    if not factors:
        raise ValueError("factors must name at least one factor of FACTORS")
    for f in factors:
        check.choice("each factor", f, tuple(FACTORS))
    given = {**SMALL_GRID, **settings}
    clash = sorted(set(given) & {FACTORS[f][0] for f in FACTORS})
    if clash:
        raise TypeError(
            f"the base model's {clash} are the grid's own choices (the first of each factor in "
            "FACTORS); leave them out"
        )
    base = _settings({**given, "seed": seeds[0]})
    corpus = Corpus.from_text() if corpus is None else corpus
    if not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a helpers.pretrain.Corpus, got {type(corpus).__name__}")
    grid = SideBySide(
        base=base, steps=steps, seeds=seeds, long_factor=long_factor, baselines=corpus.baselines
    )
    start = time.perf_counter()
    done: dict[tuple, list[GridRun]] = {}  # the base model is trained once, shared by the factors
    for factor in factors:
        field_name, choices = FACTORS[factor]
        for choice, value in choices.items():
            config = replace(base, **{field_name: value})
            key = tuple(sorted(config.model_options().items()))
            if key not in done:
                done[key] = [
                    _grid_run(
                        Pretraining(corpus, **{**asdict(config), "seed": s}).train(steps, "none"),
                        long_factor,
                    )
                    for s in seeds
                ]
            grid.runs[(factor, choice)] = done[key]
    grid.seconds = time.perf_counter() - start
    return grid


# -- figures -----------------------------------------------------------------------------------


def plot_losses(run: Pretraining, ax=None):
    """Lesson 9 (C9.1). The training loss of every step (thin), the held-out loss (dots), and
    the baselines as horizontal lines. Returns the axes."""
    from .plots._common import axes

    if not isinstance(run, Pretraining):
        raise TypeError(f"run must be a Pretraining, got {type(run).__name__}")
    ax = axes(ax, figsize=(6.5, 3.2))
    r = run.result
    ax.plot(
        range(1, len(r.train_losses) + 1), r.train_losses, lw=0.8, alpha=0.6, label="training batch"
    )
    ax.plot(r.val_steps, r.val_losses, "o-", ms=4, label="held-out")
    styles = {"uniform": ":", "unigram": "--", "bigram": "-."}
    for name, value in run.baselines.items():
        ax.axhline(value, color="grey", ls=styles[name], lw=1, label=f"{name} baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("next-character loss (nats)")
    ax.legend(fontsize=8, ncol=2)
    return ax


def plot_side_by_side(grid: SideBySide, axes=None):
    """Lesson 9 (C9.3). One panel per factor: the held-out curve of each choice, the mean over
    the seeds (line) and each seed (faint). Returns the array of axes."""
    if not isinstance(grid, SideBySide):
        raise TypeError(f"grid must be a SideBySide, got {type(grid).__name__}")
    factors = list(dict.fromkeys(f for f, _ in grid.runs))
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(
            1, len(factors), figsize=(3.2 * len(factors), 2.8), layout="constrained", sharey=True
        )
    axes = list(axes.flat) if hasattr(axes, "flat") else list(axes)
    if len(axes) < len(factors):
        raise ValueError(f"axes must hold {len(factors)} axes (one per factor), got {len(axes)}")
    for ax, factor in zip(axes, factors, strict=False):
        for (f, choice), runs in grid.runs.items():
            if f != factor:
                continue
            steps = runs[0].val_steps
            mean = [sum(r.val_losses[k] for r in runs) / len(runs) for k in range(len(steps))]
            (line,) = ax.plot(steps, mean, label=choice)
            for r in runs:
                ax.plot(r.val_steps, r.val_losses, color=line.get_color(), alpha=0.25, lw=0.8)
        ax.axhline(grid.baselines["unigram"], color="grey", ls="--", lw=1)
        ax.set_title(factor, fontsize=10)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("held-out loss (nats)")
    return axes
