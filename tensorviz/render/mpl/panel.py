"""Draw an :class:`~tensorviz.plan.explain.ExplainPlan` (the teaching panel) with matplotlib.

One Axes covers the whole figure in inch coordinates (y down), so cells stay square at any
size. Layers carry gids: ``strip-cells`` / ``strip-unread`` (owner: the cell index),
``reach-<k>`` (cells view k reads), ``grid-<k>`` (view k's logical cells; owner: the cell each
reads, the first one for an element wider than a cell), ``grid-parts-<k>`` (inside each such
element, a stripe per further cell it covers; owner: that cell), ``offset-<k>`` (the offset
marker); the numbers written in view k's grid have the text gid ``number-<k>``. Later strips
add a suffix (``-s1``; ``strip-cells-1``). Colour links a grid cell to its storage cell and the
cell number is written in both, so the link never rests on colour alone. With mixed dtypes a
strip's cells are the smallest itemsize, and every number is in those cells.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tensorviz.core.names import terminal
from tensorviz.render.mpl.panel_grid import CELL, _add, _rects, draw_grids, fitting_size

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tensorviz.plan.explain import ExplainedView, ExplainPlan, Strip

__all__ = ["draw", "cell_colors"]

REACH = 0.17
ROW_CELLS = 24
_UNREAD = "#d4d4d4"
_BADGE = "#cc3311"


def cell_colors(n: int) -> np.ndarray:
    """RGBA per cell of a strip window: a light rainbow, so neighbouring cells differ and black
    numbers stay readable."""
    from matplotlib import colormaps

    rgba = colormaps["turbo"](np.linspace(0.08, 0.92, max(n, 1)))[:n]
    rgba[:, :3] = 0.55 * rgba[:, :3] + 0.45  # lighten toward white
    return rgba


def draw(plan: ExplainPlan, width: float | None = None) -> Figure:
    """Build the teaching figure (see :func:`tensorviz.render.explain.explain`)."""
    from tensorviz.render.mpl import check_width
    from tensorviz.render.mpl.figure import TensorvizFigure, literal_texts

    width = check_width(width)
    fig = TensorvizFigure()
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    longest = max(len(v.name) for strip in plan.strips for v in strip.views)
    left = float(np.clip(0.25 + 0.068 * min(longest, 34), 1.0, 2.6))
    y, right = 0.15, 0.0
    for si, strip in enumerate(plan.strips):
        y, r = _draw_strip_section(ax, strip, si, y, left)
        right = max(right, r)
    y = _draw_key(ax, y, wide=any(_wide(strip) for strip in plan.strips))
    w = max(width or 0.0, right + 0.3, 6.0)
    fig.set_size_inches(w, y + 0.1)
    ax.set_xlim(0, w)
    ax.set_ylim(y + 0.1, 0)
    fig.tensorviz_plan = plan
    return literal_texts(fig)  # names are data, never mathtext


def _draw_strip_section(ax: Axes, strip: Strip, si: int, y: float, left: float) -> tuple[float, float]:
    colors = cell_colors(strip.cells)
    unit = (
        f"{strip.cell_bytes}-byte cells: " + _cells_per_dtype(strip)
        if _wide(strip)
        else f"cells = {strip.views[0].dtype} elements ({strip.cell_bytes} B)"
    )
    runs = len(strip.segments) > 1
    if runs:
        window = ""
    elif strip.lo == 0 and strip.cells * strip.cell_bytes >= strip.nbytes:
        window = ""
    else:
        window = f", showing cells [{strip.lo}, {strip.hi})"
    if strip.hi * strip.cell_bytes > strip.nbytes:  # a freed storage: views read past its end
        window += f"; cells from {strip.nbytes // strip.cell_bytes} on lie past its end (storage freed)"
    header = f"storage #{strip.storage}: {strip.nbytes:,} bytes, {unit}{window}"
    wide = max([0.15 + 0.08 * len(header)] + [0.15 + 0.065 * len(k.sentence()) for k in strip.alive])
    ax.text(
        0.15,
        y + 0.12,
        header,
        fontsize=10,
        fontweight="bold",
        va="center",
    )
    if runs:  # on a line of its own: the header would not fit a narrow figure
        ax.text(
            0.15,
            y + 0.36,
            f"showing {strip.cells} cells in {len(strip.segments)} runs of cells "
            f"[{strip.lo:,}, {strip.hi:,}); the cells between runs are cut",
            fontsize=8,
            va="center",
            color="#b45309",
        )
        y += 0.22
    for k in strip.alive:  # no view reads all of the storage: say what each keeps alive
        ax.text(0.15, y + 0.36, k.sentence(), fontsize=8, va="center", color="#b45309", gid="alive")
        y += 0.2
    y += 0.35
    y, right = _draw_strip(ax, strip, si, y, colors, left)
    y, r2 = draw_grids(ax, strip, si, y + 0.15, colors)
    return y + 0.2, max(right, r2, wide)


def _wide(strip: Strip) -> bool:
    """Whether some view's elements span several cells (mixed dtypes share the smallest cell)."""
    return any(v.itemsize > strip.cell_bytes for v in strip.views)


