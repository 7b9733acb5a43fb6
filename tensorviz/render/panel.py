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
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tensorviz.plan.explain import ExplainedView, ExplainPlan, Strip

__all__ = ["draw", "cell_colors"]

CELL = 0.36
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
    from tensorviz.render._figure import TensorvizFigure, literal_texts
    from tensorviz.render.mpl import check_width

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
    window = (
        ""
        if strip.lo == 0 and strip.cells * strip.cell_bytes >= strip.nbytes
        else f", showing cells [{strip.lo}, {strip.hi})"
    )
    ax.text(
        0.15,
        y + 0.12,
        f"storage #{strip.storage}: {strip.nbytes:,} bytes, {unit}{window}",
        fontsize=10,
        fontweight="bold",
        va="center",
    )
    y += 0.35
    y, right = _draw_strip(ax, strip, si, y, colors, left)
    y, r2 = _draw_grids(ax, strip, si, y + 0.15, colors)
    return y + 0.2, max(right, r2)


def _wide(strip: Strip) -> bool:
    """Whether some view's elements span several cells (mixed dtypes share the smallest cell)."""
    return any(v.itemsize > strip.cell_bytes for v in strip.views)


def _cells_per_dtype(strip: Strip) -> str:
    """``"float32 = 2 cells, int16 = 1 cell"``: each dtype's element in the strip's cells."""
    per = {}
    for v in strip.views:
        per.setdefault(v.dtype, v.itemsize // strip.cell_bytes)
    return ", ".join(f"{d} = {n} cell{'s' * (n != 1)}" for d, n in per.items())


def cells_note(per: int) -> str:
    """How a view's element address becomes storage cells when an element spans ``per`` cells.

    >>> cells_note(2), cells_note(4)
    ('→ cells 2·addr, 2·addr+1', '→ cells 4·addr … 4·addr+3')
    """
    return f"→ cells {per}·addr, {per}·addr+1" if per == 2 else f"→ cells {per}·addr … {per}·addr+{per - 1}"


def _cell_xy(strip: Strip, cell: np.ndarray, y0: float, row_h: float, left: float) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(cell) - strip.lo
    return left + (k % ROW_CELLS) * CELL, y0 + (k // ROW_CELLS) * row_h


def _rects(x: np.ndarray, y: np.ndarray, w: float, h: float) -> np.ndarray:
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    v = np.empty((len(x), 4, 2))
    v[:, 0] = np.stack((x, y), 1)
    v[:, 1] = np.stack((x + w, y), 1)
    v[:, 2] = np.stack((x + w, y + h), 1)
    v[:, 3] = np.stack((x, y + h), 1)
    return v


def _add(ax: Axes, gid: str, verts: np.ndarray, owner: Any, **style: Any):
    from matplotlib.collections import PolyCollection

    coll = PolyCollection(verts, closed=True, **style)
    coll.set_gid(gid)
    coll.tensorviz_owner = np.asarray(owner, dtype=np.int64).ravel()
    ax.add_collection(coll, autolim=False)
    return coll


def _draw_strip(ax: Axes, strip: Strip, si: int, y0: float, colors: np.ndarray, left: float) -> tuple[float, float]:
    nviews = len(strip.views)
    row_h = CELL + 0.12 + nviews * REACH + 0.18
    cells = np.arange(strip.lo, strip.hi)
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
    fs = 6.5 if strip.hi < 1000 else 5.5
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
    rows = math.ceil(strip.cells / ROW_CELLS)
    for r in range(rows):
        ax.text(
            left - 0.08,
            y0 + r * row_h + CELL / 2,
            f"cell {strip.lo + r * ROW_CELLS}",
            ha="right",
            va="center",
            fontsize=7,
            color="#444444",
        )
    for k, v in enumerate(strip.views):
        _draw_reach(ax, strip, si, k, v, y0, row_h, left)
    right = left + min(strip.cells, ROW_CELLS) * CELL
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
    rows = math.ceil(strip.cells / ROW_CELLS)
    for r in range(rows):
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
    if strip.lo <= first < strip.hi:
        ox, oy = _cell_xy(strip, np.array([first]), y0, row_h, left)
        tri = np.array([[[ox[0], oy[0] + dy], [ox[0], oy[0] + dy + REACH], [ox[0] + 0.1, oy[0] + dy + REACH / 2]]])
        _add(ax, f"offset-{k}{suffix}", tri, [first], facecolors=_BADGE, edgecolors="white", linewidths=0.5)


def _grid_shape(v: ExplainedView) -> tuple[int, int]:
    if len(v.shape) == 0:
        return 1, 1
    cols = v.shape[-1]
    return (int(np.prod(v.shape[:-1])) if len(v.shape) > 1 else 1), cols


def _draw_grids(ax: Axes, strip: Strip, si: int, y0: float, colors: np.ndarray) -> tuple[float, float]:
    # 1. place the grids left to right, wrapping at ``limit`` inches; 2. draw each row, its
    # grids level: a row with a wide element (a "→ cells" line) moves all its grids down.
    limit = 10.0
    rows: list[list[tuple[int, float, float]]] = [[]]  # per row: (view index, x, cell size)
    x, right = 1.0, 0.0
    for k, v in enumerate(strip.views):
        cols = _grid_shape(v)[1]
        g = float(np.clip(3.2 / max(cols, 1), 0.2, CELL))
        w = max(cols * g, 1.6) + 0.9
        if x + w > limit and x > 1.0:
            x = 1.0
            rows.append([])
        rows[-1].append((k, x, g))
        right = max(right, x + w)
        x += w + 0.35
    y = y0
    for row in rows:
        note_h = 0.2 if any(strip.views[k].itemsize > strip.cell_bytes for k, _, _ in row) else 0.0
        bottom = max(_draw_grid(ax, strip, si, k, strip.views[k], gx, y, g, colors, note_h) for k, gx, g in row)
        y = bottom + 0.25
    return y - 0.25, right


def _draw_grid(
    ax: Axes,
    strip: Strip,
    si: int,
    k: int,
    v: ExplainedView,
    x0: float,
    y0: float,
    g: float,
    colors: np.ndarray,
    note_h: float = 0.0,
) -> float:
    """One view's logical grid. Each cell shows the storage cell it reads (the first one, for
    an element wider than a cell, whose other cells are drawn as stripes inside it)."""
    rows, cols = _grid_shape(v)
    per = v.itemsize // strip.cell_bytes
    shape = ", ".join(map(str, v.shape))
    ax.text(x0, y0 + 0.1, f"{v.name}", fontsize=9, fontweight="bold", color=v.color, va="center")
    ax.text(
        x0,
        y0 + 0.3,
        f"{v.dtype}[{shape}] · stride {tuple(v.stride)} · offset {v.offset}",
        fontsize=7,
        va="center",
        color="#333333",
    )
    ax.text(x0, y0 + 0.5, v.formula, fontsize=8.5, va="center", family="monospace")
    if per > 1:
        ax.text(x0, y0 + 0.7, cells_note(per), fontsize=8, va="center", family="monospace", color="#333333")
    top = y0 + 0.95 + note_h
    _axis_labels(ax, v, x0, top, g, rows, cols)
    addr = v.addresses.reshape(rows, cols) if v.addresses.size else np.zeros((rows, 0), dtype=np.int64)
    ii, jj = np.indices(addr.shape)
    block_gap = (ii // v.shape[-2]) * 0.08 if len(v.shape) >= 3 and v.shape[-2] else 0 * ii
    cx, cy = x0 + jj.ravel() * g, top + ii.ravel() * g + block_gap.ravel()
    flat = addr.ravel()
    reused = set(v.reuse())
    face = colors[np.clip(flat - strip.lo, 0, len(colors) - 1)] if flat.size else np.zeros((0, 4))
    lw = [2.0 if int(a) in reused else 0.6 for a in flat]
    suffix = "" if si == 0 else f"-s{si}"
    _add(ax, f"grid-{k}{suffix}", _rects(cx, cy, g, g), flat, facecolors=face, edgecolors="#222222", linewidths=lw)
    if per > 1 and flat.size:
        _draw_parts(ax, f"grid-parts-{k}{suffix}", strip, flat, cx, cy, g, per, colors)
    fs = float(np.clip(g * 20, 5, 7.5))
    for a, px, py in zip(flat, cx, cy):
        ax.text(px + g / 2, py + g / 2, str(int(a)), ha="center", va="center", fontsize=fs, gid=f"number-{k}{suffix}")
    return float(cy.max() + g + 0.1) if flat.size else top + 0.1


def _draw_parts(
    ax: Axes,
    gid: str,
    strip: Strip,
    first: np.ndarray,
    cx: np.ndarray,
    cy: np.ndarray,
    g: float,
    per: int,
    colors: np.ndarray,
) -> None:
    """Inside each grid cell of a wide element, a stripe per further cell it covers (cells
    ``first + 1 .. first + per - 1``), coloured like that strip cell; inset from the top,
    bottom and right so the grid's outline stays visible."""
    inset = 0.016
    part = np.arange(1, per)
    cells = (first[:, None] + part[None, :]).ravel()
    x0 = (cx[:, None] + part[None, :] * g / per).ravel()
    x1 = (cx[:, None] + np.minimum((part[None, :] + 1) * g / per, g - inset)).ravel()
    y0, y1 = np.repeat(cy, per - 1) + inset, np.repeat(cy, per - 1) + g - inset
    verts = np.stack([np.stack(c, 1) for c in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))], 1)
    face = colors[np.clip(cells - strip.lo, 0, len(colors) - 1)]
    _add(ax, gid, verts, cells, facecolors=face, edgecolors="none")


def _axis_labels(ax: Axes, v: ExplainedView, x0: float, top: float, g: float, rows: int, cols: int) -> None:
    nd = len(v.shape)
    if nd == 0:
        return
    last = "ijklmnpq"[nd - 1] if nd <= 8 else f"i{nd - 1}"
    ax.text(x0, top - 0.14, f"{last} →  stride {v.stride[-1]}", fontsize=7, va="center", color="#444444")
    if nd >= 2:
        names = ", ".join("ijklmnpq"[: nd - 1])
        strides = ", ".join(str(s) for s in v.stride[:-1])
        ax.text(
            x0 - 0.08,
            top + rows * g / 2,
            f"{names} ↓\nstride {strides}",
            fontsize=7,
            ha="right",
            va="center",
            color="#444444",
            rotation=0,
        )


def _short(name: str, n: int = 34) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _draw_key(ax: Axes, y: float, wide: bool = False) -> float:
    """What the marks mean, so no mark rests on colour alone (a second line when some element
    spans several cells)."""
    lines = [
        "▶ offset (first element)   ×n cell read n times by one view   grey hatched: no view reads it   "
        "bold border: a reused cell   number = storage cell"
    ]
    if wide:
        lines.append(
            "an element wider than a cell shows its first cell's number; its other cells are the stripes beside it"
        )
    for line in lines:
        ax.text(0.15, y + 0.05, line, fontsize=7, color="#444444", va="center")
        y += 0.18
    return y + 0.02
