"""Lesson 9 (C9.3): the full grid that ships with the course (helpers/data/side_by_side.json,
written by tools/side_by_side.py): it is the declared design, one factor at a time, its verdicts
are the rule's (a paired t-test on the mean, in two looks declared before the follow-up seeds ran),
its A/A comparisons share no runs, it states what it can see (power) and how many alarms chance
gives (multiplicity), and a rerun of the tool at reduced size, on seeds it does not ship, agrees
with it within the seed spread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paired import (
    TWO_LOOK_LEVEL,
    chance_alarms,
    decide,
    detectable_difference,
    t_quantile,
    two_look_rate,
)
from helpers.pretrain import LESSON_CONFIG
from helpers.shipped import agrees_within_spread
from helpers.side_by_side import (
    AA_INIT_OFFSET,
    BASE_INIT,
    FACTORS,
    load_side_by_side,
    rule_summary,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shipped():
    return load_side_by_side()


def test_C9_3_shipped_grid_is_the_declared_design(shipped):
    # the tool's defaults: the lesson's model, 250 steps, 5 seeds, every factor, 10 A/A repeats
    assert shipped.steps == 250 and shipped.seeds == (0, 1, 2, 3, 4)
    assert shipped.factors() == list(FACTORS) and len(shipped.aa_runs) == 10
    for field in ("d_model", "n_layers", "n_heads", "block_size", "batch_size", "lr"):
        assert getattr(shipped.base, field) == getattr(LESSON_CONFIG, field), field
    assert shipped.val_tokens == 8192
    for (factor, choice), runs in shipped.runs.items():
        assert [r.seed for r in runs] == list(shipped.seeds)
        assert all(r.val_steps == list(range(0, 251, 50)) for r in runs), (factor, choice)


def test_C9_3_shipped_rows_differ_from_the_base_in_their_factor_only(shipped):
    base = shipped.base_runs[0].options
    assert {k: base[k] for k in BASE_INIT} == BASE_INIT
    for (factor, choice), runs in shipped.runs.items():
        reference = shipped.runs[(factor, shipped.reference(factor))][0].options
        for r in runs:
            changed = {k for k in base if r.options[k] != base[k]}
            assert changed == {k for k, v in FACTORS[factor][choice].items() if base[k] != v}
            if factor != "initialization":  # every comparison holds the init of its reference
                assert all(r.options[k] == reference[k] for k in BASE_INIT), (factor, choice)


def test_C9_3_shipped_aa_runs_keep_the_batches_and_change_the_draw(shipped):
    for m, comparison in enumerate(shipped.aa_runs, start=1):
        assert [r.seed for r in comparison] == list(shipped.seeds)
        assert [r.init_seed for r in comparison] == [AA_INIT_OFFSET * m + s for s in shipped.seeds]
        assert all(r.options == shipped.base_runs[0].options for r in comparison)


def test_C9_3_shipped_verdicts_are_the_rule_on_the_shipped_finals(shipped):
    # a check of the code: every verdict is decide() on the per-seed paired differences
    for r in shipped.table():
        if r["differences"] is None:
            continue
        d = [
            x - y
            for x, y in zip(
                r["finals"],
                shipped.finals(r["factor"], shipped.reference(r["factor"])),
                strict=True,
            )
        ]
        assert r["differences"] == pytest.approx(d)
        assert r["verdict"] == decide(d).text
        # the two looks: at 5 seeds; if undecided and followed up, at all 8
        first = decide(d, TWO_LOOK_LEVEL)
        more = shipped.more_differences(r["factor"], r["choice"])
        want = first if first.decided or not more else decide(d + more, TWO_LOOK_LEVEL)
        assert r["verdict"] == want.text and r["verdict_seeds"] == len(want.differences)
    rate = shipped.aa_rate()
    assert rate.comparisons == 5 and rate.claimed == TWO_LOOK_LEVEL
    assert f"{rate.alarms} alarm(s)" in rule_summary(shipped)


def test_C9_3_shipped_followup_covers_exactly_the_rows_the_first_look_left_undecided(shipped):
    # the declared plan: seeds 5, 6, 7 for every row undecided at seeds 0-4, no other row
    follow = shipped.followup
    assert follow is not None and follow.seeds == (5, 6, 7)
    undecided = set()
    for r in shipped.table():
        if r["differences"] is not None:
            if not decide(r["differences"], TWO_LOOK_LEVEL).decided:
                undecided.add((r["factor"], r["choice"]))
    followed = {(f, c) for f, c in follow.runs if c != follow.reference(f)}
    assert followed == undecided
    for runs in follow.runs.values():
        assert [r.seed for r in runs] == [5, 6, 7] and all(r.init_seed == r.seed for r in runs)
    assert follow.base == type(follow.base)(**{**vars(shipped.base), "seed": 5})


def test_C9_3_shipped_aa_comparisons_are_disjoint_pairs_of_repeats(shipped):
    # the base's runs against repeat 1, repeat 2 against 3, ...: no run in two comparisons
    sets = [[r.val_loss for r in shipped.base_runs]]
    sets += [[r.val_loss for r in aa] for aa in shipped.aa_runs]
    want = [[b - a for a, b in zip(sets[j], sets[j + 1], strict=True)] for j in (0, 2, 4, 6, 8)]
    assert shipped.aa_differences() == want  # the same subtractions: exactly equal


def test_C9_3_shipped_grid_states_its_power_and_its_multiplicity(shipped):
    summary = shipped.summary()
    flat = [d for c in shipped.aa_differences() for d in c]
    sd = (sum(d * d for d in flat) / len(flat)) ** 0.5
    seen = summary["detectable"]
    assert seen == pytest.approx(
        {
            "5": detectable_difference(5, sd, TWO_LOOK_LEVEL),
            "8": detectable_difference(8, sd, TWO_LOOK_LEVEL),
        }
    )
    assert 0.04 < seen["5"] < 0.07 and seen["8"] < seen["5"]  # about 0.055 and 0.037 nats
    rate = two_look_rate(5, 8)
    assert summary["claimed_rate"] == rate and 0.045 < rate < 0.052
    assert summary["chance_alarms"] == pytest.approx(list(chance_alarms(9, rate)))
    text = rule_summary(shipped)
    assert f"{seen['5']:.3f} nats at 5 seeds" in text and "9 comparisons" in text
    assert f"{t_quantile(5, TWO_LOOK_LEVEL):.2f} standard errors" in text
    assert 0 < summary["shaped_rate"] < 0.05  # the first look under a null shaped like the A/A


@pytest.mark.slow
def test_C9_3_tool_rerun_at_reduced_size_agrees_with_the_shipped_grid(tmp_path, shipped):
    # two new seeds (none of the shipped 0-7: a shipped seed would reproduce its shipped value
    # exactly, a float64 run being deterministic, and could not fail), one factor, one A/A
    # comparison, the same model and steps: each value measured again lies within the shipped
    # values' seed spread (helpers.shipped.agrees_within_spread)
    assert not {8, 9} & (set(shipped.seeds) | set(shipped.followup.seeds))
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "side_by_side.py"), "--seeds", "8", "9",
         "--factors", "tying", "--aa", "1", "--no-doc", "--data-dir", str(tmp_path)],
        check=True, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    fresh = load_side_by_side(folder=tmp_path)
    assert fresh.seeds == (8, 9)
    for choice in ("tied", "untied"):
        every = shipped.finals("tying", choice) + shipped.followup.finals("tying", choice)
        for value in fresh.finals("tying", choice):
            ok, sentence = agrees_within_spread(value, every)
            assert ok, (choice, sentence)
    every = shipped.differences("tying", "untied") + shipped.more_differences("tying", "untied")
    for value in fresh.differences("tying", "untied"):
        ok, sentence = agrees_within_spread(value, every)
        assert ok, sentence
    all_aa = [d for comparison in shipped.aa_differences() for d in comparison]
    for value in fresh.aa_differences()[0]:
        ok, sentence = agrees_within_spread(value, all_aa)
        assert ok, sentence


def test_C9_3_a_shipped_summary_that_disagrees_with_its_runs_is_refused(tmp_path):
    import json

    from helpers.shipped import DATA

    record = json.loads((DATA / "side_by_side.json").read_text())
    record["results"]["summary"]["comparisons"][0]["verdict"] = "lower than ever"
    (tmp_path / "side_by_side.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="summary .* is not what its own runs give"):
        load_side_by_side(folder=tmp_path)
