"""The check cell's verdict equals the grade's, for honest answers written several ways and for the
plausible wrong answers students write (issue 36); a hard-coded answer loses its points once
the grader holds a secret.

Each row runs the exercise's check cell as the student's kernel would (tests/_exercise_runs.py):
the visible check on its own, and the hidden tests on their own, judged by tools/grading against
the instructor's solution. The check must say ✓ exactly when the grade gives the points, and a
grade that withholds them must say what was compared and what was expected (without a value).
The whole pipeline (release, sandbox, nbgrader) is exercised by tests/test_coursework.py.
"""

from __future__ import annotations

import pytest
from _exercise_runs import cells, hidden_records, run

from tools.grading.spec import spec_for

L4, L5, L6, L9, L10 = (
    "04_positional_encoding.ipynb",
    "05_residuals_and_layer_norm.ipynb",
    "06_feed_forward.ipynb",
    "09_the_full_model.ipynb",
    "10_trust_but_verify.ipynb",
)
SOLUTION = None  # the instructor's solution cell

# ---- lesson 4, exercise 3: a probe for permutation-equivariance --------------------------------
_SUM_OVER_ROWS = """
def is_permutation_equivariant(layer, x):
    order = torch.arange(x.shape[1]).roll(1)
    with torch.no_grad():  # compares the sums over the rows: x + PE and a flip look equivariant
        return torch.allclose(layer(x[:, order]).sum(dim=1), layer(x).sum(dim=1))
"""
_MEAN_OVER_ROWS = """
def is_permutation_equivariant(layer, x):
    order = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return bool((layer(x[:, order]).mean(1) - layer(x).mean(1)).abs().max() < 1e-9)
"""
_EVERY_ADJACENT_SWAP = """
def is_permutation_equivariant(layer, x):
    n = x.shape[1]
    with torch.no_grad():
        base = layer(x)
        for i in range(n - 1):
            order = list(range(n))
            order[i], order[i + 1] = order[i + 1], order[i]
            if not torch.allclose(layer(x[:, order]), base[:, order], atol=1e-8):
                return False
    return True
"""
_RANDOM_ORDER_NUMPY = """
import numpy as np


def is_permutation_equivariant(layer, x):
    p = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return np.allclose(layer(x[:, p]).numpy(), layer(x)[:, p].numpy())
"""

# ---- lesson 6, exercise 3: which blocks mix positions -------------------------------------------
_NUDGE_ONE = """
def mixes_positions(f):  # C6.4's experiment, one position only
    x = torch.randn(6, 8, dtype=torch.float64)
    nudged = x.clone()
    nudged[{k}] += 1.0
    with torch.no_grad():
        moved = (f(nudged) - f(x)).abs().amax(dim=-1)
    return bool((moved[[i for i in range(6) if i != {k}]] > 1e-9).any())
"""
_JACOBIAN = """
def mixes_positions(f):
    x = torch.randn(5, 8, dtype=torch.float64)
    J = torch.autograd.functional.jacobian(f, x)  # [5, 8, 5, 8]
    M = J.abs().sum(dim=(1, 3))  # [5, 5]: output row, input row
    M.fill_diagonal_(0)
    return bool((M > 1e-9).any())
"""
_SCALE_EACH_ROW = """
def mixes_positions(f):
    n = 7
    x = torch.randn(n, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    base = f(x).detach()
    for i in range(n):
        y = x.clone()
        y[i] = 2 * y[i] + 0.5
        change = (f(y).detach() - base).abs().sum(-1)
        change[i] = 0
        if change.max() > 1e-8:
            return True
    return False
"""

# ---- lesson 10: the repairs and the audit ---------------------------------------------------------
_DEEP_COPIES_ONLY = """
def fix_reused_blocks(model):  # independent, but every block the same values
    model.blocks = nn.ModuleList([copy.deepcopy(model.blocks[0]) for _ in model.blocks])
    return model
"""
_INIT_THE_WHOLE_MODEL = """
def fix_reused_blocks(model):  # fresh blocks, but the embedding re-drawn too
    model.blocks = nn.ModuleList([copy.deepcopy(model.blocks[0]) for _ in model.blocks])
    init_weights(model)
    return model
"""
_KEEP_THE_FIRST_BLOCK = """
def fix_reused_blocks(model):
    blocks = [model.blocks[0]] + [copy.deepcopy(model.blocks[0]) for _ in model.blocks[1:]]
    for block in blocks[1:]:
        init_weights(block)
    model.blocks = nn.ModuleList(blocks)
    return model
"""
_RESET_PARAMETERS_IN_PLACE = """
def fix_reused_blocks(model):
    for i in range(len(model.blocks)):
        model.blocks[i] = copy.deepcopy(model.blocks[i])
        for m in model.blocks[i].modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
    return model
"""
_TIED_HEAD_MODULE = """
class TiedHead(nn.Module):
    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, h):
        return h @ self.embedding.weight.T


def tie_transposed(model):
    model.lm_head = TiedHead(model.token_embedding)
    return model
"""
_TRANSPOSED_VIEW = """
def tie_transposed(model):
    del model.lm_head.W
    model.lm_head.W = model.token_embedding.weight.T  # a view of W_E, not a parameter
    return model
"""
_COPY_OF_THE_EMBEDDING = """
def tie_transposed(model):  # a copy, not the embedding itself
    model.lm_head.W = nn.Parameter(model.token_embedding.weight.detach().T.clone())
    return model
"""
_REPAIRED = """
class RepairedLM(PositionAfterFirstBlockLM):
    def forward(self, tokens):
{body}
"""
_WITHOUT_FINAL_NORM = _REPAIRED.format(
    body="        h = self.embed(tokens)\n"
    "        for block in self.blocks:\n"
    "            h = block(h)\n"
    "        return self.lm_head(h)"
)
_LIKE_THE_BROKEN_MODEL = _REPAIRED.format(  # its own lines, position moved up
    body="        h = self.position(self.token_embedding(tokens))\n"
    "        for block in self.blocks:\n"
    "            h = block(h)\n"
    "        return self.lm_head(self.final_norm(h))"
)
_THE_LIBRARY_FORWARD = _REPAIRED.format(body="        return TransformerLM.forward(self, tokens)")
_POSITION_TWICE = _REPAIRED.format(
    body="        h = self.embed(tokens)\n"
    "        for i, block in enumerate(self.blocks):\n"
    "            h = block(h)\n"
    "            if i == 0:\n"
    "                h = self.position(h)\n"
    "        return self.lm_head(self.final_norm(h))"
)
_VERDICTS = """
def audit_verdicts():
    return {verdicts}
"""
_RIGHT = {"K1": "failed", "K2": "failed", "K3": "passed", "K4": "passed", "K5": "passed"}

