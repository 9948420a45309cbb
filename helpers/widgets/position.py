"""Lesson 4 explorer: the sinusoidal positional encoding, three small pictures that move together.

Controls: ``d_model`` (the width of the table), ``pair`` (the column pair i, columns 2i = sin and
2i+1 = cos), ``positions`` (the range of positions shown) and ``scheme`` (C4.8: what the right
panel shows). Panels: the two waves of the chosen pair, the table as a heatmap (the chosen pair
marked), and a score over every pair of positions (p, q) of the range: the similarity
PE(p)·PE(q) of the sinusoidal table, the rotary score (R_(-p) q)·(R_(-q) k) of one fixed random query
q and key k (RoPE turns pair i by the same angle pos·w_i as the table, RoFormer's way), or ALiBi's bias -m·|p - q|
of one head. Every update changes the existing artists in place.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
from matplotlib.figure import Figure

from .. import _validate as check
from ..plots import PALETTE
from ..positional import alibi_bias, alibi_slopes, apply_rotary, sinusoidal_encoding_at, wavelengths
from ..printing import fmt
from ._base import TITLE_AT_TOP, Explorer, dropdown, slider
from ._controls import IntRangeSlider

__all__ = ["positional_explorer", "PositionalExplorer"]

MAX_POSITION = 2048  # the position range slider goes up to here
MAX_SPAN = 256  # at most this many positions are shown at once (keeps the similarity small)
ALIBI_HEADS = 8  # the ALiBi panel shows head 1 of 8 (m = 1/2) and says so

#: scheme -> the right panel's title (what a pixel (p, q) holds)
SCHEMES = {
    "sinusoidal": "PE(p)·PE(q)",
    "rotary": "RoPE: q_p·k_q",
    "alibi": f"ALiBi bias, head 1 of {ALIBI_HEADS}",
}


@lru_cache(maxsize=8)  # at most ~12 MB: 8 x (257 x 512 table + 257 x 257 similarity), float64
def _tables(d_model: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """PE rows start..stop (inclusive) [n, d_model] and their similarity matrix [n, n]."""
    pe = sinusoidal_encoding_at(torch.arange(start, stop + 1), d_model, dtype=torch.float64)
    return pe.numpy(), (pe @ pe.T).numpy()  # [n, d], [n, n]


@lru_cache(maxsize=1)
def _query_key(d_model: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One fixed random query and key of length d_model (float64, the same on every machine)."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, d_model, dtype=torch.float64, generator=g)  # [d], [d]
    return q, k


@lru_cache(maxsize=8)
def _scores(scheme: str, d_model: int, start: int, stop: int) -> np.ndarray:
    """The right panel's matrix [n, n] over positions start..stop (C4.8 for rotary and ALiBi)."""
    if scheme == "sinusoidal":
        return _tables(d_model, start, stop)[1]
    n = stop - start + 1
    if scheme == "alibi":  # the bias depends on p - q only, not on where the range starts
        return alibi_bias(ALIBI_HEADS, n, dtype=torch.float64)[0].numpy()  # [n, n]
    q, k = _query_key(d_model)
    positions = torch.arange(start, stop + 1)  # [n]
    rq = apply_rotary(q.expand(n, d_model), positions)  # [n, d]: row p is R_(-p) q, RoFormer's turn
    rk = apply_rotary(k.expand(n, d_model), positions)  # [n, d]: row j is R_(-j) k
    return (rq @ rk.T).numpy()  # [n, n]: q_p·k_j, a function of j - p only


class PositionalExplorer(Explorer):
    """An :class:`Explorer` that keeps the pair slider within 0..d_model/2 - 1 without a second
    redraw when ``d_model`` shrinks."""

    _syncing = False

    def _on_change(self, change) -> None:
        if self._syncing:
            return
        if change["owner"] is self.controls["d_model"]:
            pair = self.controls["pair"]
            self._syncing = True
            try:
                pair.max = change["new"] // 2 - 1  # clamps pair.value if needed
            finally:
                self._syncing = False
        self.refresh()


