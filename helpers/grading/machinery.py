"""Coursework (lessons 4-10): the machinery, the observers and the converters bound to one set of
dependencies.

Built by :func:`_machinery` from a dict of dependencies (:func:`helpers.grading.dependencies.
_dependencies`): the unsealed recorder (:mod:`helpers.grading`, for the lessons' tests, the
visible checks and developers' logs) builds one when it is imported; the sealed recorder builds
its own before any notebook code runs. Neither part reads a module's globals or builtins at run
time (tests/test_grading_machinery.py checks it of every module of the machinery).
"""

from __future__ import annotations

from .observers import _observers
from .plaindata import _plain_data
from .provenance import _provenance


def _machinery(d: dict) -> dict:
    """Where code comes from (:func:`helpers.grading.provenance._provenance`), the observers
    (:func:`helpers.grading.observers._observers`) and the converters
    (:func:`helpers.grading.plaindata._plain_data`), bound to the dependencies ``d``, the
    functions of all three counted as the grader's own code. Returns a dict of functions."""
    where = _provenance(d)
    observers = _observers(d, where)
    converters = _plain_data(d)
    where["add_codes"](*where.pop("own"), *observers.pop("own"), *converters.pop("own"))
    return {
        "observe": observers["observe"],
        "begin": observers["begin"],
        "end": observers["end"],
        "plain": converters["plain"],
        "fingerprint": converters["fingerprint"],
        "inputs_after": converters["inputs_after"],
        "to_json": converters["to_json"],
        "add_codes": where["add_codes"],
        "kind_of": where["kind_of"],
        "attributed_to_user": where["attributed_to_user"],
        "note": observers["note"],
        "exposed": observers["exposed"],
        "active": observers["active"],
    }
