"""The course's table of contents: one entry per lesson notebook, used by the README, the tests
(every claim of a lesson must have a cell that asserts it) and the benchmark."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lesson", "LESSONS", "lesson"]


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str
    notebook: str  # file name under notebooks/
    claims: tuple[str, ...]  # claim IDs of the course specification, each asserted in the notebook
    explorer: str | None  # function name in helpers.widgets
    topic: str  # module name used under helpers.widgets / helpers.checks / helpers.plots


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        4,
        "Position: why attention needs it, sinusoidal and learned encodings",
        "04_positional_encoding.ipynb",
        ("C4.1", "C4.2", "C4.3", "C4.4", "C4.5", "C4.6", "C4.7", "C4.8", "C4.9"),
        "positional_explorer",
        "position",
    ),
    Lesson(
        5,
        "Residual connections and layer norm: pre-norm versus post-norm",
        "05_residuals_and_layer_norm.ipynb",
        ("C5.1", "C5.2", "C5.3", "C5.4", "C5.5", "C5.6", "C5.7", "C5.8"),
        "norm_explorer",
        "residual",
    ),
    Lesson(
        6,
        "The position-wise feed-forward block",
        "06_feed_forward.ipynb",
        ("C6.1", "C6.2", "C6.3", "C6.4", "C6.5"),
        "feedforward_explorer",
        "feedforward",
    ),
    Lesson(
        7,
        "Stacking blocks into depth",
        "07_stacking_blocks.ipynb",
        ("C7.1", "C7.2", "C7.3"),
        "depth_explorer",
        "depth",
    ),
    Lesson(
        8,
        "Entering and leaving the vector space: embeddings, output projection, weight tying",
        "08_embeddings_and_weight_tying.ipynb",
        ("C8.1", "C8.2", "C8.3", "C8.4", "C8.5", "C8.6"),
        "tying_explorer",
        "tying",
    ),
    Lesson(
        9,
        "The full model at work: training it, making it write, the sheet's choices side by side",
        "09_the_full_model.ipynb",
        ("C9.1", "C9.2", "C9.3"),
        "generation_explorer",
        "generation",
    ),
    Lesson(
        10,
        "Trust but verify: the checklist as an executable audit (capstone)",
        "10_trust_but_verify.ipynb",
        ("K1", "K2", "K3", "K4", "K5"),
        None,
        "audit",
    ),
)


def lesson(number: int) -> Lesson:
    for entry in LESSONS:
        if entry.number == number:
            return entry
    raise ValueError(f"no lesson {number}; lessons: {[e.number for e in LESSONS]}")
