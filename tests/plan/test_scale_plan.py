"""Planning at scale: the vectorised selection, counts, lane budget and marks agree with the
plain per-storage rules they replace (brute force on random layouts), and records stay lazy."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.core.text import shown_shared
from tensorviz.plan.bars import Proto, depth_runs, mark_overlaps
from tensorviz.plan.budget import allocate
from tensorviz.plan.planner import _Planner, file_headers, storage_reasons
from tensorviz.plan.select import interesting, select, shared_count
from tensorviz.render.html.diagram import table_rows
from tensorviz.render.text import _dense_rank, covered_per_cell
from tests.helpers.models import FusedQKV, seed_tensors


def random_state(rng: random.Random, n: int) -> dict[str, torch.Tensor]:
    """Storages of every kind: alone, tied, sliced, strided, partial, empty, expanded, flat."""
    sd: dict[str, torch.Tensor] = {}
    for s in range(n):
        base = torch.empty(rng.randint(1, 6) * 4, rng.randint(1, 5) * 2, device="meta")
        p, kind = f"m{s}.", rng.randrange(8)
        if kind == 0:
            sd[p + "w"] = base
        elif kind == 1:
            sd[p + "w"], sd[p + "tied"] = base, base
        elif kind == 2:
            sd[p + "w"], sd[p + "row"], sd[p + "col"] = base, base[1:3], base[:, ::2]
        elif kind == 3:
            sd[p + "part"] = base[1:]
        elif kind == 4:
            sd[p + "e"], sd[p + "o"], sd[p + "t"] = base[:, ::2], base[:, 1::2], base.t()
        elif kind == 5:
            sd[p + "z"], sd[p + "x"] = base[:0], base[0].expand(3, -1)
        else:
            flat = torch.empty(4096, device="meta")
            for j in range(rng.randint(2, 90)):
                a = rng.randrange(0, 4000)
                sd[p + f"s{j}"] = flat[a : rng.randrange(a + 1, a + 300) : rng.choice([1, 1, 2])]
    return sd


LAYOUTS = [tv.analyze(random_state(random.Random(seed), n)) for seed, n in enumerate((1, 3, 8, 25, 60))]
LAYOUTS += [tv.analyze(seed_tensors()), tv.analyze(FusedQKV())]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_storage_stats_and_interesting_match_the_records(layout):
    st = layout.storage_stats()
    for s in layout.storages:
        views = layout.storage_views(s.index)
        assert st.views[s.index] == len(views) and st.covered[s.index] == s.covered_nbytes
        assert st.footprint_nbytes[s.index] == sum(v.footprint_nbytes for v in views)
        assert st.non_contiguous[s.index] == sum(not v.is_contiguous for v in views)
    hot = interesting(layout, np.zeros(len(layout.storages), dtype=bool))
    assert hot.tolist() == [bool(storage_reasons(s, layout.storage_views(s.index))) for s in layout.storages]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("by", ["storage", "span", "overlap"])
def test_group_columns_and_shared_counts_match_the_group_records(layout, by):
    groups = layout.groups(by)
    index, (order, bounds) = layout.group_index(by), layout.group_members(by)
    assert [tuple(layout.names[i] for i in order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])] == [
        g.names for g in groups
    ]
    assert [groups[g].names[0] for g in index] == [layout.group_of(n, by).names[0] for n in layout.names]
    shared, how = shown_shared(layout, by)
    assert shared_count(layout, by, frozenset(file_headers(layout))) == (len(shared), how)


def test_a_storage_record_made_alone_is_the_one_storages_hands_out():
    sd = random_state(random.Random(3), 12)
    fresh = tv.analyze(sd)
    ns = len(fresh.storage_stats().nbytes)
    alone = [fresh.storage(i) for i in range(ns - 1, -1, -2)]
    assert "storages" not in fresh._cache
    full = fresh.storages
    assert all(full[s.index] is s for s in alone)
    assert full == tv.analyze(sd).storages  # equal to records made all at once


def test_drawing_a_layout_makes_records_only_for_what_is_drawn():
    layout = tv.analyze({f"w{i}": torch.empty(8 + i, device="meta") for i in range(500)})
    d = tv.diagram(layout, max_lanes=10)
    assert d.hidden_storages == 500 - 9 and [lane.kind for lane in d.lanes][-1] == "more-storages"
    assert "storages" not in layout._cache and "views" not in layout._cache
    assert sum(v is not None for v in layout._records) == 9


def brute_selection(layout, by, names=None, only_shared=False, byte_range=None):
    """Storages drawn and their order, through each storage's protos (the rule before issue 16)."""
    opts = tv.diagram(layout, by=by, names=names, only_shared=only_shared, byte_range=byte_range).options
    planner = _Planner(layout, opts)
    made = [planner._source(s, layout.storage_views(s.index)) for s in layout.storages]
    made = [src for src in made if src is not None]
    made.sort(key=lambda src: (not src.reasons, -src.storage.nbytes, src.storage.index))
    return [src.storage.index for src in made], [bool(src.reasons) for src in made], opts


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "filters",
    [{}, {"names": r"tied|\.s1"}, {"only_shared": True}, {"byte_range": (8, 200)}, {"names": "^nothing$"}],
)
@pytest.mark.parametrize("by", ["storage", "span", "overlap"])
def test_vectorised_selection_matches_the_per_storage_rules(layout, filters, by):
    order, hot, opts = brute_selection(layout, by, **filters)
    sel = select(layout, opts, frozenset(file_headers(layout)))
    assert sel.order.tolist() == order and sel.interesting.tolist() == hot


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("by", ["storage", "span"])
def test_needs_from_counts_equal_the_needs_of_the_bars(layout, by):
    for max_lanes in (3, 7, 40):
        planner = _Planner(layout, tv.diagram(layout, by=by, max_lanes=max_lanes).options)
        sel = select(layout, planner.opts, planner.files)
        order, collapsed = planner._collapse(sel)
        needs = planner._needs(order, collapsed is not None or sel.interesting)
        made = planner._leading(order, max_lanes)
        assert needs[: len(made)] == [1 if not src.reasons else 1 + len(src.rows) for src in made]


