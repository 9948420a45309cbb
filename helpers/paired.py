"""Lessons 5, 8 and 9 (C5.6, C5.7, C8.5, C9.3): when does one training choice beat another? A
decision rule over seeds, with its false-alarm rate, its power and its multiplicity stated.

Two choices A (the base) and B are trained under the same seeds s = 1..n; seed s gives both the
same batches in the same order (and, where their shapes agree, the same initial draws), so the
noise they share cancels in the *paired* difference

    d_s = L_B(s) - L_A(s)                      (final held-out loss, nats; one per seed)
    mean  = (1/n) sum_s d_s,   SE = sd(d) / sqrt(n),   sd with n - 1 in the denominator

**The rule** (:func:`decide`): a paired t-test on the *mean* difference. B differs from A when
``|mean| > c * SE`` with ``c`` the two-sided ``level`` quantile of Student's t with n - 1 degrees
of freedom (:func:`t_quantile`; ``level`` 0.05 by default, c = 2.78 at 5 seeds, 2.36 at 8);
otherwise "cannot tell apart at this size". It needs n >= 3. It tests whether the mean
difference is zero, not whether the seeds agree in sign: one seed of the other sign does not
block a verdict. (The rule it replaced, "all n differences of one sign and the mean beyond 2 SE",
tested the sign.) Like any test at a handful of seeds it leans on the differences being roughly
Gaussian: under a strongly skewed null with mean zero (a centred exponential) it fires about 12%
at level 5% with 5 seeds, as the sign rule did (11%), so its rate is also measured under a null
shaped like the data (:func:`null_rate` with a ``sample``).

**Its false-alarm rate.** If B is no different from A and the d_s are independent Gaussian draws
centred on 0, the rule fires at exactly ``level`` whatever n and the noise's size.
:func:`null_rate` measures it by simulation, under Gaussian noise or under a null shaped like the
data (``sample``: e.g. A/A differences, centred, resampled). It is also measured on real A/A
comparisons: the base model against itself, trained with *the same batch order* and *another
initial draw* (what differs between A and B under one seed when B changes the architecture).
Each A/A comparison must use its own runs (:func:`disjoint_pairs`): ten comparisons against the
same five base runs share those runs' luck, and their alarms are not independent.

**Its power** (:func:`detectable_difference`): the smallest true mean difference it detects 80%
of the time at n seeds, given the seeds' spread (the sd of null paired differences). A row it
cannot decide is not shown to be equal; it only had no more resolution than that.

**A sequential plan** (:func:`two_look_rate`, :data:`TWO_LOOK_LEVEL`): decide at n1 seeds; a row
undecided there gets more seeds and is decided once more at n2, each look at a level chosen so
that the two looks together fire :data:`LEVEL` of the time (declared before the extra seeds ran).

**Multiplicity** (:func:`chance_alarms`): m comparisons at rate r give m r alarms on average and
at least one with probability 1 - (1 - r)^m, even if no choice matters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .student_t import two_sided_quantile

__all__ = [
    "MIN_SEEDS",
    "LEVEL",
    "TWO_LOOK_LEVEL",
    "POWER",
    "Verdict",
    "AARate",
    "paired_differences",
    "t_quantile",
    "null_rate",
    "two_look_rate",
    "decide",
    "detectable_difference",
    "power_at",
    "chance_alarms",
    "disjoint_pairs",
    "mean_and_se",
    "aa_rate",
    "rule_text",
]

#: The fewest seeds the rule accepts: with 2, a standard error is one difference's half-range.
MIN_SEEDS = 3
#: The rule's two-sided level: its false-alarm rate under Gaussian null differences.
LEVEL = 0.05
#: Each look's level in the two-look plan (decide at 5 seeds; undecided rows again at 8): the two
#: looks together fire 4.9% of the time under Gaussian null differences (:func:`two_look_rate`).
TWO_LOOK_LEVEL = 0.029
#: The power at which :func:`detectable_difference` states the smallest detectable difference.
POWER = 0.8
CANNOT_TELL = "cannot tell apart at this size"


def _floats(name: str, values) -> list[float]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(
            f"{name} must be a list of numbers (one per seed), got {type(values).__name__}"
        )
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
            raise TypeError(f"{name} must hold numbers (one per seed), got {v!r}")
        if not math.isfinite(float(v)):
            raise ValueError(f"{name} must hold finite numbers, got {v!r}")
        out.append(float(v))
    return out


def _level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise ValueError(
            f"level (the two-sided false-alarm rate) must be a number between 0 and 1, got "
            f"{level!r}"
        )
    return float(level)


def _n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < MIN_SEEDS:
        raise ValueError(f"n (seeds) must be a whole number >= {MIN_SEEDS}, got {n!r}")
    return n


def paired_differences(base: Sequence[float], other: Sequence[float]) -> list[float]:
    """Lessons 5, 8 and 9. ``other[s] - base[s]`` for each seed s: the paired differences (both
    lists in the same seed order, one final loss per seed)."""
    a, b = _floats("base", base), _floats("other", other)
    if len(a) != len(b):
        raise ValueError(
            f"base and other must have one value per seed, in the same seed order: got "
            f"{len(a)} and {len(b)} values"
        )
    return [y - x for x, y in zip(a, b, strict=True)]


def t_quantile(n: int, level: float = LEVEL) -> float:
    """Lessons 5, 8 and 9. The rule's threshold in standard errors at ``n`` seeds: the c with
    P(|T| > c) = ``level`` for Student's t with n - 1 degrees of freedom (2.776 at 5 seeds and
    level 0.05, 2.365 at 8)."""
    return two_sided_quantile(_n(n) - 1, _level(level))


# -- the rule's rates, by simulation ----------------------------------------------------------
def _fires(x: np.ndarray, c: float) -> np.ndarray:
    n = x.shape[1]
    se = x.std(axis=1, ddof=1) / math.sqrt(n)
    return np.abs(x.mean(axis=1)) > c * se


def _null_draws(g, shape, sample):
    if sample is None:
        return g.standard_normal(shape)
    return g.choice(sample, size=shape, replace=True)


def _centred(sample) -> np.ndarray | None:
    if sample is None:
        return None
    s = np.asarray(_floats("sample", sample))
    if len(s) < 2 or not s.std() > 0:
        raise ValueError("sample must hold at least two different numbers (null differences)")
    return s - s.mean()


def null_rate(n: int, level: float = LEVEL, sample=None, draws: int = 400_000) -> float:
    """Lessons 5, 8 and 9. The rule's false-alarm rate at ``n`` seeds, by simulation (a fixed
    generator: the same number on every call and machine): the share of ``draws`` comparisons
    of n null differences on which :func:`decide` fires. The null is Gaussian (the rate is then
    ``level`` up to the simulation's error, about 0.0003 at 0.05), or, with ``sample``, a null
    shaped like the data: the sample (e.g. A/A paired differences) centred on zero and resampled
    with replacement, skew and all."""
    n, level = _n(n), _level(level)
    centred = _centred(sample)
    return _null_rate(n, level, None if centred is None else tuple(centred), draws)


@lru_cache(maxsize=64)
def _null_rate(n: int, level: float, sample: tuple | None, draws: int) -> float:
    g = np.random.default_rng(20240)
    c = two_sided_quantile(n - 1, level)
    hits, done = 0, 0
    while done < draws:
        m = min(100_000, draws - done)
        hits += int(_fires(_null_draws(g, (m, n), None if sample is None else np.array(sample)),
                           c).sum())  # fmt: skip
        done += m
    return hits / done


def two_look_rate(n1: int, n2: int, level: float = TWO_LOOK_LEVEL, draws: int = 400_000) -> float:
    """Lesson 9 (C9.3). The false-alarm rate of the two-look plan under Gaussian null
    differences, by simulation: :func:`decide` at ``level`` on the first ``n1`` seeds, and, if it
    did not fire, on all ``n2`` (the first n1 and n2 - n1 more). With :data:`TWO_LOOK_LEVEL` and
    5 then 8 seeds it is 0.049."""
    n1, n2, level = _n(n1), _n(n2), _level(level)
    if n2 <= n1:
        raise ValueError(f"n2 (seeds at the second look) must exceed n1 = {n1}, got {n2}")
    return _two_look_rate(n1, n2, level, draws)


@lru_cache(maxsize=16)
def _two_look_rate(n1: int, n2: int, level: float, draws: int) -> float:
    g = np.random.default_rng(20241)
    c1, c2 = two_sided_quantile(n1 - 1, level), two_sided_quantile(n2 - 1, level)
    hits, done = 0, 0
    while done < draws:
        m = min(100_000, draws - done)
        x = g.standard_normal((m, n2))
        hits += int((_fires(x[:, :n1], c1) | _fires(x, c2)).sum())
        done += m
    return hits / done


def _phi(z: np.ndarray) -> np.ndarray:
    # the standard normal CDF, element by element (torch's ndtr: numpy has no erf)
    import torch

    return torch.special.ndtr(torch.from_numpy(np.ascontiguousarray(z, dtype=np.float64))).numpy()


def _power(n: int, level: float, effect: float) -> float:
    # P(|T'| > c), T' noncentral t with n - 1 df and noncentrality effect * sqrt(n), effect in
    # sd units: the integral over the chi-square of the sd estimate, by the trapezoid rule
    df = n - 1
    c = two_sided_quantile(df, level)
    lam = effect * math.sqrt(n)
    hi = df + 12.0 * math.sqrt(2.0 * df) + 20.0
    v = np.linspace(1e-9, hi, 1201)
    logpdf = (df / 2 - 1) * np.log(v) - v / 2 - (df / 2) * math.log(2) - math.lgamma(df / 2)
    pdf = np.exp(logpdf)
    s = np.sqrt(v / df)
    p = 1.0 - _phi(c * s - lam) + _phi(-c * s - lam)
    w = pdf * p
    return float(np.sum((w[1:] + w[:-1]) * np.diff(v)) / 2)


@lru_cache(maxsize=64)
def _detectable(n: int, level: float, power: float) -> float:
    lo, hi = 0.0, 1.0
    while _power(n, level, hi) < power:
        hi *= 2.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if _power(n, level, mid) < power:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def detectable_difference(
    n: int, sd: float = 1.0, level: float = LEVEL, power: float = POWER
) -> float:
    """Lessons 5, 8 and 9. The smallest true mean difference the rule detects with probability
    ``power`` (0.8) at ``n`` seeds and ``level``, when the paired differences scatter with
    standard deviation ``sd`` (Gaussian; in sd units with the default sd = 1: 1.68 at 5 seeds and
    level 0.05, 1.16 at 8). Smaller true differences are mostly reported "cannot tell apart"."""
    n, level = _n(n), _level(level)
    if isinstance(sd, bool) or not isinstance(sd, int | float) or not sd > 0:
        raise ValueError(f"sd (of the paired differences) must be a positive number, got {sd!r}")
    if isinstance(power, bool) or not isinstance(power, int | float) or not level < power < 1:
        raise ValueError(f"power must be a number between level ({level}) and 1, got {power!r}")
    return float(sd) * _detectable(n, level, float(power))


def power_at(n: int, difference: float, sd: float, level: float = LEVEL) -> float:
    """Lessons 5, 8 and 9. The probability that the rule at ``n`` seeds and ``level`` calls a true
    mean difference ``difference`` (nats) different from zero, when the paired differences scatter
    with standard deviation ``sd`` (Gaussian): the inverse of :func:`detectable_difference`."""
    n, level = _n(n), _level(level)
    for name, v in (("difference", difference), ("sd", sd)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if not sd > 0:
        raise ValueError(f"sd (of the paired differences) must be a positive number, got {sd!r}")
    return _power(n, level, abs(float(difference)) / float(sd))


def chance_alarms(m: int, rate: float) -> tuple[float, float]:
    """Lessons 5, 8 and 9. ``m`` comparisons, each firing at ``rate`` when nothing differs: the
    expected number of chance alarms ``m * rate`` and the probability of at least one,
    ``1 - (1 - rate) ** m`` (as if independent)."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m (comparisons) must be a whole number >= 1, got {m!r}")
    rate = _level(rate)
    return m * rate, 1.0 - (1.0 - rate) ** m


