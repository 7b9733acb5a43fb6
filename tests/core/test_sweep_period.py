"""The overlap sweep in period space (issue 22) against a byte-mask oracle and the listing path.

Views whose footprints are rows of one period (column slices, slices starting and stopping at
different rows, runs that wrap into the next row, 3-D slices, strided rows, views of other
dtypes) are swept by :func:`tensorviz.core.sweep._by_period`. Every overlap group, every
storage's covered bytes, every tree node (the brute-force reference of ``test_tree_reference``)
must equal the oracle -- numpy byte masks from each view's index grid -- and the listing path's
labels and coverage, with the thresholds forced so that every path runs: period space for every
storage, the listing fallback, towers next to rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.core import sweep as sw
from tests.core import test_oracle
from tests.core.test_oracle import SETTINGS, view_sets
from tests.core.test_tree_reference import assert_same_tree

DTYPES = [torch.uint8, torch.float16, torch.float32, torch.float64]


# -- forcing the paths --------------------------------------------------------------------------
class Spy:
    """Counts the storages swept in period space and those sent back to listing."""

    def __init__(self) -> None:
        self.swept = self.listed = self.axes = 0


@contextmanager
def paths(min_runs: int = 0, explicit: int | None = None) -> Iterator[Spy]:
    """Period space from ``min_runs`` runs (``1 << 62``: never, the listing path); towers from
    ``explicit`` runs. Restores both, and counts what period space did."""
    old_min, old_explicit, old_sweep, old_axis = sw.PERIOD_MIN_RUNS, fp.EXPLICIT_BUDGET, sw._row_sweep, sw.row_axis
    spy = Spy()

    def counted(*args):
        out = old_sweep(*args)
        spy.swept += out is not None
        spy.listed += out is None
        return out

    def axis(*args):
        out = old_axis(*args)
        spy.axes += out is not None
        return out

    sw.PERIOD_MIN_RUNS, sw._row_sweep, sw.row_axis = min_runs, counted, axis
    if explicit is not None:
        fp.EXPLICIT_BUDGET = explicit
    try:
        yield spy
    finally:
        sw.PERIOD_MIN_RUNS, fp.EXPLICIT_BUDGET, sw._row_sweep, sw.row_axis = old_min, old_explicit, old_sweep, old_axis


def listing():  # noqa: ANN201 (a context manager)
    return paths(min_runs=1 << 62)


# -- the oracle ---------------------------------------------------------------------------------
def byte_mask(t: torch.Tensor, nbytes: int) -> np.ndarray:
    """The bytes a view reads, from its index grid (every index enumerated)."""
    size = t.element_size()
    grid = np.full((1,) * t.dim(), t.storage_offset(), dtype=np.int64)
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        grid = grid + (np.arange(n, dtype=np.int64) * s).reshape([-1 if k == d else 1 for k in range(t.dim())])
    addrs = (grid.reshape(-1, 1) * size + np.arange(size)).ravel()
    mask = np.zeros(nbytes, dtype=bool)
    mask[addrs] = True
    return mask


def oracle(views: dict[str, torch.Tensor], nbytes: int) -> tuple[list[tuple[str, ...]], int]:
    """Overlap groups (``test_oracle``'s all-pairs union-find over the masks' byte sets) and
    covered bytes."""
    masks = [byte_mask(t, nbytes) for t in views.values()]
    facts = [{"name": n, "storage": 0, "bytes": set(np.flatnonzero(m).tolist())} for n, m in zip(views, masks)]
    covered = np.logical_or.reduce(masks) if masks else np.zeros(nbytes, dtype=bool)
    return test_oracle.oracle_groups(facts, "overlap"), int(covered.sum())


# -- random row views -----------------------------------------------------------------------------
@st.composite
def row_views(draw):
    """Up to 8 views of one storage ``rows`` rows of ``period`` bytes: column slices starting
    and stopping at different rows, rows that wrap into the next one, strided rows and columns,
    3-D slices, another period, whole rows; each in its own dtype."""
    period = 8 * draw(st.integers(1, 6))  # bytes: every itemsize divides it
    rows = draw(st.integers(2, 12))
    nbytes = period * rows
    storage = torch.empty(nbytes, dtype=torch.uint8).untyped_storage()
    views: dict[str, torch.Tensor] = {}
    for k in range(draw(st.integers(1, 8))):
        dtype = draw(st.sampled_from(DTYPES))
        size = torch.empty(0, dtype=dtype).element_size()
        p, n = period // size, nbytes // size  # the period and the storage in elements
        kind = draw(st.sampled_from(["column", "wrap", "strided", "3d", "other", "whole"]))
        if kind == "column":
            r0, r1 = sorted(draw(st.lists(st.integers(0, rows), min_size=2, max_size=2, unique=True)))
            c0, c1 = sorted(draw(st.lists(st.integers(0, p), min_size=2, max_size=2, unique=True)))
            shape, stride, offset = (r1 - r0, c1 - c0), (p, 1), r0 * p + c0
        elif kind == "wrap":  # rows of width <= p at any offset: a row may run into the next
            h, width = draw(st.integers(1, rows - 1)), draw(st.integers(1, p))
            shape, stride = (h, width), (p, 1)
            offset = draw(st.integers(0, n - (h - 1) * p - width))
        elif kind == "strided":
            step, cstep = draw(st.integers(1, 3)), draw(st.integers(1, 3))
            h = draw(st.integers(1, max(1, (rows - 1) // step + 1)))
            width = draw(st.integers(1, max(1, (p - 1) // cstep + 1)))
            shape, stride = (h, width), (p * step, cstep)
            offset = draw(st.integers(0, n - ((h - 1) * p * step + (width - 1) * cstep + 1)))
        elif kind == "3d":  # blocks of rows, a gap of g rows between blocks
            g, h = draw(st.integers(0, 2)), draw(st.integers(1, max(1, rows // 2)))
            e = max(1, min(3, (rows + g) // (h + g)))
            width = draw(st.integers(1, p))
            shape, stride = (e, h, width), ((h + g) * p, p, 1)
            offset = draw(st.integers(0, n - ((e - 1) * (h + g) * p + (h - 1) * p + width)))
        elif kind == "other":  # rows of another period
            q = draw(st.integers(1, 2 * p))
            h = draw(st.integers(1, max(1, (n - 1) // q)))
            width = draw(st.integers(1, q))
            shape, stride = (h, width), (q, 1)
            offset = draw(st.integers(0, max(0, n - ((h - 1) * q + width))))
        else:
            r0, r1 = sorted(draw(st.lists(st.integers(0, rows), min_size=2, max_size=2, unique=True)))
            shape, stride, offset = (r1 - r0, p), (p, 1), r0 * p
        views[f"v{k}"] = torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
    return nbytes, views


def assert_like_the_oracle(views: dict[str, torch.Tensor], nbytes: int) -> tv.Layout:
    layout = tv.analyze(views)
    groups, covered = oracle(views, nbytes)
    assert [g.names for g in layout.groups("overlap")] == groups
    assert layout.storages[0].covered_nbytes == covered
    assert layout.storages[0].unreferenced_nbytes == nbytes - covered
    return layout


def assert_like_listing(views: dict[str, torch.Tensor], got: tv.Layout) -> None:
    with listing():
        want = tv.analyze(views)._sweep()
    have = got._sweep()
    assert have.overlap.tolist() == want.overlap.tolist()
    assert have.covered.tolist() == want.covered.tolist()
    inexact = [None if w.inexact is None else w.inexact.tolist() for w in (have, want)]
    assert inexact[0] == inexact[1]


# -- the properties --------------------------------------------------------------------------------
@SETTINGS
@given(row_views())
def test_period_space_equals_the_oracle_and_the_listing_path(case):
    nbytes, views = case
    with paths() as spy:
        layout = assert_like_the_oracle(views, nbytes)
        assert_like_listing(views, layout)
    rowed = [t for t in views.values() if fp.geometry(t.shape, t.stride()).row_form() is not None]
    if rowed and len(set(layout.groups("span"))) < len(views):  # a row view in a cluster with another
        assert spy.swept + spy.listed >= 1


@SETTINGS
@given(view_sets())
def test_random_views_of_two_storages_in_period_space(case):
    """``test_oracle``'s random views (any strides, offsets, dtype views, one or two storages)
    with every storage holding a row view swept in period space."""
    with paths():
        test_oracle.test_engine_equals_the_oracle.hypothesis.inner_test(case)
        test_oracle.test_coverage_equals_the_oracle.hypothesis.inner_test(case)
        layout = tv.analyze(case[1])
        assert_like_listing(case[1], layout)


@SETTINGS
@given(row_views())
def test_period_space_tree_equals_the_reference(case):
    _, views = case
    with paths():
        assert_same_tree(tv.analyze(views))


@SETTINGS
@given(row_views(), st.integers(2, 6))
def test_towers_beside_rows_and_the_listing_fallback(case, explicit):
    nbytes, views = case
    with paths(explicit=explicit):  # views past a few runs are towers: their storage is listed
        assert_like_listing(views, assert_like_the_oracle(views, nbytes))
    old = sw._row_sweep
    try:  # every period sweep over its budget: listed as before
        sw._row_sweep = lambda *args: old(*args[:-1], -1)
        with paths() as spy:
            assert_like_listing(views, assert_like_the_oracle(views, nbytes))
        assert spy.swept == 0
    finally:
        sw._row_sweep = old


# -- exact values --------------------------------------------------------------------------------
def test_a_run_wrapping_the_period_is_split_into_two_rows():
    # view: 3 rows of bytes [7, 12) at period 10 -> [7, 10) on rows 0-2 and [0, 2) on rows 1-3
    owner, k0, k1, a, b = sw.row_parts(np.array([5]), np.array([7]), np.array([3]), np.array([[0, 5]]), 10)
    assert [owner.tolist(), k0.tolist(), k1.tolist(), a.tolist(), b.tolist()] == [
        [5, 5],
        [0, 1],
        [3, 4],
        [7, 0],
        [10, 2],
    ]
    # listed runs: within a row, across three rows (head, whole middle row, tail)
    owner, k0, k1, a, b = sw.run_parts(np.array([[3, 6], [8, 34]]), np.array([1, 2]), 10)
    got = sorted(zip(owner.tolist(), k0.tolist(), k1.tolist(), a.tolist(), b.tolist()))
    assert got == [(1, 0, 1, 3, 6), (2, 0, 1, 8, 10), (2, 1, 3, 0, 10), (2, 3, 4, 0, 4)]


def test_stretches_count_rows_and_clip_at_the_storage_end():
    # view 0 on rows 0-4 reads [0, 4); view 1 on rows 2-6 reads [2, 6); the storage ends 3
    # bytes into row 5: rows 0-1 hold 4 bytes, rows 2-3 6, row 4 only view 1's 4, row 5 its 1
    la, lb, cov = sw._row_sweep(
        10, 53, np.array([0, 1]), np.array([0, 2]), np.array([4, 6]), np.array([0, 2]), np.array([4, 6]), 100
    )
    assert (la.tolist(), lb.tolist(), cov) == ([0], [1], 2 * 4 + 2 * 6 + 4 + 1)
    # the same views on rows that never meet: no link
    la, lb, cov = sw._row_sweep(
        10, 100, np.array([0, 1]), np.array([0, 4]), np.array([4, 6]), np.array([0, 2]), np.array([4, 6]), 100
    )
    assert (la.tolist(), lb.tolist(), cov) == ([], [], 4 * 4 + 2 * 4)
    assert sw._row_sweep(10, 100, np.array([0]), np.array([0]), np.array([4]), np.array([0]), np.array([4]), 0) is None


def test_row_forms_of_column_slices_3d_slices_and_interleaving_rows():
    assert [x.tolist() if isinstance(x, np.ndarray) else x for x in fp.geometry((5, 3), (8, 1)).row_form()] == [
        [[0, 3]],
        8,
        5,
    ]
    base, period, count = fp.geometry((2, 3, 2), (30, 8, 1)).row_form()  # blocks of 3 rows, 6 rows apart
    assert (base.tolist(), period, count) == ([[0, 2], [8, 10], [16, 18]], 30, 2)
    base, period, count = fp.geometry((4, 3), (2, 1)).row_form() or (None, 0, 0)  # rows overlap: dense
    assert base is None
    base, period, count = fp.geometry((4, 2), (3, 2)).row_form()  # {0, 2} reaches 3: rows just abut
    assert (base.tolist(), period, count) == ([[0, 1], [2, 3]], 3, 4)
    assert fp.geometry((4, 2), (3, 4)).row_form() is None  # {0, 4} reaches past the next row's start


@pytest.mark.parametrize("by", ["row", "column"])
def test_sixty_four_slices_of_a_50k_by_4096_weight_exactly(by):
    w = torch.empty(50_000, 4096, device="meta")
    if by == "row":
        views = {f"w.{k}": w[k * 781 : (k + 1) * 781] for k in range(64)}
    else:
        views = {f"w.{k}": w[:, k * 64 : (k + 1) * 64] for k in range(64)}
    with paths(min_runs=sw.PERIOD_MIN_RUNS) as spy:
        layout = tv.analyze(views)
        tree = layout.tree()
    assert spy.swept == (by == "column")
    each = 781 * 4096 * 4 if by == "row" else 50_000 * 64 * 4
    assert [g.names for g in layout.groups("overlap")] == [(name,) for name in views]
    assert layout.storages[0].covered_nbytes == 64 * each
    assert tree.root.nbytes == tree.find("w").nbytes == 64 * each
    assert [(n.path, n.nbytes, n.shared_nbytes) for n in tree.find("w").children] == [
        (f"w.{k}", each, 0) for k in range(64)
    ]


def test_column_slices_at_different_rows_wrapping_and_overlapping_exactly():
    """Full size, exact bytes: slice ``k`` reads rows ``[300k, 50000 - 400k)`` of columns
    ``[64k, 64k + 96)`` (32 columns shared with the next slice); a flat view reads 64 floats
    at byte 4000 + 256k of each row, wrapping into the next; the column ranges' union is
    counted by hand."""
    w = torch.empty(50_000, 4096, device="meta")
    views = {f"w.{k}": w[k * 300 : 50_000 - k * 400, k * 64 : k * 64 + 96] for k in range(64)}
    with paths(min_runs=sw.PERIOD_MIN_RUNS) as spy:
        layout = tv.analyze(views)
        assert [g.names for g in layout.groups("overlap")] == [tuple(views)]
        assert spy.swept == 1
        covered = 0
        for c in range(4096):  # each column: the union of the row ranges of the slices reading it
            rows = np.zeros(50_000, dtype=bool)
            for k in range(64):
                if k * 64 <= c < k * 64 + 96:
                    rows[k * 300 : 50_000 - k * 400] = True
            covered += int(rows.sum()) * 4
        assert layout.storages[0].covered_nbytes == covered
    flat = w.view(-1)
    wraps = {f"f.{k}": flat[1000 + 64 * k :].as_strided((49_999, 64), (4096, 1)) for k in range(64)}
    with paths(min_runs=sw.PERIOD_MIN_RUNS) as spy:
        layout = tv.analyze(wraps)
        # slice k reads floats [1000 + 64k, 1064 + 64k) of each row: the last 16 slices wrap
        assert [g.names for g in layout.groups("overlap")] == [(name,) for name in wraps]
        assert layout.storages[0].covered_nbytes == 64 * 49_999 * 64 * 4
        assert spy.swept == 1


# -- the tree's attribution in period space ---------------------------------------------------------
def test_groups_in_period_space_past_64_names_equal_the_reference():
    w = torch.empty(300, 256, device="meta")
    cases = [
        {"w": w} | {f"s.{k}": w[:, k * 4 : (k + 1) * 4] for k in range(64)},  # 65 names, one dense
        {"w.all": w} | {f"w.cols.{i}": w[:, i * 3 : i * 3 + 5] for i in range(70)},  # chained overlaps
        {f"c.{k}": w[k * 3 : 300 - k, k * 3 : k * 3 + 7] for k in range(70)},  # rows start and stop apart
        {f"f.{k}": w.view(-1)[100 + 4 * k :].as_strided((200, 6), (256, 1)) for k in range(70)},  # wrapping
    ]
    for views in cases:
        with paths() as spy:
            assert_same_tree(tv.analyze(views))
        assert spy.axes >= 1
    with paths() as spy:  # the painted groups (at most 64 names) too
        assert_same_tree(tv.analyze({f"c.{k}": w[k * 3 : 300 - k, k * 3 : k * 3 + 7] for k in range(40)}))
    assert spy.axes >= 1


@pytest.mark.parametrize("by", ["row", "column"])
def test_a_weight_with_its_64_slices_exactly(by):
    """50k x 4,096 float32 and 64 slices of it, full size: the weight owns every byte, each
    slice none (counted in the weight, "within"), the slices' prefix shares all it reads."""
    w = torch.empty(50_000, 4096, device="meta")
    cut = (lambda k: w[k * 781 : (k + 1) * 781]) if by == "row" else (lambda k: w[:, k * 64 : (k + 1) * 64])
    views = {"w": w} | {f"s.{k}": cut(k) for k in range(64)}
    with paths(min_runs=sw.PERIOD_MIN_RUNS) as spy:
        tree = tv.analyze(views).tree()
    assert spy.axes == (by == "column")
    each = 781 * 4096 * 4 if by == "row" else 50_000 * 64 * 4
    assert (tree.root.nbytes, tree.find("w").nbytes, tree.find("s").nbytes) == (819_200_000, 819_200_000, 0)
    assert tree.find("s").shared_nbytes == 64 * each
    assert [(n.nbytes, n.shared_nbytes, n.counted_in) for n in tree.find("s").children] == [
        (0, each, ("within", "w"))
    ] * 64
    assert tree.find("s.5").partners == ("w",)  # the slices share no byte with one another
    assert tree.find("w").partners == tuple(f"s.{k}" for k in range(64))


