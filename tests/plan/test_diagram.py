"""The Diagram plan: lanes, bars, flags, ordering, filters and the text lane map."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.plan.bars import depth_runs
from tensorviz.plan.diagram import PALETTE, Diagram, DiagramOptionError, diagram, palette_colour
from tensorviz.plan.planner import allocate
from tests.helpers.models import FusedQKV, QVOnly, TiedLM, meta_model, seed_tensors, tiny_gpt2


def spans(d: Diagram) -> dict[str, tuple[int, int]]:
    return {b.label: (b.start, b.stop) for b in d.bars}


# -- seed cases -------------------------------------------------------------------------------
def test_seed_lanes_bars_and_overlaps():
    d = diagram(seed_tensors())
    assert [(lane.kind, lane.label) for lane in d.lanes] == [
        ("storage", "storage #0 · 15.6 KiB"),
        ("view", "a"),
        ("view", "b"),
        ("view", "c"),
    ]
    assert spans(d) == {"a": (0, 16000), "b": (4000, 8000), "c": (8000, 12000)}
    assert [b.lane for b in d.bars] == [1, 2, 3]
    assert all(b.is_dense and b.runs is None for b in d.bars)
    assert d.bars_for("b")[0].overlap_runs.tolist() == [[4000, 8000]]
    assert d.bars_for("a")[0].overlap_runs.tolist() == [[4000, 12000]]
    (block,) = d.blocks
    assert block.reasons == ("shared", "overlapping")
    assert block.overlap_runs.tolist() == [[4000, 12000]]
    assert block.unreferenced.tolist() == [] and block.unreferenced_nbytes == 0
    assert d.x_range == (0, 16000)
    assert d.collapsed is None


def test_seed_header():
    h = diagram(seed_tensors()).header
    assert (h.tensors, h.storages, h.shared_groups, h.unique_nbytes, h.naive_nbytes) == (3, 1, 1, 16000, 24000)
    assert h.text == "3 tensors · 1 storage · 1 shared group (by storage) · unique 15.6 KiB vs naive 23.4 KiB"


def test_fused_qkv_rows_and_collapsed_biases():
    d = diagram(FusedQKV())
    assert [lane.label for lane in d.lanes] == [
        "storage #0 · 2.3 KiB",
        "qkv.weight",
        "q.weight",
        "v.weight",
        "3 simple storages, 200 B",
    ]
    assert spans(d) == {"qkv.weight": (0, 2400), "q.weight": (0, 800), "v.weight": (800, 1600)}
    assert d.collapsed is not None and d.collapsed.count == 3 and d.collapsed.nbytes == 200
    assert d.lanes[-1].kind == "summary"
    expanded = diagram(FusedQKV(), expand_simple=True)
    assert [lane.kind for lane in expanded.lanes] == ["storage", "view", "view", "view", "simple", "simple", "simple"]
    assert [lane.label for lane in expanded.lanes[4:]] == ["qkv.bias", "q.bias", "v.bias"]  # by size, then index
    assert expanded.collapsed is None


def test_hidden_storage_unreferenced_bytes():
    d = diagram(QVOnly())
    block = d.blocks[0]
    assert block.reasons == ("shared", "partial")
    assert block.unreferenced.tolist() == [[800, 1600]]
    assert block.unreferenced_nbytes == 800
    assert spans(d) == {"q.weight": (0, 800), "v.weight": (1600, 2400)}
    assert diagram(QVOnly(), show_unreferenced=False).blocks[0].unreferenced.tolist() == []


def test_tied_by_storage_two_lanes_by_span_one_bar():
    by_storage = diagram(TiedLM())
    assert [b.label for b in by_storage.bars] == ["wte.weight", "lm_head.weight"]
    assert all(b.overlaps_other for b in by_storage.bars)
    by_span = diagram(TiedLM(), by="span")
    (bar,) = by_span.bars
    assert bar.label == "wte.weight ≡ lm_head.weight" and bar.names == ("wte.weight", "lm_head.weight")
    assert (bar.start, bar.stop) == (0, 3200) and not bar.overlaps_other
    assert by_span.lanes[bar.lane].label == "wte.weight ≡ lm_head.weight"
    assert by_span.bars_for("lm_head.weight") == (bar,)


def test_meta_model_labels_device_and_merges_tie():
    d = diagram(meta_model(), by="span")
    assert d.lanes[0].label == "storage #0 · meta · 1.2 KiB"
    assert [b.label for b in d.bars] == ["emb.weight ≡ head.weight"]
    assert d.collapsed.count == 2  # a.weight and b.weight: same shape, never grouped


def test_tiny_gpt2_tied_and_untied():
    tied = diagram(tiny_gpt2(), by="span")
    assert [b.label for b in tied.bars] == ["transformer.wte.weight ≡ lm_head.weight"]
    assert (tied.bars[0].start, tied.bars[0].stop) == (0, 64 * 8 * 4)
    untied = diagram(tiny_gpt2(tied=False), max_lanes=10)
    # nothing interesting: simple storages are drawn (not collapsed), limited to the lane budget
    assert [lane.kind for lane in untied.lanes] == ["simple"] * 9 + ["more-storages"]
    assert untied.lanes[-1].hidden == untied.header.storages - 9 == 20
    assert untied.lanes[0].label == "transformer.wte.weight"  # the largest storage first


# -- flags ------------------------------------------------------------------------------------
def test_strided_views_have_exact_runs_and_flags():
    x = torch.arange(12.0).reshape(3, 4)
    d = diagram(
        {"x": x, "even": x[:, ::2], "xt": x.t(), "i": x.view(torch.int32), "row": x[0].expand(3, 4), "none": x[:0]}
    )
    even = d.bars_for("even")[0]
    assert even.runs.tolist() == [[0, 4], [8, 12], [16, 20], [24, 28], [32, 36], [40, 44]]
    assert even.non_contiguous and not even.expanded and not even.reinterpreted
    xt = d.bars_for("xt")[0]
    assert xt.runs is None and xt.non_contiguous  # a transpose reads every byte of its span
    assert [b.label for b in d.bars if b.reinterpreted] == ["i"]  # only the other-dtype view
    row = d.bars_for("row")[0]
    assert row.expanded and (row.start, row.stop) == (0, 16) and row.runs is None
    none = d.bars_for("none")[0]
    assert none.empty and none.start == none.stop == 0 and none.runs is None and not none.overlaps_other


def test_mixed_dtype_span_bar_is_reinterpreted():
    x = torch.zeros(4)
    (bar,) = diagram({"f": x, "i": x.view(torch.int32)}, by="span").bars
    assert bar.reinterpreted and bar.dtype == "mixed"


def test_overlap_mode_packs_subrows():
    x = torch.arange(24.0).reshape(4, 6)
    d = diagram({"even": x[:, ::2], "odd": x[:, 1::2], "top": x[:2], "bottom": x[2:], "all": x}, by="overlap")
    lanes = {b.label: b.lane for b in d.bars}
    # greedy packing by start (longest first): all, even, top take rows 1-3; odd needs a 4th;
    # bottom starts where top ends, so it reuses top's row
    assert lanes == {"all": 1, "even": 2, "top": 3, "odd": 4, "bottom": 3}
    assert [lane.kind for lane in d.lanes] == ["storage", "view", "view", "view", "view"]
    assert d.lanes[3].label == "top, bottom"
    # even and odd have disjoint footprints: neither is marked as overlapping the other ...
    odd = d.bars_for("odd")[0]
    assert fp.intersection_nbytes(odd.overlap_runs, d.bars_for("even")[0].runs) == 0
    # ... but every byte is also read by "all"
    assert d.blocks[0].overlap_runs.tolist() == [[0, 96]]


# -- files ------------------------------------------------------------------------------------
def gappy_safetensors(path) -> int:
    """A hand-made safetensors file: 2 bytes before ``a``, 8 between ``a`` and ``b``, 8 after,
    each held by a packed F4 tensor (valid for safetensors, but no view can show it, so its
    bytes are unreferenced). Returns the data start (8 + header length)."""
    import json
    import struct

    header = (
        json.dumps(
            {
                "g0": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]},
                "a": {"dtype": "I16", "shape": [3], "data_offsets": [2, 8]},
                "g1": {"dtype": "F4", "shape": [16], "data_offsets": [8, 16]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]},
                "g2": {"dtype": "F4", "shape": [16], "data_offsets": [24, 32]},
            }
        ).encode()
        + b"    "
    )
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(32))
    return 8 + len(header)


def test_file_header_is_its_own_run_and_gaps_stay_unreferenced(tmp_path):
    path = tmp_path / "gappy.safetensors"
    ds = gappy_safetensors(path)
    layout = tv.analyze(path)
    assert layout.metadata["header"] == {str(path): (0, ds)}
    (block,) = diagram(layout).blocks
    assert block.header.tolist() == [[0, ds]]
    assert block.unreferenced.tolist() == [[ds, ds + 2], [ds + 8, ds + 16], [ds + 24, ds + 32]]
    assert block.unreferenced_nbytes == 18  # the header is not counted as unreferenced
    assert (layout.storages[0].unreferenced_nbytes, layout.storages[0].header_nbytes) == (18, ds)  # nor by the layout
    assert layout.unreferenced_runs(0).tolist() == block.unreferenced.tolist()
    assert diagram(layout, show_unreferenced=False).blocks[0].header.tolist() == [[0, ds]]
    zoomed = diagram(layout, byte_range=(ds - 4, ds + 4)).blocks[0]
    assert zoomed.header.tolist() == [[ds - 4, ds]] and zoomed.unreferenced.tolist() == [[ds, ds + 2]]
    text = diagram(layout).to_text(width=ds + 32)  # one byte per cell
    assert text.splitlines()[2] == "  storage #0 |" + "h" * ds + ".." + "=" * 6 + "." * 8 + "=" * 8 + "." * 8 + "|"


def test_header_only_comes_from_the_files_own_metadata():
    x = torch.zeros(10)
    layout = tv.analyze({"x": x[2:]})  # unreferenced bytes at the start, but no file
    (block,) = diagram(layout).blocks
    assert block.header.tolist() == [] and block.unreferenced.tolist() == [[0, 8]]


# -- ordering, filters, budget -----------------------------------------------------------------
def test_interesting_storages_first_then_by_size():
    big, small_shared = torch.zeros(100), torch.zeros(10)
    t = torch.zeros(50)
    d = diagram(
        {"big": big, "s1": small_shared, "s2": small_shared[2:], "tt": t.view(5, 10).t(), "mid": torch.zeros(60)},
        expand_simple=True,
    )
    order = [d.lanes[b.lanes[0]].label for b in d.blocks]
    assert order == ["storage #2 · 200 B", "storage #1 · 40 B", "big", "mid"]
    assert d.blocks[0].reasons == ("non-contiguous",)


def test_names_regex_and_bad_pattern():
    d = diagram(FusedQKV(), names=r"^q\.")
    assert [b.label for b in d.bars] == ["q.weight"]  # q.bias: a simple storage, collapsed
    assert d.collapsed.count == 1
    d = diagram(FusedQKV(), names=r"bias$")  # only simple storages left: drawn, not collapsed
    assert [b.label for b in d.bars] == ["qkv.bias", "q.bias", "v.bias"] and d.collapsed is None
    with pytest.raises(DiagramOptionError, match=r"names='q\[' is not a valid regular expression"):
        diagram(FusedQKV(), names="q[")
    with pytest.raises(ValueError):  # DiagramOptionError is a ValueError too
        diagram(FusedQKV(), names="(")


def test_storage_filter_only_shared_and_option_errors():
    layout = tv.analyze(FusedQKV())
    d = diagram(layout, storages=[1])
    assert [b.label for b in d.bars] == ["qkv.bias"]
    assert [b.label for b in diagram(layout, only_shared=True).bars] == ["qkv.weight", "q.weight", "v.weight"]
    assert [b.label for b in diagram(TiedLM(), by="span", only_shared=True).bars] == ["wte.weight ≡ lm_head.weight"]
    with pytest.raises(DiagramOptionError, match="storages 0..3"):
        diagram(layout, storages=[7])
    with pytest.raises(DiagramOptionError, match="by must be one of"):
        diagram(layout, by="size")
    with pytest.raises(DiagramOptionError, match="max_lanes"):
        diagram(layout, max_lanes=2)
    with pytest.raises(DiagramOptionError, match="0 <= lo < hi"):
        diagram(layout, byte_range=(10, 10))


def test_byte_range_keeps_touching_bars_and_clips_runs():
    x = torch.arange(24.0).reshape(4, 6)
    d = diagram({"x": x, "col": x[:, 0], "tail": x[3:]}, byte_range=(20, 60))
    assert [b.label for b in d.bars] == ["x", "col"]  # tail starts at 72
    col = d.bars_for("col")[0]
    assert (col.start, col.stop) == (0, 76)  # spans stay exact
    assert col.runs.tolist() == [[24, 28], [48, 52]]  # runs are clipped to the zoom
    assert d.x_range == (20, 60) and d.byte_range == (20, 60)


def test_max_lanes_moves_extra_views_to_a_more_row_that_still_draws_them():
    flat = torch.zeros(1000)
    views = {f"p{i}": flat[10 * i : 10 * (i + 1)] for i in range(100)}
    d = diagram(views, max_lanes=12)
    assert len(d.lanes) == 12
    assert d.lanes[-1].kind == "more" and d.lanes[-1].label == "… 90 more views" and d.lanes[-1].hidden == 90
    assert len(d.bars) == 100
    assert sum(b.lane == 11 for b in d.bars) == 90
    assert d.blocks[0].hidden_views == 90


@pytest.mark.parametrize(
    "needs,budget,expected",
    [
        ([3, 4], 10, ([3, 4], 2)),
        ([10, 2], 8, ([6, 2], 2)),
        ([50, 50, 3], 20, ([8, 8, 3], 3)),
        ([5] * 10, 10, ([5], 1)),  # rather one whole block than blocks of one view each
        ([4] * 30, 40, ([4] * 9, 9)),  # nine complete blocks + the "more storages" row
        ([10_001, 3, 3, 3], 40, ([31, 3, 3, 3], 4)),  # a huge block leaves room for the small ones
    ],
)
def test_allocate_lane_budget(needs, budget, expected):
    assert allocate(needs, budget) == expected


def test_planned_records_have_every_field_and_equal_their_constructor():
    from dataclasses import fields

    from tensorviz.plan.diagram import Bar, Block, Lane

    d = diagram(FusedQKV(), expand_simple=True)
    for records, cls in ((d.lanes, Lane), (d.bars, Bar), (d.blocks, Block)):
        for rec in records:
            assert list(vars(rec)) == [f.name for f in fields(cls)]  # filled directly, in field order
    assert all(Lane(**vars(lane)) == lane for lane in d.lanes)
    with pytest.raises(AttributeError):  # still frozen
        d.bars[0].start = 3


def test_columns_mirror_the_bars():
    x = torch.arange(12.0).reshape(3, 4)
    d = diagram({"x": x, "even": x[:, ::2], "i": x.view(torch.int32), "row": x[0].expand(3, 4), "none": x[:0]})
    c = d.columns
    assert c.start.tolist() == [b.start for b in d.bars] and c.stop.tolist() == [b.stop for b in d.bars]
    assert c.lane.tolist() == [b.lane for b in d.bars]
    assert [c.colors[k] for k in c.color] == [b.color for b in d.bars]
    for flag in ("overlaps_other", "non_contiguous", "reinterpreted", "expanded", "empty"):
        assert getattr(c, flag).tolist() == [getattr(b, flag) for b in d.bars], flag
    assert c.sparse.tolist() == [b.runs is not None for b in d.bars]
    assert d.columns is c  # computed once


# -- colours ---------------------------------------------------------------------------------
def test_colours_follow_the_layout_not_the_picture_and_ties_share():
    a, b = torch.zeros(3), torch.zeros(5)
    one = diagram({"a": a, "b": b}, expand_simple=True)
    two = diagram({"b": b, "a": a}, expand_simple=True)
    # storages numbered in drawing order (larger first), whatever the source order
    assert [bar.color for bar in one.bars] == [bar.color for bar in two.bars] == [PALETTE[0], PALETTE[1]]
    assert one.bars_for("b")[0].color == two.bars_for("b")[0].color == PALETTE[0]
    tied = diagram(TiedLM())
    assert tied.bars_for("wte.weight")[0].color == tied.bars_for("lm_head.weight")[0].color == PALETTE[0]
    layout = tv.analyze(TiedLM())
    assert diagram(layout, names="lm_head").bars_for("lm_head.weight")[0].color == PALETTE[0]
    assert diagram(layout, names="ln", expand_simple=True).bars_for("ln.weight")[0].color == palette_colour(1)
    assert palette_colour(len(PALETTE) + 2) == PALETTE[2]


# -- sweeps against brute force -------------------------------------------------------------
def test_depth_runs_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        sets = []
        depth = np.zeros(64, dtype=int)
        for _ in range(rng.integers(1, 5)):
            mask = rng.random(64) < 0.4
            depth += mask
            idx = np.flatnonzero(mask)
            sets.append(fp.as_runs([(i, i + 1) for i in idx]))
        want = fp.as_runs([(i, i + 1) for i in np.flatnonzero(depth >= 2)])
        assert depth_runs(sets, 2).tolist() == want.tolist()


# -- text ----------------------------------------------------------------------------------
def test_text_golden_fused_qkv():
    assert diagram(FusedQKV()).to_text(width=20) == "\n".join(
        [
            "6 tensors · 4 storages · 1 shared group (by storage) · unique 2.5 KiB vs naive 4.1 KiB",
            "storage #0 · 2.3 KiB: shared, overlapping · bytes [0, 2400), 120 B per cell",
            "  storage #0 |xxxxxxxxxxxxxx======|",
            "  qkv.weight |####################| [0, 2400) overlaps",
            "  q.weight   |######+             | [0, 800) overlaps",
            "  v.weight   |      +######+      | [800, 1600) overlaps",
            "3 simple storages, 200 B",
        ]
    )


def test_text_golden_strided_and_unreferenced():
    x = torch.arange(16.0)
    text = diagram({"even": x[::2], "head": x[:4]}).to_text(width=16)
    assert text.splitlines()[1:] == [
        "storage #0 · 64 B: shared, partial, overlapping, non-contiguous · bytes [0, 64), 4 B per cell",
        "  storage #0 |x=x==.=.=.=.=.=.|",
        "  even       |#-#-#-#-#-#-#-# | [0, 60) overlaps, non-contiguous",
        "  head       |####            | [0, 16) overlaps",
    ]


# -- safetensors files: tensors side by side in one file are not "shared" ------------------------
def safetensors_file(path, entries: dict[str, tuple[int, int]], data_len: int):
    """A float32 safetensors file by hand (the library refuses overlapping tensors)."""
    import json
    import struct

    header = json.dumps(
        {n: {"dtype": "F32", "shape": [(b - a) // 4], "data_offsets": [a, b]} for n, (a, b) in entries.items()}
    ).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(data_len))
    return path


def test_file_tensors_are_counted_as_shared_only_when_they_share_bytes(tmp_path):
    plain = safetensors_file(tmp_path / "plain.safetensors", {"a": (0, 16), "b": (16, 24), "c": (24, 32)}, 32)
    layout = tv.analyze(plain)
    assert [g.names for g in layout.shared("storage")] == [("a", "b", "c")]  # the grouping is unchanged
    d = diagram(layout)
    assert (
        d.header.text == "3 tensors · 1 file · 0 shared groups (by shared bytes within a file) · "
        "unique 32 B vs naive 32 B"
    )
    assert d.blocks[0].reasons == ("partial",)  # the header bytes; not "shared"
    assert "shared groups (by shared bytes within a file): none" in layout.to_text()
    assert layout.to_text().startswith("3 tensors on 1 file (")
    assert diagram(layout, by="span").header.text.startswith("3 tensors · 1 file · 0 shared groups (by span)")
    assert diagram(layout, only_shared=True).blocks == ()
    # The reader refuses overlapping tensors; a layout built by hand (as a reader would) may have them.
    from tensorviz.core.layout import Layout
    from tensorviz.core.records import StorageInfo, TensorView

    key, other = ("file", "tied.safetensors"), ("cpu", 1)
    views = [
        TensorView("wte", key, "file", "float32", (4,), (1,), 0, 4, 24, 40, 16, 16, True),
        TensorView("head", key, "file", "float32", (4,), (1,), 0, 4, 24, 40, 16, 16, True),
        TensorView("b", key, "file", "float32", (2,), (1,), 0, 4, 40, 48, 8, 8, True),
        TensorView("x", other, "cpu", "float32", (2,), (1,), 0, 4, 0, 8, 8, 8, True),
        TensorView("x0", other, "cpu", "float32", (1,), (1,), 0, 4, 0, 4, 4, 4, True),
    ]
    infos = [StorageInfo(key, "file", 48, label="tied.safetensors"), StorageInfo(other, "cpu", 8)]
    layout = Layout(views, infos, metadata={"header": {"tied.safetensors": (0, 24)}})
    d = diagram(layout)
    assert d.header.shared_groups == 2  # {wte, head} in the file, {x, x0} on the cpu storage
    assert "2 storages · 2 shared groups (by storage; by shared bytes within a file)" in d.header.text
    assert [b.reasons for b in d.blocks] == [("partial", "overlapping"), ("shared", "overlapping")]
    assert (
        "shared groups (by storage; by shared bytes within a file): 2\n  {wte, head} bytes [24, 40)\n"
        "  {x, x0} bytes [0, 8)" in layout.to_text()
    )
    assert [b.label for b in diagram(layout, only_shared=True, expand_simple=True).bars] == [
        "wte",
        "head",
        "b",
        "x",
        "x0",
    ]


def test_torch_checkpoint_records_are_storages_that_can_be_shared(tmp_path):
    """A .pt file's records are storages torch allocated: views of one are really shared."""
    w = torch.zeros(4, 4)
    torch.save({"w": w, "col": w[:, 0], "lone": torch.zeros(2)}, tmp_path / "c.pt")
    layout = tv.analyze(tmp_path / "c.pt")
    d = diagram(layout)
    assert d.header.text.startswith("3 tensors · 2 storages · 1 shared group (by storage)")
    assert d.blocks[0].reasons[0] == "shared"
    assert "shared groups (by storage): 1\n  {w, col}" in layout.to_text()