@dataclass(frozen=True)
class Verdict:
    """Lessons 5, 8 and 9. What :func:`decide` concluded from the paired differences: ``sign`` is
    -1 (the other choice's loss is lower), +1 (higher) or 0 (cannot tell apart); ``threshold``
    the t quantile the mean had to pass, in standard errors; ``rate`` the rule's false-alarm rate
    under Gaussian null differences (its ``level``)."""

    differences: tuple[float, ...]
    mean: float
    se: float
    threshold: float
    level: float
    sign: int

    @property
    def rate(self) -> float:
        return self.level

    @property
    def decided(self) -> bool:
        return self.sign != 0

    @property
    def text(self) -> str:
        if self.sign < 0:
            return "lower"
        if self.sign > 0:
            return "higher"
        return CANNOT_TELL

    @property
    def z(self) -> float:
        """The mean in standard errors, the t statistic (inf when every difference is the same
        nonzero number)."""
        if self.se == 0:
            return math.copysign(math.inf, self.mean) if self.mean else 0.0
        return self.mean / self.se


def decide(differences: Sequence[float], level: float = LEVEL) -> Verdict:
    """Lessons 5, 8 and 9 (C5.6, C5.7, C9.3). The rule, a paired t-test on the mean: the
    differences (one per seed, at least :data:`MIN_SEEDS`) have ``|mean| > t_quantile(n, level)
    * SE`` (SE = sd / sqrt(n), sd with n - 1). Returns a :class:`Verdict`: sign -1 "lower", +1
    "higher", 0 "cannot tell apart at this size"."""
    d = _floats("differences", differences)
    level = _level(level)
    n = len(d)
    if n < MIN_SEEDS:
        raise ValueError(
            f"differences must hold at least {MIN_SEEDS} values (one per seed): with {n} the "
            "rule has no standard error to speak of; train more seeds"
        )
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    c = two_sided_quantile(n - 1, level)
    beyond = abs(mean) > c * se and mean != 0
    sign = (1 if mean > 0 else -1) if beyond else 0
    return Verdict(tuple(d), mean, se, c, level, sign)


