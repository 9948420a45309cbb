"""Lesson 5 (C5.7): the warm-up experiment declared before it ran (helpers.warmup.SWEEP,
warmup_sweep): its runs share batches and initial draws seed by seed, its A/A runs change only the
initial draw, its verdicts are the paired rule's (a t-test on the mean, in two looks: seeds 0-4,
then 0-7 for an undecided comparison), its A/A comparisons share no runs, it states its power, a
rerun on seeds it does not ship agrees within the seed spread, and bad arguments are refused."""

import json
import math

import pytest

from helpers.paired import TWO_LOOK_LEVEL, decide, detectable_difference, two_look_rate
from helpers.warmup import (
    LIVE_SWEEP,
    SWEEP,
    SWEEP_COMPARISONS,
    WARMUP_RUNS,
    WarmupSweep,
    compare_warmup,
    warmup_sweep,
)

SMALL = dict(seeds=(0, 1, 2), lrs=(3e-2, 3e-3), steps=6, warmup_steps=3, aa=1, n_layers=2)


@pytest.fixture(scope="module")
def sweep():
    return warmup_sweep(**SMALL)


def test_C5_7_sweep_is_declared_before_it_runs():
    # the declaration: at least 3 seeds, three learning rates, the three runs, A/A comparisons
    assert len(SWEEP["seeds"]) >= 3 and SWEEP["lrs"] == (3e-3, 1e-2, 3e-2)
    assert SWEEP["aa"] >= 1 and SWEEP["warmup_steps"] < SWEEP["steps"]
    assert {r for pair in SWEEP_COMPARISONS for r in pair} == set(WARMUP_RUNS)


def test_C5_7_sweep_runs_every_rate_seed_and_run(sweep):
    assert set(sweep.finals) == set(WARMUP_RUNS)
    for run in WARMUP_RUNS:
        for lr in SMALL["lrs"]:
            assert len(sweep.final(run, lr)) == 3
            assert all(len(c) == SMALL["steps"] for c in sweep.curves[run][f"{lr:g}"])
    assert sweep.unigram < sweep.uniform == pytest.approx(math.log(58))


def test_C5_7_runs_of_one_seed_share_batches_and_draws_and_aa_changes_the_draw():
    kw = dict(steps=2, warmup_steps=1, lr=3e-3, n_layers=2)
    a = compare_warmup(seed=0, **kw)
    b = compare_warmup(seed=0, init_seed=1000, **kw)
    # warm-up's first step is lr / warmup_steps, so post-norm with and without warm-up start
    # from the same weights on the same batch: the same first loss
    first = [r.train_losses[0] for r in a.values()]
    assert first[0] == first[1]
    assert a["pre-norm, no warm-up"].initial_val_loss != b["pre-norm, no warm-up"].initial_val_loss


def test_C5_7_verdicts_are_the_paired_rule_on_every_comparison(sweep):
    rows = sweep.table()
    assert len(rows) == len(SMALL["lrs"]) * len(SWEEP_COMPARISONS)
    for r in rows:
        d = [o - f for f, o in zip(r["reference_finals"], r["other_finals"], strict=True)]
        assert r["differences"] == pytest.approx(d)
        assert r["verdict"] == decide(d, TWO_LOOK_LEVEL).text
        signs = {x < 0 for x in d}
        assert r["every_seed"] == (
            "mixed" if len(signs) == 2 else "lower" if True in signs else "higher"
        )


def test_C5_7_aa_comparisons_count_every_run_and_rate(sweep):
    rate = sweep.aa_rate()
    assert rate.comparisons == len(WARMUP_RUNS) * len(SMALL["lrs"]) * SMALL["aa"]


def test_C5_7_sweep_round_trips_through_its_data(sweep):
    back = WarmupSweep.from_dict(json.loads(json.dumps(sweep.to_dict())))
    assert back.table() == sweep.table() and back.aa_differences() == sweep.aa_differences()
    assert "| 0.03 | post-norm, warm-up minus post-norm, no warm-up |" in back.markdown()


def test_C5_7_live_run_is_two_runs_of_the_sweep():
    assert set(LIVE_SWEEP["runs"]) <= set(WARMUP_RUNS) and LIVE_SWEEP["lr"] in SWEEP["lrs"]
    assert LIVE_SWEEP["seed"] in SWEEP["seeds"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(seeds=3), TypeError, "seeds"),
        (dict(seeds=(1, 1)), ValueError, "distinct"),
        (dict(seeds=(0, 1000)), ValueError, "below 1000"),
        (dict(lrs=0.01), TypeError, "lrs"),
        (dict(lrs=(0.01, 0.01)), ValueError, "distinct"),
        (dict(lrs=(-1.0,)), ValueError, "lr"),
        (dict(aa=-1), ValueError, "aa"),
        (dict(depth=3), TypeError, "unknown settings"),
        (dict(runs=["pre-norm, warm-up"]), ValueError, "run"),
    ],
)
def test_C5_7_bad_sweep_arguments_raise_naming_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        warmup_sweep(**{**SMALL, "steps": 1, "warmup_steps": 0, **kwargs})


# ---- the sweep that ships with the course (helpers/data/warmup_sweep.json) ---------------------


@pytest.fixture(scope="module")
def shipped():
    from helpers.warmup import load_warmup_sweep

    return load_warmup_sweep()


