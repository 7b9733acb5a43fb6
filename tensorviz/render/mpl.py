"""Draw a :class:`~tensorviz.diagram.Diagram` with matplotlib, without pyplot.

One artist per visual layer, built from a numpy vertex array, so ten thousand bars cost about
as much as ten: a ``PolyCollection`` for the coloured layers (each polygon its own colour) and,
for the marks drawn over them (hatches), one ``PathPatch`` whose compound path holds every
rectangle of the layer -- Agg then hatches the layer in one pass instead of one per polygon.
Each layer has a gid and a ``tensorviz_owner`` int array mapping its rectangles, in order, back
to the diagram (a bar index, or a block index for the storage-level layers); :func:`drawn_rects`
reads the rectangles back from what is drawn and :func:`names_at` turns an owner into names.
The Diagram itself is attached to the figure and the axes as ``tensorviz_diagram``.

Layers (gids): ``extents`` (storage rows), ``header`` (a file's header bytes), ``unreferenced``
(bytes no view reads, hatched), ``storage-overlaps`` (bytes read by two or more bars, on the
storage row), ``spans`` (every bar's byte range), ``footprints`` (the exact runs inside
non-dense spans), ``overlaps`` (a white strip along the bottom of a bar, hatched, over the bytes
another bar also reads), ``expanded``/``reinterpreted`` (hatched flag overlays), ``empty`` (a
tick for each empty view), ``separators`` (lines between storages).

>>> import torch, tensorviz as tv
>>> from tensorviz.render.mpl import render, drawn_rects
>>> a = torch.rand(8, 10, 50)
>>> fig = render(tv.diagram({"a": a, "b": a[2:4]}))
>>> sorted(set(drawn_rects(fig, "spans")[1][:, 0].tolist()))  # b's bytes
[4000.0, 8000.0]
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ._mpl_text import (LABEL_BUDGET, LANE_CHARS, draw_bar_labels, draw_header, draw_lane_labels, draw_legend,
                        label_storage_runs, lane_px, legend_entries, labels_fit, px_per_byte, short_label)

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..diagram import Diagram

__all__ = ["render", "to_png", "png_bytes", "layer", "names_at", "drawn_rects", "texts", "rect_vertices", "figure_size",
           "short_label", "BAR_HEIGHT", "HATCH_LIMIT", "LABEL_BUDGET", "STYLE"]

BAR_HEIGHT = 0.72
RUN_BUDGET = 200_000  # most footprint polygons drawn; above it sub-pixel gaps are merged
HATCH_LIMIT = 400  # most rectangles a layer hatches; above, a plain fill (a hatch would not show)
STRIP = 0.38  # the overlap strip's share of the bar height
_EXTENT = "#e9e9e9"
_EDGE = "#444444"
_INCH_PER_LANE = 0.26
_TOP = 0.42  # inches above the axes, for the header line
_MAX_PLOT_INCHES = 14.0

#: The style of each mark layer; the legend uses the same dictionaries, so key and picture agree.
STYLE: dict[str, dict[str, Any]] = {
    "header": dict(facecolor="#c9d3e3", edgecolor="#4a5a78", hatch="---", linewidth=0.6),
    "unreferenced": dict(facecolor="white", edgecolor="#9a9a9a", hatch="////", linewidth=0.6),
    "storage-overlaps": dict(facecolor="none", edgecolor="#cc3311", hatch="xxxx", linewidth=0.8),
    # White under the hatch: the red crosses read on any bar colour (magenta and red included).
    "overlaps": dict(facecolor="white", edgecolor="#cc3311", hatch="xxx", linewidth=0.6),
    "expanded": dict(facecolor="none", edgecolor="#222222", hatch="....", linewidth=0),
    "reinterpreted": dict(facecolor="none", edgecolor="#222222", hatch="\\\\\\\\", linewidth=0),
}
_BLOCK_LAYERS = ("extents", "header", "unreferenced", "storage-overlaps")
_RECT_CODES = np.array([1, 2, 2, 2, 79], dtype=np.uint8)  # MOVETO, 3 x LINETO, CLOSEPOLY


def rect_vertices(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, height: float = BAR_HEIGHT) -> np.ndarray:
    """Vertex array ``(n, 4, 2)`` of axis-aligned rectangles ``[x0, x1] × [y - h/2, y + h/2]``."""
    x0, x1, y = (np.asarray(v, dtype=np.float64).ravel() for v in (x0, x1, y))
    y0, y1 = y - height / 2, y + height / 2
    verts = np.empty((len(x0), 4, 2))
    verts[:, 0, 0] = verts[:, 1, 0] = x0
    verts[:, 2, 0] = verts[:, 3, 0] = x1
    verts[:, 0, 1] = verts[:, 3, 1] = y1
    verts[:, 1, 1] = verts[:, 2, 1] = y0
    return verts


def figure_size(d: "Diagram", width: float | None = None) -> tuple[float, float, float, float]:
    """``(width, height, left, bottom)`` in inches for a diagram: lanes get ~0.26 in each (less
    when there are hundreds), the left margin fits the (truncated) lane labels, the bottom one
    the axis and, if any, the legend."""
    n = max(len(d.lanes), 1)
    plot_h = float(np.clip(n * _INCH_PER_LANE, 0.62, _MAX_PLOT_INCHES))
    longest = min(max((len(lane.label) for lane in d.lanes), default=8), LANE_CHARS)
    left = min(max(0.9, 0.068 * longest + 0.25), 3.4) if labels_fit(n, plot_h) else 0.6
    bottom = 0.95 if legend_entries(d) else 0.62
    return (width or 10.0), plot_h + bottom + _TOP, left, bottom


def render(diagram: "Diagram", ax: "Axes | None" = None, *, figure: "Figure | None" = None,
           width: float | None = None) -> "Figure":
    """Draw a diagram and return the figure.

    Args:
        diagram: the plan (see :func:`tensorviz.diagram`).
        ax: draw into these axes (their figure is returned, not resized).
        figure: clear and reuse this figure (resized to fit the diagram), e.g. in a widget.
        width: figure width in inches for a new or reused figure (default 10).

    Returns:
        The ``matplotlib.figure.Figure`` (never a pyplot figure), with ``tensorviz_diagram``.

    >>> import torch, tensorviz as tv
    >>> fig = render(tv.diagram({"w": torch.zeros(4, 4)}))
    >>> sorted(c.get_gid() for c in fig.axes[0].collections)[:2]
    ['empty', 'extents']
    """
    from matplotlib.figure import Figure

    if ax is None:
        w, h, left, bottom = figure_size(diagram, width)
        fig = figure if figure is not None else Figure(figsize=(w, h))
        if figure is not None:
            fig.clear()
            fig.set_size_inches(w, h, forward=True)
        ax = fig.add_axes((left / w, bottom / h, 1 - (left + 0.3) / w, 1 - (bottom + _TOP) / h))
    fig = ax.figure
    _draw(diagram, ax)
    fig.tensorviz_diagram = diagram
    ax.tensorviz_diagram = diagram
    return fig


def to_png(diagram: "Diagram", *, figure: "Figure | None" = None, dpi: int = 100) -> bytes:
    """PNG bytes of a diagram (reusing ``figure`` if given).

    >>> import torch, tensorviz as tv
    >>> to_png(tv.diagram({"w": torch.zeros(4, 4)}))[:4]
    b'\\x89PNG'
    """
    return png_bytes(render(diagram, figure=figure), dpi=dpi)


def png_bytes(fig: "Figure", *, dpi: int = 100, compress_level: int = 6) -> bytes:
    """PNG bytes of a figure: drawn with Agg at ``dpi`` and encoded as RGB.

    Two choices make it faster than ``savefig`` with the same look: glyphs are drawn unhinted
    (at 100 dpi they look the same and draw about a third faster; text is most of a diagram's
    drawing time), and an opaque figure is encoded without its alpha channel (a quarter less
    data to compress). ``compress_level`` 1 makes ~10 % larger files in a fifth of the zlib
    time (for redraws, as in the explorer). The figure's canvas and dpi are left as they were.

    >>> import torch, tensorviz as tv
    >>> png_bytes(render(tv.diagram({"w": torch.zeros(4)})), compress_level=1)[:4]
    b'\x89PNG'
    """
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    old_canvas, old_dpi = fig.canvas, fig.dpi
    canvas = FigureCanvasAgg(fig)
    try:
        fig.dpi = dpi
        with mpl.rc_context({"text.hinting": "no_hinting"}):
            canvas.draw()
        image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        if fig.patch.get_alpha() in (None, 1) and fig.patch.get_facecolor()[3] == 1:
            image = image.convert("RGB")
        buf = io.BytesIO()
        image.save(buf, format="png", compress_level=compress_level)
        return buf.getvalue()
    finally:
        fig.dpi = old_dpi
        fig.set_canvas(old_canvas)


def texts(fig_or_ax: Any, gid: str) -> list[str]:
    """The strings of one kind of text: ``lane-label`` (row labels), ``lane-note`` (summary
    rows), ``bar-label`` (names inside bars), ``run-label`` ("header"/"unreferenced" runs).

    >>> import torch, tensorviz as tv
    >>> texts(render(tv.diagram({"w": torch.zeros(2), "v": torch.zeros(3)}, expand_simple=True)), "lane-label")
    ['v', 'w']
    """
    axes = fig_or_ax.axes if hasattr(fig_or_ax, "axes") and isinstance(fig_or_ax.axes, list) else [fig_or_ax]
    return [t.get_text() for ax in axes for t in ax.texts if t.get_gid() == gid]


# -- reading a drawing back -----------------------------------------------------------------
def _layers(fig_or_ax: Any) -> list["Artist"]:
    axes = fig_or_ax.axes if hasattr(fig_or_ax, "axes") and isinstance(fig_or_ax.axes, list) else [fig_or_ax]
    return [a for ax in axes for a in (*ax.collections, *ax.patches) if a.get_gid() is not None]


def layer(fig_or_ax: Any, gid: str) -> "Artist":
    """The layer artist with this gid: a collection, or the ``PathPatch`` of a mark layer
    (KeyError listing the gids present)."""
    found = [a for a in _layers(fig_or_ax) if a.get_gid() == gid]
    if not found:
        present = sorted({a.get_gid() for a in _layers(fig_or_ax)})
        raise KeyError(f"no layer {gid!r}; layers drawn: {present}")
    return found[0]


def drawn_rects(fig_or_ax: Any, gid: str) -> np.ndarray:
    """The rectangles a layer draws, read back from its paths: ``(n, 4, 2)`` vertices, rectangle
    ``k`` owned by ``layer(...).tensorviz_owner[k]`` (the same order for both layer kinds).

    >>> import torch, tensorviz as tv
    >>> a = torch.zeros(10)
    >>> fig = render(tv.diagram({"a": a, "b": a[2:4]}))
    >>> drawn_rects(fig, "overlaps")[:, :, 0].min(axis=1).tolist()   # a's and b's strips
    [8.0, 8.0]
    """
    art = layer(fig_or_ax, gid)
    if hasattr(art, "get_paths"):
        return np.array([p.vertices[:4] for p in art.get_paths()]).reshape(-1, 4, 2)
    return art.get_path().vertices.reshape(-1, 5, 2)[:, :4]


def names_at(fig_or_ax: Any, gid: str, index: int) -> tuple[str, ...]:
    """The names drawn by rectangle ``index`` of layer ``gid`` (a storage's names for the
    storage-level layers)."""
    owner = int(layer(fig_or_ax, gid).tensorviz_owner[index])
    d = fig_or_ax.tensorviz_diagram
    if gid in _BLOCK_LAYERS:
        block = d.blocks[owner]
        return tuple(n for i in block.bars for n in d.bars[i].names)
    return d.bars[owner].names


# -- drawing steps ----------------------------------------------------------------------------
def _draw(d: "Diagram", ax: "Axes") -> None:
    # 1. axes frame and byte axis; 2. storage layers; 3. bar layers; 4. labels and header.
    _setup_axes(d, ax)
    _draw_storage_layers(d, ax)
    _draw_bar_layers(d, ax)
    draw_lane_labels(d, ax)
    draw_bar_labels(d, ax)
    draw_header(d, ax)
    draw_legend(d, ax, STYLE)


def _setup_axes(d: "Diagram", ax: "Axes") -> None:
    from .axis import ByteFormatter, ByteLocator

    lo, hi = d.x_range
    ax.set_xlim(lo, hi)
    ax.set_ylim(max(len(d.lanes), 1) - 0.5, -0.5)
    if not d.lanes:
        ax.text(0.5, 0.5, "nothing to draw: no tensor matches the filters", transform=ax.transAxes,
                ha="center", va="center", fontsize=9, fontstyle="italic", color="#555555")
    ax.xaxis.set_major_locator(ByteLocator())
    ax.xaxis.set_major_formatter(ByteFormatter())
    ax.tick_params(axis="x", labelsize=8)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    what = "file" if d.blocks and all(b.device == "file" for b in d.blocks) else "storage"
    ax.set_xlabel(f"bytes from the start of each {what}" if d.byte_range is None
                  else f"bytes from the start of the {what} (zoomed)", fontsize=8)
    ax.format_coord = lambda x, y: _coord_text(d, x, y)


def _coord_text(d: "Diagram", x: float, y: float) -> str:
    from .axis import readout

    text = readout(x)
    lane_i = int(np.floor(y + 0.5))
    if 0 <= lane_i < len(d.lanes):
        lane = d.lanes[lane_i]
        hit = [b for b in d.bars if b.lane == lane_i and b.start <= x < b.stop]
        text += " · " + (hit[0].label + f" [{hit[0].start}, {hit[0].stop})" if hit else lane.label)
    return text


def _add(ax: "Axes", gid: str, verts: np.ndarray, owner: Sequence[int], **style: Any) -> "Artist":
    """A coloured layer: one polygon per rectangle, so each can have its own colour."""
    from matplotlib.collections import PolyCollection

    coll = PolyCollection(verts, closed=True, **style)
    coll.set_gid(gid)
    coll.tensorviz_owner = np.asarray(owner, dtype=np.int64)
    ax.add_collection(coll, autolim=False)
    return coll


def _add_marks(ax: "Axes", gid: str, verts: np.ndarray, owner: Sequence[int]) -> "Artist":
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
    patch.tensorviz_owner = np.asarray(owner, dtype=np.int64)
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


def _rects_of(pieces: list[tuple[np.ndarray, int, float]], height: float = BAR_HEIGHT,
              dy: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    runs, owner, ys = _runs_layer(pieces)
    return rect_vertices(runs[:, 0], runs[:, 1], ys + dy, height), owner


def _draw_storage_layers(d: "Diagram", ax: "Axes") -> None:
    rows = [(bi, float(b.lanes[0])) for bi, b in enumerate(d.blocks) if d.lanes[b.lanes[0]].kind == "storage"]
    owner = np.array([bi for bi, _ in rows], dtype=np.int64)
    sizes = np.array([d.blocks[bi].nbytes for bi in owner], dtype=np.float64)
    verts = rect_vertices(np.zeros(len(rows)), sizes, [y for _, y in rows])
    edge = 0.8 if lane_px(ax) >= 4 else 0.0
    _add(ax, "extents", verts, owner, facecolors=_EXTENT, edgecolors=_EDGE, linewidths=edge)
    for gid, attr in (("header", "header"), ("unreferenced", "unreferenced"),
                      ("storage-overlaps", "overlap_runs")):
        _add_marks(ax, gid, *_rects_of([(getattr(d.blocks[bi], attr), bi, y) for bi, y in rows]))
    _draw_separators(d, ax)
    label_storage_runs(d, ax, rows)


def _draw_separators(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.collections import LineCollection

    ys = [d.blocks[i].lanes[0] - 0.5 for i in range(1, len(d.blocks))]
    if d.blocks and d.lanes and d.lanes[-1].block < 0:
        ys.append(d.blocks[-1].lanes[-1] + 0.5)
    if lane_px(ax) < 4:  # hundreds of storages: lines between them would only darken the picture
        ys = []
    segs = [[(0, y), (1, y)] for y in ys]
    lines = LineCollection(segs, colors="#999999", linewidths=0.6, transform=ax.get_yaxis_transform())
    lines.set_gid("separators")
    lines.tensorviz_owner = np.arange(len(segs))
    ax.add_collection(lines, autolim=False)


def _draw_bar_layers(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.colors import to_rgba_array

    c = d.columns
    colors = to_rgba_array(list(c.colors))[c.color] if len(c.colors) else np.zeros((0, 4))
    full = np.flatnonzero(~c.empty)
    x0, x1 = c.start[full].astype(np.float64), c.stop[full].astype(np.float64)
    face = colors[full]
    face[c.sparse[full], 3] = 0.22  # the span of a strided view is a light band; its runs are solid
    edge = np.clip(face * [0.6, 0.6, 0.6, 1], 0, 1)
    # Outline bars wide and tall enough to show it; a thousand sub-pixel outlines would only
    # darken the row. (A transparent edge, not a per-bar width: matplotlib scales dashes per
    # width; and no edges at all when rows are a few pixels tall: Agg strokes even clear ones.)
    edge[:, 3] = (x1 - x0) * px_per_byte(d, ax) >= 4
    if lane_px(ax) < 3:
        edge = "none"
    dashed = c.non_contiguous[full]
    style = [(0, (3, 2)) if k else "solid" for k in dashed] if dashed.any() else "solid"
    _add(ax, "spans", rect_vertices(x0, x1, c.lane[full]), full, facecolors=face, edgecolors=edge,
         linewidths=0.7, linestyles=style)
    _draw_footprints(d, ax, colors)
    _draw_flag_layers(d, ax)
    _draw_empty(d, ax)


def _draw_footprints(d: "Diagram", ax: "Axes", colors: np.ndarray) -> None:
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


def _draw_flag_layers(d: "Diagram", ax: "Axes") -> None:
    bars, c = d.bars, d.columns
    # A strip along the bottom of the bar: marked, but the bar's colour and name stay readable.
    pieces = [(bars[i].overlap_runs, i, float(bars[i].lane)) for i in np.flatnonzero(c.overlaps_other).tolist()]
    _add_marks(ax, "overlaps", *_rects_of(pieces, BAR_HEIGHT * STRIP, BAR_HEIGHT * (1 - STRIP) / 2))
    for gid in ("expanded", "reinterpreted"):
        idx = np.flatnonzero(getattr(c, gid) & ~c.empty)
        _add_marks(ax, gid, rect_vertices(c.start[idx], c.stop[idx], c.lane[idx]), idx)


def _draw_empty(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.collections import LineCollection

    c = d.columns
    idx = np.flatnonzero(c.empty)
    x, y = c.start[idx].astype(np.float64), c.lane[idx].astype(np.float64)
    segs = np.stack((np.stack((x, y - 0.4), 1), np.stack((x, y + 0.4), 1)), 1)
    lines = LineCollection(segs, colors=_EDGE, linewidths=1.5)
    lines.set_gid("empty")
    lines.tensorviz_owner = idx.astype(np.int64)
    ax.add_collection(lines, autolim=False)
