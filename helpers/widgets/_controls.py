"""The explorers' controls and picture: named, usable from the keyboard, announced to a screen reader.

ipywidgets' own sliders leave their handle without an accessible name in JupyterLab 4 (the
description label is not tied to it), and the arrow keys on a focused ipywidgets dropdown move
JupyterLab to another cell instead of changing the value (ipywidgets #3912). These controls are
native HTML form elements drawn by small ES modules (``anywidget``: no build step, nothing
fetched), each ``<label for=...>``-named:

* :class:`IntSlider`, :class:`FloatSlider`: ``<input type="range">`` with a readout; arrow keys,
  Page Up/Down, Home and End move it, and the value is sent on ``change`` (each key press, or the
  release of a drag: one update per move, as ipywidgets' ``continuous_update=False``);
* :class:`IntRangeSlider`: two such inputs, "from" and "to", kept in order;
* :class:`Select`: a ``<select>``; the arrow keys change the option;
* :class:`Picture`: the rendered figure as ``<img alt=description>``, with the description also
  in a polite live region, so a screen reader announces the new picture after each change.

Every control stops the navigation keys it uses from reaching JupyterLab's notebook shortcuts
(JupyterLab 4 handles shortcuts on the bubbling keydown). The Python side keeps ipywidgets'
interface (``value``, ``min``, ``max``, ``step``, ``options``, ``description``, observers on
``"value"``), so explorers, tests and the benchmark drive them the same way.
"""

from __future__ import annotations

import anywidget
import traitlets

__all__ = ["IntSlider", "FloatSlider", "IntRangeSlider", "Select", "Picture"]

# --------------------------------------------------------------------------------------------
# Front end (ES modules, run by anywidget in JupyterLab)
# --------------------------------------------------------------------------------------------

_KEEP_KEYS = """
const KEYS = new Set(["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown",
                      "Home", "End", " "]);
// JupyterLab handles its shortcuts on the bubbling keydown: keep ours from reaching them
function keepKeys(node) {
  node.addEventListener("keydown", (e) => { if (KEYS.has(e.key)) e.stopPropagation(); });
}
let counter = 0;
function uid(prefix) { counter += 1; return `${prefix}-${Date.now().toString(36)}-${counter}`; }
"""

_CSS = """
.course-control { display: inline-flex; align-items: center; gap: 6px; margin: 2px 12px 2px 0;
                  font-size: var(--jp-widgets-font-size, 13px);
                  color: var(--jp-widgets-label-color, inherit); }
.course-control input[type=range] { width: 150px; }
.course-control output { min-width: 3.5em; font-variant-numeric: tabular-nums; }
.course-control select { font-size: inherit; }
.course-picture img { max-width: 100%; display: block; }
.course-sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px;
                  overflow: hidden; clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
"""

_SLIDER_ESM = (
    _KEEP_KEYS
    + """
function decimals(step) {
  const s = String(step);
  return s.includes(".") ? s.split(".")[1].length : 0;
}
function render({ model, el }) {
  const id = uid("course-slider");
  el.classList.add("course-control", "course-slider");
  const label = document.createElement("label");
  label.htmlFor = id;
  const input = document.createElement("input");
  input.type = "range";
  input.id = id;
  const out = document.createElement("output");
  out.htmlFor = id;
  el.append(label, input, out);
  const show = (v) => {
    const text = Number(v).toFixed(decimals(model.get("step")));
    out.textContent = text;
    input.setAttribute("aria-valuetext", text);
  };
  const sync = () => {
    label.textContent = model.get("description");
    input.min = model.get("min");
    input.max = model.get("max");
    input.step = model.get("step");
    input.value = model.get("value");
    show(model.get("value"));
  };
  sync();
  keepKeys(input);
  input.addEventListener("input", () => show(input.value));
  input.addEventListener("change", () => {
    window.__courseInput = performance.now();  // when the student changed it (the benchmark reads it)
    model.set("value", Number(input.value));
    model.save_changes();
  });
  for (const name of ["value", "min", "max", "step", "description"]) model.on(`change:${name}`, sync);
}
export default { render };
"""
)

