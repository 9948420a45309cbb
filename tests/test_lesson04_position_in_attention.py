"""Lesson 4, position inside attention: rotary (C4.8) and ALiBi (C4.8) checked against their
formulas and against Hugging Face transformers' Llama rotary and Bloom ALiBi (tiny tensors, nothing
downloaded), attention with position inside it, no position at all (NoPE, C4.9), and the audit's K1
on each positional kind.
"""

import math
import os

import pytest
import torch

import helpers
from helpers import (
    MultiHeadAttention,
    TransformerLM,
    alibi_bias,
    apply_rotary,
    audit,
    count_parameters,
    rotation_matrix,
)
from helpers.positional import alibi_slopes

os.environ["HF_HUB_OFFLINE"] = "1"  # transformers is a test-only reference: never download

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: tiny tensors


def _rotated_scores(q, k, positions):
    """Scores q_p·k_q after rotating every row of q and k by its position, [n, n]."""
    return apply_rotary(q, positions) @ apply_rotary(k, positions).T  # [n, n]


# --- C4.8 rotary -------------------------------------------------------------------------------


def test_C4_8_rotary_multiplies_each_pair_by_e_to_the_i_pos_theta_as_roformer_eq_34():
    """RoFormer (Su et al. 2021) eq. 34 and Meta's Llama: the pair (x[2i], x[2i+1]) is the
    complex number x[2i] + i x[2i+1], multiplied by e^(i pos w_i), w_i = 10000^(-2i/d)."""
    n, d = 7, 8
    x = torch.randn(2, 3, n, d, dtype=F64)  # [B, h, n, d]
    positions = torch.tensor([0, 1, 5, 2, 11, 40, 3])
    rates = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)  # [d/2]
    turn = torch.polar(torch.ones(n, d // 2, dtype=F64), positions[:, None].double() * rates)
    want = torch.view_as_real(torch.view_as_complex(x.reshape(2, 3, n, d // 2, 2)) * turn)
    torch.testing.assert_close(
        apply_rotary(x, positions), want.reshape(x.shape), rtol=0, atol=1e-12
    )
    # written out: out[2i] = c x[2i] - s x[2i+1], out[2i+1] = s x[2i] + c x[2i+1]; the unit
    # vector on column 0 turns towards column 1 (counter-clockwise) as the position grows
    e0 = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=F64)  # pair 0 turns by 1 rad per position
    torch.testing.assert_close(
        apply_rotary(e0, torch.tensor([1])),
        torch.tensor([[math.cos(1), math.sin(1), 0, 0]], dtype=F64),
    )


def test_C4_8_rotary_turns_row_p_by_lesson_4s_R_p_transposed():
    """Lesson 4's R_p (written for the sin-first table) has the transposed blocks: row p is turned
    by R_p^T = R_(-p)."""
    x = torch.randn(2, 3, 7, 8, dtype=F64)  # [B, h, n, d]
    positions = torch.tensor([0, 1, 5, 2, 11, 40, 3])
    got = apply_rotary(x, positions)  # [B, h, n, d]
    assert got.dtype == F64 and got.shape == x.shape
    for i, p in enumerate(positions.tolist()):
        r = rotation_matrix(p, 8)  # [d, d]: lesson 4's R_p; a row times R applies R^T to it
        torch.testing.assert_close(got[..., i, :], x[..., i, :] @ r, rtol=0, atol=1e-12)
        torch.testing.assert_close(
            got[..., i, :], x[..., i, :] @ rotation_matrix(-p, 8).T, rtol=0, atol=1e-12
        )
    default = apply_rotary(x)  # positions 0..n-1
    for p in range(7):
        torch.testing.assert_close(
            default[..., p, :], x[..., p, :] @ rotation_matrix(p, 8), rtol=0, atol=1e-12
        )
    # float positions work too, and float32 in gives float32 out
    half = apply_rotary(x.float(), torch.tensor([0.5] * 7))
    assert half.dtype == torch.float32
    torch.testing.assert_close(half[0, 0, 0], (rotation_matrix(-0.5, 8) @ x[0, 0, 0]).float())


def test_C4_8_rotary_scores_depend_only_on_j_minus_p():
    n, d = 9, 16
    q, k = torch.randn(n, d, dtype=F64), torch.randn(n, d, dtype=F64)  # row i: at position i
    base = _rotated_scores(q, k, torch.arange(n))  # [n, n]
    for shift in (1, 7, 1000, -3):
        moved = _rotated_scores(q, k, torch.arange(n) + shift)  # every position moved by shift
        torch.testing.assert_close(moved, base, rtol=0, atol=1e-10)
    # (R_(-p) q)·(R_(-j) k) = q·R_(p-j) k: RoFormer's q^T Θ_(j-p) k, Θ_m = R_(-m) its rotation
    for p, j in [(0, 0), (3, 1), (8, 2), (2, 7)]:
        want = q[p] @ rotation_matrix(p - j, d) @ k[j]
        torch.testing.assert_close(base[p, j], want, rtol=0, atol=1e-12)
        theta = apply_rotary(torch.eye(d, dtype=F64), torch.full((d,), j - p)).T  # [d, d]: Θ_(j-p)
        torch.testing.assert_close(base[p, j], q[p] @ theta @ k[j], rtol=0, atol=1e-12)
    # and the score does depend on the offset: the same q and k at other distances score differently
    one_q, one_k = q[:1].expand(n, d), k[:1].expand(n, d)  # the same vectors at every position
    s = _rotated_scores(one_q, one_k, torch.arange(n))  # [n, n]: depends on p - q only
    torch.testing.assert_close(s.diagonal(2), s[0, 2].expand(n - 2), rtol=0, atol=1e-10)
    assert (s[0] - s[0, 0]).abs().max() > 1e-2  # offsets 0..n-1 do not all score alike


#: Llama's column j (half-split: pair i is columns i and i + d/2) is the course's column
#: LLAMA_TO_COURSE[j] (interleaved: pair i is columns 2i and 2i+1), for d = 16
LLAMA_TO_COURSE = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])


@pytest.mark.parametrize("rope_theta", [10000.0, 500000.0])  # the course's base, Llama 3's
def test_C4_8_rotary_equals_hugging_face_llama_through_the_pair_layout_permutation(rope_theta):
    """Reference: transformers' Llama (``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb``), a tiny
    config built offline, its rope base read from the config.

    Llama pairs columns (i, i + d/2) (the half-split layout, ``rotate_half``), the course pairs
    (2i, 2i+1); both turn pair i RoFormer's way by p·w_i, w_i = base^(-2i/d). So Llama's vectors,
    their columns moved to the course's layout (Llama column i -> course column 2i, column
    i + d/2 -> 2i+1), rotated by ``apply_rotary`` and moved back, are Llama's own rotated
    vectors to float32 rounding (Llama computes in float32: 1e-5 on angles up to 11 rad)."""
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    b, h, n, d = 2, 3, 12, 16
    config = LlamaConfig(
        hidden_size=h * d,
        num_attention_heads=h,
        head_dim=d,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
    )
    base = config.rope_parameters["rope_theta"]
    assert base == rope_theta
    rope = LlamaRotaryEmbedding(config)
    q, k = torch.randn(b, h, n, d), torch.randn(b, h, n, d)  # float32, Llama's layout
    position_ids = torch.arange(n).expand(b, n)  # [B, n]
    cos, sin = rope(q, position_ids)  # [B, n, d] each
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)  # [B, h, n, d]

    for ours_in, theirs in ((q, q_hf), (k, k_hf)):
        course = torch.empty_like(ours_in)
        course[..., LLAMA_TO_COURSE] = ours_in  # the same vectors in the course's layout
        ours = apply_rotary(course.double(), base=base)[..., LLAMA_TO_COURSE].float()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-5)
    # the scores too (what attention sees), and they are not those of the other direction
    scores_hf = q_hf @ k_hf.transpose(-2, -1)  # [B, h, n, n]
    course_q, course_k = torch.empty_like(q), torch.empty_like(k)
    course_q[..., LLAMA_TO_COURSE], course_k[..., LLAMA_TO_COURSE] = q, k
    ours = apply_rotary(course_q.double(), base=base) @ apply_rotary(
        course_k.double(), base=base
    ).transpose(-2, -1)
    torch.testing.assert_close(ours.float(), scores_hf, rtol=0, atol=1e-4)
    back = torch.arange(n).neg()  # the old direction: every angle negated
    other = apply_rotary(course_q.double(), back, base=base) @ apply_rotary(
        course_k.double(), back, base=base
    ).transpose(-2, -1)
    assert (other.float() - scores_hf).abs().max() > 0.1


