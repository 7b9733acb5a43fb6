"""The layers of a matplotlib diagram: storage rows, bars, exact runs, marks and flags.

Private to :mod:`tensorviz.render.mpl` (its docstring lists the layers and their gids). A
coloured layer is one ``PolyCollection``; a mark layer (hatched) is one ``PathPatch`` whose
compound path holds every rectangle, so Agg hatches the layer in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorviz.plan.colors import SHARES_OUTLINE
from tensorviz.render.mpl.geom import BAR_HEIGHT, STRIP, lane_px, px_per_byte, rect_vertices
from tensorviz.render.theme import BACKGROUND, ROW

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    from tensorviz.plan.diagram import Diagram

__all__ = ["draw_storage_layers", "draw_bar_layers", "past_end", "STYLE", "HATCH_LIMIT", "RUN_BUDGET"]

RUN_BUDGET = 200_000  # most footprint polygons drawn; above it sub-pixel gaps are merged
HATCH_LIMIT = 400  # most rectangles a layer hatches; above, a plain fill (a hatch would not show)
_EXTENT = ROW  # follows the theme in an SVG (tensorviz.render.theme)
_EDGE = "#444444"

#: The style of each mark layer; the legend uses the same dictionaries, so key and picture agree.
STYLE: dict[str, dict[str, Any]] = {
    "header": dict(facecolor="#c9d3e3", edgecolor="#4a5a78", hatch="---", linewidth=0.6),
    "unreferenced": dict(facecolor=BACKGROUND, edgecolor="#9a9a9a", hatch="////", linewidth=0.6),
    "storage-overlaps": dict(facecolor="none", edgecolor="#cc3311", hatch="xxxx", linewidth=0.8),
    # White under the hatch: the red crosses read on any bar colour (magenta and red included).
    "overlaps": dict(facecolor="white", edgecolor="#cc3311", hatch="xxx", linewidth=0.6),
    "expanded": dict(facecolor="none", edgecolor="#222222", hatch="....", linewidth=0),
    "reinterpreted": dict(facecolor="none", edgecolor="#222222", hatch="\\\\\\\\", linewidth=0),
    # Bytes views address past their storage's end (a freed storage: resize_(0)): no memory there.
    "past-end": dict(facecolor="#f4f4f4", edgecolor="#7a0177", hatch="++", linewidth=0.8, linestyle="--"),
}
_RECT_CODES = np.array([1, 2, 2, 2, 79], dtype=np.uint8)  # MOVETO, 3 x LINETO, CLOSEPOLY


def _add(ax: Axes, gid: str, verts: np.ndarray, owner: Sequence[int] | np.ndarray, **style: Any) -> Artist:
    """A coloured layer: one polygon per rectangle, so each can have its own colour."""
    from matplotlib.collections import PolyCollection

    coll = PolyCollection(verts, closed=True, **style)  # type: ignore[arg-type]  # matplotlib's stubs want a Sequence; an array is what it takes
    coll.set_gid(gid)
    coll.tensorviz_owner = np.asarray(owner, dtype=np.int64)  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    ax.add_collection(coll, autolim=False)
    return coll


def _add_marks(ax: Axes, gid: str, verts: np.ndarray, owner: Sequence[int] | np.ndarray) -> Artist:
    """A mark layer in :data:`STYLE`: every rectangle in one compound path, hatched in one pass
    (Agg sets a hatch up per path: ~1 ms each). Past :data:`HATCH_LIMIT` rectangles a hatch is
    too small to see, so the layer becomes a plain fill of its hatch colour, half strength."""
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path

    style = dict(STYLE[gid])
    if len(verts) > HATCH_LIMIT and style.pop("hatch", None):
        style.update(facecolor=_plain_fill(style), edgecolor="none", linewidth=0)
    v = np.empty((len(verts), 5, 2))
    v[:, :4], v[:, 4] = verts, verts[:, 0]
    patch = PathPatch(Path(v.reshape(-1, 2), np.tile(_RECT_CODES, len(verts))), **style)
    patch.set_gid(gid)
    patch.set_visible(len(verts) > 0)  # an empty hatched path still costs a hatch set-up
    patch.tensorviz_owner = np.asarray(owner, dtype=np.int64)  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    ax.add_artist(patch)  # not add_patch: no data limits to update (they are set), ~1 ms less
    return patch


def _plain_fill(style: dict[str, Any]) -> tuple[float, ...]:
    """The hatch colour at 45 % over the layer's face (translucent where it has none)."""
    from matplotlib.colors import to_rgba

    mark = np.array(to_rgba(style["edgecolor"]))
    if style["facecolor"] == "none":
        return (*mark[:3], 0.45)
    return (*(0.45 * mark[:3] + 0.55 * np.array(to_rgba(style["facecolor"])[:3])), 1.0)


