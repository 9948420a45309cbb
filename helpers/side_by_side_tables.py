"""Lesson 9 (C9.3): what the side-by-side grid shows: its table (one row per factor and choice:
the final held-out loss per seed, its mean and spread, the paired differences from the factor's
first choice, their mean and SE, the rule's verdict, and for the position rows the loss at
``long_factor`` times the training length), as data (:meth:`GridTables.table`), aligned text
(:meth:`GridTables.lines`) and Markdown (:meth:`GridTables.markdown`), and the rule in one
paragraph (:func:`rule_summary`). A mixin of :class:`helpers.side_by_side_grid.SideBySide`.
"""

from __future__ import annotations

from .paired import MIN_SEEDS, chance_alarms, mean_and_se, t_quantile
from .paired_experiment import differences_cell, mean_se_cell, verdict_cell
from .printing import fmt

__all__ = ["GridTables", "rule_summary", "POSITION_FACTORS"]

#: The factors whose rows are also measured at ``long_factor`` times the training length.
POSITION_FACTORS = ("position", "position, GPT-2 init")


class GridTables:
    """Lesson 9 (C9.3). The tables of a grid (a :class:`~helpers.side_by_side_grid.SideBySide`:
    its ``runs``, ``seeds``, ``long_factor`` and comparisons)."""

    def table(self) -> list[dict]:
        """One row per (factor, choice): ``factor``, ``choice``, ``seeds``, ``parameters``,
        ``finals`` (one per seed), ``mean`` and ``spread`` (max - min over the seeds) of the final
        held-out loss; ``differences`` (seed by seed, minus the factor's first choice),
        ``mean_difference``, ``se`` and ``verdict`` ("lower", "higher", "cannot tell apart at this
        size", "" for the first choice, "too few seeds" under 3) of the first look; the follow-up
        seeds' ``more_differences`` (empty without) and ``verdict_seeds``, the seeds the verdict
        rests on (and ``verdict`` is the second look's when there is one); for the position rows
        ``at_long`` (the mean loss at ``long_factor`` times the training length, per seed in
        ``long``) or ``long_note`` (why it could not be measured)."""
        rows = []
        for (factor, choice), runs in self.runs.items():
            finals = [r.val_loss for r in runs]
            row = {
                "factor": factor,
                "choice": choice,
                "seeds": [r.seed for r in runs],
                "parameters": runs[0].n_parameters,
                "finals": finals,
                "mean": sum(finals) / len(finals),
                "spread": max(finals) - min(finals),
                "differences": None,
                "more_differences": [],
                "mean_difference": None,
                "se": None,
                "verdict": "",
                "verdict_seeds": 0,
                "at_long": None,
                "long": None,
                "long_note": "",
            }
            if choice != self.reference(factor):
                d = self.differences(factor, choice)
                row["differences"] = d
                row["mean_difference"] = sum(d) / len(d)
                v = self.verdict(factor, choice)
                row["se"] = mean_and_se(d)[1] if v else None  # the first look's
                row["verdict"] = v.text if v else f"too few seeds ({len(self.seeds)})"
                row["verdict_seeds"] = len(v.differences) if v else len(d)
                if v is not None and len(v.differences) > len(d):
                    row["more_differences"] = list(v.differences[len(d) :])
            if factor in POSITION_FACTORS:
                longs = [r.loss_at_long for r in runs]
                if all(x is not None for x in longs):
                    row["at_long"], row["long"] = sum(longs) / len(longs), longs
                else:
                    row["long_note"] = runs[0].long_note
            rows.append(row)
        return rows

    def row(self, factor: str, choice: str) -> dict:
        """The :meth:`table` row of one choice."""
        for r in self.table():
            if (r["factor"], r["choice"]) == (factor, choice):
                return r
        raise ValueError(f"no row ({factor!r}, {choice!r}); rows: {list(self.runs)}")

    def lines(self, decimals: int = 3) -> list[str]:
        """The table as aligned text lines (losses printed with :func:`helpers.printing.fmt`):
        the mean over seeds, the spread, the mean paired difference from the factor's first
        choice and the rule's verdict, and the loss at ``long_factor`` times the length."""
        long = f"at {self.long_factor}x length"
        out = [
            f"{'factor':<21}{'choice':<18}{'params':>8}{'mean':>8}{'spread':>8}"
            f"{'diff':>8}  {'verdict':<31}{long}",
        ]
        for r in self.table():
            at_long = fmt(r["at_long"], decimals=decimals) if r["at_long"] is not None else ""
            if r["long_note"]:
                at_long = r["long_note"]
            diff = (
                "" if r["mean_difference"] is None else fmt(r["mean_difference"], decimals=decimals)
            )
            out.append(
                f"{r['factor']:<21}{r['choice']:<18}{r['parameters']:>8,}"
                f"{fmt(r['mean'], decimals=decimals):>8}{fmt(r['spread'], decimals=decimals):>8}"
                f"{diff:>8}  {r['verdict']:<31}{at_long}"
            )
        return out

    def markdown(self, decimals: int = 3) -> str:
        """The table in Markdown (the format tools/side_by_side.py writes): per-seed finals,
        paired differences and verdicts."""
        long = f"held-out loss at {self.long_factor}x the training length"
        head = (
            f"| factor | choice | parameters | final held-out loss per seed | mean | "
            f"paired difference per seed | mean difference (SE) | verdict | {long} |\n"
            f"|---|---|---:|---|---:|---|---:|---|---|"
        )
        body = []
        for r in self.table():
            if r["at_long"] is not None:
                at_long = fmt(r["at_long"], decimals=decimals)
            else:
                at_long = r["long_note"] or ""
            finals = ", ".join(fmt(x, decimals=decimals) for x in r["finals"])
            diffs = (
                differences_cell(r["differences"], r["more_differences"], decimals)
                if r["differences"] is not None
                else "(the factor's reference)"
            )
            mean_d = ""
            if r["mean_difference"] is not None:
                mean_d = mean_se_cell(r["mean_difference"], r["se"], decimals)
            body.append(
                f"| {r['factor']} | {r['choice']} | {r['parameters']:,} | {finals} "
                f"| {fmt(r['mean'], decimals=decimals)} | {diffs} | {mean_d} "
                f"| {verdict_cell(r, decimals)} | {at_long} |"
            )
        return "\n".join([head, *body])


