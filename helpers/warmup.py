"""Lesson 5 (C5.7): a learning-rate warm-up, and a small training run that asks whether post-norm
needs it and pre-norm does not (the consequence Xiong et al. 2020 draw from C5.6); and the
experiment behind the claim, declared before it ran (:data:`SWEEP`, :func:`warmup_sweep`): the
three runs at each of three learning rates, over five seeds (and three follow-up seeds for the
comparisons the first five leave undecided), with paired verdicts (:func:`helpers.paired.decide`,
a paired t-test on the mean, in two looks) and A/A runs that measure the rule's false-alarm rate
and the seeds' spread (hence the smallest difference the sweep detects at 80% power).

    linear warm-up   lr_t = lr * min(1, (t + 1) / warmup_steps)      t = 0, 1, ..., steps - 1
                     (warmup_steps = 0: lr_t = lr from the first step)

The training loop is the course's one (:class:`helpers.training.TrainingRun`: AdamW, seeded
batches, one CPU thread, validation loss on fixed windows) with the warm-up schedule, Adam's betas
(0.9, 0.98) of Vaswani et al. 2017 and no gradient clipping: clipping also bounds the first
updates, which is what warm-up is for, and would blur the comparison.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import torch

from . import _validate as check
from .model import LMConfig, TransformerLM, seeded_model
from .paired import TWO_LOOK_LEVEL
from .paired_experiment import AA_SCHEMA, COMPARISON_SCHEMA
from .text import CharTokenizer, load_text, ngram_loss, split_ids
from .training import Schedule, TrainResult, train_lm
from .warmup_results import SWEEP_COMPARISONS, WarmupSweep, lr_key

# WarmupSweep, the sweep's results and what the rule concludes from them, is in
# helpers.warmup_results (importable from here as before); this module trains the runs and ships them.

__all__ = [
    "warmup_lr",
    "train_with_warmup",
    "WARMUP_MODEL",
    "WARMUP_RUNS",
    "compare_warmup",
    "SWEEP",
    "SWEEP_COMPARISONS",
    "LIVE_SWEEP",
    "WarmupSweep",
    "warmup_sweep",
    "WARMUP_SWEEP_DATA",
    "save_warmup_sweep",
    "load_warmup_sweep",
]

#: Lesson 5's model (C5.7): 4 blocks, so that post-norm's early updates matter, d_model 32, 4
#: heads, context 16, the shipped text's 58 characters; the course's defaults otherwise
#: (sinusoidal position, Xavier init, sqrt(d_model) scaling, GELU, tied). The runs replace its
#: ``norm``; :data:`SWEEP` and :func:`compare_warmup` take its sizes from here.
WARMUP_MODEL = LMConfig(vocab_size=58, d_model=32, n_layers=4, n_heads=4, max_len=16)

#: The three runs of C5.7: (norm placement, with warm-up?).
WARMUP_RUNS = {
    "post-norm, warm-up": ("post", True),
    "post-norm, no warm-up": ("post", False),
    "pre-norm, no warm-up": ("pre", False),
}


def warmup_lr(step: int, lr: float, warmup_steps: int) -> float:
    """Lesson 5 (C5.7). ``lr * min(1, (step + 1) / warmup_steps)``: a linear ramp from
    ``lr / warmup_steps`` at step 0 to ``lr`` at step ``warmup_steps - 1``, then constant.
    ``warmup_steps=0`` means no warm-up (``lr`` at every step)."""
    step = check.positive_int("step", step, minimum=0)
    lr = check.positive_float("lr", lr)
    warmup_steps = check.positive_int("warmup_steps", warmup_steps, minimum=0)
    return Schedule("warmup", warmup_steps).lr(step, lr)  # the loop's own schedule


def train_with_warmup(
    model: TransformerLM,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    steps: int = 120,
    warmup_steps: int = 40,
    lr: float = 3e-3,
    batch_size: int = 8,
    block_size: int = 16,
    seed: int = 0,
    dtype: torch.dtype | None = torch.float64,
) -> TrainResult:
    """Lesson 5 (C5.7). ``steps`` steps of the course's loop (:func:`helpers.training.train_lm`)
    with AdamW's betas 0.9, 0.98 as in Vaswani et al. 2017, no weight decay, no clipping, and the
    learning rate of :func:`warmup_lr` at each step; batches from
    ``torch.Generator().manual_seed(seed)``. Returns a :class:`helpers.training.TrainResult`
    (the loss of every step, validation loss before and after). ``dtype=torch.float64`` (the
    default) converts the model first, so that the printed losses are the same on any machine.
    """
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM, got {type(model).__name__}")
    steps = check.positive_int("steps", steps)
    warmup_steps = check.positive_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_steps > steps:
        raise ValueError(
            f"warmup_steps must be at most steps ({steps}), got {warmup_steps}: "
            "the warm-up would not end within the run"
        )
    return train_lm(
        model, train_ids, val_ids, steps, batch_size, block_size, lr, seed, dtype,
        schedule=Schedule("warmup", warmup_steps), betas=(0.9, 0.98), clip_norm=None,
    )  # fmt: skip


def compare_warmup(
    d_model: int = WARMUP_MODEL.d_model,
    n_layers: int = WARMUP_MODEL.n_layers,
    n_heads: int = WARMUP_MODEL.n_heads,
    steps: int = 120,
    warmup_steps: int = 40,
    lr: float = 3e-3,
    batch_size: int = 8,
    block_size: int = WARMUP_MODEL.max_len,
    seed: int = 0,
    dtype: torch.dtype | None = torch.float64,
    init_seed: int | None = None,
    runs=None,
) -> dict[str, TrainResult]:
    """Lesson 5 (C5.7). The three runs of :data:`WARMUP_RUNS` (or those named in ``runs``) on the
    shipped text (character level, last 10% held out), each :data:`WARMUP_MODEL` with these
    sizes, ``max_len=block_size`` and the run's norm placement, built
    after ``torch.manual_seed(seed)`` (``init_seed`` if given: the same batches, another initial
    draw) and trained by :func:`train_with_warmup` on the same batches.
    Returns ``{run name: TrainResult}`` in the order of :data:`WARMUP_RUNS`. With
    ``dtype=torch.float64`` the models are drawn in float64 (float32 random draws differ between
    CPU kernel paths, float64 draws do not).
    """
    text = load_text()
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    names = list(WARMUP_RUNS) if runs is None else list(runs)
    for name in names:
        check.choice("each run", name, tuple(WARMUP_RUNS))
    if init_seed is not None:
        init_seed = check.positive_int("init_seed", init_seed, minimum=0)
    sizes = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, max_len=block_size)
    config = replace(WARMUP_MODEL, vocab_size=tokenizer.vocab_size, **sizes)
    results = {}
    for name in names:
        norm, warm = WARMUP_RUNS[name]
        # float64 draws: the same initial weights on any CPU path
        model = seeded_model(
            replace(config, norm=norm), seed if init_seed is None else init_seed, dtype
        )
        results[name] = train_with_warmup(
            model, train_ids, val_ids, steps, warmup_steps if warm else 0, lr, batch_size,
            block_size, seed, dtype,
        )  # fmt: skip
    return results


#: C5.7's experiment as declared before it ran (tools/warmup_sweep.py runs exactly this): the
#: three runs of :data:`WARMUP_RUNS` at each learning rate, each seed (batches and initial
#: weights; the three runs of one seed share both), lesson 5's model and budget; ``aa`` A/A
#: comparisons per (run, learning rate): the same run again with the same batches and the
#: initial draw ``init_seed = 1000 m + seed``.
SWEEP = dict(
    seeds=(0, 1, 2, 3, 4),
    lrs=(3e-3, 1e-2, 3e-2),
    steps=120,
    warmup_steps=40,
    aa=2,
    d_model=WARMUP_MODEL.d_model,
    n_layers=WARMUP_MODEL.n_layers,
    n_heads=WARMUP_MODEL.n_heads,
    batch_size=8,
    block_size=WARMUP_MODEL.max_len,
)
#: The live run a lesson can afford (two runs of lesson 5's model, about 5 s of one core): the
#: largest rate of the sweep, without warm-up, pre- against post-norm, seed 0.
LIVE_SWEEP = dict(lr=3e-2, seed=0, runs=("post-norm, no warm-up", "pre-norm, no warm-up"))
_AA_OFFSET = 1000


def warmup_sweep(
    seeds=SWEEP["seeds"],
    lrs=SWEEP["lrs"],
    steps: int = SWEEP["steps"],
    warmup_steps: int = SWEEP["warmup_steps"],
    aa: int = SWEEP["aa"],
    runs=None,
    level: float = TWO_LOOK_LEVEL,
    **model,
) -> WarmupSweep:
    """Lesson 5 (C5.7). :func:`compare_warmup` for every learning rate of ``lrs`` and every seed
    of ``seeds`` (defaults: :data:`SWEEP`, declared before it ran), plus ``aa`` A/A comparisons
    per run and rate (the run again with the same batches and the initial draw ``1000 m + seed``).
    ``model``: compare_warmup's size settings (d_model, n_layers, n_heads, batch_size,
    block_size; default :data:`SWEEP`'s). ``runs`` picks some of :data:`WARMUP_RUNS`; ``level``
    each look's level of the rule (:func:`helpers.paired.decide`)."""
    if isinstance(seeds, int | str) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a list of whole numbers, got {seeds!r}")
    seeds = [check.positive_int("each seed", s, minimum=0) for s in seeds]
    if len(set(seeds)) != len(seeds) or not seeds or max(seeds) >= _AA_OFFSET:
        raise ValueError(f"seeds must be distinct whole numbers below {_AA_OFFSET}, got {seeds}")
    if isinstance(lrs, int | float | str) or not hasattr(lrs, "__iter__"):
        raise TypeError(f"lrs must be a list of learning rates, got {lrs!r}")
    lrs = [check.positive_float("each lr", lr) for lr in lrs]
    if not lrs or len({lr_key(x) for x in lrs}) != len(lrs):
        raise ValueError(f"lrs must be one or more distinct learning rates, got {lrs}")
    aa = check.positive_int("aa", aa, minimum=0)
    unknown = sorted(set(model) - {"d_model", "n_layers", "n_heads", "batch_size", "block_size"})
    if unknown:
        raise TypeError(
            f"unknown settings {unknown}; allowed: d_model, n_layers, n_heads, batch_size, "
            "block_size"
        )
    size = {key: model.get(key, SWEEP[key]) for key in ("d_model", "n_layers", "n_heads")}
    size |= {key: model.get(key, SWEEP[key]) for key in ("batch_size", "block_size")}
    names = list(WARMUP_RUNS) if runs is None else list(runs)
    start, cpu = time.perf_counter(), time.process_time()
    finals = {n: {lr_key(lr): [] for lr in lrs} for n in names}
    curves = {n: {lr_key(lr): [] for lr in lrs} for n in names}
    aa_finals = {n: {lr_key(lr): [[] for _ in range(aa)] for lr in lrs} for n in names}
    for lr in lrs:
        for seed in seeds:
            kw = dict(steps=steps, warmup_steps=warmup_steps, lr=lr, seed=seed, runs=names, **size)
            for name, r in compare_warmup(**kw).items():
                finals[name][lr_key(lr)].append(r.val_loss)
                curves[name][lr_key(lr)].append(list(r.train_losses))
            for m in range(1, aa + 1):
                again = compare_warmup(**kw, init_seed=_AA_OFFSET * m + seed)
                for name, r in again.items():
                    aa_finals[name][lr_key(lr)][m - 1].append(r.val_loss)
    text = load_text()
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    settings = dict(seeds=seeds, lrs=lrs, steps=steps, warmup_steps=warmup_steps, aa=aa, **size)
    return WarmupSweep(
        settings=settings,
        finals=finals,
        curves=curves,
        aa=aa_finals,
        unigram=ngram_loss(train_ids, val_ids, tokenizer.vocab_size, order=1),
        uniform=math.log(tokenizer.vocab_size),
        seconds=time.perf_counter() - start,
        cpu_seconds=time.process_time() - cpu,
        level=float(level),
    )


