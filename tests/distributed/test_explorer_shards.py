"""The explorer offers the shard colourings (by rank, by mesh dimension) for sharded layouts
only: a DCP checkpoint folder here (one process, no process group needed)."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("ipywidgets")
dcp = pytest.importorskip("torch.distributed.checkpoint")

import tensorviz.explorer.widget as tw  # noqa: E402
from tensorviz.explorer.state import GROUPINGS  # noqa: E402
from tensorviz.explorer.widget import explore  # noqa: E402
from tests.helpers.models import TiedLM  # noqa: E402


@pytest.fixture
def shown(monkeypatch):
    """What explore() emits as output (captured instead of displayed)."""
    out: list = []
    monkeypatch.setattr(tw, "_display", lambda obj, **kw: out.append(obj))
    return out


@pytest.fixture
def folder(tmp_path):
    path = str(tmp_path / "ckpt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no process group: saving from one process"
        dcp.save({"w": torch.arange(6.0).view(2, 3), "b": torch.zeros(4)}, checkpoint_id=path)
    return path


def test_a_dcp_folder_can_be_coloured_by_the_rank_that_saved_it(folder, shown):
    ex = explore(folder)
    assert list(ex.by_toggle.options) == [*GROUPINGS, ("by rank", "rank")]
    assert len(ex.by_toggle.tooltips) == len(ex.by_toggle.options)
    ex.by_toggle.value = "rank"
    assert ex.diagram.options.color_by == "rank" and ex.diagram.by == "storage"
    assert ex.status.startswith("grouped by rank")


def test_a_plain_model_offers_only_the_three_groupings(shown):
    ex = explore(TiedLM())
    assert list(ex.by_toggle.options) == list(GROUPINGS)
    with pytest.raises(ValueError, match="by must be one of 'storage', 'span', 'overlap', got 'rank'"):
        explore(TiedLM(), by="rank")
