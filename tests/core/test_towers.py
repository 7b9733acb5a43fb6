"""Footprints with several strided levels, kept as towers of towers, against index arithmetic.

The oracle is numpy: every element's address ``offset + sum(i_k * stride_k)`` over the whole
index grid, times the itemsize plus each byte of the element, made unique. The engine builds the
footprint with every budget forced low (each level its own storey, a handful of towers per
union, no listing shortcut), so the storeys, the interleaving levels (shifted copies and
period-wide slices), clipping and the common-period rewrite are what is measured.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorviz.core import footprint as fp
from tensorviz.core import periodic
from tensorviz.core import towers as tw

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def truth(offset: int, shape, stride, itemsize: int) -> np.ndarray:
    """Sorted unique byte addresses a view reads, by index arithmetic over the whole grid."""
    if 0 in shape:
        return np.zeros(0, dtype=np.int64)
    grid = np.full(1, offset, dtype=np.int64)
    for n, s in zip(shape, stride):
        grid = (grid[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    return np.unique((grid[:, None] * itemsize + np.arange(itemsize)).ravel())


def runs_of(addrs: np.ndarray) -> list[list[int]]:
    if addrs.size == 0:
        return []
    cut = np.flatnonzero(np.diff(addrs) > 1)
    return np.stack((addrs[np.r_[0, cut + 1]], addrs[np.r_[cut, addrs.size - 1]] + 1), axis=1).tolist()


@contextlib.contextmanager
def budgets(base: int, union: int, small: int, explicit: int = 1, listed: int = 64):
    """Lower the tower budgets for the duration (restored even when the body fails): every view
    of more than ``explicit`` runs a tower, ``base`` runs listed at its bottom, ``union`` towers
    per footprint, ``small`` runs listed outright where periods differ, ``listed`` runs where
    they meet in one row of their common period."""
    old = (tw.LIST_BUDGET, tw.UNION_BUDGET, periodic.SMALL_LIST, periodic.BASE_BUDGET, fp.EXPLICIT_BUDGET)
    tw.LIST_BUDGET, tw.UNION_BUDGET, periodic.SMALL_LIST, fp.EXPLICIT_BUDGET = base, union, small, explicit
    periodic.BASE_BUDGET = listed
    try:
        yield
    finally:
        tw.LIST_BUDGET, tw.UNION_BUDGET, periodic.SMALL_LIST, periodic.BASE_BUDGET, fp.EXPLICIT_BUDGET = old


views = st.tuples(
    st.integers(0, 30),  # offset in elements
    st.lists(st.integers(1, 7), min_size=1, max_size=4),  # shape
    st.lists(st.integers(0, 24), min_size=4, max_size=4),  # strides (cut to the shape's length)
)
knobs = st.tuples(st.sampled_from([1, 2, 8, 1 << 20]), st.sampled_from([1, 2, 4, 64]), st.sampled_from([0, 1 << 12]))


def _piece(view, itemsize: int):
    """(the engine's footprint piece or None when it has no tower form, the oracle's bytes)."""
    offset, shape, stride = view
    stride = stride[: len(shape)]
    form = tw.tower_form(shape, stride, explicit=0)
    oracle = truth(offset, shape, stride, itemsize)
    if form is False:
        return None, oracle
    assert isinstance(form, list)
    placed = [tw.shifted(tw.scaled(p, itemsize), offset * itemsize) for p in form]
    return placed[0] if len(placed) == 1 else periodic.Union(placed), oracle


@SETTINGS
@given(views, st.sampled_from([1, 2, 4, 8]), knobs, st.lists(st.integers(-5, 700), max_size=8))
def test_a_tower_form_reads_exactly_the_bytes_of_the_index_grid(view, itemsize, knob, xs):
    with budgets(*knob):
        p, oracle = _piece(view, itemsize)
        if p is None:  # no form within the union budget: the geometry lists it instead (exact)
            offset, shape, stride = view
            geo = fp.geometry(shape, stride[: len(shape)])
            assert geo.exact and geo.footprint * itemsize == oracle.size
            return
        if isinstance(p, periodic.Union) and not p.exact:  # only a bound, and flagged
            assert p.nbytes >= oracle.size
            return
        assert periodic.piece_nbytes(p) == oracle.size
        assert periodic.span_of(p) == (int(oracle[0]), int(oracle[-1]) + 1)
        x = np.array(xs + [int(oracle[0]), int(oracle[-1])], dtype=np.int64)
        below = p.below(x) if isinstance(p, periodic.Union) else tw.below(p, x)
        assert below.tolist() == np.searchsorted(oracle, x).tolist()
        if not isinstance(p, periodic.Union):
            assert tw.listed(p).tolist() == runs_of(oracle)
            lo, hi = sorted(xs[:2]) if len(xs) > 1 else (0, 10)
            parts = tw.clipped(p, lo, hi)
            inside = oracle[(oracle >= lo) & (oracle < hi)]
            assert fp.union(*map(tw.listed, parts)).tolist() == runs_of(inside) if parts else inside.size == 0


@SETTINGS
@given(views, views, st.sampled_from([1, 2, 4]), knobs, st.integers(0, 40))
def test_two_tower_forms_meet_and_join_exactly(va, vb, itemsize, knob, shift):
    with budgets(*knob):
        a, ta = _piece(va, itemsize)
        b, tb = _piece(vb, itemsize)
        if a is None or b is None:
            return
        b = (
            periodic.Union([tw.shifted(q, shift) for q in b.pieces])
            if isinstance(b, periodic.Union)
            else tw.shifted(b, shift)
        )
        tb = tb + shift
        inter, exact = periodic.intersection_nbytes(a, b)
        u = periodic.Union([a, b])
        common, both = np.intersect1d(ta, tb).size, np.union1d(ta, tb).size
        if exact:
            assert inter == common
        else:  # a bound, and said so
            assert inter >= common and not u.exact
        assert u.nbytes == both if u.exact else u.nbytes >= both


# -- which form a level takes: the three ways, and the limit ---------------------------------
def test_nested_levels_are_storeys_of_one_tower():
    (t,) = tw.tower_form((8, 1 << 22), (1 << 24, 2), explicit=1 << 20)  # x[:, :2**23:2] of 8 x 2**24
    assert (t.period, t.count) == (1 << 24, 8)
    assert isinstance(t.base, tw.Tower) and (t.base.base.tolist(), t.base.period, t.base.count) == (
        [[0, 1]],
        2,
        1 << 22,
    )
    assert t.nbytes == 8 << 22 and t.stop == 7 * (1 << 24) + (1 << 23) - 1


def test_an_interleaving_level_with_few_copies_is_shifted_copies():
    form = tw.tower_form((2, 1 << 24), (3, 2), explicit=1 << 20)  # {2a} and {3 + 2a}
    assert [(t.start, t.period, t.count) for t in form] == [(0, 2, 1 << 24), (3, 2, 1 << 24)]
    assert periodic.Union(form).nbytes == 1 << 25


def test_an_interleaving_level_with_many_copies_is_cut_into_period_wide_slices():
    # windows of 4 elements 3 apart, starting every 6: x[::3].unfold(0, 4, 2) of a long buffer
    form = tw.tower_form((1 << 21, 4), (6, 3), explicit=1 << 20)
    assert [(t.start, t.base.tolist(), t.period) for t in form] == [(0, [[0, 1], [3, 4]], 6), (6, [[0, 1], [3, 4]], 6)]
    assert periodic.Union(form).nbytes == len(range(0, 6 * ((1 << 21) - 1) + 10, 3))


def test_a_level_with_many_copies_and_many_slices_is_summed_by_doubling():
    (runs,) = tw.tower_form((1 << 12, 1 << 12), (2, 3), explicit=1 << 20)  # {2a + 3b}: all but 1 and 2 tops
    top = 2 * 4095 + 3 * 4095
    assert runs.tolist() == [[0, 1], [2, top - 1], [top, top + 1]]


def test_a_level_past_every_budget_has_no_form(monkeypatch):
    monkeypatch.setattr(tw, "BASE_BUDGET", 4)  # the progression {2a} is 4096 runs: too many to sum
    monkeypatch.setattr(tw, "UNION_BUDGET", 2)  # 4096 copies, 2731 slices
    assert tw.tower_form((1 << 12, 1 << 12), (2, 3), explicit=1 << 10) is False


@pytest.mark.parametrize("n", [5, 64])
def test_clipping_keeps_whole_copies_as_one_tower(n):
    t = tw.Tower(100, tw.Tower(1, np.array([[0, 2]]), 4, 3), 20, n)
    parts = tw.clipped(t, 123, 100 + 20 * (n - 1))
    whole = [q for q in parts if isinstance(q, tw.Tower) and q.period == 20]
    assert len(whole) == 1 and (whole[0].start, whole[0].count) == (140, n - 3)
