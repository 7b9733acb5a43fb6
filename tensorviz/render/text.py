"""Plain-text lane map of a Diagram: for terminals, logs, CI and golden tests.

Each storage block gets its own byte scale (``width`` cells from its first to its last byte, or
the diagram's byte range). Cell characters:

- storage row: ``=`` bytes read by some view, ``.`` unreferenced, ``:`` a mix, ``x`` bytes read
  by two or more bars, ``h`` a file's header;
- view rows: ``#`` every byte of the cell is read, ``+`` some are, ``-`` inside the span but
  none read (a stride gap), ``|`` an empty view, blank outside the span.

>>> import torch, tensorviz as tv
>>> a = torch.rand(8, 10, 50)
>>> print(tv.diagram({"a": a, "b": a[2:4]}).to_text(width=16))
2 tensors · 1 storage · 1 shared group (by storage) · unique 15.6 KiB vs naive 19.5 KiB
storage #0 · 15.6 KiB: shared, overlapping · bytes [0, 16000), 1000 B per cell
  storage #0 |====xxxx========|
  a          |################| [0, 16000) overlaps
  b          |    ####        | [4000, 8000) overlaps
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tensorviz.core.names import elide_name, shown
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.plan.diagram import Bar, Block, Diagram

__all__ = ["diagram_text", "covered_per_cell", "truncate_label"]

_FLAGS = (
    ("overlaps_other", "overlaps"),
    ("non_contiguous", "non-contiguous"),
    ("reinterpreted", "reinterpreted"),
    ("expanded", "expanded"),
    ("empty", "empty"),
)


def truncate_label(label: str, n: int) -> str:
    """A long name in ``n`` characters, cut at a name boundary and keeping its end (where dotted
    names differ): ``….11.attn.c_attn.weight`` (:func:`tensorviz.core.names.elide_name`)."""
    return elide_name(label, n)


def covered_per_cell(runs: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bytes of a canonical run set inside each cell ``[edges[k], edges[k+1])`` (vectorised)."""
    if len(runs) == 0:
        return np.zeros(len(edges) - 1, dtype=np.int64)
    a, b = runs[:, 0], runs[:, 1]
    lengths = b - a
    cum = np.concatenate(([0], np.cumsum(lengths)))
    idx = np.searchsorted(a, edges, side="right") - 1
    below = np.where(
        idx >= 0, cum[np.maximum(idx, 0)] + np.minimum(edges - a[np.maximum(idx, 0)], lengths[np.maximum(idx, 0)]), 0
    )
    return np.diff(below)


def diagram_text(d: Diagram, width: int = 60) -> str:
    """The ASCII lane map of a diagram (see the module docstring for the characters)."""
    if width < 4:
        raise ValueError(f"width must be at least 4 cells, got {width}")
    labels = [_row_label(d, lane) for lane in d.lanes if lane.block >= 0]
    col = min(max((len(s) for s in labels), default=0), 28)
    lines = [shown(d.header.text)]  # names and paths are data: one line each, escapes shown
    bars_by_lane: dict[int, list[Bar]] = {}
    for bar in d.bars:
        bars_by_lane.setdefault(bar.lane, []).append(bar)
    ties: list[str] = []
    starts = {g.lanes[0]: g for g in d.logical}  # a logical tensor's pieces: one line above them
    for block in d.blocks:
        edges = _edges(d, block, width)
        group = starts.get(block.lanes[0])
        if group is not None:
            lines.append(shown(f"logical {group.label}"))
        lines.append(shown(_block_title(block, edges)))
        for li in block.lanes:
            lane = d.lanes[li]
            label = _lane_text(d, lane, bars_by_lane.get(li, []), col, ties)
            head = f"  {label:<{col}} |"
            if lane.kind == "storage":
                lines.append(head + _extent_cells(block, edges) + "|")
            else:
                bars = bars_by_lane.get(li, [])
                lines.append(head + _bar_cells(bars, edges) + "|" + _bar_note(bars))
    for lane in d.lanes:
        if lane.block < 0:
            lines.append(shown(lane.label))
    lines += ties  # each row labelled "first +N" lists its tied names here
    if d.overview is not None:
        lines.append(d.overview.text)
    return "\n".join(lines)


#: Most rows of tied names listed under the map (each name is also in ``--json`` and the table).
TIED_LINES = 20


def _lane_text(d: Diagram, lane, bars: list[Bar], col: int, ties: list[str]) -> str:
    """A row's label in ``col`` characters, cut at a name boundary; a row of one bar of tied
    names that do not all fit shows the first and a count, and adds their list to ``ties``."""
    from tensorviz.plan.labels import TIED, names_label

    if lane.kind != "storage" and len(bars) == 1 and len(bars[0].names) > 1:
        names = [shown(n) for n in bars[0].names]
        label = names_label(names, col)
        if label != TIED.join(names) and len(ties) < TIED_LINES:
            ties.append(shown(f"{label} = {TIED.join(names)}", full=True))
        return label
    return truncate_label(_row_label(d, lane), col)