# ---- lesson 5 ------------------------------------------------------------------------------------
_PRE_NORM_OTHER_WAY = """
def fixed_pre_norm(x, sublayer, norm):
    y = norm(x)
    return sublayer(y) + x
"""
_POST_NORM_BY_MEAN_SLOPE = """
def which_curve_is_post_norm(curve_a, curve_b):  # the one that falls less, in log scale
    import math
    fall = [math.log(c[-1]) - math.log(c[0]) for c in (curve_a, curve_b)]
    return "A" if fall[0] > fall[1] else "B"
"""

# ---- lesson 6, exercise 2: where two activations differ most ----------------------------------
_LOOP_OF_POINTS = """
def most_different_input(f, g, lo, hi):
    best, x = None, lo
    while x <= hi:  # points 0.002 apart, the best kept
        gap = float((f(torch.tensor([x], dtype=torch.float64)) - g(torch.tensor([x], dtype=torch.float64))).abs()[0])
        if best is None or gap > best[0]:
            best = (gap, x)
        x += 0.002
    return best[1]
"""
_NUMPY_GRID = """
import numpy as np


def most_different_input(f, g, lo, hi):
    xs = np.arange(lo, hi + 1e-9, 0.001)
    t = torch.from_numpy(xs)
    return float(xs[np.argmax((f(t) - g(t)).abs().numpy())])
"""
_COARSE_GRID = """
def most_different_input(f, g, lo, hi):
    grid = torch.linspace(lo, hi, 401, dtype=torch.float64)  # 0.02 apart on [-4, 4]
    return float(grid[(f(grid) - g(grid)).abs().argmax()])
"""
_RELU_GELU_PEAK = """
def most_different_input(f, g, lo, hi):
    return 0.7518  # ReLU and GELU's peak on [-4, 4], whatever is asked
"""

# ---- lesson 9, exercise 2: the most likely pair of next ids -----------------------------------
_PAIR_LOOP_OF_PRODUCTS = """
def most_likely_pair(model, tokens):  # probabilities multiplied, one first id at a time
    best = None
    with torch.no_grad():
        p1 = torch.softmax(model(tokens[None])[0, -1], -1)
        for a in range(len(p1)):
            p2 = torch.softmax(model(torch.cat([tokens, torch.tensor([a])])[None])[0, -1], -1)
            for b in range(len(p2)):
                if best is None or p1[a] * p2[b] > best[0]:
                    best = (p1[a] * p2[b], a, b)
    return torch.tensor(best[1:])
"""
_PAIR_NEXT_TOKEN_PROBS = """
def most_likely_pair(model, tokens):  # the lesson's next_token_probs, a list back
    with torch.no_grad():
        p1 = next_token_probs(model(tokens[None])[0, -1])
        V = len(p1)
        after = torch.cat([tokens.repeat(V, 1), torch.arange(V).unsqueeze(1)], 1)
        p2 = torch.stack([next_token_probs(z) for z in model(after)[:, -1]])
    return list(divmod(int((p1[:, None] * p2).argmax()), V))
"""
_PAIR_GREEDY = """
def most_likely_pair(model, tokens):  # the likeliest first id, then the likeliest after it
    with torch.no_grad():
        a = int(model(tokens[None])[0, -1].argmax())
        b = int(model(torch.cat([tokens, torch.tensor([a])])[None])[0, -1].argmax())
    return a, b
"""
_PAIR_RAW_LOGITS = """
def most_likely_pair(model, tokens):  # logits added as if they were log-probabilities
    with torch.no_grad():
        z1 = model(tokens[None])[0, -1]
        V = len(z1)
        z2 = model(torch.cat([tokens.expand(V, -1), torch.arange(V)[:, None]], 1))[:, -1]
    return divmod(int((z1[:, None] + z2).argmax()), V)
"""