def test_overlapping_column_slices_at_different_rows_own_exactly():
    """Slice ``k`` reads rows ``[300k, 50000 - 400k)`` of columns ``[64k, 64k + 96)``: first reader
    wins, so slice ``k`` owns its rows of its last 64 columns, and of its first 32 the rows
    slice ``k - 1`` does not read (worked out row range by row range)."""
    w = torch.empty(50_000, 4096, device="meta")
    views = {f"w.{k}": w[k * 300 : 50_000 - k * 400, k * 64 : k * 64 + 96] for k in range(64)}
    with paths(min_runs=sw.PERIOD_MIN_RUNS) as spy:
        tree = tv.analyze(views).tree()
    assert spy.axes == 1
    want = []
    for k in range(64):
        rows = 50_000 - 700 * k
        cols = min(96, 4096 - 64 * k)
        earlier = 0 if k == 0 else min(rows, 50_000 - 700 * (k - 1) - 300)  # rows of k inside k - 1's
        want.append(4 * (rows * cols - earlier * min(32, cols)))
    assert [n.nbytes for n in (tree.find(f"w.{k}") for k in range(64))] == want
    assert tree.root.nbytes == sum(want)


def test_row_runs_list_row_after_row_merging_across_row_ends():
    # stretch rows 0-2: [6, 10) and [0, 2) -> each row's tail abuts the next row's head
    s = sw.RowRuns(np.array([0, 6]), np.array([2, 10]), np.array([0, 0]), np.array([3, 3]), 10)
    assert s.listed().tolist() == [[0, 2], [6, 12], [16, 22], [26, 30]]
    assert s.below(np.array([0, 7, 30, 99])).tolist() == [0, 3, 18, 18]
    # row ranges that interleave (not made by the sweep): still canonical
    s = sw.RowRuns(np.array([0, 5]), np.array([3, 8]), np.array([0, 1]), np.array([3, 2]), 10)
    assert s.listed().tolist() == [[0, 3], [10, 13], [15, 18], [20, 23]]


