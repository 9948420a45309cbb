"""Lesson 9 (C9.3): the full grid that ships with the course (helpers/data/side_by_side.json,
written by tools/side_by_side.py): it is the declared design, one factor at a time, its verdicts
are the rule's, and a rerun of the tool at reduced size agrees with it within the seed spread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paired import decide, null_rate
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
    # the tool's defaults: the lesson's model, 250 steps, 5 seeds, every factor, 10 A/A
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
    rate = shipped.aa_rate()
    assert rate.comparisons == 10 and rate.claimed == null_rate(5)
    assert f"{rate.alarms} alarm(s)" in rule_summary(shipped)


@pytest.mark.slow
def test_C9_3_tool_rerun_at_reduced_size_agrees_with_the_shipped_grid(tmp_path, shipped):
    # two seeds, one factor, one A/A comparison, the same model and steps: each value measured
    # again lies within the shipped values' seed spread (helpers.shipped.agrees_within_spread)
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "side_by_side.py"), "--seeds", "0", "1",
         "--factors", "tying", "--aa", "1", "--no-doc", "--data-dir", str(tmp_path)],
        check=True, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    fresh = load_side_by_side(folder=tmp_path)
    for choice in ("tied", "untied"):
        for value in fresh.finals("tying", choice):
            ok, sentence = agrees_within_spread(value, shipped.finals("tying", choice))
            assert ok, (choice, sentence)
    for value in fresh.differences("tying", "untied"):
        ok, sentence = agrees_within_spread(value, shipped.differences("tying", "untied"))
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