# ---- the rows of lessons 4b, 5b, 7, 8 (exercises 1 and 3) and 9 (exercises 1 and 3) (issue 41) --
# Each: the solution, honest answers written another way, and plausible wrong answers (rows of
# TABLE, below).
L4B, L5B, L7, L8 = (
    "04b_position_inside_attention.ipynb",
    "05b_rmsnorm_and_depth.ipynb",
    "07_stacking_blocks.ipynb",
    "08_embeddings_and_weight_tying.ipynb",
)
_ROTARY_COMPLEX = """
def rotary_half_split(x, positions):  # pair i as the complex number x[i] + i x[i + d/2]
    n, d = x.shape
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    turn = torch.polar(torch.ones(n, d // 2, dtype=torch.float64), positions[:, None] * w)
    z = torch.complex(x[:, : d // 2], x[:, d // 2 :]) * turn
    return torch.cat([z.real, z.imag], dim=1)
"""
_ROTARY_INTERLEAVED = """
def rotary_half_split(x, positions):  # lesson 4's interleaved pairs (2i, 2i+1), not half-split
    n, d = x.shape
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = positions.double()[:, None] * w
    c, s = torch.cos(a), torch.sin(a)
    out = x.clone()
    out[:, 0::2] = c * x[:, 0::2] - s * x[:, 1::2]
    out[:, 1::2] = s * x[:, 0::2] + c * x[:, 1::2]
    return out
"""
_ROTARY_BACKWARDS = """
def rotary_half_split(x, positions):  # turned by -angle
    n, d = x.shape
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = positions.double()[:, None] * w
    c, s = torch.cos(a), torch.sin(a)
    x1, x2 = x[:, : d // 2], x[:, d // 2 :]
    return torch.cat([c * x1 + s * x2, -s * x1 + c * x2], dim=1)
"""
_ROTARY_CACHED_TABLE = """
def rotary_half_split(x, positions):  # Llama's way: a cos/sin table for 0..max, indexed by position
    n, d = x.shape
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    t = torch.arange(int(positions.max()) + 1, dtype=torch.float64)
    emb = torch.cat([torch.outer(t, w)] * 2, dim=1)  # [max + 1, d]
    cos, sin = emb.cos()[positions.long()], emb.sin()[positions.long()]  # [n, d]
    rotated = torch.cat([-x[:, d // 2 :], x[:, : d // 2]], dim=1)
    return x * cos + rotated * sin
"""
_ROTARY_BY_THE_MODEL = """
def rotary_half_split(x, positions):  # the turn the model's rotary uses, through the permutation
    from helpers.positional import _turn, angle_rates
    n, d = x.shape
    perm = torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2], 1).flatten()
    a = positions.double()[:, None] * angle_rates(d)[None]
    out = _turn(x[:, perm], torch.cos(a).to(x.dtype), torch.sin(a).to(x.dtype))
    return out[:, torch.argsort(perm)]
"""
_ALIBI_PAPERS_CODE = """
def alibi_bias_for(n_heads, n):  # the recursion of Press et al.'s released code
    def power_of_two(k):
        start = 2 ** (-(2 ** -(math.log2(k) - 3)))
        return [start * start**i for i in range(k)]

    def slopes(k):
        if math.log2(k).is_integer():
            return power_of_two(k)
        closest = 2 ** math.floor(math.log2(k))
        return power_of_two(closest) + slopes(2 * closest)[0::2][: k - closest]

    m = torch.tensor(slopes(n_heads), dtype=torch.float64)
    p = torch.arange(n)
    return -m[:, None, None] * (p[None, :] - p[:, None]).abs()
"""
_ALIBI_GEOMETRIC_ALWAYS = """
def alibi_bias_for(n_heads, n):  # 2^(-8h/H) for every H, not the paper's recipe
    m = torch.tensor([2 ** (-8 * h / n_heads) for h in range(1, n_heads + 1)], dtype=torch.float64)
    p = torch.arange(n, dtype=torch.float64)
    return -m[:, None, None] * (p[:, None] - p[None, :]).abs()
"""
_ALIBI_LIBRARY = """
def alibi_bias_for(n_heads, n):  # the course's own function: refused
    return helpers.alibi_bias(n_heads, n, dtype=torch.float64)
"""
_RMS_FLOAT32 = """
def rms_from_layer_norm(x, g, eps=1e-6):  # the mirror trick, computed in float32
    d = x.shape[-1]
    mirrored = torch.cat([x, -x], dim=-1).float()
    return g.float() * nn.functional.layer_norm(mirrored, (2 * d,), eps=eps)[..., :d]
"""
_RMS_MODULE = """
def rms_from_layer_norm(x, g, eps=1e-6):  # nn.LayerNorm without its own affine
    d = x.shape[-1]
    ln = nn.LayerNorm(2 * d, eps=eps, elementwise_affine=False)
    return ln(torch.stack([x, -x], dim=-1).flatten(-2))[..., ::2] * g
"""
_RMS_LAYER_NORM_OF_X = """
def rms_from_layer_norm(x, g, eps=1e-6):  # layer norm of x itself: takes the mean out too
    return g * nn.functional.layer_norm(x, x.shape[-1:], eps=eps)
"""
_RMS_NO_GAIN = """
def rms_from_layer_norm(x, g, eps=1e-6):
    d = x.shape[-1]
    return nn.functional.layer_norm(torch.cat([x, -x], -1), (2 * d,), eps=eps)[..., :d]
"""
_INVARIANCES_OTHER_NUMBERS = """
def invariances(norm, d_model):  # another draw, another constant and factor
    x = 5 * torch.rand(3, d_model, dtype=torch.float64) - 1
    out = norm(x)
    return (
        torch.allclose(norm(x - 1.5), out, rtol=1e-4, atol=1e-4),
        torch.allclose(norm(0.5 * x), out, rtol=1e-4, atol=1e-4),
    )
"""
_INVARIANCES_EXACT = """
def invariances(norm, d_model):  # torch.equal: the last digits decide
    x = torch.randn(4, d_model, dtype=torch.float64)
    return torch.equal(norm(x + 2.0), norm(x)), torch.equal(norm(3.0 * x), norm(x))
"""
_INVARIANCES_SHIFT_TWICE = """
def invariances(norm, d_model):  # the shift's verdict given for both
    x = torch.randn(4, d_model, dtype=torch.float64)
    same = torch.allclose(norm(x + 2.0), norm(x), rtol=1e-4, atol=1e-4)
    return same, same
"""
_COUNT_PER_BLOCK = """
def stack_parameter_count(d_model, n_layers, d_ff, bias=True):  # one sum, grouped otherwise
    d = d_model
    return n_layers * (4 * d * d + 2 * d * d_ff + 4 * d + ((5 * d + d_ff) if bias else 0))
"""
_COUNT_NO_NORMS = """
def stack_parameter_count(d_model, n_layers, d_ff, bias=True):  # the two layer norms forgotten
    b = (4 * d_model + d_ff + d_model) if bias else 0
    return n_layers * (4 * d_model * d_model + 2 * d_model * d_ff + b)
"""
_COUNT_NORMS_FOLLOW_BIAS = """
def stack_parameter_count(d_model, n_layers, d_ff, bias=True):  # norms dropped with the biases
    b = (4 * d_model + d_ff + d_model + 4 * d_model) if bias else 0
    return n_layers * (4 * d_model * d_model + 2 * d_model * d_ff + b)
"""
_FIXED_IN_ONE_LINE = """
class FixedBlock(ColleagueBlock):
    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        x = x + self.feedforward(self.ln2(x))
        return x
"""
_FIXED_NOTHING = """
class FixedBlock(ColleagueBlock):  # the colleague's forward, unchanged
    pass
"""
_FIXED_LN1_TWICE = """
class FixedBlock(ColleagueBlock):  # one norm for both sublayers
    def forward(self, x):
        h = x + self.attention(self.ln1(x))
        return h + self.feedforward(self.ln1(h))
"""
_RELATIVE_LOOP = """
def relative_contributions(hidden):
    out = []
    for before, after in zip(hidden[:-1], hidden[1:]):
        ratio = torch.linalg.vector_norm(after - before, dim=-1) / torch.linalg.vector_norm(before, dim=-1)
        out.append(ratio.mean())
    return torch.stack(out)
"""
_RELATIVE_RATIO_OF_MEANS = """
def relative_contributions(hidden):  # the mean change over the mean size: not per token
    h = torch.stack(hidden)
    return (h[1:] - h[:-1]).norm(dim=-1).mean(dim=(1, 2)) / h[:-1].norm(dim=-1).mean(dim=(1, 2))
"""
_RELATIVE_AFTER = """
def relative_contributions(hidden):  # divided by ||h_l||, the stream after the block
    h = torch.stack(hidden)
    return ((h[1:] - h[:-1]).norm(dim=-1) / h[1:].norm(dim=-1)).mean(dim=(1, 2))
"""
_ROWS_UNIQUE = """
def rows_that_learn(tokens, vocab_size, tied):
    return list(range(vocab_size)) if tied else torch.unique(tokens[:, :-1]).tolist()
"""
_ROWS_TARGETS_TOO = """
def rows_that_learn(tokens, vocab_size, tied):  # the targets counted as looked up
    return list(range(vocab_size)) if tied else sorted(set(tokens.flatten().tolist()))
"""
_ROWS_TIED_INPUTS_ONLY = """
def rows_that_learn(tokens, vocab_size, tied):  # the tied exit forgotten
    return sorted(set(tokens[:, :-1].flatten().tolist()))
"""
_COSINE_ATAN = """
def predicted_cosine(ratio):  # the angle whose tangent is the ratio, cosine squared
    return math.cos(math.atan(ratio)) ** 2
"""
_COSINE_LINEAR = """
def predicted_cosine(ratio):
    return 1 / (1 + ratio)
"""
_COSINE_FLIPPED = """
def predicted_cosine(ratio):  # the token's share, not the position's
    return ratio**2 / (1 + ratio**2)
"""
_TEMPERATURE_LINEAR_BISECTION = """
def temperature_for(logits, q):  # bisection on T itself, many steps
    lo, hi = 0.01, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if torch.softmax(logits.double() / mid, -1).max() > q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
"""
_TEMPERATURE_TWO_TOKENS = """
def temperature_for(logits, q):  # the two-token formula: exact only for V = 2
    top2 = logits.double().topk(2).values
    return float((top2[0] - top2[1]) / math.log(q / (1 - q)))
"""
_TEMPERATURE_FEW_STEPS = """
def temperature_for(logits, q):  # a search stopped after 8 halvings
    lo, hi = math.log(0.01), math.log(100.0)
    for _ in range(8):
        mid = (lo + hi) / 2
        if torch.softmax(logits.double() / math.exp(mid), -1).max() > q:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)
"""
_TOP_P_LOOP = """
def top_p_filter(logits, p):  # row by row, token by token
    probs = torch.softmax(logits, -1)
    flat = probs.reshape(-1, probs.shape[-1])
    out = torch.zeros_like(flat)
    for r in range(flat.shape[0]):
        total = 0.0
        for i in flat[r].argsort(descending=True).tolist():
            out[r, i] = flat[r, i]
            total += float(flat[r, i])
            if total >= p:
                break
    out = out / out.sum(-1, keepdim=True)
    return out.reshape(probs.shape)
"""
_TOP_P_WITHOUT_THE_CROSSING_TOKEN = """
def top_p_filter(logits, p):  # stops before the token that reaches p
    probs = torch.softmax(logits, -1)
    sp, order = probs.sort(-1, descending=True)
    keep = sp.cumsum(-1) < p
    keep[..., 0] = True
    kept = probs * torch.zeros_like(keep).scatter(-1, order, keep)
    return kept / kept.sum(-1, keepdim=True)
"""
_TOP_P_NOT_RENORMALIZED = """
def top_p_filter(logits, p):
    probs = torch.softmax(logits, -1)
    sp, order = probs.sort(-1, descending=True)
    keep = (sp.cumsum(-1) - sp) < p
    return probs * torch.zeros_like(keep).scatter(-1, order, keep)
"""

