"""Every exercise check of every lesson gives a one-line verdict for a wrong answer (issue 8).

Cross-lesson, without a kernel: each public ``check_*`` function of each ``helpers.checks.<topic>``
module is handed a table of wrong answers (None, something that is not a function, a function
that returns None, NaN, a string or an integer tensor, one that raises NotImplementedError, one
that raises another error). Each must raise ``ExerciseFailed`` (an ``AssertionError``, so
nbgrader takes the points away) whose message is one line naming the problem, shown by IPython
as that line alone (``_render_traceback_``): never a traceback from inside the check, never a
pass. The lessons' own tests check each exercise's typical conceptual mistakes; the right
answers, and wrong answers built from them, are checked in the student's kernel by
tests/test_coursework.py.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import helpers.checks
from helpers.checks import ExerciseFailed


def _checks():
    found = []
    for info in pkgutil.iter_modules(helpers.checks.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"helpers.checks.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and fn.__module__ == module.__name__:
                found.append(pytest.param(fn, id=f"{info.name}.{name}"))
    return found


def _raise(error):
    def answer(*args, **kwargs):
        raise error

    return answer


# name -> (wrong answer, words of which the verdict must contain one; empty: any one-line verdict)
WRONG = {
    "None": (None, ("none",)),
    "not a function": (42, ()),
    "returns None": (lambda *a, **k: None, ("none",)),
    "raises NotImplementedError": (_raise(NotImplementedError()), ("not implemented",)),
    "raises another error": (
        _raise(ValueError("a bug in the student's code\nthat spans two lines")),
        ("valueerror",),
    ),
    "returns NaN": (lambda *a, **k: torch.full((3, 4), float("nan")), ()),
    "returns a string": (lambda *a, **k: "a string", ()),
    "returns an integer tensor": (lambda *a, **k: torch.zeros(3, 4, dtype=torch.int64), ()),
}

CHECKS = _checks()


def test_checks_are_found():
    assert CHECKS, "no check_* function under helpers/checks"


@pytest.mark.parametrize("check", CHECKS)
def test_check_takes_the_answer_alone(check):
    """A check cell is ``check_x(answer)``: one required argument, the student's answer."""
    required = [
        p
        for p in inspect.signature(check).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    assert len(required) == 1, f"{check.__name__} requires {[p.name for p in required]}"


@pytest.mark.parametrize("wrong", list(WRONG))
@pytest.mark.parametrize("check", CHECKS)
def test_wrong_answer_gets_a_one_line_verdict(check, wrong, capsys):
    answer, words = WRONG[wrong]
    try:
        check(answer)
    except ExerciseFailed as e:
        message = str(e)
        rendered = e._render_traceback_()
    except Exception as e:  # noqa: BLE001 - the point of the test
        pytest.fail(
            f"{check.__name__}({wrong}): the check itself raised {type(e).__name__}: {e} "
            "(the student would see a traceback from inside the check)"
        )
    else:
        pytest.fail(
            f"{check.__name__} accepted a wrong answer ({wrong}): {capsys.readouterr().out!r}"
        )
    assert "\n" not in message.strip(), (
        f"{check.__name__}({wrong}): verdict spans lines:\n{message}"
    )
    assert len(rendered) == 1 and "✗" in rendered[0], rendered
    assert "✓" not in capsys.readouterr().out, f"{check.__name__}({wrong}) printed a ✓ then failed"
    if words and "class" not in message:  # a check that wants a class says so, rightly
        assert any(w in message.lower() for w in words), (
            f"{check.__name__}({wrong}): the verdict does not name the problem: {message}"
        )


def _collapse(W1, b1, W2, b2):
    return W1 @ W2, b1 @ W2 + b2


#: (check, a right answer, what the ✓ must not say: the answer to the question the lesson asks
#: right after the check)
_CONFIRM_ONLY = [
    pytest.param(
        "feedforward.check_collapse",
        _collapse,
        ("d_model^2", "whatever d_ff", "buys", "numbers"),  # lesson 6: "then count ..."
        id="l6_ex1",
    ),
]


@pytest.mark.parametrize(("check", "answer", "giveaways"), _CONFIRM_ONLY)
def test_pass_message_confirms_without_answering_the_next_question(
    check, answer, giveaways, capsys
):
    module, name = check.split(".")
    getattr(importlib.import_module(f"helpers.checks.{module}"), name)(answer)
    said = capsys.readouterr().out
    assert said.startswith("✓"), said
    for words in giveaways:
        assert words not in said, (words, said)
