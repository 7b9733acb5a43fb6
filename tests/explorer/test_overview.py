"""The overview: every selected storage present, kinds and cells exact, drawn as one image."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.plan.diagram import DiagramOptionError
from tensorviz.plan.overview import AUTO_STORAGES, KINDS
from tensorviz.render.mpl import render, texts, to_png
from tensorviz.render.mpl.overview import KIND_COLORS, UNREFERENCED, cell_codes, grid_shape
from tests.helpers.models import seed_tensors
from tests.plan.test_scale_plan import random_state


def brute_kind(layout, s) -> str:
    views = layout.storage_views(s.index)
    spans = [(v.start, v.stop) for v in views if not v.is_empty]
    if len(spans) != len(set(spans)):
        return "tied"
    if len(views) > 1 and sum(v.footprint_nbytes for v in views) > s.covered_nbytes:
        return "overlapping"
    return "packed" if len(views) > 1 else "simple"


@pytest.mark.parametrize("seed", range(4))
def test_every_storage_has_cells_of_its_kind_sized_by_bytes(seed):
    layout = tv.analyze(random_state(random.Random(seed), 40))
    ov = tv.diagram(layout, overview=True).overview
    assert ov.storage.tolist() == list(range(len(layout.storages)))
    assert [KINDS[k] for k in ov.kind] == [brute_kind(layout, s) for s in layout.storages]
    assert ov.nbytes.tolist() == [s.nbytes for s in layout.storages]
    assert ov.unreferenced.tolist() == [s.unreferenced_nbytes for s in layout.storages]
    assert (ov.cells >= 1).all() and ov.cells_total == int(ov.cells.sum())
    order = np.argsort(ov.nbytes, kind="stable")
    assert (np.diff(ov.cells[order]) >= 0).all()  # more bytes never fewer cells
    assert ((ov.unreferenced_cells > 0) <= (ov.unreferenced > 0)).all()
    assert (ov.unreferenced_cells <= ov.cells).all()
    assert sum(ov.counts().values()) == len(layout.storages)
    entry = ov.cell_entry()
    assert np.bincount(entry, minlength=ov.storage.size).tolist() == ov.cells.tolist()


def test_overview_is_planned_when_lanes_cannot_show_every_storage():
    many = {f"w{i}": torch.empty(8 + i % 7, device="meta") for i in range(AUTO_STORAGES)}
    assert tv.diagram(many).overview is not None
    assert tv.diagram(dict(list(many.items())[:50]), expand_simple=True).overview is not None  # 50 lanes > 40
    assert tv.diagram(dict(list(many.items())[:30]), expand_simple=True).overview is None
    assert tv.diagram(seed_tensors()).overview is None
    assert tv.diagram(seed_tensors(), overview=True).overview.storage.tolist() == [0]
    assert tv.diagram(many, overview=False).overview is None
    d = tv.diagram(dict(list(many.items())[:50]), expand_simple=True)
    assert d.lanes[-1].label == "… 11 more storages (all in the overview)"
    assert tv.diagram({}, overview=True).overview is None  # nothing selected: nothing to show
    assert tv.diagram(seed_tensors(), names="^nothing$", overview=True).overview is None
    assert tv.diagram({"z": torch.zeros(0)}, overview=True).overview.cells.tolist() == [1]
    with pytest.raises(DiagramOptionError, match="overview must be True, False or None"):
        tv.diagram(seed_tensors(), overview="yes")


def test_overview_counts_only_the_selected_storages_but_all_of_them():
    sd = {f"m{i}.w": torch.empty(16, device="meta") for i in range(60)}
    sd.update({f"m{i}.tied": sd[f"m{i}.w"] for i in range(0, 60, 3)})
    d = tv.diagram(sd, only_shared=True, overview=True)
    assert d.overview.storage.tolist() == list(range(0, 60, 3))
    assert d.overview.counts() == {"simple": 0, "packed": 0, "overlapping": 0, "tied": 20}
    assert tv.diagram(sd, names=r"^m1\d\.", overview=True).overview.storage.tolist() == list(range(10, 20))


def test_labels_name_the_largest_and_the_tied_storages():
    sd = {f"w{i}": torch.empty(10 + i, device="meta") for i in range(30)}
    sd["big"] = torch.empty(10_000, device="meta")
    sd["tied"] = sd["w3"]
    ov = tv.diagram(sd, overview=True).overview
    texts_ = [label.text for label in ov.labels]
    assert "#30 big · 39.1 KiB · simple" in texts_
    assert "#3 w3 ≡ tied · 52 B · tied" in texts_
    assert [label.storage for label in ov.labels] == sorted(label.storage for label in ov.labels)


def test_the_drawn_image_has_a_cell_for_every_storage_in_its_kind_colour():
    from matplotlib.colors import to_rgb

    layout = tv.analyze(random_state(random.Random(7), 300))
    d = tv.diagram(layout, overview=True)
    fig = render(d)
    ov_ax = next(ax for ax in fig.axes if hasattr(ax, "tensorviz_overview"))
    (image,) = ov_ax.images
    cols, rows, px = grid_shape(d.overview, fig.get_figwidth())
    pixels = np.asarray(image.get_array())
    assert pixels.shape == (rows, cols, 3) and px >= 1
    ov = d.overview
    for k, kind in enumerate(KINDS[i] for i in ov.kind):
        unread = ov.unreferenced_cells[k] == ov.cells[k]
        color = UNREFERENCED[k & 1] if unread else KIND_COLORS[kind][k & 1]
        assert cell_codes(ov, cols).ravel()[ov.first_cell[k]] == (8 if unread else 2 * ov.kind[k]) + (k & 1)
        assert np.allclose(pixels.reshape(-1, 3)[ov.first_cell[k]] / 255, to_rgb(color), atol=1 / 255), (k, kind)
    assert texts(fig, "overview-label") == [f"{i + 1}  {label.text}" for i, label in enumerate(d.overview.labels)]
    assert to_png(d)[:4] == b"\x89PNG"


def test_text_lane_map_ends_with_the_overview_counts():
    sd = {f"w{i}": torch.empty(4, device="meta") for i in range(50)}
    sd["t"] = sd["w0"]
    text = tv.diagram(sd, overview=True).to_text()
    assert text.splitlines()[-1] == "overview of 50 storages: 49 simple, 1 tied"


def _marker_cells(ov) -> np.ndarray:
    mid = ov.first_cell + ov.cells // 2
    return np.stack(divmod(mid, ov.columns), axis=1)


def test_markers_of_equal_sized_storages_are_spread_and_never_touch():
    """10,000 layers of equal-sized tied and fused storages: every one is 'the largest', so the
    labelled ones are spread over the grid instead of crowding its first cells."""
    sd = {}
    for i in range(2000):
        qkv = torch.empty(96, device="meta")
        emb = torch.empty(64, device="meta")
        sd |= {f"l{i}.qkv": qkv, f"l{i}.q": qkv[:32], f"l{i}.emb": emb, f"l{i}.head": emb, f"l{i}.n": torch.empty(8)}
    ov = tv.diagram(sd, overview=True).overview
    at = _marker_cells(ov)[[label.entry for label in ov.labels]]
    reach = -(-14 // (900 // ov.columns))
    gaps = [np.abs(a - b).max() for k, a in enumerate(at) for b in at[k + 1 :]]
    assert len(ov.labels) == 8 and min(gaps) >= reach
    assert {KINDS[ov.kind[label.entry]] for label in ov.labels} == {"tied", "overlapping"}
    rows = at[:, 0]
    assert rows.max() - rows.min() >= ov.rows // 2  # over the whole grid, not its first rows


def test_a_strictly_largest_storage_is_labelled_even_where_crowded():
    sd = {f"w{i}": torch.empty(16, dtype=torch.uint8, device="meta") for i in range(10_000)}
    sd["big1"] = torch.empty(18, dtype=torch.uint8, device="meta")
    sd["big2"] = torch.empty(17, dtype=torch.uint8, device="meta")  # next to big1, smaller: still 2nd largest
    ov = tv.diagram(sd, overview=True).overview
    texts_ = [label.text for label in ov.labels]
    assert texts_[-2:] == ["#10000 big1 · 18 B · simple", "#10001 big2 · 17 B · simple"]
    a, b = _marker_cells(ov)[[ov.labels[-2].entry, ov.labels[-1].entry]]
    assert np.abs(a - b).max() < -(-14 // (900 // ov.columns))  # their markers do touch


def test_label_list_takes_one_column_where_two_would_overlap():
    from tensorviz.render.mpl.overview import label_lines

    sd = {f"layers.{i}.a_rather_long_parameter_name.weight": torch.empty(4, device="meta") for i in range(2000)}
    sd["t"] = sd["layers.7.a_rather_long_parameter_name.weight"]
    ov = tv.diagram(sd, overview=True).overview
    n = len(ov.labels)
    assert (label_lines(ov, 12.0), label_lines(ov, 5.0)) == (-(-n // 2), n)
    fig = render(tv.diagram(sd, overview=True), width=5.0)
    xs = {
        round(t.get_position()[0], 4)
        for t in fig.findobj(lambda a: getattr(a, "get_gid", lambda: "")() == "overview-label")
    }
    assert len(xs) == 1
