"""Gradient and activation diagnostics (lessons 5 and 7).

gradient_norms:    ||dL/dW2_l|| per block l (the feed-forward output weight)
activation_scales: sqrt(mean(h_l^2)) per layer
init_profile:      both, for a fresh model at initialization (C5.6)
load_init_profiles: C5.6's gradient curves over 5 seeds and 3 depths, shipped as data
                   (tools/init_profiles.py writes helpers/data/init_profiles.json)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import nn

from . import _validate as check
from .attention import MultiHeadAttention
from .feedforward import FeedForward
from .model import INITS, LMConfig, init_weights, next_token_loss, seeded_model
from .normalization import NORM_PLACEMENTS, Residual

__all__ = [
    "find_blocks",
    "feedforward_of",
    "next_token_loss",
    "gradient_norms",
    "activation_scales",
    "DeepStack",
    "STACK_INITS",
    "silence_sublayers",
    "SCALE_SITES",
    "LayerProfile",
    "init_profile",
    "PROFILES",
    "InitProfiles",
    "init_profiles",
    "save_init_profiles",
    "load_init_profiles",
]


def find_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's blocks in order: ``model.blocks`` (an iterable of modules) or, for a bare
    ``nn.ModuleList``/``nn.Sequential`` of blocks, the model itself."""
    blocks = getattr(model, "blocks", None)
    if blocks is None and isinstance(model, nn.ModuleList | nn.Sequential):
        blocks = model
    if blocks is None:
        raise TypeError(
            f"model must have a .blocks attribute (an nn.ModuleList of blocks), as the course's "
            f"TransformerLM has; got {type(model).__name__} without one"
        )
    blocks = list(blocks)
    if not blocks:
        raise ValueError(f"model {type(model).__name__} has no blocks (an empty list of blocks)")
    return blocks


def feedforward_of(block: nn.Module) -> FeedForward:
    """The first :class:`FeedForward` inside ``block``."""
    for m in block.modules():
        if isinstance(m, FeedForward):
            return m
    raise TypeError(f"block {type(block).__name__} contains no helpers.FeedForward module")


def gradient_norms(model: nn.Module, tokens: torch.Tensor) -> list[float]:
    """Lesson 5 (C5.2, C5.6). One float per block, in order: ``||dL/dW2||`` (Frobenius norm)
    of that block's feed-forward output weight, for the next-token loss on ``tokens``.

    Uses ``torch.autograd.grad`` on those weights only, so it leaves no ``.grad`` behind and
    does not change the model.
    """
    weights = [feedforward_of(b).w2.weight for b in find_blocks(model)]
    loss = next_token_loss(model, tokens)
    grads = torch.autograd.grad(loss, weights)
    return [float(g.norm()) for g in grads]


SCALE_SITES = ("stream", "sublayer_input")


def _rms(t: torch.Tensor) -> float:
    """Root mean square of all entries: sqrt(mean(t^2))."""
    return float(t.detach().pow(2).mean().sqrt())


def activation_scales(model: nn.Module, tokens: torch.Tensor, where: str = "stream") -> list[float]:
    """Lesson 5 (C5.3). The scale (root mean square, ``sqrt(mean(h^2))``) of activations per layer.

    ``where="stream"``: L+1 floats, the residual stream h_0 (the input of block 1) and the output
    h_l of each block l = 1..L. ``where="sublayer_input"``: L floats, the input that each
    block's feed-forward sublayer sees (after the pre-norm LayerNorm, if any).
    Works on any model with ``.blocks`` (TransformerLM, DeepStack); runs without gradients and
    leaves the model unchanged.
    """
    check.choice("where", where, SCALE_SITES)
    blocks = find_blocks(model)
    scales: list[float] = []
    handles = []
    if where == "stream":
        handles.append(blocks[0].register_forward_pre_hook(lambda m, a: scales.append(_rms(a[0]))))
        for b in blocks:
            handles.append(b.register_forward_hook(lambda m, a, out: scales.append(_rms(out))))
    else:
        for b in blocks:
            ffn = feedforward_of(b)
            handles.append(ffn.register_forward_pre_hook(lambda m, a: scales.append(_rms(a[0]))))
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for h in handles:
            h.remove()
    return scales


