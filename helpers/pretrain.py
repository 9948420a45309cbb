"""Lesson 9 (C9.1, C9.3): the full model at work. Train the course's own :class:`TransformerLM`
on the whole shipped text, watch it learn, and train the sheet's choices side by side.

    next-token loss   L = -(1/N) sum_t log softmax(logits_t)[x_{t+1}]      (nats per character)
    uniform guess     L_0 = ln(vocab_size)                     (every character equally likely)
    unigram baseline  L_1 = -(1/N) sum_t log p(x_{t+1}),  p = character frequencies of the
                      training text (add-one smoothed), ignoring the context entirely

C9.1 asks that training bring L well below L_0 and L_1. The loop is the course's one, lesson 8's
(:class:`helpers.training.TrainingRun`: seeded windows from :func:`~helpers.training.get_batch`,
AdamW, gradient clipped to norm 1, a constant rate, one CPU thread); :class:`Pretraining` is that
run on a :class:`Corpus` with the settings of a :class:`PretrainConfig`, showing its progress,
interruptible and resumable:

* ``run = Pretraining()`` builds the model (float64 from its first weight, seeded, without
  touching torch's global random state) and measures the held-out loss at step 0;
* ``run.train(250)`` trains *up to* step 250 with a progress bar and a live loss readout in a
  notebook (nothing in plain Python); interrupted (the kernel's stop button, Ctrl-C), it rolls
  back the step in flight, so the run stays at its last completed step, and calling
  ``run.train(250)`` again continues to step 250 with exactly the numbers of an uninterrupted
  run (the model, the optimizer and the batch generator are all part of the run);
* a new ``Pretraining()`` starts again from scratch: nothing is kept between runs.

C9.3 (:mod:`helpers.side_by_side`) trains the sheet's choices with this class, side by side;
:mod:`helpers.progress` is what a run shows while it trains; :mod:`helpers.plots.pretrain` draws
the curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch

from . import _validate as check
from .model import LESSON_MODEL, LMConfig, seeded_model
from .text import CharTokenizer, load_text, ngram_loss, split_ids
from .training import LESSON_TRAINING, TrainingRun

__all__ = [
    "Corpus",
    "PretrainConfig",
    "MODEL_FIELDS",
    "LESSON_CONFIG",
    "Pretraining",
    "pretrain",
    "check_device",
]


@dataclass(frozen=True)
class Corpus:
    """Lesson 9. A text cut for training: its character tokenizer, the first 90% of its ids for
    training and ``val_tokens + 1`` ids of the held-out last 10% (from its start) to measure the
    loss on, with the two baselines of C9.1 (and the bigram one) on those same ids."""

    tokenizer: CharTokenizer
    train_ids: torch.Tensor  # [n_train]
    val_ids: torch.Tensor  # [val_tokens + 1]
    uniform: float  # ln(vocab_size)
    unigram: float  # helpers.text.ngram_loss(order=1) on val_ids
    bigram: float  # ngram_loss(order=2)

    @classmethod
    def from_text(cls, text: str | None = None, val_tokens: int = 8192) -> Corpus:
        """``text`` (default: the whole shipped tiny-shakespeare, ``load_text(
        "tiny_shakespeare_full")``), tokenized by characters, split 90/10 by
        :func:`~helpers.text.split_ids`; the loss is measured on the first ``val_tokens``
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
    of steps. The model is :meth:`model_config`: :data:`helpers.model.LESSON_MODEL` with the
    text's vocabulary, ``max_len = block_size`` (the training context) and the fields here that
    are :class:`~helpers.model.LMConfig`'s (sizes and options, whose defaults are the lesson
    model's and are checked by LMConfig; ``init`` and ``scale_embeddings`` None are the coherent
    defaults for the position scheme, C8.6). They are flat keywords here because they are the
    lesson's ``Pretraining(d_model=..., positional=...)`` and the shape of the shipped results;
    an LMConfig field not among them stays the lesson model's. ``batch_size`` and ``lr`` default
    to :data:`helpers.training.LESSON_TRAINING`. ``seed`` seeds the batches and, unless
    ``init_seed`` is given, the initial weights (C9.3's A/A runs keep the batches and change the
    weights)."""

    d_model: int = LESSON_MODEL.d_model
    n_layers: int = LESSON_MODEL.n_layers
    n_heads: int = LESSON_MODEL.n_heads
    block_size: int = LESSON_MODEL.max_len
    batch_size: int = LESSON_TRAINING.batch_size
    lr: float = LESSON_TRAINING.lr
    seed: int = 0
    eval_every: int = 50
    positional: str = LESSON_MODEL.positional
    norm: str = LESSON_MODEL.norm
    activation: str = LESSON_MODEL.activation
    tie_weights: bool = LESSON_MODEL.tie_weights
    dtype: torch.dtype = torch.float64
    init: str | None = LESSON_MODEL.init
    scale_embeddings: bool | None = LESSON_MODEL.scale_embeddings
    init_seed: int | None = None

    def __post_init__(self):
        for name in ("batch_size", "eval_every"):
            check.positive_int(name, getattr(self, name))
        check.positive_int("block_size", self.block_size, minimum=2)
        check.positive_int("seed", self.seed, minimum=0)
        check.positive_float("lr", self.lr)
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {self.dtype!r}")
        if self.init_seed is not None:
            check.positive_int("init_seed", self.init_seed, minimum=0)
        self.model_config(LESSON_MODEL.vocab_size)  # LMConfig checks the model's fields

    def model_config(self, vocab_size: int) -> LMConfig:
        """Lesson 9. The :class:`~helpers.model.LMConfig` of this run's model for a text of
        ``vocab_size`` characters."""
        return replace(
            LESSON_MODEL, vocab_size=vocab_size, max_len=self.block_size, **self.model_options()
        )

    def model_options(self) -> dict:
        """The fields of this config that are :class:`~helpers.model.LMConfig`'s, by name."""
        return {k: getattr(self, k) for k in MODEL_FIELDS}