#: (notebook, exercise, answer, right?) by name; SOLUTION is the instructor's solution cell
TABLE = {
    "l4_ex3 solution": (L4, "l4_ex3", SOLUTION, True),
    "l4_ex3 every adjacent swap": (L4, "l4_ex3", _EVERY_ADJACENT_SWAP, True),
    "l4_ex3 a random order, numpy": (L4, "l4_ex3", _RANDOM_ORDER_NUMPY, True),
    "l4_ex3 the sum over the rows compared": (L4, "l4_ex3", _SUM_OVER_ROWS, False),
    "l4_ex3 the mean over the rows compared": (L4, "l4_ex3", _MEAN_OVER_ROWS, False),
    "l5_ex2 solution": (L5, "l5_ex2", SOLUTION, True),
    "l5_ex2 written another way": (L5, "l5_ex2", _PRE_NORM_OTHER_WAY, True),
    "l6_ex3 solution": (L6, "l6_ex3", SOLUTION, True),
    "l6_ex3 the Jacobian": (L6, "l6_ex3", _JACOBIAN, True),
    "l6_ex3 each row rescaled in turn": (L6, "l6_ex3", _SCALE_EACH_ROW, True),
    "l6_ex3 C6.4's nudge, position 3 only": (L6, "l6_ex3", _NUDGE_ONE.format(k=3), False),
    "l6_ex3 C6.4's nudge, the last position only": (L6, "l6_ex3", _NUDGE_ONE.format(k=5), False),
    "l6_ex3 C6.4's nudge, the first position only": (L6, "l6_ex3", _NUDGE_ONE.format(k=0), False),
    "l6_ex2 solution": (L6, "l6_ex2", SOLUTION, True),
    "l6_ex2 a loop over points 0.002 apart": (L6, "l6_ex2", _LOOP_OF_POINTS, True),
    "l6_ex2 a numpy grid 0.001 apart": (L6, "l6_ex2", _NUMPY_GRID, True),
    "l6_ex2 points 0.02 apart": (L6, "l6_ex2", _COARSE_GRID, False),
    "l6_ex2 ReLU and GELU's peak, hard-coded": (L6, "l6_ex2", _RELU_GELU_PEAK, False),
    "l9_ex2 solution": (L9, "l9_ex2", SOLUTION, True),
    "l9_ex2 a loop of products, a tensor back": (L9, "l9_ex2", _PAIR_LOOP_OF_PRODUCTS, True),
    "l9_ex2 next_token_probs, a list back": (L9, "l9_ex2", _PAIR_NEXT_TOKEN_PROBS, True),
    "l9_ex2 the greedy pair": (L9, "l9_ex2", _PAIR_GREEDY, False),
    "l9_ex2 raw logits added": (L9, "l9_ex2", _PAIR_RAW_LOGITS, False),
    "l10_ex1 solution": (L10, "l10_ex1", SOLUTION, True),
    "l10_ex1 the first block kept, fresh others": (L10, "l10_ex1", _KEEP_THE_FIRST_BLOCK, True),
    "l10_ex1 reset_parameters in place": (L10, "l10_ex1", _RESET_PARAMETERS_IN_PLACE, True),
    "l10_ex1 deep copies without fresh weights": (L10, "l10_ex1", _DEEP_COPIES_ONLY, False),
    "l10_ex1 init_weights on the whole model": (L10, "l10_ex1", _INIT_THE_WHOLE_MODEL, False),
    "l10_ex2 solution": (L10, "l10_ex2", SOLUTION, True),
    "l10_ex2 a head module reading the embedding": (L10, "l10_ex2", _TIED_HEAD_MODULE, True),
    "l10_ex2 a transposed view": (L10, "l10_ex2", _TRANSPOSED_VIEW, True),
    "l10_ex2 a copy of the embedding": (L10, "l10_ex2", _COPY_OF_THE_EMBEDDING, False),
    "l10_ex3 solution": (L10, "l10_ex3", SOLUTION, True),
    "l10_ex3 the broken model's lines, position moved up": (
        L10,
        "l10_ex3",
        _LIKE_THE_BROKEN_MODEL,
        True,
    ),
    "l10_ex3 TransformerLM's forward": (L10, "l10_ex3", _THE_LIBRARY_FORWARD, True),
    "l10_ex3 without the final norm": (L10, "l10_ex3", _WITHOUT_FINAL_NORM, False),
    "l10_ex3 position added twice": (L10, "l10_ex3", _POSITION_TWICE, False),
    "l10_ex4 solution": (L10, "l10_ex4", SOLUTION, True),
    "l10_ex4 constants, capitals": (
        L10,
        "l10_ex4",
        _VERDICTS.format(verdicts={k: v.upper() for k, v in _RIGHT.items()}),
        True,
    ),
    "l10_ex4 K2 passed": (
        L10,
        "l10_ex4",
        _VERDICTS.format(verdicts={**_RIGHT, "K2": "passed"}),
        False,
    ),
    "l10_ex4 K3 failed": (
        L10,
        "l10_ex4",
        _VERDICTS.format(verdicts={**_RIGHT, "K3": "failed"}),
        False,
    ),
    "l4b_ex1 solution": (L4B, "l4b_ex1", SOLUTION, True),
    "l4b_ex1 complex numbers": (L4B, "l4b_ex1", _ROTARY_COMPLEX, True),
    "l4b_ex1 interleaved pairs": (L4B, "l4b_ex1", _ROTARY_INTERLEAVED, False),
    "l4b_ex1 turned backwards": (L4B, "l4b_ex1", _ROTARY_BACKWARDS, False),
    "l4b_ex1 a table indexed by position": (L4B, "l4b_ex1", _ROTARY_CACHED_TABLE, True),
    "l4b_ex1 the model's rotary, permuted": (L4B, "l4b_ex1", _ROTARY_BY_THE_MODEL, False),
    "l4b_ex2 solution": (L4B, "l4b_ex2", SOLUTION, True),
    "l4b_ex2 the paper's recursion": (L4B, "l4b_ex2", _ALIBI_PAPERS_CODE, True),
    "l4b_ex2 geometric for every head count": (L4B, "l4b_ex2", _ALIBI_GEOMETRIC_ALWAYS, False),
    "l4b_ex2 the course's alibi_bias": (L4B, "l4b_ex2", _ALIBI_LIBRARY, False),
    "l5b_ex1 solution": (L5B, "l5b_ex1", SOLUTION, True),
    "l5b_ex1 computed in float32": (L5B, "l5b_ex1", _RMS_FLOAT32, True),
    "l5b_ex1 nn.LayerNorm on interleaved x, -x": (L5B, "l5b_ex1", _RMS_MODULE, True),
    "l5b_ex1 layer norm of x itself": (L5B, "l5b_ex1", _RMS_LAYER_NORM_OF_X, False),
    "l5b_ex1 the gain missing": (L5B, "l5b_ex1", _RMS_NO_GAIN, False),
    "l5b_ex2 solution": (L5B, "l5b_ex2", SOLUTION, True),
    "l5b_ex2 another draw, constant and factor": (L5B, "l5b_ex2", _INVARIANCES_OTHER_NUMBERS, True),
    "l5b_ex2 compared exactly": (L5B, "l5b_ex2", _INVARIANCES_EXACT, False),
    "l5b_ex2 the shift's verdict twice": (L5B, "l5b_ex2", _INVARIANCES_SHIFT_TWICE, False),
    "l7_ex1 solution": (L7, "l7_ex1", SOLUTION, True),
    "l7_ex1 one sum per block": (L7, "l7_ex1", _COUNT_PER_BLOCK, True),
    "l7_ex1 the layer norms forgotten": (L7, "l7_ex1", _COUNT_NO_NORMS, False),
    "l7_ex1 the norms dropped with the biases": (L7, "l7_ex1", _COUNT_NORMS_FOLLOW_BIAS, False),
    "l7_ex2 solution": (L7, "l7_ex2", SOLUTION, True),
    "l7_ex2 the stream reassigned": (L7, "l7_ex2", _FIXED_IN_ONE_LINE, True),
    "l7_ex2 the colleague's forward": (L7, "l7_ex2", _FIXED_NOTHING, False),
    "l7_ex2 ln1 for both sublayers": (L7, "l7_ex2", _FIXED_LN1_TWICE, False),
    "l7_ex3 solution": (L7, "l7_ex3", SOLUTION, True),
    "l7_ex3 a loop over the blocks": (L7, "l7_ex3", _RELATIVE_LOOP, True),
    "l7_ex3 a ratio of means": (L7, "l7_ex3", _RELATIVE_RATIO_OF_MEANS, False),
    "l7_ex3 divided by the stream after": (L7, "l7_ex3", _RELATIVE_AFTER, False),
    "l8_ex1 solution": (L8, "l8_ex1", SOLUTION, True),
    "l8_ex1 torch.unique": (L8, "l8_ex1", _ROWS_UNIQUE, True),
    "l8_ex1 the targets counted": (L8, "l8_ex1", _ROWS_TARGETS_TOO, False),
    "l8_ex1 tied, the inputs only": (L8, "l8_ex1", _ROWS_TIED_INPUTS_ONLY, False),
    "l8_ex3 solution": (L8, "l8_ex3", SOLUTION, True),
    "l8_ex3 cos(atan(ratio)) squared": (L8, "l8_ex3", _COSINE_ATAN, True),
    "l8_ex3 1 / (1 + ratio)": (L8, "l8_ex3", _COSINE_LINEAR, False),
    "l8_ex3 the token's share": (L8, "l8_ex3", _COSINE_FLIPPED, False),
    "l9_ex1 solution": (L9, "l9_ex1", SOLUTION, True),
    "l9_ex1 bisection on T": (L9, "l9_ex1", _TEMPERATURE_LINEAR_BISECTION, True),
    "l9_ex1 the two-token formula": (L9, "l9_ex1", _TEMPERATURE_TWO_TOKENS, False),
    "l9_ex1 a search stopped early": (L9, "l9_ex1", _TEMPERATURE_FEW_STEPS, False),
    "l9_ex3 solution": (L9, "l9_ex3", SOLUTION, True),
    "l9_ex3 a loop over tokens": (L9, "l9_ex3", _TOP_P_LOOP, True),
    "l9_ex3 the crossing token dropped": (L9, "l9_ex3", _TOP_P_WITHOUT_THE_CROSSING_TOKEN, False),
    "l9_ex3 not renormalized": (L9, "l9_ex3", _TOP_P_NOT_RENORMALIZED, False),
}