# --- C4.8 ALiBi --------------------------------------------------------------------------------


def test_C4_8_alibi_slopes_for_8_heads_are_the_papers():
    slopes = alibi_slopes(8)
    assert slopes.tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    for n_heads in (1, 2, 4, 16, 32):  # 2^(-8h/n_heads), h = 1..n_heads
        want = [2.0 ** (-8 * h / n_heads) for h in range(1, n_heads + 1)]
        torch.testing.assert_close(alibi_slopes(n_heads), torch.tensor(want, dtype=F64))


def test_C4_8_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(8, 6)
    assert bias.shape == (8, 6, 6) and bias.dtype == torch.float32
    slopes = alibi_slopes(8)
    for h in range(8):
        for p in range(6):
            for q in range(6):
                assert bias[h, p, q].item() == pytest.approx(-slopes[h].item() * abs(p - q))
    assert torch.equal(bias, bias.transpose(1, 2))  # symmetric: |p - q|
    assert torch.equal(bias.diagonal(dim1=1, dim2=2), torch.zeros(8, 6))  # no penalty at p = q
    assert alibi_bias(4, 5, dtype=F64).dtype == F64


def test_C4_8_alibi_non_power_of_two_follows_the_papers_recipe():
    """n_heads not a power of two: the slopes of the closest power of two below (N), then every
    other slope of 2N heads (Press et al.'s code, and Bloom's)."""
    six = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(6).tolist() == six
    twelve = [2.0 ** (-h) for h in range(1, 9)] + [2.0 ** (-(2 * j - 1) / 2) for j in range(1, 5)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(twelve, dtype=F64))
    assert alibi_slopes(3).tolist() == [2.0**-4, 2.0**-8, 2.0**-2]
    assert alibi_bias(6, 4).shape == (6, 4, 4)


