"""Lessons 5 and 9 (C5.7, C9.3): the shape every paired experiment of the course shares, the
warm-up sweep (:class:`helpers.warmup_results.WarmupSweep`) and the side-by-side grid
(:class:`helpers.side_by_side_grid.SideBySide`). Each trains choices under the same seeds s =
1..n, compares a choice with its reference by the paired differences of their final held-out
losses (:mod:`helpers.paired`), and adds

* **two looks** (:meth:`PairedExperiment.two_looks`): the rule at ``level`` on the first seeds;
  a comparison it leaves undecided is decided once more with the follow-up seeds added, the two
  looks together firing :func:`~helpers.paired.two_look_rate` of the time when nothing differs
  (:meth:`PairedExperiment.false_alarm_rate`);
* **A/A runs**: a run again with the same batches and another initial draw, compared in disjoint
  pairs, whose alarms measure the rule's false-alarm rate (:meth:`PairedExperiment.aa_rate`),
  whose spread

      sd_AA = sqrt(mean of d^2 over every A/A paired difference d)

  sets the smallest true difference each look detects at 80% power
  (:meth:`PairedExperiment.detectable_at`), and whose shape (each d / sd_AA, resampled) gives the
  rule's rate under a null shaped like the data (:meth:`PairedExperiment.shaped_rate_of`);
* the same cells in their Markdown tables (:func:`signed`, :func:`differences_cell`,
  :func:`mean_se_cell`, :func:`verdict_cell`) and the same fields in their shipped files
  (:data:`AA_SCHEMA`, :data:`COMPARISON_SCHEMA`, :func:`aa_record`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .paired import (
    MIN_SEEDS,
    AARate,
    Verdict,
    aa_rate,
    chance_alarms,
    decide,
    detectable_difference,
    mean_and_se,
    null_rate,
    two_look_rate,
)
from .printing import fmt

__all__ = [
    "PairedExperiment",
    "rms",
    "aa_record",
    "chance",
    "signed",
    "differences_cell",
    "mean_se_cell",
    "verdict_cell",
    "AA_SCHEMA",
    "COMPARISON_SCHEMA",
]


class PairedExperiment:
    """Lessons 5 and 9 (C5.7, C9.3). What a paired experiment concludes from its seeds, its
    follow-up and its A/A runs. A class using it has ``seeds`` (the first look's), ``level``
    (each look's level of :func:`helpers.paired.decide`), ``followup`` (the experiment of the
    follow-up seeds, or None) and ``aa_differences()`` (the disjoint A/A comparisons, each a list
    of paired differences)."""

    def two_looks(self, differences: list[float], more: list[float]) -> Verdict:
        """The rule on ``differences`` (the first look); if it does not fire and there are
        follow-up ``more`` differences, the rule on all of them (the second look)."""
        first = decide(differences, self.level)
        if first.decided or not more:
            return first
        return decide(differences + more, self.level)

    def looks(self) -> list[int]:
        """The seeds each look rests on: n, and n plus the follow-up's with a follow-up."""
        n = len(self.seeds)
        return [n] if self.followup is None else [n, n + len(self.followup.seeds)]

    def false_alarm_rate(self) -> float | None:
        """The rule's false-alarm rate per comparison under Gaussian noise: one look's level, or
        with a follow-up the two looks' together (:func:`helpers.paired.two_look_rate`). None
        with too few seeds."""
        n = len(self.seeds)
        if n < MIN_SEEDS:
            return None
        if self.followup is None:
            return self.level
        return two_look_rate(n, n + len(self.followup.seeds), self.level)

    def aa_rate(self) -> AARate | None:
        """The rule's first look on the disjoint A/A comparisons (None without A/A runs or with
        too few seeds)."""
        diffs = self.aa_differences()
        return aa_rate(diffs, self.level) if diffs and len(self.seeds) >= MIN_SEEDS else None

    def detectable_at(self, sd: float) -> dict[str, float]:
        """The smallest true mean difference (nats) each look detects with 80% power when null
        paired differences spread ``sd``: ``{"5": ..., "8": ...}`` keyed by the look's seeds."""
        return {str(n): detectable_difference(n, sd, self.level) for n in self.looks()}

    def shaped_rate_of(self, flat: Sequence[float]) -> float | None:
        """The first look's false-alarm rate under a null shaped like ``flat`` (A/A differences,
        centred and resampled by :func:`helpers.paired.null_rate`). None with fewer than two
        differences or too few seeds."""
        if len(flat) < 2 or len(self.seeds) < MIN_SEEDS:
            return None
        return null_rate(len(self.seeds), self.level, sample=flat)


def rms(flat: Sequence[float]) -> float | None:
    """sqrt(mean of x^2): the spread of null paired differences (None for no differences)."""
    return (sum(d * d for d in flat) / len(flat)) ** 0.5 if flat else None


def aa_record(rate: AARate | None) -> dict | None:
    """The A/A rate as the shipped files hold it (:data:`AA_SCHEMA`)."""
    if rate is None:
        return None
    return {
        "alarms": rate.alarms,
        "comparisons": rate.comparisons,
        "rate": rate.rate,
        "interval": list(rate.interval),
    }


def chance(m: int, claimed: float | None) -> list[float] | None:
    """:func:`helpers.paired.chance_alarms` of ``m`` comparisons at the ``claimed`` rate, as a
    list (None without a rate or without comparisons)."""
    return None if claimed is None or not m else list(chance_alarms(m, claimed))


def signed(x: float, decimals: int) -> str:
    """``x`` printed with :func:`helpers.printing.fmt` and its sign, "+0.012" or "-0.034"."""
    text = fmt(x, decimals=decimals)
    return text if text.startswith("-") else "+" + text


def differences_cell(differences: list[float], more: list[float], decimals: int) -> str:
    """The paired differences per seed, the follow-up seeds' after a semicolon."""
    cell = ", ".join(signed(x, decimals) for x in differences)
    if more:
        cell += "; follow-up seeds: " + ", ".join(signed(x, decimals) for x in more)
    return cell


def mean_se_cell(mean: float, se: float | None, decimals: int) -> str:
    """The mean difference, signed, with its standard error in brackets when there is one."""
    return signed(mean, decimals) + ("" if se is None else f" ({fmt(se, decimals=decimals)})")


def verdict_cell(row: dict, decimals: int) -> str:
    """A table row's verdict, with the mean and SE at all its seeds when the second look gave
    it (``verdict_seeds`` more than the first look's differences)."""
    verdict = row["verdict"]
    if row["differences"] and row["verdict_seeds"] > len(row["differences"]):
        mean, se = mean_and_se(row["differences"] + row["more_differences"])
        verdict += (
            f" (at {row['verdict_seeds']} seeds: {signed(mean, decimals)}, SE "
            f"{fmt(se, decimals=decimals)})"
        )
    return verdict


#: The A/A rate in a shipped summary (:func:`aa_record`), or None without A/A runs.
AA_SCHEMA = ({"alarms": int, "comparisons": int, "rate": float, "interval": [float]}, None)
#: The fields every comparison of a shipped summary has.
COMPARISON_SCHEMA = {
    "differences": [float],
    "more_differences": [float],
    "mean_difference": float,
    "se": (float, None),
    "verdict": str,
    "verdict_seeds": int,
}