# -- shipped with the course (helpers.shipped): what tools/warmup_sweep.py writes ----------------
#: The name of the shipped sweep: ``helpers/data/warmup_sweep.json``.
WARMUP_SWEEP_DATA = "warmup_sweep"
#: The declared sweep (the settings of the shipped file).
SWEEP_SETTINGS_SCHEMA = {
    "seeds": [int],
    "lrs": [float],
    "steps": int,
    "warmup_steps": int,
    "aa": int,
    "d_model": int,
    "n_layers": int,
    "n_heads": int,
    "batch_size": int,
    "block_size": int,
    "level": float,
}
#: What it measured: finals and training curves per run, learning rate ("0.003") and seed; the
#: A/A finals; the baselines on the held-out text.
SWEEP_RESULTS_SCHEMA = {
    "finals": {str: {str: [float]}},
    "curves": {str: {str: [[float]]}},
    "aa": {str: {str: [[float]]}},
    "unigram": float,
    "uniform": float,
    "followup": (
        {
            "seeds": [int],
            "finals": {str: {str: [float]}},
            "curves": {str: {str: [[float]]}},
            "seconds": float,
            "cpu_seconds": float,
        },
        None,
    ),
    "summary": {
        "claimed_rate": (float, None),
        "shaped_rate": (float, None),
        "detectable": ({str: {str: float}}, None),
        "chance_alarms": ([float], None),
        "aa": AA_SCHEMA,
        "comparisons": [
            {
                "lr": float,
                "reference": str,
                "other": str,
                "reference_finals": [float],
                "other_finals": [float],
                **COMPARISON_SCHEMA,
                "every_seed": str,
            }
        ],
    },
}


