"""helpers.printing.fmt: the course's rule for numbers in stored outputs (CONTRIBUTING.md)."""

import json
import math

import numpy as np
import pytest
import torch

from helpers.printing import ERROR_BOUNDS, fmt, rounding_margin


def test_fmt_significant_digits_and_decimals():
    assert fmt(0.267851, 4) == "0.2679"
    assert fmt(2.11e8, 3) == "2.11e+08"
    assert fmt(1.0 / 3.0, decimals=3) == "0.333"
    assert fmt(7) == "7"


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, torch.tensor(math.nan), np.float32("inf")]
)
def test_fmt_refuses_nan_and_infinities_with_a_clear_message(bad):
    with pytest.raises(ValueError, match="NaN or an infinity"):
        fmt(bad, 4, name="loss")


def test_fmt_names_the_argument_for_bad_input():
    with pytest.raises(TypeError, match="loss must be a number"):
        fmt("0.5", name="loss")
    with pytest.raises(ValueError, match="single number"):
        fmt(torch.ones(3))
    with pytest.raises(ValueError, match="digits must be"):
        fmt(0.5, 0)
    with pytest.raises(ValueError, match="decimals must be"):
        fmt(0.5, decimals=-1)
    with pytest.raises(ValueError, match="computed_in must be one of"):
        fmt(0.5, computed_in="float8")


def test_fmt_records_value_and_precision_when_logging(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_FLOAT_LOG", str(log))
    fmt(torch.tensor(0.25, dtype=torch.float32), 3)
    fmt(0.125, 2)
    fmt(0.5, computed_in=torch.float32)
    fmt(torch.tensor(3))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["precision"] for e in entries] == ["float32", "float64", "float32", "exact"]
    assert [e["bound"] for e in entries] == [
        ERROR_BOUNDS["float32"],
        ERROR_BOUNDS["float64"],
        ERROR_BOUNDS["float32"],
        0.0,
    ]
    assert float(entries[0]["value"]) == 0.25


def test_rounding_margin():
    assert rounding_margin(0.26785, "0.2679") == pytest.approx(0.0, abs=1e-12)
    assert rounding_margin(0.2679, "0.2679") == pytest.approx(0.00005 / 0.2679)
    assert rounding_margin(2.11e8, "2.11e+08") == pytest.approx(0.005e8 / 2.11e8)
    assert rounding_margin(0.0, "0") == math.inf