@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.integers(0, 6), st.integers(0, 5)), max_size=12),
    st.integers(1, 64),
    st.lists(st.integers(-20, 700), max_size=40),
)
def test_row_runs_below_listed_equals_divided_and_the_byte_count(entries, period, xs):
    """``RowRuns.below`` from the runs listed row by row (prefix sums and a binary search) gives
    what the division per run gives, and what counting the bytes one by one gives (runs within
    a row: ``0 <= a < b <= period``)."""
    a = np.array([int(e[0] * (period - 1)) for e in entries], dtype=np.int64)
    b = a + 1 + np.array([int(e[1] * (period - 1 - int(e[0] * (period - 1)))) for e in entries], dtype=np.int64)
    r0 = np.array([e[2] for e in entries], dtype=np.int64)
    r1 = r0 + np.array([e[3] for e in entries], dtype=np.int64)
    s = sw.RowRuns(a, b, r0, r1, period)
    x = np.sort(np.array(xs, dtype=np.int64))
    rows = int((r1 - r0).sum())
    divided = s._below_divided(x, 1 << 22)
    listed = s._below_listed(x, rows)
    assert listed is not None and listed.tolist() == divided.tolist()
    count = [
        sum(
            max(0, min(int(v), int(lo) + r * period + int(hi - lo)) - (int(lo) + r * period))
            for lo, hi, q0, q1 in zip(a, b, r0, r1)
            for r in range(int(q0), int(q1))
        )
        for v in x
    ]
    assert divided.tolist() == count
    assert s.below(x).tolist() == count


def test_row_runs_below_of_a_tower_past_the_listing_budget_divides(monkeypatch):
    """Past :data:`~tensorviz.core.sweep.BELOW_LISTED` rows nothing is listed (a tower of millions of
    rows): the division answers, and the two agree under the budget."""
    s = sw.RowRuns(np.array([0, 6]), np.array([2, 10]), np.array([0, 0]), np.array([3, 3]), 10)
    x = np.array([0, 7, 30, 99])
    monkeypatch.setattr(sw.RowRuns, "_below_listed", lambda *args: pytest.fail("listed past the budget"))
    monkeypatch.setattr(sw, "BELOW_LISTED", 5)
    assert s.below(x).tolist() == [0, 3, 18, 18]