def save_warmup_sweep(sweep: WarmupSweep, folder=None):
    """Lesson 5 (C5.7). Write ``sweep`` as the shipped results ``warmup_sweep.json`` (default
    folder ``helpers/data``; :func:`helpers.shipped.write_results`). Returns the path written."""
    from .shipped import write_results

    if not isinstance(sweep, WarmupSweep):
        raise TypeError(f"sweep must be a WarmupSweep, got {type(sweep).__name__}")
    data = sweep.to_dict()
    return write_results(
        WARMUP_SWEEP_DATA,
        tool="tools/warmup_sweep.py",
        settings={**data["settings"], "level": sweep.level},
        results={
            **{k: data[k] for k in SWEEP_RESULTS_SCHEMA if k != "summary"},
            "summary": sweep.summary(),
        },
        settings_schema=SWEEP_SETTINGS_SCHEMA,
        results_schema=SWEEP_RESULTS_SCHEMA,
        seconds=sweep.seconds,
        cpu_seconds=sweep.cpu_seconds,
        folder=folder,
    )


def load_warmup_sweep(folder=None) -> WarmupSweep:
    """Lesson 5 (C5.7). The sweep that ships with the course (``helpers/data/warmup_sweep.json``,
    written by ``tools/warmup_sweep.py`` with :data:`SWEEP`), checked against its schemas:
    ``.table()``, ``.markdown()``, ``.verdict(...)``, ``.every_seed(...)``, ``.aa_rate()``,
    ``.detectable()``, its follow-up seeds in ``.followup``."""
    from .shipped import load_results

    shipped = load_results(WARMUP_SWEEP_DATA, SWEEP_SETTINGS_SCHEMA, SWEEP_RESULTS_SCHEMA, folder)
    settings = dict(shipped.settings)
    level = settings.pop("level")
    measured = {key: v for key, v in shipped.results.items() if key != "summary"}
    sweep = WarmupSweep.from_dict(
        {
            "settings": settings,
            **measured,
            "seconds": shipped.seconds,
            "cpu_seconds": shipped.cpu_seconds,
            "level": level,
        }
    )
    if sweep.summary() != shipped.results["summary"]:
        raise ValueError(
            "helpers/data/warmup_sweep.json: its summary (differences, verdicts, rates) is not "
            "what its own runs give; rerun tools/warmup_sweep.py"
        )
    return sweep
