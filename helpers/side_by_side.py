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
:func:`helpers.paired.decide` (all of one sign, mean beyond 2 standard errors; its false-alarm
rate :func:`helpers.paired.null_rate`). The **A/A runs** train the base model again with the same
batches (seed s) and another initial draw (``init_seed = 1000 m + s`` for the m-th comparison):
what differs between two choices under one seed, with no choice changed. The rule applied to them
(:meth:`SideBySide.aa_rate`) measures its false-alarm rate on this task.

``tools/side_by_side.py`` runs the full grid and ships it as ``helpers/data/side_by_side.json``
(settings, per-seed curves and finals, the A/A runs, and the rule's summary: paired differences,
verdicts, the claimed and the measured false-alarm rate); :func:`load_side_by_side` reads it back
and checks that the summary is what the runs give.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

from . import _validate as check
from .paired import MIN_SEEDS, AARate, Verdict, aa_rate, decide, null_rate, paired_differences
from .positional import PositionOutOfRange
from .pretrain import Corpus, PretrainConfig, Pretraining, _settings
from .printing import fmt
from .reproducible import one_thread as _one_thread
from .training import evaluate

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
_CHOSEN = ("positional", "norm", "activation", "tie_weights", "init", "scale_embeddings")
_BASE = {
    "positional": "sinusoidal",
    "norm": "pre",
    "activation": "gelu",
    "tie_weights": True,
    **BASE_INIT,
}
#: The A/A runs' initial draws: ``init_seed = AA_INIT_OFFSET * m + s`` for comparison m = 1, 2, ...
AA_INIT_OFFSET = 1000