# ---- lesson 8, exercise 4 (going further): a GPT-2-layout checkpoint into the course's model ----
L8 = "08_embeddings_and_weight_tying.ipynb"
_L8_NAMES = """
def _gpt2_names(model, sd, c_attn, t):  # (course name, tensor) for every weight; t: a transpose
    d = model.config.d_model
    pairs = [("token_embedding.weight", sd["transformer.wte.weight"]),
             ("position.table.weight", sd["transformer.wpe.weight"]),
             ("final_norm.weight", sd["transformer.ln_f.weight"]),
             ("final_norm.bias", sd["transformer.ln_f.bias"])]
    for i in range(len(model.blocks)):
        h, b = f"transformer.h.{i}.", f"blocks.{i}."
        (w_q, w_k, w_v), (b_q, b_k, b_v) = c_attn(sd[h + "attn.c_attn.weight"], d), sd[h + "attn.c_attn.bias"].chunk(3)
        a, f = b + "attn.sublayer.", b + "ffn.sublayer."
        pairs += [(b + "attn.norm.weight", sd[h + "ln_1.weight"]), (b + "attn.norm.bias", sd[h + "ln_1.bias"]),
                  (b + "ffn.norm.weight", sd[h + "ln_2.weight"]), (b + "ffn.norm.bias", sd[h + "ln_2.bias"]),
                  (a + "q_proj.weight", w_q), (a + "q_proj.bias", b_q),
                  (a + "k_proj.weight", w_k), (a + "k_proj.bias", b_k),
                  (a + "v_proj.weight", w_v), (a + "v_proj.bias", b_v),
                  (a + "out_proj.weight", t(sd[h + "attn.c_proj.weight"])), (a + "out_proj.bias", sd[h + "attn.c_proj.bias"]),
                  (f + "w1.weight", t(sd[h + "mlp.c_fc.weight"])), (f + "w1.bias", sd[h + "mlp.c_fc.bias"]),
                  (f + "w2.weight", t(sd[h + "mlp.c_proj.weight"])), (f + "w2.bias", sd[h + "mlp.c_proj.bias"])]
    return pairs


def _copy_all(model, pairs):
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in pairs:
            params[name].copy_(tensor)
    return model
"""
_L8_CHUNK_T = (
    _L8_NAMES
    + """
def load_gpt2_layout(model, state_dict):  # .t(), c_attn chunked after the transpose, copy_
    pairs = _gpt2_names(model, state_dict, lambda w, d: w.t().chunk(3, dim=0), lambda w: w.t())
    return _copy_all(model, pairs)
"""
)
_L8_EINSUM_LOAD_STATE_DICT = (
    _L8_NAMES
    + """
def load_gpt2_layout(model, state_dict):  # einsum for the transposes, slicing, load_state_dict
    def t(w):
        return torch.einsum("io->oi", w).contiguous()

    def slices(w, d):
        return [t(w[:, k * d : (k + 1) * d]) for k in range(3)]

    new = dict(_gpt2_names(model, state_dict, slices, t))
    new["lm_head.weight"] = new["token_embedding.weight"]
    model.load_state_dict(new)
    return model
"""
)
_L8_NO_TRANSPOSE = (
    _L8_NAMES
    + """
def load_gpt2_layout(model, state_dict):  # transposed only where the shapes force it
    def t(w):
        return w if w.shape[0] == w.shape[1] else w.T

    pairs = _gpt2_names(model, state_dict, lambda w, d: w.split(d, dim=1), t)
    return _copy_all(model, pairs)
"""
)
_L8_Q_K_SWAPPED = (
    _L8_NAMES
    + """
def load_gpt2_layout(model, state_dict):  # c_attn read as k | q | v
    def kqv(w, d):
        q, k, v = w.T.split(d, dim=0)
        return k, q, v

    pairs = _gpt2_names(model, state_dict, kqv, lambda w: w.T)
    return _copy_all(model, pairs)
"""
)
_L8_CONVERTER = """
from helpers.convert import _gpt2_layout_into


def load_gpt2_layout(model, state_dict):  # the course's converter does the mapping
    return _gpt2_layout_into(model, state_dict, conv1d=True)
"""
_L8_UNTIED = (
    _L8_NAMES
    + """
def load_gpt2_layout(model, state_dict):  # every weight replaced by a new Parameter: untied
    pairs = _gpt2_names(model, state_dict, lambda w, d: w.T.split(d, dim=0), lambda w: w.T)
    for name, tensor in pairs:
        owner, attr = model.get_submodule(name.rsplit(".", 1)[0]), name.rsplit(".", 1)[1]
        setattr(owner, attr, torch.nn.Parameter(tensor.clone()))
    return model
"""
)
_L8_ANSWERS = {  # name -> (answer, right?)
    "solution": (SOLUTION, True),
    ".t(), chunk, copy_": (_L8_CHUNK_T, True),
    "einsum, slicing, load_state_dict": (_L8_EINSUM_LOAD_STATE_DICT, True),
    "the square Conv1D weights not transposed": (_L8_NO_TRANSPOSE, False),
    "q and k swapped": (_L8_Q_K_SWAPPED, False),
    "new Parameters, the tie lost": (_L8_UNTIED, False),
}
TABLE.update({f"l8_ex4 {k}": (L8, "l8_ex4", a, right) for k, (a, right) in _L8_ANSWERS.items()})