@dataclass(frozen=True)
class AARate:
    """Lessons 5, 8 and 9. The rule on A/A comparisons: ``alarms`` of ``comparisons`` fired;
    ``rate`` their share, ``interval`` its 95% Wilson interval, ``claimed`` the rule's level."""

    alarms: int
    comparisons: int
    rate: float
    interval: tuple[float, float]
    claimed: float


def _wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def disjoint_pairs(run_sets: Sequence[Sequence[float]]) -> list[list[float]]:
    """Lessons 5, 8 and 9. Independent A/A comparisons from repeats of one model: ``run_sets[j]``
    the j-th repeat's final losses (one per seed, e.g. the base's runs first, then each A/A
    repeat's); pairs them (0, 1), (2, 3), ... so that no run enters two comparisons, and returns
    each pair's paired differences (an odd repeat left over is not used)."""
    if isinstance(run_sets, str) or not isinstance(run_sets, Sequence):
        raise TypeError(
            "run_sets must be a list of repeats, each a list of final losses (one per seed), "
            f"got {type(run_sets).__name__}"
        )
    if len(run_sets) < 2:
        raise ValueError(f"run_sets must hold at least two repeats, got {len(run_sets)}")
    return [
        paired_differences(run_sets[j], run_sets[j + 1]) for j in range(0, len(run_sets) - 1, 2)
    ]


