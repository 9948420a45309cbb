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
from dataclasses import asdict, fields, replace

from . import _validate as check
from .model import LESSON_MODEL
from .paired import TWO_LOOK_LEVEL
from .paired_experiment import AA_SCHEMA, COMPARISON_SCHEMA
from .positional import PositionOutOfRange
from .pretrain import MODEL_FIELDS, Corpus, PretrainConfig, Pretraining, _settings
from .reproducible import one_thread as _one_thread
from .side_by_side_grid import GridRun, SideBySide
from .side_by_side_tables import rule_summary
from .training import LESSON_TRAINING, evaluate

# The grid's results (GridRun, SideBySide: its comparisons and the rule's conclusions) are in
# helpers.side_by_side_grid, its tables in helpers.side_by_side_tables (importable from here as
# before); this module declares the grid, trains it and ships it.

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
        for choice, chosen in FACTORS[factor].items():
            config = replace(base, **chosen)
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
    "options": {k: type(v) for k, v in _BASE.items()},  # the model's choices: str or bool
}
#: PretrainConfig's annotations as the shipped file holds them (its dtype as a name, "float64").
_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "torch.dtype": str}


def _schema_of(annotation: str):
    kind, _, none = annotation.partition(" | ")
    return (_TYPES[kind], None) if none == "None" else _TYPES[kind]


#: The base model's settings: every field of PretrainConfig, of its declared type.
_BASE_SCHEMA = {f.name: _schema_of(f.type) for f in fields(PretrainConfig)}
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
        "aa": AA_SCHEMA,
        "aa_sd": (float, None),
        "shaped_rate": (float, None),
        "detectable": ({str: float}, None),
        "chance_alarms": ([float], None),
        "comparisons": [
            {
                "factor": str,
                "choice": str,
                "reference": str,
                **COMPARISON_SCHEMA,
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
