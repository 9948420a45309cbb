"""Lesson 10: the audit on models the course did not write (issue 17). Each mistake it once made
has a regression test on a minimal model in the style that showed it, and on the real family
(Hugging Face transformers, tiny configs, random weights, nothing downloaded)."""

import copy
import os
from dataclasses import replace

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

from helpers import TransformerLM, audit, count_parameters, zoo

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


# ---- the models shipped for the capstone (helpers.zoo) ----------------------------------------
def test_K1_to_K5_zoo_gpt_in_gpt2_layout_passes_without_hints():
    from helpers import zoo

    report = audit(zoo.GPT())
    _all_pass(report)
    assert report.found["norm placement"] == "pre"
    assert report["K1"].took["embedding"] == "transformer.wte"
    assert (
        report["K2"].took["sublayers of transformer.h.0"]
        == "transformer.h.0.attn, transformer.h.0.mlp"
    )
    assert (
        report["K2"].took["norms of transformer.h.0"]
        == "transformer.h.0.ln_1, transformer.h.0.ln_2"
    )
    assert report["K3"].took["feed-forward"] == "transformer.h.0.mlp"
    assert "d_ff 192" in report["K3"].evidence[0]
    assert report["K4"].took["blocks"] == "3 x Block (transformer.h.0 ... transformer.h.2)"
    assert report["K5"].took["output projection"] == "lm_head.weight"
    assert report["K5"].finding.startswith("tied")


def test_zoo_gpt_has_the_parameter_names_of_huggingface_gpt2():
    """The layout is GPT-2's: every parameter of HF's GPT-2 at the same size has the same name
    and shape in zoo.GPT (HF stores c_attn/c_fc/c_proj as Conv1D, [in, out]: transposed)."""
    pytest.importorskip("transformers")
    from helpers import zoo

    ours = dict(
        zoo.GPT(n_layer=2, n_embd=48, n_head=4, vocab_size=96, block_size=64).named_parameters()
    )
    theirs = dict(zoo.hf_model("gpt2").named_parameters())
    assert set(ours) == set(theirs)
    for name, p in theirs.items():
        conv1d = name.endswith(("c_attn.weight", "c_fc.weight", "c_proj.weight"))
        assert list(ours[name].shape) == (list(p.shape)[::-1] if conv1d else list(p.shape)), name


def test_zoo_gpt_forward_returns_logits_and_loss_and_refuses_bad_input():
    from torch.nn import functional as F

    from helpers import zoo

    model = zoo.GPT(n_layer=1)
    assert model.lm_head.weight is model.transformer.wte.weight
    idx = torch.randint(0, 96, (2, 10), generator=torch.Generator().manual_seed(0))
    logits, loss = model(idx)
    assert list(logits.shape) == [2, 10, 96] and loss is None
    logits, loss = model(idx[:, :-1], targets=idx[:, 1:])
    torch.testing.assert_close(loss, F.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten()))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="idx must hold ids in 0..95"):
        model(torch.full((1, 4), 96))
    with pytest.raises(ValueError, match="n_embd must be a multiple of n_head"):
        zoo.GPTConfig(n_embd=50, n_head=4)
    with pytest.raises(TypeError, match="either a GPTConfig or its fields"):
        zoo.GPT(zoo.GPTConfig(), n_layer=2)


def test_the_audit_never_names_the_models_it_is_run_on():
    """helpers.checklist neither imports nor names helpers.zoo: a verdict on a zoo model comes
    from observing it, not from the audit knowing its code."""
    import pathlib
    import subprocess
    import sys

    import helpers.checklist

    folder = pathlib.Path(helpers.checklist.__file__).parent
    for path in folder.glob("*.py"):
        text = path.read_text()
        # (lm_head is the course's own name, in broken.py: not a name of these models alone)
        for word in ("zoo", "GPTConfig", "mystery", "w_gate", "w_down", "c_attn", "c_fc", "wte"):
            assert word not in text, f"{path.name} names {word!r}"
    code = "import sys, helpers.checklist; print(any(m.startswith('helpers.zoo') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("family", "k1"), [("gpt2", None), ("llama", "rotary"), ("gpt_neox", "rotary")]
)
def test_K1_to_K5_on_zoo_huggingface_models(family, k1):
    pytest.importorskip("transformers")
    from helpers import zoo

    report = audit(zoo.hf_model(family))
    if k1 is None:
        _all_pass(report)
    else:
        _only_k1_fails(report, f"position enters inside attention ({k1})")
    assert not report.undecided


