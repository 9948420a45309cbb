"""Lesson 10 (capstone): the sheet's checklist as an executable audit of a language model.

    report = audit(model)        # any PyTorch LM: tokens [B, n] -> logits [B, n, vocab_size]
    report                        # a table in a notebook; print(report) as text
    report.passed, report.status("K3"), report["K5"].evidence, report["K3"].took

The five checks (the end of the sheet, K1-K5 of the course specification) are decided by
*observing* the model, not by reading attribute names: forward hooks record what every module
receives and returns for a probe input the audit makes itself; experiments change one thing
(zero a sublayer's output, permute positions, nudge one row of the embedding) and watch what
moves; parameters are compared by identity and by storage; tolerances follow the precision the
model computes in (float32, float16, bfloat16).

The package has the shape the capstone teaches, one idea per module, each readable alone:

* :mod:`.report`: :class:`CheckResult` and :class:`AuditReport`, the verdicts and their display;
* :mod:`.probe`: hooks, replays, tolerances, the layouts of the stream (the machinery);
* :mod:`.discover`: what the audit takes for the embedding, blocks, sublayers, norms,
  feed-forward and output projection;
* :mod:`.mechanism`: which position mechanism an attention sublayer has (K1 names it);
* :mod:`.k1_position`, :mod:`.k2_residual`, :mod:`.k3_feedforward`, :mod:`.k4_blocks`,
  :mod:`.k5_tying`: one check each, its rule in its docstring;
* :mod:`.run`: :func:`audit` itself; :mod:`.broken`: the deliberately broken models.

Limits, stated rather than hidden: K1 sees position added to the stream, and position that an
attention sublayer injects itself (the sheet's rule fails, COURSE.md C4.8), which it names from
what it observed: a local window, rotary, ALiBi, T5's relative bias, position by absolute index,
or "cannot name" with the reason (a window larger than its 32-position probe is not seen); K3
sees a feed-forward computed by modules, not one written inline with bare tensors in a block's
forward; K4 compares the parameters registered in each block. The probes are small (2 sequences
of 8 tokens). What the audit cannot decide it reports as *undecided*, with the reason; it never
guesses. Hints (``embedding=``, ``blocks=``, ``output=``, ``vocab_size=``, ``probe_tokens=``,
``forward=``) help it on models it cannot decode by itself.
"""

from __future__ import annotations

from .broken import (
    BROKEN_MODELS,
    CopiedOutputLM,
    MissingResidualLM,
    NarrowFeedForwardLM,
    PerPositionFeedForwardLM,
    PositionAfterFirstBlockLM,
    ReusedBlockLM,
    TorchEncoderLM,
    broken_model,
)
from .mechanism import Mechanism
from .report import CHECKS, STATUSES, AuditReport, CheckResult
from .run import audit

__all__ = [
    "CHECKS",
    "STATUSES",
    "CheckResult",
    "AuditReport",
    "Mechanism",
    "audit",
    "TorchEncoderLM",
    "PositionAfterFirstBlockLM",
    "MissingResidualLM",
    "NarrowFeedForwardLM",
    "PerPositionFeedForwardLM",
    "ReusedBlockLM",
    "CopiedOutputLM",
    "BROKEN_MODELS",
    "broken_model",
]
