"""The ``block`` section: the course's ``TransformerBlock`` forward + backward against PyTorch's
``nn.TransformerEncoderLayer`` at the same size, as a ratio of medians in one run."""

from __future__ import annotations

import statistics
import time

from benchmarks.common import TARGETS, ok


def bench_block(repeats: int = 15, device: str = "cpu") -> dict:
    """The ``block`` section on ``device`` (``--device``; ``helpers.pretrain.check_device``).
    On a GPU the weights and input are the CPU's (drawn there, then moved), the times are the
    device's own (each step waits for the device to finish) and so is the ratio."""
    import torch
    from torch import nn

    from helpers import TransformerBlock
    from helpers.pretrain import check_device

    dev = check_device(device)
    torch.manual_seed(0)
    d, heads, d_ff, batch, n = 512, 8, 2048, 8, 128
    ours = TransformerBlock(d, heads, d_ff, norm="pre", activation="relu").to(dev)
    ref = nn.TransformerEncoderLayer(d, heads, d_ff, dropout=0.0, batch_first=True, norm_first=True)
    ref = ref.to(dev)
    x = torch.randn(batch, n, d).to(dev)
    wait = {"cuda": torch.cuda.synchronize, "mps": lambda: torch.mps.synchronize()}.get(
        dev.type, lambda: None
    )

    def step(module):
        module(x).sum().backward()
        wait()

    for module in (ours, ref):
        for _ in range(3):
            step(module)
    t_ours, t_ref = [], []
    for _ in range(repeats):
        for module, sink in ((ours, t_ours), (ref, t_ref)):
            start = time.perf_counter()
            step(module)
            sink.append(time.perf_counter() - start)
    m_ours, m_ref = statistics.median(t_ours), statistics.median(t_ref)
    return {
        "size": f"d_model {d}, {heads} heads, d_ff {d_ff}, batch {batch} x {n} tokens, pre-norm, ReLU",
        "ours_ms": m_ours * 1000,
        "torch_ms": m_ref * 1000,
        "ratio": m_ours / m_ref,
        "threads": torch.get_num_threads(),
        "device": str(dev),
    }


def run_block(args) -> dict:
    b = bench_block(device=getattr(args, "device", "cpu"))
    print(f"block: ratio {b['ratio']:.2f}", flush=True)
    return b


def render_block(b: dict) -> list[str]:
    t = TARGETS
    return [
        f"Size: {b['size']}; {b['threads']} torch threads; median of interleaved repeats"
        + ("." if b.get("device", "cpu") == "cpu" else f"; on {b['device']}."),
        "",
        f"| course `TransformerBlock` | `nn.TransformerEncoderLayer` | ratio (target <= {t['block_ratio']}) | |",
        "|---|---|---|---|",
        f"| {b['ours_ms']:.1f} ms | {b['torch_ms']:.1f} ms | {b['ratio']:.2f} | {ok(b['ratio'], t['block_ratio'])} |",
    ]