#: Initializations :class:`DeepStack` accepts: those of :func:`helpers.init_weights`, and Kaiming.
STACK_INITS = (*INITS, "kaiming")


class DeepStack(nn.Module):
    """Lesson 5 (C5.2). A deep stack of feed-forward blocks, with or without residuals.

    ``tokens [B, n] -> embedding [B, n, d_model] -> n_layers blocks -> logits [B, n, vocab_size]``

    ``residual=True``:  each block is ``Residual(FeedForward, d_model, norm)``, so
    ``h_l = h_{l-1} + FFN(h_{l-1})`` (for ``norm="none"``);
    ``residual=False``: each block is the bare ``FeedForward``, so ``h_l = FFN(h_{l-1})``, and
    the gradient has to pass through every layer's weights, with no identity path.

    No attention: the point is depth alone. ``init`` as in :func:`helpers.init_weights`
    ("torch" keeps PyTorch's default uniform(+-1/sqrt(fan_in)) initialization), or
    ``"kaiming"``: every Linear weight Kaiming-normal for ReLU (std sqrt(2 / fan_in), He et al.
    2015), biases 0, the embedding left at PyTorch's N(0, 1). Applied to both W1 and W2, it
    doubles the mean square of the signal at every block (C5.2's exploding case).
    It works with :func:`gradient_norms` and :func:`activation_scales`.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_layers: int,
        residual: bool = True,
        norm: str = "none",
        d_ff: int | None = None,
        init: str = "torch",
    ):
        super().__init__()
        self.vocab_size = check.positive_int("vocab_size", vocab_size)
        self.d_model = check.positive_int("d_model", d_model)
        n_layers = check.positive_int("n_layers", n_layers)
        if not isinstance(residual, bool):
            raise TypeError(f"residual must be True or False, got {residual!r}")
        check.choice("norm", norm, NORM_PLACEMENTS)
        if not residual and norm != "none":
            raise ValueError(
                f"norm={norm!r} needs residual=True (pre/post-norm place the norm around a "
                f"residual connection); with residual=False use norm='none'"
            )
        self.residual, self.norm = residual, norm
        self.embedding = nn.Embedding(vocab_size, d_model)  # [vocab_size, d_model]
        self.blocks = nn.ModuleList(
            Residual(FeedForward(d_model, d_ff), d_model, norm)
            if residual
            else FeedForward(d_model, d_ff)
            for _ in range(n_layers)
        )
        self.head = nn.Linear(d_model, vocab_size)  # [d_model] -> [vocab_size]
        check.choice("init", init, STACK_INITS)
        if init == "kaiming":
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
                    nn.init.zeros_(module.bias)
        else:
            init_weights(self, init)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check.token_ids("tokens", tokens, self.vocab_size)
        h = self.embedding(tokens)  # [B, n, d_model]
        for block in self.blocks:
            h = block(h)  # [B, n, d_model]
        return self.head(h)  # [B, n, vocab_size]

    def extra_repr(self) -> str:
        return f"residual={self.residual}, norm={self.norm!r}"


def silence_sublayers(model: nn.Module) -> nn.Module:
    """Lesson 5 (C5.5). Zero the last projection of every sublayer, in place, so that every
    attention sublayer (W_O and its bias) and every feed-forward sublayer (W2 and b2) outputs
    exactly 0. Then a pre-norm block computes ``x + 0 = x``, a post-norm block ``LN(x + 0)``.
    """
    found = 0
    with torch.no_grad():
        for m in model.modules():
            last = (
                m.out_proj
                if isinstance(m, MultiHeadAttention)
                else m.w2
                if isinstance(m, FeedForward)
                else None
            )
            if last is not None:
                last.weight.zero_()
                if last.bias is not None:
                    last.bias.zero_()
                found += 1
    if not found:
        raise TypeError(
            f"model {type(model).__name__} contains no MultiHeadAttention or FeedForward sublayer"
        )
    return model


class LayerProfile(NamedTuple):
    """Per-layer figures of one model configuration, averaged over seeds (lesson 5)."""

    gradients: list[float]  # ||dL/dW2_l||, l = 1..L
    scales: list[float]  # RMS of the residual stream h_0 .. h_L


def init_profile(
    norm: str,
    n_layers: int,
    d_model: int = 128,
    seeds=(0, 1, 2, 3, 4),
    vocab_size: int = 1000,
    batch: int = 16,
    n: int = 64,
    n_heads: int = 4,
    dtype: torch.dtype = torch.float32,
) -> LayerProfile:
    """Lesson 5 (C5.3, C5.6). Gradient norms and activation scales of a fresh model, at init.

    For each seed: a :class:`helpers.TransformerLM` (``norm``, ReLU, d_ff = 4 d_model, tied
    output, sinusoidal position) with the original Transformer's initialization
    (``init="xavier"``: Xavier-normal weights, zero biases, embeddings N(0, 1/d_model) scaled
    by sqrt(d_model)), and ``batch`` random sequences of ``n`` + 1 tokens; then
    :func:`gradient_norms` (next-token loss, one backward pass) and :func:`activation_scales`.
    Returns the mean over seeds of each per-layer figure. This is the set-up under which
    Xiong et al. (2020, Fig. 3) see post-norm's last-layer gradients grow with layer index.
    ``dtype=torch.float64`` builds (and randomly draws) the model in float64, so that printed
    figures are the same on any machine: float32 random draws differ between CPU kernel paths,
    float64 draws do not. The explorer keeps float32.
    """
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    check.choice("norm", norm, NORM_PLACEMENTS)
    n_layers = check.positive_int("n_layers", n_layers)
    d_model = check.positive_int("d_model", d_model)
    batch = check.positive_int("batch", batch)
    n = check.positive_int("n", n)
    if isinstance(seeds, str) or not isinstance(seeds, Iterable):
        raise TypeError(f"seeds must be a sequence of whole numbers, got {seeds!r}")
    seeds = tuple(check.positive_int("seeds[...]", s, minimum=0) for s in seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed, got an empty sequence")
    grads, scales = [], []
    for seed in seeds:
        config = LMConfig(
            vocab_size, d_model, n_layers, n_heads, 4 * d_model, max_len=n + 1, norm=norm,
            activation="relu", tie_weights=True, scale_embeddings=True, init="xavier",
        )  # fmt: skip
        model = seeded_model(config, seed, dtype)  # float64 draws are the same on every CPU path
        tokens = torch.randint(0, vocab_size, (batch, n + 1))  # [B, n+1]
        grads.append(gradient_norms(model, tokens))
        scales.append(activation_scales(model, tokens[:, :-1]))
    mean = lambda rows: [sum(col) / len(col) for col in zip(*rows, strict=True)]  # noqa: E731
    return LayerProfile(mean(grads), mean(scales))


# -- C5.6 shipped with the course (helpers.shipped): what tools/init_profiles.py writes ----------
#: The declared experiment: init_profile's defaults (d_model 128, 4 heads, vocabulary 1000,
#: 16 sequences of 64 + 1 random tokens), float64, seeds 0-4, stacks of 3, 6 and 12 blocks,
#: pre-norm and post-norm; one gradient curve per (norm, depth, seed).
PROFILES = dict(
    seeds=(0, 1, 2, 3, 4), depths=(3, 6, 12), d_model=128, vocab_size=1000, batch=16, n=64,
    n_heads=4,
)  # fmt: skip
#: The name of the shipped file: ``helpers/data/init_profiles.json``.
INIT_PROFILES_DATA = "init_profiles"
PROFILES_SETTINGS_SCHEMA = {
    "seeds": [int],
    "depths": [int],
    "d_model": int,
    "vocab_size": int,
    "batch": int,
    "n": int,
    "n_heads": int,
    "dtype": str,
}
#: ``gradients[norm][str(depth)]``: one curve per seed (in the order of ``seeds``), layer 1 first.
PROFILES_RESULTS_SCHEMA = {"gradients": {str: {str: [[float]]}}}


class InitProfiles(NamedTuple):
    """C5.6's gradient curves at initialization, one per norm placement, depth and seed."""

    settings: dict
    gradients: dict  # {"pre"|"post": {"3": [[float] per seed], ...}}
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def seeds(self) -> list[int]:
        return list(self.settings["seeds"])

    @property
    def depths(self) -> list[int]:
        return list(self.settings["depths"])

    def curves(self, norm: str, depth: int) -> list[list[float]]:
        """One gradient curve per seed (``||dL/dW2_l||``, layer 1 first) of ``norm`` at ``depth``."""
        check.choice("norm", norm, ("pre", "post"))
        if depth not in self.depths:
            raise ValueError(
                f"depth must be one of the shipped depths {self.depths}, got {depth!r}"
            )
        return [list(c) for c in self.gradients[norm][str(depth)]]

    def mean(self, norm: str, depth: int) -> list[float]:
        """The mean over the seeds of :meth:`curves`, layer by layer."""
        rows = self.curves(norm, depth)
        return [sum(col) / len(col) for col in zip(*rows, strict=True)]


