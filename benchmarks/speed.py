"""The ``speed`` section: the course's training step against a GPT written the way the reference
implementations write it (issue 40), side by side in one run, one thread each.

The reference is defined here, from this description (no project's code copied): nanoGPT's CPU
"baby GPT" shape (d_model 128, 4 layers, 4 heads, context 64, batch 12, float32), token and
learned position embeddings, pre-norm blocks with torch's fused ``nn.LayerNorm``, one packed
q/k/v projection, ``F.scaled_dot_product_attention(is_causal=True)``, ``F.gelu``, a final layer
norm and the output projection tied to the token embedding; AdamW, gradient clipped to norm 1.

The course's side is :class:`helpers.pretrain.Pretraining` at the same shape and dtype (learned
position, as the reference) with its own loop: once as it runs by default (the held-out loss
every 50 steps), once without evaluation in between (its one evaluation at the end of the call
timed alone and taken off). Both draw the same batches: :func:`helpers.training.get_batch` with
the same seeded generator.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.common import ok

#: nanoGPT's CPU "baby GPT" shape
SHAPE = {"d_model": 128, "n_layers": 4, "n_heads": 4, "block_size": 64, "batch_size": 12}
LR = 1e-3
TARGET_RATIO = 1.2


class _RefBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)  # 3 x [B, n, d]
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, h, n, d_head]
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class ReferenceGPT(nn.Module):
    """A GPT the way the reference implementations write it (see the module's docstring)."""

    def __init__(self, vocab: int, d: int, n_layers: int, heads: int, block_size: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
        self.blocks = nn.ModuleList(_RefBlock(d, heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y = tokens[:, :-1], tokens[:, 1:]
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for block in self.blocks:
            h = block(h)
        logits = self.head(self.ln_f(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def _reference_steps(corpus, steps: int, seed: int) -> list[float]:
    """Per-step seconds of ``steps`` reference steps on the batches seed ``seed`` draws."""
    from helpers.training import get_batch

    torch.manual_seed(seed)
    s = SHAPE
    model = ReferenceGPT(
        corpus.tokenizer.vocab_size, s["d_model"], s["n_layers"], s["n_heads"], s["block_size"]
    )
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    times = []
    for _ in range(steps):
        start = time.process_time()
        tokens = get_batch(corpus.train_ids, s["batch_size"], s["block_size"], gen)
        loss = model.loss(tokens)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.process_time() - start)
    return times


def _course_run(corpus, seed: int, eval_every: int):
    from helpers.pretrain import Pretraining

    s = SHAPE
    return Pretraining(
        corpus,
        d_model=s["d_model"],
        n_layers=s["n_layers"],
        n_heads=s["n_heads"],
        block_size=s["block_size"],
        batch_size=s["batch_size"],
        lr=LR,
        seed=seed,
        eval_every=eval_every,
        positional="learned",
        dtype=torch.float32,
    )


def bench_speed(steps: int = 100, seed: int = 0) -> dict:
    """One run: reference, course (default loop), course (no evaluation), reference again;
    CPU ms per step of each (this process's CPU time, one thread: a busy shared machine stretches
    wall time, CPU time much less), the reference's the median of its two halves pooled."""
    from helpers.pretrain import Corpus
    from helpers.reproducible import one_thread
    from helpers.training import evaluate

    corpus = Corpus.from_text()
    with one_thread():
        ref = _reference_steps(corpus, steps, seed)[5:]  # the first steps warm up
        run = _course_run(corpus, seed, eval_every=50)
        start = time.process_time()
        run.train(steps, progress="none")
        course_eval_ms = 1000 * (time.process_time() - start) / steps
        run = _course_run(corpus, seed, eval_every=10**9)
        run.train(5, progress="none")  # warm-up, as the reference's first steps
        start = time.process_time()
        run.train(5 + steps, progress="none")
        course_s = time.process_time() - start
        start = time.process_time()
        evaluate(run.model, run.val_ids, run.block_size)  # the call's one evaluation, alone
        one_eval = time.process_time() - start
        course_ms = 1000 * (course_s - one_eval) / steps
        ref += _reference_steps(corpus, steps, seed)[5:]
        threads = torch.get_num_threads()
    ref_ms = 1000 * statistics.median(ref)
    return {
        "shape": dict(SHAPE, dtype="float32", lr=LR),
        "steps": steps,
        "threads": threads,
        "reference_ms": ref_ms,
        "course_ms": course_ms,
        "course_eval_ms": course_eval_ms,
        "ratio": course_ms / ref_ms,
        "ratio_eval": course_eval_ms / ref_ms,
        "eval_s": one_eval,
    }


def run_speed(args) -> dict:
    b = bench_speed(steps=getattr(args, "speed_steps", 100))
    print(
        f"speed: reference {b['reference_ms']:.1f} ms/step, course {b['course_ms']:.1f} "
        f"(with evaluation {b['course_eval_ms']:.1f}); ratio {b['ratio']:.2f}",
        flush=True,
    )
    return b


def render_speed(b: dict) -> list[str]:
    s = b["shape"]
    return [
        f"nanoGPT's CPU shape: d_model {s['d_model']}, {s['n_layers']} layers, {s['n_heads']} "
        f"heads, context {s['block_size']}, batch {s['batch_size']}, {s['dtype']}, AdamW lr "
        f"{s['lr']:g}, clip 1; {b['threads']} torch thread; {b['steps']} steps each on the same "
        "batches of tiny-shakespeare, in one run (reference, course, course, reference); "
        "each figure is CPU time per step (this process's, one thread: a busy machine stretches "
        "wall time, CPU time much less), the reference's the median of its steps. "
        "The course's step with evaluation is its default loop (the held-out loss, 8,192 "
        f"predictions, every 50 steps; one evaluation takes {b['eval_s']:.2f} s).",
        "",
        f"| reference GPT (fused ops) | course `Pretraining` | ratio (target <= {TARGET_RATIO}) "
        "| | course, evaluation every 50 steps | ratio |",
        "|---|---|---|---|---|---|",
        f"| {b['reference_ms']:.1f} ms | {b['course_ms']:.1f} ms | {b['ratio']:.2f} "
        f"| {ok(b['ratio'], TARGET_RATIO)} | {b['course_eval_ms']:.1f} ms | {b['ratio_eval']:.2f} |",
    ]
