"""Lesson 10: the audit (helpers.audit) decides K1-K5 right on correct, broken and foreign models,
and the exercise checks (helpers.checks.audit) give a verdict on every kind of wrong answer."""

import copy
import itertools
import os

import pytest
import torch
from _models import TinyGPT, hf_gpt2  # tests/ is on sys.path (no __init__.py)
from torch import nn

from helpers import TransformerLM, init_weights
from helpers.checklist import (
    BROKEN_MODELS,
    CHECKS,
    AuditReport,
    TorchEncoderLM,
    audit,
    broken_model,
)
from helpers.checks import ExerciseFailed
from helpers.checks import audit as checks

os.environ["HF_HUB_OFFLINE"] = "1"  # transformers is a test-only dependency: never download

SMALL = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=32)
FLAW_CHECK = {
    "K1": "K1",
    "K2": "K2",
    "K3": "K3",
    "K3-per-position": "K3",
    "K4": "K4",
    "K5": "K5",
}


def _assert_all_pass(report: AuditReport):
    assert report.passed, str(report)
    assert [r.status for r in report] == ["passed"] * 5


# ---- correct models pass all five -----------------------------------------------------------
SETTINGS = list(
    itertools.product(
        ("sinusoidal", "learned"), ("pre", "post"), ("relu", "gelu", "swiglu"), (True, False)
    )
)


@pytest.mark.parametrize(("positional", "norm", "activation", "tied"), SETTINGS)
def test_K1_to_K5_course_model_passes_in_every_setting(positional, norm, activation, tied):
    model = TransformerLM(
        **SMALL, positional=positional, norm=norm, activation=activation, tie_weights=tied
    )
    report = audit(model)
    _assert_all_pass(report)
    assert report.found["norm placement"] == norm
    assert report["K5"].finding.startswith("tied" if tied else "not tied")


def test_K2_course_model_without_layer_norm_passes_and_says_so():
    report = audit(TransformerLM(**SMALL, norm="none"))
    _assert_all_pass(report)
    assert report.found["norm placement"] == "none"


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("tied", [True, False])
def test_K1_to_K5_pytorch_encoder_layers_pass(norm_first, tied):
    report = audit(TorchEncoderLM(norm_first=norm_first, tie_weights=tied))
    _assert_all_pass(report)
    assert report.found["norm placement"] == ("pre" if norm_first else "post")
    assert "layers.0.linear2" in report["K3"].evidence[0]  # the inlined FFN, seen through linear2


def test_K1_to_K5_small_gpt_in_another_style_passes():
    report = audit(TinyGPT())
    _assert_all_pass(report)
    assert report.found["blocks"].startswith("3 x _Layer")
    assert "d_ff 192" in report["K3"].evidence[0]


def test_K1_to_K5_huggingface_gpt2_from_config_passes():
    pytest.importorskip("transformers")
    model = hf_gpt2()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    report = audit(model)
    _assert_all_pass(report)
    assert "transformer.h.0.mlp" in report["K3"].evidence[0]  # Conv1D weights [in, out]
    assert "d_ff 256" in report["K3"].evidence[0]
    assert report["K5"].evidence[0].startswith("lm_head.weight is transformer.wte.weight")


def test_huggingface_gpt2_untied_passes_as_not_tied():
    pytest.importorskip("transformers")
    report = audit(hf_gpt2(tie_word_embeddings=False))
    _assert_all_pass(report)
    assert report["K5"].finding.startswith("not tied")


# ---- each broken model is caught by its check, and only by it ------------------------------
@pytest.mark.parametrize("flaw", list(BROKEN_MODELS))
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_broken_model_fails_exactly_its_check(flaw, norm):
    report = audit(broken_model(flaw, norm=norm, positional="learned"))
    want = FLAW_CHECK[flaw]
    assert report.failed == [want], str(report)
    assert report.undecided == []
    assert not report.passed


def test_K1_evidence_names_the_first_block_and_the_injected_term():
    ev = " ".join(audit(broken_model("K1"))["K1"].evidence)
    assert "input of blocks.0 is the same vector at every position" in ev
    assert "input of blocks.1 is not the output of blocks.0" in ev
    assert "differs by position" in ev


