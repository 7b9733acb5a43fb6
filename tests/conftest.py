"""Shared test set-up: headless matplotlib, no leaked figures, seed models on hand."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (tests may use pyplot; the library never does)
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_figures_left_open():
    """Fail any test that leaves a pyplot figure open (the library must never create one)."""
    before = set(plt.get_fignums())
    yield
    leaked = set(plt.get_fignums()) - before
    plt.close("all")
    assert not leaked, f"test left {len(leaked)} pyplot figure(s) open"