_RANGE_ESM = (
    _KEEP_KEYS
    + """
function render({ model, el }) {
  el.classList.add("course-control", "course-range");
  const group = document.createElement("span");
  group.setAttribute("role", "group");
  const legend = document.createElement("span");
  legend.id = uid("course-range-label");
  group.setAttribute("aria-labelledby", legend.id);
  const inputs = [], outs = [], labels = [];
  group.append(legend);
  for (const end of ["from", "to"]) {
    const id = uid("course-range");
    const label = document.createElement("label");
    label.htmlFor = id;
    const input = document.createElement("input");
    input.type = "range";
    input.id = id;
    const out = document.createElement("output");
    out.htmlFor = id;
    group.append(label, input, out);
    inputs.push(input); outs.push(out); labels.push(label);
    keepKeys(input);
  }
  el.append(group);
  const sync = () => {
    const [lo, hi] = model.get("value");
    const d = model.get("description");
    legend.textContent = d;
    labels[0].textContent = "from";
    labels[1].textContent = "to";
    inputs[0].setAttribute("aria-label", `${d} from`);
    inputs[1].setAttribute("aria-label", `${d} to`);
    inputs.forEach((input, i) => {
      input.min = model.get("min");
      input.max = model.get("max");
      input.step = model.get("step");
      input.value = [lo, hi][i];
      outs[i].textContent = String([lo, hi][i]);
    });
  };
  sync();
  inputs.forEach((input, i) => {
    input.addEventListener("input", () => { outs[i].textContent = input.value; });
    input.addEventListener("change", () => {
      window.__courseInput = performance.now();
      let lo = Number(inputs[0].value), hi = Number(inputs[1].value);
      const step = Number(model.get("step"));
      if (lo >= hi) {  // keep from < to: the end that moved pushes no further than the other
        if (i === 0) lo = hi - step; else hi = lo + step;
      }
      model.set("value", [lo, hi]);
      model.save_changes();
      sync();
    });
  });
  for (const name of ["value", "min", "max", "step", "description"]) model.on(`change:${name}`, sync);
}
export default { render };
"""
)

_SELECT_ESM = (
    _KEEP_KEYS
    + """
function render({ model, el }) {
  const id = uid("course-select");
  el.classList.add("course-control", "course-select");
  const label = document.createElement("label");
  label.htmlFor = id;
  const select = document.createElement("select");
  select.id = id;
  el.append(label, select);
  const sync = () => {
    label.textContent = model.get("description");
    const labels = model.get("_labels");
    if (select.options.length !== labels.length ||
        [...select.options].some((o, i) => o.text !== labels[i])) {
      select.replaceChildren(...labels.map((text, i) => new Option(text, String(i))));
    }
    select.value = String(model.get("index"));
  };
  sync();
  keepKeys(select);
  select.addEventListener("change", () => {
    window.__courseInput = performance.now();
    model.set("index", Number(select.value));
    model.save_changes();
  });
  for (const name of ["index", "_labels", "description"]) model.on(`change:${name}`, sync);
}
export default { render };
"""
)

_PICTURE_ESM = """
function render({ model, el }) {
  el.classList.add("course-picture");
  const img = document.createElement("img");
  const live = document.createElement("p");
  live.className = "course-sr-only";
  live.setAttribute("aria-live", "polite");
  el.append(img, live);
  let url = null;
  const show = () => {
    const view = model.get("value");
    const old = url;
    url = URL.createObjectURL(new Blob([view], { type: `image/${model.get("format")}` }));
    img.alt = model.get("description");
    img.src = url;
    img.decode().then(() => {
      // the new picture is ready to paint: the benchmark reads this event
      el.dispatchEvent(new CustomEvent("course-picture", { bubbles: true,
        detail: { t: performance.now(), input: window.__courseInput } }));
    }).catch(() => {});
    if (old) URL.revokeObjectURL(old);
    // written only when it changes: the same text written again may be announced again
    if (live.textContent !== img.alt) live.textContent = img.alt;
  };
  if (model.get("value").byteLength) show();
  model.on("change:value", show);
  model.on("change:description", () => {
    // a description can arrive without a new picture (the same PNG): the region follows it too;
    // with a new picture, whichever of the two changes comes second finds the region up to date
    img.alt = model.get("description");
    if (live.textContent !== img.alt) live.textContent = img.alt;
  });
  return () => { if (url) URL.revokeObjectURL(url); };
}
export default { render };
"""


# --------------------------------------------------------------------------------------------
# Python side: ipywidgets' interface
# --------------------------------------------------------------------------------------------


