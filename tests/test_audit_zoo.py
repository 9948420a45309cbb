"""Lesson 10: the audit on models the course did not write (issue 17). Each mistake it once made
has a regression test on a minimal model in the style that showed it, and on the real family
(Hugging Face transformers, tiny configs, random weights, nothing downloaded)."""

import copy
import os

import pytest
import torch
from _models import (  # tests/ is on sys.path (no __init__.py)
    CrossAttentionLM,
    TinyGPT,
    hf_gpt2,
    hf_model,
    position_inside_gpt,
    styled_gpt,
)

from helpers import TransformerLM, audit

os.environ["HF_HUB_OFFLINE"] = "1"  # transformers is a test-only dependency: never download
SMALL = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=32)


def _verdicts(report):
    return {r.check: r.status for r in report}


def _all_pass(report):
    assert report.passed, str(report)


def _only_k1_fails(report, finding):
    assert report.failed == ["K1"] and report.undecided == [], str(report)
    assert finding in report["K1"].finding, report["K1"].finding


# ---- 1. a residual added inside the sublayer (Bloom) ---------------------------------------
def test_sublayer_adding_its_own_residual_passes_K2_and_K3():
    report = audit(styled_gpt("residual-inside"))
    _all_pass(report)
    assert "layers.0.mix, layers.0.mlp" in report["K2"].took["adding their own residual"]
    assert report["K3"].took["feed-forward"] == "layers.0.mlp"


def test_bloom_passes_K2_K3_and_fails_K1_naming_alibi():
    pytest.importorskip("transformers")
    report = audit(hf_model("bloom"))
    _only_k1_fails(report, "inside attention (ALiBi: a bias on the scores linear in the distance")
    assert report.found["norm placement"] == "pre"
    assert report["K3"].took["feed-forward"] == "transformer.h.0.mlp"


# ---- 2. a feed-forward on x.reshape(-1, d_model) (OPT) -------------------------------------
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_flattened_feed_forward_is_a_sublayer(norm):
    report = audit(styled_gpt(f"flat-{norm}"))
    _all_pass(report)
    assert report.found["norm placement"] == norm
    assert report["K3"].took["feed-forward"] == "layers.0.fc1 -> layers.0.fc2"


@pytest.mark.parametrize("pre", [True, False])
def test_opt_pre_and_post_norm_pass(pre):
    pytest.importorskip("transformers")
    report = audit(hf_model("opt", do_layer_norm_before=pre))
    _all_pass(report)
    assert report.found["norm placement"] == ("pre" if pre else "post")
    assert "d_ff 128" in report["K3"].evidence[0]


# ---- 3. only the feed-forward is taken for the feed-forward (BERT, cross-attention) ---------
def test_attention_output_projection_is_not_taken_for_the_feed_forward():
    report = audit(styled_gpt("bert"))
    _all_pass(report)
    took = report["K3"].took
    assert took["feed-forward"] == "layers.0.intermediate -> layers.0.output"
    assert took["linear projections (not feed-forward)"] == "layers.0.attn_out"
    assert report.found["norm placement"] == "post"


def test_cross_attention_is_not_taken_for_the_feed_forward():
    report = audit(CrossAttentionLM())
    _all_pass(report)
    assert report["K3"].took["attention"] == "layers.0.self_attn, layers.0.multihead_attn"
    assert report["K3"].took["feed-forward"] == "layers.0.linear1 -> layers.0.linear2"


def test_bert_passes_as_post_norm():
    pytest.importorskip("transformers")
    report = audit(hf_model("bert"))
    _all_pass(report)
    assert report.found["norm placement"] == "post"
    took = report["K3"].took
    assert took["feed-forward"].endswith(
        "layer.0.intermediate -> bert.encoder.layer.0.output.dense"
    )
    assert (
        took["linear projections (not feed-forward)"]
        == "bert.encoder.layer.0.attention.output.dense"
    )


