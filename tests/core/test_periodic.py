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
    storages, views = case
    layout = _analyze_towers(views)
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


def test_towers_of_periods_whose_common_multiple_is_too_long_are_a_flagged_bound(monkeypatch):
    monkeypatch.setattr(periodic, "BASE_BUDGET", 4)
    a = periodic.Tower(0, np.array([[0, 1]]), 7, 100)
    b = periodic.Tower(0, np.array([[0, 1]]), 11, 100)
    u = periodic.Union([a, b])
    assert not u.exact and u.nbytes == b.stop  # the union of the spans: an upper bound, said so
    assert periodic.intersection_nbytes(a, b) == (100, False)


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
