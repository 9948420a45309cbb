"""Lesson 9's training and the benchmark accept a device (issue "a lesson a student can take
alone": a GPU or Apple silicon, if the student has one). ``cpu`` is the default and gives the
numbers of a run that names no device; anything else is refused with an error naming
``device``. No GPU here: ``cuda`` and ``mps`` are checked only to be refused where absent."""

from __future__ import annotations

import pytest
import torch

from benchmarks import run as benchmark
from helpers.pretrain import Corpus, Pretraining, check_device, pretrain
from helpers.text import load_text

TINY = dict(d_model=16, n_layers=1, n_heads=2, block_size=16, batch_size=4, lr=5e-3, eval_every=4)


@pytest.fixture(scope="module")
def corpus():
    return Corpus.from_text(load_text(), val_tokens=128)


def test_cpu_is_the_default_and_gives_the_same_numbers(corpus):
    default = Pretraining(corpus, **TINY).train(6, "none")
    named = Pretraining(corpus, device="cpu", **TINY).train(6, "none")
    as_object = pretrain(6, corpus, "none", torch.device("cpu"), **TINY)
    assert default.device == named.device == torch.device("cpu")
    for run in (named, as_object):
        assert run.result.train_losses == default.result.train_losses
        assert run.result.val_losses == default.result.val_losses
    assert next(named.model.parameters()).device.type == "cpu"
    assert "device" not in repr(named)  # the stored outputs' repr, unchanged on the CPU


@pytest.mark.parametrize(
    "device, error, words",
    [
        ("gpu", ValueError, "device must be one of"),
        ("tpu", ValueError, "device must be one of"),
        ("cuda:x", ValueError, "device must be one of"),
        (0, TypeError, "device must be a string or a torch.device"),
        ("meta", ValueError, "device must be one of"),
    ],
)
def test_a_bad_device_is_refused_naming_the_argument(corpus, device, error, words):
    with pytest.raises(error, match=words):
        Pretraining(corpus, device=device, **TINY)
    with pytest.raises(error, match=words):
        check_device(device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_without_a_gpu_is_refused_with_the_way_out(corpus):
    with pytest.raises(ValueError, match=r"device='cuda'.*no CUDA GPU.*device='cpu'"):
        Pretraining(corpus, device="cuda", **TINY)


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has Apple's MPS")
def test_mps_without_apple_silicon_is_refused(corpus):
    with pytest.raises(ValueError, match=r"device='mps'.*Apple-silicon"):
        Pretraining(corpus, device="mps", **TINY)


def test_benchmark_block_takes_a_device_and_its_flag_refuses_a_bad_one(capsys, tmp_path):
    block = benchmark.bench_block(repeats=1, device="cpu")
    assert block["device"] == "cpu" and block["ours_ms"] > 0
    with pytest.raises(ValueError, match="device must be one of"):
        benchmark.bench_block(repeats=1, device="gpu")
    out = tmp_path / "RESULTS.md"
    with pytest.raises(SystemExit):
        benchmark.main(["--device", "gpu", "--render-only", "--out", str(out)])
    assert "--device: device must be one of" in capsys.readouterr().err
    assert not out.exists()