def test_K2_evidence_names_the_unwrapped_sublayer():
    result = audit(broken_model("K2", n_layers=3))["K2"]
    assert result.status == "failed"
    assert len(result.evidence) == 1
    assert "blocks.2.ffn.sublayer (FeedForward) zeroed" in result.evidence[0]


def test_K3_evidence_names_width_and_position_dependence():
    narrow = audit(broken_model("K3"))["K3"]
    assert "hidden width 16 <= d_model 32" in narrow.evidence[0]
    per_pos = " ".join(audit(broken_model("K3-per-position"))["K3"].evidence)
    assert "weights depend on the position" in per_pos


def test_K3_fails_when_d_ff_equals_d_model():
    report = audit(TransformerLM(**SMALL, d_ff=32))
    assert report.failed == ["K3"]
    assert "hidden width 32 <= d_model 32" in report["K3"].evidence[0]


def test_K4_evidence_reused_block_and_shared_parameter():
    ev = audit(broken_model("K4", n_layers=3))["K4"].evidence
    assert any("blocks.1 is the same module object as blocks.0" in e for e in ev)
    model = TransformerLM(**SMALL)
    model.blocks[1].ffn.sublayer.w1 = model.blocks[0].ffn.sublayer.w1  # share one Linear
    result = audit(model)["K4"]
    assert result.status == "failed"
    assert any(
        "blocks.0.ffn.sublayer.w1.weight and blocks.1.ffn.sublayer.w1.weight" in e
        for e in result.evidence
    )


def test_K5_copy_fails_with_equal_values_different_storage():
    result = audit(broken_model("K5"))["K5"]
    assert result.status == "failed"
    assert "equal values" in result.evidence[0] and "different storage" in result.evidence[0]
    assert "leaves logit" in result.evidence[1]  # the experiment agrees: the copy does not move


def test_K5_second_parameter_over_the_same_storage_fails():
    model = TransformerLM(**SMALL, tie_weights=False)
    model.lm_head.weight = nn.Parameter(model.token_embedding.weight)  # shares storage, new object
    result = audit(model)["K5"]
    assert result.status == "failed"
    assert "same storage" in result.evidence[0]


def test_K5_functional_tying_without_output_module_is_seen_by_experiment():
    class FunctionalTied(TransformerLM):
        def forward(self, tokens):
            h = self.embed(tokens)
            for block in self.blocks:
                h = block(h)
            return self.final_norm(h) @ self.token_embedding.weight.T  # [B, n, V]

    report = audit(FunctionalTied(**SMALL))
    _assert_all_pass(report)
    assert report["K5"].finding == "tied: the logits use the embedding matrix itself"


# ---- what the audit cannot decide, it says why ------------------------------------------------
def test_undecided_when_no_embedding_and_hints_fix_it():
    class OneHotLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = TransformerLM(**SMALL)

        def forward(self, tokens):
            h = nn.functional.one_hot(tokens, 100).float() @ self.inner.token_embedding.weight
            h = self.inner.position(h)
            for block in self.inner.blocks:
                h = block(h)
            return self.inner.lm_head(self.inner.final_norm(h))

    model = OneHotLM()
    report = audit(model)
    assert report.undecided == list(CHECKS)
    assert "pass embedding=" in report["K1"].evidence[0]
    _assert_all_pass(audit(model, embedding="inner.token_embedding"))
    _assert_all_pass(audit(model, embedding=model.inner.token_embedding, output="inner.lm_head"))


def test_blocks_hint_and_forward_hint():
    model = TinyGPT()
    report = audit(model, blocks="layers", forward=lambda m, t: m(t)[0])
    _assert_all_pass(report)
    report = audit(model, blocks=list(model.layers), vocab_size=97)
    _assert_all_pass(report)


def test_probe_tokens_hint_is_used():
    probe = torch.randint(0, 100, (3, 5), generator=torch.Generator().manual_seed(3))
    report = audit(TransformerLM(**SMALL), probe_tokens=probe)
    _assert_all_pass(report)
    assert report.found["probe"] == "tokens [3, 5] -> logits [3, 5, 100]"


