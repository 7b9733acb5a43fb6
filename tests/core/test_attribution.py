"""First reader wins and meeting pairs (core/attribution.py) against Python sets, and the tree and
the save check on groups whose pairwise checks were quadratic."""

from __future__ import annotations

import itertools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.core.attribution import attribution, first_reader, meeting_pairs

footprints = st.lists(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 9)), max_size=5).map(
        lambda pairs: fp.as_runs([(a, a + n) for a, n in pairs])
    ),
    min_size=1,
    max_size=8,
)


def _set(runs) -> set[int]:
    return {x for a, b in runs.tolist() for x in range(a, b)}


@settings(max_examples=150, deadline=None)
@given(footprints)
def test_first_reader_equals_set_algebra(fps):
    own, partners = first_reader(fps)
    sets = [_set(f) for f in fps]
    seen: set[int] = set()
    for k, s in enumerate(sets):
        assert own[k] == len(s - seen)
        seen |= s
        assert partners[k] == tuple(j for j, t in enumerate(sets) if j != k and s & t)


@settings(max_examples=150, deadline=None)
@given(footprints, st.lists(st.integers(0, 2), min_size=8, max_size=8))
def test_meeting_pairs_are_real_and_miss_no_label_boundary(fps, labels):
    labels = labels[: len(fps)]
    sets = [_set(f) for f in fps]
    pairs = meeting_pairs(fps, labels)
    assert len(set(pairs)) == len(pairs)
    for i, j in pairs:
        assert i < j and labels[i] != labels[j] and sets[i] & sets[j]
    crossing = {
        x for i, j in itertools.combinations(range(len(fps)), 2) if labels[i] != labels[j] for x in sets[i] & sets[j]
    }
    covered = {x for i, j in pairs for x in sets[i] & sets[j]}
    assert crossing <= covered  # every byte read under two labels is in some reported pair's common bytes


def test_tree_of_63_column_slices_attributes_each_byte_once():
    w = torch.empty(5_000, 4096, device="meta")  # 63 slices + w: a group of 64, partners named exactly
    sd = {"w": w, **{f"s{k}": w[:, k * 64 : (k + 1) * 64] for k in range(63)}}
    tree = tv.analyze(sd).tree()
    assert tree.total_nbytes == 5_000 * 4096 * 4
    assert tree.find("w").nbytes == 5_000 * 4096 * 4 and tree.find("s5").nbytes == 0
    assert tree.find("s5").partners == ("w",) and tree.find("w").partners == tuple(f"s{k}" for k in range(63))
    assert tree.find("s5").counted_in == ("within", "w")
    slices = {f"s{k}": w[:, k * 64 : (k + 1) * 64] for k in range(63)}
    tree = tv.analyze({**slices, "w": w}).tree()  # slices first: they own their bytes, w the last 64 columns
    assert tree.find("s0").nbytes == 5_000 * 64 * 4 and tree.find("w").nbytes == 5_000 * 64 * 4
    assert tree.find("s0").partners == ("w",)


def test_save_check_on_a_flat_buffer_names_missed_pairs_without_comparing_all_pairs():
    n = 3_000
    buf = torch.zeros(n * 32 + 32)
    sd = {"flat": buf, **{f"p{i}": buf[i * 32 : (i + 1) * 32].view(4, 8) for i in range(n)}}
    report = tv.save_check(sd)
    layout = tv.analyze(sd)
    for v in report.verdicts:
        for m in v.misfires:
            if "does not see them share memory" in m.library:
                a, b = m.names
                assert layout.overlap_nbytes(a, b) > 0, m
                assert not any(a in g and b in g for g in v.anchor or ()), m


# Per storage: (offset, length) row slices of a 1-D byte buffer, and whether to add a strided view.
storages = st.lists(
    st.tuples(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 9)), min_size=1, max_size=6), st.booleans()),
    min_size=1,
    max_size=5,
)


@settings(max_examples=100, deadline=None)
@given(storages)
def test_attribution_of_many_groups_equals_set_algebra(spec):
    """Groups of dense slices go through one numpy pass over all groups at once
    (``_dense_groups``), groups with a strided view through the per-group path: both give
    each view the bytes no earlier view of its group reads, and as partners exactly the views
    sharing a byte with it."""
    sd: dict[str, torch.Tensor] = {}
    for s, (slices, strided) in enumerate(spec):
        buf = torch.empty(64, dtype=torch.uint8, device="meta")
        for k, (a, n) in enumerate(slices):
            sd[f"s{s}.v{k}"] = buf[a : a + n]
        if strided:
            sd[f"s{s}.every3"] = buf[1:50:3]
    layout = tv.analyze(sd)
    own, groups, partners, _, distinct = attribution(layout)
    sets = {n: _set(layout.footprint_piece(n)) for n in layout.names}
    seen: dict[str, set[int]] = {}
    for i, n in enumerate(layout.names):
        store = layout[n].storage
        before = seen.setdefault(repr(store), set())
        assert own[i] == len(sets[n] - before)
        before |= sets[n]
        if n in partners:
            others = [m for m in layout.names if m != n and layout[m].storage == store and sets[n] & sets[m]]
            assert tuple(partners[n]) == tuple(others)
    for names in groups:
        assert distinct(list(names)) == len(set().union(*(sets[n] for n in names)))
