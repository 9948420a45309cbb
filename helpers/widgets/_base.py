"""What every explorer shares: controls, one figure kept for the explorer's life, and an image.

The figure is a ``matplotlib.figure.Figure`` that pyplot never sees, so it is never left open in
pyplot's registry and is freed with the explorer. An update changes the existing artists in place
(``set_data``, ``set_ydata`` ...) and re-renders the figure to PNG bytes shown by an
``ipywidgets.Image``; in JupyterLab the picture is swapped in place, never appended below.
Tests (and the benchmark) drive an explorer without a browser: set ``explorer.controls[name].value``
and read the artists of ``explorer.figure``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import time
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.axis as maxis
import matplotlib.text as mtext
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure

from ..figures import check_description, figure_bundle
from ._controls import IntSlider, Picture, Select

__all__ = ["Explorer", "new_figure", "slider", "dropdown", "TITLE_AT_TOP"]

_LAYOUT = mtext.Text._get_layout
_DRAW_TEXT = RendererAgg.draw_text
_FIGURE_DRAW = Figure.draw
_UPDATE_TICKS = maxis.Axis._update_ticks
_TICKLABEL_BBOXES = maxis.Axis._get_ticklabel_bboxes
_LABEL_POSITION = {cls: cls._update_label_position for cls in (maxis.XAxis, maxis.YAxis)}
#: Text layouts an explorer keeps between updates (cleared past this many).
LAYOUT_CACHE_SIZE = 2048
#: ``ax.set_title(..., **TITLE_AT_TOP)``: the title stays at the top of its axes, where
#: matplotlib puts it when nothing of the axes is above them (ticks and axis label below, no
#: offset text: true of every explorer's panels). Without it every draw searches for that place
#: again, laying out the y axis's ticks and labels once more: the same picture at more cost.
TITLE_AT_TOP = {"y": 1.0}


@contextlib.contextmanager
def _cached_text_layout(store: dict):
    """Within the block, a text's layout (its size and line offsets, relative to its anchor:
    ``matplotlib.text.Text._get_layout``) is computed once per text, font, alignment, rotation
    and dpi and kept in ``store``. Most of an update's rendering was text: every tick label,
    title and legend entry laid out again (several times: to draw it, and to place the axis
    labels and the title), though few change between updates. Wrapped and TeX text is laid out
    as before. Likewise a text drawn at the same pixel position, in the same font and size, as
    in an earlier update paints the glyph bitmaps kept from then (Agg only; mathtext as before).
    Within each draw of a figure, an axis's ticks, tick label boxes and label place are worked
    out once (below). The PNG is the same bytes with and without (tested for every explorer)."""

    def cached(self, renderer):
        if self.get_wrap() or self.get_usetex():
            return _LAYOUT(self, renderer)
        p = self._fontproperties
        key = (
            type(renderer), self.get_text(), tuple(p.get_family()), p.get_slant(),
            p.get_variant(), p.get_weight(), p.get_stretch(), p.get_size_in_points(),
            p.get_file(), p.get_math_fontfamily(), self._linespacing,
            self.get_figure(root=True).dpi, self._get_multialignment(), self.get_rotation(),
            self.get_rotation_mode(), self._horizontalalignment, self._verticalalignment,
            self.get_parse_math(),
        )  # fmt: skip
        layout = store.get(key)
        if layout is None:
            if len(store) >= LAYOUT_CACHE_SIZE:
                store.clear()
            layout = store[key] = _LAYOUT(self, renderer)
        return layout

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        # a text drawn where it was drawn before, in the same font: the same glyph bitmaps at
        # the same pixels (the colour comes from gc when they are painted)
        if ismath or type(self) is not RendererAgg:
            return _DRAW_TEXT(self, gc, x, y, s, prop, angle, ismath, mtext)
        key = (
            "glyphs", s, tuple(prop.get_family()), prop.get_slant(), prop.get_variant(),
            prop.get_weight(), prop.get_stretch(), prop.get_size_in_points(), prop.get_file(),
            self.dpi, self.height, angle, x, y, gc.get_antialiased(),
            None if mtext is None else (mtext.get_fontfeatures(), mtext.get_language()),
        )  # fmt: skip
        glyphs = store.get(key)
        if glyphs is None:
            recorder = _GlyphRecorder(self._renderer)
            self._renderer = recorder
            try:
                _DRAW_TEXT(self, gc, x, y, s, prop, angle, ismath, mtext)
            finally:
                self._renderer = recorder.renderer
            if len(store) >= LAYOUT_CACHE_SIZE:
                store.clear()
            store[key] = recorder.glyphs
            return None
        for buffer, left, bottom in glyphs:
            self._renderer.draw_text_image(buffer, left, bottom, 0, gc)
        return None

    # Within one draw of the figure an axis's ticks, their labels' boxes and the place of its
    # label are worked out again and again (to place the title, the axis label, then to draw
    # them): nine times per axis. Each is kept for the rest of that draw, for an axis whose
    # limits and place on the figure are those it had when it was worked out (a layout engine
    # moves the axes within a draw), and forgotten when the draw ends.
    draw_memo: dict = {}

    def _state(axis):
        return (id(axis), tuple(axis.get_view_interval()), axis.axes.bbox.bounds)

    def update_ticks(self):
        key = ("ticks", *_state(self))
        ticks = draw_memo.get(key)
        if ticks is None:
            ticks = draw_memo[key] = _UPDATE_TICKS(self)
        return ticks

    def ticklabel_bboxes(self, ticks, renderer):
        key = ("boxes", id(renderer), tuple(map(id, ticks)), *_state(self))
        boxes = draw_memo.get(key)
        if boxes is None:
            boxes = draw_memo[key] = _TICKLABEL_BBOXES(self, ticks, renderer)
        return boxes

    def label_position(own):
        def update_label_position(self, renderer):
            key = ("label", id(renderer), *_state(self))
            if key not in draw_memo:  # placed once per draw: the label stays where it was put
                draw_memo[key] = own(self, renderer)

        return update_label_position

    @functools.wraps(_FIGURE_DRAW)
    def figure_draw(self, renderer):
        draw_memo.clear()
        try:
            return _FIGURE_DRAW(self, renderer)
        finally:
            draw_memo.clear()

    mtext.Text._get_layout = cached
    RendererAgg.draw_text = draw_text
    Figure.draw = figure_draw
    maxis.Axis._update_ticks = update_ticks
    maxis.Axis._get_ticklabel_bboxes = ticklabel_bboxes
    for cls, own in _LABEL_POSITION.items():
        cls._update_label_position = label_position(own)
    try:
        yield
    finally:
        mtext.Text._get_layout = _LAYOUT
        RendererAgg.draw_text = _DRAW_TEXT
        Figure.draw = _FIGURE_DRAW
        maxis.Axis._update_ticks = _UPDATE_TICKS
        maxis.Axis._get_ticklabel_bboxes = _TICKLABEL_BBOXES
        for cls, own in _LABEL_POSITION.items():
            cls._update_label_position = own


class _GlyphRecorder:
    """Stands in for the Agg renderer while a text is drawn: keeps each glyph bitmap painted."""

    def __init__(self, renderer):
        self.renderer = renderer
        self.glyphs = []

    def draw_text_image(self, buffer, left, bottom, angle, gc):
        if angle != 0:
            raise ValueError(f"angle must be 0 for a glyph bitmap, got {angle}")
        self.glyphs.append((buffer.copy(), left, bottom))
        return self.renderer.draw_text_image(buffer, left, bottom, angle, gc)

    def __getattr__(self, name):
        return getattr(self.renderer, name)


def new_figure(width: float = 8.0, height: float = 3.0, ncols: int = 1, nrows: int = 1, **kwargs):
    """A pyplot-free figure and its axes (``layout="constrained"``)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def slider(description: str, value: int, min: int, max: int, step: int = 1) -> IntSlider:
    """An integer slider, named by ``description``, that updates on release or key press (one
    update per move, not dozens)."""
    return IntSlider(value=value, min=min, max=max, step=step, description=description)


