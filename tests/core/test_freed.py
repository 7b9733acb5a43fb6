"""Freed storages (``t.untyped_storage().resize_(0)``, as FSDP does between steps): the layout
says so on the storage and on each view, diagrams draw the bytes past the end distinctly, and
explain and the explorer do not raise (issue 10, part 6)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.plan.select import interesting, storage_reasons
from tensorviz.render.mpl import drawn_rects, layer, names_at, render
from tensorviz.sources.memory import FREED


class Tensors(dict):
    """A dict whose repr reads no tensor data (printing a freed tensor's values would crash)."""

    def __repr__(self) -> str:
        return f"Tensors({list(self)})"


@pytest.fixture
def freed():
    w = torch.zeros(4, 5)
    v, empty, other = w[1:3], w[:0], torch.ones(8)
    w.untyped_storage().resize_(0)
    return Tensors(w=w, v=v, empty=empty, other=other)


def test_layout_reports_the_freed_storage_and_each_view(freed):
    layout = tv.analyze(freed)
    s = layout.storage("w")
    assert (s.nbytes, s.covered_nbytes, s.unreferenced_nbytes, s.names) == (0, 0, 0, ("w", "v", "empty"))
    assert [(v.name, v.start, v.stop, v.note) for v in layout.storage_views(s.key)] == [
        ("w", 0, 80, FREED),
        ("v", 20, 60, FREED),
        ("empty", 0, 0, ""),  # reads nothing: nothing past the end
    ]
    assert layout["other"].note == ""
    assert layout.metadata["problems"] == [f"{FREED} (0 bytes, as after t.untyped_storage().resize_(0)): w, v"]
    assert layout.relation("w", "v") == "contains" and layout.relation("w", "other") == "unrelated"
    assert layout.unique_nbytes == 32  # only the live storage's bytes exist
    text = layout.to_text()
    assert "storage #0 cpu 0 B, freed: its views point past its end: 3 views, 0 B read" in text
    assert f"w  float32[4×5] stride=(5, 1) offset=0  bytes [0, 80)  ({FREED})" in text
    assert f"problem: {FREED}" in text


def test_one_problem_per_freed_storage():
    a, b = torch.zeros(3), torch.zeros(2)
    views = [a, a[1:], b, b[:1]]
    a.untyped_storage().resize_(0)
    b.untyped_storage().resize_(0)
    layout = tv.analyze(views)
    assert [v.note for v in layout.views] == [FREED] * 4
    assert [p.rsplit(": ", 1)[1] for p in layout.metadata["problems"]] == ["0, 1", "2, 3"]


def test_diagram_names_the_reason_and_draws_past_the_end(freed):
    layout = tv.analyze(freed)
    s = layout.storage("w")
    assert storage_reasons(s, layout.storage_views(s.key)) == ("freed", "shared", "overlapping")
    assert interesting(layout, np.zeros(2, dtype=bool)).tolist() == [True, False]
    d = tv.diagram(layout)
    (block,) = [b for b in d.blocks if b.nbytes == 0]
    assert block.reasons[0] == "freed"
    assert "storage #0 · 0 B: freed, shared, overlapping" in d.to_text()
    fig = render(d)
    rects = drawn_rects(fig, "past-end")
    assert len(rects) == 1
    assert (rects[0][:, 0].min(), rects[0][:, 0].max()) == (0.0, 80.0)  # [nbytes, furthest byte)
    assert names_at(fig, "past-end", 0) == ("w", "v", "empty")
    ax = fig.axes[0]
    assert "past its storage's end (freed)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "storage #0 · 0 B\nfreed" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_live_storages_draw_nothing_past_the_end():
    fig = render(tv.diagram({"a": (a := torch.zeros(6)), "b": a[2:]}))
    assert len(drawn_rects(fig, "past-end")) == 0
    assert not layer(fig, "past-end").get_visible()
    plt.close(fig)


def test_explain_draws_the_cells_past_the_end(freed):
    from tensorviz.render.explain import explain_plan

    plan = explain_plan(freed["w"], freed["v"], names=["w", "v"])
    (strip,) = plan.strips
    assert (strip.nbytes, strip.cell_bytes, strip.lo, strip.hi) == (0, 4, 0, 20)
    assert strip.readers().tolist() == [1] * 5 + [2] * 10 + [1] * 5
    fig = tv.explain(freed["w"], freed["v"], names=["w", "v"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("cells from 0 on lie past its end (storage freed)" in t for t in texts)
    plt.close(fig)


def test_explorer_shows_and_explains_a_freed_storage(freed):
    ex = tv.explore(freed)
    ex.tensor_list.value = ("w", "v")
    ex._on_explain()
    assert "How each element of w, v maps" in ex.explain_message.value
    assert ex.explain_picture.value[:8] == b"\x89PNG\r\n\x1a\n"
