"""Every figure of the course says what it shows: a one-sentence description a screen reader
reaches in JupyterLab and that the reading site uses as alternative text (all lessons).

A plot helper (``helpers/plots/``) attaches a description computed from the data it drew,
``describe(ax, "...")``; a notebook cell that draws a figure itself attaches one to the figure,
``describe(fig, "...")``. The cell still ends with ``plt.show()``: a described figure displays
itself as one output with three forms of the same picture (CONTRIBUTING.md, "Figures"):

* ``text/html``: ``<img src="data:image/png;base64,..." alt="DESCRIPTION">``. JupyterLab
  prefers HTML to PNG and keeps ``alt`` (it ignores the ``alt`` metadata of a PNG output), so a
  screen reader announces the picture with its description;
* ``image/png``: the same PNG, with ``metadata["image/png"]["alt"] = DESCRIPTION`` (IPython's
  own convention, as ``IPython.display.Image(alt=...)`` writes it): the machine-readable form the
  reading site reads;
* ``text/plain``: ``Figure: DESCRIPTION``, for text-only front ends; nbval compares it, so a
  description computed from the data is checked on every machine like any printed number.

A figure with several described axes gets one sentence made of its panels' descriptions, each
led by the panel's title ("pre-norm: ...; post-norm: ..."). A figure without a description
displays as matplotlib's plain PNG, and ``tests/test_figure_descriptions.py`` fails on it.
"""

from __future__ import annotations

import base64
import html
import io

from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = [
    "describe",
    "description_of",
    "figure_bundle",
    "png_bytes",
    "check_description",
    "trend",
    "listing",
    "ranking",
    "MAX_LENGTH",
]

#: A description is one sentence: at most this many characters.
MAX_LENGTH = 400

_ATTR = "_helpers_description"
_NUMBERS = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six"}


