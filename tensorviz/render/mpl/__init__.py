"""Draw a :class:`~tensorviz.plan.diagram.Diagram` with matplotlib, without pyplot.

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
storage row), ``past-end`` (bytes views address past their storage's end: a freed storage),
``spans`` (every bar's byte range), ``footprints`` (the exact runs inside
non-dense spans), ``overlaps`` (a white strip along the bottom of a bar, hatched, over the bytes
another bar also reads), ``expanded``/``reinterpreted`` (hatched flag overlays), ``slivers``
(a 1-pixel tick over each bar too narrow to see that has a row to itself), ``empty`` (a tick
for each empty view), ``separators`` (lines between storages), ``logical-groups`` (a band
behind the lanes of one logical tensor's stored pieces, labelled ``logical-label``).

>>> import torch, tensorviz as tv
>>> from tensorviz.render.mpl import render, drawn_rects
>>> a = torch.rand(8, 10, 50)
>>> fig = render(tv.diagram({"a": a, "b": a[2:4]}))
>>> sorted(set(drawn_rects(fig, "spans")[1][:, 0].tolist()))  # b's bytes
[4000.0, 8000.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensorviz.core.errors import OptionError
from tensorviz.core.rows import gc_paused
from tensorviz.plan.labels import names_label
from tensorviz.render.mpl.geom import BAR_HEIGHT, STRIP, labels_fit, rect_vertices
from tensorviz.render.mpl.layers import (
    HATCH_LIMIT,
    STYLE,
    draw_bar_layers,
    draw_logical_groups,
    draw_storage_layers,
)
from tensorviz.render.mpl.overview import draw_overview, overview_inches
from tensorviz.render.mpl.words import (
    LABEL_BUDGET,
    LANE_CHARS,
    draw_bar_labels,
    draw_header,
    draw_lane_labels,
    draw_legend,
    draw_tied_notes,
    label_storage_runs,
    lane_names,
    legend_entries,
    legend_inches,
    notes_inches,
    short_label,
)
from tensorviz.render.theme import GRID, MUTED

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tensorviz.plan.diagram import Diagram

__all__ = [
    "render",
    "to_png",
    "check_width",
    "png_bytes",
    "layer",
    "names_at",
    "drawn_rects",
    "texts",
    "rect_vertices",
    "figure_size",
    "short_label",
    "BAR_HEIGHT",
    "STRIP",
    "HATCH_LIMIT",
    "LABEL_BUDGET",
    "STYLE",
]

_INCH_PER_LANE = 0.26
_INCH_PER_CHAR = 0.068  # a lane label's character, on average
_TOP = 0.42  # inches above the axes, for the header line
_MAX_PLOT_INCHES = 14.0
_MAX_WIDTH = 100.0  # inches: 10,000 pixels at 100 dpi
_BLOCK_LAYERS = ("extents", "header", "unreferenced", "storage-overlaps", "past-end")


def figure_size(d: Diagram, width: float | None = None) -> tuple[float, float, float, float]:
    """``(width, height, left, bottom)`` in inches for a diagram: lanes get ~0.26 in each (less
    when there are hundreds), the left margin fits the (truncated) lane labels, the bottom one
    the axis and, if any, the legend."""
    width = check_width(width)
    n = max(len(d.lanes), 1)
    plot_h = float(np.clip(n * _INCH_PER_LANE, 0.62, _MAX_PLOT_INCHES))
    left = _left_margin(d, plot_h, width)[0]
    bottom = 0.95 + legend_inches(d, width or 10.0) if legend_entries(d) else 0.62
    if d.overview is not None:  # the overview panel goes under the lanes
        bottom += overview_inches(d.overview, width or 10.0)
    bottom += notes_inches(d, _left_margin(d, plot_h, width)[1], width or 10.0)  # the tied names, last
    return (width or 10.0), plot_h + bottom + _TOP, left, bottom


def _left_margin(d: Diagram, plot_h: float, width: float | None) -> tuple[float, int]:
    """Inches left of the axes for the lane labels, and the characters a label may have: as
    many as the longest label needs (up to :data:`LANE_CHARS`), but at most 40 % of a narrow
    figure -- there the labels get shorter, not the plot."""
    n = max(len(d.lanes), 1)
    tied = lane_names(d)  # a row of tied names is labelled "first +3" when they do not all fit
    sizes = [len(names_label(tied[i], LANE_CHARS)) if i in tied else len(lane.label) for i, lane in enumerate(d.lanes)]
    longest = min(max(sizes, default=8), LANE_CHARS)
    left = min(max(0.9, _INCH_PER_CHAR * longest + 0.25), 3.4) if labels_fit(n, plot_h) else 0.6
    cap = 0.4 * (width or 10.0)
    if left <= cap:
        return left, LANE_CHARS
    return cap, max(8, int((cap - 0.25) / _INCH_PER_CHAR))


def check_width(width: float | None) -> float | None:
    """A figure width in inches (None: the default), or a ValueError that says the unit.

    >>> check_width(8), check_width(None)
    (8.0, None)
    """
    if width is None:
        return None
    try:
        w = float(width)
    except (TypeError, ValueError):
        raise OptionError(f"width is a figure width in inches, e.g. width=8; got {width!r}") from None
    if not 0.5 <= w <= _MAX_WIDTH:
        hint = f"; for {w:g} pixels at dpi=100 pass width={w / 100:g}" if w > _MAX_WIDTH else ""
        raise OptionError(f"width is a figure width in inches, from 0.5 to {_MAX_WIDTH:g}; got {width!r}{hint}")
    return w


def render(
    diagram: Diagram, ax: Axes | None = None, *, figure: Figure | None = None, width: float | None = None
) -> Figure:
    """Draw a diagram and return the figure.

    Args:
        diagram: the plan (see :func:`tensorviz.diagram`).
        ax: draw into these axes (their figure is returned, not resized).
        figure: clear and reuse this figure (resized to fit the diagram), e.g. in a widget.
        width: figure width in inches for a new or reused figure (default 10).

    Returns:
        The ``matplotlib.figure.Figure`` (never a pyplot figure), with ``tensorviz_diagram``; a
        new one displays itself as a PNG in Jupyter (see :mod:`tensorviz.render.mpl.figure`).

    >>> import torch, tensorviz as tv
    >>> fig = render(tv.diagram({"w": torch.zeros(4, 4)}))
    >>> sorted(c.get_gid() for c in fig.axes[0].collections)[:2]
    ['empty', 'extents']
    """
    with gc_paused():  # thousands of paths and artists: no collector pass over the caller's objects
        return _render(diagram, ax, figure, width)


def _render(diagram: Diagram, ax: Axes | None, figure: Figure | None, width: float | None) -> Figure:
    from tensorviz.render.mpl.figure import TensorvizFigure, literal_texts
    from tensorviz.render.theme import themed

    own = ax is None  # a figure of our own follows the notebook's theme as an SVG; a caller's axes do not
    if ax is None:
        w, h, left, bottom = figure_size(diagram, width)
        fig = figure if figure is not None else TensorvizFigure(figsize=(w, h))
        if figure is not None:
            fig.clear()
            fig.set_size_inches(w, h, forward=True)
        ax = fig.add_axes((left / w, bottom / h, 1 - (left + 0.3) / w, 1 - (bottom + _TOP) / h))
        chars = _left_margin(diagram, h - bottom - _TOP, width)[1]
        ax.tensorviz_label_chars = chars  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
        notes = notes_inches(diagram, chars, w)
        if diagram.overview is not None:
            draw_overview(diagram.overview, fig, notes, overview_inches(diagram.overview, w))
        draw_tied_notes(diagram, fig, chars)
    fig = ax.figure  # type: ignore[assignment]  # the axes' Figure (never a SubFigure here)
    _draw(diagram, ax)
    literal_texts(fig)  # names are data, never mathtext
    if own:
        themed(fig)
    fig.tensorviz_diagram = diagram  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    ax.tensorviz_diagram = diagram  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    return fig


def to_png(diagram: Diagram, *, figure: Figure | None = None, dpi: int = 100, width: float | None = None) -> bytes:
    """PNG bytes of a diagram (reusing ``figure`` if given; ``width`` in inches as in :func:`render`).

    >>> import torch, tensorviz as tv
    >>> to_png(tv.diagram({"w": torch.zeros(4, 4)}))[:4]
    b'\\x89PNG'
    """
    return png_bytes(render(diagram, figure=figure, width=width), dpi=dpi)


def png_bytes(fig: Figure, *, dpi: int = 100, compress_level: int = 6) -> bytes:
    """PNG bytes of a figure (see :func:`tensorviz.render.mpl.figure.png_bytes`)."""
    from tensorviz.render.mpl.figure import png_bytes as _png_bytes

    return _png_bytes(fig, dpi=dpi, compress_level=compress_level)


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
def _layers(fig_or_ax: Any) -> list[Artist]:
    axes = fig_or_ax.axes if hasattr(fig_or_ax, "axes") and isinstance(fig_or_ax.axes, list) else [fig_or_ax]
    return [a for ax in axes for a in (*ax.collections, *ax.patches) if a.get_gid() is not None]


def layer(fig_or_ax: Any, gid: str) -> Artist:
    """The layer artist with this gid: a collection, or the ``PathPatch`` of a mark layer
    (KeyError listing the gids present)."""
    found = [a for a in _layers(fig_or_ax) if a.get_gid() == gid]
    if not found:
        present = sorted({a.get_gid() for a in _layers(fig_or_ax)}, key=str)
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
    return art.get_path().vertices.reshape(-1, 5, 2)[:, :4]  # type: ignore[attr-defined]  # a PathPatch layer (typed as Artist)


def names_at(fig_or_ax: Any, gid: str, index: int) -> tuple[str, ...]:
    """The names drawn by rectangle ``index`` of layer ``gid`` (a storage's names for the
    storage-level layers)."""
    owner = int(layer(fig_or_ax, gid).tensorviz_owner[index])  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
    d = fig_or_ax.tensorviz_diagram
    if gid in _BLOCK_LAYERS:
        block = d.blocks[owner]
        return tuple(n for i in block.bars for n in d.bars[i].names)
    return d.bars[owner].names


# -- drawing steps ----------------------------------------------------------------------------
def _draw(d: Diagram, ax: Axes) -> None:
    # 1. axes frame and byte axis; 2. storage layers; 3. bar layers; 4. labels and header.
    _setup_axes(d, ax)
    draw_logical_groups(d, ax)
    draw_storage_layers(d, ax)
    label_storage_runs(d, ax)
    draw_bar_layers(d, ax)
    draw_lane_labels(d, ax)
    draw_bar_labels(d, ax)
    draw_header(d, ax)
    draw_legend(d, ax, STYLE)


def _setup_axes(d: Diagram, ax: Axes) -> None:
    from tensorviz.render.mpl.axis import ByteFormatter, ByteLocator

    lo, hi = d.x_range
    ax.set_xlim(lo, hi)
    ax.set_ylim(max(len(d.lanes), 1) - 0.5, -0.5)
    if not d.lanes:
        ax.text(
            0.5,
            0.5,
            "nothing to draw: no tensor matches the filters",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            fontstyle="italic",
            color=MUTED,
        )
    ax.xaxis.set_major_locator(ByteLocator(nbins=_tick_bins(ax)))
    ax.xaxis.set_major_formatter(ByteFormatter())
    ax.tick_params(axis="x", labelsize=8)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color=GRID, linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    what = "file" if d.blocks and all(b.device == "file" for b in d.blocks) else "storage"
    ax.set_xlabel(
        f"bytes from the start of each {what}"
        if d.byte_range is None
        else f"bytes from the start of the {what} (zoomed)",
        fontsize=8,
    )
    ax.format_coord = lambda x, y: _coord_text(d, x, y)  # type: ignore[method-assign]  # matplotlib documents assigning format_coord


def _tick_bins(ax: Axes) -> int:
    """Most ticks for the axis length: one per 0.6 inch (a label like "1.5 KiB" is ~0.4 inch
    wide), from 2 to 8, so a narrow figure gets fewer ticks rather than labels on each other."""
    inches = ax.get_position().width * ax.figure.get_figwidth()  # type: ignore[union-attr]  # axes of a top-level Figure (the stubs allow a SubFigure)
    return int(np.clip(inches // 0.6, 2, 8))


def _coord_text(d: Diagram, x: float, y: float) -> str:
    from tensorviz.render.mpl.axis import readout

    text = readout(x)
    lane_i = int(np.floor(y + 0.5))
    if 0 <= lane_i < len(d.lanes):
        lane = d.lanes[lane_i]
        hit = [b for b in d.bars if b.lane == lane_i and b.start <= x < b.stop]
        text += " · " + (hit[0].label + f" [{hit[0].start}, {hit[0].stop})" if hit else lane.label)
    return text