@pytest.mark.parametrize("n_heads", [8, 6, 12, 3])
def test_C4_8_alibi_matches_bloom_build_alibi_tensor(n_heads):
    """Reference: transformers' Bloom ``build_alibi_tensor``. Its convention differs: it returns
    the causal, non-negative ``m_h * q`` (q the key's position), the same for every query; since
    a softmax ignores a constant added to a whole row, ``m_h * q`` and ``-m_h (p - q)`` give the
    same causal attention (they differ by ``-m_h p`` on row p)."""
    pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    n = 7
    bloom = build_alibi_tensor(torch.ones(1, n), n_heads, torch.float32)[:, 0]  # [h, n]: m_h * q
    ours = alibi_bias(n_heads, n)  # [h, n, n]: -m_h |p - q|
    torch.testing.assert_close(bloom[:, 1].double(), alibi_slopes(n_heads), rtol=1e-6, atol=0)
    causal = torch.ones(n, n, dtype=torch.bool).tril()  # [n, n]: q <= p
    p = torch.arange(n, dtype=torch.float32)[:, None]  # [n, 1]
    shift = -bloom[:, 1, None, None] * p  # [h, n, 1]: -m_h p
    torch.testing.assert_close(
        ours.masked_select(causal), (bloom[:, None, :] + shift).masked_select(causal)
    )
    scores = torch.randn(n_heads, n, n)
    mask = ~causal
    a = torch.softmax((scores + ours).masked_fill(mask, -math.inf), -1)
    b = torch.softmax((scores + bloom[:, None, :]).masked_fill(mask, -math.inf), -1)
    torch.testing.assert_close(a, b)


# --- attention with position inside it ---------------------------------------------------------