_L8_NOTHING_TRANSPOSED = (
    _L8_NAMES
    + """
def load_gpt2_layout(model, state_dict):  # every Conv1D weight as stored: the MLP's do not fit
    pairs = _gpt2_names(model, state_dict, lambda w, d: w.split(d, dim=1), lambda w: w)
    return _copy_all(model, pairs)
"""
)


@pytest.mark.parametrize(
    ("answer", "check_says", "grade_says"),
    [
        (_L8_CONVERTER, "helpers.convert._gpt2_layout_into", "which the exercise forbids"),
        (_L8_NOTHING_TRANSPOSED, "transpose it", "the answer raised RuntimeError"),
    ],
    ids=["the course's converter called", "nothing transposed: a shape error"],
)
def test_l8_ex4_refused_answers_lose_their_points_in_check_and_grade(
    answer, check_says, grade_says, tmp_path
):
    got = run(L8, "l8_ex4", answer, tmp_path)
    assert not got.check and check_says in got.said, got.said
    assert not got.grade.correct and grade_says in got.grade.message, got.grade.message


def test_l8_ex4_a_secret_changes_the_hidden_checkpoints(tmp_path):
    """The graded checkpoints' seeds and sizes come from the secret: the public ones say nothing."""
    solution = cells(L8)["l8_ex4"]
    public = hidden_records(L8, "l8_ex4", solution, tmp_path)
    secret = hidden_records(L8, "l8_ex4", solution, tmp_path, secret="an instructor's")
    assert len(public) == len(secret) == 3
    assert [public[c][0]["inputs"] for c in sorted(public)] != [
        secret[c][0]["inputs"] for c in sorted(secret)
    ]


