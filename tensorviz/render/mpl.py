"""Draw a :class:`~tensorviz.diagram.Diagram` with matplotlib, without pyplot.

One ``PolyCollection`` per visual layer, built from a numpy vertex array, so ten thousand bars
cost about as much as ten. Each collection has a gid and a ``tensorviz_owner`` int array
mapping its polygons back to the diagram (a bar index, or a block index for the storage-level
layers); :func:`names_at` turns that into names. The Diagram itself is attached to the figure
and the axes as ``tensorviz_diagram``.

Layers (gids): ``extents`` (storage rows), ``unreferenced`` (bytes no view reads, hatched),
``storage-overlaps`` (bytes read by two or more bars, on the storage row), ``spans`` (every
bar's byte range), ``footprints`` (the exact runs inside non-dense spans), ``overlaps`` (bytes
of a bar another bar also reads), ``expanded``/``reinterpreted`` (hatched flag overlays),
``empty`` (a tick for each empty view), ``separators`` (lines between storages).

>>> import torch, tensorviz as tv
>>> from tensorviz.render.mpl import render, layer
>>> a = torch.rand(8, 10, 50)
>>> fig = render(tv.diagram({"a": a, "b": a[2:4]}))
>>> sorted(set(layer(fig, "spans").get_paths()[1].vertices[:, 0].tolist()))  # b's bytes
[4000.0, 8000.0]
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .._units import format_bytes
from .text import truncate_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.collections import Collection
    from matplotlib.figure import Figure

    from ..diagram import Bar, Diagram

__all__ = ["render", "to_png", "layer", "names_at", "rect_vertices", "figure_size", "short_label"]

BAR_HEIGHT = 0.72
RUN_BUDGET = 200_000  # most footprint polygons drawn; above it sub-pixel gaps are merged
LABEL_BUDGET = 300  # most in-bar text labels
HATCH_LIMIT = 400  # most polygons a layer hatches; above, a translucent fill
_EXTENT = "#e9e9e9"
_EDGE = "#444444"
_OVERLAP = "#cc3311"
_UNREF = "#9a9a9a"
_INCH_PER_LANE = 0.26
_TOP = 0.42  # inches above the axes, for the header line
_MAX_PLOT_INCHES = 14.0


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
    longest = max((len(_lane_text(lane.label)) for lane in d.lanes), default=8)
    left = min(max(0.9, 0.068 * longest + 0.25), 3.4) if _labels_fit(n, plot_h) else 0.6
    bottom = 0.95 if _legend_handles(d) else 0.62
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
    ['empty', 'expanded']
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
    fig = render(diagram, figure=figure)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def layer(fig_or_ax: Any, gid: str) -> "Collection":
    """The collection with this gid (KeyError listing the gids present)."""
    axes = fig_or_ax.axes if hasattr(fig_or_ax, "axes") and isinstance(fig_or_ax.axes, list) else [fig_or_ax]
    for ax in axes:
        for coll in ax.collections:
            if coll.get_gid() == gid:
                return coll
    present = sorted({c.get_gid() for ax in axes for c in ax.collections})
    raise KeyError(f"no layer {gid!r}; layers drawn: {present}")


def names_at(fig_or_ax: Any, gid: str, index: int) -> tuple[str, ...]:
    """The names drawn by polygon ``index`` of layer ``gid`` (a storage's names for the
    storage-level layers)."""
    coll = layer(fig_or_ax, gid)
    owner = int(coll.tensorviz_owner[index])
    d = fig_or_ax.tensorviz_diagram
    if gid in _BLOCK_LAYERS:
        block = d.blocks[owner]
        return tuple(n for i in block.bars for n in d.bars[i].names)
    return d.bars[owner].names


_BLOCK_LAYERS = ("extents", "unreferenced", "storage-overlaps")


# -- drawing steps ----------------------------------------------------------------------------
def _draw(d: "Diagram", ax: "Axes") -> None:
    # 1. axes frame and byte axis; 2. storage layers; 3. bar layers; 4. labels and header.
    _setup_axes(d, ax)
    _draw_storage_layers(d, ax)
    _draw_bar_layers(d, ax)
    _draw_lane_labels(d, ax)
    _draw_bar_labels(d, ax)
    _draw_header(d, ax)
    _draw_legend(d, ax)


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


def _add(ax: "Axes", gid: str, verts: np.ndarray, owner: Sequence[int], **style: Any) -> "Collection":
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    if style.get("hatch") and len(verts) > HATCH_LIMIT:
        # Agg hatches each polygon separately (~1 ms each); past a few hundred marks a hatch is
        # too small to see anyway, so the layer becomes a translucent fill of the same shapes.
        style = dict(style, facecolors=to_rgba(style["edgecolors"], 0.45), edgecolors="none")
        style.pop("hatch")
    coll = PolyCollection(verts, closed=True, **style)
    coll.set_gid(gid)
    coll.tensorviz_owner = np.asarray(owner, dtype=np.int64)
    ax.add_collection(coll, autolim=False)
    return coll


def _runs_layer(pieces: list[tuple[np.ndarray, int, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate ``(runs, owner, y)`` pieces into runs ``(k, 2)``, owner and y arrays."""
    if not pieces:
        return np.zeros((0, 2)), np.zeros(0, dtype=np.int64), np.zeros(0)
    runs = np.concatenate([r for r, _, _ in pieces]).astype(np.float64)
    counts = [len(r) for r, _, _ in pieces]
    owner = np.repeat([o for _, o, _ in pieces], counts)
    ys = np.repeat([y for _, _, y in pieces], counts)
    return runs, owner, ys