def test_C4_8_rotary_attention_equals_rotating_q_and_k_by_R_minus_p():
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 2, causal=True, positional="rotary").double()
    x = torch.randn(2, 5, 16, dtype=F64)
    q, k, v = (mha._split(w(x)) for w in (mha.q_proj, mha.k_proj, mha.v_proj))  # [B, h, n, d_h]
    r = torch.stack([rotation_matrix(-p, 8) for p in range(5)])  # [n, d_h, d_h]: RoFormer's
    q, k = (torch.einsum("pij,bhpj->bhpi", r, t) for t in (q, k))
    out, _ = helpers.scaled_dot_product_attention(q, k, v, causal=True)  # [B, h, n, d_h]
    want = mha.out_proj(out.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(mha(x), want, rtol=0, atol=1e-12)


def test_C4_8_alibi_attention_adds_minus_m_distance_to_each_heads_scores():
    mha = MultiHeadAttention(16, 4, causal=True, positional="alibi").double()
    x = torch.randn(2, 6, 16, dtype=F64)
    mha(x)
    q, k = mha._split(mha.q_proj(x)), mha._split(mha.k_proj(x))  # [B, h, n, d_h]
    scores = q @ k.transpose(-2, -1) / 2.0 + alibi_bias(4, 6, dtype=F64)  # sqrt(d_h) = 2
    scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(mha.last_weights, scores.softmax(-1), rtol=0, atol=1e-12)


def test_default_attention_is_unchanged_and_adds_no_state():
    torch.manual_seed(2)
    plain = MultiHeadAttention(16, 2, causal=True).double()
    assert plain.positional == "none"
    x = torch.randn(1, 5, 16, dtype=F64)
    q, k, v = (plain._split(w(x)) for w in (plain.q_proj, plain.k_proj, plain.v_proj))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(
        torch.ones(5, 5, dtype=torch.bool).triu(1), -math.inf
    )
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, 5, 16)
    assert torch.equal(plain(x), plain.out_proj(out))
    for kind in ("rotary", "alibi"):
        other = MultiHeadAttention(16, 2, causal=True, positional=kind)
        assert other.state_dict().keys() == plain.state_dict().keys()  # no parameter, no buffer
        assert count_parameters(other) == count_parameters(plain) == 4 * (16 * 16 + 16)


# --- C4.9 no position ----------------------------------------------------------------------------


def test_C4_9_causal_attention_without_position_is_not_permutation_equivariant():
    x = torch.randn(1, 6, 16, dtype=F64)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    unmasked = MultiHeadAttention(16, 2).double()
    torch.testing.assert_close(unmasked(x[:, perm]), unmasked(x)[:, perm], rtol=0, atol=1e-12)
    causal = MultiHeadAttention(16, 2, causal=True).double()
    assert (causal(x[:, perm]) - causal(x)[:, perm]).abs().max() > 1e-3  # the mask sees order
    # the whole model with positional="none" too: no position anywhere, yet order matters
    model = TransformerLM(30, 16, 2, 2, positional="none").double()
    tokens = torch.randint(0, 30, (1, 6))
    assert (model(tokens[:, perm]) - model(tokens)[:, perm]).abs().max() > 1e-3


# --- K1: the audit on each positional kind -------------------------------------------------------


