"""Checks for lesson 10's exercise 4 (an audit of a model you did not write): the student's
five verdicts, compared with :func:`helpers.checklist.audit` wherever it decides, and with this
module's own experiments (:func:`undecided_by_experiment`) where it leaves a check undecided, so
that the check's verdict is the grade's. :mod:`helpers.checks.audit` re-exports every name (the
lesson imports them from there); the repair exercises 1-3 are checked there.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..checklist import audit
from ._core import call_described, fail, passed

__all__ = ["undecided_by_experiment", "VERDICTS", "normalized_verdicts", "check_audit_verdicts"]


#: The two verdicts a student gives on a check of the sheet (an undecided check must be decided).
VERDICTS = ("passed", "failed")


def normalized_verdicts(verdicts) -> dict:
    """Lesson 10, exercise 4. ``{"K1": "passed" | "failed", ...}`` as plain ``str`` -> ``str``,
    each verdict stripped and lower-cased (``"Failed "`` reads as ``"failed"``): what the hidden
    test records and what :func:`check_audit_verdicts` reads, so both read an answer alike.
    Anything that is not a mapping is returned as it is."""
    if not isinstance(verdicts, dict):
        return verdicts
    return {str(k).strip().upper(): str(v).strip().lower() for k, v in verdicts.items()}


def check_audit_verdicts(audit_verdicts, model=None) -> None:
    """Lesson 10, exercise 4 (an audit of a model you did not write). ``audit_verdicts()``
    returns the student's verdict on each check K1-K5 for ``model`` (default
    :func:`helpers.zoo.mystery_model`): ``"passed"`` or ``"failed"``. Checked here: the form,
    agreement with :func:`helpers.checklist.audit` on every check the audit decides, and with
    :func:`undecided_by_experiment` on the checks it leaves undecided (the hidden tests grade the
    same verdicts; the explanation is graded by the instructor)."""
    from ..zoo import mystery_model

    ex = "Exercise 4 (audit)"
    got = call_described(ex, audit_verdicts, (), name="audit_verdicts", shown="")
    if got is None:
        fail(ex, 'audit_verdicts() returned None: return a dict {"K1": "passed" or "failed", ...}.')
    if not isinstance(got, dict):
        fail(
            ex,
            f'audit_verdicts() should return a dict {{"K1": "passed" or "failed", ...}}, got a '
            f"{type(got).__name__}.",
        )
    got = normalized_verdicts(got)
    want_keys = ("K1", "K2", "K3", "K4", "K5")
    missing = [k for k in want_keys if k not in got]
    extra = sorted(k for k in got if k not in want_keys)
    if missing or extra:
        fail(
            ex,
            "the dict needs exactly the keys K1, K2, K3, K4, K5"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unexpected {', '.join(extra)}" if extra else "")
            + ".",
        )
    for k in want_keys:
        if got[k] == "undecided":
            fail(
                ex,
                f'{k} is "undecided": where the audit cannot decide a check, you decide it, by an '
                'experiment of your own; give "passed" or "failed".',
            )
        if got[k] not in VERDICTS:
            fail(ex, f'{k} is {got[k]!r}: each verdict is "passed" or "failed".')
    report = audit(mystery_model() if model is None else model)
    for r in report:
        if r.status != "undecided" and got[r.check] != r.status:
            fail(
                ex,
                f"your {r.check} verdict is {got[r.check]!r}, the audit's is {r.status!r} "
                f"({r.finding}): read its evidence; if you still disagree, say why in your "
                "explanation, but the grade follows the sheet's rule.",
            )
    decided = undecided_by_experiment(mystery_model() if model is None else model)
    for k in report.undecided:
        if k in decided and got[k] != decided[k][0]:
            fail(
                ex,
                f"your {k} verdict is {got[k]!r}, and the audit cannot decide {k}, but an "
                f"experiment on the model can: {decided[k][1]} Run it on a copy "
                "(copy.deepcopy(mystery)) and decide from what you see.",
            )
    open_checks = [k for k in report.undecided if k not in decided]
    passed(
        ex,
        "five verdicts"
        + (
            f"; {', '.join(k for k in want_keys if k not in report.undecided)} agree with the audit"
            if len(report.undecided) < len(want_keys)
            else ""
        )
        + (
            f"; {', '.join(open_checks)}: the audit cannot decide "
            + ("it" if len(open_checks) == 1 else "them")
            + ", so this check cannot tell you whether yours "
            + ("is" if len(open_checks) == 1 else "are")
            + " right (the hidden tests and your explanation are graded)"
            if open_checks
            else ""
        )
        + (
            f"; {', '.join(k for k in report.undecided if k in decided)} agree with this check's "
            "own experiments (your explanation is graded by your instructor)"
            if any(k in decided for k in report.undecided)
            else ""
        ),
    )


def _zeros(module, args, output):
    return torch.zeros_like(output)


def undecided_by_experiment(model) -> dict[str, tuple[str, str]]:
    """Lesson 10, exercise 4: K2 and K3 of a model the audit cannot read (the kind of
    :func:`helpers.zoo.mystery_model`: ``model.layers``, each with an ``attention`` sublayer and
    an inline feed-forward ``w_gate``/``w_down``), decided by experiment on a copy, as
    ``{check: (verdict, the experiment in words)}``. K2: with every attention returning zeros
    and every ``w_down`` zeroed, a residual layer returns its input. K3: ``w_gate`` maps d_model
    up and ``w_down`` back down, and with attention off permuting the tokens permutes each
    layer's output alike. Empty for a model of another shape (nothing decided)."""
    layers = getattr(model, "layers", None)
    needed = ("attention", "w_gate", "w_down")
    if not isinstance(layers, nn.ModuleList) or not all(
        all(hasattr(layer, n) for n in needed) for layer in layers
    ):
        return {}
    model = copy.deepcopy(model)
    embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    if not embeddings:
        return {}
    vocab = embeddings[0].num_embeddings
    tokens = torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(1))
    seen: dict = {}
    hooks = [layer.attention.register_forward_hook(_zeros) for layer in model.layers]
    for i, layer in enumerate(model.layers):
        hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: seen.update({i: (a[0], o)})))
    try:
        with torch.no_grad():
            model(tokens)
            plain = dict(seen)
            model(tokens[:, perm])
            permuted = dict(seen)
            for layer in model.layers:
                layer.w_down.zero_()
            model(tokens)
            off = dict(seen)
    finally:
        for h in hooks:
            h.remove()
    residual = all(torch.allclose(y, x) for x, y in off.values())
    expands = all(
        layer.w_gate.shape[1] > layer.w_gate.shape[0] == layer.w_down.shape[1]
        for layer in model.layers
    )
    position_wise = all(
        torch.allclose(permuted[i][1], y[:, perm], atol=1e-6) for i, (_, y) in plain.items()
    )
    verdict = {True: "passed", False: "failed"}
    return {
        "K2": (
            verdict[residual],
            "switch every sublayer off (a hook returning zeros on each attention, each layer's "
            "w_down zeroed) and see whether each layer then returns its input.",
        ),
        "K3": (
            verdict[expands and position_wise],
            "read w_gate's and w_down's shapes, and with attention off, permute the tokens and "
            "see whether each layer's output is permuted the same way.",
        ),
    }