def test_C5_7_shipped_sweep_is_the_declared_one(shipped):
    for key in ("steps", "warmup_steps", "aa", "d_model", "n_layers", "n_heads", "batch_size"):
        assert shipped.settings[key] == SWEEP[key], key
    assert shipped.seeds == list(SWEEP["seeds"]) and shipped.lrs == list(SWEEP["lrs"])
    for run in WARMUP_RUNS:
        for lr in SWEEP["lrs"]:
            assert len(shipped.final(run, lr)) == len(SWEEP["seeds"])
            assert len(shipped.aa[run][f"{lr:g}"]) == SWEEP["aa"]


def test_C5_7_shipped_verdicts_are_the_rule_on_the_shipped_finals(shipped):
    assert shipped.followup is not None and shipped.followup.seeds == [5, 6, 7]
    for r in shipped.table():  # a check of the code: look 1 at 5 seeds, look 2 at 8 if undecided
        first = decide(r["differences"], TWO_LOOK_LEVEL)
        more = shipped.followup.differences(r["reference"], r["other"], r["lr"])
        want = first if first.decided else decide(r["differences"] + more, TWO_LOOK_LEVEL)
        assert r["verdict"] == want.text and r["verdict_seeds"] == len(want.differences)
        assert r["more_differences"] == ([] if first.decided else more)


def test_C5_7_shipped_aa_comparisons_are_disjoint_and_set_the_stated_power(shipped):
    # per run and rate: the run's own seeds against A/A repeat 1 (repeat 2 is left over), so
    # no run enters two comparisons; their spread per rate gives the detectable difference
    diffs = shipped.aa_differences()
    assert len(diffs) == len(WARMUP_RUNS) * len(SWEEP["lrs"])
    for run in WARMUP_RUNS:
        for lr in SWEEP["lrs"]:
            repeat = shipped.aa[run][f"{lr:g}"][0]
            want = [b - a for a, b in zip(shipped.final(run, lr), repeat, strict=True)]
            assert want in diffs
    summary = shipped.summary()
    assert summary["claimed_rate"] == two_look_rate(5, 8)
    for lr in SWEEP["lrs"]:
        flat = [d for c in shipped.aa_differences(lr) for d in c]
        sd = (sum(d * d for d in flat) / len(flat)) ** 0.5
        seen = summary["detectable"][f"{lr:g}"]
        assert seen["5"] == pytest.approx(detectable_difference(5, sd, TWO_LOOK_LEVEL))
        assert seen["8"] == pytest.approx(detectable_difference(8, sd, TWO_LOOK_LEVEL))


def test_C5_7_live_run_reproduces_the_shipped_seed_it_is_part_of(shipped):
    # the lesson's live run is one seed of the sweep: the same numbers (same machine), or within
    # the shipped seed spread (another machine), and the same direction as every shipped seed
    live = compare_warmup(seed=LIVE_SWEEP["seed"], lr=LIVE_SWEEP["lr"], runs=LIVE_SWEEP["runs"])
    i = shipped.seeds.index(LIVE_SWEEP["seed"])
    for run, result in live.items():
        values = shipped.final(run, LIVE_SWEEP["lr"])
        assert abs(result.val_loss - values[i]) <= max(values) - min(values), run
    post, pre = (live[r].val_loss for r in LIVE_SWEEP["runs"])
    every = shipped.every_seed(*LIVE_SWEEP["runs"], LIVE_SWEEP["lr"])
    assert every in ("lower", "higher") and (pre < post) == (every == "lower")


@pytest.mark.slow
def test_C5_7_tool_rerun_at_reduced_size_agrees_with_the_shipped_sweep(tmp_path, shipped):
    import subprocess
    import sys
    from pathlib import Path

    from helpers.shipped import agrees_within_spread
    from helpers.warmup import load_warmup_sweep

    # two new seeds (a shipped seed would reproduce its shipped value exactly, a float64 run
    # being deterministic, and could not fail), lr 1e-2; compared with all 8 shipped seeds
    assert not {8, 9} & set(shipped.seeds + shipped.followup.seeds)
    tool = Path(__file__).resolve().parent.parent / "tools" / "warmup_sweep.py"
    subprocess.run(
        [sys.executable, str(tool), "--seeds", "8", "9", "--lrs", "0.01", "--aa", "0",
         "--no-doc", "--data-dir", str(tmp_path)],
        check=True, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    fresh = load_warmup_sweep(folder=tmp_path)
    assert fresh.seeds == [8, 9]
    for run in WARMUP_RUNS:
        every = shipped.final(run, 0.01) + shipped.followup.final(run, 0.01)
        for value in fresh.final(run, 0.01):
            ok, sentence = agrees_within_spread(value, every)
            assert ok, (run, sentence)


def test_C5_7_a_shipped_summary_that_disagrees_with_its_runs_is_refused(tmp_path):
    from helpers.shipped import DATA
    from helpers.warmup import load_warmup_sweep

    record = json.loads((DATA / "warmup_sweep.json").read_text())
    record["results"]["summary"]["comparisons"][0]["every_seed"] = "always"
    (tmp_path / "warmup_sweep.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="summary .* is not what its own runs give"):
        load_warmup_sweep(folder=tmp_path)
