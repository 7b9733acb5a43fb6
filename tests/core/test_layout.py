"""layout.py: the cases issue 2 names, the Layout API, ordering rules, records, text and reprs."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core.layout import Layout
from tensorviz.core.records import Group, Skipped, Storage, StorageInfo, TensorView
from tensorviz.core.records import record as _record
from tests.helpers.models import FusedQKV, TiedLM, meta_model, seed_tensors


def names(groups) -> list[tuple[str, ...]]:
    return [g.names for g in groups]


# -- the cases that must come out right ------------------------------------------------------
def test_seed_case():
    layout = tv.analyze(seed_tensors())
    assert len(layout.storages) == 1
    assert (layout["b"].start, layout["b"].stop) == (4000, 8000)
    assert (layout["c"].start, layout["c"].stop) == (8000, 12000)
    assert layout.relation("b", "c") == "disjoint"
    assert layout.relation("a", "b") == "contains"
    assert layout.relation("b", "a") == "within"
    assert names(layout.groups("span")) == [("a",), ("b",), ("c",)]
    assert names(layout.groups("overlap")) == [("a", "b", "c")]
    (s,) = layout.storages
    assert (s.nbytes, s.covered_nbytes, s.unreferenced_nbytes, s.complete_names) == (16000, 16000, 0, ("a",))


def test_fused_qkv_groupings():
    layout = tv.analyze(FusedQKV())
    weights = ("qkv.weight", "q.weight", "v.weight")
    assert layout.shared("storage")[0].names == weights
    assert [g.names for g in layout.groups("storage")] == [weights, ("qkv.bias",), ("q.bias",), ("v.bias",)]
    span_groups = [g for g in layout.groups("span") if set(g.names) & set(weights)]
    assert [g.names for g in span_groups] == [("qkv.weight",), ("q.weight",), ("v.weight",)]
    assert layout.shared("span") == ()
    assert names(layout.shared("overlap")) == [weights]
    assert layout.relation("q.weight", "v.weight") == "disjoint"
    assert layout.relation("qkv.weight", "v.weight") == "contains"
    assert (layout["v.weight"].start, layout["v.weight"].stop) == (800, 1600)
    (g,) = layout.shared("overlap")
    assert (g.start, g.stop, g.storage) == (0, 2400, layout["qkv.weight"].storage)


def test_tied_embedding_is_one_span_group_and_identical():
    layout = tv.analyze(TiedLM())
    assert names(layout.shared("span")) == [("wte.weight", "lm_head.weight")]
    assert names(layout.shared("overlap")) == [("wte.weight", "lm_head.weight")]
    assert layout.relation("wte.weight", "lm_head.weight") == "identical"
    assert layout.storage("lm_head.weight").complete_names == ("wte.weight", "lm_head.weight")


def test_same_bytes_disjoint_halves_and_expand():
    w = torch.zeros(3, 4)
    x = torch.zeros(4, 6)
    b = torch.zeros(3)
    layout = tv.analyze(
        {
            "w": w,
            "wt": w.t(),
            "wu8": w.view(torch.uint8),
            "x": x,
            "even": x[:, ::2],
            "odd": x[:, 1::2],
            "left": x[:, :3],
            "right": x[:, 3:],
            "b": b,
            "b4": b.expand(4, 3),
        }
    )
    assert layout.relation("w", "wt") == "same-bytes"
    assert layout.relation("w", "wu8") == "same-bytes"
    assert layout.relation("wt", "wu8") == "same-bytes"
    assert layout.relation("even", "odd") == "disjoint"
    assert layout["even"].footprint_nbytes == layout["odd"].footprint_nbytes == x.nbytes // 2
    assert layout.overlap_nbytes("even", "odd") == 0
    assert layout["even"].stop > layout["odd"].start  # the spans do overlap
    assert layout.relation("left", "right") == "disjoint"
    assert layout.relation("x", "even") == "contains"
    assert layout.relation("left", "even") == "overlaps"
    assert layout.overlap_nbytes("left", "even") == 4 * 2 * 4
    assert layout.relation("b", "b4") == "same-bytes"
    assert layout["b4"].footprint_nbytes == b.nbytes == 12
    assert layout["b4"].nbytes == 48 and layout["b4"].is_expanded and not layout["b"].is_expanded
    assert names(layout.shared("overlap")) == [("w", "wt", "wu8"), ("x", "even", "odd", "left", "right"), ("b", "b4")]
    assert names(layout.shared("span")) == [("w", "wt", "wu8"), ("b", "b4")]


def test_meta_model_finds_the_tie_and_not_the_twins():
    layout = tv.analyze(meta_model())
    assert {v.device for v in layout.views} == {"meta"}
    assert names(layout.shared("storage")) == [("emb.weight", "head.weight")]
    assert names(layout.shared("span")) == [("emb.weight", "head.weight")]
    assert names(layout.shared("overlap")) == [("emb.weight", "head.weight")]
    assert layout.relation("a.weight", "b.weight") == "unrelated"
    assert layout["a.weight"].storage != layout["b.weight"].storage
    assert layout.relation("emb.weight", "head.weight") == "identical"


def test_zero_size_views_are_disjoint_from_everything():
    z = torch.zeros(10)
    layout = tv.analyze({"z": z, "empty": z[5:5], "e1": torch.empty(0), "e2": torch.empty(0), "tail": z[5:]})
    for other in ("z", "empty", "tail"):
        assert layout.relation("empty", other) == "disjoint"
        assert layout.relation(other, "empty") == "disjoint"
    assert layout.relation("empty", "empty") == "disjoint"
    assert layout.relation("e1", "e2") == "unrelated"
    assert layout["e1"].storage != layout["e2"].storage
    assert layout["empty"].footprint_runs().tolist() == []
    assert (layout["empty"].start, layout["empty"].stop) == (20, 20)
    assert names(layout.groups("storage")) == [("z", "empty", "tail"), ("e1",), ("e2",)]
    assert names(layout.groups("span")) == [("z",), ("empty",), ("e1",), ("e2",), ("tail",)]
    assert names(layout.groups("overlap")) == [("z", "tail"), ("empty",), ("e1",), ("e2",)]
    empty_group = layout.group_of("empty", "overlap")
    assert (empty_group.start, empty_group.stop) == (20, 20)
    assert [s.nbytes for s in layout.storages] == [40, 0, 0]
    assert [s.complete_names for s in layout.storages] == [("z",), (), ()]


def test_a_slice_keeping_a_big_storage_alive_reports_unreferenced_bytes():
    big = torch.zeros(1000, 64)
    layout = tv.analyze({"keep": big[10:12], "also": big[500, :8]})
    (s,) = layout.storages
    assert s.nbytes == 256_000
    assert s.covered_nbytes == 2 * 64 * 4 + 8 * 4
    assert s.unreferenced_nbytes == 256_000 - 544
    assert s.complete_names == ()
    assert layout.unreferenced_runs(s.key).tolist() == [[0, 2560], [3072, 128_000], [128_032, 256_000]]
    assert layout.unique_nbytes == 544 and layout.storage_nbytes == 256_000


def test_interleaved_column_views_are_exact_singletons():
    m = torch.empty(64, 4096, device="meta")
    layout = tv.analyze({f"c{j}": m[:, j] for j in range(4096)})
    groups = layout.groups("overlap")
    assert len(groups) == 4096 and all(len(g) == 1 and g.exact for g in groups)
    assert layout.storages[0].covered_nbytes == 64 * 4096 * 4
    assert layout.relation("c0", "c1") == "disjoint"
    both = tv.analyze({"m": m, **{f"c{j}": m[:, j] for j in range(0, 4096, 2)}})
    assert len(both.groups("overlap")) == 1 and len(both.groups("overlap")[0]) == 2049


# -- API and ordering rules ------------------------------------------------------------------
def test_groups_are_ordered_by_first_member_and_names_in_source_order():
    a, b = torch.zeros(10), torch.zeros(10)
    sd = {"b0": b[:2], "a0": a[5:], "b1": b[8:], "a1": a[:5], "b2": b, "a2": a[4:6], "c": torch.zeros(2)}
    layout = tv.analyze(sd)
    assert names(layout.groups("storage")) == [("b0", "b1", "b2"), ("a0", "a1", "a2"), ("c",)]
    assert names(layout.groups("overlap")) == [("b0", "b1", "b2"), ("a0", "a1", "a2"), ("c",)]
    assert names(layout.groups("span")) == [("b0",), ("a0",), ("b1",), ("a1",), ("b2",), ("a2",), ("c",)]
    assert [s.names for s in layout.storages] == [("b0", "b1", "b2"), ("a0", "a1", "a2"), ("c",)]
    assert [s.index for s in layout.storages] == [0, 1, 2]
    assert layout.names == tuple(sd)
    assert [v.name for v in layout.views] == list(sd) == [v.name for v in layout]


def test_complete_names_per_storage_and_shared_name_tuples():
    """Complete names when all, none or some views of a storage read all of it; a group that
    holds every view of its storage reuses the storage's names tuple (one tuple, not two)."""
    w, t, q = torch.zeros(4, 4), torch.zeros(8, 2), torch.zeros(12, 4)
    sd = {
        "w": w,
        "wt": w.t(),
        "tied": t,
        "tied2": t,
        "half": torch.zeros(6)[:3],
        "qkv": q,
        "q": q[:4],
        "k": q[4:8],
        "col": q[:, 1:3],
        "whole_again": q.view(-1),
    }
    layout = tv.analyze(sd)
    complete = [s.complete_names for s in layout.storages]
    assert complete == [("w", "wt"), ("tied", "tied2"), (), ("qkv", "whole_again")]
    storages, overlap = layout.storages, layout.groups("overlap")
    assert [g.names for g in overlap] == [s.names for s in storages]
    assert all(g.names is s.names for g, s in zip(overlap, storages))
    assert all(g.names is s.names for g, s in zip(layout.groups("storage"), storages))
    assert storages[0].complete_names is storages[0].names
    assert [g.names for g in layout.groups("span")] == [
        ("w", "wt"),
        ("tied", "tied2"),
        ("half",),
        ("qkv", "whole_again"),
        ("q",),
        ("k",),
        ("col",),
    ]
    assert layout.groups("span")[0].names is storages[0].names


