"""Lessons 5 and 9 (C5.7, C9.3): the paired-difference decision rule (helpers.paired) fires at the
rate it claims when there is nothing to find, decides clear cases, and refuses bad input."""

import math

import numpy as np
import pytest

from helpers.paired import (
    CANNOT_TELL,
    MIN_SEEDS,
    aa_rate,
    decide,
    null_rate,
    paired_differences,
    rule_text,
)


@pytest.mark.parametrize("n", [3, 5])
def test_C9_3_rule_false_alarm_rate_on_synthetic_null_data_is_what_it_claims(n):
    # null data drawn with another generator than null_rate's, each comparison at its own scale
    # (the rule is scale-free), centred on 0: the share of alarms must match the claimed rate
    g = np.random.default_rng(7 + n)
    m = 20_000
    scales = np.exp(g.uniform(np.log(1e-3), np.log(1.0), m))
    data = g.standard_normal((m, n)) * scales[:, None]
    alarms = sum(decide(row.tolist()).decided for row in data)
    claimed = null_rate(n)
    se = math.sqrt(claimed * (1 - claimed) / m)
    assert abs(alarms / m - claimed) < 4 * se, (n, alarms / m, claimed)


def test_C9_3_null_rate_for_three_seeds_is_the_exact_t_tail():
    # 1 - k / sqrt(2 + k^2), checked against a simulation of its own
    g = np.random.default_rng(3)
    x = g.standard_normal((1_000_000, 3))
    t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(3))
    same = (x > 0).all(1) | (x < 0).all(1)
    simulated = float((same & (np.abs(t) > 2)).mean())
    assert null_rate(3) == pytest.approx(1 - 2 / math.sqrt(6))
    assert abs(simulated - null_rate(3)) < 4 * math.sqrt(0.18 * 0.82 / 1e6)


def test_C9_3_null_rate_falls_with_more_seeds_and_a_larger_k():
    rates = [null_rate(n) for n in range(3, 9)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False)), rates
    assert null_rate(5, 3.0) < null_rate(5, 2.0)
    assert 0.05 < null_rate(5) < 0.07  # about 0.059: the grid's 5 seeds


def test_C9_3_rule_decides_clear_cases_and_says_when_it_cannot():
    lower = decide([-0.10, -0.12, -0.09])
    assert lower.sign == -1 and lower.text == "lower" and lower.same_sign
    higher = decide([0.07, 0.05, 0.06, 0.08, 0.04])
    assert higher.text == "higher" and higher.z > 2
    mixed = decide([-0.10, -0.12, 0.01])  # one seed disagrees
    assert mixed.text == CANNOT_TELL and not mixed.same_sign
    spread = decide([0.01, 0.20, 0.01])  # one sign, but 1.2 standard errors from zero
    assert spread.text == CANNOT_TELL and spread.same_sign and abs(spread.z) < 2
    assert decide([0.05, 0.05, 0.05]).text == "higher"  # no spread at all: se 0, z infinite
    assert lower.rate == null_rate(3)


def test_C9_3_rule_finds_a_real_effect_of_three_noise_sds_at_five_seeds_most_of_the_time():
    g = np.random.default_rng(11)
    data = 3.0 + g.standard_normal((4000, 5))
    power = sum(decide(row.tolist()).sign == 1 for row in data) / 4000
    assert power > 0.8, power


def test_C9_3_paired_differences_are_other_minus_base_seed_by_seed():
    assert paired_differences([2.0, 2.5, 3.0], [1.5, 2.75, 3.0]) == [-0.5, 0.25, 0.0]


def test_C9_3_aa_rate_counts_alarms_and_gives_an_interval():
    aa = [[0.01, 0.02, 0.015], [0.01, -0.02, 0.0], [-0.01, 0.02, 0.03], [-0.03, -0.02, -0.025]]
    r = aa_rate(aa)
    assert (r.alarms, r.comparisons) == (2, 4) and r.rate == 0.5
    assert r.interval[0] < 0.5 < r.interval[1] and r.claimed == null_rate(3)


def test_C9_3_rule_text_states_the_rule_and_its_rate():
    text = rule_text(5)
    assert "5 paired differences" in text and "2 standard errors" in text
    assert f"{null_rate(5):.1%}" in text


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: decide([0.1, 0.2]), ValueError, "differences must hold at least 3"),
        (lambda: decide("abc"), TypeError, "differences must be a list of numbers"),
        (lambda: decide([0.1, None, 0.2]), TypeError, "differences must hold numbers"),
        (lambda: decide([0.1, float("nan"), 0.2]), ValueError, "finite"),
        (lambda: decide([0.1, 0.2, 0.3], k=0), ValueError, "k \\(standard errors\\)"),
        (lambda: null_rate(2), ValueError, f"n \\(seeds\\) must be a whole number >= {MIN_SEEDS}"),
        (lambda: paired_differences([1.0], [1.0, 2.0]), ValueError, "one value per seed"),
        (lambda: aa_rate([]), ValueError, "at least one A/A comparison"),
        (lambda: aa_rate([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4]]), ValueError, "same number"),
    ],
)
def test_paired_bad_arguments_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