def test_model_that_raises_is_undecided_with_the_error():
    class Crashes(TransformerLM):
        def forward(self, tokens):
            raise ValueError("tokens must be [batch, n]")

    report = audit(Crashes(**SMALL))
    assert report.undecided == list(CHECKS)
    assert "ValueError: tokens must be [batch, n]" in report["K1"].evidence[0]


def test_model_returning_something_else_is_undecided_with_reason():
    class Weird(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.Embedding(10, 4)

        def forward(self, tokens):
            return "logits"

    report = audit(Weird())
    assert report.undecided == list(CHECKS)
    assert "not logits" in report["K3"].evidence[0]


def test_bad_arguments_raise_naming_the_argument():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        audit("gpt")
    with pytest.raises(ValueError, match="vocab_size"):
        audit(TransformerLM(**SMALL), vocab_size=0)
    with pytest.raises(TypeError, match="forward must be a function"):
        audit(TransformerLM(**SMALL), forward=3)
    with pytest.raises(ValueError, match="blocks='nope' is not a submodule"):
        audit(TransformerLM(**SMALL), blocks="nope")
    with pytest.raises(ValueError, match="probe_tokens must hold at least 2 sequences"):
        audit(TransformerLM(**SMALL), probe_tokens=torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="probe_tokens must hold integer token ids"):
        audit(TransformerLM(**SMALL), probe_tokens=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="first two sequences must differ"):
        audit(TransformerLM(**SMALL), probe_tokens=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="blocks must be a list"):
        audit(TransformerLM(**SMALL), blocks=3)
    with pytest.raises(TypeError, match="embedding must be a torch.nn.Module"):
        audit(TransformerLM(**SMALL), embedding=3)
    with pytest.raises(ValueError, match="flaw must be one of"):
        broken_model("K9")
    with pytest.raises(TypeError, match="seed must be a whole number"):
        audit(TransformerLM(**SMALL), seed="a")
    with pytest.raises(TypeError, match="blocks='token_embedding' must name the container"):
        audit(TransformerLM(**SMALL), blocks="token_embedding")


# ---- the audit leaves the model as it found it; the report reads well -------------------------
def test_audit_restores_mode_and_weights():
    model = TransformerLM(**SMALL)
    model.train()
    model.blocks[0].eval()
    before = copy.deepcopy(model.state_dict())
    audit(model)
    assert model.training and not model.blocks[0].training and model.blocks[1].training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_audit_is_deterministic():
    model = TransformerLM(**SMALL)
    assert str(audit(model)) == str(audit(model))


def test_report_text_html_and_access():
    report = audit(broken_model("K4"), title="reused block")
    text = str(report)
    assert text.startswith("Audit of reused block: 4 passed, 1 failed")
    assert "✗ K4 failed" in text and "✓ K1 passed" in text
    page = report._repr_html_()
    assert page.count("<tr>") == 6 and "same module object" in page and "<table>" in page
    assert report.status("K4") == "failed" and report["K1"].passed
    assert repr(report) == "<AuditReport reused block: 4 passed, 1 failed>"
    with pytest.raises(KeyError, match="check must be one of"):
        report.status("K6")


# ---- exercise checks --------------------------------------------------------------------------
def _raises(fn):
    def f(*a, **k):
        raise fn

    return f


def _right_reuse(model):  # an independent block at each depth, with fresh weights (exercise 1)
    model.blocks = nn.ModuleList(init_weights(copy.deepcopy(b)) for b in model.blocks)
    return model


def _right_tie(model):
    model.lm_head.weight = model.token_embedding.weight
    return model


def test_check_reused_blocks_accepts_the_repair(capsys):
    checks.check_reused_blocks(_right_reuse)
    assert capsys.readouterr().out.startswith("✓")


def test_check_copied_output_accepts_the_repair(capsys):
    checks.check_copied_output(_right_tie)
    assert capsys.readouterr().out.startswith("✓")


def test_check_position_accepts_the_repair(capsys):
    class Repaired(checks.PositionAfterFirstBlockLM):
        def forward(self, tokens):
            h = self.position(self.token_embedding(tokens))
            for block in self.blocks:
                h = block(h)
            return self.lm_head(self.final_norm(h))

    checks.check_position_before_first_block(Repaired)
    assert capsys.readouterr().out.startswith("✓")


def _wrong_reuse_same_copy(model):  # the typical mistake: one deep copy, reused
    b = copy.deepcopy(model.blocks[0])
    model.blocks = nn.ModuleList([b] * len(model.blocks))
    return model


def _wrong_reuse_shared_params(model):  # new blocks whose weights are still the same tensors
    new = [copy.deepcopy(b) for b in model.blocks]
    for blk in new:
        for (name, _), (_, p) in zip(
            blk.named_parameters(), model.blocks[0].named_parameters(), strict=True
        ):
            mod_name, _, attr = name.rpartition(".")
            setattr(blk.get_submodule(mod_name), attr, p)
    model.blocks = nn.ModuleList(new)
    return model


def _wrong_nan(model):
    with torch.no_grad():
        model.token_embedding.weight.fill_(float("nan"))
    return model


def _wrong_shape(model):
    model.lm_head = nn.Linear(model.config.d_model, 7, bias=False)
    return model


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (lambda m: None, "returned None"),
        (lambda m: 3, "should return the repaired model (an nn.Module), got a int"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (_raises(KeyError("blocks")), "raised KeyError"),
        (lambda m: m, "K4 still fails: blocks.1 is the same module object as blocks.0"),
        (_wrong_reuse_same_copy, "K4 still fails: blocks.1 is the same module object"),
        (_wrong_reuse_shared_params, "share one storage"),
        (_wrong_nan, "contains NaN"),
        (_wrong_shape, "logits have shape [2, 8, 7], expected [2, 8, 100]"),
        (lambda m: m.double(), "dtype torch.float64"),
    ],
)
def test_check_reused_blocks_names_each_wrong_answer(answer, says):
    with pytest.raises(ExerciseFailed, match=None) as info:
        checks.check_reused_blocks(answer)
    assert says in str(info.value), str(info.value)


