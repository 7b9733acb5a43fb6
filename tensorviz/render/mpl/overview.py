"""The overview panel of a matplotlib diagram: every storage as cells of one image.

Private to :mod:`tensorviz.render.mpl`. The grid of :class:`~tensorviz.plan.overview.Overview`
is drawn as one RGB image (``imshow``, nearest neighbour, at least one pixel per cell at
100 dpi), so a million storages cost a numpy pass, not a million artists. Adjacent storages of
one kind alternate two shades, so their borders show; labelled storages get a numbered marker,
explained in a list under the grid. Artists carry gids: ``overview`` (the image),
``overview-marker``, ``overview-label``, ``overview-title``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tensorviz.plan.overview import KINDS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tensorviz.plan.overview import Overview

__all__ = ["overview_inches", "draw_overview", "KIND_COLORS", "UNREFERENCED", "grid_shape"]

#: Two shades per kind (alternating between neighbouring storages).
KIND_COLORS = {
    "simple": ("#a9c4e4", "#86a9d6"),
    "packed": ("#93cc9e", "#6db27b"),
    "overlapping": ("#f3a35c", "#e0823a"),
    "tied": ("#c2448f", "#982c6c"),
}
UNREFERENCED = ("#e6e6e6", "#cfcfcf")
_MARGIN = 0.3  # inches left and right of the grid
_TITLE = 0.62  # inches above the grid (gap to the lanes' legend, then the title)
_LABEL_ROW = 0.17  # inches per line of the label list
_CHAR_INCHES = 0.053  # a 7-point character, on average
_DPI = 100


def grid_shape(ov: Overview, fig_width: float) -> tuple[int, int, int]:
    """``(columns, rows, pixels per cell)`` of the grid in a figure ``fig_width`` inches wide:
    the plan's columns at the largest whole number of pixels per cell that fits, or as many
    columns as there are pixels (one pixel per cell) when the plan's do not fit."""
    room = max(int((fig_width - 2 * _MARGIN) * _DPI), 1)
    cols = max(min(ov.columns, room), 1)
    px = int(np.clip(room // cols, 1, 24))
    rows = -(-ov.cells_total // cols)
    return cols, rows, px


def label_lines(ov: Overview, fig_width: float) -> int:
    """Lines of the label list: two columns where the longest label fits in half the width
    (7-point text, about 0.053 inches a character), else one."""
    longest = max((len(label.text) for label in ov.labels), default=0) + 4
    two = longest * _CHAR_INCHES <= (fig_width - 2 * _MARGIN) / 2
    return -(-len(ov.labels) // (2 if two else 1))


def overview_inches(ov: Overview, fig_width: float) -> float:
    """Height of the overview panel: title, grid and label list."""
    cols, rows, px = grid_shape(ov, fig_width)
    lines = label_lines(ov, fig_width)
    return _TITLE + rows * px / _DPI + 0.12 + lines * _LABEL_ROW + 0.1


def _palette() -> np.ndarray:
    """RGB rows: kind k shade j at ``2 * k + j``; unreferenced at 8, 9; background at 10."""
    from matplotlib.colors import to_rgb

    colors = [c for k in KINDS for c in KIND_COLORS[k]] + list(UNREFERENCED) + ["white"]
    return (np.array([to_rgb(c) for c in colors]) * 255).round().astype(np.uint8)


def cell_codes(ov: Overview, cols: int) -> np.ndarray:
    """Per cell of a ``cols``-wide grid (rows x cols), its palette row (see :func:`_palette`)."""
    entry = ov.cell_entry()
    code = 2 * ov.kind[entry].astype(np.int64) + (entry & 1)
    # the last unreferenced_cells of each storage are its unreferenced share
    offset = np.arange(entry.size) - ov.first_cell[entry]
    unref = offset >= ov.cells[entry] - ov.unreferenced_cells[entry]
    code[unref] = 8 + (entry[unref] & 1)
    rows = -(-entry.size // cols)
    out = np.full(rows * cols, 10, dtype=np.int64)
    out[: entry.size] = code
    return out.reshape(rows, cols)


def draw_overview(ov: Overview, fig: Figure, bottom: float, height: float) -> Axes:
    """Draw the panel into ``fig`` between ``bottom`` and ``bottom + height`` inches."""
    w, h = fig.get_size_inches()
    cols, rows, px = grid_shape(ov, w)
    grid_w, grid_h = cols * px / _DPI, rows * px / _DPI
    lines = label_lines(ov, w)
    y0 = bottom + 0.1 + lines * _LABEL_ROW + 0.12
    ax = fig.add_axes((_MARGIN / w, y0 / h, grid_w / w, grid_h / h))
    ax.imshow(_palette()[cell_codes(ov, cols)], interpolation="nearest", aspect="auto",
              extent=(0, cols, rows, 0), gid="overview")  # fmt: skip
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_axis_off()
    _title(ov, ax)
    _markers(ov, ax, cols)
    _label_list(ov, ax, bottom + 0.1, lines, w, h)
    ax.tensorviz_overview = ov  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    return ax


def _title(ov: Overview, ax: Axes) -> None:
    from matplotlib.patches import Patch

    counts = ov.counts()
    handles = [
        Patch(facecolor=KIND_COLORS[k][0], edgecolor=KIND_COLORS[k][1], label=f"{k} {counts[k]:,}")
        for k in KINDS
        if counts[k]
    ]
    if ov.unreferenced.any():
        handles.append(Patch(facecolor=UNREFERENCED[0], edgecolor=UNREFERENCED[1], label="unreferenced bytes"))
    n = ov.storage.size
    title = ax.set_title(
        f"every storage, in order: {n:,} storage{'s' * (n != 1)}, cells sized by bytes",
        loc="left",
        fontsize=8.5,
        pad=17,
    )
    title.set_gid("overview-title")
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(handles), fontsize=7,
              frameon=False, handlelength=1.2, borderaxespad=0.1, columnspacing=1.0)  # fmt: skip


def _markers(ov: Overview, ax: Axes, cols: int) -> None:
    """A numbered marker on the middle cell of each labelled storage."""
    for k, label in enumerate(ov.labels, 1):
        mid = int(ov.first_cell[label.entry] + ov.cells[label.entry] // 2)
        y, x = divmod(mid, cols)
        ax.text(x + 0.5, y + 0.5, str(k), ha="center", va="center", fontsize=7, fontweight="bold", gid="overview-marker",
                bbox=dict(boxstyle="circle,pad=0.15", fc="white", ec="#222222", lw=0.7))  # fmt: skip


def _label_list(ov: Overview, ax: Axes, bottom: float, lines: int, w: float, h: float) -> None:
    """The labels in one or two columns under the grid (see :func:`label_lines`), numbered as
    the markers."""
    for k, label in enumerate(ov.labels):
        col, line = divmod(k, lines) if lines else (0, 0)
        x = (_MARGIN + col * (w - 2 * _MARGIN) / 2) / w
        y = (bottom + (lines - line - 0.5) * _LABEL_ROW) / h
        ax.text(x, y, f"{k + 1}  {label.text}", fontsize=7, va="center", ha="left", gid="overview-label",
                transform=ax.figure.transFigure, clip_on=False)  # fmt: skip
