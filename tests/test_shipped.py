"""Shipped results (helpers.shipped): a tool writes an experiment's results as data, the lesson
loads them, a rerun at reduced size agrees within the seed spread. The pattern end to end on a
tiny experiment written here (into a temporary folder, never helpers/data), and each check's
failure."""

import json

import pytest
import torch

from helpers import TransformerLM
from helpers.reproducible import default_dtype
from helpers.shipped import (
    ShippedResults,
    agrees_within_spread,
    check_schema,
    load_results,
    timed,
    write_results,
)
from helpers.text import CharTokenizer, load_text, split_ids
from helpers.training import train_lm

SETTINGS = {"steps": int, "seeds": [int], "lr": float}
RESULTS = {"final_loss": {str: float}, "note": (str, None)}


def _experiment(steps: int, seeds, lr: float) -> dict:
    """A tiny experiment of the kind a tool runs: one final held-out loss per seed."""
    text = load_text()
    tok = CharTokenizer(text)
    train_ids, val_ids = split_ids(tok.encode(text))
    finals = {}
    for seed in seeds:
        torch.manual_seed(seed)
        with default_dtype(torch.float64):
            model = TransformerLM(tok.vocab_size, 16, 1, 2, max_len=16)
        result = train_lm(model, train_ids, val_ids, steps, 4, 16, lr, seed)
        finals[str(seed)] = result.val_loss
    return {"final_loss": finals, "note": None}


def test_the_pattern_end_to_end(tmp_path):
    settings = {"steps": 6, "seeds": [0, 1, 2], "lr": 5e-3}
    results, wall, cpu = timed(_experiment, **settings)
    path = write_results("toy", tool="tools/toy.py", settings=settings, results=results,
                         settings_schema=SETTINGS, results_schema=RESULTS, seconds=wall,
                         cpu_seconds=cpu, folder=tmp_path)  # fmt: skip
    assert path == tmp_path / "toy.json" and cpu > 0
    shipped = load_results("toy", SETTINGS, RESULTS, folder=tmp_path)
    assert isinstance(shipped, ShippedResults) and shipped.settings == settings
    assert shipped.results == results and shipped.tool == "tools/toy.py"
    assert shipped.torch == torch.__version__.split("+")[0]
    # the slow test's rerun at reduced size: one seed of the three, the same settings otherwise
    again = _experiment(settings["steps"], [1], settings["lr"])["final_loss"]["1"]
    ok, sentence = agrees_within_spread(again, list(shipped.results["final_loss"].values()))
    assert ok, sentence
    assert again == shipped.results["final_loss"]["1"]  # same machine, float64: the same run


def test_a_file_that_does_not_match_its_schema_is_refused(tmp_path):
    settings = {"steps": 2, "seeds": [0], "lr": 1e-3}
    results = {"final_loss": {"0": 3.0}, "note": "x"}
    write_results("toy", tool="tools/toy.py", settings=settings, results=results,
                  settings_schema=SETTINGS, results_schema=RESULTS, seconds=1.0, cpu_seconds=1.0,
                  folder=tmp_path)  # fmt: skip
    record = json.loads((tmp_path / "toy.json").read_text())
    record["results"]["final_loss"]["0"] = "3.0"  # hand-edited into a string
    (tmp_path / "toy.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"toy.json does not match its schema: .*final_loss.0"):
        load_results("toy", SETTINGS, RESULTS, folder=tmp_path)
    with pytest.raises(FileNotFoundError, match="run the tool that writes them"):
        load_results("other", SETTINGS, RESULTS, folder=tmp_path)
    with pytest.raises(ValueError, match="settings.lr must be a number"):
        write_results("toy", tool="tools/toy.py", settings={**settings, "lr": "fast"},
                      results=results, settings_schema=SETTINGS, results_schema=RESULTS,
                      seconds=1.0, cpu_seconds=1.0, folder=tmp_path)  # fmt: skip
    with pytest.raises(ValueError, match="tool must be the writing tool's path"):
        write_results("toy", tool="/abs/toy.py", settings=settings, results=results,
                      settings_schema=SETTINGS, results_schema=RESULTS, seconds=1.0,
                      cpu_seconds=1.0, folder=tmp_path)  # fmt: skip
    with pytest.raises(ValueError, match="name must be a file stem"):
        load_results("../toy", SETTINGS, RESULTS, folder=tmp_path)


@pytest.mark.parametrize(
    "value, schema, words",
    [
        ({"a": 1}, {"a": int, "b": int}, r"missing \['b'\]"),
        ({"a": 1, "c": 2}, {"a": int}, r"unexpected \['c'\]"),
        ([1, 2.5], [int], r"\[1\] must be a whole number"),
        (True, float, "must be a number"),
        (float("nan"), float, "must be a finite number"),
        ({"x": [1]}, {str: [str]}, r"x\[0\] must be a str"),
        (3, (str, None), "matches none of its allowed forms"),
        ("x", [int], "must be a list"),
    ],
)
def test_check_schema_names_the_field(value, schema, words):
    with pytest.raises(ValueError, match=words):
        check_schema(value, schema)


def test_check_schema_accepts_what_it_describes():
    check_schema(
        {"a": 1, "b": [0.5, 2], "c": {"x": None}}, {"a": int, "b": [float], "c": {str: None}}
    )
    with pytest.raises(TypeError, match="not a schema"):
        check_schema(1, "int")


def test_agrees_within_spread_both_ways():
    assert agrees_within_spread(2.10, [2.08, 2.12, 2.11])[0]  # inside the seeds' range
    assert agrees_within_spread(2.05, [2.08, 2.12])[0]  # below by less than the spread 0.04
    ok, sentence = agrees_within_spread(2.20, [2.08, 2.12])
    assert not ok and "outside" in sentence and "spread 0.04" in sentence
    assert not agrees_within_spread(2.1001, [2.1])[0]  # one value: exact unless a floor is set
    assert agrees_within_spread(2.1001, [2.1], minimum_spread=1e-3)[0]
    with pytest.raises(ValueError, match="shipped must hold"):
        agrees_within_spread(1.0, [])
    with pytest.raises(ValueError, match="fresh must be a finite number"):
        agrees_within_spread(float("inf"), [1.0])
