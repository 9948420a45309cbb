"""Lesson 9: what a training run shows while it trains (:meth:`helpers.pretrain.Pretraining.train`).

In a Jupyter kernel a progress bar and a live readout (step, recent training loss, last held-out
loss, time), updated at most four times a second; in plain Python nothing, or one line at the end.
The readout is widget state, not a stored output, so it is formatted plainly.
"""

from __future__ import annotations

import time

__all__ = ["PROGRESS", "make_progress"]

#: What ``progress=`` accepts: "auto" is the widget in a kernel and nothing elsewhere.
PROGRESS = ("auto", "widget", "text", "none")


def make_progress(mode: str, start: int, total: int):
    """Lesson 9. The display for a run going from step ``start`` to ``total``."""
    return _Progress.make(mode, start, total)


class _Progress:
    """What ``Pretraining.train`` shows while it runs: nothing, one line, or a widget."""

    @staticmethod
    def make(mode: str, start: int, total: int) -> _Progress:
        if mode == "auto":
            mode = "widget" if _in_kernel() else "none"
        if mode == "widget":
            return _WidgetProgress(start, total)
        if mode == "text":
            return _TextProgress()
        return _Progress()

    def update(self, run, total: int, start: float) -> None:
        pass

    def interrupted(self, run, total: int) -> None:
        print(
            f"interrupted: the run is at step {run.step} of {total}; "
            f"call train({total}) again to continue"
        )

    def done(self, run, total: int) -> None:
        pass


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the course's requirements
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _readout(run, total: int, seconds: float | None = None) -> str:
    # the live readout: not a stored output (widget state), so plain formatting is fine here
    recent = run.result.train_losses[-20:]
    parts = [f"step {run.step} / {total}"]
    if recent:
        parts.append(f"training loss {sum(recent) / len(recent):.3f} (last {len(recent)} steps)")
    parts.append(f"held-out {run.val_loss:.3f} at step {run.result.val_steps[-1]}")
    if seconds is not None:
        parts.append(f"{seconds:.1f} s")
    return " · ".join(parts)


class _TextProgress(_Progress):
    def done(self, run, total):
        print(_readout(run, total, run.seconds))


class _WidgetProgress(_Progress):
    INTERVAL_S = 0.25  # at most four updates a second

    def __init__(self, start: int, total: int):
        import ipywidgets
        from IPython.display import display

        self.bar = ipywidgets.IntProgress(
            value=start, min=0, max=total, description="training", bar_style="info"
        )
        self.label = ipywidgets.HTML(f"step {start} / {total}")
        self.box = ipywidgets.HBox([self.bar, self.label])
        self.last = 0.0
        display(self.box)

    def _show(self, run, total, seconds=None, style="info"):
        self.bar.value = run.step
        self.bar.bar_style = style
        self.label.value = _readout(run, total, seconds)

    def update(self, run, total, start):
        now = time.perf_counter()
        if now - self.last >= self.INTERVAL_S:
            self.last = now
            self._show(run, total, run.seconds + now - start)

    def interrupted(self, run, total):
        self._show(run, total, run.seconds, style="warning")
        self.label.value += f" · interrupted: call train({total}) again to continue"

    def done(self, run, total):
        self._show(run, total, run.seconds, style="success")
