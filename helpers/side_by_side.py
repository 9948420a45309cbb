"""Lesson 9 (C9.3): the sheet's choices trained side by side at equal budget.

One factor at a time from the course's default model (sinusoidal position, pre-norm, tied,
GELU), each choice trained by :class:`helpers.pretrain.Pretraining` at the same budget (same
steps, batches and seeds), evaluated on the same held-out text; the positional choices also at
twice the training length, where a learned table cannot run at all (C4.4, C4.7).
``tools/side_by_side.py`` runs the full grid and writes ``docs/SIDE_BY_SIDE.md``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

from . import _validate as check
from .positional import PositionOutOfRange
from .pretrain import Corpus, PretrainConfig, Pretraining, _settings
from .printing import fmt
from .reproducible import one_thread as _one_thread
from .training import evaluate

__all__ = ["FACTORS", "SMALL_GRID", "GridRun", "SideBySide", "side_by_side"]


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