class _Slider(anywidget.AnyWidget):
    _esm = traitlets.Unicode(_SLIDER_ESM).tag(sync=True)
    _css = traitlets.Unicode(_CSS).tag(sync=True)
    description = traitlets.Unicode("").tag(sync=True)

    def __init__(self, value, min, max, step=1, description="", **kwargs):
        if not min <= max:
            raise ValueError(f"min must be <= max, got min={min}, max={max}")
        if not step > 0:
            raise ValueError(f"step must be > 0, got {step}")
        super().__init__(min=min, max=max, step=step, description=description, **kwargs)
        self.value = value

    @traitlets.validate("value")
    def _clamp(self, proposal):
        return type(self.min)(min(max(proposal["value"], self.min), self.max))

    @traitlets.observe("min", "max")
    def _clamp_bounds(self, change):
        if self.value is not None:
            self.value = min(max(self.value, self.min), self.max)


class IntSlider(_Slider):
    """An integer slider (``<input type="range">``): ``IntSlider(value, min, max, step, description)``."""

    value = traitlets.Int(0).tag(sync=True)
    min = traitlets.Int(0).tag(sync=True)
    max = traitlets.Int(100).tag(sync=True)
    step = traitlets.Int(1).tag(sync=True)


class FloatSlider(_Slider):
    """A float slider; the readout shows as many decimals as ``step`` has."""

    value = traitlets.Float(0.0).tag(sync=True)
    min = traitlets.Float(0.0).tag(sync=True)
    max = traitlets.Float(1.0).tag(sync=True)
    step = traitlets.Float(0.1).tag(sync=True)


class IntRangeSlider(anywidget.AnyWidget):
    """A range ``(start, stop)`` with ``start < stop``, as two named range inputs ("from", "to")."""

    _esm = traitlets.Unicode(_RANGE_ESM).tag(sync=True)
    _css = traitlets.Unicode(_CSS).tag(sync=True)
    value = traitlets.Tuple(traitlets.Int(), traitlets.Int(), default_value=(0, 1)).tag(sync=True)
    min = traitlets.Int(0).tag(sync=True)
    max = traitlets.Int(100).tag(sync=True)
    step = traitlets.Int(1).tag(sync=True)
    description = traitlets.Unicode("").tag(sync=True)

    def __init__(self, value, min, max, step=1, description="", **kwargs):
        if not min < max:
            raise ValueError(f"min must be < max, got min={min}, max={max}")
        super().__init__(min=min, max=max, step=step, description=description, **kwargs)
        self.value = tuple(value)

    @traitlets.validate("value")
    def _order(self, proposal):
        lo, hi = (int(v) for v in proposal["value"])
        lo, hi = max(lo, self.min), min(hi, self.max)
        if lo >= hi:
            raise traitlets.TraitError(
                f"value must be (start, stop) with {self.min} <= start < stop <= {self.max}, "
                f"got {proposal['value']}"
            )
        return (lo, hi)


class Select(anywidget.AnyWidget):
    """A ``<select>`` of ``options`` (values, or ``(label, value)`` pairs); ``value`` is the
    chosen value, as ipywidgets' ``Dropdown``."""

    _esm = traitlets.Unicode(_SELECT_ESM).tag(sync=True)
    _css = traitlets.Unicode(_CSS).tag(sync=True)
    description = traitlets.Unicode("").tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    _labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    value = traitlets.Any()

    def __init__(self, options, value=None, description="", **kwargs):
        pairs = [o if isinstance(o, tuple) else (str(o), o) for o in options]
        if not pairs:
            raise ValueError("options must hold at least one choice")
        self.options = pairs
        self._values = [v for _, v in pairs]
        super().__init__(description=description, _labels=[lab for lab, _ in pairs], **kwargs)
        self.value = self._values[0] if value is None else value

    @traitlets.validate("value")
    def _known(self, proposal):
        if proposal["value"] not in self._values:
            raise traitlets.TraitError(
                f"value must be one of {self._values}, got {proposal['value']!r}"
            )
        return proposal["value"]

    @traitlets.observe("value")
    def _to_index(self, change):
        self.index = self._values.index(change["new"])

    @traitlets.observe("index")
    def _to_value(self, change):
        if 0 <= change["new"] < len(self._values):
            self.value = self._values[change["new"]]


class Picture(anywidget.AnyWidget):
    """The explorer's rendered figure: ``value`` (PNG bytes) shown as ``<img alt=description>``;
    the description is announced (``aria-live="polite"``) when the picture changes."""

    _esm = traitlets.Unicode(_PICTURE_ESM).tag(sync=True)
    _css = traitlets.Unicode(_CSS).tag(sync=True)
    value = traitlets.Bytes(b"").tag(sync=True)
    format = traitlets.Unicode("png").tag(sync=True)
    description = traitlets.Unicode("").tag(sync=True)