# ---- 4. the output projection is the module with a [vocab, d_model] weight -----------------
@pytest.mark.parametrize("tied", [True, False])
def test_head_owning_only_a_bias(tied):
    report = audit(styled_gpt("bias-head", tied=tied))
    _all_pass(report)
    assert report["K5"].took["output projection"] == "unembed.decoder.weight"
    assert report["K5"].finding.startswith("tied" if tied else "not tied")


def test_bert_untied_and_copied_heads():
    pytest.importorskip("transformers")
    untied = audit(hf_model("bert", tie_word_embeddings=False))
    _all_pass(untied)
    assert untied["K5"].finding.startswith("not tied")
    model = hf_model("bert", tie_word_embeddings=False)
    with torch.no_grad():
        model.cls.predictions.decoder.weight.copy_(model.bert.embeddings.word_embeddings.weight)
    copied = audit(model)
    assert copied.failed == ["K5"] and copied.undecided == [], str(copied)
    assert "a copy" in copied["K5"].finding


# ---- 5. half precision ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_course_model_and_small_gpt_in_half_precision_pass(dtype):
    for model in (TransformerLM(**SMALL).to(dtype), TinyGPT().to(dtype)):
        report = audit(model)
        _all_pass(report)
        assert report.found["norm placement"] == "pre"
        assert report.found["precision"] == str(dtype).replace("torch.", "")


def test_course_model_post_norm_in_bfloat16_passes():
    report = audit(TransformerLM(**SMALL, norm="post").bfloat16())
    _all_pass(report)
    assert report.found["norm placement"] == "post"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpt2_in_half_precision_passes(dtype):
    pytest.importorskip("transformers")
    report = audit(hf_gpt2().to(dtype))
    _all_pass(report)
    assert report.found["norm placement"] == "pre"


def test_half_precision_still_catches_a_broken_model():
    model = TransformerLM(**SMALL, d_ff=16).bfloat16()
    report = audit(model)
    assert report.failed == ["K3"], str(report)


# ---- 6. position inside attention -----------------------------------------------------------
@pytest.mark.parametrize(("inside", "name"), [("rotary", "rotary"), ("alibi", "ALiBi")])
def test_position_inside_attention_fails_K1_naming_the_mechanism(inside, name):
    report = audit(position_inside_gpt(inside))
    _only_k1_fails(report, f"position enters inside attention ({name}")
    assert "no position information enters before the first block" in report["K1"].evidence[0]


def test_learned_table_and_rotary_fails_K1():
    report = audit(position_inside_gpt("rotary", table=True))
    _only_k1_fails(report, "added before the first block, and also enters inside attention (rotary")


