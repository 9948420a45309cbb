"""``audit(model)``: check the arguments, discover the model, run the five checks, report.

Each check is a function of the :class:`~helpers.checklist.discover.ModelView` in its own module;
a check that cannot observe what it needs is *undecided*, with the reason and the hint that would
help; a model that crashes on the probe is reported, not raised. The model is left as it was found
(training mode, weights, hooks), and torch's thread count is restored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .. import _validate as check
from .discover import ModelView
from .k1_position import check_k1
from .k2_residual import check_k2
from .k3_feedforward import check_k3
from .k4_blocks import check_k4
from .k5_tying import check_k5
from .probe import Failure, resolve
from .report import CHECKS, AuditReport, CheckResult

__all__ = ["audit"]

_CHECK_FUNCTIONS = {"K1": check_k1, "K2": check_k2, "K3": check_k3, "K4": check_k4, "K5": check_k5}


def audit(
    model: nn.Module,
    *,
    vocab_size: int | None = None,
    embedding: nn.Module | str | None = None,
    blocks: Sequence[nn.Module] | str | None = None,
    output: nn.Module | str | None = None,
    probe_tokens: torch.Tensor | None = None,
    forward: Callable | None = None,
    seed: int = 0,
    title: str = "",
) -> AuditReport:
    """Lesson 10. Run the sheet's checklist K1-K5 on ``model`` by observing it; return the report.

    ``model`` maps token ids [batch, n] to logits [batch, n, vocab_size] (a tensor, a tuple whose
    first item is the logits, or an object with ``.logits``). The audit finds the token embedding
    (the module called with the token ids), the blocks (the ModuleList/Sequential of same-type
    modules that receive the [batch, n, d_model] stream), their sublayers (the modules inside a
    block that return the stream (or its flattening [B*n, d_model]) and contain no normalization;
    the feed-forward among them by what it does, see :mod:`.k3_feedforward`) and the output projection
    (the last module whose own weight is [vocab_size, d_model] and that returns vocab-sized
    outputs). Each check's result says which modules it took for what (``report["K3"].took``).

    Hints for models it cannot decode: ``embedding``, ``blocks`` (a list of modules, or the dotted
    name of their container), ``output`` (modules or dotted names), ``vocab_size``,
    ``probe_tokens`` ([batch >= 2, n] ids), ``forward(model, tokens) -> logits``.
    The model is put in eval mode for the audit and restored afterwards; its weights are unchanged.
    The audit runs torch on one thread (restored afterwards): its probes are tiny.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if vocab_size is not None:
        vocab_size = check.positive_int("vocab_size", vocab_size)
    seed = check.positive_int("seed", seed, minimum=0)
    if forward is not None and not callable(forward):
        raise TypeError(
            f"forward must be a function forward(model, tokens) -> logits, got {type(forward).__name__}"
        )
    embedding = None if embedding is None else resolve(model, embedding, "embedding")
    output = None if output is None else resolve(model, output, "output")
    if blocks is not None:
        if isinstance(blocks, str):
            container = resolve(model, blocks, "blocks")
            if not isinstance(container, nn.ModuleList | nn.Sequential):
                raise TypeError(
                    f"blocks={blocks!r} must name the container of the blocks (an nn.ModuleList or "
                    f"nn.Sequential), got a {type(container).__name__}"
                )
            blocks = (list(container), blocks)
        elif isinstance(blocks, Sequence | nn.ModuleList | nn.Sequential) and all(
            isinstance(b, nn.Module) for b in blocks
        ):
            blocks = (list(blocks), "")
        else:
            raise TypeError(
                f"blocks must be a list of the model's blocks, their container or its dotted name, "
                f"got {type(blocks).__name__}"
            )
        if not blocks[0]:
            raise ValueError("blocks must name at least one block, got an empty list")
    if probe_tokens is not None:
        check.tensor("probe_tokens", probe_tokens, ndim=2, layout="[batch, n]")
        if probe_tokens.is_floating_point() or probe_tokens.is_complex():
            raise TypeError(
                f"probe_tokens must hold integer token ids (torch.long), got dtype {probe_tokens.dtype}"
            )
        if probe_tokens.shape[0] < 2 or probe_tokens.shape[1] < 2:
            raise ValueError(
                f"probe_tokens must hold at least 2 sequences of at least 2 tokens [batch >= 2, n >= 2], "
                f"got shape {list(probe_tokens.shape)}"
            )
        if torch.equal(probe_tokens[0], probe_tokens[1]):
            raise ValueError("probe_tokens: the first two sequences must differ (K2 compares them)")
        probe_tokens = probe_tokens.long()
    modes = {m: m.training for m in model.modules()}
    model.eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the probes are tiny: one thread is ~30x faster on a busy machine
    results: dict[str, CheckResult] = {}
    try:
        view = ModelView(model, vocab_size, embedding, blocks, output, probe_tokens, forward, seed)
        try:
            view.discover()
        except Exception as e:  # noqa: BLE001 - a model the audit cannot read is reported, not raised
            reason = (
                str(e)
                if isinstance(e, Failure)
                else f"running the model raised {type(e).__name__}: {e}"
            )
            for k in CHECKS:
                results[k] = CheckResult(
                    k, "undecided", "the audit could not read the model", [reason]
                )
            return AuditReport(results, view.found, title)
        for k, fn in _CHECK_FUNCTIONS.items():
            try:
                results[k] = fn(view)
            except Failure as e:
                results[k] = CheckResult(k, "undecided", "could not be observed", [str(e)])
            except Exception as e:  # noqa: BLE001 - a model the audit cannot drive is reported, not raised
                results[k] = CheckResult(
                    k, "undecided", "the experiment failed", [f"{type(e).__name__}: {e}"]
                )
        return AuditReport(results, view.found, title)
    finally:
        torch.set_num_threads(threads)
        for m, mode in modes.items():
            m.training = mode
