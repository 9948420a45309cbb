"""Lesson 9 (C9.3): the sheet's choices trained side by side at equal budget, one factor at a time,
with verdicts from a rule whose false-alarm rate is measured.

The base model is the course's default: sinusoidal position, pre-norm, tied, GELU, and the
initialization that goes with sinusoidal position (Xavier-normal weights, token vectors
N(0, 1/d_model) multiplied by sqrt(d_model), C8.6). **Each row differs from the base in its named
factor only**: the initialization and the embedding scale are *held at the base's* in every row
of the sheet's four factors (so the learned table and rotary are trained with Xavier weights and
scaled embeddings too, not with their own coherent defaults). The initialization is then made a
factor of its own, and the position factor is shown both ways: once more with GPT-2's
N(0, 0.02^2) weights and no scaling for all three schemes (:data:`FACTORS`, "initialization" and
"position, GPT-2 init").

Every run has the same size, steps and held-out text; seed s gives every choice the same batches
in the same order and the same initial draws where the shapes agree (:class:`helpers.pretrain.
Pretraining`). Within a factor each choice is compared with the factor's first choice by the
paired differences of their final held-out losses, seed by seed, and judged by
:func:`helpers.paired.decide` (a paired t-test on the mean difference) in two looks declared before
the follow-up ran: at the grid's seeds, and for a row undecided there, once more with the
follow-up seeds added (:meth:`SideBySide.with_followup`), each look at
:data:`helpers.paired.TWO_LOOK_LEVEL` so that the two together fire about 5% of the time when a
choice changes nothing. The **A/A runs** train the base model again with the same batches (seed s)
and another initial draw (``init_seed = 1000 m + s`` for the m-th repeat): what differs between
two choices under one seed, with no choice changed. They are compared in disjoint pairs (the base
with repeat 1, repeat 2 with repeat 3, ...; no run in two comparisons), and the rule applied to
them (:meth:`SideBySide.aa_rate`) measures its false-alarm rate on this task; their spread sets
the smallest difference the grid detects at 80% power (:meth:`SideBySide.detectable`).

``tools/side_by_side.py`` runs the full grid and ships it as ``helpers/data/side_by_side.json``
(settings, per-seed curves and finals, the A/A runs, and the rule's summary: paired differences,
verdicts, the claimed and the measured false-alarm rate); :func:`load_side_by_side` reads it back
and checks that the summary is what the runs give.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

from . import _validate as check
from .model import LESSON_MODEL
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
    t_quantile,
    two_look_rate,
)
from .positional import PositionOutOfRange
from .pretrain import MODEL_FIELDS, Corpus, PretrainConfig, Pretraining, _settings
from .printing import fmt
from .reproducible import one_thread as _one_thread
from .training import LESSON_TRAINING, evaluate

__all__ = [
    "BASE_INIT",
    "GPT2_INIT",
    "FACTORS",
    "SHEET_FACTORS",
    "SMALL_GRID",
    "AA_INIT_OFFSET",
    "GridRun",
    "SideBySide",
    "side_by_side",
    "rule_summary",
    "SIDE_BY_SIDE_DATA",
    "save_side_by_side",
    "load_side_by_side",
]

#: The base model's initialization (sinusoidal's coherent default, C8.6), held in every row of
#: the sheet's factors; and GPT-2's, the other way the position factor is shown.
BASE_INIT = {"init": "xavier", "scale_embeddings": True}
GPT2_INIT = {"init": "gpt2", "scale_embeddings": False}

#: C9.3: each factor, its choices and the :class:`PretrainConfig` fields each choice sets on top
#: of the base model; the first choice of a factor is what its other choices are compared with.
FACTORS = {
    "position": {
        "sinusoidal": {"positional": "sinusoidal"},
        "learned": {"positional": "learned"},
        "rotary": {"positional": "rotary"},
    },
    "norm placement": {"pre-norm": {"norm": "pre"}, "post-norm": {"norm": "post"}},
    "tying": {"tied": {"tie_weights": True}, "untied": {"tie_weights": False}},
    "activation": {
        "GELU": {"activation": "gelu"},
        "ReLU": {"activation": "relu"},
        "SwiGLU": {"activation": "swiglu"},
    },
    "initialization": {"Xavier, x sqrt(d)": dict(BASE_INIT), "GPT-2, unscaled": dict(GPT2_INIT)},
    "position, GPT-2 init": {
        "sinusoidal": {"positional": "sinusoidal", **GPT2_INIT},
        "learned": {"positional": "learned", **GPT2_INIT},
        "rotary": {"positional": "rotary", **GPT2_INIT},
    },
}
#: The sheet's four factors (the notebook's small grid); the tool adds the initialization ones.
SHEET_FACTORS = ("position", "norm placement", "tying", "activation")
_POSITION_FACTORS = ("position", "position, GPT-2 init")
#: the model fields a row may choose: PretrainConfig's model fields but the sizes
_CHOSEN = tuple(k for k in MODEL_FIELDS if k not in ("d_model", "n_layers", "n_heads"))
_BASE = {k: getattr(LESSON_MODEL, k) for k in _CHOSEN} | BASE_INIT
#: The A/A runs' initial draws: ``init_seed = AA_INIT_OFFSET * m + s`` for comparison m = 1, 2, ...
AA_INIT_OFFSET = 1000

#: The notebook's small grid: the lesson model narrowed to d_model 32 and context 32, batches of
#: 8 and a few steps, so that the whole grid (7 models, 2 seeds) trains in about ten seconds
#: here. tools/side_by_side.py runs the full one.
_SMALL = replace(LESSON_MODEL, d_model=32, max_len=32)
SMALL_GRID = dict(
    d_model=_SMALL.d_model, n_layers=_SMALL.n_layers, n_heads=_SMALL.n_heads,
    block_size=_SMALL.max_len, batch_size=8, lr=LESSON_TRAINING.lr, eval_every=10,
)  # fmt: skip


@dataclass
class GridRun:
    """Lesson 9 (C9.3). One trained model of the grid, summarized: its seeds (batches, initial
    weights), its held-out curve, its final held-out loss, at ``long_factor`` times the training
    length (None with the reason when it cannot run; shown for the position rows)."""

    seed: int
    n_parameters: int
    val_steps: list[int]
    val_losses: list[float]
    val_loss: float
    seconds: float
    loss_at_long: float | None = None
    long_note: str = ""
    init_seed: int | None = None
    options: dict = field(default_factory=dict)  # the model's choices: position ... init

    def __post_init__(self):
        if self.init_seed is None:
            self.init_seed = self.seed


@dataclass
class SideBySide:
    """Lesson 9 (C9.3). What :func:`side_by_side` trained: ``runs[(factor, choice)]`` the runs of
    one choice (one per seed; identical configurations share their runs, so the base model's
    runs are the first choice of every sheet factor), ``aa_runs[m]`` the m-th A/A repeat of the
    base runs (same batches, another initial draw), the settings, the steps and the baselines.
    ``level`` is each look's level (:func:`helpers.paired.decide`); ``followup`` the grid of the
    follow-up seeds for rows the first look left undecided (None without one)."""

    base: PretrainConfig
    steps: int
    seeds: tuple[int, ...]
    long_factor: int
    runs: dict[tuple[str, str], list[GridRun]] = field(default_factory=dict)
    base_runs: list[GridRun] = field(default_factory=list)
    aa_runs: list[list[GridRun]] = field(default_factory=list)
    baselines: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    level: float = TWO_LOOK_LEVEL
    val_tokens: int = 0
    followup: SideBySide | None = None

    # -- the comparisons ----------------------------------------------------------------------
    def factors(self) -> list[str]:
        return list(dict.fromkeys(f for f, _ in self.runs))

    def reference(self, factor: str) -> str:
        """The choice a factor's other choices are compared with (its first)."""
        return next(c for f, c in self.runs if f == factor)

    def finals(self, factor: str, choice: str) -> list[float]:
        """The final held-out loss of each seed, in the order of ``seeds``."""
        return [r.val_loss for r in self._runs(factor, choice)]

    def _runs(self, factor: str, choice: str) -> list[GridRun]:
        if (factor, choice) not in self.runs:
            raise ValueError(f"no row ({factor!r}, {choice!r}); rows: {list(self.runs)}")
        return self.runs[(factor, choice)]

    def differences(self, factor: str, choice: str) -> list[float]:
        """Seed by seed: this choice's final loss minus the factor's first choice's."""
        return paired_differences(
            self.finals(factor, self.reference(factor)), self.finals(factor, choice)
        )

    def more_differences(self, factor: str, choice: str) -> list[float]:
        """The follow-up seeds' paired differences of a row (empty without a follow-up of it)."""
        if self.followup is None or (factor, choice) not in self.followup.runs:
            return []
        return self.followup.differences(factor, choice)

    def verdict(self, factor: str, choice: str) -> Verdict | None:
        """The two-look rule: :func:`helpers.paired.decide` at ``level`` on :meth:`differences`;
        if it does not fire and the row has follow-up seeds, again on all its differences
        (:meth:`more_differences` added). None for the factor's first choice and with fewer than
        :data:`~helpers.paired.MIN_SEEDS` seeds."""
        if choice == self.reference(factor) or len(self.seeds) < MIN_SEEDS:
            return None
        first = decide(self.differences(factor, choice), self.level)
        more = self.more_differences(factor, choice)
        if first.decided or not more:
            return first
        return decide(self.differences(factor, choice) + more, self.level)

    def aa_differences(self) -> list[list[float]]:
        """The A/A comparisons, in disjoint pairs of repeats (the base's runs with repeat 1,
        repeat 2 with repeat 3, ...: :func:`helpers.paired.disjoint_pairs`), so that no run
        enters two comparisons; each a list of paired differences, one per seed."""
        if not self.aa_runs:
            return []
        sets = [[r.val_loss for r in self.base_runs]]
        sets += [[r.val_loss for r in aa] for aa in self.aa_runs]
        return disjoint_pairs(sets)

    def aa_rate(self) -> AARate | None:
        """The rule's first look on the disjoint A/A comparisons (None without A/A runs or with
        too few seeds)."""
        if not self.aa_runs or len(self.seeds) < MIN_SEEDS:
            return None
        return aa_rate(self.aa_differences(), self.level)

    def aa_sd(self) -> float | None:
        """The spread of null paired differences: the root mean square of every disjoint A/A
        comparison's differences (None without A/A runs)."""
        flat = [d for comparison in self.aa_differences() for d in comparison]
        return (sum(d * d for d in flat) / len(flat)) ** 0.5 if flat else None

    def detectable(self) -> dict[str, float] | None:
        """The smallest true mean difference (nats) each look detects with 80% power, given the
        A/A spread (:meth:`aa_sd`): ``{"5": ..., "8": ...}`` keyed by the seeds of the look
        (the second only with a follow-up). None without A/A runs or with too few seeds."""
        sd = self.aa_sd()
        if sd is None or len(self.seeds) < MIN_SEEDS:
            return None
        ns = [len(self.seeds)]
        if self.followup is not None:
            ns.append(len(self.seeds) + len(self.followup.seeds))
        return {str(n): detectable_difference(n, sd, self.level) for n in ns}

    def shaped_rate(self) -> float | None:
        """The first look's false-alarm rate under a null shaped like the data: every disjoint
        A/A difference, centred on zero and resampled (:func:`helpers.paired.null_rate` with a
        ``sample``), skew and tails included. None without A/A runs or with too few seeds."""
        flat = [d for c in self.aa_differences() for d in c]
        if len(flat) < 2 or len(self.seeds) < MIN_SEEDS:
            return None
        return null_rate(len(self.seeds), self.level, sample=flat)

    def false_alarm_rate(self) -> float | None:
        """The rule's false-alarm rate per comparison under Gaussian noise: the level of one
        look, or with a follow-up the two looks' together (:func:`helpers.paired.two_look_rate`).
        None with too few seeds."""
        n = len(self.seeds)
        if n < MIN_SEEDS:
            return None
        if self.followup is None:
            return self.level
        return two_look_rate(n, n + len(self.followup.seeds), self.level)

    def with_followup(self, other: SideBySide) -> SideBySide:
        """This grid with ``other`` as its follow-up: the same base model and settings trained
        under new seeds (none of this grid's) for some of this grid's rows, used by the second
        look of :meth:`verdict` for the rows the first look leaves undecided."""
        if not isinstance(other, SideBySide):
            raise TypeError(f"other must be a SideBySide, got {type(other).__name__}")
        same = (replace(self.base, seed=0), self.steps, self.long_factor, self.val_tokens) == (
            replace(other.base, seed=0), other.steps, other.long_factor, other.val_tokens
        )  # fmt: skip
        if not same or set(other.seeds) & set(self.seeds) or not set(other.runs) <= set(self.runs):
            raise ValueError(
                "other must train the same base model and settings as this grid, under seeds "
                f"this grid does not use (this grid's {list(self.seeds)}, other's "
                f"{list(other.seeds)}), for rows of this grid"
            )
        merged = replace(self, followup=replace(other, aa_runs=[], followup=None))
        merged.seconds = self.seconds + other.seconds
        merged.cpu_seconds = self.cpu_seconds + other.cpu_seconds
        return merged

    def with_aa(self, other: SideBySide) -> SideBySide:
        """This grid with ``other``'s A/A runs, when ``other`` trained the same base model under
        the same settings (checked: its base runs must have exactly this grid's final losses;
        the runs are deterministic, so a grid's rows and its A/A runs may be trained apart)."""
        if not isinstance(other, SideBySide):
            raise TypeError(f"other must be a SideBySide, got {type(other).__name__}")
        same = (self.base, self.steps, self.seeds, self.long_factor, self.val_tokens) == (
            other.base, other.steps, other.seeds, other.long_factor, other.val_tokens
        )  # fmt: skip
        mine = [r.val_loss for r in self.base_runs]
        theirs = [r.val_loss for r in other.base_runs]
        if not same or mine != theirs:
            raise ValueError(
                "other must have trained the same base model under the same settings, with "
                f"the same final losses (this grid's {mine}, other's {theirs})"
            )
        merged = replace(self, aa_runs=list(other.aa_runs))
        merged.seconds, merged.cpu_seconds = (
            self.seconds + other.seconds,
            (self.cpu_seconds + other.cpu_seconds),
        )
        return merged

    def summary(self) -> dict:
        """What the rule concluded, as data: the rule, its claimed false-alarm rate, the A/A
        count, and every comparison's paired differences, mean, SE and verdict."""
        claimed = self.false_alarm_rate()
        rate = self.aa_rate()
        aa = None
        if rate is not None:
            aa = {
                "alarms": rate.alarms,
                "comparisons": rate.comparisons,
                "rate": rate.rate,
                "interval": list(rate.interval),
            }
        comparisons = [
            {
                "factor": r["factor"],
                "choice": r["choice"],
                "reference": self.reference(r["factor"]),
                "differences": r["differences"],
                "more_differences": r["more_differences"],
                "mean_difference": r["mean_difference"],
                "se": r["se"],
                "verdict": r["verdict"],
                "verdict_seeds": r["verdict_seeds"],
            }
            for r in self.table()
            if r["differences"] is not None
        ]
        chance = None
        if claimed is not None and comparisons:
            chance = list(chance_alarms(len(comparisons), claimed))
        return {
            "rule": rule_summary(self),
            "claimed_rate": claimed,
            "aa": aa,
            "aa_sd": self.aa_sd(),
            "shaped_rate": self.shaped_rate(),
            "detectable": self.detectable(),
            "chance_alarms": chance,
            "comparisons": comparisons,
        }

    # -- tables -------------------------------------------------------------------------------
    def table(self) -> list[dict]:
        """One row per (factor, choice): ``factor``, ``choice``, ``seeds``, ``parameters``,
        ``finals`` (one per seed), ``mean`` and ``spread`` (max - min over the seeds) of the final
        held-out loss; ``differences`` (seed by seed, minus the factor's first choice),
        ``mean_difference``, ``se`` and ``verdict`` ("lower", "higher", "cannot tell apart at this
        size", "" for the first choice, "too few seeds" under 3) of the first look; the follow-up
        seeds' ``more_differences`` (empty without) and ``verdict_seeds``, the seeds the verdict
        rests on (and ``verdict`` is the second look's when there is one); for the position rows
        ``at_long`` (the mean loss at ``long_factor`` times the training length, per seed in
        ``long``) or ``long_note`` (why it could not be measured)."""
        rows = []
        for (factor, choice), runs in self.runs.items():
            finals = [r.val_loss for r in runs]
            row = {
                "factor": factor,
                "choice": choice,
                "seeds": [r.seed for r in runs],
                "parameters": runs[0].n_parameters,
                "finals": finals,
                "mean": sum(finals) / len(finals),
                "spread": max(finals) - min(finals),
                "differences": None,
                "more_differences": [],
                "mean_difference": None,
                "se": None,
                "verdict": "",
                "verdict_seeds": 0,
                "at_long": None,
                "long": None,
                "long_note": "",
            }
            if choice != self.reference(factor):
                d = self.differences(factor, choice)
                row["differences"] = d
                row["mean_difference"] = sum(d) / len(d)
                v = self.verdict(factor, choice)
                row["se"] = mean_and_se(d)[1] if v else None  # the first look's
                row["verdict"] = v.text if v else f"too few seeds ({len(self.seeds)})"
                row["verdict_seeds"] = len(v.differences) if v else len(d)
                if v is not None and len(v.differences) > len(d):
                    row["more_differences"] = list(v.differences[len(d) :])
            if factor in _POSITION_FACTORS:
                longs = [r.loss_at_long for r in runs]
                if all(x is not None for x in longs):
                    row["at_long"], row["long"] = sum(longs) / len(longs), longs
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
        """The table as aligned text lines (losses printed with :func:`helpers.printing.fmt`):
        the mean over seeds, the spread, the mean paired difference from the factor's first
        choice and the rule's verdict, and the loss at ``long_factor`` times the length."""
        long = f"at {self.long_factor}x length"
        out = [
            f"{'factor':<21}{'choice':<18}{'params':>8}{'mean':>8}{'spread':>8}"
            f"{'diff':>8}  {'verdict':<31}{long}",
        ]
        for r in self.table():
            at_long = fmt(r["at_long"], decimals=decimals) if r["at_long"] is not None else ""
            if r["long_note"]:
                at_long = r["long_note"]
            diff = (
                "" if r["mean_difference"] is None else fmt(r["mean_difference"], decimals=decimals)
            )
            out.append(
                f"{r['factor']:<21}{r['choice']:<18}{r['parameters']:>8,}"
                f"{fmt(r['mean'], decimals=decimals):>8}{fmt(r['spread'], decimals=decimals):>8}"
                f"{diff:>8}  {r['verdict']:<31}{at_long}"
            )
        return out

    def markdown(self, decimals: int = 3) -> str:
        """The table in Markdown (the format tools/side_by_side.py writes): per-seed finals,
        paired differences and verdicts."""
        long = f"held-out loss at {self.long_factor}x the training length"
        head = (
            f"| factor | choice | parameters | final held-out loss per seed | mean | "
            f"paired difference per seed | mean difference (SE) | verdict | {long} |\n"
            f"|---|---|---:|---|---:|---|---:|---|---|"
        )
        body = []
        for r in self.table():
            if r["at_long"] is not None:
                at_long = fmt(r["at_long"], decimals=decimals)
            else:
                at_long = r["long_note"] or ""
            finals = ", ".join(fmt(x, decimals=decimals) for x in r["finals"])
            diffs = (
                ", ".join(_signed(x, decimals) for x in r["differences"])
                if r["differences"] is not None
                else "(the factor's reference)"
            )
            if r["more_differences"]:
                more = ", ".join(_signed(x, decimals) for x in r["more_differences"])
                diffs += f"; follow-up seeds: {more}"
            verdict = r["verdict"]
            if r["verdict_seeds"] > len(r["finals"]):
                mean8, se8 = mean_and_se(r["differences"] + r["more_differences"])
                verdict += (
                    f" (at {r['verdict_seeds']} seeds: {_signed(mean8, decimals)}, SE "
                    f"{fmt(se8, decimals=decimals)})"
                )
            mean_d = ""
            if r["mean_difference"] is not None:
                mean_d = _signed(r["mean_difference"], decimals)
                if r["se"] is not None:
                    mean_d += f" ({fmt(r['se'], decimals=decimals)})"
            body.append(
                f"| {r['factor']} | {r['choice']} | {r['parameters']:,} | {finals} "
                f"| {fmt(r['mean'], decimals=decimals)} | {diffs} | {mean_d} | {verdict} "
                f"| {at_long} |"
            )
        return "\n".join([head, *body])

    # -- shipping -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Everything the grid measured, as JSON-ready values (see :meth:`from_dict`)."""
        base = {k: v for k, v in asdict(self.base).items() if k != "dtype"}
        base["dtype"] = str(self.base.dtype).replace("torch.", "")
        return {
            "base": base,
            "steps": self.steps,
            "seeds": list(self.seeds),
            "long_factor": self.long_factor,
            "level": self.level,
            "baselines": dict(self.baselines),
            "rows": [
                {"factor": f, "choice": c, "runs": [asdict(r) for r in runs]}
                for (f, c), runs in self.runs.items()
            ],
            "base_runs": [asdict(r) for r in self.base_runs],
            "aa_runs": [[asdict(r) for r in aa] for aa in self.aa_runs],
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "val_tokens": self.val_tokens,
            "followup": None if self.followup is None else self._followup_dict(),
        }

    def _followup_dict(self) -> dict:
        # the follow-up shares every setting with this grid but its seeds and runs
        f = self.followup.to_dict()
        return {k: f[k] for k in ("seeds", "rows", "base_runs", "seconds", "cpu_seconds")}

    @classmethod
    def from_dict(cls, data: dict) -> SideBySide:
        """The grid :meth:`to_dict` wrote (runs shared by several rows are shared again)."""
        import torch

        base = dict(data["base"])
        base["dtype"] = getattr(torch, base["dtype"])
        grid = cls(
            base=PretrainConfig(**base),
            steps=data["steps"],
            seeds=tuple(data["seeds"]),
            long_factor=data["long_factor"],
            baselines=dict(data["baselines"]),
            seconds=data["seconds"],
            cpu_seconds=data["cpu_seconds"],
            level=data["level"],
            val_tokens=data.get("val_tokens", 0),
        )
        if data.get("followup") is not None:
            f = data["followup"]
            grid.followup = cls.from_dict(
                {
                    **data,
                    **f,
                    "aa_runs": [],
                    "followup": None,
                    "base": {**data["base"], "seed": f["seeds"][0]},
                }
            )
        seen: dict[str, list[GridRun]] = {}
        for row in data["rows"]:
            runs = [GridRun(**r) for r in row["runs"]]
            key = repr([asdict(r) for r in runs])
            grid.runs[(row["factor"], row["choice"])] = seen.setdefault(key, runs)
        base_runs = [GridRun(**r) for r in data["base_runs"]]
        grid.base_runs = seen.get(repr([asdict(r) for r in base_runs]), base_runs)
        grid.aa_runs = [[GridRun(**r) for r in aa] for aa in data["aa_runs"]]
        return grid