def _row_label(d: Diagram, lane) -> str:
    """Row label; a storage row just names the storage (its block title has the details)."""
    return f"storage #{lane.storage}" if lane.kind == "storage" else shown(lane.label)


def _edges(d: Diagram, block: Block, width: int) -> np.ndarray:
    if d.byte_range is not None:
        lo, hi = d.byte_range
    else:
        lo, hi = 0, max([block.nbytes] + [d.bars[i].stop for i in block.bars] + [1])
    return np.unique(np.round(np.linspace(lo, hi, width + 1)).astype(np.int64))


def _block_title(block: Block, edges: np.ndarray) -> str:
    lo, hi = int(edges[0]), int(edges[-1])
    per = (hi - lo) / (len(edges) - 1)
    per_text = f"{per:.0f} B" if per < 1024 else format_bytes(per)
    why = ": " + ", ".join(block.reasons) if block.reasons else ""
    return f"{block.label}{why} · bytes [{lo}, {hi}), {per_text} per cell"


def _extent_cells(block: Block, edges: np.ndarray) -> str:
    widths = np.diff(edges)
    inside = covered_per_cell(np.array([[0, block.nbytes]], dtype=np.int64), edges)
    unref = covered_per_cell(block.unreferenced, edges)
    multi = covered_per_cell(block.overlap_runs, edges)
    header = covered_per_cell(block.header, edges)
    out = np.full(len(widths), " ")
    out[inside > 0] = "="
    out[(unref > 0) & (unref < inside)] = ":"
    out[(unref > 0) & (unref == inside)] = "."
    out[header > 0] = "h"
    out[multi > 0] = "x"
    return "".join(out)


def _bar_cells(bars: list[Bar], edges: np.ndarray) -> str:
    widths = np.diff(edges)
    rank = np.zeros(len(widths), dtype=np.int8)  # 0 blank, 1 gap, 2 part, 3 full, 4 empty
    dense = [b for b in bars if b.runs is None and not b.empty]
    if dense:
        rank = np.maximum(rank, _dense_rank(np.array([(b.start, b.stop) for b in dense], dtype=np.int64), edges))
    for bar in bars:
        if bar.empty:
            k = int(np.clip(np.searchsorted(edges, bar.start, side="right") - 1, 0, len(widths) - 1))
            rank[k] = max(rank[k], 4)
            continue
        if bar.runs is None:
            continue
        span = np.array([[bar.start, bar.stop]], dtype=np.int64)
        in_span = covered_per_cell(span, edges) > 0
        cov = covered_per_cell(bar.runs, edges)
        r = np.where(cov == widths, 3, np.where(cov > 0, 2, np.where(in_span, 1, 0)))
        rank = np.maximum(rank, r.astype(np.int8))
    return "".join(np.array([" ", "-", "+", "#", "|"])[rank])


def _dense_rank(spans: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per cell: 3 where some span covers the whole cell, 2 where one covers part of it, for
    many gap-free spans at once (difference arrays: O(cells + spans log cells))."""
    n = len(edges) - 1
    # cells touched: [first cell ending after start, first cell starting at or after stop)
    touch_a = np.searchsorted(edges[1:], spans[:, 0], side="right")
    touch_b = np.searchsorted(edges[:-1], spans[:, 1], side="left")
    # cells covered whole: [first cell starting at or after start, last cell ending by stop]
    full_a = np.searchsorted(edges[:-1], spans[:, 0], side="left")
    full_b = np.searchsorted(edges[1:], spans[:, 1], side="right")
    out = np.zeros(n, dtype=np.int8)
    out[_ranges(touch_a, touch_b, n)] = 2
    out[_ranges(full_a, full_b, n)] = 3
    return out


def _ranges(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Mask of cells inside any of the half-open ranges ``[a[i], b[i])``."""
    keep = b > a
    diff = np.zeros(n + 1, dtype=np.int64)
    np.add.at(diff, a[keep], 1)
    np.add.at(diff, b[keep], -1)
    return np.cumsum(diff[:-1]) > 0


def _bar_note(bars: list[Bar]) -> str:
    if len(bars) != 1:
        return f" {len(bars):,} bars" if bars else ""
    bar = bars[0]
    flags = [word for attr, word in _FLAGS if getattr(bar, attr)]
    if not bar.exact:
        flags.append("footprint≈span")
    if bar.cell:
        flags.append(f"drawn per {bar.cell:,}-byte cell, {bar.nbytes:,} bytes read")
    return f" [{bar.start}, {bar.stop})" + (" " + ", ".join(flags) if flags else "")