def test_many_storages_and_groups_match_a_plain_python_grouping():
    """The vectorised columns (zip-built tuples, object-array gathers) against dict grouping."""
    sd = {}
    for i in range(300):
        base = torch.empty(i % 7 + 2, 4, device="meta")
        for j in range(i % 5 + 1):
            sd[f"s{i}.v{j}"] = base[j % base.shape[0] :] if j else base
    layout = tv.analyze(sd)
    by_storage: dict = {}
    for name, value in sd.items():
        by_storage.setdefault(value.untyped_storage()._cdata, []).append(name)
    assert [s.names for s in layout.storages] == [tuple(v) for v in by_storage.values()]
    assert [g.names for g in layout.groups("storage")] == [tuple(v) for v in by_storage.values()]
    assert [s.complete_names for s in layout.storages] == [
        tuple(
            n
            for n in v
            if sd[n].storage_offset() == 0
            and sd[n].is_contiguous()
            and sd[n].numel() == sd[v[0]].untyped_storage().nbytes() // 4
        )
        for v in by_storage.values()
    ]
    assert [g.names for g in layout.groups("overlap")] == [tuple(v) for v in by_storage.values()]


def test_overlap_group_joins_through_a_chain():
    x = torch.zeros(100)
    layout = tv.analyze({"p": x[0:10], "q": x[50:60], "r": x[9:20], "s": x[19:51], "t": x[70:80]})
    assert names(layout.groups("overlap")) == [("p", "q", "r", "s"), ("t",)]
    assert layout.group_of("q", "overlap").start == 0 and layout.group_of("q", "overlap").stop == 240