def _signed(x: float, decimals: int) -> str:
    text = fmt(x, decimals=decimals)
    return text if text.startswith("-") else "+" + text


def _grid_run(run: Pretraining, long_factor: int) -> GridRun:
    summary = GridRun(
        seed=run.config.seed,
        n_parameters=run.result.n_parameters,
        val_steps=list(run.result.val_steps),
        val_losses=list(run.result.val_losses),
        val_loss=run.val_loss,
        seconds=run.seconds,
        init_seed=run.config.seed if run.config.init_seed is None else run.config.init_seed,
        options={f: getattr(run.config, f) for f in _CHOSEN},
    )
    long = run.config.block_size * long_factor
    if len(run.corpus.val_ids) < long + 1:
        summary.long_note = f"held-out text shorter than one window of {long}"
        return summary
    try:
        with _one_thread():
            summary.loss_at_long = evaluate(run.model, run.corpus.val_ids, long)
    except PositionOutOfRange:
        summary.long_note = (
            f"cannot run: the learned table has rows for positions 0..{run.config.block_size - 1} "
            "only"
        )
    return summary


def _seeds(seeds) -> tuple[int, ...]:
    if isinstance(seeds, int | str) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a list of whole numbers, got {seeds!r}")
    seeds = tuple(check.positive_int("each seed", s, minimum=0) for s in seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be one or more distinct whole numbers, got {list(seeds)}")
    if max(seeds) >= AA_INIT_OFFSET:
        raise ValueError(
            f"seeds must be below {AA_INIT_OFFSET} (the A/A runs' initial draws start there), "
            f"got {list(seeds)}"
        )
    return seeds


def side_by_side(
    steps: int = 60,
    seeds=(0, 1),
    corpus: Corpus | None = None,
    factors=None,
    long_factor: int = 2,
    aa: int = 0,
    level: float = TWO_LOOK_LEVEL,
    **settings,
) -> SideBySide:
    """Lesson 9 (C9.3). Train the sheet's choices side by side at equal budget, one factor at a
    time from the base model (``settings``: the fields of :class:`PretrainConfig` other than the
    grid's own choices, default :data:`SMALL_GRID`): every run has the same size, steps, batches
    and held-out text; seed s of ``seeds`` sets the batches and the initial weights of every
    choice. ``factors`` (default :data:`SHEET_FACTORS`; any of :data:`FACTORS`) picks the factors.
    The position rows are also measured at ``long_factor`` times the training length (the
    sinusoidal table and rotary are defined there; a learned table is not, and the row says so).
    ``aa`` A/A comparisons train the base model again per seed with the same batches and the
    initial draw ``init_seed = 1000 m + s`` (m = 1..aa). ``level``: each look's level of the
    rule (:func:`helpers.paired.decide`).

    Returns a :class:`SideBySide`: ``.table()``, ``.lines()``, ``.markdown()``, the verdicts
    (``.verdict(factor, choice)``), the A/A rate (``.aa_rate()``) and the curves in ``.runs``
    (:func:`helpers.plots.pretrain.plot_side_by_side`).
    """
    steps = check.positive_int("steps", steps)
    long_factor = check.positive_int("long_factor", long_factor, minimum=2)
    aa = check.positive_int("aa", aa, minimum=0)
    seeds = _seeds(seeds)
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise ValueError(
            f"level (the rule's false-alarm rate) must be between 0 and 1, got {level!r}"
        )
    factors = list(SHEET_FACTORS) if factors is None else list(factors)
    if not factors and not aa:
        raise ValueError("factors must name at least one factor of FACTORS (or aa > 0)")
    for f in factors:
        check.choice("each factor", f, tuple(FACTORS))
    given = {**SMALL_GRID, **settings}
    clash = sorted(set(given) & {*_CHOSEN, "init_seed"})
    if clash:
        raise TypeError(
            f"the base model's {clash} are the grid's own choices (the base model is "
            "sinusoidal, pre-norm, tied, GELU with Xavier init and scaled embeddings); leave "
            "them out"
        )
    base = _settings({**given, **_BASE, "seed": seeds[0]})
    corpus = Corpus.from_text() if corpus is None else corpus
    if not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a helpers.pretrain.Corpus, got {type(corpus).__name__}")
    grid = SideBySide(
        base=base,
        steps=steps,
        seeds=seeds,
        long_factor=long_factor,
        baselines=corpus.baselines,
        level=float(level),
        val_tokens=len(corpus.val_ids) - 1,
    )
    start, cpu = time.perf_counter(), time.process_time()
    done: dict[tuple, list[GridRun]] = {}  # identical configurations are trained once

    def train(config: PretrainConfig) -> GridRun:
        run = Pretraining(corpus, **asdict(config)).train(steps, "none")
        return _grid_run(run, long_factor)

    def key(config: PretrainConfig) -> tuple:
        return tuple((f, getattr(config, f)) for f in _CHOSEN)

    for factor in factors:
        for choice, fields in FACTORS[factor].items():
            config = replace(base, **fields)
            if key(config) not in done:
                done[key(config)] = [train(replace(config, seed=s)) for s in seeds]
            grid.runs[(factor, choice)] = done[key(config)]
    if key(base) in done or aa:
        if key(base) not in done:
            done[key(base)] = [train(replace(base, seed=s)) for s in seeds]
        grid.base_runs = done[key(base)]
    for m in range(1, aa + 1):
        grid.aa_runs.append(
            [train(replace(base, seed=s, init_seed=AA_INIT_OFFSET * m + s)) for s in seeds]
        )
    grid.seconds = time.perf_counter() - start
    grid.cpu_seconds = time.process_time() - cpu
    return grid


def rule_summary(grid: SideBySide) -> str:
    """Lesson 9 (C9.3). The rule, its false-alarm rate (claimed and, with A/A runs, measured),
    the smallest difference it detects at 80% power and the chance alarms of the whole grid, in
    one paragraph."""
    n = len(grid.seeds)
    if n < MIN_SEEDS:
        return f"{n} seed(s): too few for the rule (it needs {MIN_SEEDS}); no verdicts at this size"
    c = t_quantile(n, grid.level)
    text = (
        f"rule: a paired t-test on the mean of the {n} paired differences, at level "
        f"{grid.level:.1%} (the mean beyond {c:.2f} standard errors; it tests the mean, not "
        "whether the seeds agree in sign)"
    )
    if grid.followup is not None:
        n2 = n + len(grid.followup.seeds)
        text += (
            f"; a row it leaves undecided is decided again at {n2} seeds (follow-up seeds "
            f"{', '.join(map(str, grid.followup.seeds))}; the mean beyond "
            f"{t_quantile(n2, grid.level):.2f} SE), the two looks declared before the follow-up ran"
        )
    rate = grid.false_alarm_rate()
    text += (
        f"; false-alarm rate {rate:.1%} per comparison if a choice changes nothing (Gaussian noise)"
    )
    aa = grid.aa_rate()
    if aa is not None:
        lo, hi = aa.interval
        text += (
            f"; measured on {aa.comparisons} disjoint A/A comparisons (no run in two): "
            f"{aa.alarms} alarm(s), {aa.rate:.0%} (95% interval {lo:.0%} to {hi:.0%}: "
            f"{aa.comparisons} comparisons cannot pin the rate down)"
        )
        text += (
            f"; under a null shaped like the A/A differences (centred, resampled) the first look "
            f"fires {grid.shaped_rate():.1%} (its level {grid.level:.1%})"
        )
        seen = grid.detectable()
        looks = " and ".join(f"{seen[k]:.3f} nats at {k} seeds" for k in seen)
        text += (
            f"; with the A/A spread ({grid.aa_sd():.3f} nats per paired difference) it detects "
            f"at 80% power a true difference of {looks}: smaller differences are mostly "
            "'cannot tell apart'"
        )
    m = sum(1 for r in grid.table() if r["differences"] is not None)
    if m:
        expected, some = chance_alarms(m, rate)
        text += (
            f"; {m} comparisons at {rate:.1%} each give {expected:.2f} chance alarms on average "
            f"(at least one with probability {some:.0%}) if no choice mattered"
        )
    return text


# -- shipped with the course (helpers.shipped): what tools/side_by_side.py writes ----------------
#: The name of the shipped grid: ``helpers/data/side_by_side.json``.
SIDE_BY_SIDE_DATA = "side_by_side"
_RUN_SCHEMA = {
    "seed": int,
    "n_parameters": int,
    "val_steps": [int],
    "val_losses": [float],
    "val_loss": float,
    "seconds": float,
    "loss_at_long": (float, None),
    "long_note": str,
    "init_seed": int,
    "options": {
        "positional": str,
        "norm": str,
        "activation": str,
        "tie_weights": bool,
        "init": str,
        "scale_embeddings": bool,
    },
}
_BASE_SCHEMA = {
    **{k: int for k in ("d_model", "n_layers", "n_heads", "block_size", "batch_size")},
    **{"lr": float, "seed": int, "eval_every": int, "positional": str, "norm": str},
    **{"activation": str, "tie_weights": bool, "dtype": str, "init": (str, None)},
    **{"scale_embeddings": (bool, None), "init_seed": (int, None)},
}
#: What the grid was declared to be (the settings of the shipped file).
SETTINGS_SCHEMA = {
    "base": _BASE_SCHEMA,
    "steps": int,
    "seeds": [int],
    "factors": [str],
    "aa": int,
    "long_factor": int,
    "level": float,
    "val_tokens": int,
}
#: What it measured (the results of the shipped file).
RESULTS_SCHEMA = {
    "baselines": {"uniform": float, "unigram": float, "bigram": float},
    "rows": [{"factor": str, "choice": str, "runs": [_RUN_SCHEMA]}],
    "base_runs": [_RUN_SCHEMA],
    "aa_runs": [[_RUN_SCHEMA]],
    "followup": (
        {
            "seeds": [int],
            "rows": [{"factor": str, "choice": str, "runs": [_RUN_SCHEMA]}],
            "base_runs": [_RUN_SCHEMA],
            "seconds": float,
            "cpu_seconds": float,
        },
        None,
    ),
    "summary": {
        "rule": str,
        "claimed_rate": (float, None),
        "aa": (
            {"alarms": int, "comparisons": int, "rate": float, "interval": [float]},
            None,
        ),
        "aa_sd": (float, None),
        "shaped_rate": (float, None),
        "detectable": ({str: float}, None),
        "chance_alarms": ([float], None),
        "comparisons": [
            {
                "factor": str,
                "choice": str,
                "reference": str,
                "differences": [float],
                "more_differences": [float],
                "mean_difference": float,
                "se": (float, None),
                "verdict": str,
                "verdict_seeds": int,
            }
        ],
    },
}
_SETTINGS = ("base", "steps", "seeds", "long_factor", "level", "val_tokens")
_RESULTS = ("baselines", "rows", "base_runs", "aa_runs", "followup")


def save_side_by_side(grid: SideBySide, folder=None):
    """Lesson 9 (C9.3). Write ``grid`` as the shipped results ``side_by_side.json`` (default
    folder ``helpers/data``; :func:`helpers.shipped.write_results`, checked against
    :data:`SETTINGS_SCHEMA` and :data:`RESULTS_SCHEMA`). Returns the path written."""
    from .shipped import write_results

    if not isinstance(grid, SideBySide):
        raise TypeError(f"grid must be a SideBySide, got {type(grid).__name__}")
    data = grid.to_dict()
    settings = {k: data[k] for k in _SETTINGS}
    settings["factors"], settings["aa"] = grid.factors(), len(grid.aa_runs)
    return write_results(
        SIDE_BY_SIDE_DATA,
        tool="tools/side_by_side.py",
        settings=settings,
        results={**{k: data[k] for k in _RESULTS}, "summary": grid.summary()},
        settings_schema=SETTINGS_SCHEMA,
        results_schema=RESULTS_SCHEMA,
        seconds=grid.seconds,
        cpu_seconds=grid.cpu_seconds,
        folder=folder,
    )


def load_side_by_side(folder=None) -> SideBySide:
    """Lesson 9 (C9.3). The full grid that ships with the course (``helpers/data/
    side_by_side.json``, written by ``tools/side_by_side.py``), checked against its schemas, as
    a :class:`SideBySide`: ``.table()``, ``.markdown()``, the verdicts, ``.aa_rate()``, the
    curves (:func:`helpers.plots.pretrain.plot_side_by_side`, :func:`~helpers.plots.pretrain.
    plot_differences`). ``folder``: read another folder's file instead (the tests' reruns)."""
    from .shipped import load_results

    shipped = load_results(SIDE_BY_SIDE_DATA, SETTINGS_SCHEMA, RESULTS_SCHEMA, folder=folder)
    data = {**shipped.settings, **shipped.results}
    data["seconds"], data["cpu_seconds"] = shipped.seconds, shipped.cpu_seconds
    grid = SideBySide.from_dict(data)
    if grid.summary() != shipped.results["summary"]:
        raise ValueError(
            "helpers/data/side_by_side.json: its summary (differences, verdicts, rates) is not "
            "what its own runs give; rerun tools/side_by_side.py"
        )
    return grid
