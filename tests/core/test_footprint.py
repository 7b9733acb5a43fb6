"""footprint.py: spans, exact byte runs and the run-set algebra, table-driven (numpy only)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorviz.core import footprint as fp
from tensorviz.core import table as _table
from tensorviz.core.sweep import components, min_roots, ranked

# (case, start, shape, stride, itemsize, span, runs)
CASES = [
    ("contiguous 4x6 float32", 0, (4, 6), (6, 1), 4, (0, 96), [[0, 96]]),
    ("transpose", 0, (6, 4), (1, 6), 4, (0, 96), [[0, 96]]),
    ("rows 2:4 of 8x10x50", 4000, (2, 10, 50), (500, 50, 1), 4, (4000, 8000), [[4000, 8000]]),
    ("x[:, ::2] of 4x6", 0, (4, 3), (6, 2), 4, (0, 92), [[a, a + 4] for a in range(0, 96, 8)]),
    ("x[:, 1::2] of 4x6", 4, (4, 3), (6, 2), 4, (4, 96), [[a, a + 4] for a in range(4, 96, 8)]),
    ("x[:, :3] of 4x6", 0, (4, 3), (6, 1), 4, (0, 84), [[0, 12], [24, 36], [48, 60], [72, 84]]),
    ("x[:, 3:] of 4x6", 12, (4, 3), (6, 1), 4, (12, 96), [[12, 24], [36, 48], [60, 72], [84, 96]]),
    ("expand(4, 3) of 3 floats", 0, (4, 3), (0, 1), 4, (0, 12), [[0, 12]]),
    ("expand of a strided column", 8, (5, 3), (0, 2), 2, (8, 18), [[8, 10], [12, 14], [16, 18]]),
    ("scalar", 20, (), (), 8, (20, 28), [[20, 28]]),
    ("size-1 dims with odd strides", 4, (1, 3, 1), (99, 1, 7), 4, (4, 16), [[4, 16]]),
    ("empty", 40, (0, 3), (3, 1), 4, (40, 40), []),
    ("empty with a big dim", 0, (5, 0), (1, 1), 1, (0, 0), []),
    ("overlapping rows (stride 1, 1)", 0, (3, 4), (1, 1), 1, (0, 6), [[0, 6]]),
    ("interleaved rows, gaps", 0, (2, 3), (3, 2), 1, (0, 8), [[0, 1], [2, 6], [7, 8]]),
    ("uint8 view of float32 column", 4, (3, 4), (16, 1), 1, (4, 40), [[4, 8], [20, 24], [36, 40]]),
]


@pytest.mark.parametrize("case,start,shape,stride,itemsize,span,runs", CASES, ids=[c[0] for c in CASES])
def test_span_and_footprint(case, start, shape, stride, itemsize, span, runs):
    assert fp.span(start, shape, stride, itemsize) == span
    f = fp.footprint(start, shape, stride, itemsize)
    assert f.exact
    assert f.runs.tolist() == runs
    assert f.nbytes == sum(b - a for a, b in runs)
    assert f.runs.dtype == np.int64 and f.runs.shape == (len(runs), 2)
    assert not f.runs.flags.writeable
    dense = fp.dense_run(start, shape, stride, itemsize)
    assert dense == (tuple(runs[0]) if len(runs) == 1 else None)


@pytest.mark.parametrize(
    "shape,stride,contiguous",
    [
        ((4, 6), (6, 1), True),
        ((6, 4), (1, 6), False),
        ((2, 1), (1, 7), True),
        ((0, 3), (5, 9), True),
        ((), (), True),
        ((3,), (2,), False),
        ((1, 5), (1, 1), True),
        ((4, 3), (0, 1), False),
    ],
)
def test_is_row_major_matches_torch_rule(shape, stride, contiguous):
    assert fp.is_row_major(shape, stride) is contiguous


def test_geometry_is_in_elements_and_scales_to_bytes():
    g = fp.geometry((4, 3), (6, 2))
    assert (g.numel, g.reach, g.footprint, g.dense, g.exact, g.contiguous) == (12, 23, 12, False, True, False)
    assert g.shape == (4, 3) and g.stride == (6, 2)
    assert g.byte_runs(8, 2).tolist() == [[8 + 2 * e, 10 + 2 * e] for e in (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22)]
    d = fp.geometry((4, 6), (6, 1))
    assert (d.reach, d.footprint, d.dense, d.runs) == (24, 24, True, None)
    assert d.byte_runs(100, 4).tolist() == [[100, 196]]
    e = fp.geometry((0, 6), (6, 1))
    assert (e.numel, e.reach, e.footprint, e.dense) == (0, 0, 0, False)
    assert e.byte_runs(100, 4).tolist() == []
    assert "reach=23" in repr(g)


def test_geometry_accepts_size_like_tuples():
    class Size(tuple):
        pass

    g = fp.geometry(Size((2, 3)), [3, 1])
    assert type(g.shape) is tuple and g.shape == (2, 3) and g.stride == (3, 1)


@pytest.mark.parametrize(
    "shape,stride,message",
    [
        ((2, 3), (3,), "differ in length"),
        ((2, 3), (-3, 1), "negative size or stride"),
        ((-1,), (1,), "negative size or stride"),
    ],
)
def test_bad_metadata_is_refused_with_the_values(shape, stride, message):
    with pytest.raises(ValueError, match=message) as info:
        fp.footprint(0, shape, stride, 4)
    assert str(tuple(stride)) in str(info.value)


def test_column_slice_of_a_huge_matrix_is_exact_with_one_run_per_row():
    # x[:, 100:200] of a 50k x 4096 float32 matrix: 50k runs of 400 bytes, 16 KiB apart
    start = 100 * 4
    f = fp.footprint(start, (50_000, 100), (4096, 1), 4)
    assert f.exact and f.runs.shape == (50_000, 2)
    assert f.runs[0].tolist() == [400, 800] and f.runs[-1].tolist() == [49_999 * 16384 + 400, 49_999 * 16384 + 800]
    assert np.all(np.diff(f.runs[:, 0]) == 16384)
    assert f.nbytes == 50_000 * 400


def test_run_budget_is_documented_and_read_at_call_time(monkeypatch):
    assert fp.RUN_BUDGET == 1 << 24
    monkeypatch.setattr(fp, "RUN_BUDGET", 2)
    f = fp.footprint(0, (3, 2), (4, 1), 1)  # three blocks of two bytes
    assert not f.exact and f.runs.tolist() == [[0, 10]]
    g = fp.geometry((3, 2), (4, 1))
    assert not g.exact and g.footprint == g.reach == 10
    assert fp.footprint(0, (3, 2), (4, 1), 1, budget=3).exact


def test_as_runs_canonicalises_any_pairs():
    assert fp.as_runs([(5, 9), (0, 2), (2, 4), (8, 12), (20, 20), (15, 14)]).tolist() == [[0, 4], [5, 12]]
    assert fp.as_runs(np.array([[3, 4]])).tolist() == [[3, 4]]
    assert fp.as_runs([]).tolist() == []


def test_union_merges_abutting_and_nested_runs():
    a = fp.as_runs([(0, 4), (10, 20)])
    b = fp.as_runs([(4, 6), (12, 14), (30, 31)])
    assert fp.union(a, b).tolist() == [[0, 6], [10, 20], [30, 31]]
    assert fp.union(a).tolist() == a.tolist()
    assert fp.union(fp.EMPTY, fp.EMPTY).tolist() == []


@pytest.mark.parametrize(
    "a,b,inter",
    [
        ([(0, 10)], [(5, 15)], 5),
        ([(0, 10)], [(10, 15)], 0),
        ([(0, 2), (4, 6), (8, 10)], [(1, 9)], 4),
        ([(0, 2), (4, 6)], [(2, 4), (6, 8)], 0),
        ([(0, 100)], [(10, 20), (30, 40)], 20),
        ([], [(0, 5)], 0),
    ],
)
def test_intersection_nbytes_and_contains(a, b, inter):
    ra, rb = fp.as_runs(a), fp.as_runs(b)
    assert fp.intersection_nbytes(ra, rb) == fp.intersection_nbytes(rb, ra) == inter
    assert fp.contains(ra, rb) == (inter == fp.total(rb))


def test_coverage_gaps_and_clip():
    runs = fp.as_runs([(2, 5), (8, 12), (20, 40)])
    cov = fp.coverage(30, [runs, fp.as_runs([(4, 9)])])
    assert cov.covered.tolist() == [[2, 12], [20, 30]]
    assert (cov.nbytes, cov.covered_nbytes, cov.unreferenced_nbytes) == (30, 20, 10)
    assert cov.unreferenced().tolist() == [[0, 2], [12, 20]]
    assert fp.coverage(16, []).unreferenced().tolist() == [[0, 16]]
    assert fp.gaps(runs, 0, 0).tolist() == []
    assert fp.gaps(fp.EMPTY, 3, 7).tolist() == [[3, 7]]
    assert fp.clip(runs, 3, 9).tolist() == [[3, 5], [8, 9]]
    assert fp.clip(fp.EMPTY, 0, 9).tolist() == []


def test_components_orders_groups_by_first_member():
    order, bounds = components(np.array([4, 9, 4, 1, 9, 1, 7]))
    groups = [order[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    assert groups == [[0, 2], [1, 4], [3, 5], [6]]
    order, bounds = components(np.array([], dtype=np.int64))
    assert order.tolist() == [] and bounds.tolist() == [0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 12), max_size=40), st.booleans())
def test_components_matches_grouping_by_hand(values: list[int], presorted: bool) -> None:
    """Against a dict of members per label, groups in order of first member: random labels, and
    labels that already number groups by first member (the fast path, no reordering)."""
    labels = np.array(sorted(values) if presorted else values, dtype=np.int64)
    by_label: dict[int, list[int]] = {}
    for i, v in enumerate(labels.tolist()):
        by_label.setdefault(v, []).append(i)
    order, bounds = components(labels)
    assert [order[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])] == list(by_label.values())
    assert bounds[0] == 0 and bounds[-1] == labels.size


def test_ranked_matches_components_for_first_appearance_labels():
    labels = np.array([0, 1, 0, 2, 1, 3, 3, 0])
    order, bounds = ranked(labels)
    expected_order, expected_bounds = components(labels)
    assert order.tolist() == expected_order.tolist() == [0, 2, 7, 1, 4, 3, 5, 6]
    assert bounds.tolist() == expected_bounds.tolist() == [0, 3, 5, 6, 8]
    order, bounds = ranked(np.array([], dtype=np.int64))
    assert order.tolist() == [] and bounds.tolist() == [0]


def union_find_roots(size: int, a, b) -> list[int]:
    """Per node, the smallest node of its component (a plain union-find, the oracle)."""
    parent = list(range(size))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for x, y in zip(a, b):
        rx, ry = find(x), find(y)
        parent[max(rx, ry)] = min(rx, ry)
    return [find(x) for x in range(size)]


def test_min_roots_equals_union_find_on_random_graphs():
    rng = np.random.default_rng(7)
    for _ in range(500):
        size, edges = int(rng.integers(1, 30)), int(rng.integers(0, 40))
        a, b = rng.integers(0, size, edges), rng.integers(0, size, edges)
        assert min_roots(size, a, b).tolist() == union_find_roots(size, a.tolist(), b.tolist())


def test_min_roots_joins_a_long_path_in_any_label_order():
    perm = np.random.default_rng(3).permutation(3000)
    assert (min_roots(3000, perm[:-1], perm[1:]) == 0).all()
    assert min_roots(4, np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == [0, 1, 2, 3]


def test_byte_runs_many_equals_each_views_own_runs():
    geos = [fp.geometry((4, 3), (6, 2)), fp.geometry((2, 5), (5, 1)), fp.geometry((0,), (1,)), fp.geometry((3,), (0,))]
    gid = np.array([0, 1, 0, 3, 2, 1])
    start = np.array([0, 8, 100, 40, 7, 64])
    itemsize = np.array([4, 2, 1, 8, 4, 2])
    owner = np.array([10, 11, 12, 13, 14, 15])
    runs, who = fp.byte_runs_many(geos, gid, start, itemsize, owner)
    got = {int(o): runs[who == o].tolist() for o in owner}
    for g, s0, it, o in zip(gid, start, itemsize, owner):
        assert got[int(o)] == geos[g].byte_runs(int(s0), int(it)).tolist()
    assert got[14] == [] and got[13] == [[40, 48]]
    empty = fp.byte_runs_many(geos, *(np.zeros(0, dtype=np.int64),) * 4)
    assert empty[0].shape == (0, 2) and empty[1].tolist() == []


def test_cut_and_slices_equal_python_slicing():
    names = tuple(f"n{i}" for i in range(400))
    rng = np.random.default_rng(5)
    # Many pieces of sizes 1 and 2 (the zip path), a few odd sizes and empty pieces (sliced).
    sizes = np.concatenate([np.ones(40, int), np.full(30, 2), [0, 7, 3, 0, 12], np.full(20, 3)])
    rng.shuffle(sizes)
    bounds = np.r_[0, np.cumsum(sizes)]
    expected = [names[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    assert _table.slices(names, bounds) == expected
    assert all(type(piece) is tuple for piece in _table.slices(names, bounds))
    starts = rng.integers(0, 390, 60)
    stops = starts + rng.integers(0, 3, 60)
    assert _table.cut(names, starts, stops) == [names[a:b] for a, b in zip(starts, stops)]
    assert _table.slices(names, np.array([0])) == []
    index = rng.permutation(400)  # pieces read through an index, as names in group order are
    assert _table.slices(_table.objects(names), bounds, index) == [
        tuple(names[i] for i in index[a:b]) for a, b in zip(bounds[:-1], bounds[1:])
    ]
    assert _table.take(names, np.array([3, 0, 3])) == ["n3", "n0", "n3"]


def test_slices_sharing_reuses_the_shared_tuple_where_told():
    names = ("a", "b", "c", "d")
    whole = ("a", "b")
    out = _table.slices_sharing(names, np.array([0, 2, 3, 4]), [whole, None, None], np.array([True, False, False]))
    assert out == [("a", "b"), ("c",), ("d",)] and out[0] is whole


def test_table_columns_of_collector_and_file_rows():
    rows = [  # (name, token, device, storage nbytes, (dtype, itemsize), shape, stride, offset, start)
        ("a", 7, "cpu", 64, ("float32", 4), (2, 2), (2, 1), 0, None),
        ("b", ("file", "m.st"), "file", 500, ("int16", 2), (3,), (2,), 1, 130),
        ("c", 7, "cpu", 64, ("float32", 4), (2, 2), (1, 2), 4, None),
        ("d", 9, "meta", 8, ("uint8", 1), (0,), (1,), 3, None),
    ]
    t = _table.build(rows, {}, {("file", "m.st"): "m.st"}, [(("cpu", 1), "cpu", 16, "spare")])
    assert t.keys == [("cpu", 7), ("file", "m.st"), ("meta", 9), ("cpu", 1)]
    assert t.devices == ["cpu", "file", "meta", "cpu"] and t.labels == ["", "m.st", "", ""]
    assert t.nbytes.tolist() == [64, 500, 8, 16]
    assert t.sidx.tolist() == [0, 1, 0, 2]
    assert t.start.tolist() == [0, 130, 16, 3] and t.stop.tolist() == [16, 140, 32, 3]
    assert t.dense.tolist() == [True, False, True, False] and t.exact.tolist() == [True] * 4
    assert [t.geometry(i).stride for i in range(4)] == [(2, 1), (2,), (1, 2), (1,)]
