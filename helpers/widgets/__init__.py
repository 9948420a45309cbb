"""One interactive explorer per lesson. Each function returns a displayable widget.

========  ===========================  =========================================
lesson    explorer                     module
========  ===========================  =========================================
4         ``positional_explorer()``    :mod:`helpers.widgets.position`
5         ``norm_explorer()``          :mod:`helpers.widgets.residual`
6         ``feedforward_explorer()``   :mod:`helpers.widgets.feedforward`
7         ``depth_explorer()``         :mod:`helpers.widgets.depth`
8         ``tying_explorer()``         :mod:`helpers.widgets.tying`
9         ``generation_explorer()``    :mod:`helpers.widgets.generation`
========  ===========================  =========================================

Modules are imported on first use, so opening one lesson does not build the others.
"""

from importlib import import_module

from ._base import Explorer

_EXPLORERS = {
    "positional_explorer": "position",
    "norm_explorer": "residual",
    "feedforward_explorer": "feedforward",
    "depth_explorer": "depth",
    "tying_explorer": "tying",
    "generation_explorer": "generation",
}

__all__ = ["Explorer", *_EXPLORERS]


def __getattr__(name: str):
    if name in _EXPLORERS:
        return getattr(import_module(f".{_EXPLORERS[name]}", __name__), name)
    raise AttributeError(f"module 'helpers.widgets' has no attribute {name!r}")