def allocate_reference(needs, budget, min_cap=6):
    """The lane budget as first written: quadratic, plain Python."""
    if sum(needs) <= budget:
        return list(needs), len(needs)
    for shown in range(len(needs), 0, -1):
        room, part = budget - (shown < len(needs)), needs[:shown]
        if sum(min(n, 3) for n in part) > room and shown > 1:
            continue
        cap = max(c for c in range(3, max(max(part), 3) + 1) if sum(min(n, c) for n in part) <= room or c == 3)
        if cap >= min_cap or all(n <= cap for n in part) or shown == 1:
            return [min(n, cap) for n in part], shown
    return [], 0


def test_lane_budget_matches_the_quadratic_reference_and_needs_only_a_prefix():
    rng = random.Random(0)
    for _ in range(400):
        needs = [rng.choice([1, 1, 2, 3, 4, 7, 12, 40, 300]) for _ in range(rng.randint(1, 40))]
        budget = rng.choice([3, 5, 8, 20, 40, 100])
        want = allocate_reference(needs, budget)
        assert allocate(needs, budget) == want
        k = int(np.searchsorted(np.cumsum(np.minimum(needs, 3)), budget, side="right")) + 1
        assert allocate(needs[:k], budget, total=len(needs)) == want


def test_overlap_marks_of_many_dense_bars_match_the_sweep_per_bar():
    rng = random.Random(1)
    for _ in range(30):
        spans = [(a, a + rng.randint(1, 50)) for a in (rng.randrange(0, 400) for _ in range(rng.randint(65, 150)))]
        protos = [
            Proto([type("V", (), dict(start=a, stop=b, name=f"v{i}"))()], None, True) for i, (a, b) in enumerate(spans)
        ]
        multi = mark_overlaps(protos)
        runs = [np.array([[a, b]]) for a, b in spans]
        assert multi.tolist() == depth_runs(runs, 2).tolist()
        for p, r in zip(protos, runs):
            want = depth_runs([r, multi], 2) if len(multi) else fp.EMPTY
            assert p.overlap.tolist() == want.tolist()


