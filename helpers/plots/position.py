"""Lesson 4 pictures: the sinusoidal encoding as waves, as a heatmap, its wavelengths, and the
similarity PE(p)·PE(q) of two positions.

Each function draws on the ``ax`` it is given, or on a new pyplot figure when ``ax`` is None (for a
notebook cell, which then calls ``plt.show()``), and returns the artists it made so that the lesson
4 explorer can update them in place.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import _validate as check
from ..figures import describe, listing
from ..positional import wavelengths
from ..printing import fmt
from ._common import axes as _axes
from ._common import series_style

__all__ = ["plot_waves", "plot_heatmap", "plot_wavelengths", "plot_similarity", "similarity"]


def _table(pe) -> np.ndarray:
    check.tensor("pe", pe, ndim=2, layout="[n_positions, d_model]")
    return pe.detach().to(torch.float64).numpy()


def similarity(pe: torch.Tensor) -> torch.Tensor:
    """Lesson 4 (C4.6). The matrix S[p, q] = PE(p)·PE(q), shape [n, n], for a table [n, d_model].

    Each row PE(p) holds d_model/2 (sin, cos) pairs, so PE(p)·PE(p) = d_model/2 and
    S[p, q] = sum_i cos((p - q) w_i): it depends only on p - q.
    """
    check.tensor("pe", pe, ndim=2, layout="[n_positions, d_model]")
    return pe @ pe.T  # [n, d] @ [d, n] -> [n, n]


def plot_waves(pe: torch.Tensor, columns=(0, 1, 8, 9), ax=None):
    """Lesson 4. One line per chosen column of the table ``pe`` [n, d_model], against position.

    Even columns are sin, odd columns cos (C4.2). Returns the list of Line2D artists.
    """
    table = _table(pe)  # [n, d]
    if isinstance(columns, (str, bytes)) or not hasattr(columns, "__iter__"):
        raise TypeError(
            f"columns must be a sequence of column indices such as (0, 1, 8, 9), got {columns!r}"
        )
    ax = _axes(ax, (7, 2.8))
    positions = np.arange(table.shape[0])
    lines = []
    for k, col in enumerate(columns):
        col = check.positive_int("column", col, minimum=0)
        if col >= table.shape[1]:
            raise ValueError(f"column must be < d_model={table.shape[1]}, got {col}")
        kind = "sin" if col % 2 == 0 else "cos"
        (line,) = ax.plot(
            positions,
            table[:, col],
            label=f"column {col} ({kind}, pair {col // 2})",
            **series_style(k, markers=False),
        )
        lines.append(line)
    flips = [int(np.sum(table[:-1, c] * table[1:, c] < 0)) for c in columns]
    within = "between -1 and 1" if np.abs(table[:, list(columns)]).max() <= 1 + 1e-9 else "waves"
    # the sin and cos of one pair may differ by one sign change: allow it
    slower = (
        all(b <= a + 1 for a, b in zip(flips, flips[1:], strict=False)) and flips[0] > flips[-1]
    )
    describe(
        ax,
        f"Columns {listing(columns)} of the {table.shape[0]} × {table.shape[1]} table against "
        f"position 0 to {table.shape[0] - 1}, {within}: "
        + ("the higher the column, the slower the wave" if slower else "one line per column")
        + f" ({listing(flips)} sign changes).",
    )
    ax.set_xlabel("position")
    ax.set_ylabel("PE(position, column)")
    ax.set_ylim(-1.45, 1.1)  # room for the legend below the waves
    ax.legend(loc="lower left", fontsize="small", ncols=2, framealpha=0.9)
    return lines


def plot_heatmap(pe: torch.Tensor, ax=None, colorbar: bool = True):
    """Lesson 4. The table ``pe`` [n, d_model] as an image: positions down, columns across.

    Returns the AxesImage.
    """
    table = _table(pe)  # [n, d]
    ax = _axes(ax, (7, 3.2))
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("column (2i: sin, 2i+1: cos)")
    ax.set_ylabel("position")
    n, d = table.shape
    first, last = (int(np.sum(table[:-1, c] * table[1:, c] < 0)) for c in (0, d - 1))
    describe(
        ax,
        f"The {n} × {d} table as colours (blue -1, white 0, red +1), positions 0 to {n - 1} down "
        f"and columns 0 to {d - 1} across: column 0 changes sign {first} times down the "
        f"positions, column {d - 1} {last} times.",
    )
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="value")
    return image


def plot_wavelengths(d_model: int, base: float = 10000.0, ax=None):
    """Lesson 4. Wavelength 2*pi*base^(2i/d_model) of each column pair i, on a log scale.

    A straight line on the log axis: the wavelengths form a geometric progression from 2*pi to
    almost 2*pi*base. Returns the Line2D.
    """
    lam = wavelengths(d_model, base).numpy()  # [d_model/2]
    ax = _axes(ax, (6, 2.8))
    (line,) = ax.plot(np.arange(len(lam)), lam, "o-", markersize=3)
    ax.set_yscale("log")
    ax.set_xlabel("column pair i (columns 2i, 2i+1)")
    ax.set_ylabel("wavelength (positions)")
    ax.axhline(2 * np.pi, color="gray", lw=0.8, ls=":")
    ax.axhline(2 * np.pi * base, color="gray", lw=0.8, ls=":")
    describe(
        ax,
        f"Wavelength of each of the {len(lam)} column pairs on a log scale: a straight line "
        f"rising from 2π ≈ {fmt(lam[0], 3)} positions at pair 0 to {fmt(lam[-1], 3)} at pair "
        f"{len(lam) - 1}, between dotted lines at 2π and 2π × {fmt(base, 6)}.",
    )
    return line


def plot_similarity(pe: torch.Tensor, ax=None, colorbar: bool = True):
    """Lesson 4 (C4.6). The matrix PE(p)·PE(q) [n, n] as an image. Returns the AxesImage.

    Constant along every diagonal (it depends only on p - q) and largest on the main diagonal.
    """
    sim = similarity(pe.detach().to(torch.float64)).numpy()  # [n, n]
    ax = _axes(ax, (4, 3.4))
    image = ax.imshow(sim, cmap="viridis", interpolation="nearest")  # colours span min..max
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    n = sim.shape[0]
    toeplitz = all(
        np.ptp(np.diagonal(sim, k)) <= 1e-6 * np.abs(sim).max() for k in range(-(n - 1), n)
    )
    diagonal_max = bool(np.all(np.diagonal(sim) >= sim.max(axis=1) - 1e-9 * np.abs(sim).max()))
    describe(
        ax,
        f"PE(p)·PE(q) for positions p and q from 0 to {n - 1} as colours (dark low, yellow high): "
        + ("largest on the main diagonal p = q, " if diagonal_max else "")
        + (
            "the same along every diagonal, so it depends only on p - q."
            if toeplitz
            else "not the same along its diagonals."
        ),
    )
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="PE(p)·PE(q)")
    return image
