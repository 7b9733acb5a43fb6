"""Property tests: spans, footprints, relations, groupings and coverage against a brute-force oracle.

The oracle enumerates every element's byte addresses with ``itertools.product`` into python sets,
compares sets pairwise and groups overlaps by naive all-pairs union-find. The engine must agree
exactly, for random ``as_strided`` views (sizes including 0, strides including 0 and overlapping,
offsets, dtypes of 1/2/4/8 bytes, ``.view(dtype)`` reinterpretations) over small storages.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core import footprint as fp

DTYPES = [torch.uint8, torch.int16, torch.float16, torch.float32, torch.int32, torch.float64, torch.int64]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the oracle -----------------------------------------------------------------------------
def oracle_bytes(offset: int, shape, stride, itemsize: int) -> set[int]:
    """Every byte address the view reads, by enumerating every index."""
    out: set[int] = set()
    for index in itertools.product(*(range(n) for n in shape)):
        first = (offset + sum(i * s for i, s in zip(index, stride))) * itemsize
        out.update(range(first, first + itemsize))
    return out


def oracle_span(offset: int, shape, stride, itemsize: int) -> tuple[int, int]:
    addrs = oracle_bytes(offset, shape, stride, itemsize)
    if not addrs:
        return offset * itemsize, offset * itemsize
    return min(addrs), max(addrs) + 1


def runs_of(addrs: set[int]) -> list[list[int]]:
    """Sorted, merged half-open runs of a set of byte addresses."""
    runs: list[list[int]] = []
    for a in sorted(addrs):
        if runs and runs[-1][1] == a:
            runs[-1][1] = a + 1
        else:
            runs.append([a, a + 1])
    return runs


def oracle_relation(a: dict, b: dict) -> str:
    if a["storage"] != b["storage"]:
        return "unrelated"
    if not a["bytes"] or not b["bytes"]:
        return "disjoint"
    if (a["start"], a["shape"], a["stride"], a["dtype"]) == (b["start"], b["shape"], b["stride"], b["dtype"]):
        return "identical"
    if a["bytes"] == b["bytes"]:
        return "same-bytes"
    if a["bytes"] > b["bytes"]:
        return "contains"
    if a["bytes"] < b["bytes"]:
        return "within"
    return "overlaps" if a["bytes"] & b["bytes"] else "disjoint"


def oracle_groups(facts: list[dict], by: str) -> list[tuple[str, ...]]:
    """Groups as name tuples, ordered by first member, names in source order."""
    n = len(facts)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(n), 2):
        a, b = facts[i], facts[j]
        if a["storage"] != b["storage"]:
            continue
        if by == "storage":
            same = True
        elif by == "span":
            same = bool(a["bytes"]) and bool(b["bytes"]) and (a["start"], a["stop"]) == (b["start"], b["stop"])
        else:
            same = bool(a["bytes"] & b["bytes"])
        if same:
            parent[max(find(i), find(j))] = min(find(i), find(j))
    groups: dict[int, list[str]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(facts[i]["name"])
    return [tuple(g) for _, g in sorted(groups.items())]


# -- random views ---------------------------------------------------------------------------
@st.composite
def view_specs(draw, nbytes: int):
    """(dtype, shape, stride, offset, view-as dtype or None) of a view fitting in nbytes bytes."""
    dtype = draw(st.sampled_from(DTYPES))
    itemsize = torch.empty(0, dtype=dtype).element_size()
    ndim = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    stride = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
    if ndim and draw(st.integers(0, 9)) == 0:  # now and then an empty view
        shape[draw(st.integers(0, ndim - 1))] = 0

    def reach() -> int:
        return 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))

    while reach() * itemsize > nbytes:  # shrink the largest dim until the view fits
        k = max(range(ndim), key=lambda i: shape[i] * stride[i]) if ndim else None
        if k is None or shape[k] <= 1:
            shape = [0] * max(ndim, 1)
            stride = stride or (1,)
            break
        shape[k] -= 1
    offset = draw(st.integers(0, max(nbytes // itemsize - reach(), 0)))
    view_as = draw(st.one_of(st.none(), st.sampled_from(DTYPES)))
    return dtype, tuple(shape), stride, offset, view_as


def derive(draw, t: torch.Tensor) -> torch.Tensor:
    """A view of a view: the same tensor, a permutation, an expand, a step slice or a dtype view."""
    how = draw(st.sampled_from(["same", "permute", "expand", "step", "dtype"]))
    try:
        if how == "same":
            return t
        if how == "permute" and t.dim() > 1:
            return t.permute(*reversed(range(t.dim())))
        if how == "expand":
            return t.unsqueeze(0).expand(draw(st.integers(0, 3)), *t.shape)
        if how == "step" and t.dim() and t.shape[0] > 1:
            return t[draw(st.integers(0, 1)) :: draw(st.integers(1, 2))]
        if how == "dtype":
            return t.view(draw(st.sampled_from(DTYPES)))
    except RuntimeError:
        pass
    return t


@st.composite
def view_sets(draw):
    """Up to 6 named views over one or two small uint8 storages, some derived from others."""
    sizes = draw(st.lists(st.integers(0, 64), min_size=1, max_size=2))
    storages = [torch.empty(n, dtype=torch.uint8) for n in sizes]
    views: dict[str, torch.Tensor] = {}
    for k in range(draw(st.integers(1, 6))):
        if views and draw(st.integers(0, 2)) == 0:
            views[f"v{k}"] = derive(draw, draw(st.sampled_from(list(views.values()))))
            continue
        s = draw(st.integers(0, len(storages) - 1))
        views[f"v{k}"] = view_of(storages[s].untyped_storage(), draw(view_specs(sizes[s])))
    return storages, views


def view_of(storage: torch.UntypedStorage, spec: tuple) -> torch.Tensor:
    """A view of ``storage`` from a :func:`view_specs` draw: ``set_`` with its geometry, then
    ``.view(dtype)`` when it asks for one and torch allows it."""
    dtype, shape, stride, offset, view_as = spec
    t = torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
    if view_as is not None:
        try:
            t = t.view(view_as)
        except RuntimeError:
            pass
    return t


def facts_of(name: str, t: torch.Tensor, storage_index: int) -> dict:
    itemsize = t.element_size()
    addrs = oracle_bytes(t.storage_offset(), tuple(t.shape), t.stride(), itemsize)
    start, stop = oracle_span(t.storage_offset(), tuple(t.shape), t.stride(), itemsize)
    return {
        "name": name,
        "storage": storage_index,
        "bytes": addrs,
        "start": start,
        "stop": stop,
        "shape": tuple(t.shape),
        "stride": t.stride(),
        "dtype": t.dtype,
        "numel": t.numel(),
        "itemsize": itemsize,
    }


def storage_index(t: torch.Tensor, storages: list[torch.Tensor]) -> int:
    return next(i for i, s in enumerate(storages) if s.untyped_storage()._cdata == t.untyped_storage()._cdata)


# -- the properties -------------------------------------------------------------------------
@SETTINGS
@given(view_sets())
def test_engine_equals_the_oracle(case):
    storages, views = case
    layout = tv.analyze(views)
    facts = [facts_of(n, t, storage_index(t, storages)) for n, t in views.items()]
    assert layout.names == tuple(views)
    for f in facts:
        v = layout[f["name"]]
        assert (v.start, v.stop) == (f["start"], f["stop"]), f["name"]
        assert v.footprint_runs().tolist() == runs_of(f["bytes"])
        assert layout.footprint_runs(f["name"]).tolist() == runs_of(f["bytes"])
        assert v.footprint_nbytes == len(f["bytes"])
        assert v.nbytes == f["numel"] * f["itemsize"]
        assert v.is_contiguous == views[f["name"]].is_contiguous()
        assert v.exact
    for a, b in itertools.product(facts, repeat=2):
        assert layout.relation(a["name"], b["name"]) == oracle_relation(a, b), (a["name"], b["name"])
        assert layout.overlap_nbytes(a["name"], b["name"]) == (
            len(a["bytes"] & b["bytes"]) if a["storage"] == b["storage"] else 0
        )
    for by in ("storage", "span", "overlap"):
        assert [g.names for g in layout.groups(by)] == oracle_groups(facts, by), by
        for g in layout.groups(by):
            members = [f for f in facts if f["name"] in g.names]
            live = [f for f in members if f["bytes"]]
            expect = (
                (min(f["start"] for f in live), max(f["stop"] for f in live)) if live else (members[0]["start"],) * 2
            )
            assert (g.start, g.stop) == expect
            assert g.exact


@SETTINGS
@given(view_sets())
def test_coverage_equals_the_oracle(case):
    storages, views = case
    layout = tv.analyze(views)
    facts = [facts_of(n, t, storage_index(t, storages)) for n, t in views.items()]
    used = sorted({f["storage"] for f in facts}, key=lambda s: [f["storage"] for f in facts].index(s))
    assert len(layout.storages) == len(used)
    for st_rec, s in zip(layout.storages, used):
        nbytes = storages[s].numel()
        members = [f for f in facts if f["storage"] == s]
        covered = set().union(*(f["bytes"] for f in members))
        assert st_rec.nbytes == nbytes
        assert st_rec.names == tuple(f["name"] for f in members)
        assert st_rec.covered_nbytes == len(covered)
        assert st_rec.unreferenced_nbytes == nbytes - len(covered)
        assert st_rec.complete_names == tuple(f["name"] for f in members if nbytes and f["bytes"] == set(range(nbytes)))
        assert layout.unreferenced_runs(st_rec.key).tolist() == runs_of(set(range(nbytes)) - covered)
    assert layout.unique_nbytes == sum(s.covered_nbytes for s in layout.storages)


# -- footprint.py alone, no torch -----------------------------------------------------------
geometries = st.integers(0, 3).flatmap(
    lambda nd: st.tuples(
        st.integers(0, 20),
        st.lists(st.integers(0, 5), min_size=nd, max_size=nd),
        st.lists(st.integers(0, 9), min_size=nd, max_size=nd),
        st.sampled_from([1, 2, 4, 8]),
    )
)


@settings(max_examples=300, deadline=None)
@given(geometries)
def test_footprint_span_and_geometry_equal_the_oracle(g):
    offset, shape, stride, itemsize = g
    addrs = oracle_bytes(offset, shape, stride, itemsize)
    start = offset * itemsize
    f = fp.footprint(start, shape, stride, itemsize)
    assert f.exact and f.runs.tolist() == runs_of(addrs) and f.nbytes == len(addrs)
    assert fp.span(start, shape, stride, itemsize) == oracle_span(offset, shape, stride, itemsize)
    dense = fp.dense_run(start, shape, stride, itemsize)
    is_dense = bool(addrs) and len(runs_of(addrs)) == 1
    assert (dense is not None) == is_dense
    if is_dense:
        assert list(dense) == runs_of(addrs)[0]
    geo = fp.geometry(shape, stride)
    assert geo.byte_runs(start, itemsize).tolist() == runs_of(addrs)
    assert geo.footprint * itemsize == len(addrs) and geo.dense == is_dense
    assert geo.numel == int(np.prod(shape)) and geo.shape == tuple(shape) and geo.stride == tuple(stride)


run_sets = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)), max_size=8).map(
    lambda pairs: [(a, a + n) for a, n in pairs]
)


def as_set(pairs) -> set[int]:
    return set().union(*(range(a, b) for a, b in pairs)) if len(pairs) else set()


@settings(max_examples=300, deadline=None)
@given(run_sets, run_sets, st.integers(0, 40), st.integers(0, 80))
def test_run_algebra_equals_set_algebra(p, q, lo, hi):
    a, b = fp.as_runs(p), fp.as_runs(q)
    sa, sb = as_set(p), as_set(q)
    assert a.tolist() == runs_of(sa) and b.tolist() == runs_of(sb)  # canonical form
    assert fp.union(a, b).tolist() == runs_of(sa | sb)
    assert fp.union().tolist() == []
    assert fp.total(a) == len(sa)
    assert fp.intersection_nbytes(a, b) == len(sa & sb)
    assert fp.contains(a, b) == (sb <= sa)
    assert fp.clip(a, lo, hi).tolist() == runs_of({x for x in sa if lo <= x < hi})
    assert fp.gaps(a, lo, hi).tolist() == runs_of(set(range(lo, hi)) - sa)
    cov = fp.coverage(hi, [a, b])
    inside = {x for x in sa | sb if 0 <= x < hi}
    assert cov.covered.tolist() == runs_of(inside)
    assert (cov.covered_nbytes, cov.unreferenced_nbytes) == (len(inside), hi - len(inside))
    assert cov.unreferenced().tolist() == runs_of(set(range(hi)) - inside)
    assert not a.flags.writeable


# -- the run budget ---------------------------------------------------------------------------
def test_footprint_over_budget_is_the_span_and_says_so():
    # x[:, ::2] of a 6 x 8 float32 matrix: 24 one-element blocks
    f = fp.footprint(0, (6, 4), (8, 2), 4, budget=23)
    assert not f.exact
    assert f.runs.tolist() == [[0, fp.span(0, (6, 4), (8, 2), 4)[1]]] == [[0, 188]]
    g = fp.footprint(0, (6, 4), (8, 2), 4, budget=24)
    assert g.exact and len(g.runs) == 24
    # column slice x[:, 1:3]: blocks of two elements, one per row -> 6 blocks
    assert fp.footprint(4, (6, 2), (8, 1), 4, budget=6).exact
    assert not fp.footprint(4, (6, 2), (8, 1), 4, budget=5).exact


def test_dense_views_never_hit_the_budget():
    assert fp.footprint(0, (1000, 1000), (1000, 1), 4, budget=1).exact
    assert fp.footprint(0, (1000, 1000), (1, 1000), 4, budget=1).runs.tolist() == [[0, 4_000_000]]


def test_layout_with_inexact_footprints_flags_them(monkeypatch):
    monkeypatch.setattr(fp, "RUN_BUDGET", 3)
    x = torch.zeros(6, 8)
    layout = tv.analyze({"x": x, "even": x[:, ::2], "odd": x[:, 1::2], "row": x[2], "tail": x[5:]})
    even, odd = layout["even"], layout["odd"]
    assert not even.exact and not odd.exact and layout["x"].exact
    assert (even.start, even.stop, even.footprint_nbytes) == (0, 188, 188)  # the span, an upper bound
    assert not even.is_dense and not even.is_expanded
    # exact answers stay exact; unprovable ones are "overlaps", never a false "same-bytes"
    assert layout.relation("x", "even") == "contains"  # bound strictly inside x: proven
    assert layout.relation("even", "x") == "within"
    assert layout.relation("even", "odd") == "overlaps"  # really disjoint, but not provable
    assert layout.relation("even", "even") == "identical"
    assert layout.relation("row", "even") == "overlaps"
    # storage coverage and overlap groups say they are upper bounds
    assert not layout.storages[0].exact
    (group,) = layout.groups("overlap")
    assert group.names == ("x", "even", "odd", "row", "tail") and not group.exact
    assert "inexact" in repr(group)
    assert "footprint≈span" in layout.to_text()


def test_inexact_singleton_overlap_group_is_exact(monkeypatch):
    monkeypatch.setattr(fp, "RUN_BUDGET", 3)
    x = torch.zeros(6, 8)
    layout = tv.analyze({"even": x[:, ::2], "other": torch.zeros(3)})
    assert [g.exact for g in layout.groups("overlap")] == [True, True]