def positional_explorer(
    d_model: int = 64,
    pair: int = 4,
    positions: tuple[int, int] = (0, 100),
    scheme: str = "sinusoidal",
) -> PositionalExplorer:
    """Lesson 4 explorer. Returns a widget; drag its sliders to see the encoding change.

    ``PE(pos, 2i) = sin(pos * w_i)``, ``PE(pos, 2i+1) = cos(pos * w_i)``, ``w_i = 10000^(-2i/d_model)``.
    ``scheme`` (C4.8) picks the right panel: ``"sinusoidal"`` PE(p)·PE(q), ``"rotary"`` the RoPE
    score (R_(-p) q)·(R_(-q) k) of a fixed random q and k, ``"alibi"`` ALiBi's bias -m|p - q| (head 1
    of 8, m = 1/2).
    """
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(map(repr, SCHEMES))}, got {scheme!r}")
    d_model = check.positive_int("d_model", d_model, minimum=8)
    if d_model % 8 or d_model > 512:
        raise ValueError(f"d_model must be a multiple of 8 between 8 and 512, got {d_model}")
    pair = check.positive_int("pair", pair, minimum=0)
    if pair >= d_model // 2:
        raise ValueError(
            f"pair must be between 0 and d_model/2 - 1 = {d_model // 2 - 1}, got {pair}"
        )
    if (
        isinstance(positions, (str, bytes))
        or not hasattr(positions, "__len__")
        or len(positions) != 2
    ):
        raise TypeError(
            f"positions must be a pair (start, stop) of whole numbers, got {positions!r}"
        )
    start, stop = (check.positive_int("positions", p, minimum=0) for p in positions)
    if not start < stop <= MAX_POSITION:
        raise ValueError(
            f"positions must be (start, stop) with 0 <= start < stop <= {MAX_POSITION}, got {positions}"
        )

    controls = {
        "d_model": slider("d_model", d_model, 8, 512, 8),
        "pair": slider("pair i (columns 2i, 2i+1)", pair, 0, d_model // 2 - 1),
        "positions": IntRangeSlider(
            value=(start, stop), min=0, max=MAX_POSITION, step=1, description="positions"
        ),
        "scheme": dropdown("right panel", list(SCHEMES), scheme),
    }

    fig = Figure(figsize=(10.5, 2.9))
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.17, top=0.9, wspace=0.3)
    ax_wave, ax_heat, ax_sim = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.4, 1.2, 0.8]})
    (sin_line,) = ax_wave.plot([], [], lw=1.2, color=PALETTE[0], label="sin, column 2i")
    (cos_line,) = ax_wave.plot(
        [], [], lw=1.2, ls="--", color=PALETTE[1], label="cos, column 2i+1 (dashed)"
    )
    ax_wave.set_ylim(-1.1, 1.6)  # room for the legend above the waves
    ax_wave.set_xlabel("position")
    ax_wave.legend(loc="upper center", fontsize="x-small", ncols=2)
    heat = ax_heat.imshow(
        np.zeros((2, 2)), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest"
    )
    marks = [ax_heat.axvline(0, color="lime", lw=1.5) for _ in range(2)]
    ax_heat.set_xlabel("column")
    ax_heat.set_ylabel("position")
    sim = ax_sim.imshow(np.zeros((2, 2)), cmap="viridis", interpolation="nearest")
    ax_sim.set_xlabel("position q")
    sim_title = ax_sim.set_title(SCHEMES[scheme], fontsize="medium", **TITLE_AT_TOP)
    ax_wave.set_yticks([-1, 0, 1])
    for ax in (ax_wave, ax_heat, ax_sim):
        ax.locator_params(nbins=4)  # few tick labels: drawing text is most of an update's cost
        ax.tick_params(labelsize="small")

    def update(d_model: int, pair: int, positions: tuple[int, int], scheme: str) -> str:
        pair = min(pair, d_model // 2 - 1)
        start, stop = positions
        clipped = stop - start > MAX_SPAN
        stop = min(stop, start + MAX_SPAN)
        pe, s = _tables(d_model, start, stop)  # [n, d], [n, n]
        x = np.arange(start, stop + 1)
        sin_line.set_data(x, pe[:, 2 * pair])
        cos_line.set_data(x, pe[:, 2 * pair + 1])
        ax_wave.set_xlim(start, max(stop, start + 1))
        lam = float(wavelengths(d_model)[pair])
        ax_wave.set_title(
            f"pair {pair}: wavelength {lam:,.1f} positions", fontsize="medium", **TITLE_AT_TOP
        )
        extent = (-0.5, d_model - 0.5, stop + 0.5, start - 0.5)
        heat.set_data(pe)
        heat.set_extent(extent)
        ax_heat.set_xlim(extent[0], extent[1])
        ax_heat.set_ylim(extent[2], extent[3])
        marks[0].set_xdata([2 * pair - 0.5] * 2)
        marks[1].set_xdata([2 * pair + 1.5] * 2)
        ax_heat.set_title(f"PE, {len(x)} × {d_model}", fontsize="medium", **TITLE_AT_TOP)
        scores = _scores(scheme, d_model, start, stop)  # [n, n]
        sim.set_data(scores)
        sim.set_extent((start - 0.5, stop + 0.5, stop + 0.5, start - 0.5))
        sim.set_clim(float(scores.min()), float(scores.max()))  # d_model/2 on PE's diagonal
        if sim_title.get_text() != SCHEMES[scheme]:  # a new text only when the scheme changes
            sim_title.set_text(SCHEMES[scheme])
        note = f" (showing the first {MAX_SPAN + 1} positions of the range)" if clipped else ""
        right = {
            "sinusoidal": "Right: PE(p)·PE(q), symmetric, the same along every diagonal (C4.6).",
            "rotary": (
                "Right: RoPE's score q_p·k_q of one fixed random query vector at position p and "
                "key vector at position q, both rotated by their positions (pair i by pos·w_i, "
                "the angle of the waves): the same along every diagonal, a function of q - p "
                "only; unlike PE(p)·PE(q) not symmetric, and where it peaks depends on the "
                "vectors."
            ),
            "alibi": (
                f"Right: ALiBi's bias -m·|p - q| of head 1 of {ALIBI_HEADS} (m = "
                f"{float(alibi_slopes(ALIBI_HEADS)[0]):g}), added to that head's scores: "
                "0 on the diagonal, falling by m per position of distance; it uses no table."
            ),
        }[scheme]
        return (
            f"d_model = {d_model}: {d_model // 2} column pairs, wavelengths from 2π ≈ 6.28 to "
            f"{float(wavelengths(d_model)[-1]):,.0f} positions. Pair {pair} turns by "
            f"{math.degrees(float(2 * math.pi / lam)):.3g}° per position.{note} {right}"
        )

    def describe(d_model: int, pair: int, positions: tuple[int, int], scheme: str) -> str:
        pair = min(pair, d_model // 2 - 1)
        start, stop = positions[0], min(positions[1], positions[0] + MAX_SPAN)
        lam = float(wavelengths(d_model)[pair])
        right = {
            "sinusoidal": "PE(p)·PE(q), largest on the diagonal and the same along every diagonal",
            "rotary": "RoPE's score of one fixed query and key, the same along every diagonal",
            "alibi": "ALiBi's bias, 0 on the diagonal and falling with the distance |p - q|",
        }[scheme]
        return (
            f"Three panels over positions {start} to {stop}: the sin (solid) and cos (dashed) "
            f"columns of pair {pair}, a wave of wavelength {fmt(lam, 3)} positions; the "
            f"{stop - start + 1} × {d_model} table as colours with the pair's columns marked; "
            f"and {right}."
        )

    return PositionalExplorer(
        "Lesson 4: the sinusoidal positional encoding", controls, fig, update, describe=describe
    )
