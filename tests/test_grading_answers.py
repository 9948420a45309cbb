"""What a hidden test records of an answer, and the verdict on it, agree with the visible check
(helpers.grading, tools/grading/verdicts.py): honest answers written another way keep their
points, and an answer cannot earn points by what it does to the hidden test's inputs or by
reaching a forbidden function through a course helper.

The lessons' own exercises are run here as the grader runs them, in this process: the
instructor's solution cell and the hidden tests are read from the committed notebook, the
instructor's answer gives the reference records, another answer is recorded on the same hidden
cases (``HELPERS_GRADING_LOG``) and judged against them (``tools/grading/verdicts.judge``), and
the same answer goes through the exercise's visible check.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import helpers
from helpers import grading as grading_module
from helpers.checks import generation as generation_checks
from helpers.checks import position as position_checks
from helpers.checks import residual as residual_checks
from helpers.checks._core import ExerciseFailed
from helpers.grading import plain, record
from tools.grading.verdicts import judge, read_records

ROOT = Path(__file__).resolve().parent.parent


# ---- the lessons' exercises, as the grader runs them ------------------------------------------
def _exercise_cells(notebook: str, exercise: str) -> tuple[str, str]:
    """(the instructor's solution cell, the hidden tests of its check cell) of ``exercise``."""
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    cells = nb.cells
    for i, cell in enumerate(cells):
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == exercise:
            for later in cells[i + 1 :]:
                if "### BEGIN HIDDEN TESTS" in later.source:
                    hidden = later.source.split("### BEGIN HIDDEN TESTS", 1)[1]
                    return cell.source, hidden.split("### END HIDDEN TESTS", 1)[0]
    raise LookupError(f"{exercise} not found in {notebook}")


def _namespace() -> dict:
    return {"torch": torch, "nn": nn, "F": F, "math": math, "np": np, "helpers": helpers}


def _records(hidden: str, name: str, answer, log: Path, monkeypatch) -> dict:
    """Run the hidden tests with ``answer`` bound to ``name``: {case: [entries]} of the log."""
    if log.exists():
        log.unlink()
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    monkeypatch.setattr(grading_module, "_cases", {})  # case numbers from 0, as in a fresh kernel
    ns = {**_namespace(), name: answer}
    exec(compile(hidden, "<hidden tests>", "exec"), ns)
    records, bad = read_records(log)
    assert not bad
    (only,) = records.values()
    return only


def _graded(notebook, exercise, name, variant, tmp_path, monkeypatch):
    """The verdict on ``variant(solution)`` against the instructor's ``solution``, on the
    exercise's hidden cases."""
    solution_cell, hidden = _exercise_cells(notebook, exercise)
    ns = _namespace()
    exec(compile(solution_cell, "<solution>", "exec"), ns)
    solution = ns[name]
    reference = _records(hidden, name, solution, tmp_path / "reference.jsonl", monkeypatch)
    answer = variant(solution)
    student = _records(hidden, name, answer, tmp_path / "student.jsonl", monkeypatch)
    return judge(exercise, reference, student), answer, student


def _check_says(check, answer) -> bool:
    """True for the visible check's ✓, False for its ✗."""
    try:
        check(answer)
    except ExerciseFailed:
        return False
    return True


def _as_numpy(solution, dtype=None):
    def answer(*args):
        got = solution(*args).detach().numpy()
        return got if dtype is None else got.astype(dtype)

    return answer


# the exercises whose answer is a tensor the visible check reads with as_tensor, which accepts a
# numpy array: (notebook, exercise, function's name, visible check)
NUMPY_EXERCISES = [
    ("04b_position_inside_attention.ipynb", "l4b_ex1", "rotary_half_split",
     position_checks.check_rotary_half_split),
    ("04b_position_inside_attention.ipynb", "l4b_ex2", "alibi_bias_for",
     position_checks.check_alibi_bias),
    ("05_residuals_and_layer_norm.ipynb", "l5_ex1", "predict_layer_norm",
     residual_checks.check_layer_norm_prediction),
    ("05_residuals_and_layer_norm.ipynb", "l5_ex2", "fixed_pre_norm",
     residual_checks.check_fixed_pre_norm),
    ("05b_rmsnorm_and_depth.ipynb", "l5b_ex1", "rms_from_layer_norm",
     residual_checks.check_rms_from_layer_norm),
    ("09_the_full_model.ipynb", "l9_ex3", "top_p_filter", generation_checks.check_top_p_filter),
]  # fmt: skip


@pytest.mark.parametrize(("notebook", "exercise", "name", "check"), NUMPY_EXERCISES)
def test_a_numpy_answer_the_check_accepts_gets_full_marks(
    notebook, exercise, name, check, tmp_path, monkeypatch
):
    verdict, answer, student = _graded(notebook, exercise, name, _as_numpy, tmp_path, monkeypatch)
    assert _check_says(check, answer), exercise
    assert verdict.correct, (exercise, verdict.message, student[0][0].get("value"))


@pytest.mark.parametrize(("notebook", "exercise", "name", "check"), NUMPY_EXERCISES)
def test_a_float32_numpy_answer_is_judged_as_the_float32_tensor_is(
    notebook, exercise, name, check, tmp_path, monkeypatch
):
    """In float32 the check and the grade judge a numpy answer as they judge the same tensor
    (05b's check asks for the input's dtype, which its grade does not: not numpy's doing)."""
    as_array = _graded(
        notebook, exercise, name, lambda s: _as_numpy(s, np.float32), tmp_path, monkeypatch
    )
    as_tensor = _graded(
        notebook, exercise, name, lambda s: lambda *a: s(*a).float(), tmp_path, monkeypatch
    )
    assert as_array[0].correct == as_tensor[0].correct, (as_array[0], as_tensor[0])
    assert _check_says(check, as_array[1]) == _check_says(check, as_tensor[1]), exercise


@pytest.mark.parametrize(("notebook", "exercise", "name", "check"), NUMPY_EXERCISES)
def test_a_wrong_numpy_answer_loses_its_points_as_in_the_check(
    notebook, exercise, name, check, tmp_path, monkeypatch
):
    def wrong(solution):
        right = _as_numpy(solution)
        return lambda *args: right(*args) * 1.5 + 0.25

    verdict, answer, _ = _graded(notebook, exercise, name, wrong, tmp_path, monkeypatch)
    assert not _check_says(check, answer)
    assert not verdict.correct and "differs" in verdict.message, verdict.message


def test_a_numpy_answer_is_recorded_as_the_tensor_torch_from_numpy_gives():
    for array in (
        np.arange(6.0).reshape(2, 3),
        np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1],  # negative strides
        np.array([np.nan, np.inf, -1.5], dtype=np.float16),
        np.array([[True, False]]),
        np.arange(4, dtype=np.int32),
        np.arange(3, dtype=np.uint8),
        np.array(2.5),
    ):
        assert plain(array) == plain(torch.from_numpy(array.copy())), array.dtype
    # numpy scalars: the 0-d tensor of the same dtype (not a Python number: a check that asks
    # for a Python bool refuses numpy.bool_ and a bool tensor alike)
    for scalar in (np.float64(2.5), np.float32(0.1), np.int64(7), np.bool_(True)):
        assert plain(scalar) == plain(torch.from_numpy(np.asarray(scalar))), type(scalar)
    assert plain([np.float64(1.0), np.arange(2.0)]) == plain(
        [torch.tensor(1.0, dtype=torch.float64), torch.arange(2.0, dtype=torch.float64)]
    )
    assert plain(np.array([1 + 2j]))["tensor"]["data"] == [{"unsupported": "complex"}]
    for other in (np.array(["a"]), np.array([object()]), np.longdouble(1)):
        assert "unsupported" in plain(other), other