def _wrong_tie_clone(model):  # the typical mistake: a copy of the values
    model.lm_head.weight = nn.Parameter(model.token_embedding.weight.detach().clone())
    return model


def _wrong_tie_new_parameter(model):  # a second Parameter over the same storage
    model.lm_head.weight = nn.Parameter(model.token_embedding.weight)
    return model


def _wrong_tie_breaks_other(model):  # ties, but also reuses a block
    model.lm_head.weight = model.token_embedding.weight
    model.blocks = nn.ModuleList([model.blocks[0]] * len(model.blocks))
    return model


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (lambda m: None, "returned None"),
        (_raises(NotImplementedError()), "not implemented yet"),
        (_raises(RuntimeError("boom")), "raised RuntimeError: boom"),
        (lambda m: m, "K5 still fails"),
        (_wrong_tie_clone, "equal values to token_embedding.weight, but different storage"),
        (_wrong_tie_new_parameter, "same storage"),
        (_wrong_tie_breaks_other, "K5 passes now, but K4 fails"),
        (_wrong_nan, "contains NaN"),
    ],
)
def test_check_copied_output_names_each_wrong_answer(answer, says):
    with pytest.raises(ExerciseFailed) as info:
        checks.check_copied_output(answer)
    assert says in str(info.value), str(info.value)


def test_check_verdicts_are_one_line_even_when_the_error_is_long():
    def multi_line_error(model):
        raise RuntimeError("first line\nsecond line")

    with pytest.raises(ExerciseFailed) as info:
        checks.check_copied_output(multi_line_error)
    assert "\n" not in str(info.value)
    assert "calling tie_output(model) raised RuntimeError: first line second line" in str(
        info.value
    )


