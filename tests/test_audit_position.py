"""Lesson 10 (K1, C4.8): the audit names the position mechanism it saw inside attention, on
models built for it (the course's layers, plain torch, Hugging Face configs with random weights,
nothing downloaded), and says when its probe cannot tell."""

import math
import os

import pytest
import torch
from _models import (  # tests/ is on sys.path (no __init__.py)
    absolute_inside_gpt,
    course_rotary_with_qk_bias,
    hf_local_attention,
    hf_model,
    t5_bias_gpt,
    t5_bucket,
    windowed_gpt,
)

from helpers import TransformerLM, audit
from helpers.checklist.discover import ModelView
from helpers.checklist.mechanism import LONG_N, observe_mechanism
from helpers.checklist.probe import Hooks, Layout
from helpers.positional import alibi_slopes

os.environ["HF_HUB_OFFLINE"] = "1"  # transformers is a test-only dependency: never download
ONLY_INSIDE = "not added to the token embeddings: the sheet's rule fails"
ALSO_INSIDE = "position is added before the first block, and also enters inside attention"


def _k1_only(report):
    assert report.failed == ["K1"] and report.undecided == [], str(report)
    return report["K1"]


def _mechanisms(model):
    """observe_mechanism on every mixing sublayer, on the audit's long probe."""
    model.eval()
    v = ModelView(model, None, None, None, None, None, None, 0)
    v.discover()
    subs = [s for ss in v.sublayers for s in ss if v.kind(s)[0] == "mixing"]
    tokens = torch.randint(0, v.vocab, (2, LONG_N), generator=torch.Generator().manual_seed(1))
    with Hooks([s.module for s in subs]) as hooks:
        model(tokens)
    layout = Layout(2, LONG_N, v.layout.batch_first)
    return [observe_mechanism(s.module, hooks.first(s.module), layout) for s in subs]


@pytest.mark.parametrize("std", [0.2, 1.0])
def test_K1_names_rotary_with_q_and_k_biases(std):
    # shrinking the input would leave (R_p b_q)·(R_j b_k), a distance bias: not ALiBi
    k1 = _k1_only(audit(course_rotary_with_qk_bias(std)))
    assert k1.finding.startswith("position enters inside attention (rotary)"), k1.finding
    assert ONLY_INSIDE in k1.finding
    assert "change with that vector" in k1.evidence[-1] and "RoPE" in k1.evidence[-1]


def test_K1_names_rotary_without_biases_too():
    k1 = _k1_only(audit(course_rotary_with_qk_bias(0.0)))
    assert k1.finding.startswith("position enters inside attention (rotary)"), k1.finding


def test_K1_names_alibi_and_measures_its_slopes():
    k1 = _k1_only(audit(TransformerLM(100, 32, 2, 4, max_len=64, positional="alibi")))
    assert k1.finding.startswith(
        "position enters inside attention (ALiBi: a bias on the scores linear in the distance)"
    ), k1.finding
    assert "slopes m = 0.25, 0.0625, 0.0156, 0.00391" in k1.evidence[-1]
    for mech in _mechanisms(TransformerLM(100, 32, 2, 4, max_len=64, positional="alibi")):
        assert mech.kind == "ALiBi"
        want = sorted(alibi_slopes(4).tolist(), reverse=True)
        assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(mech.slopes, want, strict=True))


