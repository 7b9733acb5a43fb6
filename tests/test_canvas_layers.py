"""What the matplotlib PNG draws from a Diagram that the browser canvas must draw too: the bytes
views address past a freed storage's end, and the overview of every storage (its binary columns,
decoded here as the browser does, against the plan's own columns)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.payload import payload  # noqa: E402
from tensorviz.explorer.render import ALL_LANES  # noqa: E402
from tensorviz.render.mpl import drawn_rects, render  # noqa: E402


def col(p: dict, key: str, dtype: str) -> list:
    return np.frombuffer(p[key], dtype).tolist()


class Tensors(dict):
    """A dict whose repr reads no tensor data (a freed tensor's values cannot be printed)."""

    def __repr__(self) -> str:
        return f"Tensors({list(self)})"


@pytest.fixture
def freed():
    w = torch.zeros(4, 5)  # 80 bytes
    v = w[1:3]  # bytes [20, 60)
    w.untyped_storage().resize_(0)
    return Tensors(w=w, v=v, other=torch.ones(8))


def test_past_end_mark_is_the_png_layer(freed):
    lay = tv.analyze(freed)
    d = tv.diagram(lay, max_lanes=ALL_LANES)
    p = payload(d, lay)
    marks = list(zip(col(p, "mark_kind", "u1"), col(p, "mark_lane", "<u4"), col(p, "mark_start", "<f8"),
                     col(p, "mark_stop", "<f8")))  # fmt: skip
    # storage #0 (lane 0) is freed: views reach [0, 80) past its 0 bytes; w and v share [20, 60)
    assert sorted(marks) == [(1, 0, 20.0, 60.0), (3, 0, 0.0, 80.0)]
    assert col(p, "block_nbytes", "<f8") == [0.0]  # the storage row's size: nothing left
    fig = render(tv.diagram(lay))
    (png,) = drawn_rects(fig, "past-end")
    assert (png[:, 0].min(), png[:, 0].max()) == (0.0, 80.0)  # the PNG draws the same bytes
    fig.clear()


def test_no_past_end_mark_for_live_storages():
    x = torch.zeros(16)
    lay = tv.analyze({"x": x, "a": x[:4], "b": x[8:]})
    p = payload(tv.diagram(lay, max_lanes=ALL_LANES), lay)
    assert 3 not in col(p, "mark_kind", "u1")