def dropdown(description: str, options, value=None) -> Select:
    """A choice among ``options`` (a native ``<select>``: the arrow keys change it)."""
    return Select(options, value=value, description=description)


class Explorer(widgets.VBox):
    """A lesson's explorer: ``controls`` above, ``info`` text, the rendered ``figure`` below.

    ``update(**values)`` receives every control's current value, changes the artists of
    ``figure`` in place and may return an HTML string for ``info``. It runs once at creation and
    after every change of a control. ``describe(**values)``, called after it, returns the
    picture's one-sentence description (``explorer.description``, CONTRIBUTING.md "Figures"):
    the picture's ``alt``, announced after each change. ``after(explorer, **values)``, if given, runs once
    the new picture is sent (lesson 9 writes its text there, shown as it grows).
    ``last_update_seconds`` and ``n_updates`` record the cost.
    """

    def __init__(
        self,
        title: str,
        controls: dict[str, widgets.ValueWidget],
        figure: Figure,
        update: Callable[..., str | None],
        dpi: int = 72,
        describe: Callable[..., str] | None = None,
        after: Callable[..., None] | None = None,
    ):
        self.title = title
        self.controls = dict(controls)
        self.figure = figure
        self.dpi = dpi
        self._update = update
        self._describe = describe
        self._after = after
        self.description = ""
        self.image = Picture()
        self.info = widgets.HTML()
        self.n_updates = 0
        self.last_update_seconds = 0.0
        self._layouts: dict = {}  # text layouts kept between updates (_cached_text_layout)
        control_box = widgets.HBox(
            list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap")
        )
        super().__init__([widgets.HTML(f"<b>{title}</b>"), control_box, self.info, self.image])
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.refresh()

    @property
    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def _on_change(self, change) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recompute and redraw with the controls' current values."""
        start = time.perf_counter()
        values = self.values
        html = self._update(**values)
        if html is not None:
            self.info.value = html
        if self._describe is not None:
            self.description = check_description(self._describe(**values))
        self.render()
        if self._after is not None:  # work shown after the picture (lesson 9 streams its text)
            self._after(self, **values)
        self.n_updates += 1
        self.last_update_seconds = time.perf_counter() - start

    def render(self) -> None:
        buf = io.BytesIO()
        with _cached_text_layout(self._layouts):
            self.figure.savefig(buf, format="png", dpi=self.dpi, pil_kwargs={"compress_level": 1})
        with self.image.hold_sync():  # one message: the new picture and its description together
            self.image.description = self.description
            self.image.value = buf.getvalue()

    def still(self) -> tuple[dict, dict]:
        """The current picture as a static figure's ``(data, metadata)`` bundle, described
        (``helpers.figures.figure_bundle``): for a page that shows the explorer's default view."""
        if not self.description:
            raise ValueError(f"the explorer {self.title!r} has no description of its picture")
        return figure_bundle(self.figure, self.description)

    def close(self) -> None:
        """Detach the observers, free the figure, close the widgets. Safe to call twice."""
        if getattr(self, "_closed", False):  # ipywidgets' __del__ calls close() again
            return
        self._closed = True
        if sys.is_finalizing():  # at interpreter exit there is nothing left to free
            return
        for control in self.controls.values():
            control.unobserve(self._on_change, names="value")
            control.close()
        self.figure.clear()
        self.image.close()
        self.info.close()
        super().close()