def aa_rate(aa_differences: Sequence[Sequence[float]], level: float = LEVEL) -> AARate:
    """Lessons 5, 8 and 9. Apply :func:`decide` to each A/A comparison (a list of paired
    differences, one per seed; the comparisons should share no runs: :func:`disjoint_pairs`) and
    count the alarms: the rule's false-alarm rate as measured, beside its level."""
    if isinstance(aa_differences, str) or not isinstance(aa_differences, Sequence):
        raise TypeError(
            "aa_differences must be a list of A/A comparisons, each a list of paired "
            f"differences (one per seed), got {type(aa_differences).__name__}"
        )
    if not aa_differences:
        raise ValueError("aa_differences must hold at least one A/A comparison")
    verdicts = [decide(d, level) for d in aa_differences]
    ns = {len(v.differences) for v in verdicts}
    if len(ns) != 1:
        raise ValueError(
            f"every A/A comparison must have the same number of seeds, got {sorted(ns)}"
        )
    alarms = sum(v.decided for v in verdicts)
    m = len(verdicts)
    return AARate(alarms, m, alarms / m, _wilson(alarms, m), verdicts[0].level)


def mean_and_se(differences: Sequence[float]) -> tuple[float, float]:
    """Lessons 5, 8 and 9. The mean of the paired differences and its standard error
    (sd / sqrt(n), sd with n - 1), as :func:`decide` computes them."""
    d = _floats("differences", differences)
    if len(d) < 2:
        raise ValueError(f"differences must hold at least 2 values, got {len(d)}")
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    return mean, sd / math.sqrt(len(d))


def rule_text(n: int, level: float = LEVEL) -> str:
    """Lessons 5, 8 and 9. The rule in one sentence: its threshold and false-alarm rate at ``n``
    seeds, and the smallest difference it detects at 80% power, in seed standard deviations."""
    c = t_quantile(n, level)
    return (
        f"a choice differs from the base when the mean of its {n} paired differences (one per "
        f"seed) is more than {c:.2f} standard errors from zero (a paired t-test on the mean at "
        f"level {level:.1%}: if it makes no difference the rule still fires {level:.1%} of the "
        f"time, Gaussian noise); at 80% power it detects a true difference of "
        f"{detectable_difference(n, 1.0, level):.2f} standard deviations of the paired "
        "differences"
    )