@pytest.mark.parametrize(
    ("positional", "verdict", "finding"),
    [
        ("rotary", "failed", "position enters inside attention (rotary)"),
        ("alibi", "failed", "position enters inside attention (ALiBi: a bias on the scores linear"),
        ("none", "failed", "no position information enters before the first block"),
        ("sinusoidal", "passed", "position enters once, before the first block"),
    ],
)
def test_C4_8_audit_K1_on_each_positional_kind(positional, verdict, finding):
    torch.manual_seed(0)
    model = TransformerLM(50, 32, 2, 4, max_len=32, positional=positional)
    report = audit(model)
    k1 = report["K1"]
    assert k1.status == verdict and k1.finding.startswith(finding), k1.finding
    assert report.failed == (["K1"] if verdict == "failed" else [])  # K2-K5 are unaffected
    if positional in ("rotary", "alibi"):
        assert "not added to the token embeddings: the sheet's rule fails" in k1.finding
        assert ("RoPE" if positional == "rotary" else "ALiBi") in " ".join(k1.evidence)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: apply_rotary(torch.zeros(4, 7)), ValueError, "d of x must be even.*d=7"),
        (
            lambda: apply_rotary(torch.zeros(7)),
            ValueError,
            r"at least 2 dimensions \[\.\.\., n, d\]",
        ),
        (
            lambda: apply_rotary(torch.zeros(4, 6, dtype=torch.long)),
            TypeError,
            "x must hold floating",
        ),
        (lambda: apply_rotary([[0.0, 1.0]]), TypeError, "x must be a torch.Tensor"),
        (
            lambda: apply_rotary(torch.zeros(4, 6), torch.arange(5)),
            ValueError,
            r"positions must have shape \[n\] = \[4\].*got shape \[5\]",
        ),
        (
            lambda: apply_rotary(torch.zeros(4, 6), torch.zeros(1, 4)),
            ValueError,
            r"positions must have shape \[n\] = \[4\]",
        ),
        (
            lambda: apply_rotary(torch.zeros(4, 6), torch.ones(4, dtype=torch.bool)),
            TypeError,
            "positions must hold integer or floating-point positions",
        ),
        (
            lambda: apply_rotary(torch.zeros(4, 6), [0, 1, 2, 3]),
            TypeError,
            "positions must be a 1-D torch.Tensor",
        ),
        (
            lambda: apply_rotary(torch.zeros(4, 6), base=0),
            ValueError,
            "base must be a finite number > 0",
        ),
        (
            lambda: MultiHeadAttention(12, 4, positional="rotary"),
            ValueError,
            "d_head = d_model / n_heads must be even.*d_head=3",
        ),
        (
            lambda: TransformerLM(10, 12, 1, 4, positional="rotary"),
            ValueError,
            "d_head = d_model / n_heads must be even",
        ),
        (lambda: alibi_bias(0, 4), ValueError, "n_heads must be a positive whole number, got 0"),
        (lambda: alibi_bias(2.5, 4), TypeError, "n_heads must be a whole number"),
        (lambda: alibi_bias(True, 4), TypeError, "n_heads must be a whole number"),
        (lambda: alibi_bias(4, -1), ValueError, "n must be a whole number >= 0"),
        (lambda: alibi_bias(4, 3, dtype=torch.long), TypeError, "dtype must be a floating-point"),
        (
            lambda: MultiHeadAttention(16, 2, positional="relative"),
            ValueError,
            "positional must be one of 'none', 'rotary', 'alibi'",
        ),
        (
            lambda: helpers.attention_weights(
                torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), bias=torch.zeros(3, 5)
            ),
            ValueError,
            r"bias must end in \[n, m\] = \[3, 3\]",
        ),
        (
            lambda: helpers.attention_weights(
                torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), bias=torch.zeros(3, 3, dtype=F64)
            ),
            TypeError,
            "bias must have the dtype of q and k",
        ),
    ],
)
def test_bad_arguments_name_the_argument_and_what_is_allowed(call, error, match):
    """Rotary, ALiBi and attention with position inside: a clear error for bad input."""
    with pytest.raises(error, match=match):
        call()


# --- 04b's exercise 1 (rotary in Llama's half-split layout): the direction, in check and grade ----

L4B = "04b_position_inside_attention.ipynb"