def test_abutting_views_are_not_overlapping():
    x = torch.zeros(10)
    layout = tv.analyze({"l": x[:5], "r": x[5:]})
    assert names(layout.groups("overlap")) == [("l",), ("r",)]
    assert layout.relation("l", "r") == "disjoint"
    assert layout.storages[0].covered_nbytes == 40


def test_missing_name_error_suggests_close_matches():
    layout = tv.analyze(FusedQKV())
    with pytest.raises(
        KeyError,
        match=r"no tensor named 'q.weigth' in this layout \(6 tensors\); "
        r"did you mean 'q.weight'",
    ):
        layout["q.weigth"]
    with pytest.raises(KeyError, match="no tensor named 'zzz'") as info:
        layout.relation("zzz", "q.weight")
    assert "did you mean" not in str(info.value)
    assert "q.weight" in layout and "missing" not in layout


def test_unknown_grouping_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"by must be one of \('storage', 'span', 'overlap'\), got 'bytes'"):
        tv.analyze(seed_tensors()).groups("bytes")


def test_storage_lookup_by_name_key_and_index():
    layout = tv.analyze(FusedQKV())
    s = layout.storage("v.weight")
    assert layout.storage(s.key) is s and layout.storage(0) is s
    assert layout.storage_views(s.key) == tuple(layout[n] for n in ("qkv.weight", "q.weight", "v.weight"))
    assert layout.storage(np.int64(0)) is s and layout.storage(-4) is layout.storages[0]
    assert layout.storage_views(0) == layout.storage_views("q.weight") == layout.storage_views(s.key)
    assert layout.unreferenced_runs("q.weight").tolist() == []
    with pytest.raises(KeyError, match="no storage with key"):
        layout.storage(("cpu", -1))
    with pytest.raises(KeyError, match="no storage with key"):
        layout.storage_views(("cpu", -1))
    with pytest.raises(IndexError, match="storage index 4 out of range: this layout has 4 storages"):
        layout.storage(4)