class _NanLogits(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        return super().forward(tokens) * float("nan")


class _IntLogits(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        return super().forward(tokens).to(torch.int64)


class _ExtraDim(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        return super().forward(tokens).unsqueeze(0)


class _NotYet(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        raise NotImplementedError()


class _Crashes(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        return self.blocks[0](tokens)  # tokens are ids, not vectors


class _StillAfter(checks.PositionAfterFirstBlockLM):
    pass


class _FreshClass(TransformerLM):  # the library's model, not a repair of the broken one
    pass


class _Twice(checks.PositionAfterFirstBlockLM):  # before the first block, and again after it
    def forward(self, tokens):
        h = self.position(self.token_embedding(tokens))
        for i, block in enumerate(self.blocks):
            h = block(h)
            if i == 0:
                h = self.position(h)
        return self.lm_head(self.final_norm(h))


class _NoPosition(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        h = self.token_embedding(tokens)
        for block in self.blocks:
            h = block(h)
        return self.lm_head(self.final_norm(h))


class _ReturnsNone(checks.PositionAfterFirstBlockLM):
    def forward(self, tokens):
        h = self.position(self.token_embedding(tokens))
        for block in self.blocks:
            h = block(h)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (None, "is None"),
        (3, "should be a model class"),
        (_NotYet, "not implemented yet"),
        (_Crashes, "raised"),
        (_ReturnsNone, "returned None"),
        (_StillAfter, "define its own forward"),
        (_FreshClass, "must subclass PositionAfterFirstBlockLM"),
        (_Twice, "the input of blocks.1 is not the output of blocks.0"),
        (_NoPosition, "no position information enters before the first block"),
        (_NanLogits, "contains NaN"),
        (_IntLogits, "dtype torch.int64"),
        (_ExtraDim, "logits have shape [1, 2, 8, 100]"),
    ],
)
def test_check_position_names_each_wrong_answer(answer, says):
    with pytest.raises(ExerciseFailed) as info:
        checks.check_position_before_first_block(answer)
    assert says in str(info.value), str(info.value)


def test_audit_is_public_as_helpers_audit():
    import helpers

    assert helpers.audit is audit and helpers.AuditReport is AuditReport
    assert {"audit", "AuditReport"} <= set(helpers.__all__)


def test_K1_to_K5_one_block_model_passes():
    report = audit(TransformerLM(**{**SMALL, "n_layers": 1}))
    _assert_all_pass(report)
    assert "there is one block" in report["K1"].evidence[-1]


def _reuse_first_layer(model):
    model.layers = nn.ModuleList([model.layers[0]] * len(model.layers))
    return model


def _copy_head(model, head, table):
    setattr(model, head, nn.Linear(table.weight.shape[1], table.weight.shape[0], bias=False))
    getattr(model, head).weight = nn.Parameter(table.weight.detach().clone())
    return model


@pytest.mark.parametrize(
    ("build", "want"),
    [
        (lambda: _reuse_first_layer(TinyGPT()), "K4"),
        (lambda: _reuse_first_layer(TorchEncoderLM(norm_first=False)), "K4"),
        (lambda: (m := TinyGPT()) and _copy_head(m, "unembed", m.wte), "K5"),
        (lambda: (m := TorchEncoderLM()) and _copy_head(m, "head", m.tok), "K5"),
    ],
    ids=["tinygpt-reused", "torch-post-reused", "tinygpt-copied-head", "torch-copied-head"],
)
def test_foreign_models_broken_fail_exactly_their_check(build, want):
    report = audit(build())
    assert report.failed == [want], str(report)
    assert report.undecided == []


# ---- models that once fooled the audit (regressions) ----------------------------------------
class _ParallelNoResidualBlock(nn.Module):
    """attn(LN1 x) + ffn(LN2 x) with no x: zeroing either sublayer alone leaves the other."""

    def __init__(self, d: int, h: int):
        super().__init__()
        from helpers import FeedForward, LayerNorm, MultiHeadAttention

        self.ln1, self.ln2 = LayerNorm(d), LayerNorm(d)
        self.attn, self.ffn = MultiHeadAttention(d, h, causal=True), FeedForward(d)

    def forward(self, x):
        return self.attn(self.ln1(x)) + self.ffn(self.ln2(x))


class _NormalizedSkipBlock(_ParallelNoResidualBlock):
    """LN(x) + Sublayer(LN(x)): the identity path itself goes through the norm."""

    def forward(self, x):
        x = self.ln1(x)
        x = x + self.attn(x)
        x = self.ln2(x)
        return x + self.ffn(x)


def _with_blocks(block_cls):
    model = TransformerLM(**SMALL)
    model.blocks = nn.ModuleList(block_cls(32, 4) for _ in range(SMALL["n_layers"]))
    return model


class _MultiplicativePositionLM(TransformerLM):
    def embed(self, tokens):
        e = self.token_embedding(tokens)  # [B, n, d]
        return e * (1.0 + self.position(torch.zeros_like(e)))  # E[t] * (1 + PE), not E[t] + PE


class _EmbeddingNormLM(TransformerLM):
    """BERT style: position added, then a layer norm, before the first block (correct for K1)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embed_norm = nn.LayerNorm(kwargs["d_model"])

    def embed(self, tokens):
        return self.embed_norm(self.position(self.token_embedding(tokens)))


class _RawFeedForward(nn.Module):
    """max(0, x W1 + b1) W2 + b2 with bare Parameters, no nn.Linear inside."""

    def __init__(self, d: int, d_ff: int):
        super().__init__()
        self.w_in = nn.Parameter(torch.randn(d, d_ff) / d**0.5)
        self.b_in = nn.Parameter(torch.zeros(d_ff))
        self.w_out = nn.Parameter(torch.randn(d_ff, d) / d_ff**0.5)
        self.b_out = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return torch.relu(x @ self.w_in + self.b_in) @ self.w_out + self.b_out


def _raw_ffn_model(d_ff):
    model = TransformerLM(**SMALL)
    for block in model.blocks:
        block.ffn.sublayer = _RawFeedForward(SMALL["d_model"], d_ff)
    return model


def test_K2_parallel_sublayers_without_identity_path_fail():
    report = audit(_with_blocks(_ParallelNoResidualBlock))
    assert report.failed == ["K2"], str(report)
    assert "no identity path" in report["K2"].evidence[0]


def test_K2_normalized_identity_path_is_neither_pre_nor_post():
    report = audit(_with_blocks(_NormalizedSkipBlock))
    assert report.failed == ["K2"], str(report)
    assert "neither pre- nor post-norm" in report["K2"].finding
    assert report.found["norm placement"] == "normalized skip"


def test_K1_position_multiplied_not_added_fails():
    report = audit(_MultiplicativePositionLM(**SMALL))
    assert report.failed == ["K1"], str(report)
    assert report["K1"].finding == "position is not added to the token embeddings"
    assert "some other way than by adding it" in report["K1"].evidence[0]


def test_K1_position_added_then_embedding_norm_passes():
    report = audit(_EmbeddingNormLM(**SMALL))
    _assert_all_pass(report)
    assert "at the output of position" in report["K1"].evidence[0]


def test_K3_feed_forward_with_bare_parameters_reads_d_ff_from_the_weights():
    wide = audit(_raw_ffn_model(4 * SMALL["d_model"]))
    _assert_all_pass(wide)
    assert "d_ff 128" in wide["K3"].evidence[0] and "w_out [128, 32]" in wide["K3"].evidence[0]
    narrow = audit(_raw_ffn_model(SMALL["d_model"] // 2))
    assert narrow.failed == ["K3"], str(narrow)
    assert "hidden width 16 <= d_model 32" in narrow["K3"].evidence[0]


# ---- capstone exercise 2: tie a head stored in the formula's layout --------------------------
def _tie_linear(model):
    head = nn.Linear(model.config.d_model, model.config.vocab_size, bias=False)
    head.weight = model.token_embedding.weight
    model.lm_head = head
    return model


class _TiedHead(nn.Module):
    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, h):
        return h @ self.embedding.weight.T  # [B, n, d] @ [d, V]


def _tie_module(model):
    model.lm_head = _TiedHead(model.token_embedding)
    return model


def _copied(model):
    model.lm_head = nn.Linear(model.config.d_model, model.config.vocab_size, bias=False)
    model.lm_head.weight = nn.Parameter(model.token_embedding.weight.detach().clone())
    return model


def _fresh_tied(model):
    return TransformerLM(**checks.SETTINGS)


@pytest.mark.parametrize("answer", [_tie_linear, _tie_module])
def test_K5_check_tie_transposed_passes_each_right_answer(answer, capsys):
    checks.check_tie_transposed(answer)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (lambda m: m, "still counts"),
        (_copied, "still counts"),
        (_fresh_tied, "returned a different model"),
        (lambda m: None, "returned None"),
    ],
)
def test_K5_check_tie_transposed_names_each_wrong_answer(answer, says):
    with pytest.raises(ExerciseFailed) as info:
        checks.check_tie_transposed(answer)
    assert says in str(info.value), str(info.value)