#: RoFormer's direction written three honest ways; ``{sign}`` is "" for it, "-" for the old
#: direction (every angle negated: the transposed blocks, lesson 4's R_p on each pair)
_COMPLEX_FORM = """
def rotary_half_split(x, positions):
    n, d = x.shape
    half = d // 2
    w = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / d)  # [d/2]
    angles = {sign}positions.double()[:, None] * w  # [n, d/2]
    z = torch.complex(x[:, :half], x[:, half:]) * torch.polar(torch.ones_like(angles), angles)
    return torch.cat([z.real, z.imag], dim=1)  # pair i = (i, i + d/2) as a complex number
"""
_MATRIX_FORM = """
def rotary_half_split(x, positions):
    n, d = x.shape
    half = d // 2
    rows = []
    for p in range(n):  # one d x d rotation per position, its 2x2 blocks on (i, i + d/2)
        m = torch.zeros(d, d, dtype=torch.float64)
        for i in range(half):
            a = {sign}float(positions[p]) / 10000 ** (2 * i / d)
            m[i, i], m[i, i + half] = math.cos(a), -math.sin(a)
            m[i + half, i], m[i + half, i + half] = math.sin(a), math.cos(a)
        rows.append(m @ x[p])
    return torch.stack(rows)
"""
_PERMUTED_INTERLEAVED = """
def rotary_half_split(x, positions):
    n, d = x.shape
    half = d // 2
    order = torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).flatten()
    y = x[:, order]  # [n, d]: pair i now at columns (2i, 2i + 1)
    w = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / d)
    angles = {sign}positions.double()[:, None] * w
    c, s = torch.cos(angles), torch.sin(angles)
    turned = torch.stack([c * y[:, 0::2] - s * y[:, 1::2], s * y[:, 0::2] + c * y[:, 1::2]], -1)
    out = torch.empty_like(x)
    out[:, order] = turned.flatten(1)  # back to the half-split layout
    return out
"""
_FORMS = {
    "complex": _COMPLEX_FORM,
    "matrix": _MATRIX_FORM,
    "interleaved, permuted": _PERMUTED_INTERLEAVED,
}


@pytest.mark.parametrize("form", list(_FORMS))
def test_4b_ex1_roformer_direction_written_another_way_passes_check_and_grade(form, tmp_path):
    from _exercise_runs import run

    result = run(L4B, "l4b_ex1", _FORMS[form].format(sign=""), tmp_path)
    assert result.check, result.said
    assert result.grade.correct, result.grade.message


@pytest.mark.parametrize("form", list(_FORMS))
def test_4b_ex1_the_old_direction_fails_check_and_grade(form, tmp_path):
    from _exercise_runs import run

    result = run(L4B, "l4b_ex1", _FORMS[form].format(sign="-"), tmp_path)
    assert not result.check and "turns the wrong way" in result.said, result.said
    assert not result.grade.correct, result.grade.message


def test_C4_8_the_other_direction_is_this_one_with_each_pairs_second_row_of_W_Q_and_W_K_negated(
    monkeypatch,
):
    """What helpers/data/README.md says of the shipped runs: a rotary model turning the other way
    (lesson 4's R_p on row p) computes what this one computes with the second output row of each
    pair of W_Q and W_K (and of their biases) negated, a relabelling of a sign-symmetric draw."""
    import helpers.attention

    torch.manual_seed(0)
    model = TransformerLM(40, 32, 2, 4, max_len=16, positional="rotary").double().eval()
    tokens = torch.randint(0, 40, (2, 10))
    with torch.no_grad():
        ours = model(tokens)

    def other_way(x, positions=None, base=10000.0):  # row p turned by R_p, lesson 4's rotation
        n, d = x.shape[-2:]
        r = torch.stack([rotation_matrix(p, d, base, dtype=x.dtype) for p in range(n)])  # [n,d,d]
        return torch.einsum("pij,...pj->...pi", r, x)

    monkeypatch.setattr(helpers.attention, "apply_rotary", other_way)  # a layer on its own
    monkeypatch.setattr(helpers.attention, "rotary_in_pass", other_way)  # inside a model's pass
    with torch.no_grad():
        assert (model(tokens) - ours).abs().max() > 1e-3  # the other way alone: another model
        for mha in (m for m in model.modules() if isinstance(m, MultiHeadAttention)):
            sign = torch.ones(mha.d_head, dtype=F64)
            sign[1::2] = -1  # each pair's second row
            sign = sign.repeat(mha.n_heads)  # [d_model]: every head
            for proj in (mha.q_proj, mha.k_proj):
                proj.weight.mul_(sign[:, None])
                if proj.bias is not None:
                    proj.bias.mul_(sign)
        torch.testing.assert_close(model(tokens), ours, rtol=0, atol=1e-10)
