"""Memory identity follows real addresses: storage objects over overlapping bytes are one memory.

The oracle knows nothing of storages' ids: it takes every storage object's address range
``[data_ptr, data_ptr + nbytes)``, joins overlapping ranges by naive all-pairs union-find, and
enumerates every element's absolute byte address from ``data_ptr``. Random aliasing is built
through numpy views (``torch.from_numpy`` of slices of one array, twice), ``torch.frombuffer``
and ``set_`` on slices of another storage object; the engine must agree exactly on spans,
footprints, relations, all three groupings, coverage and unique bytes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.sources.memory import memories
from tests.core.test_oracle import derive, oracle_bytes, oracle_relation, runs_of, view_of, view_specs

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- random aliasing ---------------------------------------------------------------------------
@st.composite
def storage_objects(draw) -> tuple[list, list[torch.UntypedStorage]]:
    """Up to 5 storage objects: slices of one or two numpy arrays (from_numpy, frombuffer),
    slices of earlier storage objects (what ``set_`` receives), or fresh storages. Returns the
    arrays too (they own the bytes and must stay alive)."""
    arrays = [np.zeros(draw(st.integers(1, 64)), dtype=np.uint8) for _ in range(draw(st.sampled_from([1, 1, 2])))]
    objects: list[torch.UntypedStorage] = []
    for _ in range(draw(st.integers(2, 5))):
        how = draw(st.sampled_from(["numpy", "numpy", "frombuffer", "slice", "slice", "fresh"]))
        if how == "slice" and objects:
            s = draw(st.sampled_from(objects))
            a = draw(st.integers(0, s.nbytes()))
            b = draw(st.integers(a, s.nbytes()))
            objects.append(s[a:b])
            continue
        if how == "fresh":
            objects.append(torch.empty(draw(st.integers(0, 48)), dtype=torch.uint8).untyped_storage())
            continue
        arr = draw(st.sampled_from(arrays))
        a = draw(st.integers(0, arr.size - 1))
        b = draw(st.integers(a + 1, arr.size))
        if how == "frombuffer":
            objects.append(torch.frombuffer(arr, dtype=torch.uint8, offset=a, count=b - a).untyped_storage())
        else:
            objects.append(torch.from_numpy(arr[a:b]).untyped_storage())
    return arrays, objects


@st.composite
def aliased_views(draw):
    """Up to 6 named views over random storage objects, some derived from others."""
    arrays, objects = draw(storage_objects())
    views: dict[str, torch.Tensor] = {}
    for k in range(draw(st.integers(1, 6))):
        if views and draw(st.integers(0, 3)) == 0:
            views[f"v{k}"] = derive(draw, draw(st.sampled_from(list(views.values()))))
            continue
        s = draw(st.sampled_from(objects))
        views[f"v{k}"] = view_of(s, draw(view_specs(s.nbytes())))
    return arrays, views


# -- the oracle --------------------------------------------------------------------------------
def oracle_memories(views: dict[str, torch.Tensor]) -> dict[str, tuple[int, int, int]]:
    """Per view name: (memory number, lowest address of the memory, memory extent)."""
    objs: list[tuple[int, int, int]] = []  # (storage id, address, nbytes), distinct storage objects
    for t in views.values():
        s = t.untyped_storage()
        if all(o[0] != s._cdata for o in objs):
            objs.append((s._cdata, s.data_ptr(), s.nbytes()))
    parent = list(range(len(objs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(len(objs)), 2):
        (_, p, n), (_, q, m) = objs[i], objs[j]
        if n and m and p < q + m and q < p + n:  # the ranges share a byte
            parent[max(find(i), find(j))] = min(find(i), find(j))
    out = {}
    for name, t in views.items():
        i = next(k for k, o in enumerate(objs) if o[0] == t.untyped_storage()._cdata)
        members = [o for k, o in enumerate(objs) if find(k) == find(i)]
        base = min(o[1] for o in members)
        out[name] = (find(i), base, max(o[1] + o[2] for o in members) - base)
    return out


def facts(views: dict[str, torch.Tensor]) -> list[dict]:
    """Each view's memory and its bytes counted from the memory's lowest address."""
    mem = oracle_memories(views)
    out = []
    for name, t in views.items():
        memory, base, extent = mem[name]
        itemsize = t.element_size()
        at = t.untyped_storage().data_ptr() - base  # where the storage object starts in the memory
        addrs = {at + a for a in oracle_bytes(t.storage_offset(), tuple(t.shape), t.stride(), itemsize)}
        start = at + t.storage_offset() * itemsize
        out.append(
            {
                "name": name,
                "storage": memory,
                "extent": extent,
                "bytes": addrs,
                "start": min(addrs) if addrs else start,
                "stop": max(addrs) + 1 if addrs else start,
                "shape": tuple(t.shape),
                "stride": t.stride(),
                "dtype": t.dtype,
            }
        )
    return out


def oracle_groups(fs: list[dict], by: str) -> list[tuple[str, ...]]:
    parent = list(range(len(fs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(len(fs)), 2):
        a, b = fs[i], fs[j]
        if a["storage"] != b["storage"]:
            continue
        if by == "span":
            same = bool(a["bytes"]) and bool(b["bytes"]) and (a["start"], a["stop"]) == (b["start"], b["stop"])
        else:
            same = by == "storage" or bool(a["bytes"] & b["bytes"])
        if same:
            parent[max(find(i), find(j))] = min(find(i), find(j))
    groups: dict[int, list[str]] = {}
    for i, f in enumerate(fs):
        groups.setdefault(find(i), []).append(f["name"])
    return [tuple(g) for _, g in sorted(groups.items())]


# -- the properties ----------------------------------------------------------------------------
@SETTINGS
@given(aliased_views())
def test_views_relations_and_groups_follow_addresses(case):
    _arrays, views = case
    layout = tv.analyze(views)
    fs = facts(views)
    for f in fs:
        v = layout[f["name"]]
        assert (v.start, v.stop) == (f["start"], f["stop"]), f["name"]
        assert v.footprint_runs().tolist() == runs_of(f["bytes"]), f["name"]
        assert v.footprint_nbytes == len(f["bytes"])
    for a, b in itertools.product(fs, repeat=2):
        assert layout.relation(a["name"], b["name"]) == oracle_relation(a, b), (a["name"], b["name"])
        expect = len(a["bytes"] & b["bytes"]) if a["storage"] == b["storage"] else 0
        assert layout.overlap_nbytes(a["name"], b["name"]) == expect
    for by in ("storage", "span", "overlap"):
        assert [g.names for g in layout.groups(by)] == oracle_groups(fs, by), by
        for g in layout.groups(by):
            live = [f for f in fs if f["name"] in g.names and f["bytes"]]
            if live:
                assert (g.start, g.stop) == (min(f["start"] for f in live), max(f["stop"] for f in live))


@SETTINGS
@given(aliased_views())
def test_coverage_and_unique_bytes_follow_addresses(case):
    _arrays, views = case
    layout = tv.analyze(views)
    fs = facts(views)
    order = list(dict.fromkeys(f["storage"] for f in fs))
    assert len(layout.storages) == len(order)
    for rec, memory in zip(layout.storages, order):
        members = [f for f in fs if f["storage"] == memory]
        extent = members[0]["extent"]
        covered = set().union(*(f["bytes"] for f in members))
        assert rec.nbytes == extent
        assert rec.names == tuple(f["name"] for f in members)
        assert (rec.covered_nbytes, rec.unreferenced_nbytes) == (len(covered), extent - len(covered))
        whole = set(range(extent))
        assert rec.complete_names == tuple(f["name"] for f in members if extent and f["bytes"] == whole)
        assert layout.unreferenced_runs(rec.key).tolist() == runs_of(whole - covered)
    union = {(f["storage"], a) for f in fs for a in f["bytes"]}
    assert layout.unique_nbytes == len(union)


# -- the cases the issue names ------------------------------------------------------------------
def test_from_numpy_twice_is_one_memory():
    a = np.arange(10, dtype=np.float32)
    x, y = torch.from_numpy(a), torch.from_numpy(a)
    assert x.untyped_storage()._cdata != y.untyped_storage()._cdata  # two storage objects
    layout = tv.analyze({"x": x, "y": y})
    assert layout.relation("x", "y") == "identical"
    assert len(layout.storages) == 1 and layout.storages[0].nbytes == 40
    assert layout.unique_nbytes == 40 and layout.storage_nbytes == 40
    assert [g.names for g in layout.shared("span")] == [("x", "y")]
    assert "one memory of 2 storage objects at bytes [0, 40) [0, 40)" in layout.to_text()


def test_numpy_views_before_from_numpy_are_placed_in_the_array():
    a = np.zeros(12, dtype=np.float32)
    head, mid, tail = torch.from_numpy(a[:6]), torch.from_numpy(a[4:10]), torch.from_numpy(a[8:])
    layout = tv.analyze({"head": head, "tail": tail, "mid": mid})
    assert [(v.start, v.stop, v.offset) for v in layout.views] == [(0, 24, 0), (32, 48, 8), (16, 40, 4)]
    assert layout.relation("head", "mid") == "overlaps"
    assert layout.relation("head", "tail") == "disjoint"  # one memory through mid, no common byte
    assert layout.storages[0].nbytes == 48 and layout.unique_nbytes == 48
    assert [g.names for g in layout.groups("overlap")] == [("head", "tail", "mid")]
    assert [g.names for g in tv.analyze({"head": head, "tail": tail}).groups("storage")] == [("head",), ("tail",)]


def test_adjacent_numpy_slices_are_separate_memories():
    a = np.zeros(10, dtype=np.float32)
    layout = tv.analyze({"lo": torch.from_numpy(a[:5]), "hi": torch.from_numpy(a[5:])})
    assert layout.relation("lo", "hi") == "unrelated"
    assert [s.nbytes for s in layout.storages] == [20, 20]
    assert "storage_objects" not in layout.metadata


def test_frombuffer_twice_is_one_memory():
    buf = bytearray(64)
    a = torch.frombuffer(buf, dtype=torch.float32)
    b = torch.frombuffer(buf, dtype=torch.int16, offset=8, count=4)
    layout = tv.analyze({"a": a, "b": b})
    assert layout.relation("a", "b") == "contains"
    assert (layout["b"].start, layout["b"].stop, layout["b"].offset) == (8, 16, 4)
    assert layout.unique_nbytes == 64


def test_set_on_a_storage_slice_as_safetensors_tests_it():
    # safetensors' test_pt_sf_save_model_overlapping_storage
    m = torch.randn(10)
    n = torch.empty([], dtype=torch.float32)
    n.set_(m.untyped_storage()[16:])
    layout = tv.analyze({"m": m, "n": n})
    assert layout.relation("m", "n") == "contains"
    assert (layout["n"].start, layout["n"].stop, layout["n"].offset) == (16, 40, 4)
    assert layout.storages[0].complete_names == ("m",)
    assert layout.metadata["storage_objects"] == {layout.storages[0].key: ((0, 40), (16, 24))}


def test_misaligned_storage_slice_keeps_its_offset_and_says_so():
    m = torch.zeros(4)
    n = torch.empty(0, dtype=torch.int16).set_(m.untyped_storage()[3:9], 1, (2,), (1,))
    layout = tv.analyze({"m": m, "n": n})
    v = layout["n"]
    assert (v.start, v.stop, v.offset) == (5, 9, 1)
    assert v.note == "starts at byte 5 of its memory, not a multiple of itemsize 2"
    assert layout.relation("m", "n") == "contains"


def test_meta_and_fake_tensors_keep_storage_identity():
    from torch._subclasses.fake_tensor import FakeTensorMode

    a, b = torch.empty(4, device="meta"), torch.empty(4, device="meta")
    layout = tv.analyze({"a": a, "b": b, "a2": a[2:]})
    assert layout.relation("a", "b") == "unrelated" and layout.relation("a", "a2") == "contains"
    with FakeTensorMode():
        x, y = torch.empty(4), torch.empty(4)
    layout = tv.analyze({"x": x, "y": y, "xt": x[1:]})
    assert layout.relation("x", "y") == "unrelated" and layout.relation("x", "xt") == "contains"


def test_empty_and_freed_storages_keep_their_identity():
    e1, e2 = torch.empty(0), torch.empty(0)
    layout = tv.analyze({"e1": e1, "e2": e2})
    assert layout.relation("e1", "e2") == "unrelated"


def test_memories_are_found_in_one_sort():
    def row(sid, ptr, n, device="cpu"):
        return ("x", sid, device, n, ("uint8", 1), (n,), (1,), 0, None, ptr)

    rows = [row(1, 100, 10), row(2, 300, 5), row(3, 105, 10), row(1, 100, 10), row(4, 114, 2), row(5, 116, 4)]
    rows += [row(6, 100, 10, "meta"), row(7, 0, 10), row(8, 104, 0)]
    found = memories(rows)
    # 5 touches 4's end without sharing a byte; meta has no flat address space; 7 has no
    # address; 8 is empty
    assert sorted(found) == [1, 3, 4]
    memory, delta = found[4]
    assert (memory.token, memory.nbytes, memory.parts, delta) == (1, 16, ((1, 0, 10), (3, 5, 10), (4, 14, 2)), 14)
    assert memories([r[:9] for r in rows]) == {}  # rows without addresses: storage identity


@pytest.mark.parametrize("n", [1, 2, 1000])
def test_a_chain_of_overlaps_is_one_memory(n):
    a = np.zeros(n + 8, dtype=np.uint8)
    views = {f"s{i}": torch.from_numpy(a[i : i + 8]) for i in range(n)}
    layout = tv.analyze(views)
    assert len(layout.storages) == 1 and layout.storages[0].nbytes == n + 7
    assert [layout[f"s{i}"].start for i in (0, n - 1)] == [0, n - 1]
    parts = layout.metadata.get("storage_objects", {}).get(layout.storages[0].key, ())
    assert list(parts) == ([(i, 8) for i in range(n)] if n > 1 else [])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_blocks_of_one_segment_stay_apart_and_slices_join():
    # The caching allocator packs small tensors side by side in one segment: not one memory.
    small = {f"t{i}": torch.zeros(3, device="cuda") for i in range(8)}
    layout = tv.analyze(small)
    assert len(layout.storages) == 8 and "storage_objects" not in layout.metadata
    m = torch.zeros(10, device="cuda")
    n = torch.empty(0, device="cuda").set_(m.untyped_storage()[16:])
    layout = tv.analyze({"m": m, "n": n})
    assert layout.relation("m", "n") == "contains" and layout["n"].start == 16


def _first_questions(layout) -> list:
    """24 threads' first questions to a fresh layout: storages, metadata, a view's start."""
    from concurrent.futures import ThreadPoolExecutor

    asks = (
        lambda: len(layout.storages),
        lambda: len(layout.metadata["storage_objects"]),
        lambda: layout["s49"].start,
    )
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda k: asks[k % 3](), range(24)))


def test_threads_asking_first_all_see_the_memory():
    a = np.zeros(64, dtype=np.uint8)
    views = {f"s{i}": torch.from_numpy(a[i : i + 8]) for i in range(50)}
    for _ in range(20):
        assert _first_questions(tv.analyze(views)) == [1, 1, 49] * 8
