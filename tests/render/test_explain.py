"""The teaching panel: addresses, formulas, colour links, reuse badges, limits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core.errors import TensorvizError, TooLargeError
from tensorviz.plan.explain import MAX_CELLS, MAX_ELEMENTS, formula
from tensorviz.render.explain import explain_plan
from tensorviz.render.mpl import layer


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def test_addresses_are_offset_plus_index_times_stride():
    base = torch.arange(14.0)
    x = base[2:].view(3, 4)
    plan = explain_plan(x, x.t(), x[:, ::2], names=["x", "x.t()", "x[:, ::2]"])
    (strip,) = plan.strips
    v, vt, ve = strip.views
    assert v.formula == "addr = 2 + 4·i + 1·j"
    assert v.addresses.tolist() == [[2, 3, 4, 5], [6, 7, 8, 9], [10, 11, 12, 13]]
    assert vt.formula == "addr = 2 + 1·i + 4·j"
    assert vt.addresses.tolist() == np.array(v.addresses).T.tolist()
    assert ve.addresses.tolist() == [[2, 4], [6, 8], [10, 12]]
    assert (strip.lo, strip.hi, strip.cell_bytes) == (0, 14, 4)  # the whole small storage
    assert strip.readers().tolist() == [0, 0] + [3, 2] * 6  # cells 0, 1 unreachable; ::2 reads evens
    assert strip.reuse().tolist() == [0, 0] + [1] * 12


def test_formula_text():
    assert formula(2, (4, 1)) == "addr = 2 + 4·i + 1·j"
    assert formula(0, (12, 4, 1)) == "addr = 0 + 12·i + 4·j + 1·k"
    assert formula(7, ()) == "addr = 7"


def test_expand_and_as_strided_reuse_cells():
    b = torch.arange(3.0)
    s = torch.arange(10.0)
    plan = explain_plan(b.expand(4, 3), names=["b.expand(4, 3)"])
    assert plan.strips[0].views[0].reuse() == {0: 4, 1: 4, 2: 4}
    plan = explain_plan(torch.as_strided(s, (4, 3), (2, 1), 1), names=["w"])
    assert plan.strips[0].views[0].reuse() == {3: 2, 5: 2, 7: 2}
    assert plan.strips[0].reuse().tolist() == [0, 1, 1, 2, 1, 2, 1, 2, 1, 1]


def test_figure_links_grid_cells_to_strip_cells_by_colour_and_number():
    x = torch.arange(12.0).reshape(3, 4)
    fig = tv.explain(x, x.t(), names=["x", "x.t()"])
    strip = layer(fig, "strip-cells")
    strip_colour = {int(c): tuple(f) for c, f in zip(strip.tensorviz_owner, strip.get_facecolor())}
    assert sorted(strip_colour) == list(range(12))
    for k in range(2):
        grid = layer(fig, f"grid-{k}")
        for cell, face in zip(grid.tensorviz_owner, grid.get_facecolor()):
            assert tuple(face) == strip_colour[int(cell)]
    assert layer(fig, "grid-1").tensorviz_owner.tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    words = texts(fig)
    assert "addr = 0 + 4·i + 1·j" in words and "addr = 0 + 1·i + 4·j" in words
    assert "j →  stride 4" in words and "i ↓\nstride 1" in words  # x.t()'s strides
    assert len(set(tuple(c) for c in strip.get_facecolor())) == 12  # neighbours differ
    assert fig.get_size_inches()[0] >= 6


def test_unreachable_cells_grey_offset_marked_and_badges():
    s = torch.arange(10.0)
    fig = tv.explain(s[1:], torch.as_strided(s, (4, 3), (2, 1), 1), names=["s[1:]", "w"])
    assert layer(fig, "strip-unread").tensorviz_owner.tolist() == [0]
    assert layer(fig, "strip-unread").get_hatch() == "///"
    assert layer(fig, "offset-0").tensorviz_owner.tolist() == [1]
    assert layer(fig, "reach-1").tensorviz_owner.tolist() == list(range(1, 10))
    assert sorted(t for t in texts(fig) if t.startswith("×")) == ["×2", "×2", "×2"]
    widths = layer(fig, "grid-1").get_linewidths()
    owners = layer(fig, "grid-1").tensorviz_owner
    assert {int(o) for o, w in zip(owners, widths) if w > 1} == {3, 5, 7}  # reused cells in bold


def test_views_of_different_storages_get_separate_strips():
    a, b = torch.zeros(4), torch.zeros(2, 3)
    plan = explain_plan(a, b, b.t(), names=["a", "b", "b.t()"])
    assert [[v.name for v in s.views] for s in plan.strips] == [["a"], ["b", "b.t()"]]
    fig = tv.explain(a, b, names=["a", "b"])
    assert layer(fig, "strip-cells-1").tensorviz_owner.tolist() == list(range(6))
    assert sum(t.startswith("storage #") for t in texts(fig)) == 2


def test_mixed_dtypes_use_common_cells():
    x = torch.zeros(4)
    (strip,) = explain_plan(x, x.view(torch.int16), names=["f", "h"]).strips
    assert strip.cell_bytes == 2 and strip.cells == 8
    assert strip.views[0].addresses.tolist() == [0, 2, 4, 6]  # in 2-byte cells
    assert strip.views[0].formula == "addr = 0 + 1·i"  # in the view's own elements


def numbers(fig, gid: str) -> list[int]:
    return [int(t.get_text()) for t in fig.axes[0].texts if t.get_gid() == gid]


def test_mixed_dtypes_number_every_grid_in_the_strips_cells():
    """Next to an int16 view, x[0]'s float32 elements read cells 0-1, 2-3, ...: the grid says
    0, 2, 4, 6 (not 0-3), the stripes own cells 1, 3, 5, 7, and the words say the unit."""
    x = torch.arange(8.0).reshape(2, 4)
    fig = tv.explain(x[0], x.view(torch.int16)[0], names=["x[0]", "h"])
    strip = layer(fig, "strip-cells")
    assert strip.tensorviz_owner.tolist() == list(range(8))
    assert numbers(fig, "number-0") == [0, 2, 4, 6] == layer(fig, "grid-0").tensorviz_owner.tolist()
    assert numbers(fig, "number-1") == list(range(8)) == layer(fig, "grid-1").tensorviz_owner.tolist()
    parts = layer(fig, "grid-parts-0")
    assert parts.tensorviz_owner.tolist() == [1, 3, 5, 7]
    colour = {int(c): tuple(f) for c, f in zip(strip.tensorviz_owner, strip.get_facecolor())}
    assert [tuple(f) for f in parts.get_facecolor()] == [colour[c] for c in (1, 3, 5, 7)]
    grid = layer(fig, "grid-0").get_paths()[1].vertices  # element 1: cells 2 and 3
    stripe = parts.get_paths()[1].vertices
    assert stripe[:, 0].min() == pytest.approx((grid[:, 0].min() + grid[:, 0].max()) / 2)  # its right half
    assert stripe[:, 0].max() < grid[:, 0].max() and stripe[:, 1].min() > grid[:, 1].min()  # inside the outline
    with pytest.raises(KeyError):
        layer(fig, "grid-parts-1")  # int16 elements are one cell each
    words = texts(fig)
    assert "storage #0: 32 bytes, 2-byte cells: float32 = 2 cells, int16 = 1 cell" in words
    assert words.count("→ cells 2·addr, 2·addr+1") == 1
    assert any(w.startswith("an element wider than a cell shows its first cell's number") for w in words)
    same = tv.explain(x[0], names=["x[0]"])  # one dtype: cells are its elements, no extra words
    assert numbers(same, "number-0") == [0, 1, 2, 3]
    assert not any(w.startswith(("an element wider", "→ cells")) for w in texts(same))


def test_large_storage_shows_only_the_window_the_views_reach():
    big = torch.zeros(10_000)
    (strip,) = explain_plan(big[5000:5010], names=["piece"]).strips
    assert (strip.lo, strip.hi) == (5000, 5010)


def test_a_big_weight_is_drawn_as_its_corner_with_real_addresses():
    w = torch.zeros(4096, 4096)
    (strip,) = explain_plan(w, w.t(), names=["w", "w.t()"]).strips
    a, b = strip.views
    assert (a.shape, a.stride, a.offset, a.shown) == ((8, 8), (4096, 1), 0, "[:8, :8] of [4096, 4096]")
    assert a.addresses.tolist() == [[4096 * i + j for j in range(8)] for i in range(8)]
    assert b.addresses.tolist() == [[i + 4096 * j for j in range(8)] for i in range(8)]
    assert strip.segments == tuple((4096 * i, 4096 * i + 8) for i in range(8)) and strip.cells == 64
    assert (strip.lo, strip.hi) == (0, 7 * 4096 + 8)
    assert strip.readers().tolist() == [2] * 64  # both views read every drawn cell
    fig = tv.explain(w, names=["w"])
    words = texts(fig)
    assert "showing [:8, :8] of [4096, 4096]" in words
    assert "storage #0: 67,108,864 bytes, cells = float32 elements (4 B)" in words
    assert "showing 64 cells in 8 runs of cells [0, 28,680); the cells between runs are cut" in words
    assert [w for w in words if w.startswith("cell ")] == [f"cell {4096 * i}" for i in range(8)]
    assert layer(fig, "grid-0").tensorviz_owner.tolist() == [4096 * i + j for i in range(8) for j in range(8)]


def test_region_chooses_another_part():
    w = torch.zeros(4096, 4096)
    (strip,) = explain_plan(w, names=["w"], region=(slice(100, 102), slice(8, 16, 2))).strips
    (v,) = strip.views
    assert (v.shape, v.stride, v.offset, v.shown) == (
        (2, 4),
        (4096, 2),
        100 * 4096 + 8,
        "[100:102, 8:16:2] of [4096, 4096]",
    )
    assert v.addresses.tolist() == [[409608, 409610, 409612, 409614], [413704, 413706, 413708, 413710]]
    assert strip.segments == ((409608, 409615), (413704, 413711))  # a 1-cell gap stays, hatched
    with pytest.raises(
        TooLargeError,
        match=f"MAX_ELEMENTS={MAX_ELEMENTS} elements per view; the region \\[100:200, :\\] of \\[4096, 4096\\] of 'w' has 409,600",
    ):
        explain_plan(w, names=["w"], region=(slice(100, 200),))
    with pytest.raises(TensorvizError, match="region entries are slices or ints"):
        explain_plan(w, region=("a",))
    with pytest.raises(TensorvizError, match="3 entries for a view with 2 dimensions"):
        explain_plan(w, region=(0, 0, 0))


def test_far_apart_views_share_one_strip_with_the_gap_cut():
    big = torch.zeros(10_000)
    (strip,) = explain_plan(big[:4], big[-4:], names=["head", "tail"]).strips
    assert strip.segments == ((0, 4), (9996, 10_000)) and strip.window().tolist() == [
        0,
        1,
        2,
        3,
        9996,
        9997,
        9998,
        9999,
    ]


def test_errors_name_the_limit():
    far = torch.zeros(4096).as_strided((16, 16), (256, 2))  # 16 runs of 31 cells
    with pytest.raises(TooLargeError, match=f"MAX_CELLS={MAX_CELLS}.*read 496 cells in 16 runs"):
        explain_plan(far)
    with pytest.raises(TensorvizError, match="at least one tensor"):
        tv.explain()
    with pytest.raises(TensorvizError, match="2 names for 1 tensors"):
        explain_plan(torch.zeros(2), names=["a", "b"])
    with pytest.raises(TensorvizError, match="explain cannot draw"):
        explain_plan(torch.zeros(2, 2).to_sparse())
    with pytest.raises(ValueError):  # TooLargeError is a ValueError too
        tv.explain(far)


def test_scalar_empty_and_3d():
    x = torch.arange(24.0).reshape(2, 3, 4)
    fig = tv.explain(torch.tensor(5.0), torch.zeros(0), x, names=["s", "e", "x"])
    words = texts(fig)
    assert "addr = 0" in words and "addr = 0 + 12·i + 4·j + 1·k" in words
    assert layer(fig, "grid-0-s2").tensorviz_owner.tolist() == list(range(24))


def test_key_fits_the_narrowest_figure():
    b = torch.arange(3.0)
    fig = tv.explain(b, b.expand(4, 3), names=["b", "b.expand(4, 3)"])
    fig.canvas.draw()
    width = fig.get_window_extent().x1
    keys = [t for t in fig.axes[0].texts if t.get_text().startswith(("▶ offset", "bold border"))]
    assert len(keys) == 2 and all(t.get_window_extent().x1 <= width for t in keys)