def test_a_numpy_answer_that_is_not_a_number_array_is_refused_with_its_dtype(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    record("x", lambda: torch.zeros(2, dtype=torch.float64))
    record("x", lambda: np.array(["0.0", "0.0"]))
    reference, student = (json.loads(line) for line in log.read_text().splitlines())
    verdict = judge("x", {0: [reference]}, {0: [{**student, "case": 0}]})
    assert not verdict.correct and "numpy array of dtype" in verdict.message, verdict.message


# ---- a forbidden course function reached through another course helper ------------------------
def _through_a_course_helper(forbidden_helper):
    """An answer that has a course helper call ``forbidden_helper`` for it: the lesson's
    ``checks`` module re-exports ``call`` (helpers.checks._core), which calls any function."""
    return lambda n_heads, n: position_checks.call(
        "any", forbidden_helper, n_heads, n, dtype=torch.float64
    )


def test_a_forbidden_function_a_course_helper_calls_for_the_answer_is_refused(
    tmp_path, monkeypatch
):
    verdict, answer, student = _graded(
        "04b_position_inside_attention.ipynb", "l4b_ex2", "alibi_bias_for",
        lambda solution: _through_a_course_helper(helpers.alibi_bias), tmp_path, monkeypatch,
    )  # fmt: skip
    assert "helpers.positional.alibi_bias" in student[0][0]["calls"]
    assert not verdict.correct and "forbids" in verdict.message, verdict.message
    assert not _check_says(position_checks.check_alibi_bias, answer)


def test_an_honest_answer_called_through_a_course_helper_keeps_its_points(tmp_path, monkeypatch):
    def through_call(solution):
        return lambda n_heads, n: position_checks.call("any", solution, n_heads, n)

    verdict, answer, student = _graded(
        "04b_position_inside_attention.ipynb", "l4b_ex2", "alibi_bias_for", through_call,
        tmp_path, monkeypatch,
    )  # fmt: skip
    assert verdict.correct, verdict.message
    assert _check_says(position_checks.check_alibi_bias, answer)


# ---- an answer that changes the hidden test's inputs in place ----------------------------------
def _sets_the_logits_to_its_answer(solution):
    """l9_ex1's hidden test grades the top probability of softmax(z / T) at the answer's T,
    computed from z after the answer returns: this answer writes into z a vector whose top
    probability at T = 1 is q, and returns 1."""

    def temperature_for(logits, q):
        rest = (1 - q) / (logits.numel() - 1)
        with torch.no_grad():
            logits.fill_(math.log(rest))
            logits[0] = math.log(q)
        return 1.0

    return temperature_for


def test_an_answer_that_rewrites_the_inputs_the_hidden_test_reads_again_loses_its_points(
    tmp_path, monkeypatch
):
    verdict, answer, student = _graded(
        "09_the_full_model.ipynb", "l9_ex1", "temperature_for", _sets_the_logits_to_its_answer,
        tmp_path, monkeypatch,
    )  # fmt: skip
    assert not verdict.correct and "in place" in verdict.message, verdict.message
    assert not _check_says(generation_checks.check_temperature_for, answer)


def test_an_in_place_free_answer_keeps_its_points_where_the_hidden_test_reads_its_inputs_again(
    tmp_path, monkeypatch
):
    verdict, answer, student = _graded(
        "09_the_full_model.ipynb", "l9_ex1", "temperature_for", lambda solution: solution,
        tmp_path, monkeypatch,
    )  # fmt: skip
    assert verdict.correct, verdict.message
    assert "inputs_after" not in student[0][0]


def test_an_answer_that_changes_its_inputs_where_nothing_reads_them_again_keeps_its_points(
    tmp_path, monkeypatch
):
    """An honest in-place answer: lesson 5's exercise 1 called directly by the hidden test (what
    is recorded is what it returned), lesson 6's exercise 1 through a wrapper that passes each
    input on once."""

    def in_place_prediction(solution):
        def predict_layer_norm(out, a, b, gamma, beta):
            return out.sub_(beta).mul_(torch.sign(a)).add_(beta)  # out itself, changed

        return predict_layer_norm

    def in_place_collapse(solution):
        def collapse(w1, b1, w2, b2):
            return w1 @ w2, b2.add_(b1 @ w2)  # b2 itself, changed

        return collapse

    for notebook, exercise, name, variant in (
        ("05_residuals_and_layer_norm.ipynb", "l5_ex1", "predict_layer_norm", in_place_prediction),
        ("06_feed_forward.ipynb", "l6_ex1", "collapse", in_place_collapse),
    ):
        verdict, _, student = _graded(notebook, exercise, name, variant, tmp_path, monkeypatch)
        assert verdict.correct, (exercise, verdict.message)
        assert all("inputs_after" not in entries[0] for entries in student.values())


# ---- the same, in the sealed recorder the grading kernel uses ----------------------------------
SEALED = r'''
import ast, json, os, sys
import numpy as np
import torch
import helpers
from helpers import grading
from helpers.checks import position as checks

HIDDEN = """
from helpers.grading import record as _record


def _top_at(z, q):
    return float(torch.softmax(z / temperature_for(z, q), dim=-1).max())


def _passes_on(z, q):
    return temperature_for(z.clone(), q)


_record("reread", _top_at, torch.arange(5, dtype=torch.float64), 0.5)
_record("passed_on", _passes_on, torch.arange(5, dtype=torch.float64), 0.5)
_record("direct", temperature_for, torch.arange(5, dtype=torch.float64), 0.5)
_record("numpy", lambda: np.arange(3.0, dtype=np.float32))
_record("through_a_helper", lambda h, n: checks.call("any", helpers.alibi_bias, h, n), 4, 3)
_record("not_plain", Bare)
"""
STUDENT = """
def temperature_for(logits, q):
    logits.zero_()
    return 1.0


class Bare(torch.nn.Module):  # no super().__init__(): reading its parameters raises
    def __init__(self):
        self.width = 3
"""
read, write = os.pipe()
config = {"key": "00" * 32, "public": True, "seeds": {}, "hidden": [HIDDEN]}
grading._seal(config, write)
ns = {"__name__": "__main__", "torch": torch, "np": np, "helpers": helpers, "checks": checks}
for source in (STUDENT, HIDDEN):  # as IPython runs a cell: one top-level statement at a time
    for node in ast.parse(source).body:
        exec(compile(ast.Module([node], []), "<cell>", "exec"), ns)
os.close(write)
lines = os.read(read, 1 << 20).decode().splitlines()
print(json.dumps([json.loads(line.split(" ", 1)[1]) for line in lines]))
'''


def test_the_sealed_recorder_records_numpy_changed_inputs_and_course_calls_at_depth(
    tmp_path, monkeypatch
):
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", SEALED], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    entries = {e["exercise"]: e for e in json.loads(out.stdout) if e["kind"] == "case"}
    assert not [e for e in json.loads(out.stdout) if e["kind"] != "case"]  # no flag
    assert "inputs_after" in entries["reread"]  # the wrapper reads z again after the answer
    assert "inputs_after" not in entries["passed_on"]  # it passed a copy
    assert "inputs_after" not in entries["direct"]  # recorded: what the answer returned
    assert entries["numpy"]["value"] == plain(torch.arange(3.0))
    assert "helpers.positional.alibi_bias" in entries["through_a_helper"]["calls"]
    # an answer whose value cannot be read is a recorded error, and the developer's log (what the
    # agreement rows of tests/test_check_agrees_with_grade.py grade by) records it the same way
    assert entries["not_plain"]["error"] == "converting the answer raised AttributeError"
    ns = {"torch": torch}
    exec(SEALED.split('STUDENT = """', 1)[1].split('"""', 1)[0], ns)
    log = tmp_path / "developer.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    monkeypatch.setattr(grading_module, "_cases", {})
    record("not_plain", ns["Bare"])
    records, bad = read_records(log)
    sealed = {
        k: v for k, v in entries["not_plain"].items() if k != "seq"
    }  # its place in the stream
    assert not bad and records["not_plain"][0] == [sealed]


def test_a_notebook_global_named_like_an_attribute_the_hidden_inputs_use_changes_no_grade(
    tmp_path, monkeypatch
):
    """l5_ex2's hidden inputs include ``lambda h: 2 * h - h.mean(-1, keepdim=True)``: ``mean`` is
    an attribute name there, in the lambda's ``co_names`` beside its globals. A notebook that binds
    a global ``mean`` (lesson 5's own demonstration cell does: ``mean = sum(finals) / len(finals)``;
    so may an honest student's cell) must record the same inputs as one that does not, so the
    answer keeps its points (before: "its inputs are not the ones the hidden test builds")."""
    solution_cell, hidden = _exercise_cells("05_residuals_and_layer_norm.ipynb", "l5_ex2")
    ns = _namespace()
    exec(compile(solution_cell, "<solution>", "exec"), ns)
    answer = ns["fixed_pre_norm"]
    reference = _records(
        hidden, "fixed_pre_norm", answer, tmp_path / "reference.jsonl", monkeypatch
    )
    monkeypatch.setattr(
        sys.modules[__name__], "_namespace", lambda: {**ns, "mean": 0.5, "tanh": torch.ones(2)}
    )
    student = _records(hidden, "fixed_pre_norm", answer, tmp_path / "student.jsonl", monkeypatch)
    assert judge("l5_ex2", reference, student).correct, judge("l5_ex2", reference, student)


def test_a_numpy_answer_with_negative_strides_is_read_by_the_check_as_by_the_grade():
    """``np.flip`` and ``a[::-1]`` give arrays ``torch.from_numpy`` refuses; the recorder takes
    them (it reads the values), so the visible check must too, as the same values."""
    from helpers.checks._core import as_tensor

    flipped = np.flip(np.arange(6.0).reshape(2, 3), axis=-1)
    value = as_tensor("l5_ex1", flipped)
    assert torch.equal(value, torch.tensor([[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]], dtype=torch.float64))
