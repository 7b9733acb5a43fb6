"""Geometry shared by the matplotlib layers and words: bar height, rectangles, pixel sizes.

Private to :mod:`tensorviz.render.mpl`. Sizes are in pixels at 100 dpi, so what fits on screen
is what gets drawn or written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from tensorviz.plan.diagram import Diagram

__all__ = ["BAR_HEIGHT", "STRIP", "rect_vertices", "labels_fit", "ax_inches", "px_per_byte", "lane_px"]

BAR_HEIGHT = 0.72  # of a lane
STRIP = 0.38  # the overlap strip's share of the bar height


def rect_vertices(
    x0: np.ndarray | Sequence[float],
    x1: np.ndarray | Sequence[float],
    y: np.ndarray | Sequence[float],
    height: float = BAR_HEIGHT,
) -> np.ndarray:
    """Vertex array ``(n, 4, 2)`` of axis-aligned rectangles ``[x0, x1] × [y - h/2, y + h/2]``."""
    x0, x1, y = (np.asarray(v, dtype=np.float64).ravel() for v in (x0, x1, y))
    y0, y1 = y - height / 2, y + height / 2
    verts = np.empty((len(x0), 4, 2))
    verts[:, 0, 0] = verts[:, 1, 0] = x0
    verts[:, 2, 0] = verts[:, 3, 0] = x1
    verts[:, 0, 1] = verts[:, 3, 1] = y1
    verts[:, 1, 1] = verts[:, 2, 1] = y0
    return verts


def labels_fit(n_lanes: int, plot_inches: float) -> bool:
    return plot_inches / max(n_lanes, 1) >= 0.085  # about 8.5 px per lane at 100 dpi


def ax_inches(ax: Axes) -> tuple[float, float]:
    fw, fh = ax.figure.get_size_inches()  # type: ignore[union-attr]  # axes of a top-level Figure (the stubs allow a SubFigure)
    pos = ax.get_position()
    return pos.width * fw, pos.height * fh


def px_per_byte(d: Diagram, ax: Axes) -> float:
    lo, hi = d.x_range
    return ax_inches(ax)[0] * 100 / max(hi - lo, 1)


def lane_px(ax: Axes) -> float:
    return ax_inches(ax)[1] * 100 / max(abs(ax.get_ylim()[0] - ax.get_ylim()[1]), 1)
