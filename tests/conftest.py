"""Shared test set-up: a headless matplotlib, deterministic torch, and a guard on open figures."""

import matplotlib

# Agg for this process only: not through MPLBACKEND, which nbval's kernels would inherit (their
# figures would then never be shown, and every stored figure output would mismatch).
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_close_figures():
    torch.manual_seed(0)
    yield
    plt.close("all")


@pytest.fixture
def no_open_figures():
    """Fails the test if it leaves a pyplot figure open."""
    before = set(plt.get_fignums())
    yield
    leaked = set(plt.get_fignums()) - before
    assert not leaked, f"figures left open: {sorted(leaked)}"
