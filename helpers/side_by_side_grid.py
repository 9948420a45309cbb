"""Lesson 9 (C9.3): what the side-by-side grid trained (:class:`SideBySide`: the runs of every
choice, one :class:`GridRun` per seed, the A/A repeats of the base model, the follow-up seeds)
and what the paired rule concludes from it: for each choice, seed by seed,

    d_s = L_choice(s) - L_first choice of its factor(s)      (final held-out loss, nats)

decided in two looks (:class:`helpers.paired_experiment.PairedExperiment`), the A/A runs giving
the rule's measured false-alarm rate and the smallest difference the grid detects. Its tables
are :mod:`helpers.side_by_side_tables`; :func:`helpers.side_by_side.side_by_side` trains it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from .paired import MIN_SEEDS, TWO_LOOK_LEVEL, Verdict, disjoint_pairs, paired_differences
from .paired_experiment import PairedExperiment, aa_record, chance, rms
from .pretrain import PretrainConfig
from .side_by_side_tables import GridTables, rule_summary

__all__ = ["GridRun", "SideBySide"]


@dataclass
class GridRun:
    """Lesson 9 (C9.3). One trained model of the grid, summarized: its seeds (batches, initial
    weights), its held-out curve, its final held-out loss, at ``long_factor`` times the training
    length (None with the reason when it cannot run; shown for the position rows)."""

    seed: int
    n_parameters: int
    val_steps: list[int]
    val_losses: list[float]
    val_loss: float
    seconds: float
    loss_at_long: float | None = None
    long_note: str = ""
    init_seed: int | None = None
    options: dict = field(default_factory=dict)  # the model's choices: position ... init

    def __post_init__(self):
        if self.init_seed is None:
            self.init_seed = self.seed


@dataclass
class SideBySide(GridTables, PairedExperiment):
    """Lesson 9 (C9.3). What :func:`side_by_side` trained: ``runs[(factor, choice)]`` the runs of
    one choice (one per seed; identical configurations share their runs, so the base model's
    runs are the first choice of every sheet factor), ``aa_runs[m]`` the m-th A/A repeat of the
    base runs (same batches, another initial draw), the settings, the steps and the baselines.
    ``level`` is each look's level (:func:`helpers.paired.decide`); ``followup`` the grid of the
    follow-up seeds for rows the first look left undecided (None without one)."""

    base: PretrainConfig
    steps: int
    seeds: tuple[int, ...]
    long_factor: int
    runs: dict[tuple[str, str], list[GridRun]] = field(default_factory=dict)
    base_runs: list[GridRun] = field(default_factory=list)
    aa_runs: list[list[GridRun]] = field(default_factory=list)
    baselines: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    level: float = TWO_LOOK_LEVEL
    val_tokens: int = 0
    followup: SideBySide | None = None

    # -- the comparisons ----------------------------------------------------------------------
    def factors(self) -> list[str]:
        return list(dict.fromkeys(f for f, _ in self.runs))

    def reference(self, factor: str) -> str:
        """The choice a factor's other choices are compared with (its first)."""
        return next(c for f, c in self.runs if f == factor)

    def finals(self, factor: str, choice: str) -> list[float]:
        """The final held-out loss of each seed, in the order of ``seeds``."""
        return [r.val_loss for r in self._runs(factor, choice)]

    def _runs(self, factor: str, choice: str) -> list[GridRun]:
        if (factor, choice) not in self.runs:
            raise ValueError(f"no row ({factor!r}, {choice!r}); rows: {list(self.runs)}")
        return self.runs[(factor, choice)]

    def differences(self, factor: str, choice: str) -> list[float]:
        """Seed by seed: this choice's final loss minus the factor's first choice's."""
        return paired_differences(
            self.finals(factor, self.reference(factor)), self.finals(factor, choice)
        )

    def more_differences(self, factor: str, choice: str) -> list[float]:
        """The follow-up seeds' paired differences of a row (empty without a follow-up of it)."""
        if self.followup is None or (factor, choice) not in self.followup.runs:
            return []
        return self.followup.differences(factor, choice)

    def verdict(self, factor: str, choice: str) -> Verdict | None:
        """The two-look rule: :func:`helpers.paired.decide` at ``level`` on :meth:`differences`;
        if it does not fire and the row has follow-up seeds, again on all its differences
        (:meth:`more_differences` added). None for the factor's first choice and with fewer than
        :data:`~helpers.paired.MIN_SEEDS` seeds."""
        if choice == self.reference(factor) or len(self.seeds) < MIN_SEEDS:
            return None
        return self.two_looks(
            self.differences(factor, choice), self.more_differences(factor, choice)
        )

    def aa_differences(self) -> list[list[float]]:
        """The A/A comparisons, in disjoint pairs of repeats (the base's runs with repeat 1,
        repeat 2 with repeat 3, ...: :func:`helpers.paired.disjoint_pairs`), so that no run
        enters two comparisons; each a list of paired differences, one per seed."""
        if not self.aa_runs:
            return []
        sets = [[r.val_loss for r in self.base_runs]]
        sets += [[r.val_loss for r in aa] for aa in self.aa_runs]
        return disjoint_pairs(sets)

    def aa_sd(self) -> float | None:
        """The spread of null paired differences: the root mean square of every disjoint A/A
        comparison's differences (None without A/A runs)."""
        return rms([d for comparison in self.aa_differences() for d in comparison])

    def detectable(self) -> dict[str, float] | None:
        """The smallest true mean difference (nats) each look detects with 80% power, given the
        A/A spread (:meth:`aa_sd`): ``{"5": ..., "8": ...}`` keyed by the seeds of the look
        (the second only with a follow-up). None without A/A runs or with too few seeds."""
        sd = self.aa_sd()
        if sd is None or len(self.seeds) < MIN_SEEDS:
            return None
        return self.detectable_at(sd)

    def shaped_rate(self) -> float | None:
        """The first look's false-alarm rate under a null shaped like the data: every disjoint
        A/A difference, centred on zero and resampled (:func:`helpers.paired.null_rate` with a
        ``sample``), skew and tails included. None without A/A runs or with too few seeds."""
        return self.shaped_rate_of([d for c in self.aa_differences() for d in c])

    def with_followup(self, other: SideBySide) -> SideBySide:
        """This grid with ``other`` as its follow-up: the same base model and settings trained
        under new seeds (none of this grid's) for some of this grid's rows, used by the second
        look of :meth:`verdict` for the rows the first look leaves undecided."""
        if not isinstance(other, SideBySide):
            raise TypeError(f"other must be a SideBySide, got {type(other).__name__}")
        same = (replace(self.base, seed=0), self.steps, self.long_factor, self.val_tokens) == (
            replace(other.base, seed=0), other.steps, other.long_factor, other.val_tokens
        )  # fmt: skip
        if not same or set(other.seeds) & set(self.seeds) or not set(other.runs) <= set(self.runs):
            raise ValueError(
                "other must train the same base model and settings as this grid, under seeds "
                f"this grid does not use (this grid's {list(self.seeds)}, other's "
                f"{list(other.seeds)}), for rows of this grid"
            )
        merged = replace(self, followup=replace(other, aa_runs=[], followup=None))
        merged.seconds = self.seconds + other.seconds
        merged.cpu_seconds = self.cpu_seconds + other.cpu_seconds
        return merged

    def with_aa(self, other: SideBySide) -> SideBySide:
        """This grid with ``other``'s A/A runs, when ``other`` trained the same base model under
        the same settings (checked: its base runs must have exactly this grid's final losses;
        the runs are deterministic, so a grid's rows and its A/A runs may be trained apart)."""
        if not isinstance(other, SideBySide):
            raise TypeError(f"other must be a SideBySide, got {type(other).__name__}")
        same = (self.base, self.steps, self.seeds, self.long_factor, self.val_tokens) == (
            other.base, other.steps, other.seeds, other.long_factor, other.val_tokens
        )  # fmt: skip
        mine = [r.val_loss for r in self.base_runs]
        theirs = [r.val_loss for r in other.base_runs]
        if not same or mine != theirs:
            raise ValueError(
                "other must have trained the same base model under the same settings, with "
                f"the same final losses (this grid's {mine}, other's {theirs})"
            )
        merged = replace(self, aa_runs=list(other.aa_runs))
        merged.seconds, merged.cpu_seconds = (
            self.seconds + other.seconds,
            (self.cpu_seconds + other.cpu_seconds),
        )
        return merged

    def summary(self) -> dict:
        """What the rule concluded, as data: the rule, its claimed false-alarm rate, the A/A
        count, and every comparison's paired differences, mean, SE and verdict."""
        claimed = self.false_alarm_rate()
        comparisons = [
            {
                "factor": r["factor"],
                "choice": r["choice"],
                "reference": self.reference(r["factor"]),
                "differences": r["differences"],
                "more_differences": r["more_differences"],
                "mean_difference": r["mean_difference"],
                "se": r["se"],
                "verdict": r["verdict"],
                "verdict_seeds": r["verdict_seeds"],
            }
            for r in self.table()
            if r["differences"] is not None
        ]
        return {
            "rule": rule_summary(self),
            "claimed_rate": claimed,
            "aa": aa_record(self.aa_rate()),
            "aa_sd": self.aa_sd(),
            "shaped_rate": self.shaped_rate(),
            "detectable": self.detectable(),
            "chance_alarms": chance(len(comparisons), claimed),
            "comparisons": comparisons,
        }

    def to_dict(self) -> dict:
        """Everything the grid measured, as JSON-ready values (see :meth:`from_dict`)."""
        base = {k: v for k, v in asdict(self.base).items() if k != "dtype"}
        base["dtype"] = str(self.base.dtype).replace("torch.", "")
        return {
            "base": base,
            "steps": self.steps,
            "seeds": list(self.seeds),
            "long_factor": self.long_factor,
            "level": self.level,
            "baselines": dict(self.baselines),
            "rows": [
                {"factor": f, "choice": c, "runs": [asdict(r) for r in runs]}
                for (f, c), runs in self.runs.items()
            ],
            "base_runs": [asdict(r) for r in self.base_runs],
            "aa_runs": [[asdict(r) for r in aa] for aa in self.aa_runs],
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "val_tokens": self.val_tokens,
            "followup": None if self.followup is None else self._followup_dict(),
        }

    def _followup_dict(self) -> dict:
        # the follow-up shares every setting with this grid but its seeds and runs
        f = self.followup.to_dict()
        return {k: f[k] for k in ("seeds", "rows", "base_runs", "seconds", "cpu_seconds")}

    @classmethod
    def from_dict(cls, data: dict) -> SideBySide:
        """The grid :meth:`to_dict` wrote (runs shared by several rows are shared again)."""
        import torch

        base = dict(data["base"])
        base["dtype"] = getattr(torch, base["dtype"])
        grid = cls(
            base=PretrainConfig(**base),
            steps=data["steps"],
            seeds=tuple(data["seeds"]),
            long_factor=data["long_factor"],
            baselines=dict(data["baselines"]),
            seconds=data["seconds"],
            cpu_seconds=data["cpu_seconds"],
            level=data["level"],
            val_tokens=data.get("val_tokens", 0),
        )
        if data.get("followup") is not None:
            f = data["followup"]
            grid.followup = cls.from_dict(
                {
                    **data,
                    **f,
                    "aa_runs": [],
                    "followup": None,
                    "base": {**data["base"], "seed": f["seeds"][0]},
                }
            )
        seen: dict[str, list[GridRun]] = {}
        for row in data["rows"]:
            runs = [GridRun(**r) for r in row["runs"]]
            key = repr([asdict(r) for r in runs])
            grid.runs[(row["factor"], row["choice"])] = seen.setdefault(key, runs)
        base_runs = [GridRun(**r) for r in data["base_runs"]]
        grid.base_runs = seen.get(repr([asdict(r) for r in base_runs]), base_runs)
        grid.aa_runs = [[GridRun(**r) for r in aa] for aa in data["aa_runs"]]
        return grid
