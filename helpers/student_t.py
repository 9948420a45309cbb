"""Lessons 5, 8 and 9 (:mod:`helpers.paired`): Student's t distribution, computed here so that the
course needs no scipy. With df degrees of freedom,

    P(|T| > t) = I_x(df / 2, 1 / 2),   x = df / (df + t^2)

where I_x(a, b) is the regularized incomplete beta function (its continued fraction evaluated by
the modified Lentz method, Numerical Recipes section 6.4); :func:`two_sided_quantile` inverts it
by bisection.
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["two_sided_tail", "two_sided_quantile"]


def _betacf(a: float, b: float, x: float) -> float:
    # the continued fraction of the incomplete beta function (modified Lentz)
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def two_sided_tail(t: float, df: int) -> float:
    """P(|T| > t) for Student's t with ``df`` degrees of freedom."""
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


@lru_cache(maxsize=256)
def two_sided_quantile(df: int, level: float) -> float:
    """The c with P(|T| > c) = ``level`` for Student's t with ``df`` degrees of freedom (callers
    check their arguments: :func:`helpers.paired.t_quantile`)."""
    lo, hi = 0.0, 1.0
    while two_sided_tail(hi, df) > level:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if two_sided_tail(mid, df) > level:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