@pytest.mark.parametrize(("buckets", "max_distance"), [(32, 128), (8, 16)])
def test_K1_names_t5_relative_bias_and_the_distances_sharing_a_bucket(buckets, max_distance):
    k1 = _k1_only(audit(t5_bias_gpt(buckets, max_distance)))
    assert k1.finding.startswith("position enters inside attention (T5-style relative bias"), (
        k1.finding
    )
    assert "not ALiBi's linear one" in k1.evidence[-1]
    # the runs of distances the probe saw share a bias are exactly T5's buckets among 0..15
    ids = t5_bucket(torch.arange(LONG_N // 2), buckets, max_distance).tolist()
    runs = []
    for k in range(len(ids)):
        if k and ids[k] == ids[k - 1]:
            if runs and runs[-1][1] == k - 1:
                runs[-1] = (runs[-1][0], k)
            else:
                runs.append((k - 1, k))
    for mech in _mechanisms(t5_bias_gpt(buckets, max_distance)):
        assert mech.kind == "T5" and mech.shared == runs
    assert (runs == []) == (buckets == 32)  # T5's default buckets are exact below 16


def test_K1_names_a_local_window_next_to_an_added_table():
    k1 = _k1_only(audit(windowed_gpt(4)))
    assert k1.finding.startswith(f"{ALSO_INSIDE} (a local attention window of 4 positions)"), (
        k1.finding
    )
    assert "no bias on the scores, only the window" in k1.evidence[-1]


def test_K1_names_rotary_inside_a_local_window():
    k1 = _k1_only(audit(windowed_gpt(8, "rotary", table=False)))
    assert k1.finding.startswith(
        "position enters inside attention (rotary, within a local window of 8 positions)"
    ), k1.finding


def test_K1_names_gpt_neo_local_layers_as_a_window():
    pytest.importorskip("transformers")
    k1 = _k1_only(audit(hf_local_attention("gpt_neo", window=4)))
    # its global layer has no mechanism of its own; the local one is named, and only it
    assert k1.finding.startswith(
        f"{ALSO_INSIDE} (a local attention window of 4 positions in transformer.h.1.attn)"
    ), k1.finding


def test_K1_names_mistral_sliding_window_and_rotary():
    pytest.importorskip("transformers")
    k1 = _k1_only(audit(hf_local_attention("mistral", window=8)))
    assert k1.finding.startswith(
        "position enters inside attention (rotary, within a local window of 8 positions)"
    ), k1.finding


def test_K1_says_it_cannot_tell_when_the_window_shows_too_few_distances():
    # 4 heads, 4 distances in the window: the content effect is seen, but not that it is relative
    pytest.importorskip("transformers")
    k1 = _k1_only(audit(hf_local_attention("mistral", window=4)))
    assert k1.finding.startswith(
        "position enters inside attention (a position mechanism the probe cannot name, "
        "within a local window of 4 positions)"
    ), k1.finding
    assert (
        "too few distances (4, with 4 heads seen)" in k1.evidence[-1]
        and "cannot tell" in k1.evidence[-1]
    )


@pytest.mark.parametrize("how", ["qk", "bias"])
def test_K1_names_position_by_absolute_index_inside_attention(how):
    k1 = _k1_only(audit(absolute_inside_gpt(how)))
    assert k1.finding.startswith(
        "position enters inside attention (position by its absolute index, not by distance)"
    ), k1.finding
    assert "not a function of the distance p - j" in k1.evidence[-1]


def test_K1_says_it_cannot_tell_when_the_sublayer_cannot_be_copied():
    model = course_rotary_with_qk_bias(0.2)

    def refuse(memo):
        raise RuntimeError("this module cannot be copied")

    for block in model.blocks:
        block.attn.sublayer.__deepcopy__ = refuse
    k1 = _k1_only(audit(model))
    assert "(a position mechanism the probe cannot name)" in k1.finding, k1.finding
    assert "could not be replayed (RuntimeError: this module cannot be copied)" in k1.evidence[-1]


def test_K1_mechanism_measurements_are_far_from_the_thresholds():
    # what decides the names, as measured: content changes of rotary >= 1e-3 against <= 1e-7 for
    # biases by position; shapes off the shared span 0.4+ for absolute index against <= 1e-7
    rotary = _mechanisms(course_rotary_with_qk_bias(1.0))
    alibi = _mechanisms(TransformerLM(100, 32, 2, 4, max_len=64, positional="alibi"))
    absolute = _mechanisms(absolute_inside_gpt("bias"))
    t5 = _mechanisms(t5_bias_gpt())
    assert min(m.measured["content change"] for m in rotary) > 1e-3
    assert max(m.measured["content change"] for m in alibi + absolute + t5) < 1e-7
    assert min(m.measured["off the shared span"] for m in absolute) > 0.4
    assert max(m.measured["off the shared span"] for m in rotary + alibi + t5) < 1e-7
    assert max(m.measured["recurrence misfit"] for m in alibi) < 1e-7
    assert min(m.measured["recurrence misfit"] for m in t5) > 0.4


def test_K1_names_bloom_alibi_and_llama_rotary_in_half_precision():
    pytest.importorskip("transformers")
    bloom = _k1_only(audit(hf_model("bloom")))
    assert bloom.finding.startswith("position enters inside attention (ALiBi"), bloom.finding
    llama = _k1_only(audit(hf_model("llama").bfloat16()))  # its rotary tables in bfloat16
    assert llama.finding.startswith("position enters inside attention (rotary)"), llama.finding


def test_K1_naming_leaves_the_rest_of_the_report_alone():
    # the naming runs on copies with its own random numbers: K2-K5's evidence is unchanged
    a = audit(course_rotary_with_qk_bias(0.2))
    b = audit(course_rotary_with_qk_bias(0.2))
    assert str(a) == str(b)
    plain = audit(TransformerLM(100, 32, 2, 4, max_len=64))
    for k in ("K2", "K3", "K4", "K5"):
        assert a[k].status == plain[k].status == "passed"