def _verdicts_agree(row, tmp_path):
    """Run one row; the check's verdict and the grade's both equal its right?, and a wrong
    answer's check says what is wrong in one line. Returns the run."""
    notebook, exercise, answer, right = row
    answer = cells(notebook)[exercise] if answer is SOLUTION else answer
    got = run(notebook, exercise, answer, tmp_path)
    assert got.check == right, (got.said, got.grade.message)
    assert got.grade.correct == right, (got.said, got.grade.message)
    assert right or "\n" not in got.said  # one line, saying what is wrong
    return got


@pytest.mark.parametrize("name", list(TABLE))
def test_check_cell_verdict_equals_the_grade(name, tmp_path):
    got, right = _verdicts_agree(TABLE[name], tmp_path), TABLE[name][3]
    if not right and spec_for(TABLE[name][1]).expected:
        # the grade's comment names what was compared and what was expected, in words (an
        # exercise whose Spec describes its parts; the others compare with the solution)
        assert "expected" in got.grade.message, got.grade.message
        assert "item" not in got.grade.message, got.grade.message


def test_grade_comment_names_the_part_that_differs(tmp_path):
    """The capstone's hidden tests record named parts: the comment says which part differs and
    what a right answer gives there, never "item 2 of the answer"."""
    message = run(L10, "l10_ex3", _WITHOUT_FINAL_NORM, tmp_path).grade.message
    assert "the repaired model's output differs" in message, message
    assert "self.final_norm" in message, message
    message = run(L10, "l10_ex1", _DEEP_COPIES_ONLY, tmp_path).grade.message
    assert "fresh weights at every depth is not right" in message, message


def test_visible_check_says_why_a_plausible_wrong_answer_fails(tmp_path):
    said = run(L10, "l10_ex3", _WITHOUT_FINAL_NORM, tmp_path).said
    assert "skip the final norm" in said, said
    said = run(L10, "l10_ex1", _DEEP_COPIES_ONLY, tmp_path).said
    assert "hold the same values" in said and "init_weights(block)" in said, said
    said = run(L4, "l4_ex3", _SUM_OVER_ROWS, tmp_path).said
    assert "sums (and means) over the rows agree" in said, said
    said = run(L6, "l6_ex3", _NUDGE_ONE.format(k=3), tmp_path).said
    assert "changes one position only" in said, said


