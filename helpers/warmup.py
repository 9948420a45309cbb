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
from dataclasses import dataclass, replace

import torch

from . import _validate as check
from .model import LMConfig, TransformerLM, seeded_model
from .paired import (
    MIN_SEEDS,
    TWO_LOOK_LEVEL,
    AARate,
    Verdict,
    aa_rate,
    chance_alarms,
    decide,
    detectable_difference,
    disjoint_pairs,
    mean_and_se,
    null_rate,
    paired_differences,
    two_look_rate,
)
from .printing import fmt
from .text import CharTokenizer, load_text, ngram_loss, split_ids
from .training import Schedule, TrainResult, train_lm

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
#: The comparisons the sweep decides at each learning rate: (reference, other); the paired
#: difference is other minus reference, seed by seed.
SWEEP_COMPARISONS = (
    ("post-norm, no warm-up", "post-norm, warm-up"),
    ("post-norm, no warm-up", "pre-norm, no warm-up"),
    ("post-norm, warm-up", "pre-norm, no warm-up"),
)
#: The live run a lesson can afford (two runs of lesson 5's model, about 5 s of one core): the
#: largest rate of the sweep, without warm-up, pre- against post-norm, seed 0.
LIVE_SWEEP = dict(lr=3e-2, seed=0, runs=("post-norm, no warm-up", "pre-norm, no warm-up"))
_AA_OFFSET = 1000


def _lr_key(lr: float) -> str:
    return f"{lr:g}"


