"""Footprints kept as towers (too many runs to list) are measured exactly.

Two oracles: the brute-force byte sets of ``test_oracle`` on small views forced into towers
(``EXPLICIT_BUDGET`` patched to 1, so every view of more than one run is a tower), and, past the
old run budget, arithmetic written out by hand for buffers of 32 MiB (the even and odd bytes,
an odd length, an expanded copy, column steps of a matrix).
"""

from __future__ import annotations

import itertools
import resource
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.core import periodic
from tests.core.test_oracle import SETTINGS, facts_of, oracle_groups, oracle_relation, runs_of, storage_index, view_sets
from tests.core.test_towers import budgets

MiB = 1 << 20


@pytest.fixture
def towers(monkeypatch):
    """Every view needing more than one run becomes a tower."""
    monkeypatch.setattr(fp, "EXPLICIT_BUDGET", 1)


def _analyze_towers(views):
    old = fp.EXPLICIT_BUDGET
    fp.EXPLICIT_BUDGET = 1
    try:
        return tv.analyze(views)
    finally:
        fp.EXPLICIT_BUDGET = old


# -- small views forced into towers, against the brute-force oracle ---------------------------
@SETTINGS
@given(view_sets(), st.randoms(use_true_random=False))
def test_towers_equal_the_oracle(case, rnd):
    _equal_the_oracle(case, rnd, _analyze_towers(case[1]))


@SETTINGS
@given(view_sets(), st.randoms(use_true_random=False))
def test_towers_of_towers_equal_the_oracle(case, rnd):
    """Every level its own storey, a level whose copies interleave shifted or sliced into at most
    four towers, towers of different periods always rewritten to their common period."""
    with budgets(base=1, union=4, small=0, listed=1 << 20):
        layout = tv.analyze(case[1])
        _equal_the_oracle(case, rnd, layout)


def _equal_the_oracle(case, rnd, layout):
    storages, views = case
    facts = [facts_of(n, t, storage_index(t, storages)) for n, t in views.items()]
    for f in facts:
        v = layout[f["name"]]
        assert v.exact and v.footprint_nbytes == len(f["bytes"])
        assert layout.footprint_runs(f["name"]).tolist() == runs_of(f["bytes"])
    for a, b in itertools.product(facts, repeat=2):
        assert layout.relation(a["name"], b["name"]) == oracle_relation(a, b), (a["name"], b["name"])
        same = a["storage"] == b["storage"]
        assert layout.overlap_nbytes(a["name"], b["name"]) == (len(a["bytes"] & b["bytes"]) if same else 0)
    assert [g.names for g in layout.groups("overlap")] == oracle_groups(facts, "overlap")
    for st_rec in layout.storages:
        members = [f for f in facts if f["name"] in st_rec.names]
        covered = set().union(*(f["bytes"] for f in members))
        assert (st_rec.covered_nbytes, st_rec.exact) == (len(covered & set(range(st_rec.nbytes))), True)
    some = [f for f in facts if rnd.random() < 0.6]
    per_storage: dict[int, set] = {}
    for f in some:
        per_storage.setdefault(f["storage"], set()).update(f["bytes"])
    assert layout.union_nbytes([f["name"] for f in some]) == sum(map(len, per_storage.values()))


# -- the Union of towers alone, against Python sets -------------------------------------------
tower_specs = st.tuples(
    st.integers(0, 40),  # start
    st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3)), min_size=1, max_size=3),  # base runs (gap, len)
    st.integers(0, 6),  # period beyond the base's reach
    st.integers(1, 6),  # copies
)


def _tower(spec) -> periodic.Tower:
    start, parts, extra, count = spec
    at, runs = 0, []
    for gap, length in parts:
        runs.append((at + gap, at + gap + length))
        at += gap + length
    base = fp.as_runs(runs)
    return periodic.Tower(start, base, int(base[-1, 1]) + extra, count)


def _set(p) -> set[int]:
    runs = p.runs() if isinstance(p, periodic.Tower) else p
    return {x for a, b in runs.tolist() for x in range(a, b)}


