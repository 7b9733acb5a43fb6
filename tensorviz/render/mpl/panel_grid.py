"""The logical grids of the teaching panel: one per view, each cell showing (and coloured
like) the storage cell it reads; a part of a large view says which part it is.

Drawn into the panel's Axes by :func:`draw_grids` (see :mod:`tensorviz.render.mpl.panel` for the
layers' gids).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensorviz.core.names import terminal

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from tensorviz.plan.explain import ExplainedView, Strip

__all__ = ["draw_grids", "cells_note", "fitting_size", "CELL"]

CELL = 0.36


def fitting_size(size: float, width: float, largest: int) -> float:
    """A font size at most ``size`` at which ``largest`` (a cell number) fits a cell ``width``
    inches wide: the corner of a big weight has 8-digit addresses.

    >>> fitting_size(7.5, 0.36, 12), round(fitting_size(7.5, 0.36, 33554432), 2)
    (7.5, 4.7)
    """
    digits = len(str(max(largest, 0)))
    return min(size, 0.9 * width * 72 / (0.62 * digits))


def cells_note(per: int) -> str:
    """How a view's element address becomes storage cells when an element spans ``per`` cells.

    >>> cells_note(2), cells_note(4)
    ('→ cells 2·addr, 2·addr+1', '→ cells 4·addr … 4·addr+3')
    """
    return f"→ cells {per}·addr, {per}·addr+1" if per == 2 else f"→ cells {per}·addr … {per}·addr+{per - 1}"


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

    coll = PolyCollection(verts, closed=True, **style)  # type: ignore[arg-type]  # matplotlib's stubs want a Sequence; an array is what it takes
    coll.set_gid(gid)
    coll.tensorviz_owner = np.asarray(owner, dtype=np.int64).ravel()  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    ax.add_collection(coll, autolim=False)
    return coll


def _grid_shape(v: ExplainedView) -> tuple[int, int]:
    if len(v.shape) == 0:
        return 1, 1
    cols = v.shape[-1]
    return (int(np.prod(v.shape[:-1])) if len(v.shape) > 1 else 1), cols


def draw_grids(ax: Axes, strip: Strip, si: int, y0: float, colors: np.ndarray) -> tuple[float, float]:
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
    ax.text(x0, y0 + 0.1, terminal(v.name), fontsize=9, fontweight="bold", color=v.color, va="center")
    if v.shown:  # a part of a larger view: say which part
        ax.text(x0, y0 - 0.1, f"showing {v.shown}", fontsize=7.5, va="center", color="#b45309")
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
    face = colors[strip.index(flat)] if flat.size else np.zeros((0, 4))
    lw = [2.0 if int(a) in reused else 0.6 for a in flat]
    suffix = "" if si == 0 else f"-s{si}"
    _add(ax, f"grid-{k}{suffix}", _rects(cx, cy, g, g), flat, facecolors=face, edgecolors="#222222", linewidths=lw)
    if per > 1 and flat.size:
        _draw_parts(ax, f"grid-parts-{k}{suffix}", strip, flat, cx, cy, g, per, colors)
    fs = fitting_size(float(np.clip(g * 20, 5, 7.5)), g, int(flat.max()) if flat.size else 0)
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
    face = colors[strip.index(cells)]
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