@dataclass
class WarmupSweep:
    """Lesson 5 (C5.7). What :func:`warmup_sweep` measured: ``finals[run][lr][i]`` the final
    held-out loss of seed ``seeds[i]``, ``curves`` the training loss of every step (same
    indexing), ``aa[run][lr][m][i]`` the m-th A/A comparison's finals (another initial draw, the
    same batches), the ``unigram`` and ``uniform`` baselines on the held-out text, ``settings``
    (:data:`SWEEP`'s fields) and the time it took; ``level`` each look's level of the rule and
    ``followup`` the sweep of the follow-up seeds (None without one: :meth:`with_followup`)."""

    settings: dict
    finals: dict[str, dict[str, list[float]]]
    curves: dict[str, dict[str, list[list[float]]]]
    aa: dict[str, dict[str, list[list[float]]]]
    unigram: float
    uniform: float
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    level: float = TWO_LOOK_LEVEL
    followup: WarmupSweep | None = None

    @property
    def seeds(self) -> list[int]:
        return list(self.settings["seeds"])

    @property
    def lrs(self) -> list[float]:
        return list(self.settings["lrs"])

    def final(self, run: str, lr: float) -> list[float]:
        check.choice("run", run, tuple(self.finals))
        key = _lr_key(lr)
        if key not in self.finals[run]:
            raise ValueError(f"lr must be one of the sweep's {self.lrs}, got {lr!r}")
        return self.finals[run][key]

    def differences(self, reference: str, other: str, lr: float) -> list[float]:
        """Seed by seed: ``other``'s final loss minus ``reference``'s, at ``lr``."""
        return paired_differences(self.final(reference, lr), self.final(other, lr))

    def more_differences(self, reference: str, other: str, lr: float) -> list[float]:
        """The follow-up seeds' paired differences (empty without a follow-up)."""
        if self.followup is None:
            return []
        return self.followup.differences(reference, other, lr)

    def verdict(self, reference: str, other: str, lr: float) -> Verdict:
        """Lesson 5 (C5.7). The two-look rule: :func:`helpers.paired.decide` at ``level`` on the
        sweep's seeds; if it does not fire and there is a follow-up, on all the seeds."""
        d = self.differences(reference, other, lr)
        first = decide(d, self.level)
        more = self.more_differences(reference, other, lr)
        if first.decided or not more:
            return first
        return decide(d + more, self.level)

    def aa_differences(self, lr: float | None = None) -> list[list[float]]:
        """The A/A comparisons in disjoint pairs of repeats, per run and rate (the run's own
        seeds with repeat 1, repeat 2 with repeat 3, ...: :func:`helpers.paired.disjoint_pairs`,
        no run in two comparisons); ``lr``: at that rate only."""
        out = []
        for run, by_lr in self.aa.items():
            for key, comparisons in by_lr.items():
                if comparisons and (lr is None or key == _lr_key(lr)):
                    out += disjoint_pairs([self.finals[run][key], *comparisons])
        return out

    def aa_rate(self) -> AARate | None:
        """The rule's first look on the disjoint A/A comparisons (None without A/A runs)."""
        diffs = self.aa_differences()
        return aa_rate(diffs, self.level) if diffs and len(self.seeds) >= MIN_SEEDS else None

    def aa_sd(self, lr: float) -> float | None:
        """The spread of null paired differences at ``lr``: the root mean square of the disjoint
        A/A comparisons' differences at that rate (None without A/A runs)."""
        flat = [d for c in self.aa_differences(lr) for d in c]
        return (sum(d * d for d in flat) / len(flat)) ** 0.5 if flat else None

    def detectable(self) -> dict[str, dict[str, float]] | None:
        """Per learning rate ("0.003"), the smallest true mean difference (nats) each look
        detects with 80% power given that rate's A/A spread: ``{"5": ..., "8": ...}`` keyed by
        the look's seeds. None without A/A runs or with too few seeds."""
        if not self.aa_differences() or len(self.seeds) < MIN_SEEDS:
            return None
        ns = [len(self.seeds)]
        if self.followup is not None:
            ns.append(len(self.seeds) + len(self.followup.seeds))
        out = {}
        for lr in self.lrs:
            sd = self.aa_sd(lr)
            if sd:
                out[_lr_key(lr)] = {str(n): detectable_difference(n, sd, self.level) for n in ns}
        return out

    def shaped_rate(self) -> float | None:
        """The first look's false-alarm rate under a null shaped like the data: every disjoint
        A/A difference divided by its rate's A/A spread (:meth:`aa_sd`: the rule is scale-free,
        and pooling rates of different spreads would fatten the tails), centred on zero and
        resampled (:func:`helpers.paired.null_rate` with a ``sample``), skew included. None
        without A/A runs or with too few seeds."""
        flat = [d / self.aa_sd(lr) for lr in self.lrs for c in self.aa_differences(lr) for d in c]
        if len(flat) < 2 or len(self.seeds) < MIN_SEEDS:
            return None
        return null_rate(len(self.seeds), self.level, sample=flat)

    def false_alarm_rate(self) -> float | None:
        """The rule's false-alarm rate per comparison under Gaussian noise: one look's level, or
        the two looks' together with a follow-up (None with too few seeds)."""
        n = len(self.seeds)
        if n < MIN_SEEDS:
            return None
        if self.followup is None:
            return self.level
        return two_look_rate(n, n + len(self.followup.seeds), self.level)

    def with_followup(self, other: WarmupSweep) -> WarmupSweep:
        """Lesson 5 (C5.7). This sweep with ``other`` as its follow-up: the same runs, rates and
        settings under new seeds, used by the second look of :meth:`verdict`."""
        if not isinstance(other, WarmupSweep):
            raise TypeError(f"other must be a WarmupSweep, got {type(other).__name__}")
        keys = ("lrs", "steps", "warmup_steps", "d_model", "n_layers", "n_heads")
        keys += ("batch_size", "block_size")
        same = all(self.settings[k] == other.settings[k] for k in keys)
        if not same or set(other.seeds) & set(self.seeds) or set(other.finals) != set(self.finals):
            raise ValueError(
                "other must run the same runs and settings as this sweep under seeds this sweep "
                f"does not use (this sweep's {self.seeds}, other's {other.seeds})"
            )
        follow = WarmupSweep(
            settings={**other.settings, "aa": 0},
            finals=other.finals,
            curves=other.curves,
            aa={run: {key: [] for key in by_lr} for run, by_lr in other.finals.items()},
            unigram=other.unigram,
            uniform=other.uniform,
            seconds=other.seconds,
            cpu_seconds=other.cpu_seconds,
            level=self.level,
        )
        return WarmupSweep(
            settings=self.settings,
            finals=self.finals,
            curves=self.curves,
            aa=self.aa,
            unigram=self.unigram,
            uniform=self.uniform,
            seconds=self.seconds + other.seconds,
            cpu_seconds=self.cpu_seconds + other.cpu_seconds,
            level=self.level,
            followup=follow,
        )

    def every_seed(self, reference: str, other: str, lr: float) -> str:
        """ "lower" or "higher" when ``other`` is below or above ``reference`` for every seed,
        else "mixed": what an assertion may claim (it holds for every seed or it is not said)."""
        d = self.differences(reference, other, lr)
        return "lower" if all(x < 0 for x in d) else "higher" if all(x > 0 for x in d) else "mixed"

    def table(self) -> list[dict]:
        """One row per (comparison, learning rate): the two runs' finals per seed, the paired
        differences, their mean and SE at the first look, the follow-up seeds' differences
        (``more_differences``, empty without), the rule's verdict ("too few seeds (n)" under
        :data:`~helpers.paired.MIN_SEEDS`), the seeds it rests on (``verdict_seeds``) and what
        holds for every seed of the first look."""
        rows = []
        for lr in self.lrs:
            for ref, other in SWEEP_COMPARISONS:
                d = self.differences(ref, other, lr)
                v = self.verdict(ref, other, lr) if len(d) >= MIN_SEEDS else None
                first = decide(d, self.level) if v is not None else None
                rows.append(
                    {
                        "lr": lr,
                        "reference": ref,
                        "other": other,
                        "reference_finals": self.final(ref, lr),
                        "other_finals": self.final(other, lr),
                        "differences": d,
                        "more_differences": list(v.differences[len(d) :]) if v else [],
                        "mean_difference": sum(d) / len(d),
                        "se": first.se if first else None,
                        "verdict": v.text if v else f"too few seeds ({len(d)})",
                        "verdict_seeds": len(v.differences) if v else len(d),
                        "every_seed": self.every_seed(ref, other, lr),
                    }
                )
        return rows

    def finals_markdown(self, decimals: int = 3) -> str:
        """Every run's final held-out loss per seed at every learning rate (the follow-up seeds'
        after a semicolon; the mean is the first five's), in Markdown."""
        head = "| learning rate | run | final held-out loss per seed | mean |\n|---|---|---|---:|"
        body = []
        for lr in self.lrs:
            for run in self.finals:
                f = self.final(run, lr)
                cell = ", ".join(fmt(x, decimals=decimals) for x in f)
                if self.followup is not None:
                    more = self.followup.final(run, lr)
                    cell += "; follow-up seeds: " + ", ".join(
                        fmt(x, decimals=decimals) for x in more
                    )
                body.append(
                    f"| {lr:g} | {run} | {cell} | {fmt(sum(f) / len(f), decimals=decimals)} |"
                )
        return "\n".join([head, *body])

    def markdown(self, decimals: int = 3) -> str:
        """The comparisons in Markdown: paired differences per seed, mean (SE), verdict."""
        head = (
            "| learning rate | other minus reference | paired difference per seed "
            "| mean (SE) | verdict | every seed |\n|---|---|---|---:|---|---|"
        )
        body = []
        for r in self.table():
            diffs = ", ".join(_signed(x, decimals) for x in r["differences"])
            if r["more_differences"]:
                more = ", ".join(_signed(x, decimals) for x in r["more_differences"])
                diffs += f"; follow-up seeds: {more}"
            se = "" if r["se"] is None else f" ({fmt(r['se'], decimals=decimals)})"
            verdict = r["verdict"]
            if r["verdict_seeds"] > len(r["differences"]):
                mean8, se8 = mean_and_se(r["differences"] + r["more_differences"])
                verdict += (
                    f" (at {r['verdict_seeds']} seeds: {_signed(mean8, decimals)}, SE "
                    f"{fmt(se8, decimals=decimals)})"
                )
            body.append(
                f"| {r['lr']:g} | {r['other']} minus {r['reference']} | {diffs} "
                f"| {_signed(r['mean_difference'], decimals)}{se} "
                f"| {verdict} | {r['every_seed']} |"
            )
        return "\n".join([head, *body])

    def summary(self) -> dict:
        """The rule's conclusions as data: its claimed false-alarm rate, the A/A count and every
        comparison (:meth:`table`)."""
        rate = self.aa_rate() if len(self.seeds) >= MIN_SEEDS else None
        claimed = self.false_alarm_rate()
        table = self.table()
        return {
            "claimed_rate": claimed,
            "shaped_rate": self.shaped_rate(),
            "detectable": self.detectable(),
            "chance_alarms": None if claimed is None else list(chance_alarms(len(table), claimed)),
            "aa": None
            if rate is None
            else {
                "alarms": rate.alarms,
                "comparisons": rate.comparisons,
                "rate": rate.rate,
                "interval": list(rate.interval),
            },
            "comparisons": table,
        }

    def to_dict(self) -> dict:
        return {
            "settings": {**self.settings, "seeds": list(self.seeds), "lrs": list(self.lrs)},
            "finals": self.finals,
            "curves": self.curves,
            "aa": self.aa,
            "unigram": self.unigram,
            "uniform": self.uniform,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "level": self.level,
            "followup": None if self.followup is None else self._followup_dict(),
        }

    def _followup_dict(self) -> dict:
        f = self.followup
        return {"seeds": f.seeds, "finals": f.finals, "curves": f.curves, **_times(f)}

    @classmethod
    def from_dict(cls, data: dict) -> WarmupSweep:
        """The sweep :meth:`to_dict` wrote (its follow-up, if any, rebuilt with its settings)."""
        data = dict(data)
        f = data.pop("followup", None)
        sweep = cls(**data)
        if f is not None:
            sweep.followup = cls(
                settings={**sweep.settings, "seeds": list(f["seeds"]), "aa": 0},
                finals=f["finals"],
                curves=f["curves"],
                aa={run: {key: [] for key in by_lr} for run, by_lr in f["finals"].items()},
                unigram=sweep.unigram,
                uniform=sweep.uniform,
                seconds=f["seconds"],
                cpu_seconds=f["cpu_seconds"],
                level=sweep.level,
            )
        return sweep


