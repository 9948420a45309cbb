"""Numbers that come out the same on every machine (CONTRIBUTING.md, "Numbers in stored outputs").

Two settings the lessons' experiments run under:

* :func:`default_dtype`: new parameters are created, and randomly drawn, in float64. float32
  draws differ between torch's CPU kernel paths (AVX2 and the portable one); float64 draws do not.
* :func:`one_thread`: one CPU thread, so the sums inside each matrix product happen in the same
  order on every run and every core count; for the lessons' small models more threads only add
  overhead.

Used by lesson 5 (:mod:`helpers.diagnostics`, :mod:`helpers.warmup`), lesson 4
(:mod:`helpers.length`), lesson 8 (:mod:`helpers.training`) and lesson 9.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["default_dtype", "one_thread"]


@contextmanager
def default_dtype(dtype: torch.dtype):
    """Inside the ``with`` block, new parameters are created (and randomly drawn) in ``dtype``
    (torch.float32 or torch.float64); the previous default is restored afterwards.

    ``with default_dtype(torch.float64): model = TransformerLM(...)`` gives a model whose
    initial weights are float64 draws, the same bits on every CPU kernel path.
    """
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextmanager
def one_thread():
    """Inside the ``with`` block torch uses one CPU thread; the previous count is restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