# ---- hard-coded answers: they pass on the public inputs, and lose their points with a secret ---
_COUNTED = """
_calls = [0]


def {name}(*args):  # the public notebook's hidden answers, in the order the cases come
    _calls[0] += 1
    return {answers}[(_calls[0] - 1) % {n}]
"""
_L4_PUBLIC = [True, True, False, False, True, False, False, False]
_L6_PUBLIC = [True, False, True, True, True, False, False, True, True]
HARD_CODED = {
    "l4_ex3 verdicts counted": (
        L4,
        "l4_ex3",
        _COUNTED.format(name="is_permutation_equivariant", answers=_L4_PUBLIC, n=8),
    ),
    "l6_ex3 verdicts counted": (
        L6,
        "l6_ex3",
        _COUNTED.format(name="mixes_positions", answers=_L6_PUBLIC, n=9),
    ),
    "l6_ex2 keyed on the public ranges": (
        L6,
        "l6_ex2",
        "def most_different_input(f, g, lo, hi):\n"
        "    return {-4.0: 0.7518, -3.0: -1.2785, -2.0: -0.8103}[lo]\n",
    ),
    "l9_ex2 the public pairs, counted": (
        L9,
        "l9_ex2",
        _COUNTED.format(
            name="most_likely_pair",
            answers=[
                [12, 3],
                [6, 7],
                [2, 11],
                [12, 3],
                [10, 9],
                [9, 1],
                [9, 3],
                [8, 6],
                [7, 11],
                [11, 9],
                [11, 9],
                [7, 11],
            ],  # fmt: skip
            n=12,
        ),
    ),
    "l5_ex3 keyed on the depth": (
        L5,
        "l5_ex3",
        "def which_curve_is_post_norm(a, b):\n    return {6: 'A', 7: 'B', 10: 'A'}[len(a)]\n",
    ),
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.slow] if name.startswith("l5_ex3") else [])
        for name in HARD_CODED  # l5_ex3's hidden cases train six small models each run
    ],
)
def test_hard_coded_answer_loses_its_points_under_a_secret(name, tmp_path):
    notebook, exercise, answer = HARD_CODED[name]
    public = run(notebook, exercise, answer, tmp_path)
    assert public.grade.correct, public.grade.message  # it is the public cases' answer
    secret = "an instructor's secret"
    graded = run(notebook, exercise, answer, tmp_path, secret=secret)
    assert not graded.grade.correct, graded.grade.message
    honest = run(notebook, exercise, cells(notebook)[exercise], tmp_path, secret=secret)
    assert honest.grade.correct, honest.grade.message


@pytest.mark.parametrize(
    ("notebook", "exercise"),
    [
        (L4, "l4_ex3"),
        (L5, "l5_ex2"),
        (L6, "l6_ex2"),
        (L6, "l6_ex3"),
        (L9, "l9_ex2"),
        (L10, "l10_ex1"),
        (L10, "l10_ex3"),
    ],
)
def test_a_secret_changes_the_hidden_inputs(notebook, exercise, tmp_path):
    """With a secret, the hidden cases' inputs (their digests, in case order) are not the public
    notebook's: a student who read the public notebook does not know what is graded."""
    solution = cells(notebook)[exercise]
    public = hidden_records(notebook, exercise, solution, tmp_path)
    secret = hidden_records(notebook, exercise, solution, tmp_path, secret="an instructor's")
    assert len(public) == len(secret) > 0
    public_inputs = [public[c][0]["inputs"] for c in sorted(public)]
    secret_inputs = [secret[c][0]["inputs"] for c in sorted(secret)]
    assert public_inputs != secret_inputs


@pytest.mark.slow
def test_a_secret_leaves_the_post_norm_seeds_and_changes_the_order(tmp_path):
    """l5_ex3's curves are the checked seeds' (C5.6 holds on them); a secret changes which curve
    comes first, never to all alike."""
    solution = cells(L5)["l5_ex3"]
    public = hidden_records(L5, "l5_ex3", solution, tmp_path)
    answers = {
        secret: [
            r[0]["value"]
            for _, r in sorted(hidden_records(L5, "l5_ex3", solution, tmp_path, secret).items())
        ]
        for secret in ("one", "two", "three")
    }
    assert [r[0]["value"] for _, r in sorted(public.items())] == ["A", "B", "A"]
    for secret, said in answers.items():
        assert len(set(said)) == 2 and said != ["A", "B", "A"], (secret, said)


@pytest.mark.parametrize("notebook", [L4, L5, L6, L10])
def test_hidden_tests_leave_the_grader_its_skipping(notebook):
    """The hidden tests' own names never read the notebook's history: IPython's ``_i`` (the
    previous input) as a loop variable made the skip plan run every cell of lessons 4 and 6."""
    import nbformat
    from _exercise_runs import ROOT

    from tools.grading import plan

    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    assert plan.plan(nb, nb).skipped, f"{notebook}: no demonstration cell would be skipped"


_INVARIANCES_SCALE_TWICE = """
def invariances(norm, d_model):  # the scaling's verdict given for both
    x = torch.randn(4, d_model, dtype=torch.float64)
    same = torch.allclose(norm(3.0 * x), norm(x), rtol=1e-4, atol=1e-4)
    return same, same
"""
_COLLAPSE_WRONG_OFFSET = """
def collapse(W1, b1, W2, b2):  # b1 forgotten in the offset
    return W1 @ W2, b2
"""
_COLLAPSE_WRONG_MATRIX = """
def collapse(W1, b1, W2, b2):  # the matrices in the wrong order
    return (W2.T @ W1.T).T * 2, b1 @ W2 + b2
"""


@pytest.mark.parametrize(
    ("notebook", "exercise", "answer", "part"),
    [
        (L6, "l6_ex1", _COLLAPSE_WRONG_OFFSET, "c differs"),
        (L6, "l6_ex1", _COLLAPSE_WRONG_MATRIX, "M differs"),
        (L5B, "l5b_ex2", _INVARIANCES_SHIFT_TWICE, "same_after_scale is not right"),
        (L5B, "l5b_ex2", _INVARIANCES_EXACT, "same_after_scale is not right"),
        (L5B, "l5b_ex2", _INVARIANCES_SCALE_TWICE, "same_after_shift is not right"),
    ],
)
def test_grade_comment_names_the_item_of_a_pair(notebook, exercise, answer, part, tmp_path):
    """l6_ex1 returns (M, c) and l5b_ex2 (same_after_shift, same_after_scale): the grade's comment
    names the part that differs and what it should be, never "item 1 of 2"."""
    got = run(notebook, exercise, answer, tmp_path)
    assert not got.check and not got.grade.correct, (got.said, got.grade.message)
    message = got.grade.message
    assert part in message and "expected" in message and "item" not in message, message
