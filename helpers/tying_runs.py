"""Lesson 8 (C8.5, C8.6): the training runs behind the lesson's two comparisons, over more seeds
and more steps than a live lesson can afford. ``tools/tying_runs.py`` runs them and writes
``helpers/data/tying_runs.json``; the lesson reads it with :func:`load_tying_runs` and keeps a
small live run of the same code beside it (its numbers are the first steps of these runs).

Every run is the lesson's character model (the shipped text's 58 characters, ``d_model`` 48,
2 blocks, 4 heads, context 32) trained by the course's loop (:func:`helpers.training.train_lm`:
AdamW at 5e-3, batches of 16, gradient clipped to norm 1, float64 from the first weight, one
thread), its held-out loss measured every ``eval_every`` steps. Two comparisons, each over the
seeds ``SETTINGS["seeds"]``; seed s sets the initial weights and the batches of both arms alike:

* **tying** (C8.5), learned positions: ``tied`` against ``untied``. Under one seed the two start
  from the same weights everywhere except the untied model's own output matrix (a fresh
  N(0, 0.02^2) draw) and see the same batches, so their per-seed difference is paired.
* **scale** (C8.6), sinusoidal positions: ``default`` (Xavier, embeddings x sqrt(d_model):
  :func:`helpers.model.coherent_defaults`) against ``unscaled`` (GPT-2's N(0, 0.02^2), no
  scaling: the token drowned by the encoding).

and, for each, an A/A arm (``tied_aa``, ``default_aa``): the base model again, with the batches of
seed s and the initial draw of seed ``s + aa_init_offset``. The base against its A/A arm is a
comparison of a choice with itself, so a decision rule that calls it different raised a false
alarm: that is how often the rule's verdicts are wrong when there is nothing to find.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from . import _validate as check
from .model import LESSON_MODEL, seeded_model
from .text import CharTokenizer, load_text, split_ids
from .training import LESSON_TRAINING, TrainResult, train_lm

__all__ = [
    "NAME",
    "SETTINGS",
    "ARMS",
    "SETTINGS_SCHEMA",
    "RESULTS_SCHEMA",
    "run_arm",
    "run_experiment",
    "load_tying_runs",
]

#: The file's name: ``helpers/data/tying_runs.json``, written by ``tools/tying_runs.py``.
NAME = "tying_runs"

#: The settings, fixed before the runs (the lesson's own model and loop, :data:`helpers.model.
#: LESSON_MODEL` and :data:`helpers.training.LESSON_TRAINING`; more seeds and steps).
SETTINGS = {
    "text": "tiny_shakespeare",
    "d_model": LESSON_MODEL.d_model,
    "n_layers": LESSON_MODEL.n_layers,
    "n_heads": LESSON_MODEL.n_heads,
    "batch_size": LESSON_TRAINING.batch_size,
    "block_size": 32,
    "lr": LESSON_TRAINING.lr,
    "clip_norm": 1.0,
    "dtype": "float64",
    "eval_every": 25,
    "seeds": [0, 1, 2, 3, 4, 5, 6, 7],
    "aa_init_offset": 1000,
    "steps": {"tying": 1000, "scale": 250},
}

#: comparison -> arm -> (TransformerLM options, whether its initial draw is seed + offset)
ARMS = {
    "tying": {
        "tied": ({"positional": "learned", "tie_weights": True}, False),
        "untied": ({"positional": "learned", "tie_weights": False}, False),
        "tied_aa": ({"positional": "learned", "tie_weights": True}, True),
    },
    "scale": {
        "default": ({"positional": "sinusoidal"}, False),
        "unscaled": (
            {"positional": "sinusoidal", "init": "gpt2", "scale_embeddings": False},
            False,
        ),
        "default_aa": ({"positional": "sinusoidal"}, True),
    },
}

_RUN = {"val_steps": [int], "val_losses": [float], "n_parameters": int}
SETTINGS_SCHEMA = {
    "text": str,
    "d_model": int,
    "n_layers": int,
    "n_heads": int,
    "batch_size": int,
    "block_size": int,
    "lr": float,
    "clip_norm": float,
    "dtype": str,
    "eval_every": int,
    "seeds": [int],
    "aa_init_offset": int,
    "steps": {"tying": int, "scale": int},
}
#: results[comparison][arm][str(seed)] = one run's validation curve and parameter count
RESULTS_SCHEMA = {
    "tying": {"tied": {str: _RUN}, "untied": {str: _RUN}, "tied_aa": {str: _RUN}},
    "scale": {"default": {str: _RUN}, "unscaled": {str: _RUN}, "default_aa": {str: _RUN}},
}


def run_arm(
    comparison: str, arm: str, seed: int, steps: int, settings: dict | None = None
) -> TrainResult:
    """Lesson 8 (C8.5, C8.6). One run of ``ARMS[comparison][arm]`` under ``seed``: the model
    built after ``torch.manual_seed(seed)`` (or ``seed + aa_init_offset`` for an A/A arm) in
    float64, trained ``steps`` steps on the batches of ``seed``. With the default settings,
    ``run_arm("tying", "tied", s, n)`` is ``compare_tying(seed=s, steps=n,
    dtype=torch.float64)["tied"]`` step for step."""
    check.choice("comparison", comparison, tuple(ARMS))
    check.choice("arm", arm, tuple(ARMS[comparison]))
    seed = check.positive_int("seed", seed, minimum=0)
    steps = check.positive_int("steps", steps)
    s = SETTINGS if settings is None else settings
    options, other_draw = ARMS[comparison][arm]
    text = load_text(s["text"])
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split_ids(tokenizer.encode(text))
    sizes = {k: s[k] for k in ("d_model", "n_layers", "n_heads")}
    config = replace(
        LESSON_MODEL, vocab_size=tokenizer.vocab_size, max_len=s["block_size"], **sizes, **options
    )
    init_seed = seed + (s["aa_init_offset"] if other_draw else 0)
    model = seeded_model(config, init_seed, torch.float64)
    return train_lm(
        model,
        train_ids,
        val_ids,
        steps,
        s["batch_size"],
        s["block_size"],
        s["lr"],
        seed,
        dtype=torch.float64,
        eval_every=s["eval_every"],
        clip_norm=s["clip_norm"],
    )


def run_experiment(seeds=None, steps: dict | None = None, progress=None) -> tuple[dict, dict]:
    """Lesson 8. Every arm of :data:`ARMS` under every seed (default: ``SETTINGS``; fewer seeds
    or steps for a reduced rerun). Returns ``(settings, results)`` in the shape of
    :data:`SETTINGS_SCHEMA` and :data:`RESULTS_SCHEMA`. ``progress(comparison, arm, seed)`` is
    called before each run if given."""
    settings = {**SETTINGS, "steps": {**SETTINGS["steps"], **(steps or {})}}
    if seeds is not None:
        settings["seeds"] = [check.positive_int("seed", s, minimum=0) for s in seeds]
    results: dict = {}
    for comparison, arms in ARMS.items():
        results[comparison] = {}
        for arm in arms:
            results[comparison][arm] = {}
            for seed in settings["seeds"]:
                if progress is not None:
                    progress(comparison, arm, seed)
                r = run_arm(comparison, arm, seed, settings["steps"][comparison], settings)
                results[comparison][arm][str(seed)] = {
                    "val_steps": list(r.val_steps),
                    "val_losses": [float(x) for x in r.val_losses],
                    "n_parameters": int(r.n_parameters),
                }
    return settings, results


def load_tying_runs(folder=None):
    """Lesson 8 (C8.5, C8.6). The shipped runs (``helpers/data/tying_runs.json``), checked
    against :data:`SETTINGS_SCHEMA` and :data:`RESULTS_SCHEMA`: a
    :class:`helpers.shipped.ShippedResults` whose ``results[comparison][arm][str(seed)]`` holds
    ``val_steps``, ``val_losses`` and ``n_parameters``."""
    from .shipped import load_results

    return load_results(NAME, SETTINGS_SCHEMA, RESULTS_SCHEMA, folder=folder)