def check_description(text, name: str = "description") -> str:
    """``text`` stripped, if it is one sentence: a non-empty str on one line, ending with a full
    stop, at most :data:`MAX_LENGTH` characters, with no full stop followed by a new sentence
    inside it. Raises ``TypeError``/``ValueError`` naming ``name`` otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str (one sentence), got {type(text).__name__}")
    text = " ".join(text.split())
    if not text:
        raise ValueError(f"{name} must be one sentence saying what the figure shows, got ''")
    if len(text) > MAX_LENGTH:
        raise ValueError(
            f"{name} must be one sentence of at most {MAX_LENGTH} characters, got {len(text)}"
        )
    if not text.endswith("."):
        raise ValueError(f"{name} must end with a full stop (one sentence), got {text!r}")
    body = text[:-1]
    for i, c in enumerate(body[:-2]):
        if c in ".!?" and body[i + 1] == " " and body[i + 2].isupper():
            raise ValueError(
                f"{name} must be one sentence; it has a second one after {body[: i + 1]!r}"
            )
    return text


def describe(target, text: str):
    """Attach the one-sentence description ``text`` to a figure or to one of its axes (a panel).

    Returns ``target``. A figure's own description wins over its panels'; describing again
    replaces the previous text. See the module docstring for how it is displayed.
    """
    if not isinstance(target, Figure | Axes):
        raise TypeError(f"target must be a matplotlib Figure or Axes, got {type(target).__name__}")
    setattr(target, _ATTR, check_description(text))
    figure = target if isinstance(target, Figure) else target.figure
    # IPython asks an object for its _repr_mimebundle_ before its registered formatters, so the
    # inline backend's plt.show() displays the described form (an instance attribute: a figure
    # nobody described keeps matplotlib's behaviour)
    figure._repr_mimebundle_ = lambda include=None, exclude=None: figure_bundle(figure)
    return target


def _panel_title(ax: Axes) -> str:
    return ax.get_title() or ax.get_title("left") or ax.get_title("right")


def description_of(figure: Figure) -> str | None:
    """The figure's description: its own, or one sentence joining its described panels' (each
    led by the panel's title when it has one), or None when nothing was described."""
    if not isinstance(figure, Figure):
        raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
    own = getattr(figure, _ATTR, None)
    if own:
        return own
    panels = [(ax, getattr(ax, _ATTR)) for ax in figure.axes if getattr(ax, _ATTR, None)]
    if not panels:
        return None
    if len(panels) == 1:
        return panels[0][1]
    parts = []
    for ax, text in panels:
        title = _panel_title(ax).strip()
        text = text[:-1]
        if title and text[:2].istitle():  # "Falls ..." -> "falls ...", "RMS ..." stays
            text = text[0].lower() + text[1:]
        parts.append(f"{title} — {text}" if title else text)
    count = _NUMBERS.get(len(panels), str(len(panels)))
    return f"{count} panels, left to right; " + "; ".join(parts) + "."


def png_bytes(figure: Figure, dpi: float | None = None) -> bytes:
    """The figure as PNG bytes, drawn the way the notebook's inline backend draws it
    (``bbox_inches="tight"``, the figure's own dpi unless ``dpi`` is given)."""
    buf = io.BytesIO()
    figure.savefig(buf, format="png", bbox_inches="tight", dpi=dpi or figure.dpi)
    return buf.getvalue()


def figure_bundle(figure: Figure, description: str | None = None) -> tuple[dict, dict]:
    """``(data, metadata)`` of the displayed figure: ``text/html`` (the PNG with ``alt``),
    ``image/png`` (alt in the metadata) and ``text/plain`` (``Figure: ...``); see the module
    docstring. ``description`` defaults to :func:`description_of`; with none at all this raises
    ``ValueError``."""
    text = description_of(figure) if description is None else check_description(description)
    if text is None:
        raise ValueError(
            "the figure has no description: call helpers.figures.describe(fig, '...') first"
        )
    # a layout engine (constrained, colorbars) settles over the first draw: lay the figure out
    # once first, so that this PNG and the one IPython's inline formatter draws next (it
    # overrides image/png) are the same bytes
    figure.draw_without_rendering()
    if figure.get_layout_engine() is not None:  # constrained + colorbar + tight bbox oscillates
        figure.set_layout_engine("none")  # keep the layout of that draw: every render the same
    png = base64.b64encode(png_bytes(figure)).decode("ascii")
    alt = html.escape(text, quote=True)
    data = {
        "text/html": f'<img src="data:image/png;base64,{png}" alt="{alt}">',
        "image/png": png,
        "text/plain": f"Figure: {text}",
    }
    return data, {"image/png": {"alt": text}}


def trend(values, rel: float = 0.05) -> str:
    """How a sequence goes from its first to its last value, as a word for a description:
    ``"rises"``, ``"falls"`` or ``"stays flat"`` (within ``rel`` of the larger magnitude).
    Used by the plot helpers of every lesson."""
    values = [float(v) for v in values]
    if len(values) < 2:
        raise ValueError(f"values must hold at least two numbers, got {len(values)}")
    first, last = values[0], values[-1]
    scale = max(abs(first), abs(last))
    if scale == 0 or abs(last - first) <= rel * scale:
        return "stays flat"
    return "rises" if last > first else "falls"


def listing(items) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"`` (for a description)."""
    items = [str(i) for i in items]
    if not items:
        raise ValueError("items must hold at least one entry")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def ranking(finals, lowest: bool = True, rel: float = 0.01) -> str:
    """Which named curve ends lowest (``lowest=False``: highest), for a description:
    ``"'tied' ends lowest"``, or, when the best two are within ``rel`` of each other (too close to
    call on every machine), ``"'tied' and 'untied' end within 1% of each other"``. ``finals``
    maps a name to its last value. Used by the plot helpers of every lesson."""
    items = sorted(((float(v), str(k)) for k, v in dict(finals).items()), reverse=not lowest)
    if not items:
        raise ValueError("finals must name at least one curve")
    word = "lowest" if lowest else "highest"
    if len(items) == 1:
        return f"'{items[0][1]}' is the only curve"
    (v1, n1), (v2, n2) = items[0], items[1]
    if abs(v1 - v2) <= rel * max(abs(v1), abs(v2)):
        return f"'{n1}' and '{n2}' end within {rel:.0%} of each other"
    return f"'{n1}' ends {word}"