#: The notebook's small grid: tiny models and a few steps, so that the whole grid (7 models,
#: 2 seeds) trains in about ten seconds here. tools/side_by_side.py runs the full one.
SMALL_GRID = dict(
    d_model=32, n_layers=2, n_heads=4, block_size=32, batch_size=8, lr=5e-3, eval_every=10
)


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
    runs are the first choice of every sheet factor), ``aa_runs[m]`` the m-th A/A comparison's
    base runs (same batches, another initial draw), the settings, the steps and the baselines.
    ``k`` is the rule's number of standard errors (:func:`helpers.paired.decide`)."""

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
    k: float = 2.0
    val_tokens: int = 0

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

    def verdict(self, factor: str, choice: str) -> Verdict | None:
        """:func:`helpers.paired.decide` on :meth:`differences`; None for the factor's first
        choice and with fewer than :data:`~helpers.paired.MIN_SEEDS` seeds."""
        if choice == self.reference(factor) or len(self.seeds) < MIN_SEEDS:
            return None
        return decide(self.differences(factor, choice), self.k)

    def aa_differences(self) -> list[list[float]]:
        """Each A/A comparison's paired differences against the base model's runs."""
        base = [r.val_loss for r in self.base_runs]
        return [paired_differences(base, [r.val_loss for r in aa]) for aa in self.aa_runs]

    def aa_rate(self) -> AARate | None:
        """The rule on the A/A comparisons (None without A/A runs or with too few seeds)."""
        if not self.aa_runs or len(self.seeds) < MIN_SEEDS:
            return None
        return aa_rate(self.aa_differences(), self.k)

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
        n = len(self.seeds)
        claimed = null_rate(n, self.k) if n >= MIN_SEEDS else None
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
                "mean_difference": r["mean_difference"],
                "se": r["se"],
                "verdict": r["verdict"],
            }
            for r in self.table()
            if r["differences"] is not None
        ]
        return {
            "rule": rule_summary(self),
            "claimed_rate": claimed,
            "aa": aa,
            "comparisons": comparisons,
        }

    # -- tables -------------------------------------------------------------------------------
    def table(self) -> list[dict]:
        """One row per (factor, choice): ``factor``, ``choice``, ``seeds``, ``parameters``,
        ``finals`` (one per seed), ``mean`` and ``spread`` (max - min over the seeds) of the final
        held-out loss; ``differences`` (seed by seed, minus the factor's first choice),
        ``mean_difference``, ``se`` and ``verdict`` ("lower", "higher", "cannot tell apart at this
        size", "" for the first choice, "too few seeds" under 3); for the position rows
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
                "mean_difference": None,
                "se": None,
                "verdict": "",
                "at_long": None,
                "long": None,
                "long_note": "",
            }
            if choice != self.reference(factor):
                d = self.differences(factor, choice)
                row["differences"] = d
                row["mean_difference"] = sum(d) / len(d)
                v = self.verdict(factor, choice)
                row["se"] = v.se if v else None
                row["verdict"] = v.text if v else f"too few seeds ({len(self.seeds)})"
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
            mean_d = ""
            if r["mean_difference"] is not None:
                mean_d = _signed(r["mean_difference"], decimals)
                if r["se"] is not None:
                    mean_d += f" ({fmt(r['se'], decimals=decimals)})"
            body.append(
                f"| {r['factor']} | {r['choice']} | {r['parameters']:,} | {finals} "
                f"| {fmt(r['mean'], decimals=decimals)} | {diffs} | {mean_d} | {r['verdict']} "
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
            "k": self.k,
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
        }

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
            k=data["k"],
            val_tokens=data.get("val_tokens", 0),
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
    k: float = 2.0,
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
    initial draw ``init_seed = 1000 m + s`` (m = 1..aa). ``k``: the rule's standard errors.

    Returns a :class:`SideBySide`: ``.table()``, ``.lines()``, ``.markdown()``, the verdicts
    (``.verdict(factor, choice)``), the A/A rate (``.aa_rate()``) and the curves in ``.runs``
    (:func:`helpers.plots.pretrain.plot_side_by_side`).
    """
    steps = check.positive_int("steps", steps)
    long_factor = check.positive_int("long_factor", long_factor, minimum=2)
    aa = check.positive_int("aa", aa, minimum=0)
    seeds = _seeds(seeds)
    if isinstance(k, bool) or not isinstance(k, int | float) or not k > 0:
        raise ValueError(f"k (standard errors) must be a positive number, got {k!r}")
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
        k=float(k),
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
    """The rule and its false-alarm rate, claimed and (with A/A runs) measured, in one line."""
    n = len(grid.seeds)
    if n < MIN_SEEDS:
        return f"{n} seed(s): too few for the rule (it needs {MIN_SEEDS}); no verdicts at this size"
    text = (
        f"rule: all {n} paired differences of one sign and the mean beyond {grid.k:g} standard "
        f"errors; false-alarm rate {null_rate(n, grid.k):.1%} if a choice changes nothing "
        "(Gaussian noise)"
    )
    rate = grid.aa_rate()
    if rate is not None:
        lo, hi = rate.interval
        text += (
            f"; measured on {rate.comparisons} A/A comparisons: {rate.alarms} alarm(s), "
            f"{rate.rate:.0%} (95% interval {lo:.0%} to {hi:.0%})"
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
    "k": float,
    "val_tokens": int,
}
#: What it measured (the results of the shipped file).
RESULTS_SCHEMA = {
    "baselines": {"uniform": float, "unigram": float, "bigram": float},
    "rows": [{"factor": str, "choice": str, "runs": [_RUN_SCHEMA]}],
    "base_runs": [_RUN_SCHEMA],
    "aa_runs": [[_RUN_SCHEMA]],
    "summary": {
        "rule": str,
        "claimed_rate": (float, None),
        "aa": (
            {"alarms": int, "comparisons": int, "rate": float, "interval": [float]},
            None,
        ),
        "comparisons": [
            {
                "factor": str,
                "choice": str,
                "reference": str,
                "differences": [float],
                "mean_difference": float,
                "se": (float, None),
                "verdict": str,
            }
        ],
    },
}
_SETTINGS = ("base", "steps", "seeds", "long_factor", "k", "val_tokens")
_RESULTS = ("baselines", "rows", "base_runs", "aa_runs")


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