def rule_summary(grid) -> str:
    """Lesson 9 (C9.3). The rule, its false-alarm rate (claimed and, with A/A runs, measured),
    the smallest difference it detects at 80% power and the chance alarms of the whole grid, in
    one paragraph."""
    n = len(grid.seeds)
    if n < MIN_SEEDS:
        return f"{n} seed(s): too few for the rule (it needs {MIN_SEEDS}); no verdicts at this size"
    c = t_quantile(n, grid.level)
    text = (
        f"rule: a paired t-test on the mean of the {n} paired differences, at level "
        f"{grid.level:.1%} (the mean beyond {c:.2f} standard errors; it tests the mean, not "
        "whether the seeds agree in sign)"
    )
    if grid.followup is not None:
        n2 = n + len(grid.followup.seeds)
        text += (
            f"; a row it leaves undecided is decided again at {n2} seeds (follow-up seeds "
            f"{', '.join(map(str, grid.followup.seeds))}; the mean beyond "
            f"{t_quantile(n2, grid.level):.2f} SE), the two looks declared before the follow-up ran"
        )
    rate = grid.false_alarm_rate()
    text += (
        f"; false-alarm rate {rate:.1%} per comparison if a choice changes nothing (Gaussian noise)"
    )
    aa = grid.aa_rate()
    if aa is not None:
        lo, hi = aa.interval
        text += (
            f"; measured on {aa.comparisons} disjoint A/A comparisons (no run in two): "
            f"{aa.alarms} alarm(s), {aa.rate:.0%} (95% interval {lo:.0%} to {hi:.0%}: "
            f"{aa.comparisons} comparisons cannot pin the rate down)"
        )
        text += (
            f"; under a null shaped like the A/A differences (centred, resampled) the first look "
            f"fires {grid.shaped_rate():.1%} (its level {grid.level:.1%})"
        )
        seen = grid.detectable()
        looks = " and ".join(f"{seen[k]:.3f} nats at {k} seeds" for k in seen)
        text += (
            f"; with the A/A spread ({grid.aa_sd():.3f} nats per paired difference) it detects "
            f"at 80% power a true difference of {looks}: smaller differences are mostly "
            "'cannot tell apart'"
        )
    m = sum(1 for r in grid.table() if r["differences"] is not None)
    if m:
        expected, some = chance_alarms(m, rate)
        text += (
            f"; {m} comparisons at {rate:.1%} each give {expected:.2f} chance alarms on average "
            f"(at least one with probability {some:.0%}) if no choice mattered"
        )
    return text