def test_zoo_hf_model_says_how_to_install_transformers_where_it_is_missing(monkeypatch):
    import sys

    from helpers import zoo

    monkeypatch.setitem(sys.modules, "transformers", None)  # an environment without it
    assert zoo.transformers_available() is False
    with pytest.raises(ModuleNotFoundError, match=r"pip install transformers==5\.24\.0"):
        zoo.hf_model("gpt2")
    with pytest.raises(ValueError, match="family must be one of"):
        zoo.hf_model("gpt5")


def test_zoo_hf_model_builds_offline_and_rejects_unknown_settings():
    pytest.importorskip("transformers")
    from helpers import zoo

    model = zoo.hf_model("llama", seed=3)
    assert os.environ["HF_HUB_OFFLINE"] == "1" and not model.training
    again = zoo.hf_model("llama", seed=3)
    assert all(
        torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True)
    )
    with pytest.raises(ValueError, match="has no setting 'n_layers'"):
        zoo.hf_model("gpt2", n_layers=3)


# ---- a feed-forward inlined with bare weights: K2 cannot zero it, and says so -----------------
class _InlinePostNormNoResidual(torch.nn.Module):
    """Post-norm, the feed-forward inlined with bare weights and no residual around it:
    LN2(FFN(LN1(x + attn(x)))). With the attention zeroed the block still normalizes and ends on
    a layer norm, as a post-norm block would: only the bare weights tell it apart."""

    def __init__(self, d=32, h=4):
        super().__init__()
        from helpers import MultiHeadAttention

        self.attn = MultiHeadAttention(d, h, causal=True)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.w1 = torch.nn.Parameter(torch.randn(d, 4 * d) / d**0.5)
        self.w2 = torch.nn.Parameter(torch.randn(4 * d, d) / (4 * d) ** 0.5)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(torch.relu(x @ self.w1) @ self.w2)  # no x + ...


def test_K2_inline_feed_forward_on_a_normalized_input_is_undecided_naming_its_weights():
    torch.manual_seed(0)
    model = TransformerLM(**SMALL, norm="post")
    model.blocks = torch.nn.ModuleList(_InlinePostNormNoResidual() for _ in range(2))
    result = audit(model)["K2"]
    assert result.status == "undecided", str(result)
    assert "cannot zero" in result.finding
    assert "w1 [32, 128], w2 [128, 32]" in result.evidence[0]


def test_K2_K3_mystery_model_undecided_naming_the_inline_weights():
    from helpers import zoo

    report = audit(zoo.mystery_model())
    assert report.failed == ["K1"] and report.undecided == ["K2", "K3"], str(report)
    assert "rotary" in report["K1"].finding
    named = "w_gate [48, 128], w_up [48, 128], w_down [128, 48]"
    assert named in report["K2"].evidence[0] and named in report["K3"].evidence[0]
    assert report["K5"].finding.startswith("not tied")


def test_small_gpt_config_goes_into_and_out_of_an_lmconfig_of_the_same_parameter_count():
    config = zoo.GPTConfig(block_size=32, vocab_size=50, n_layer=2, n_head=2, n_embd=16)
    lm = config.lm_config()
    assert (lm.vocab_size, lm.d_model, lm.n_layers, lm.n_heads, lm.max_len) == (50, 16, 2, 2, 32)
    assert count_parameters(zoo.GPT(config)) == count_parameters(TransformerLM.from_config(lm))
    assert zoo.GPTConfig.from_lm_config(lm) == config
    with pytest.raises(ValueError, match="config.norm must be 'pre' for this GPT, got 'post'"):
        zoo.GPTConfig.from_lm_config(replace(lm, norm="post"))
