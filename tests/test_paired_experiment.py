"""The warm-up sweep (lesson 5) and the side-by-side grid (lesson 9) share one paired-experiment
shape (helpers.paired_experiment): the two looks, the false-alarm rate, the A/A rate and the
table cells are computed in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.paired import decide, two_look_rate
from helpers.paired_experiment import (
    PairedExperiment,
    differences_cell,
    mean_se_cell,
    signed,
    verdict_cell,
)
from helpers.side_by_side import SideBySide
from helpers.warmup import WarmupSweep

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class _Experiment(PairedExperiment):
    seeds: list
    level: float = 0.05
    followup: _Experiment | None = None
    aa: tuple = ()

    def aa_differences(self):
        return [list(c) for c in self.aa]


def test_both_experiments_are_paired_experiments():
    assert issubclass(WarmupSweep, PairedExperiment)
    assert issubclass(SideBySide, PairedExperiment)


def test_the_second_look_only_for_an_undecided_first_look_with_more_seeds():
    e = _Experiment(seeds=[0, 1, 2, 3, 4])
    clear = [0.10, 0.11, 0.09, 0.10, 0.12]
    assert e.two_looks(clear, [0.5, 0.5, 0.5]) == decide(clear, 0.05)  # decided at the first
    noisy = [0.10, -0.08, 0.05, 0.02, -0.01]
    assert e.two_looks(noisy, []) == decide(noisy, 0.05)
    more = [0.03, 0.04, 0.02]
    assert e.two_looks(noisy, more) == decide(noisy + more, 0.05)
    assert len(e.two_looks(noisy, more).differences) == 8


def test_false_alarm_rate_is_the_level_or_the_two_looks_together():
    assert _Experiment(seeds=[0, 1]).false_alarm_rate() is None  # too few seeds
    assert _Experiment(seeds=[0, 1, 2, 3, 4], level=0.029).false_alarm_rate() == 0.029
    follow = _Experiment(seeds=[5, 6, 7])
    both = _Experiment(seeds=[0, 1, 2, 3, 4], level=0.029, followup=follow)
    assert both.false_alarm_rate() == two_look_rate(5, 8, 0.029)
    assert both.looks() == [5, 8]
    assert set(both.detectable_at(0.05)) == {"5", "8"}
    assert both.detectable_at(0.05)["8"] < both.detectable_at(0.05)["5"]


def test_aa_rate_needs_aa_runs_and_enough_seeds():
    assert _Experiment(seeds=[0, 1, 2]).aa_rate() is None
    assert _Experiment(seeds=[0, 1], aa=((0.1, -0.1),)).aa_rate() is None
    rate = _Experiment(seeds=[0, 1, 2], aa=((0.1, 0.11, 0.12), (0.1, -0.1, 0.0))).aa_rate()
    assert (rate.alarms, rate.comparisons) == (1, 2)


def test_table_cells():
    assert signed(0.0104, 3) == "+0.010" and signed(-0.02, 3) == "-0.020"
    assert differences_cell([0.1, -0.2], [], 2) == "+0.10, -0.20"
    assert differences_cell([0.1], [0.3], 2) == "+0.10; follow-up seeds: +0.30"
    assert mean_se_cell(0.1, None, 2) == "+0.10" and mean_se_cell(-0.1, 0.05, 2) == "-0.10 (0.05)"
    row = {
        "verdict": "lower",
        "differences": [-0.1] * 5,
        "more_differences": [],
        "verdict_seeds": 5,
    }
    assert verdict_cell(row, 3) == "lower"
    row |= {"more_differences": [-0.1] * 3, "verdict_seeds": 8}
    assert verdict_cell(row, 3) == "lower (at 8 seeds: -0.100, SE 0.000)"
    reference = {"verdict": "", "differences": None, "more_differences": [], "verdict_seeds": 0}
    assert verdict_cell(reference, 3) == ""


@pytest.mark.parametrize("name", ["signed", "aa_record"])
def test_each_shared_piece_is_defined_once_in_helpers(name):
    pattern = re.compile(rf"^def _?{name}\(", re.MULTILINE)
    where = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "helpers").rglob("*.py"))
        if pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert where == ["helpers/paired_experiment.py"]
