"""Lesson 9: the longer run that ships with the course (helpers/data/lesson9_model.pt, written by
tools/train_lesson9_model.py) is what its file says it is."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from helpers.checkpoint import CHECKPOINT_PATH, Checkpoint, load_checkpoint, save_checkpoint
from helpers.model import LMConfig, TransformerLM
from helpers.pretrain import Corpus, Pretraining
from helpers.reproducible import default_dtype
from helpers.training import evaluate


@pytest.fixture(scope="module")
def shipped() -> Checkpoint:
    return load_checkpoint()


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.from_text()


def test_the_shipped_file_is_small_and_loads_as_float64(shipped):
    assert CHECKPOINT_PATH.stat().st_size < 3_000_000  # a few MB at most in the repository
    assert shipped.model.token_embedding.weight.dtype == torch.float64
    assert not shipped.model.training
    assert shipped.tokenizer.vocab_size == 65
    assert shipped.steps == shipped.val_steps[-1] and shipped.steps >= 1000


def test_C9_1_its_loss_measured_now_is_the_loss_it_recorded(shipped, corpus):
    # the weights are the ones that gave the recorded loss: measured again here (float64 from the
    # saved float32 weights) it agrees to float32's precision; a wrong or stale file would not
    now = evaluate(shipped.model, corpus.val_ids, shipped.settings["block_size"])
    assert abs(now - shipped.val_losses[-1]) < 2e-3, (now, shipped.val_losses[-1])


def test_C9_1_the_longer_run_is_far_below_the_baselines(shipped, corpus):
    b = corpus.baselines
    final = shipped.val_losses[-1]
    assert final < b["bigram"] - 0.5 and final < b["unigram"] - 1.5
    # the second half of the run still helped, by less than the first (it levels off: the
    # recorded run went 1.622 at step 1000, 1.515 at 1750, 1.518 at 2000)
    half = shipped.val_losses[shipped.val_steps.index(shipped.steps // 2)]
    assert final < half - 0.05


def test_save_and_load_round_trip(tmp_path):
    small = Corpus.from_text(val_tokens=256)
    run = Pretraining(small, d_model=16, n_layers=1, n_heads=2, block_size=16, batch_size=4)
    run.train(3, progress="none")
    path = tmp_path / "run.pt"
    save_checkpoint(run, path)
    back = load_checkpoint(path)
    assert back.steps == 3 and back.settings["d_model"] == 16
    ids = run.corpus.val_ids[None, :16]
    torch.testing.assert_close(
        back.model(ids), run.model.eval()(ids).double(), rtol=1e-4, atol=1e-4
    )  # float32 storage of float64 weights: equal to float32's precision


def test_bad_arguments():
    with pytest.raises(TypeError, match="run must be a helpers.pretrain.Pretraining"):
        save_checkpoint("model", CHECKPOINT_PATH)
    with pytest.raises(FileNotFoundError, match="path must name a file"):
        load_checkpoint("no/such/file.pt")
    with pytest.raises(TypeError, match="path must be a file path or None"):
        load_checkpoint(3)


def test_every_lmconfig_field_round_trips_through_the_checkpoint(tmp_path):
    """The config is saved whole: a field the checkpoint dropped would come back as its default."""
    small = Corpus.from_text(val_tokens=256)
    run = Pretraining(small, d_model=16, n_layers=1, n_heads=2, block_size=16, batch_size=4)
    config = LMConfig(
        vocab_size=run.tokenizer.vocab_size, d_model=16, n_layers=2, n_heads=2, d_ff=24,
        max_len=20, positional="learned", norm="post", activation="relu", tie_weights=False,
        norm_type="rms", init="torch", scale_embeddings=True,
    )  # fmt: skip
    unset = [f.name for f in fields(LMConfig) if getattr(config, f.name) == f.default]
    assert not unset, f"give {unset} a value other than its default here, so it is tested"
    with default_dtype(torch.float64):
        run.model = TransformerLM.from_config(config)
    path = tmp_path / "run.pt"
    save_checkpoint(run, path)
    back = load_checkpoint(path)
    assert back.model.config == config
    assert back.settings["block_size"] == 16 and back.settings["norm_type"] == "rms"


def test_the_shipped_file_of_the_older_format_rebuilds_its_config(shipped):
    """helpers/data/lesson9_model.pt holds the model's options among its settings (no config)."""
    assert shipped.model.config == LMConfig(
        vocab_size=65, d_model=96, n_layers=3, n_heads=4, max_len=96, positional="sinusoidal",
        norm="pre", activation="gelu", tie_weights=True,
    )  # fmt: skip