def _times(sweep: WarmupSweep) -> dict:
    return {"seconds": sweep.seconds, "cpu_seconds": sweep.cpu_seconds}


def _signed(x: float, decimals: int) -> str:
    text = fmt(x, decimals=decimals)
    return text if text.startswith("-") else "+" + text


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
    if not lrs or len({_lr_key(x) for x in lrs}) != len(lrs):
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
    finals = {n: {_lr_key(lr): [] for lr in lrs} for n in names}
    curves = {n: {_lr_key(lr): [] for lr in lrs} for n in names}
    aa_finals = {n: {_lr_key(lr): [[] for _ in range(aa)] for lr in lrs} for n in names}
    for lr in lrs:
        for seed in seeds:
            kw = dict(steps=steps, warmup_steps=warmup_steps, lr=lr, seed=seed, runs=names, **size)
            for name, r in compare_warmup(**kw).items():
                finals[name][_lr_key(lr)].append(r.val_loss)
                curves[name][_lr_key(lr)].append(list(r.train_losses))
            for m in range(1, aa + 1):
                again = compare_warmup(**kw, init_seed=_AA_OFFSET * m + seed)
                for name, r in again.items():
                    aa_finals[name][_lr_key(lr)][m - 1].append(r.val_loss)
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
        "aa": ({"alarms": int, "comparisons": int, "rate": float, "interval": [float]}, None),
        "comparisons": [
            {
                "lr": float,
                "reference": str,
                "other": str,
                "reference_finals": [float],
                "other_finals": [float],
                "differences": [float],
                "more_differences": [float],
                "mean_difference": float,
                "se": (float, None),
                "verdict": str,
                "verdict_seeds": int,
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