@settings(max_examples=150, deadline=None)
@given(st.lists(tower_specs, min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 80), st.integers(0, 9))))
def test_union_of_towers_and_runs_equals_set_algebra(specs, pairs):
    pieces = [_tower(s) for s in specs] + [fp.as_runs([(a, a + n) for a, n in pairs])]
    truth = set().union(*map(_set, pieces))
    u = periodic.Union(pieces)
    assert u.exact and u.nbytes == len(truth)
    xs = np.arange(-3, 130)
    assert u.below(xs).tolist() == [sum(1 for y in truth if y < x) for x in xs.tolist()]
    a, b = pieces[0], pieces[-1] if len(pieces) > 1 else pieces[0]
    assert periodic.intersection_nbytes(a, b) == (len(_set(a) & _set(b)), True)


def test_towers_of_coprime_periods_are_rewritten_exactly_without_listing(monkeypatch):
    monkeypatch.setattr(periodic, "SMALL_LIST", 0)  # no shortcut: the lcm rewrite itself
    monkeypatch.setattr(periodic, "BASE_BUDGET", 32)  # 200 runs in all: only one row of 77 is listed
    a = periodic.Tower(0, np.array([[0, 1]]), 7, 100)
    b = periodic.Tower(3, np.array([[0, 2]]), 11, 100)
    u = periodic.Union([a, b])
    truth = _set(a) | _set(b)
    assert u.exact and u.nbytes == len(truth)
    assert periodic.intersection_nbytes(a, b) == (len(_set(a) & _set(b)), True)


def test_towers_whose_common_period_is_longer_than_they_are_a_flagged_bound(monkeypatch):
    monkeypatch.setattr(periodic, "SMALL_LIST", 0)
    monkeypatch.setattr(periodic, "BASE_BUDGET", 4)  # listing them is over budget too
    a = periodic.Tower(0, np.array([[0, 1]]), 7, 5)
    b = periodic.Tower(0, np.array([[0, 1]]), 11, 5)  # lcm 77 > both spans: nothing repeats
    u = periodic.Union([a, b])
    assert not u.exact and u.nbytes == b.stop  # the union of the spans: an upper bound, said so
    assert periodic.intersection_nbytes(a, b) == (5, False)


