"""Lesson 9: a longer training run that ships with the course (``helpers/data/lesson9_model.pt``).

The lesson trains its own model live for 360 steps (C9.1, rotary position), enough to beat the
baselines and write some words, not enough to spell. ``tools/train_lesson9_model.py`` trains a
larger model with the same code for longer; its weights (float32), its model's
:class:`~helpers.model.LMConfig` whole (every field, so an option added to the model later is
saved without a change here), its training settings and measured held-out losses are saved here, and :func:`load_checkpoint` rebuilds it
(``TransformerLM.from_config``) (in float64, so what the lesson computes from it is the same
on every machine) with the tokenizer of the text it was trained on.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path

import torch

from .model import LMConfig, TransformerLM
from .reproducible import default_dtype
from .text import CharTokenizer, load_text

__all__ = [
    "CHECKPOINT_CONFIG",
    "CHECKPOINT_PATH",
    "Checkpoint",
    "save_checkpoint",
    "load_checkpoint",
]

#: The settings of the shipped run (fields of :class:`helpers.pretrain.PretrainConfig`): float32
#: and a larger model than the lesson's, to train in about 10 minutes on one core.
CHECKPOINT_CONFIG = dict(
    d_model=96, n_layers=3, n_heads=4, block_size=96, batch_size=32, lr=3e-3, seed=0,
    eval_every=250, dtype=torch.float32,
)  # fmt: skip
CHECKPOINT_PATH = Path(__file__).resolve().parent / "data" / "lesson9_model.pt"


@dataclass
class Checkpoint:
    """Lesson 9. The shipped run: ``model`` (float64, eval mode), its ``tokenizer``, the
    ``settings`` it was trained with (its model's config fields and the run's other
    :class:`~helpers.pretrain.PretrainConfig` fields: ``block_size``, ``batch_size``, ``lr``,
    ``seed``, ``dtype`` as a string, ...), the ``steps`` it ran, and the held-out losses it measured
    while training (``val_steps``, ``val_losses``) and the seconds it took."""

    model: TransformerLM
    tokenizer: CharTokenizer
    settings: dict
    steps: int
    val_steps: list[int]
    val_losses: list[float]
    seconds: float


def save_checkpoint(run, path: Path = CHECKPOINT_PATH) -> None:
    """Lesson 9. Save a :class:`helpers.pretrain.Pretraining` run trained on the whole text:
    its weights in float32 (half the size; exactly what a float32 run trained), its model's
    :class:`~helpers.model.LMConfig` whole (``asdict``), its training settings and its measured
    losses."""
    from .pretrain import MODEL_FIELDS, Pretraining

    if not isinstance(run, Pretraining):
        raise TypeError(f"run must be a helpers.pretrain.Pretraining, got {type(run).__name__}")
    c = run.config
    settings = {f.name: getattr(c, f.name) for f in fields(c) if f.name not in MODEL_FIELDS}
    settings["dtype"] = str(c.dtype)  # the run's; the model's fields are in its config
    state = {k: v.detach().to(torch.float32).clone() for k, v in run.model.state_dict().items()}
    buffer = io.BytesIO()
    torch.save(
        {
            "state_dict": state,
            "config": asdict(run.model.config),
            "settings": settings,
            "vocab": "".join(run.tokenizer.chars),
            "steps": run.step,
            "val_steps": list(run.result.val_steps),
            "val_losses": [float(x) for x in run.result.val_losses],
            "seconds": float(run.seconds),
            "torch": str(torch.__version__),
        },
        buffer,
    )
    Path(path).write_bytes(buffer.getvalue())


def load_checkpoint(path: Path | str | None = None) -> Checkpoint:
    """Lesson 9. The shipped run (or the file ``path`` :func:`save_checkpoint` wrote), rebuilt
    as a float64 :class:`TransformerLM` in eval mode, with the :class:`CharTokenizer` of
    ``load_text("tiny_shakespeare_full")``."""
    if path is None:
        data = resources.files("helpers").joinpath("data", "lesson9_model.pt").read_bytes()
    elif isinstance(path, str | Path):
        if not Path(path).is_file():
            raise FileNotFoundError(f"path must name a file save_checkpoint wrote, got {path}")
        data = Path(path).read_bytes()
    else:
        raise TypeError(f"path must be a file path or None, got {type(path).__name__}")
    saved = torch.load(io.BytesIO(data), weights_only=True)
    tokenizer = CharTokenizer(load_text("tiny_shakespeare_full"))
    if "".join(tokenizer.chars) != saved["vocab"]:
        raise RuntimeError(
            "helpers/data/lesson9_model.pt was trained on other characters than the shipped "
            "text has: rerun tools/train_lesson9_model.py"
        )
    config, s = _config_and_settings(saved, tokenizer.vocab_size)
    with default_dtype(torch.float64):
        model = TransformerLM.from_config(config)
    model.load_state_dict({k: v.to(torch.float64) for k, v in saved["state_dict"].items()})
    model.eval()
    return Checkpoint(
        model, tokenizer, s, saved["steps"], saved["val_steps"], saved["val_losses"],
        saved["seconds"],
    )  # fmt: skip


def _config_and_settings(saved: dict, vocab_size: int) -> tuple[LMConfig, dict]:
    """The model's config and the settings of a saved run. A file written before the config was
    saved whole (the shipped one) has the model's options among its settings, ``block_size`` as
    the model's ``max_len`` and the tokenizer's vocabulary as its ``vocab_size``."""
    if "config" in saved:
        config = LMConfig(**saved["config"])
        return config, asdict(config) | saved["settings"]
    s = saved["settings"]
    options = {f.name: s[f.name] for f in fields(LMConfig) if f.name in s}
    return LMConfig(**{"vocab_size": vocab_size, "max_len": s["block_size"]} | options), s
