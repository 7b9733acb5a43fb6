"""The drawing's overlap marks in period space (issue 22): bars that are rows of one period.

``bars._mark_row_overlaps`` marks the bytes two or more bars read, and each bar's share of
them, from the bars' base runs reduced mod the period (``core.sweep.row_overlaps``) instead of
sorting every run of every bar, or a union per bar for bars drawn per cell (quadratic in
bars). Every drawn figure -- bar runs, overlap runs, the block's overlap and unreferenced runs
-- must equal the listing path's, and the byte-mask oracle's (exact runs, or the planner's
cells), with the thresholds forced so that every path runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core import sweep as sw
from tensorviz.plan import bars
from tests.core.test_oracle import SETTINGS
from tests.core.test_sweep_period import byte_mask, listing, paths, row_views
from tests.plan.test_draw_cells import _cells


def runs_of(mask: np.ndarray) -> list[list[int]]:
    d = np.diff(np.concatenate(([0], mask.view(np.int8), [0])))
    return np.stack((np.flatnonzero(d == 1), np.flatnonzero(d == -1)), axis=1).tolist()


def drawn(views: dict[str, torch.Tensor]) -> list:
    """Every figure of the picture that overlap marks feed."""
    d = tv.diagram(views, by="storage")
    out: list = []
    for b in d.bars:
        out.append(
            (
                b.names,
                None if b.runs is None else b.runs.tolist(),
                None if b.overlap_runs is None else b.overlap_runs.tolist(),
                b.overlaps_other,
                b.reinterpreted,
                b.cell,
                b.read_nbytes,
            )
        )
    for k in d.blocks:
        out.append((k.overlap_runs.tolist(), k.unreferenced.tolist(), k.unreferenced_nbytes))
    return out


@SETTINGS
@given(row_views(), st.sampled_from([None, 4]), st.sampled_from([None, 3]))
def test_marks_equal_the_listing_path_and_the_oracle(case, draw_runs, explicit):
    """With ``draw_runs`` 4 every bar of more runs is drawn per cell (cells of 7 bytes); with
    ``explicit`` 3 footprints of more runs are towers (a bar drawn per cell from its tower)."""
    nbytes, views = case
    old_runs, old_cells = bars.DRAW_RUNS, bars.DRAW_CELLS
    try:
        if draw_runs is not None:
            bars.DRAW_RUNS, bars.DRAW_CELLS = draw_runs, -(-nbytes // 7)
        with paths(min_runs=1 << 62, explicit=explicit):  # the listing path
            want = drawn(views)
        with paths(explicit=explicit):
            got = drawn(views)
    finally:
        bars.DRAW_RUNS, bars.DRAW_CELLS = old_runs, old_cells
    assert got == want
    masks = {name: byte_mask(t, nbytes) for name, t in views.items()}
    depth = np.sum(list(masks.values()), axis=0)
    block = got[-1]
    if draw_runs is None or all(bar[5] == 0 for bar in got[:-1]):
        assert block[0] == runs_of(depth >= 2)
        for name, overlap in ((bar[0][0], bar[2]) for bar in got[:-1]):
            others = np.logical_or.reduce([m for k, m in masks.items() if k != name])
            mine = runs_of(masks[name] & others)
            assert (overlap or []) == mine
    else:
        width = got[next(i for i, bar in enumerate(got[:-1]) if bar[5])][5]
        edges = np.minimum(np.arange(0, nbytes + width, width), nbytes)
        assert block[0] == _cells(depth >= 2, edges, 0, nbytes)


def test_period_space_runs_where_the_bars_are_rows():
    w = torch.zeros(40, 64, dtype=torch.uint8)
    views = {f"c.{k}": w[k : 40 - k, k * 4 : k * 4 + 10] for k in range(14)}  # overlapping, rows apart
    with paths():
        got = drawn(views)
    with listing():
        assert got == drawn(views)
    calls = []
    old = sw.row_overlaps
    try:
        sw.row_overlaps = lambda *a: calls.append(a) or old(*a)
        with paths():
            drawn(views)
    finally:
        sw.row_overlaps = old
    assert len(calls) == 1


@pytest.mark.parametrize("rows", [50_000, 100_000])
def test_sixty_four_column_slices_full_size(rows):
    """64 column slices of a ``rows`` x 4,096 float32 weight (100k rows: every bar drawn per
    cell), overlapping their neighbours by 32 columns and stopping at different rows: exact
    marks, computed by hand per row range."""
    w = torch.empty(rows, 4096, device="meta")
    views = {f"s.{k}": w[: rows - 100 * k, k * 64 : k * 64 + 96] for k in range(64)}
    calls = []
    old = sw.row_overlaps
    try:
        sw.row_overlaps = lambda *a: calls.append(a) or old(*a)
        d = tv.diagram(views, by="storage")
    finally:
        sw.row_overlaps = old
    assert len(calls) == 1
    bar = {b.names[0]: b for b in d.bars}
    p = 4096 * 4

    def shared(k: int) -> np.ndarray:
        """s.k shares columns [64k, 64k + 32) with s.(k-1) on all its rows, [64k + 64, 64k + 96)
        with s.(k+1) on the rows s.(k+1) has."""
        left = np.arange(rows - 100 * k if k else 0) * p + k * 256
        right = np.arange(rows - 100 * (k + 1) if k < 63 else 0) * p + k * 256 + 256
        starts = np.sort(np.concatenate((left, right)))
        return np.stack((starts, starts + 128), axis=1)

    for k in (0, 1, 30, 63):
        b, want = bar[f"s.{k}"], shared(k)
        if rows == 50_000:  # listed: exact runs
            assert b.cell == 0
            assert np.array_equal(b.overlap_runs, want)
            continue
        assert b.cell == -(-rows * p // bars.DRAW_CELLS)  # per cell: the cells holding a shared byte
        edges = np.minimum(np.arange(0, rows * p + b.cell, b.cell), rows * p)
        mark = np.zeros(edges.size, dtype=np.int64)
        np.add.at(mark, np.searchsorted(edges, want[:, 0], side="right") - 1, 1)
        np.add.at(mark, np.searchsorted(edges, want[:, 1] - 1, side="right"), -1)
        hit = np.cumsum(mark)[:-1] > 0
        assert b.overlap_runs.tolist() == bars._clip_runs(bars.cell_runs(edges, hit), b.start, b.stop).tolist()
