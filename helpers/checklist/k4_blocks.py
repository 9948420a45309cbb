"""K4: every block maps [..., d_model] to the same shape and owns its weights.

The shapes come from the recorded calls of the blocks; ownership from identity: no block object
appears twice in the stack, and no two blocks hold a parameter over the same storage. Only the
parameters registered in each block are compared: a tensor that blocks share without registering
it (held in a plain list, say) is not seen.
"""

from __future__ import annotations

from .discover import ModelView
from .probe import n_params, params, storage
from .report import CheckResult

__all__ = ["check_k4"]


def check_k4(v: ModelView) -> CheckResult:
    ev, failed = [], False
    took = {"blocks": f"{len(v.blocks)} x {type(v.blocks[0]).__name__} ({v.blocks_text()})"}
    for b, call in enumerate(v.block_calls):
        if call.x.shape != call.y.shape or call.y.shape[-1] != v.d_model:
            failed = True
            ev.append(
                f"{v.block_names[b]} maps {call.x_shape} to {call.y_shape}, not d_model={v.d_model} to d_model"
            )
    shapes_ok = not failed
    seen: dict[int, int] = {}
    for b, blk in enumerate(v.blocks):
        if id(blk) in seen:
            failed = True
            calls = sum(1 for c in v.block_calls if c.module is blk)
            ev.append(
                f"{v.block_names[b]} is the same module object as {v.block_names[seen[id(blk)]]}: "
                f"one block is reused at several depths ({calls} calls)"
            )
        else:
            seen[id(blk)] = b
    owners: dict[int, tuple[int, str]] = {}
    shared = []
    for b, blk in enumerate(v.blocks):
        if seen.get(id(blk)) != b:
            continue
        for pname, p in params(blk):
            if p.numel() == 0:
                continue
            key = storage(p)
            if key in owners and owners[key][0] != b:
                shared.append((owners[key], (b, pname), list(p.shape)))
            else:
                owners.setdefault(key, (b, pname))
    for (b1, n1), (b2, n2), shape in shared[:3]:
        failed = True
        ev.append(
            f"{v.block_names[b1]}.{n1} and {v.block_names[b2]}.{n2} {shape} share one storage: "
            f"the blocks share weights"
        )
    if len(shared) > 3:
        ev.append(f"... {len(shared) - 3} more shared parameters")
    if shapes_ok:
        ev.append(
            f"every one of the {len(v.blocks)} blocks maps {v.hidden_shape} to {v.hidden_shape}"
        )
    if failed:
        return CheckResult(
            "K4",
            "failed",
            "blocks do not all map d_model to d_model with their own weights",
            ev,
            took,
        )
    per = sorted({n_params(b) for b in v.blocks})
    ev.append(
        f"no module or parameter storage is shared between blocks ({', '.join(map(str, per))} parameters per block)"
    )
    return CheckResult(
        "K4", "passed", "every block maps d_model to d_model and owns its weights", ev, took
    )