def test_records_are_frozen_and_equal_to_dataclass_built_ones():
    layout = tv.analyze(seed_tensors())
    v = layout["b"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.start = 0
    rebuilt = TensorView(*(getattr(v, f.name) for f in dataclasses.fields(TensorView)))
    assert rebuilt == v and hash(rebuilt) == hash(v)
    s = layout.storages[0]
    assert Storage(*(getattr(s, f.name) for f in dataclasses.fields(Storage))) == s
    g = layout.groups("overlap")[0]
    assert Group(*(getattr(g, f.name) for f in dataclasses.fields(Group))) == g
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.names = ()
    assert type(v.shape) is tuple and type(v.stride) is tuple
    assert isinstance(layout.views, tuple) and isinstance(layout.storages, tuple)
    assert layout["b"] is v  # records are built once


def test_record_fast_path_sets_every_field():
    values = ("n", ("cpu", 1), "cpu", "float32", (2,), (1,), 0, 4, 0, 8, 8, 8, True, True, "")
    assert _record(TensorView, values) == TensorView(*values)


def test_view_record_fields():
    x = torch.zeros(4, 6)
    v = tv.analyze({"odd": x[:, 1::2]})["odd"]
    assert (v.name, v.device, v.dtype, v.shape, v.stride, v.offset, v.itemsize) == (
        "odd",
        "cpu",
        "float32",
        (4, 3),
        (6, 2),
        1,
        4,
    )
    assert (v.start, v.stop, v.nbytes, v.footprint_nbytes, v.numel) == (4, 96, 48, 48, 12)
    assert (v.is_contiguous, v.is_empty, v.is_dense, v.is_expanded, v.exact, v.note) == (
        False,
        False,
        False,
        False,
        True,
        "",
    )
    assert v.storage == ("cpu", x.untyped_storage()._cdata)
    assert v.footprint().runs.tolist() == [[a, a + 4] for a in range(4, 96, 8)]


def test_layout_built_from_records_like_a_file_reader():
    # A file reader builds TensorView + StorageInfo itself; spans need not be itemsize-aligned.
    key = ("file", "model.safetensors")
    views = [
        TensorView("a", key, "file", "float32", (2, 3), (3, 1), 0, 4, 90, 114, 24, 24, True),
        TensorView("b", key, "file", "float16", (4,), (1,), 0, 2, 114, 122, 8, 8, True, note="n"),
    ]
    infos = [StorageInfo(key, "file", 130, label="model.safetensors"), StorageInfo(("file", "other"), "file", 7)]
    layout = Layout(views, infos, [Skipped("c", "why")], source="model.safetensors", metadata={"k": "v"})
    assert layout["a"] is views[0] and layout.views == tuple(views)
    assert [s.names for s in layout.storages] == [("a", "b"), ()]
    first, empty = layout.storages
    assert (first.label, first.covered_nbytes, first.unreferenced_nbytes) == ("model.safetensors", 32, 98)
    assert (empty.nbytes, empty.covered_nbytes, empty.unreferenced_nbytes, empty.names) == (7, 0, 7, ())
    assert layout.footprint_runs("b").tolist() == [[114, 122]]
    assert layout.unreferenced_runs(key).tolist() == [[0, 90], [122, 130]]
    assert layout.relation("a", "b") == "disjoint"
    assert layout.metadata == {"k": "v"} and layout.source == "model.safetensors"
    assert layout.skipped == (Skipped("c", "why"),)
    assert "storage #0 model.safetensors 130 B: 2 views, 32 B read, 98 B unreferenced" in str(layout)


def test_layout_with_storages_but_no_views():
    layout = Layout([], [StorageInfo(("file", "f"), "file", 10, label="f")])
    (s,) = layout.storages
    assert (s.names, s.covered_nbytes, s.unreferenced_nbytes, s.label) == ((), 0, 10, "f")
    assert layout.groups("overlap") == () and layout.unreferenced_runs(s.key).tolist() == [[0, 10]]
    assert layout.storage_nbytes == 10 and layout.unique_nbytes == 0


def test_layout_refuses_duplicate_names_and_unknown_storages():
    key = ("cpu", 1)
    v = TensorView("a", key, "cpu", "float32", (1,), (1,), 0, 4, 0, 4, 4, 4, True)
    with pytest.raises(ValueError, match="duplicate tensor name 'a'"):
        Layout([v, v], [StorageInfo(key, "cpu", 4)])
    with pytest.raises(ValueError, match=r"view 'a' refers to storage \('cpu', 1\), which has no StorageInfo"):
        Layout([v], [])


def test_empty_layout():
    layout = tv.analyze({})
    assert (len(layout), layout.views, layout.storages, layout.groups("overlap")) == (0, (), (), ())
    assert layout.unique_nbytes == layout.naive_nbytes == layout.storage_nbytes == 0
    assert (
        str(layout) == "0 tensors on 0 storages (dict)\nunique bytes 0 B · sum of views 0 B · storages 0 B\n"
        "shared groups (by storage): none"
    )


def test_totals():
    layout = tv.analyze(TiedLM(vocab=50, dim=16))
    assert layout.naive_nbytes == 2 * 50 * 16 * 4 + 2 * 16 * 4
    assert layout.unique_nbytes == layout.storage_nbytes == 50 * 16 * 4 + 2 * 16 * 4


# -- text and reprs --------------------------------------------------------------------------
GOLDEN = """\
9 tensors on 3 storages (dict)
unique bytes 188 B · sum of views 432 B · storages 4.0 KiB
(= a view that reads every byte of its storage)
storage #0 cpu 96 B: 5 views, 96 B read
  = x  float32[4×6] stride=(6, 1) offset=0  bytes [0, 96)
  = xt  float32[6×4] stride=(1, 6) offset=0  bytes [0, 96)  (non-contiguous)
  - even  float32[4×3] stride=(6, 2) offset=0  bytes [0, 92)  (non-contiguous)
  - odd  float32[4×3] stride=(6, 2) offset=1  bytes [4, 96)  (non-contiguous)
  - z  float32[0×6] stride=(6, 1) offset=24  bytes [96, 96)  (empty)
storage #1 cpu 12 B: 3 views, 12 B read
  = b  float32[3] stride=(1,) offset=0  bytes [0, 12)
  = b4  float32[4×3] stride=(0, 1) offset=0  bytes [0, 12)  (non-contiguous, expanded)
  - b0  float32[scalar] stride=() offset=0  bytes [0, 4)
storage #2 cpu 3.9 KiB (4000 B): 1 view, 80 B read, 3.8 KiB unreferenced
  - keep  float32[2×10] stride=(10, 1) offset=100  bytes [400, 480)
shared groups (by overlap): 2
  {x, xt, even, odd} bytes [0, 96)
  {b, b4, b0} bytes [0, 12)
skipped: 2
  note: not a tensor (builtins.str); tensorviz only lays out tensors
  sparse: sparse_coo tensor: its values and indices live in separate storages with no strided view; \
analyse t.coalesce().values() and t.coalesce().indices() instead"""


def test_text_summary_golden():
    x, b, big = torch.zeros(4, 6), torch.zeros(3), torch.zeros(100, 10)
    layout = tv.analyze(
        {
            "x": x,
            "xt": x.t(),
            "even": x[:, ::2],
            "odd": x[:, 1::2],
            "z": x[5:5],
            "b": b,
            "b4": b.expand(4, 3),
            "b0": b[0],
            "keep": big[10:12],
            "note": "hello",
            "sparse": torch.eye(2).to_sparse(),
        }
    )
    assert layout.to_text(by="overlap") == GOLDEN
    assert (
        str(layout)
        == layout.to_text()
        == GOLDEN.replace("(by overlap): 2\n  {x, xt, even, odd}", "(by storage): 2\n  {x, xt, even, odd, z}")
    )
    short = layout.to_text(max_views=2).splitlines()
    assert short[6:8] == ["  … 3 more", "storage #1 cpu 12 B: 3 views, 12 B read"]


def test_reprs_are_plain_and_readable():
    layout = tv.analyze(seed_tensors())
    assert repr(layout) == "<Layout 3 tensors on 1 storage, 1 shared, 0 skipped>"
    assert re.fullmatch(
        r"TensorView\('b', float32\[2, 10, 50\], stride=\(500, 50, 1\), offset=1000, "
        r"bytes=\[4000, 8000\), storage=cpu:0x[0-9a-f]+\)",
        repr(layout["b"]),
    )
    x = torch.zeros(2, 3)
    assert "non-contiguous" in repr(tv.analyze({"t": x.t()})["t"])
    assert repr(layout.storages[0]) == "Storage(#0 cpu, 15.6 KiB, 3 views, unreferenced=0 B)"
    assert repr(layout.groups("span")[1]) == "Group(by='span', names=('b',), bytes=[4000, 8000))"
    assert repr(Skipped("n", "why")) == "Skipped('n': why)"
    one = tv.analyze(torch.zeros(2))
    assert repr(one) == "<Layout 1 tensor on 1 storage, 0 shared, 0 skipped>"
    assert one.names == ("tensor",)
    key = ("file", "m.safetensors")
    assert "storage=file:m.safetensors" in repr(
        TensorView("a", key, "file", "uint8", (1,), (1,), 0, 1, 0, 1, 1, 1, True)
    )


def test_footprint_runs_are_read_only_and_cached_per_geometry():
    x = torch.zeros(8, 8)
    layout = tv.analyze({"c0": x[:, 0], "c1": x[:, 1], "c2": x[:, 2]})
    r0, r1 = layout.footprint_runs("c0"), layout.footprint_runs("c1")
    assert not r0.flags.writeable and not r1.flags.writeable
    assert np.array_equal(r1 - r0, np.full((8, 2), 4))
    assert len(layout._raw.geometries) == 1  # three views, one (shape, stride)


def test_text_lists_each_checkpoint_value_once(tmp_path):
    """A top-level value (``step``) is on the contents line; the values line keeps only the
    nested ones, and says how many more there were."""
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "opt": {"lr": 0.1, "betas": (0.9, 0.99)}, "step": 100}, path)
    text = tv.analyze(path).to_text()
    assert text.split("metadata:\n")[1] == (
        "  format: torch\n"
        "  contents: model=1 tensor, opt=dict without tensors, step=100\n"
        "  values: opt.lr=0.1, opt.betas=(0.9, 0.99)"
    )
    torch.save({"w": torch.zeros(2), "step": 100}, path)
    assert tv.analyze(path).to_text().split("metadata:\n")[1] == "  format: torch\n  contents: step=100"
    layout = Layout([], [], metadata={"values": {f"v{i}": str(i) for i in range(3)}, "values_omitted": 7})
    assert layout.to_text().endswith("metadata:\n  values: v0=0, v1=1, v2=2 (+7 more)")
