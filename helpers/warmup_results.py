"""Lesson 5 (C5.7): what the warm-up sweep measured (:class:`WarmupSweep`, the results of
:func:`helpers.warmup.warmup_sweep`), and what its paired rule concludes from them: for each
learning rate and each comparison of :data:`SWEEP_COMPARISONS`, the paired differences of the
final held-out losses seed by seed,

    d_s = L_other(s) - L_reference(s)          (nats; one per seed, the same batches and draws)

decided in two looks (:class:`helpers.paired_experiment.PairedExperiment`), with the A/A runs'
false-alarm rate and the smallest difference each learning rate's spread lets the sweep detect.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _validate as check
from .paired import MIN_SEEDS, TWO_LOOK_LEVEL, Verdict, decide, disjoint_pairs, paired_differences
from .paired_experiment import (
    PairedExperiment,
    aa_record,
    chance,
    differences_cell,
    mean_se_cell,
    rms,
    verdict_cell,
)
from .printing import fmt

__all__ = ["SWEEP_COMPARISONS", "WarmupSweep", "lr_key"]

#: The comparisons the sweep decides at each learning rate: (reference, other); the paired
#: difference is other minus reference, seed by seed.
SWEEP_COMPARISONS = (
    ("post-norm, no warm-up", "post-norm, warm-up"),
    ("post-norm, no warm-up", "pre-norm, no warm-up"),
    ("post-norm, warm-up", "pre-norm, no warm-up"),
)


def lr_key(lr: float) -> str:
    """Lesson 5. A learning rate as the key of the results: ``f"{lr:g}"`` ("0.003")."""
    return f"{lr:g}"


@dataclass
class WarmupSweep(PairedExperiment):
    """Lesson 5 (C5.7). What :func:`warmup_sweep` measured: ``finals[run][lr][i]`` the final
    held-out loss of seed ``seeds[i]``, ``curves`` the training loss of every step (same
    indexing), ``aa[run][lr][m][i]`` the m-th A/A comparison's finals (another initial draw, the
    same batches), the ``unigram`` and ``uniform`` baselines on the held-out text, ``settings``
    (:data:`SWEEP`'s fields) and the time it took; ``level`` each look's level of the rule and
    ``followup`` the sweep of the follow-up seeds (None without one: :meth:`with_followup`)."""

    settings: dict
    finals: dict[str, dict[str, list[float]]]
    curves: dict[str, dict[str, list[list[float]]]]
    aa: dict[str, dict[str, list[list[float]]]]
    unigram: float
    uniform: float
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    level: float = TWO_LOOK_LEVEL
    followup: WarmupSweep | None = None

    @property
    def seeds(self) -> list[int]:
        """The seeds of the first look, in the order of every per-seed list."""
        return list(self.settings["seeds"])

    def final(self, run: str, lr: float) -> list[float]:
        """The final held-out loss of each seed for ``run`` at ``lr``."""
        check.choice("run", run, tuple(self.finals))
        key = lr_key(lr)
        if key not in self.finals[run]:
            raise ValueError(f"lr must be one of the sweep's {self.lrs}, got {lr!r}")
        return self.finals[run][key]

    @property
    def lrs(self) -> list[float]:
        """The learning rates swept, in order (their keys: :func:`lr_key`)."""
        return list(self.settings["lrs"])

    def differences(self, reference: str, other: str, lr: float) -> list[float]:
        """Seed by seed: ``other``'s final loss minus ``reference``'s, at ``lr``."""
        return paired_differences(self.final(reference, lr), self.final(other, lr))

    def more_differences(self, reference: str, other: str, lr: float) -> list[float]:
        """The follow-up seeds' paired differences (empty without a follow-up)."""
        if self.followup is None:
            return []
        return self.followup.differences(reference, other, lr)

    def verdict(self, reference: str, other: str, lr: float) -> Verdict:
        """Lesson 5 (C5.7). The two-look rule: :func:`helpers.paired.decide` at ``level`` on the
        sweep's seeds; if it does not fire and there is a follow-up, on all the seeds."""
        d = self.differences(reference, other, lr)
        return self.two_looks(d, self.more_differences(reference, other, lr))

    def aa_differences(self, lr: float | None = None) -> list[list[float]]:
        """The A/A comparisons in disjoint pairs of repeats, per run and rate (the run's own
        seeds with repeat 1, repeat 2 with repeat 3, ...: :func:`helpers.paired.disjoint_pairs`,
        no run in two comparisons); ``lr``: at that rate only."""
        out = []
        for run, by_lr in self.aa.items():
            for key, comparisons in by_lr.items():
                if comparisons and (lr is None or key == lr_key(lr)):
                    out += disjoint_pairs([self.finals[run][key], *comparisons])
        return out

    def aa_sd(self, lr: float) -> float | None:
        """The spread of null paired differences at ``lr``: the root mean square of the disjoint
        A/A comparisons' differences at that rate (None without A/A runs)."""
        return rms([d for c in self.aa_differences(lr) for d in c])

    def detectable(self) -> dict[str, dict[str, float]] | None:
        """Per learning rate ("0.003"), the smallest true mean difference (nats) each look
        detects with 80% power given that rate's A/A spread: ``{"5": ..., "8": ...}`` keyed by
        the look's seeds. None without A/A runs or with too few seeds."""
        if not self.aa_differences() or len(self.seeds) < MIN_SEEDS:
            return None
        sds = {lr_key(lr): self.aa_sd(lr) for lr in self.lrs}
        return {key: self.detectable_at(sd) for key, sd in sds.items() if sd}

    def shaped_rate(self) -> float | None:
        """The first look's false-alarm rate under a null shaped like the data: every disjoint
        A/A difference divided by its rate's A/A spread (:meth:`aa_sd`: the rule is scale-free,
        and pooling rates of different spreads would fatten the tails), centred on zero and
        resampled (:func:`helpers.paired.null_rate` with a ``sample``), skew included. None
        without A/A runs or with too few seeds."""
        flat = [d / self.aa_sd(lr) for lr in self.lrs for c in self.aa_differences(lr) for d in c]
        return self.shaped_rate_of(flat)

    def with_followup(self, other: WarmupSweep) -> WarmupSweep:
        """Lesson 5 (C5.7). This sweep with ``other`` as its follow-up: the same runs, rates and
        settings under new seeds, used by the second look of :meth:`verdict`."""
        if not isinstance(other, WarmupSweep):
            raise TypeError(f"other must be a WarmupSweep, got {type(other).__name__}")
        keys = ("lrs", "steps", "warmup_steps", "d_model", "n_layers", "n_heads")
        keys += ("batch_size", "block_size")
        same = all(self.settings[k] == other.settings[k] for k in keys)
        if not same or set(other.seeds) & set(self.seeds) or set(other.finals) != set(self.finals):
            raise ValueError(
                "other must run the same runs and settings as this sweep under seeds this sweep "
                f"does not use (this sweep's {self.seeds}, other's {other.seeds})"
            )
        follow = WarmupSweep(
            settings={**other.settings, "aa": 0},
            finals=other.finals,
            curves=other.curves,
            aa={run: {key: [] for key in by_lr} for run, by_lr in other.finals.items()},
            unigram=other.unigram,
            uniform=other.uniform,
            seconds=other.seconds,
            cpu_seconds=other.cpu_seconds,
            level=self.level,
        )
        return WarmupSweep(
            settings=self.settings,
            finals=self.finals,
            curves=self.curves,
            aa=self.aa,
            unigram=self.unigram,
            uniform=self.uniform,
            seconds=self.seconds + other.seconds,
            cpu_seconds=self.cpu_seconds + other.cpu_seconds,
            level=self.level,
            followup=follow,
        )

    def every_seed(self, reference: str, other: str, lr: float) -> str:
        """ "lower" or "higher" when ``other`` is below or above ``reference`` for every seed,
        else "mixed": what an assertion may claim (it holds for every seed or it is not said)."""
        d = self.differences(reference, other, lr)
        return "lower" if all(x < 0 for x in d) else "higher" if all(x > 0 for x in d) else "mixed"

    def table(self) -> list[dict]:
        """One row per (comparison, learning rate): the two runs' finals per seed, the paired
        differences, their mean and SE at the first look, the follow-up seeds' differences
        (``more_differences``, empty without), the rule's verdict ("too few seeds (n)" under
        :data:`~helpers.paired.MIN_SEEDS`), the seeds it rests on (``verdict_seeds``) and what
        holds for every seed of the first look."""
        rows = []
        for lr in self.lrs:
            for ref, other in SWEEP_COMPARISONS:
                d = self.differences(ref, other, lr)
                v = self.verdict(ref, other, lr) if len(d) >= MIN_SEEDS else None
                first = decide(d, self.level) if v is not None else None
                rows.append(
                    {
                        "lr": lr,
                        "reference": ref,
                        "other": other,
                        "reference_finals": self.final(ref, lr),
                        "other_finals": self.final(other, lr),
                        "differences": d,
                        "more_differences": list(v.differences[len(d) :]) if v else [],
                        "mean_difference": sum(d) / len(d),
                        "se": first.se if first else None,
                        "verdict": v.text if v else f"too few seeds ({len(d)})",
                        "verdict_seeds": len(v.differences) if v else len(d),
                        "every_seed": self.every_seed(ref, other, lr),
                    }
                )
        return rows

    def finals_markdown(self, decimals: int = 3) -> str:
        """Every run's final held-out loss per seed at every learning rate (the follow-up seeds'
        after a semicolon; the mean is the first five's), in Markdown."""
        head = "| learning rate | run | final held-out loss per seed | mean |\n|---|---|---|---:|"
        body = []
        for lr in self.lrs:
            for run in self.finals:
                f = self.final(run, lr)
                cell = ", ".join(fmt(x, decimals=decimals) for x in f)
                if self.followup is not None:
                    more = self.followup.final(run, lr)
                    cell += "; follow-up seeds: " + ", ".join(
                        fmt(x, decimals=decimals) for x in more
                    )
                body.append(
                    f"| {lr:g} | {run} | {cell} | {fmt(sum(f) / len(f), decimals=decimals)} |"
                )
        return "\n".join([head, *body])

    def markdown(self, decimals: int = 3) -> str:
        """The comparisons in Markdown: paired differences per seed, mean (SE), verdict."""
        head = (
            "| learning rate | other minus reference | paired difference per seed "
            "| mean (SE) | verdict | every seed |\n|---|---|---|---:|---|---|"
        )
        body = []
        for r in self.table():
            diffs = differences_cell(r["differences"], r["more_differences"], decimals)
            mean = mean_se_cell(r["mean_difference"], r["se"], decimals)
            body.append(
                f"| {r['lr']:g} | {r['other']} minus {r['reference']} | {diffs} "
                f"| {mean} | {verdict_cell(r, decimals)} | {r['every_seed']} |"
            )
        return "\n".join([head, *body])

    def summary(self) -> dict:
        """The rule's conclusions as data: its claimed false-alarm rate, the A/A count and every
        comparison (:meth:`table`)."""
        rate = self.aa_rate() if len(self.seeds) >= MIN_SEEDS else None
        claimed = self.false_alarm_rate()
        table = self.table()
        return {
            "claimed_rate": claimed,
            "shaped_rate": self.shaped_rate(),
            "detectable": self.detectable(),
            "chance_alarms": chance(len(table), claimed),
            "aa": aa_record(rate),
            "comparisons": table,
        }

    def to_dict(self) -> dict:
        return {
            "settings": {**self.settings, "seeds": list(self.seeds), "lrs": list(self.lrs)},
            "finals": self.finals,
            "curves": self.curves,
            "aa": self.aa,
            "unigram": self.unigram,
            "uniform": self.uniform,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "level": self.level,
            "followup": None if self.followup is None else self._followup_dict(),
        }

    def _followup_dict(self) -> dict:
        f = self.followup
        return {"seeds": f.seeds, "finals": f.finals, "curves": f.curves, **_times(f)}

    @classmethod
    def from_dict(cls, data: dict) -> WarmupSweep:
        """The sweep :meth:`to_dict` wrote (its follow-up, if any, rebuilt with its settings)."""
        data = dict(data)
        f = data.pop("followup", None)
        sweep = cls(**data)
        if f is not None:
            sweep.followup = cls(
                settings={**sweep.settings, "seeds": list(f["seeds"]), "aa": 0},
                finals=f["finals"],
                curves=f["curves"],
                aa={run: {key: [] for key in by_lr} for run, by_lr in f["finals"].items()},
                unigram=sweep.unigram,
                uniform=sweep.uniform,
                seconds=f["seconds"],
                cpu_seconds=f["cpu_seconds"],
                level=sweep.level,
            )
        return sweep


def _times(sweep: WarmupSweep) -> dict:
    return {"seconds": sweep.seconds, "cpu_seconds": sweep.cpu_seconds}