def init_profiles(seeds=PROFILES["seeds"], depths=PROFILES["depths"]) -> InitProfiles:
    """Lesson 5 (C5.6). Run the declared experiment :data:`PROFILES` (or fewer ``seeds`` and
    ``depths``: a reduced rerun): for each norm placement, depth and seed,
    ``init_profile(norm, depth, seeds=(seed,), dtype=torch.float64).gradients`` with the other
    settings of :data:`PROFILES`; one CPU thread. The results are the same on every machine to
    about 1e-12 (float64 throughout)."""
    import time

    from .reproducible import one_thread

    seeds = tuple(check.positive_int("seeds[...]", s, minimum=0) for s in seeds)
    depths = tuple(check.positive_int("depths[...]", d) for d in depths)
    if not seeds or not depths:
        raise ValueError(f"seeds and depths must each name at least one, got {seeds}, {depths}")
    kw = {k: PROFILES[k] for k in ("d_model", "vocab_size", "batch", "n", "n_heads")}
    wall, cpu = time.perf_counter(), time.process_time()
    with one_thread():
        gradients = {
            norm: {
                str(depth): [
                    init_profile(norm, depth, seeds=(s,), dtype=torch.float64, **kw).gradients
                    for s in seeds
                ]
                for depth in depths
            }
            for norm in ("pre", "post")
        }
    settings = {"seeds": list(seeds), "depths": list(depths), **kw, "dtype": "float64"}
    return InitProfiles(settings, gradients, time.perf_counter() - wall, time.process_time() - cpu)