def _runs_layer(pieces: list[tuple[np.ndarray, int, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate ``(runs, owner, y)`` pieces into runs ``(k, 2)``, owner and y arrays."""
    pieces = [piece for piece in pieces if len(piece[0])]
    if not pieces:
        return np.zeros((0, 2)), np.zeros(0, dtype=np.int64), np.zeros(0)
    runs = np.concatenate([r for r, _, _ in pieces]).astype(np.float64).reshape(-1, 2)
    counts = [len(r) for r, _, _ in pieces]
    owner = np.repeat(np.array([o for _, o, _ in pieces], dtype=np.int64), counts)
    ys = np.repeat([y for _, _, y in pieces], counts)
    return runs, owner, ys


def _rects_of(
    pieces: list[tuple[np.ndarray, int, float]], height: float = BAR_HEIGHT, dy: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    runs, owner, ys = _runs_layer(pieces)
    return rect_vertices(runs[:, 0], runs[:, 1], ys + dy, height), owner


def draw_storage_layers(d: Diagram, ax: Axes) -> None:
    rows = [(bi, float(b.lanes[0])) for bi, b in enumerate(d.blocks) if d.lanes[b.lanes[0]].kind == "storage"]
    owner = np.array([bi for bi, _ in rows], dtype=np.int64)
    sizes = np.array([d.blocks[bi].nbytes for bi in owner], dtype=np.float64)
    verts = rect_vertices(np.zeros(len(rows)), sizes, [y for _, y in rows])
    edge = 0.8 if lane_px(ax) >= 4 else 0.0
    _add(ax, "extents", verts, owner, facecolors=_EXTENT, edgecolors=_EDGE, linewidths=edge)
    _add_marks(ax, "past-end", *_rects_of([(past_end(d, bi), bi, y) for bi, y in rows]))
    for gid, attr in (("header", "header"), ("unreferenced", "unreferenced"), ("storage-overlaps", "overlap_runs")):
        _add_marks(ax, gid, *_rects_of([(getattr(d.blocks[bi], attr), bi, y) for bi, y in rows]))
    _draw_separators(d, ax)


def draw_logical_groups(d: Diagram, ax: Axes) -> None:
    """Each logical tensor's pieces as one group (:attr:`Diagram.logical`): a tinted band behind
    its lanes, the full width of the plot, outlined (gid ``logical-groups``, owner: the group's
    index), and its label at the right end of its last lane (gid ``logical-label``)."""
    groups = d.logical
    if not groups:
        return
    lo, hi = d.x_range
    first = np.array([g.lanes[0] for g in groups], dtype=np.float64)
    last = np.array([g.lanes[1] for g in groups], dtype=np.float64)
    verts = rect_vertices(np.full(first.size, lo), np.full(first.size, hi), (first + last) / 2, 1.0)
    verts[:, :, 1] = np.where(verts[:, :, 1] > ((first + last) / 2)[:, None], last[:, None] + 0.5, first[:, None] - 0.5)
    band = _add(ax, "logical-groups", verts, np.arange(len(groups)), **_LOGICAL)
    band.set_zorder(0.5)  # behind the bars, over the grid
    size = float(np.clip(lane_px(ax) * 0.4, 5, 7.5))
    for g in groups:
        ax.text(hi, g.lanes[1], g.label + " ", ha="right", va="center", fontsize=size, color="#1f3b57", zorder=6,
                gid="logical-label", bbox=dict(boxstyle="square,pad=0.15", facecolor="white", alpha=0.85,
                edgecolor="none"), clip_on=True)  # fmt: skip


_LOGICAL = dict(facecolors="#e8eff7", edgecolors="#5b7fa6", linewidths=1.0)


def past_end(d: Diagram, bi: int) -> np.ndarray:
    """``[[nbytes, last byte any bar reaches]]`` of block ``bi`` when its bars reach past the
    storage's end (a freed storage), else no run."""
    block = d.blocks[bi]
    if not block.bars:
        return np.zeros((0, 2), dtype=np.int64)
    top = int(d.columns.stop[list(block.bars)].max())
    return np.array([[block.nbytes, top]] if top > block.nbytes else [], dtype=np.int64).reshape(-1, 2)


def _draw_separators(d: Diagram, ax: Axes) -> None:
    from matplotlib.collections import LineCollection

    ys = [d.blocks[i].lanes[0] - 0.5 for i in range(1, len(d.blocks))]
    if d.blocks and d.lanes and d.lanes[-1].block < 0:
        ys.append(d.blocks[-1].lanes[-1] + 0.5)
    if lane_px(ax) < 4:  # hundreds of storages: lines between them would only darken the picture
        ys = []
    segs = [[(0, y), (1, y)] for y in ys]
    lines = LineCollection(segs, colors="#999999", linewidths=0.6, transform=ax.get_yaxis_transform())
    lines.set_gid("separators")
    lines.tensorviz_owner = np.arange(len(segs))  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    ax.add_collection(lines, autolim=False)


def draw_bar_layers(d: Diagram, ax: Axes) -> None:
    from matplotlib.colors import to_rgba_array

    c = d.columns
    colors = to_rgba_array(list(c.colors))[c.color] if len(c.colors) else np.zeros((0, 4))
    full = np.flatnonzero(~c.empty)
    x0, x1 = c.start[full].astype(np.float64), c.stop[full].astype(np.float64)
    face = colors[full]
    face[c.sparse[full], 3] = 0.22  # the span of a strided view is a light band; its runs are solid
    edge = np.clip(face * [0.6, 0.6, 0.6, 1], 0, 1)
    edge[c.overlaps_other[full], :3] = to_rgba_array(SHARES_OUTLINE)[0, :3]  # shows on every fill (plan.colors)
    # Outline bars wide and tall enough to show it; a thousand sub-pixel outlines would only
    # darken the row. (A transparent edge, not a per-bar width: matplotlib scales dashes per
    # width; and no edges at all when rows are a few pixels tall: Agg strokes even clear ones.)
    edge[:, 3] = (x1 - x0) * px_per_byte(d, ax) >= 4
    if lane_px(ax) < 3:
        edge = "none"
    dashed = c.non_contiguous[full]
    style = [(0, (3, 2)) if k else "solid" for k in dashed] if dashed.any() else "solid"
    _add(
        ax,
        "spans",
        rect_vertices(x0, x1, c.lane[full]),
        full,
        facecolors=face,
        edgecolors=edge,
        linewidths=0.7,
        linestyles=style,
    )
    _draw_footprints(d, ax, colors)
    _draw_slivers(d, ax, colors, full[(x1 - x0) * px_per_byte(d, ax) < 1.5])
    _draw_flag_layers(d, ax)
    _draw_empty(d, ax)


def _draw_footprints(d: Diagram, ax: Axes, colors: np.ndarray) -> None:
    bars = d.bars
    pieces = [(bars[i].runs, i, float(bars[i].lane)) for i in np.flatnonzero(d.columns.sparse).tolist()]
    total = sum(len(r) for r, _, _ in pieces)
    if total > RUN_BUDGET:  # merge gaps narrower than a pixel: identical picture, fewer polygons
        gap = (d.x_range[1] - d.x_range[0]) / 2000
        pieces = [(_coalesce(r, gap), i, y) for r, i, y in pieces]
    verts, owner = _rects_of(pieces)
    _add(ax, "footprints", verts, owner, facecolors=colors[owner], edgecolors="none", linewidths=0)


def _coalesce(runs: np.ndarray, gap: float) -> np.ndarray:
    """Merge runs separated by less than ``gap`` bytes (drawing only; never used for facts)."""
    if len(runs) < 2:
        return runs
    breaks = np.flatnonzero(runs[1:, 0] - runs[:-1, 1] >= gap)
    firsts = np.concatenate(([0], breaks + 1))
    lasts = np.concatenate((breaks, [len(runs) - 1]))
    return np.stack((runs[firsts, 0], runs[lasts, 1]), axis=1)


def _draw_flag_layers(d: Diagram, ax: Axes) -> None:
    bars, c = d.bars, d.columns
    # A strip along the bottom of the bar: marked, but the bar's colour and name stay readable.
    pieces = [(bars[i].overlap_runs, i, float(bars[i].lane)) for i in np.flatnonzero(c.overlaps_other).tolist()]
    _add_marks(ax, "overlaps", *_rects_of(pieces, BAR_HEIGHT * STRIP, BAR_HEIGHT * (1 - STRIP) / 2))
    for gid in ("expanded", "reinterpreted"):
        idx = np.flatnonzero(getattr(c, gid) & ~c.empty)
        _add_marks(ax, gid, rect_vertices(c.start[idx], c.stop[idx], c.lane[idx]), idx)


def _draw_slivers(d: Diagram, ax: Axes, colors: np.ndarray, narrow: np.ndarray) -> None:
    """A 1-pixel tick, in the bar's colour, over each bar narrower than a pixel or two that
    has a row to itself: its exact span (in ``spans``) would not show. On rows of many bars
    the bars show together, so they get no tick."""
    c = d.columns
    alone = np.bincount(c.lane, minlength=len(d.lanes))[c.lane[narrow]] == 1 if len(narrow) else narrow
    idx = narrow[alone]
    x = (c.start[idx] + c.stop[idx]) / 2
    y = c.lane[idx].astype(np.float64)
    segs = np.stack((np.stack((x, y - BAR_HEIGHT / 2), 1), np.stack((x, y + BAR_HEIGHT / 2), 1)), 1)
    _lines(ax, "slivers", segs, idx, colors=colors[idx], linewidths=1.0)


def _lines(ax: Axes, gid: str, segs: np.ndarray, owner: np.ndarray, **style: Any) -> None:
    from matplotlib.collections import LineCollection

    lines = LineCollection(segs.reshape(-1, 2, 2), **style)  # type: ignore[arg-type]  # matplotlib's stubs want a Sequence; an array is what it takes
    lines.set_gid(gid)
    lines.tensorviz_owner = np.asarray(owner, dtype=np.int64)  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    ax.add_collection(lines, autolim=False)


def _draw_empty(d: Diagram, ax: Axes) -> None:
    c = d.columns
    idx = np.flatnonzero(c.empty)
    x, y = c.start[idx].astype(np.float64), c.lane[idx].astype(np.float64)
    segs = np.stack((np.stack((x, y - 0.4), 1), np.stack((x, y + 0.4), 1)), 1)
    _lines(ax, "empty", segs, idx, colors=_EDGE, linewidths=1.5)