#: The fields of :class:`PretrainConfig` that are the model's (:class:`~helpers.model.LMConfig`
#: fields), in PretrainConfig's order.
MODEL_FIELDS = tuple(
    f.name for f in fields(PretrainConfig) if f.name in {g.name for g in fields(LMConfig)}
)


#: Lesson 8's model and lesson 9's training (C9.3's base model): sizes chosen by measurement on a
#: 2-core machine, one thread, float64, where d_model 128, 4 layers, context 128 took 1.8 s per
#: step (about 12 steps in 22 s). Lesson 9's live run (C9.1) is this with rotary position
#: (``positional="rotary", init="xavier", scale_embeddings=True``: C9.3's rotary row), 360 steps.
LESSON_CONFIG = PretrainConfig()


#: the kinds of device a run accepts (``torch.device(...).type``)
DEVICES = ("cpu", "cuda", "mps")


def check_device(device) -> torch.device:
    """Lesson 9. ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a
    :class:`torch.device`) as a :class:`torch.device`, after checking that this machine has it;
    anything else is a ``ValueError`` naming ``device`` and what is allowed."""
    allowed = "'cpu', 'cuda' (or 'cuda:N') on an NVIDIA GPU, 'mps' on Apple silicon"
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string or a torch.device ({allowed}), got {device!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"device must be one of {allowed}; got {device!r}") from None
    if dev.type not in DEVICES:
        raise ValueError(f"device must be one of {allowed}; got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r}: this torch sees no CUDA GPU (torch.cuda.is_available() is "
            "False); use device='cpu'"
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"device={device!r}: this torch has no Apple-silicon GPU (torch.backends.mps."
            "is_available() is False); use device='cpu'"
        )
    return dev


def _settings(settings: dict) -> PretrainConfig:
    unknown = sorted(set(settings) - set(PretrainConfig.__dataclass_fields__))
    if unknown:
        raise TypeError(
            f"unknown settings {unknown}; allowed: {', '.join(PretrainConfig.__dataclass_fields__)}"
        )
    return PretrainConfig(**settings)