# -- past the old run budget: 32 MiB buffers, against arithmetic --------------------------------
def test_even_and_odd_bytes_of_32_mib_are_exact_without_listing_runs():
    n = 32 * MiB
    x = torch.zeros(n, dtype=torch.uint8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    layout = tv.analyze({"even": x[::2], "odd": x[1::2]})
    even, odd = layout["even"], layout["odd"]
    assert (even.exact, even.footprint_nbytes, odd.footprint_nbytes) == (True, n // 2, n // 2)
    assert layout.relation("even", "odd") == "disjoint" and layout.overlap_nbytes("even", "odd") == 0
    assert [g.names for g in layout.groups("overlap")] == [("even",), ("odd",)]
    (s,) = layout.storages
    assert (s.covered_nbytes, s.unreferenced_nbytes, s.exact) == (n, 0, True)
    assert layout.union_nbytes(["even", "odd"]) == n
    assert isinstance(layout.footprint_piece("even"), periodic.Tower)
    assert time.perf_counter() - t0 < 5
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 200 * MiB


def test_odd_length_buffer_leaves_exactly_one_byte_unread():
    n = 32 * MiB + 3  # even reads 0, 2, ..., n - 1; odd reads 1, 3, ..., n - 4: byte n - 2 is read by none
    x = torch.zeros(n, dtype=torch.uint8)
    layout = tv.analyze({"even": x[::2], "odd": x[1:-2:2], "head": x[:5]})
    (s,) = layout.storages
    assert (s.covered_nbytes, s.unreferenced_nbytes) == (n - 1, 1)
    assert layout["even"].footprint_nbytes == (n + 1) // 2 and layout["odd"].footprint_nbytes == (n - 3) // 2
    assert layout.relation("head", "even") == "overlaps" and layout.overlap_nbytes("head", "even") == 3
    assert [g.names for g in layout.groups("overlap")] == [("even", "odd", "head")]


def test_expanded_copy_and_column_steps_of_a_matrix():
    rows, cols = 4096, 8192  # x[:, ::2] of a 4096 x 8192 int16 matrix: 16 Mi one-element runs
    x = torch.zeros(rows, cols, dtype=torch.int16)
    ev = x[:, ::2]
    layout = tv.analyze({"even": ev, "odd": x[:, 1::2], "again": ev.t(), "wide": ev.unsqueeze(0).expand(3, -1, -1)})
    assert layout["even"].footprint_nbytes == rows * cols  # half the elements, 2 bytes each
    assert layout.relation("even", "again") == "same-bytes" and layout.relation("wide", "even") == "same-bytes"
    assert layout.relation("even", "odd") == "disjoint"
    assert layout["wide"].nbytes == 3 * rows * cols and layout["wide"].is_expanded
    assert layout.storages[0].covered_nbytes == 2 * rows * cols
    col = x[:, 10]  # 4096 runs: listed, and met by the tower of the odd columns? no: column 10 is even
    layout = tv.analyze({"odd": x[:, 1::2], "col10": col, "col11": x[:, 11]})
    assert layout.overlap_nbytes("odd", "col10") == 0 and layout.overlap_nbytes("odd", "col11") == rows * 2
    assert layout.relation("col11", "odd") == "within"
    assert [g.names for g in layout.groups("overlap")] == [("odd", "col11"), ("col10",)]


# -- two strided levels and interleaving levels past the old budget: against arithmetic --------
def test_two_strided_levels_of_a_matrix_are_a_tower_of_towers_measured_exactly():
    rows, n = 8, 1 << 24  # the even and odd elements of the first half of each row: 2**25 runs each
    x = torch.zeros(rows, n, dtype=torch.uint8)
    views = {"a": x[:, : n // 2 : 2], "b": x[:, 1 : n // 2 : 2], "c": x[:, ::4]}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    layout = tv.analyze(views)
    a = layout.footprint_piece("a")
    assert isinstance(a, periodic.Tower) and isinstance(a.base, periodic.Tower)  # rows of progressions
    assert (a.period, a.count, a.base.period, a.base.count) == (n, rows, 2, n // 4)
    assert [(layout[k].footprint_nbytes, layout[k].exact) for k in views] == [(rows * n // 4, True)] * 2 + [
        (rows * n // 4, True)
    ]
    assert layout.relation("a", "b") == "disjoint" and layout.union_nbytes(["a", "b"]) == rows * n // 2
    # c reads the multiples of 4 of every row; a the even elements of each row's first half
    assert layout.overlap_nbytes("a", "c") == rows * n // 8 and layout.relation("a", "c") == "overlaps"
    assert layout.overlap_nbytes("b", "c") == 0
    assert [g.names for g in layout.groups("overlap")] == [("a", "c"), ("b",)]
    (s,) = layout.storages
    covered = rows * (n // 2 + n // 8)  # the first half of each row whole, a quarter of the second
    assert (s.covered_nbytes, s.unreferenced_nbytes, s.exact) == (covered, rows * n - covered, True)
    assert layout.union_nbytes(["a", "b", "c"]) == covered
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 200 * MiB


def test_interleaving_levels_are_measured_exactly():
    n = 1 << 24
    y = torch.zeros(2 * n + 8, dtype=torch.uint8)
    pair = y.as_strided((2, n), (3, 2))  # {2i} and {3 + 2i}: the evens from 0, the odds from 3
    windows = y.as_strided((n // 4, 4), (6, 3))  # windows of 4 elements 3 apart, one every 6
    layout = tv.analyze({"pair": pair, "windows": windows, "head": y[:8]})
    assert (layout["pair"].footprint_nbytes, layout["pair"].exact) == (2 * n, True)
    assert layout["windows"].footprint_nbytes == len(range(0, 6 * (n // 4 - 1) + 10, 3))
    assert layout.overlap_nbytes("pair", "head") == 7  # all of 0..7 but byte 1
    # the multiples of 3 up to 1.5 n + 3: the even ones are pair's evens, the odd ones (from 3) its odds
    assert layout.relation("windows", "pair") == "within"
    assert layout.overlap_nbytes("windows", "pair") == layout["windows"].footprint_nbytes
    assert layout.relation("windows", "head") == "overlaps" and layout.overlap_nbytes("windows", "head") == 3
    (s,) = layout.storages  # pair misses bytes 1 (head reads it) and 2n; the last 6 are read by none
    assert (s.covered_nbytes, s.unreferenced_nbytes, s.exact) == (2 * n + 1, 7, True)
    sums = y.as_strided((4096, 4096), (2, 3))  # {2a + 3b}: 2**24 elements, 20,474 distinct bytes
    layout = tv.analyze({"sums": sums, "odd": y[1:100:2]})
    assert layout.footprint_runs("sums").tolist() == [[0, 1], [2, 20474], [20475, 20476]]
    assert layout["sums"].exact and layout.overlap_nbytes("sums", "odd") == 49  # all odd bytes but 1