def test_no_position_at_all_fails_K1_and_says_so():
    model = position_inside_gpt("none")
    report = audit(model)
    _only_k1_fails(report, "no position information enters before the first block")
    assert "causal mask" in report["K1"].evidence[-1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_llama_fails_K1_naming_rotary(dtype):
    pytest.importorskip("transformers")
    report = audit(hf_model("llama").to(dtype))
    _only_k1_fails(report, "position enters inside attention (rotary)")


# ---- what the audit cannot decide, and the report ---------------------------------------------
def test_short_context_crash_suggests_probe_tokens():
    model = TinyGPT(ctx=4)
    report = audit(model)
    assert report.undecided == ["K1", "K2", "K3", "K4", "K5"]
    assert "pass probe_tokens=" in report["K1"].evidence[0]
    probe = torch.randint(0, 97, (2, 4), generator=torch.Generator().manual_seed(0))
    _all_pass(audit(model, probe_tokens=probe))


def test_every_check_says_what_it_took():
    report = audit(TinyGPT())
    assert report["K1"].took["embedding"] == "wte"
    assert report["K2"].took["sublayers of layers.0"] == "layers.0.mix, layers.0.mlp"
    assert report["K2"].took["norms of layers.0"] == "layers.0.pre_mix, layers.0.pre_mlp"
    assert report["K3"].took["feed-forward"] == "layers.0.mlp"
    assert report["K4"].took["blocks"] == "3 x _Layer (layers.0 ... layers.2)"
    assert report["K5"].took["output projection"] == "unembed.weight"
    assert "took: embedding = wte" in str(report) and "<i>took</i>" in report._repr_html_()


def test_audit_leaves_half_precision_and_hf_models_as_found():
    pytest.importorskip("transformers")
    for model in (hf_model("bloom"), TransformerLM(**SMALL).bfloat16()):
        model.train()
        before = copy.deepcopy(model.state_dict())
        audit(model)
        assert model.training
        assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
        assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_messages_hold_no_addresses_or_paths():
    pytest.importorskip("transformers")
    for model in (hf_model("llama"), hf_model("bert"), styled_gpt("flat-pre")):
        text = str(audit(model))
        assert " at 0x" not in text and "/work" not in text and "site-packages" not in text


# ---- the same classes of mistake, found on families chosen for it -----------------------------
def test_output_changed_in_place_after_the_hook_is_not_misread():
    class InPlace(TinyGPT):  # Falcon style: mlp_output += attention_output, in place
        def __init__(self):
            super().__init__()
            for layer in self.layers:
                layer.forward = lambda x, layer=layer: self._layer(layer, x)

        @staticmethod
        def _layer(layer, x):
            attn = layer.mix(layer.pre_mix(x))
            out = layer.mlp(layer.pre_mlp(x))  # parallel: both read the block's input
            out += attn  # changes the tensor the mlp returned
            return x + out

    report = audit(InPlace())
    _all_pass(report)
    assert report["K3"].took["feed-forward"] == "layers.0.mlp"


def test_falcon_parallel_attention_and_opt_with_projected_embedding():
    pytest.importorskip("transformers")
    falcon = audit(_falcon())
    assert falcon.failed == ["K1"] and falcon.undecided == [], str(falcon)
    assert "rotary" in falcon["K1"].finding and falcon["K3"].passed
    opt = audit(hf_model("opt", word_embed_proj_dim=16))
    _all_pass(opt)
    assert "projected to d_model 32" in opt.found["embedding"]
    assert opt["K5"].took["output projection"] == "lm_head.weight"


def _falcon():
    import transformers as T

    torch.manual_seed(0)
    cfg = T.FalconConfig(vocab_size=100, hidden_size=32, num_attention_heads=4, num_hidden_layers=2)
    return T.FalconForCausalLM(cfg)


def test_a_linear_map_in_place_of_the_feed_forward_is_not_taken_for_one():
    model = TransformerLM(**SMALL)
    for block in model.blocks:
        block.ffn.sublayer = torch.nn.Linear(32, 32)  # d -> d, no nonlinearity: no feed-forward
    result = audit(model)["K3"]
    assert result.status == "undecided", str(result)
    assert "blocks.0.ffn.sublayer are linear maps" in result.evidence[0]
    assert result.took["linear projections (not feed-forward)"] == "blocks.0.ffn.sublayer"


def test_feed_forward_inlined_with_bare_tensors_is_undecided_not_failed():
    class InlineLayer(torch.nn.Module):  # pre-norm; the feed-forward's weights live on the block
        def __init__(self, d=32, h=4):
            super().__init__()
            from helpers import LayerNorm, MultiHeadAttention

            self.ln1, self.ln2 = LayerNorm(d), LayerNorm(d)
            self.attn = MultiHeadAttention(d, h, causal=True)
            self.w1 = torch.nn.Parameter(torch.randn(d, 4 * d) / d**0.5)
            self.w2 = torch.nn.Parameter(torch.randn(4 * d, d) / (4 * d) ** 0.5)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + torch.relu(self.ln2(x) @ self.w1) @ self.w2

    model = TransformerLM(**SMALL)
    model.blocks = torch.nn.ModuleList(InlineLayer() for _ in range(2))
    report = audit(model)
    assert report.undecided == ["K2", "K3"] and report.failed == [], str(report)
    assert "neither the identity nor a normalization" in report["K2"].finding
    assert "did not take for a sublayer" in report["K2"].evidence[0]
    assert "computed inline in the block's forward" in report["K3"].evidence[0]