class Pretraining(TrainingRun):
    """Lesson 9 (C9.1). One training run of the course's :class:`TransformerLM`, resumable: a
    :class:`~helpers.training.TrainingRun` (the course's loop) on a :class:`Corpus`.

    ``Pretraining(corpus=None, **settings)`` builds the model (after ``torch.manual_seed(seed)``
    inside :func:`torch.random.fork_rng`, so torch's global random state is left as it was, and
    under :func:`~helpers.reproducible.default_dtype`: float64 from the first draw), its AdamW
    optimizer and its batch generator ``torch.Generator().manual_seed(seed)``, and measures the
    held-out loss at step 0. ``settings`` are the fields of :class:`PretrainConfig`; ``corpus``
    a :class:`Corpus` (default: ``Corpus.from_text()``, the whole shipped text).

    ``device`` (default ``"cpu"``; :func:`check_device`): where the model and the text live while
    it trains, ``"cuda"`` on an NVIDIA GPU or ``"mps"`` on Apple silicon. The initial weights and
    the batches are the same on every device (both are drawn on the CPU); the losses then agree
    with the CPU's, and the lesson's stored outputs (all measured on a CPU), in all but their last
    digits, as a GPU sums in another order; the timings are the device's own (on a model this
    small a GPU is not always faster). Apple's ``"mps"`` has no float64: pass
    ``dtype=torch.float32`` with it. Not tested on a GPU (the course's machines have none).

    ``train(steps)`` trains up to ``steps`` steps in total, with a progress bar in a notebook;
    the losses are kept in ``result`` (a :class:`~helpers.training.TrainResult`: every step's
    training loss, the held-out loss every ``eval_every`` steps and at the end), ``seconds``
    adds up the time spent training.
    """

    def __init__(self, corpus: Corpus | None = None, device="cpu", **settings):
        self.config = _settings(settings)
        self.device = check_device(device)
        if self.device.type == "mps" and self.config.dtype == torch.float64:
            raise ValueError(
                "device='mps' has no float64: pass dtype=torch.float32 with it (the lesson's "
                "runs are float64, so the last digits will differ more)"
            )
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
            seed = c.seed if c.init_seed is None else c.init_seed
            model = seeded_model(c.model_config(corpus.tokenizer.vocab_size), seed, c.dtype)
        model.to(self.device)  # built on the CPU: the same initial weights on every device
        super().__init__(
            model,
            corpus.train_ids.to(self.device),
            corpus.val_ids.to(self.device),
            batch_size=c.batch_size,
            block_size=c.block_size,
            lr=c.lr,
            seed=c.seed,
            eval_every=c.eval_every,
        )

    @property
    def tokenizer(self) -> CharTokenizer:
        return self.corpus.tokenizer

    @property
    def baselines(self) -> dict[str, float]:
        """``{"uniform": ln V, "unigram": ..., "bigram": ...}`` on the same held-out ids."""
        return self.corpus.baselines

    def __repr__(self) -> str:
        where = "" if self.device.type == "cpu" else f", device={str(self.device)!r}"
        return (
            f"Pretraining(step={self.step}, d_model={self.config.d_model}, "
            f"n_layers={self.config.n_layers}, parameters={self.result.n_parameters:,}{where})"
        )

    def train(self, steps: int, progress: str = "auto") -> Pretraining:
        """Train up to ``steps`` steps in total (a run at step 100 asked for 250 does 150 more;
        one already there does nothing). Returns the run itself.

        ``progress``: ``"widget"`` a progress bar and a live readout (step, training loss,
        held-out loss, time), updated at most four times a second; ``"text"`` one line at the
        end; ``"none"`` nothing; ``"auto"`` (the default here) the widget in a Jupyter kernel,
        nothing elsewhere.

        Interrupted (KeyboardInterrupt, or any error inside a step), the step in flight is
        rolled back (weights, optimizer state, batch generator), so the run is consistent at
        its last completed step; the interrupt is raised again, so a "Run All" stops there.
        Calling ``train(steps)`` again continues, with exactly the numbers of a run that was
        never interrupted.
        """
        return super().train(steps, progress)


def pretrain(
    steps: int = 250,
    corpus: Corpus | None = None,
    progress: str = "auto",
    device="cpu",
    **settings,
) -> Pretraining:
    """Lesson 9 (C9.1). ``Pretraining(corpus, device, **settings).train(steps, progress)``: build
    and train in one call (for a resumable run, keep the :class:`Pretraining` and call ``train``).
    ``device``: see :class:`Pretraining` (``"cpu"`` by default, as the lesson's stored outputs)."""
    return Pretraining(corpus, device, **settings).train(steps, progress)
