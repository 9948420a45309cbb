"""Lesson 10, the capstone notebook: its open-ended audit (exercise 4) and its cells that must
print the same with and without the optional ``transformers``.

* Exercise 4's model (``helpers.zoo.mystery_model``): what the audit decides and leaves undecided,
  and the facts the undecided checks rest on, measured directly (the feed-forward has no
  residual; it expands and is position-wise). The instructor's solution, run from the notebook,
  decides them by experiment, not by constants: on the same model with the residual restored it
  says K2 passed.
* Its visible check: each wrong answer named, in one line.
* Its grade (``tools/grading``, driven as tests/test_grading.py does): honest answers written
  differently score full marks, wrong ones do not.
* The notebook under nbval with ``transformers`` blocked: the stored outputs hold.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "10_trust_but_verify.ipynb"

from helpers import audit, init_weights, zoo  # noqa: E402
from helpers.checks import ExerciseFailed  # noqa: E402
from helpers.checks import audit as checks  # noqa: E402
from helpers.checks.audit import normalized_verdicts  # noqa: E402
from helpers.zoo import mystery as mystery_module  # noqa: E402
from tools.grading.verdicts import judge  # noqa: E402


def _cell(grade_id: str) -> str:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (cell,) = [
        c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id
    ]
    return cell.source


def _zero(module, args, output):
    return torch.zeros_like(output)


def _solution(model):
    """The notebook's ``audit_verdicts`` (the instructor's solution cell), bound to ``model``."""
    namespace = {"copy": copy, "torch": torch, "zero": _zero, "mystery": model}
    exec(_cell("l10_ex4"), namespace)
    return namespace["audit_verdicts"]


# ---- the model of exercise 4 ----------------------------------------------------------------
def _layer_io(model, tokens, attention_off=True):
    """(input, output) of every layer of ``model`` on ``tokens``, attention zeroed if asked."""
    seen, hooks = {}, []
    for i, layer in enumerate(model.layers):
        if attention_off:
            hooks.append(layer.attention.register_forward_hook(_zero))
        hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: seen.update({i: (a[0], o)})))
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for h in hooks:
            h.remove()
    return seen


def test_K2_mystery_feed_forward_has_no_residual_measured_directly():
    model = zoo.mystery_model()
    layer = model.layers[0]
    x = torch.randn(2, 8, 48, generator=torch.Generator().manual_seed(0))
    cos, sin = model.cos_cached[:8], model.sin_cached[:8]
    with torch.no_grad():
        h = x + layer.attention(layer.attention_norm(x), cos, sin)  # [2, 8, 48]
        z = layer.ffn_norm(h)
        ffn = (torch.nn.functional.silu(z @ layer.w_gate) * (z @ layer.w_up)) @ layer.w_down
        torch.testing.assert_close(layer(x, cos, sin), ffn)  # the output is FFN(...) alone
        assert not torch.allclose(layer(x, cos, sin), h + ffn)  # not h + FFN(...)


def test_K3_mystery_feed_forward_expands_and_is_position_wise():
    model = zoo.mystery_model()
    for layer in model.layers:
        assert list(layer.w_gate.shape) == list(layer.w_up.shape) == [48, 128]
        assert list(layer.w_down.shape) == [128, 48]
    tokens = torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(1))
    plain, permuted = _layer_io(model, tokens), _layer_io(model, tokens[:, perm])
    for i in plain:
        torch.testing.assert_close(permuted[i][1], plain[i][1][:, perm])
    # with the attention left on, the same experiment shows nothing position-wise (it mixes)
    mixed, mixed_perm = _layer_io(model, tokens, False), _layer_io(model, tokens[:, perm], False)
    assert not torch.allclose(mixed_perm[0][1], mixed[0][1][:, perm], atol=1e-4)


def test_exercise4_solution_decides_K2_and_K3_by_experiment(monkeypatch):
    broken = _solution(zoo.mystery_model())()
    assert broken == {
        "K1": "failed",
        "K2": "failed",
        "K3": "passed",
        "K4": "passed",
        "K5": "passed",
    }
    # the same model with its feed-forward's residual restored (a variant only the tests build)
    monkeypatch.setattr(mystery_module._Layer, "residual_after_ffn", True)
    with_residual = zoo.mystery_model()
    assert _solution(with_residual)()["K2"] == "passed"  # the same experiment, the residual back
    assert audit(with_residual).undecided == ["K2", "K3"]  # the audit still cannot decide it


def test_exercise4_solution_leaves_the_audited_model_unchanged():
    model = zoo.mystery_model()
    before = copy.deepcopy(model.state_dict())
    _solution(model)()
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(not m._forward_hooks for m in model.modules())


# ---- the visible check --------------------------------------------------------------------------
RIGHT = {"K1": "failed", "K2": "failed", "K3": "passed", "K4": "passed", "K5": "passed"}


def test_visible_check_and_hidden_test_read_an_answer_alike():
    """Both read the answer through normalized_verdicts: spaces and capitals do not count."""
    assert normalized_verdicts({" k1": "Failed ", "K2": "PASSED"}) == {
        "K1": "failed",
        "K2": "passed",
    }
    assert "_normalized(audit_verdicts())" in _cell("l10_ex4_check")
    assert normalized_verdicts(["failed"]) == [
        "failed"
    ]  # not a mapping: left for the check to name


def test_check_audit_verdicts_accepts_the_answer_and_says_how_it_decided(capsys):
    checks.check_audit_verdicts(lambda: RIGHT)
    out = capsys.readouterr().out
    assert out.startswith("✓") and "K2, K3 agree with this check's own experiments" in out


@pytest.mark.parametrize("check", ["K2", "K3"])
def test_check_audit_verdicts_refuses_a_wrong_verdict_the_audit_leaves_undecided(check):
    """K2 and K3, which the audit cannot decide, are decided by the check's own experiments (as
    the hidden test grades them): a wrong guess is refused with the experiment that decides it,
    never with the model's facts (the explanation is the student's)."""
    wrong = {**RIGHT, check: {"passed": "failed", "failed": "passed"}[RIGHT[check]]}
    with pytest.raises(ExerciseFailed) as info:
        checks.check_audit_verdicts(lambda: wrong)
    message = str(info.value)
    assert f"your {check} verdict is {wrong[check]!r}" in message and "experiment" in message
    assert "\n" not in message


def test_undecided_by_experiment_follows_the_model_not_constants(monkeypatch):
    """The check's experiments decide K2 and K3 as the instructor's solution does: on the
    mystery model with its feed-forward's residual restored, K2 passes; a model of another shape
    is left undecided."""

    def decided(model):
        return {k: v for k, (v, _) in checks.undecided_by_experiment(model).items()}

    assert decided(zoo.mystery_model()) == {"K2": "failed", "K3": "passed"}
    monkeypatch.setattr(mystery_module._Layer, "residual_after_ffn", True)
    assert decided(zoo.mystery_model()) == {"K2": "passed", "K3": "passed"}
    assert checks.undecided_by_experiment(torch.nn.Linear(3, 3)) == {}


def _raises(error):
    def answer():
        raise error

    return answer


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (lambda: None, "returned None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (_raises(KeyError("K1")), "raised KeyError"),
        (lambda: ["failed"] * 5, "should return a dict"),
        (lambda: {k: v for k, v in RIGHT.items() if k != "K5"}, "missing K5"),
        (lambda: {**RIGHT, "K6": "passed"}, "unexpected K6"),
        (lambda: {**RIGHT, "K2": "undecided"}, 'K2 is "undecided"'),
        (lambda: {**RIGHT, "K3": "pass"}, "K3 is 'pass'"),
        (lambda: {**RIGHT, "K3": True}, "K3 is 'true'"),
        (lambda: {**RIGHT, "K1": "passed"}, "your K1 verdict is 'passed', the audit's is 'failed'"),
        (lambda: {**RIGHT, "K5": "failed"}, "your K5 verdict is 'failed', the audit's is 'passed'"),
    ],
)
def test_check_audit_verdicts_names_each_wrong_answer(answer, says):
    with pytest.raises(ExerciseFailed) as info:
        checks.check_audit_verdicts(answer)
    assert says in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


# ---- the grade: honest answers written differently, and wrong ones ---------------------------
def _honest_from_the_audit():
    """The audit's verdicts where it decides; K2 and K3 by other experiments than the solution's:
    K2 by two different inputs giving one output, K3 by one position alone."""
    model = copy.deepcopy(zoo.mystery_model())
    verdicts = {r.check: r.status for r in audit(model)}
    hooks = [layer.attention.register_forward_hook(_zero) for layer in model.layers]
    for layer in model.layers:
        layer.w_down.data.zero_()
    outs = []
    for seed in (1, 2):
        tokens = torch.randint(0, 96, (1, 6), generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            outs.append(model(tokens))
    for h in hooks:
        h.remove()
    verdicts["K2"] = "failed" if torch.allclose(outs[0], outs[1]) else "passed"
    fresh = zoo.mystery_model()
    tokens = torch.randint(0, 96, (1, 6), generator=torch.Generator().manual_seed(3))
    io_all = _layer_io(fresh, tokens)
    io_last = _layer_io(fresh, tokens[:, -1:])
    alone = torch.allclose(io_last[0][1][:, 0], io_all[0][1][:, -1], atol=1e-6)
    wide = fresh.layers[0].w_gate.shape[1] > fresh.layers[0].w_gate.shape[0]
    verdicts["K3"] = "passed" if alone and wide else "failed"
    return verdicts


HONEST = {
    "constants": lambda: dict(RIGHT),
    "capitals, spaces, another order": lambda: {
        "K5": "Passed",
        "K4": " passed",
        "K3": "PASSED",
        "K2": "Failed ",
        "K1": "failed",
    },
    "an OrderedDict": lambda: collections.OrderedDict(sorted(RIGHT.items())),
    "the audit, then experiments of one's own": _honest_from_the_audit,
}
WRONG_ANSWERS = {
    "K2 guessed passed (the audit left it open)": lambda: {**RIGHT, "K2": "passed"},
    "K3 guessed failed": lambda: {**RIGHT, "K3": "failed"},
    "K2 left undecided": lambda: {**RIGHT, "K2": "undecided"},
    "a key missing": lambda: {k: v for k, v in RIGHT.items() if k != "K4"},
    "raises": _raises(NotImplementedError()),
}


def _grade(answer, tmp_path, monkeypatch):
    """The notebook's hidden test (its record line, run here) for the solution and ``answer``,
    judged by tools/grading as the autograder judges it."""
    hidden = _cell("l10_ex4_check").split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN")[0]
    log = tmp_path / "records.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    for fn in (_solution(zoo.mystery_model()), answer):
        exec(hidden, {"audit_verdicts": fn})
    ref, got = (json.loads(line) for line in log.read_text().splitlines())
    return judge("l10_ex4", {0: [ref]}, {0: [{**got, "case": 0}]})


@pytest.mark.parametrize("name", list(HONEST))
def test_exercise4_honest_answers_score_full_marks(name, tmp_path, monkeypatch):
    verdict = _grade(HONEST[name], tmp_path, monkeypatch)
    assert verdict.correct, verdict.message
    checks.check_audit_verdicts(HONEST[name])  # and the visible check agrees


@pytest.mark.parametrize("name", list(WRONG_ANSWERS))
def test_exercise4_wrong_answers_score_nothing(name, tmp_path, monkeypatch):
    verdict = _grade(WRONG_ANSWERS[name], tmp_path, monkeypatch)
    assert not verdict.correct, name
    assert "passed" not in verdict.message and "failed" not in verdict.message  # no answer shown


# ---- the Hugging Face cell prints the same without transformers --------------------------------
@pytest.mark.slow
def test_lesson10_stored_outputs_hold_without_transformers(tmp_path):
    """nbval on the notebook in a kernel where ``import transformers`` fails: every stored
    output holds, so the cell that audits Hugging Face models prints the same either way."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['transformers'] = None  # as if it were not installed\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("HELPERS_GRADING_LOG", None)
    probe = subprocess.run(
        [sys.executable, "-c", "from helpers import zoo; print(zoo.transformers_available())"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "False", probe.stderr
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(NOTEBOOK), "-p", "no:cacheprovider", "-n", "0", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_exercise_helpers_name_a_bad_model():
    """The capstone check's public helpers refuse what is not the model they read, by name."""
    with pytest.raises(TypeError, match=r"model\.blocks must be an nn\.ModuleList"):
        checks.blocks_with_the_same_weights(torch.nn.Linear(3, 3))
    with pytest.raises(TypeError, match="model must be a TransformerLM"):
        checks.repaired_logits_problem(torch.nn.Linear(3, 3))


def test_blocks_with_the_same_weights_names_deep_copies_and_not_fresh_blocks():
    model = checks.ReusedBlockLM(**checks.SETTINGS)
    model.blocks = torch.nn.ModuleList(copy.deepcopy(model.blocks[0]) for _ in range(2))
    (pair,) = checks.blocks_with_the_same_weights(model)
    assert pair.startswith("blocks.1 and blocks.0 (")
    for block in model.blocks:
        init_weights(block)
    assert checks.blocks_with_the_same_weights(model) == []


def _helpers_classes():
    import importlib
    import inspect
    import pkgutil

    import helpers

    names = ["helpers"] + [f"helpers.{m.name}" for m in pkgutil.walk_packages(helpers.__path__, "")]
    seen = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__.startswith("helpers") and cls not in seen:
                seen.append(cls)
    return seen


def test_help_of_an_overriding_method_documents_only_its_own_arguments():
    """help() shows an overriding method without a docstring under its parent's docstring: where
    the signatures differ (lesson 10's exercise 3 subclasses PositionAfterFirstBlockLM, whose
    forward has no return_hidden), the override must say what it takes itself."""
    import inspect

    inherited = []
    for cls in _helpers_classes():
        for attr, method in vars(cls).items():
            if not inspect.isfunction(method) or method.__doc__:
                continue
            for base in cls.__mro__[1:]:
                parent = base.__dict__.get(attr)
                if inspect.isfunction(parent) and parent.__doc__:
                    if base.__module__.startswith("helpers") and inspect.signature(
                        method
                    ) != inspect.signature(parent):
                        inherited.append(f"{cls.__module__}.{cls.__qualname__}.{attr}")
                    break
    assert len(_helpers_classes()) > 30  # the walk found the package's classes
    assert inherited == []