def _draw_storage_layers(d: "Diagram", ax: "Axes") -> None:
    extent = [(np.array([[0, b.nbytes]]), bi, float(b.lanes[0])) for bi, b in enumerate(d.blocks)
              if d.lanes[b.lanes[0]].kind == "storage"]
    edge = 0.8 if _lane_px(ax) >= 4 else 0.0
    for gid, key, style in (
            ("extents", None, dict(facecolors=_EXTENT, edgecolors=_EDGE, linewidths=edge)),
            ("unreferenced", "unreferenced", dict(facecolors="white", edgecolors=_UNREF, hatch="////",
                                                  linewidths=0.6)),
            ("storage-overlaps", "overlap_runs", dict(facecolors="none", edgecolors=_OVERLAP,
                                                      hatch="xxxx", linewidths=0.8))):
        pieces = extent if key is None else [(getattr(d.blocks[bi], key), bi, y) for _, bi, y in extent]
        runs, owner, ys = _runs_layer(pieces)
        verts = rect_vertices(runs[:, 0], runs[:, 1], ys) if len(owner) else np.zeros((0, 4, 2))
        _add(ax, gid, verts, owner, **style)
    _draw_separators(d, ax)
    _label_unreferenced(d, ax, extent)


def _label_unreferenced(d: "Diagram", ax: "Axes", extent: list) -> None:
    """Write "unreferenced" inside the runs wide enough to hold it (the row label has the total)."""
    px = _px_per_byte(d, ax)
    lo, hi = d.x_range
    drawn = 0
    for _, bi, y in extent:
        for a, b in d.blocks[bi].unreferenced.tolist():
            a, b = max(a, lo), min(b, hi)
            if (b - a) * px >= 80 and drawn < 50:
                ax.text((a + b) / 2, y, f"unreferenced {format_bytes(b - a)}", ha="center", va="center",
                        fontsize=6.5, color="#555555", clip_on=True,
                        bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none"))
                drawn += 1


def _draw_separators(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.collections import LineCollection

    ys = [d.blocks[i].lanes[0] - 0.5 for i in range(1, len(d.blocks))]
    if d.blocks and d.lanes and d.lanes[-1].block < 0:
        ys.append(d.blocks[-1].lanes[-1] + 0.5)
    if _lane_px(ax) < 4:  # hundreds of storages: lines between them would only darken the picture
        ys = []
    segs = [[(0, y), (1, y)] for y in ys]
    lines = LineCollection(segs, colors="#999999", linewidths=0.6, transform=ax.get_yaxis_transform())
    lines.set_gid("separators")
    lines.tensorviz_owner = np.arange(len(segs))
    ax.add_collection(lines, autolim=False)


def _draw_bar_layers(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.colors import to_rgba_array

    bars = d.bars
    full = [i for i, b in enumerate(bars) if not b.empty]
    colors = _colors(bars, to_rgba_array)
    x0 = np.array([bars[i].start for i in full], dtype=np.float64)
    x1 = np.array([bars[i].stop for i in full], dtype=np.float64)
    ys = np.array([bars[i].lane for i in full], dtype=np.float64)
    face = colors[full] if full else np.zeros((0, 4))
    sparse = np.array([bars[i].runs is not None for i in full], dtype=bool)
    if len(face):
        face = face.copy()
        face[sparse, 3] = 0.22  # the span of a strided view is a light band; its runs are solid
    edge = np.clip(colors[full] * [0.6, 0.6, 0.6, 1], 0, 1) if full else np.zeros((0, 4))
    dashed = [(0, (3, 2)) if bars[i].non_contiguous else "solid" for i in full]
    # Outline bars wide enough to show it; a thousand sub-pixel outlines would only darken the row.
    lw = np.where((x1 - x0) * _px_per_byte(d, ax) >= 4, 0.7, 0.0)
    _add(ax, "spans", rect_vertices(x0, x1, ys), full, facecolors=face, edgecolors=edge,
         linewidths=lw, linestyles=dashed or "solid")
    _draw_footprints(d, ax, colors)
    _draw_flag_layers(d, ax)
    _draw_empty(d, ax)


def _colors(bars: Sequence["Bar"], to_rgba_array) -> np.ndarray:
    if not bars:
        return np.zeros((0, 4))
    uniq = sorted({b.color for b in bars})
    table = dict(zip(uniq, to_rgba_array(uniq)))
    return np.array([table[b.color] for b in bars])


def _draw_footprints(d: "Diagram", ax: "Axes", colors: np.ndarray) -> None:
    pieces = [(b.runs, i, float(b.lane)) for i, b in enumerate(d.bars) if b.runs is not None]
    total = sum(len(r) for r, _, _ in pieces)
    if total > RUN_BUDGET:  # merge gaps narrower than a pixel: identical picture, fewer polygons
        gap = (d.x_range[1] - d.x_range[0]) / 2000
        pieces = [(_coalesce(r, gap), i, y) for r, i, y in pieces]
    runs, owner, ys = _runs_layer(pieces)
    verts = rect_vertices(runs[:, 0], runs[:, 1], ys) if len(owner) else np.zeros((0, 4, 2))
    face = colors[owner] if len(owner) else np.zeros((0, 4))
    _add(ax, "footprints", verts, owner, facecolors=face, edgecolors="none", linewidths=0)


def _coalesce(runs: np.ndarray, gap: float) -> np.ndarray:
    """Merge runs separated by less than ``gap`` bytes (drawing only; never used for facts)."""
    if len(runs) < 2:
        return runs
    breaks = np.flatnonzero(runs[1:, 0] - runs[:-1, 1] >= gap)
    firsts = np.concatenate(([0], breaks + 1))
    lasts = np.concatenate((breaks, [len(runs) - 1]))
    return np.stack((runs[firsts, 0], runs[lasts, 1]), axis=1)


def _draw_flag_layers(d: "Diagram", ax: "Axes") -> None:
    bars = d.bars
    pieces = [(b.overlap_runs, i, float(b.lane)) for i, b in enumerate(bars) if b.overlap_runs is not None]
    runs, owner, ys = _runs_layer(pieces)
    # A strip along the bottom of the bar: marked, but the bar's colour and name stay readable.
    strip = BAR_HEIGHT * 0.38
    verts = (rect_vertices(runs[:, 0], runs[:, 1], ys + (BAR_HEIGHT - strip) / 2, strip)
             if len(owner) else np.zeros((0, 4, 2)))
    _add(ax, "overlaps", verts, owner, facecolors="none", edgecolors=_OVERLAP, hatch="xxx", linewidths=0.5)
    for gid, attr, hatch in (("expanded", "expanded", "...."), ("reinterpreted", "reinterpreted", "\\\\\\\\")):
        idx = [i for i, b in enumerate(bars) if getattr(b, attr) and not b.empty]
        verts = rect_vertices([bars[i].start for i in idx], [bars[i].stop for i in idx],
                              [bars[i].lane for i in idx]) if idx else np.zeros((0, 4, 2))
        _add(ax, gid, verts, idx, facecolors="none", edgecolors="#222222", hatch=hatch, linewidths=0)


def _draw_empty(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.collections import LineCollection

    idx = [i for i, b in enumerate(d.bars) if b.empty]
    segs = [[(d.bars[i].start, d.bars[i].lane - 0.4), (d.bars[i].start, d.bars[i].lane + 0.4)] for i in idx]
    lines = LineCollection(segs, colors=_EDGE, linewidths=1.5)
    lines.set_gid("empty")
    lines.tensorviz_owner = np.asarray(idx, dtype=np.int64)
    ax.add_collection(lines, autolim=False)


# -- text -------------------------------------------------------------------------------------
def _lane_text(label: str) -> str:
    return truncate_label(label, 44)


def _labels_fit(n_lanes: int, plot_inches: float) -> bool:
    return plot_inches / max(n_lanes, 1) >= 0.085  # about 8.5 px per lane at 100 dpi


def _ax_inches(ax: "Axes") -> tuple[float, float]:
    fw, fh = ax.figure.get_size_inches()
    pos = ax.get_position()
    return pos.width * fw, pos.height * fh


def _px_per_byte(d: "Diagram", ax: "Axes") -> float:
    lo, hi = d.x_range
    return _ax_inches(ax)[0] * 100 / max(hi - lo, 1)


def _lane_px(ax: "Axes") -> float:
    return _ax_inches(ax)[1] * 100 / max(abs(ax.get_ylim()[0] - ax.get_ylim()[1]), 1)


def _draw_lane_labels(d: "Diagram", ax: "Axes") -> None:
    px = _lane_px(ax)
    size = float(np.clip(px * 0.45, 5, 8.5))
    show = [i for i, lane in enumerate(d.lanes) if lane.block >= 0]
    if px < 5.5:  # too dense for every row: label only the storage rows, if even those fit
        show = [i for i in show if d.lanes[i].kind in ("storage", "simple")]
        if len(show) * 6 > px * len(d.lanes):
            show = []
    ax.set_yticks(show, [_lane_label(d, i) for i in show], fontsize=size)
    for tick, i in zip(ax.get_yticklabels(), show):
        kind = d.lanes[i].kind
        if kind == "storage":
            tick.set_fontweight("bold")
        elif kind == "more":
            tick.set_fontstyle("italic")
    for i, lane in enumerate(d.lanes):  # diagram-wide rows: summary, hidden storages
        if lane.block < 0:
            ax.text(0.0, i, "  " + lane.label, transform=ax.get_yaxis_transform(), va="center",
                    ha="left", fontsize=8.5, fontstyle="italic", color="#333333")


def _lane_label(d: "Diagram", i: int) -> str:
    lane = d.lanes[i]
    text = _lane_text(lane.label)
    if lane.kind == "storage":
        block = d.blocks[lane.block]
        if block.unreferenced_nbytes and d.options.show_unreferenced:
            text += f"\n{format_bytes(block.unreferenced_nbytes)} unreferenced"
    return text


def _draw_bar_labels(d: "Diagram", ax: "Axes") -> None:
    """Names inside bars on rows holding several bars (packed rows, "more" rows), where they fit."""
    lanes_multi = {}
    for i, b in enumerate(d.bars):
        if not b.empty:
            lanes_multi.setdefault(b.lane, []).append(i)
    candidates = [i for idx in lanes_multi.values() if len(idx) > 1 for i in idx]
    if not candidates:
        return
    suffix = _common_suffix([d.bars[i].label for i in candidates[:2000]])
    lo, hi = d.x_range
    px_per_byte = _px_per_byte(d, ax)
    drawn = 0
    for i in candidates:
        b = d.bars[i]
        a, z = max(b.start, lo), min(b.stop, hi)
        fits = int((z - a) * px_per_byte / 5.6) - 1  # characters of 6.5 pt text that fit
        text = short_label(b.label, fits, suffix) if drawn < LABEL_BUDGET else None
        if text is None:
            continue
        ax.text((a + z) / 2, b.lane, text, ha="center", va="center", fontsize=6.5, clip_on=True)
        drawn += 1


def _common_suffix(labels: list[str]) -> str:
    """The dotted tail all labels share (".weight"), to drop from in-bar labels."""
    if len(labels) < 2:
        return ""
    tail = os.path.commonprefix([s[::-1] for s in labels])[::-1]
    return tail[tail.find("."):] if "." in tail else ""


def short_label(label: str, fits: int, suffix: str = "") -> str | None:
    """The label, or its most specific dotted tail without the shared suffix, in ``fits``
    characters (None if not even 4 fit).

    >>> short_label("layers.12.k_proj.weight", 12, ".weight"), short_label("a.b", 2)
    ('12.k_proj', None)
    """
    if len(label) <= fits:
        return label
    base = label[: len(label) - len(suffix)] if suffix and label.endswith(suffix) and label != suffix else label
    parts = base.split(".")
    for k in range(len(parts)):
        cand = ".".join(parts[k:])
        if 4 <= len(cand) <= fits:
            return cand
    return None


def _draw_header(d: "Diagram", ax: "Axes") -> None:
    text = d.header.text
    if d.byte_range is not None:
        text += f" · zoom [{d.byte_range[0]:,}, {d.byte_range[1]:,})"
    ax.set_title(text, loc="left", fontsize=9, pad=8)


def _draw_legend(d: "Diagram", ax: "Axes") -> None:
    from matplotlib.patches import Patch

    handles = [Patch(**style) for style in _legend_handles(d)]
    if handles:
        below = 0.42 / max(_ax_inches(ax)[1], 0.1)  # under the tick labels and axis title
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -below),
                  ncol=len(handles), fontsize=7, frameon=False, handlelength=1.6)


def _legend_handles(d: "Diagram") -> list[dict]:
    """Legend entries for the marks this diagram uses (patch keyword arguments)."""
    handles: list[dict] = []
    bars = d.bars
    if any(b.runs is not None for b in bars):
        handles.append(dict(facecolor="#777777", edgecolor="#444444", label="bytes read (exact)"))
        handles.append(dict(facecolor=(0.47, 0.47, 0.47, 0.22), edgecolor="#444444", label="in span, not read"))
    if any(len(b.unreferenced) for b in d.blocks):
        handles.append(dict(facecolor="white", edgecolor=_UNREF, hatch="////", label="unreferenced"))
    if any(b.overlaps_other for b in bars):
        handles.append(dict(facecolor="none", edgecolor=_OVERLAP, hatch="xxx", label="read by ≥2 bars"))
    if any(b.non_contiguous for b in bars):
        handles.append(dict(facecolor="none", edgecolor=_EDGE, linestyle=(0, (3, 2)), label="non-contiguous"))
    if any(b.expanded for b in bars):
        handles.append(dict(facecolor="none", edgecolor=_EDGE, hatch="....", label="expanded (stride 0)"))
    if any(b.empty for b in bars):
        handles.append(dict(facecolor=_EDGE, edgecolor=_EDGE, label="empty view (a tick at its offset)"))
    if any(b.reinterpreted for b in bars):
        handles.append(dict(facecolor="none", edgecolor=_EDGE, hatch="\\\\\\\\", label="other dtype"))
    return handles