def _cells_per_dtype(strip: Strip) -> str:
    """``"float32 = 2 cells, int16 = 1 cell"``: each dtype's element in the strip's cells."""
    per: dict[str, int] = {}
    for v in strip.views:
        per.setdefault(v.dtype, v.itemsize // strip.cell_bytes)
    return ", ".join(f"{d} = {n} cell{'s' * (n != 1)}" for d, n in per.items())


def _cell_xy(strip: Strip, cell: np.ndarray, y0: float, row_h: float, left: float) -> tuple[np.ndarray, np.ndarray]:
    k = _slots(strip, np.asarray(cell))
    return left + (k % ROW_CELLS) * CELL, y0 + (k // ROW_CELLS) * row_h


def _segment_rows(strip: Strip) -> np.ndarray:
    """The strip row each segment starts on (every segment starts a row of its own), and the
    total number of rows last."""
    rows = [math.ceil((b - a) / ROW_CELLS) for a, b in strip.segments]
    return np.concatenate(([0], np.cumsum(rows))).astype(np.int64)


def _slots(strip: Strip, cells: np.ndarray) -> np.ndarray:
    """Place of each drawn cell: ``row * ROW_CELLS + column`` (one segment: ``cell - lo``)."""
    starts = np.array([a for a, _ in strip.segments], dtype=np.int64)
    seg = np.searchsorted(starts, cells, side="right") - 1
    return _segment_rows(strip)[seg] * ROW_CELLS + cells - starts[seg]


def _row_labels(strip: Strip) -> list[int]:
    """The storage cell that starts each drawn row."""
    return [c for a, b in strip.segments for c in range(a, b, ROW_CELLS)]


def _draw_strip(ax: Axes, strip: Strip, si: int, y0: float, colors: np.ndarray, left: float) -> tuple[float, float]:
    nviews = len(strip.views)
    row_h = CELL + 0.12 + nviews * REACH + 0.18
    cells = strip.window()
    readers, reuse = strip.readers(), strip.reuse()
    x, y = _cell_xy(strip, cells, y0, row_h, left)
    read = readers > 0
    _add(
        ax,
        "strip-cells" if si == 0 else f"strip-cells-{si}",
        _rects(x[read], y[read], CELL, CELL),
        cells[read],
        facecolors=colors[read],
        edgecolors="#333333",
        linewidths=0.6,
    )
    _add(
        ax,
        "strip-unread" if si == 0 else f"strip-unread-{si}",
        _rects(x[~read], y[~read], CELL, CELL),
        cells[~read],
        facecolors=_UNREAD,
        edgecolors="#777777",
        linewidths=0.6,
        hatch="///",
    )
    fs = fitting_size(6.5 if strip.hi < 1000 else 5.5, CELL, strip.hi - 1)
    for c, cx, cy, used in zip(cells, x, y, read):
        ax.text(
            cx + CELL / 2,
            cy + CELL / 2,
            str(c),
            ha="center",
            va="center",
            fontsize=fs,
            color="black" if used else "#666666",
        )
    for _c, cx, cy, n in zip(cells, x, y, reuse):
        if n > 1:
            ax.text(
                cx + CELL - 0.02,
                cy + 0.02,
                f"×{n}",
                ha="right",
                va="top",
                fontsize=6,
                color="white",
                fontweight="bold",
                bbox=dict(boxstyle="round,pad=0.1", fc=_BADGE, ec="none"),
            )
    labels = _row_labels(strip)
    rows = len(labels)
    for r, first in enumerate(labels):
        ax.text(
            left - 0.08,
            y0 + r * row_h + CELL / 2,
            f"cell {first}",
            ha="right",
            va="center",
            fontsize=7,
            color="#444444",
        )
    for k, v in enumerate(strip.views):
        _draw_reach(ax, strip, si, k, v, y0, row_h, left)
    right = left + min(max(b - a for a, b in strip.segments), ROW_CELLS) * CELL
    return y0 + rows * row_h, right


def _draw_reach(
    ax: Axes, strip: Strip, si: int, k: int, v: ExplainedView, y0: float, row_h: float, left: float
) -> None:
    from tensorviz.plan.explain import span_cells

    cells = span_cells(v, strip.cell_bytes)
    x, y = _cell_xy(strip, cells, y0, row_h, left)
    dy = CELL + 0.1 + k * REACH
    suffix = "" if si == 0 else f"-s{si}"
    _add(
        ax,
        f"reach-{k}{suffix}",
        _rects(x + 0.04, y + dy + 0.03, CELL - 0.08, REACH - 0.07),
        cells,
        facecolors=v.color,
        edgecolors="none",
    )
    for r in range(len(_row_labels(strip))):
        ax.text(
            left - 0.08,
            y0 + r * row_h + dy + REACH / 2,
            _short(v.name),
            ha="right",
            va="center",
            fontsize=7,
            color=v.color,
            fontweight="bold",
        )
    first = v.offset * v.itemsize // strip.cell_bytes
    if any(a <= first < b for a, b in strip.segments):
        ox, oy = _cell_xy(strip, np.array([first]), y0, row_h, left)
        tri = np.array([[[ox[0], oy[0] + dy], [ox[0], oy[0] + dy + REACH], [ox[0] + 0.1, oy[0] + dy + REACH / 2]]])
        _add(ax, f"offset-{k}{suffix}", tri, [first], facecolors=_BADGE, edgecolors="white", linewidths=0.5)


def _short(name: str, n: int = 34) -> str:
    name = terminal(name)  # one line, whatever the name holds
    return name if len(name) <= n else name[: n - 1] + "…"


def _draw_key(ax: Axes, y: float, wide: bool = False) -> float:
    """What the marks mean, so no mark rests on colour alone (a second line when some element
    spans several cells)."""
    lines = [
        "▶ offset (first element)   ×n cell read n times by one view   grey hatched: no view reads it",
        "bold border: a reused cell   number = storage cell",
    ]  # two lines: one would be cut in the narrowest (6-inch) figure
    if wide:
        lines.append(
            "an element wider than a cell shows its first cell's number; its other cells are the stripes beside it"
        )
    for line in lines:
        ax.text(0.15, y + 0.05, line, fontsize=7, color="#444444", va="center")
        y += 0.18
    return y + 0.02