def save_init_profiles(profiles: InitProfiles, folder=None):
    """Lesson 5 (C5.6). Write ``profiles`` as ``init_profiles.json`` (default folder
    ``helpers/data``; :func:`helpers.shipped.write_results`). Returns the path written."""
    from .shipped import write_results

    if not isinstance(profiles, InitProfiles):
        raise TypeError(f"profiles must be an InitProfiles, got {type(profiles).__name__}")
    return write_results(
        INIT_PROFILES_DATA,
        tool="tools/init_profiles.py",
        settings=profiles.settings,
        results={"gradients": profiles.gradients},
        settings_schema=PROFILES_SETTINGS_SCHEMA,
        results_schema=PROFILES_RESULTS_SCHEMA,
        seconds=profiles.seconds,
        cpu_seconds=profiles.cpu_seconds,
        folder=folder,
    )


def load_init_profiles(folder=None) -> InitProfiles:
    """Lesson 5 (C5.6). The gradient curves that ship with the course
    (``helpers/data/init_profiles.json``, written by ``tools/init_profiles.py`` with
    :data:`PROFILES`), checked against their schemas: ``.curves(norm, depth)``, ``.mean(...)``."""
    from .shipped import load_results

    shipped = load_results(
        INIT_PROFILES_DATA, PROFILES_SETTINGS_SCHEMA, PROFILES_RESULTS_SCHEMA, folder
    )
    profiles = InitProfiles(
        shipped.settings, shipped.results["gradients"], shipped.seconds, shipped.cpu_seconds
    )
    for norm in ("pre", "post"):
        for depth in profiles.depths:
            rows = profiles.gradients.get(norm, {}).get(str(depth))
            if (
                rows is None
                or len(rows) != len(profiles.seeds)
                or any(len(r) != depth for r in rows)
            ):
                raise ValueError(
                    f"helpers/data/init_profiles.json: gradients[{norm!r}][{str(depth)!r}] must "
                    f"hold one curve of {depth} layers per seed; rerun tools/init_profiles.py"
                )
    return profiles
