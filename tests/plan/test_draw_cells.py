"""Footprints of more runs than a bar can show are drawn per cell, exactly (issue 22's drawing cliff).

The oracle: byte masks written out with numpy (each view's byte addresses read from an
``arange`` viewed the same way), cut into the planner's cells; a cell is drawn when it holds a
byte the bar reads, and marked when it holds a byte the bar and another bar both read.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.plan import bars

NBYTES = 4 * 256


def _views(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        "a": x[:, :128:2],  # the rows case: even and odd bytes of each row's first half
        "b": x[:, 1:128:2],
        "c": x[:, 100:130:3],  # meets both
        "row2": x[2],  # dense
    }


def _masks() -> dict[str, np.ndarray]:
    """Per view, the bytes it reads (uint8: element index = byte address)."""
    addr = torch.arange(NBYTES).reshape(4, 256)
    out = {}
    for name, v in _views(addr).items():
        m = np.zeros(NBYTES, dtype=bool)
        m[v.reshape(-1).numpy()] = True
        out[name] = m
    return out


def _cells(mask: np.ndarray, edges: np.ndarray, lo: int, hi: int) -> list[list[int]]:
    """Brute force: merged stretches of cells holding a byte of ``mask``, cut to ``[lo, hi)``."""
    hit = [bool(mask[a:b].any()) for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]
    runs: list[list[int]] = []
    for k, h in enumerate(hit):
        if not h:
            continue
        if runs and runs[-1][1] == edges[k]:
            runs[-1][1] = int(edges[k + 1])
        else:
            runs.append([int(edges[k]), int(edges[k + 1])])
    return [[max(a, lo), min(b, hi)] for a, b in runs if min(b, hi) > max(a, lo)]


@pytest.mark.parametrize("towers", [False, True])
def test_cells_equal_the_byte_masks(monkeypatch, towers):
    """DRAW_RUNS lowered to 8 and DRAW_CELLS to 100 (cells of 11 bytes): every sparse bar is
    drawn per cell; its runs, overlap marks, the block's marks and its byte count equal the
    brute force. With ``towers`` every footprint is a Tower (EXPLICIT_BUDGET 1)."""
    if towers:
        monkeypatch.setattr(fp, "EXPLICIT_BUDGET", 1)
    monkeypatch.setattr(bars, "DRAW_RUNS", 8)
    monkeypatch.setattr(bars, "DRAW_CELLS", 100)
    x = torch.zeros(4, 256, dtype=torch.uint8)
    d = tv.diagram(_views(x))
    masks = _masks()
    edges = np.minimum(np.arange(0, NBYTES + 11, 11), NBYTES)
    drawn = {b.names[0]: b for b in d.bars}
    assert sorted(drawn) == ["a", "b", "c", "row2"]
    for name in ("a", "b", "c"):
        bar, m = drawn[name], masks[name]
        lo, hi = int(np.flatnonzero(m)[0]), int(np.flatnonzero(m)[-1]) + 1
        assert (bar.start, bar.stop, bar.cell, bar.nbytes) == (lo, hi, 11, int(m.sum()))
        assert bar.runs.tolist() == _cells(m, edges, lo, hi)
    for name, bar in drawn.items():
        m = masks[name]
        lo, hi = int(np.flatnonzero(m)[0]), int(np.flatnonzero(m)[-1]) + 1
        others = np.logical_or.reduce([masks[k] for k in masks if k != name])
        want = _cells(m & others, edges, lo, hi)
        assert (bar.overlap_runs.tolist() if bar.overlap_runs is not None else []) == want
        assert bar.overlaps_other == bool(want)
    depth = np.sum([masks[k] for k in masks], axis=0)
    assert d.blocks[0].overlap_runs.tolist() == _cells(depth >= 2, edges, 0, NBYTES)
    # by hand: c's even bytes 100, 106, ..., 124 of each row (cells from 99 to 132) and the third
    # row's half that row2 reads (bytes 512-638: cells from 506 to 649), cut at a's last byte
    assert drawn["a"].overlap_runs.tolist() == [[99, 132], [352, 385], [506, 649], [858, 895]]
    # a and b never share a byte: a cell of theirs is marked only where c or row2 reads too
    assert drawn["row2"].runs is None and drawn["row2"].cell == 0


def test_few_runs_draw_exactly_as_listed(monkeypatch):
    """Under DRAW_RUNS a tower is listed run by run, as before: no cells."""
    monkeypatch.setattr(fp, "EXPLICIT_BUDGET", 1)
    x = torch.zeros(4, 16, dtype=torch.uint8)
    d = tv.diagram({"a": x[:, :8:2], "b": x[:, 1:8:2], "c": x[:, 4:6]})
    a, b, c = d.bars
    assert (a.cell, b.cell) == (0, 0)
    assert a.runs.tolist() == [[r * 16 + k, r * 16 + k + 1] for r in range(4) for k in (0, 2, 4, 6)]
    assert a.overlap_runs.tolist() == [[r * 16 + 4, r * 16 + 5] for r in range(4)]
    assert b.overlap_runs.tolist() == [[r * 16 + 5, r * 16 + 6] for r in range(4)]
    assert c.nbytes == 8 and a.nbytes == 16


@pytest.mark.parametrize("case", ["rows", "evenodd"])
def test_full_size_cases_plan_a_bounded_number_of_runs(case):
    """The cases of bench_draw_towers.py at full size (meta tensors: nothing allocated): every
    bar lists at most DRAW_CELLS runs, counts bytes exactly, and even/odd bytes never overlap."""
    n = 1 << 24
    if case == "rows":
        x = torch.empty(4, n, dtype=torch.uint8, device="meta")
        views = {"a": x[:, : n // 2 : 2], "b": x[:, 1 : n // 2 : 2]}
        runs = [[r * n, r * n + n // 2 - (r == 3)] for r in range(4)]  # cells of each first half, to a's last byte
        cell = 4 * n // bars.DRAW_CELLS
    else:
        x = torch.empty(2 * n, dtype=torch.uint8, device="meta")
        views = {"even": x[::2], "odd": x[1::2]}
        runs, cell = None, 2 * n // bars.DRAW_CELLS
    d = tv.diagram(views)
    a, b = d.bars
    assert (a.cell, b.cell) == (cell, cell)
    assert a.nbytes == b.nbytes == (n // 4 * 4 if case == "rows" else n) == a.read_nbytes
    assert len(a.runs) <= bars.DRAW_CELLS and len(b.runs) <= bars.DRAW_CELLS
    assert not a.overlaps_other and not b.overlaps_other and len(d.blocks[0].overlap_runs) == 0
    if runs is not None:
        assert a.runs.tolist() == runs
    else:
        assert a.runs.tolist() == [[0, 2 * n - 1]] and b.runs.tolist() == [[1, 2 * n]]