def test_text_cells_of_many_dense_bars_match_each_bar_alone():
    rng = random.Random(2)
    for _ in range(50):
        edges = np.unique(np.round(np.linspace(0, rng.randint(10, 5000), rng.choice([5, 16, 60]) + 1)).astype(np.int64))
        widths = np.diff(edges)
        spans = np.array(
            sorted((a, a + rng.randint(1, 400)) for a in (rng.randrange(0, int(edges[-1])) for _ in range(30)))
        )
        want = np.zeros(len(widths), dtype=np.int8)
        for a, b in spans:
            cov = covered_per_cell(np.array([[a, min(b, edges[-1])]]), edges)
            want = np.maximum(want, np.where(cov == widths, 3, np.where(cov > 0, 2, 0)).astype(np.int8))
        assert _dense_rank(np.minimum(spans, edges[-1]), edges).tolist() == want.tolist()


@pytest.mark.parametrize("by", ["storage", "span", "overlap"])
def test_html_table_rows_name_each_group_as_the_group_records_do(by):
    layout = LAYOUTS[4]
    d = tv.diagram(layout, by=by)
    groups = {g.names[0]: (i, g) for i, g in enumerate(layout.groups(by))}
    for row in table_rows(d, layout):
        i, g = groups[layout.group_of(row[0], by).names[0]]
        others = [n for n in g.names if n != row[0]]
        assert row[5] == f"#{i}" + (
            f": with {', '.join(others[:3])}{', …' if len(others) > 3 else ''}" if others else ""
        )


@pytest.mark.parametrize("tuple_tokens", [False, True])
def test_table_read_in_chunks_and_released_equals_the_table_read_at_once(tuple_tokens):
    from tensorviz.core.table import build

    rng = random.Random(4)
    rows = []
    for i in range(500):
        s = rng.randrange(60)
        token = ("file", f"f{s}") if tuple_tokens and s % 3 == 0 else 1000 + s
        dt = rng.choice([("float32", 4), ("int8", 1), ("float16", 2)])
        shape = rng.choice([(4,), (2, 3), (0,), (3, 2)])
        stride = (1,) if len(shape) == 1 else rng.choice([(3, 1), (1, 2)])
        start = rng.choice([None, None, 64 * s])
        rows.append((f"v{i}", token, rng.choice(["cpu", "meta"]), 4096, dt, shape, stride, rng.randrange(50), start))
    whole = build(list(rows), {}, {}, [])
    copy = list(rows)
    parts = build(copy, {}, {}, [], release=True, chunk=37)
    assert copy == [None] * len(rows)
    for col in ("sidx", "offset", "did", "itemsize", "start", "stop", "gid", "dense", "exact", "nbytes"):
        assert getattr(parts, col).tolist() == getattr(whole, col).tolist(), col
    assert (parts.keys, parts.devices, parts.dtypes) == (whole.keys, whole.devices, whole.dtypes)
    firsts = {}
    for r in rows:
        firsts.setdefault(r[1], r)
    assert parts.keys == [t if type(t) is tuple else (d, t) for t, d in ((r[1], str(r[2])) for r in firsts.values())]
    assert parts.start.tolist() == [r[7] * r[4][1] if r[8] is None else r[8] for r in rows]
    assert parts.sidx.tolist() == [list(firsts).index(r[1]) for r in rows]


def test_repr_counts_shared_storages_without_making_records():
    layout = tv.analyze(random_state(random.Random(5), 30))
    text = repr(layout)
    assert "groups" not in str(layout._cache.keys()) and "storages" not in layout._cache
    assert text == (
        f"<Layout {len(layout)} tensors on {len(layout.storages)} storages, "
        f"{len(layout.shared('storage'))} shared, 0 skipped>"
    )
