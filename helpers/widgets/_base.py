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
import struct
import sys
import time
import zlib
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.axis as maxis
import matplotlib.offsetbox as moffsetbox
import matplotlib.text as mtext
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure

from ..figures import check_description, figure_bundle
from ._controls import IntSlider, Picture, Select

__all__ = ["Explorer", "new_figure", "slider", "dropdown", "TITLE_AT_TOP"]

_LAYOUT = mtext.Text._get_layout
_DRAW_TEXT = RendererAgg.draw_text
_FIGURE_DRAW = Figure.draw


def _axis_state(axis) -> tuple:
    return (tuple(axis.get_view_interval()), axis.axes.bbox.bounds)


#: What matplotlib works out again and again within one draw of a figure, each time the same:
#: an axis's ticks, their labels' boxes and the place of its label (to place the title, the
#: axis label, then to draw them: about nine times per axis), and a legend's boxes (each box
#: measures its children again for each of its parents). Within an explorer's draw each is
#: worked out once per object and arguments and kept until the draw ends, for an axis only
#: while its limits and its place on the figure (``_axis_state``: a layout engine moves the
#: axes within a draw) are those it had then. (class, method) -> what else it depends on.
_ONCE_PER_DRAW = {
    (maxis.Axis, "_update_ticks"): _axis_state,
    (maxis.Axis, "_get_ticklabel_bboxes"): _axis_state,
    (maxis.XAxis, "_update_label_position"): _axis_state,
    (maxis.YAxis, "_update_label_position"): _axis_state,
    (moffsetbox.VPacker, "_get_bbox_and_child_offsets"): None,
    (moffsetbox.HPacker, "_get_bbox_and_child_offsets"): None,
    (moffsetbox.PaddedBox, "_get_bbox_and_child_offsets"): None,
    (moffsetbox.TextArea, "get_bbox"): None,
    (moffsetbox.DrawingArea, "get_bbox"): None,
}
#: A tick is moved to its place on every draw, though most ticks stay where they were: each move
#: makes its lines' paths (and, on a log axis, their transformation) be computed anew at the
#: draw. Within an explorer's draw a tick this module placed at ``loc`` and still there is
#: left alone. (A tick matplotlib makes copies its first tick's ``_loc``, not its lines: only
#: a tick placed here is left alone.)
_TICK_POSITION = {cls: cls.update_position for cls in (maxis.XTick, maxis.YTick)}
_ONCE_PER_DRAW_OWN = {
    key: (key[0].__dict__[key[1]], state) for key, state in _ONCE_PER_DRAW.items()
}
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
    Within each draw of a figure, an axis's ticks, tick label boxes and label place, and a
    legend's boxes, are worked out once (``_ONCE_PER_DRAW``), and a tick still where an earlier
    draw put it is not moved again (``_TICK_POSITION``). The picture is the same pixels with and
    without (tested for every explorer)."""

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

    # Within one draw of the figure: see _ONCE_PER_DRAW
    draw_memo: dict = {}

    def once_per_draw(own, state):
        def method(self, *args):
            key = (own, id(self), *map(_identity, args), *(state(self) if state else ()))
            if key in draw_memo:
                return draw_memo[key]
            result = draw_memo[key] = own(self, *args)
            return result

        return method

    @functools.wraps(_FIGURE_DRAW)
    def figure_draw(self, renderer):
        draw_memo.clear()
        try:
            return _FIGURE_DRAW(self, renderer)
        finally:
            draw_memo.clear()

    def tick_position(own):
        def update_position(self, loc):
            if self.__dict__.get("_explorer_loc") == loc == self._loc:
                return  # placed there by an earlier draw and not moved since
            own(self, loc)
            self._explorer_loc = loc

        return update_position

    mtext.Text._get_layout = cached
    RendererAgg.draw_text = draw_text
    Figure.draw = figure_draw
    for cls, own in _TICK_POSITION.items():
        cls.update_position = tick_position(own)
    for (cls, name), (own, state) in _ONCE_PER_DRAW_OWN.items():
        setattr(cls, name, once_per_draw(own, state))
    try:
        yield
    finally:
        mtext.Text._get_layout = _LAYOUT
        RendererAgg.draw_text = _DRAW_TEXT
        Figure.draw = _FIGURE_DRAW
        for cls, own in _TICK_POSITION.items():
            cls.update_position = own
        for (cls, name), (own, _) in _ONCE_PER_DRAW_OWN.items():
            setattr(cls, name, own)


def _identity(arg) -> object:
    """What stands for an argument in a key of the draw's memo: the object (a list: its items),
    alive for the whole draw."""
    return tuple(map(id, arg)) if isinstance(arg, list) else id(arg)


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


def png_of(rgba: np.ndarray) -> bytes:
    """PNG bytes of an image ``rgba`` [height, width, 4] (uint8, as Agg draws it): every row
    unfiltered, all of it deflated at zlib level 1. Pillow's PNG (``savefig``, even at
    ``compress_level=1``) tries a filter on each row, most of its cost; for an explorer's
    picture (flat colours, lines, text) this is about half as costly and about as small (the
    lesson 4 heatmaps 9 % smaller, the lesson 5 curves 18 % larger: 64 and 26 kB)."""
    if rgba.dtype != np.uint8 or rgba.ndim != 3 or rgba.shape[2] != 4:
        raise ValueError(f"rgba must be [height, width, 4] uint8, got {rgba.shape} {rgba.dtype}")
    height, width, _ = rgba.shape
    rows = np.empty((height, 1 + 4 * width), np.uint8)  # [h, 1 + 4w]
    rows[:, 0] = 0  # each row's filter: none
    rows[:, 1:] = rgba.reshape(height, 4 * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8 bits per channel, RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


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
        """Draw the figure at ``dpi`` (what ``savefig`` draws, without its own PNG encoder:
        :func:`png_of`) and show it."""
        canvas = self.figure.canvas
        if not isinstance(canvas, FigureCanvasAgg):
            canvas = FigureCanvasAgg(self.figure)  # pyplot-free, as the figure
        dpi, self.figure.dpi = self.figure.dpi, self.dpi
        try:
            with _cached_text_layout(self._layouts):
                canvas.draw()
            png = png_of(np.asarray(canvas.buffer_rgba()))
        finally:
            self.figure.dpi = dpi
        with self.image.hold_sync():  # one message: the new picture and its description together
            self.image.description = self.description
            self.image.value = png

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
