"""The words of a matplotlib diagram: lane labels, in-bar names, run labels, header, legend.

Private to :mod:`tensorviz.render.mpl`; sizes are in pixels at 100 dpi, so what fits on screen
is what gets written.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorviz.core.names import elide_names, terminal
from tensorviz.core.units import exact_bytes, format_bytes
from tensorviz.plan.labels import TIED, names_label
from tensorviz.render.mpl.geom import BAR_HEIGHT, STRIP, ax_inches, lane_px, px_per_byte
from tensorviz.render.text import truncate_label
from tensorviz.render.theme import BACKGROUND, DESIGN_INCHES, MIN_FONT_PT, MUTED

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from tensorviz.plan.diagram import Diagram

LABEL_BUDGET = 300  # most in-bar text labels
LANE_CHARS = 44  # longest row label; longer names keep their end
RUN_LABELS = 50  # most "unreferenced" / "header" labels written inside storage rows
_SMALL = 7.0  # points: names inside bars and runs (>= MIN_FONT_PT: 9 CSS px in a 590-px static picture)
_CHAR_PX = 6.0  # pixels of one character of _SMALL text, on average, at 100 dpi
_MUTED = MUTED  # follows the theme in an SVG (tensorviz.render.theme)


# -- lane labels ------------------------------------------------------------------------------
def draw_lane_labels(d: Diagram, ax: Axes) -> None:
    """Row labels left of the axes, as plain texts (gid ``lane-label``): y tick labels would
    cost a Tick -- two markers, a grid line and two texts -- per row, on every redraw."""
    from matplotlib.transforms import offset_copy

    px = lane_px(ax)
    size = float(np.clip(px * 0.45, 5, 8.5))
    show = [i for i, lane in enumerate(d.lanes) if lane.block >= 0]
    if px < 5.5:  # too dense for every row: label only the storage rows, if even those fit
        show = [i for i in show if d.lanes[i].kind in ("storage", "simple")]
        if len(show) * 6 > px * len(d.lanes):
            show = []
    ax.set_yticks([])
    left = offset_copy(ax.get_yaxis_transform(), fig=ax.figure, x=-3.5, units="points")  # type: ignore[arg-type]  # axes of a top-level Figure (the stubs allow a SubFigure)
    chars = min(LANE_CHARS, getattr(ax, "tensorviz_label_chars", LANE_CHARS))  # set by render() for its margin
    tied = lane_names(d)
    texts = {i: lane_label(d, i, chars, tied.get(i, ())) for i in show}
    plain = [i for i in show if d.lanes[i].kind in ("view", "simple") and i not in tied]  # names, not storages
    for i, text in zip(plain, elide_names([terminal(d.lanes[i].label) for i in plain], chars), strict=True):
        texts[i] = text  # names that would look the same keep where they differ
    for i in show:
        kind = d.lanes[i].kind
        ax.text(
            0.0,
            i,
            texts[i],
            transform=left,
            ha="right",
            va="center",
            fontsize=size,
            fontweight="bold" if kind == "storage" else "normal",
            fontstyle="italic" if kind == "more" else "normal",
            gid="lane-label",
        )
    for i, lane in enumerate(d.lanes):  # diagram-wide rows: summary, hidden storages
        if lane.block < 0:
            ax.text(
                0.0,
                i,
                "  " + lane.label,
                transform=ax.get_yaxis_transform(),
                va="center",
                ha="left",
                fontsize=8.5,
                fontstyle="italic",
                color=MUTED,
                gid="lane-note",
            )


def storage_text(label: str, n: int = LANE_CHARS) -> str:
    """A storage row's label in ``n`` characters: its number and size stay; the middle (a file
    name) loses its extension, then its own middle (shard names differ at both ends); in a
    narrow margin "storage #3" becomes "#3", and last the middle goes.

    >>> storage_text("storage #0 · model-00001-of-00004.safetensors · 4.9 GiB", 40)
    'storage #0 · model-00001…00004 · 4.9 GiB'
    >>> storage_text("storage #0 · t1.safetensors · 196 B", 21), storage_text("storage #0 · t1.safetensors · 196 B", 13)
    ('#0 · t1 · 196 B', '#0 · 196 B')
    >>> storage_text("storage #0 · 2.3 KiB", 16)
    '#0 · 2.3 KiB'
    """
    parts = label.split(" · ")
    if len(label) <= n or len(parts) < 2:
        return truncate_label(label, n)
    head, middle, tail = parts[0], " · ".join(parts[1:-1]), parts[-1]
    short = head.removeprefix("storage ")
    for h in (head, short) if middle else ():
        shown = _fit_middle(middle, n - len(h) - len(tail) - 6)
        if shown is not None:
            return f"{h} · {shown} · {tail}"
    for text in (f"{head} · {tail}", f"{short} · {tail}"):
        if len(text) <= n:
            return text
    return truncate_label(label, n)


def _fit_middle(middle: str, room: int) -> str | None:
    """A file name in ``room`` characters: whole, without its extension, or with its own middle
    cut (keeping more of the start, where a shard's number is); None below 8 characters."""
    if len(middle) <= room:
        return middle
    if room < 8:
        return None
    stem, dot, ext = middle.rpartition(".")
    if dot and ext in _EXTENSIONS:
        middle = stem
    if len(middle) > room:
        start = (2 * (room - 1) + 2) // 3
        middle = middle[:start] + "…" + middle[len(middle) - (room - 1 - start) :]
    return middle


_EXTENSIONS = ("safetensors", "bin", "pt", "pth", "ckpt")


def lane_names(d: Diagram) -> dict[int, tuple[str, ...]]:
    """Per lane drawing one bar of several tied names (a span group), those names."""
    c = d.columns
    if not len(c.lane):
        return {}
    count = np.bincount(c.lane, minlength=len(d.lanes))
    one = np.flatnonzero(count[c.lane] == 1)
    return {int(c.lane[k]): d.bars[k].names for k in one.tolist() if len(d.bars[k].names) > 1}


def lane_label(d: Diagram, i: int, chars: int = LANE_CHARS, tied: tuple[str, ...] = ()) -> str:
    """A row's label in at most ``chars`` characters: a row of ``tied`` names shows them all or
    the first and how many more (:func:`tensorviz.plan.labels.names_label`); names are cut at a
    name boundary. A storage row adds its unreferenced bytes on a second line."""
    lane = d.lanes[i]
    label = terminal(lane.label)  # a name is one line of text: a newline in it is shown, not obeyed
    if tied:
        text = names_label([terminal(n) for n in tied], chars)
    else:
        text = storage_text(label, chars) if lane.kind == "storage" else truncate_label(label, chars)
    if lane.kind == "storage":
        block = d.blocks[lane.block]
        if "freed" in block.reasons:
            text += "\nfreed"
        elif block.unreferenced_nbytes and d.options.show_unreferenced:
            text += f"\n{format_bytes(block.unreferenced_nbytes)} unreferenced"
    return text


def label_storage_runs(d: Diagram, ax: Axes) -> None:
    """Write "header" and "unreferenced" inside the runs wide enough to hold the words."""
    px = px_per_byte(d, ax)
    lo, hi = d.x_range
    drawn = 0
    for block in d.blocks:
        y = block.lanes[0]
        if d.lanes[y].kind != "storage":
            continue
        # Drawn per cell, a run of "unreferenced" is cells holding an unread byte: its length
        # bounds the bytes no view reads in it (the storage's label gives the exact total).
        bound = " ≤" if any(d.bars[i].cell for i in block.bars) else ""
        for word, runs in (("header", block.header), ("unreferenced" + bound, block.unreferenced)):
            for a, b in runs.tolist():
                a, b = max(a, lo), min(b, hi)
                text = f"{word} {format_bytes(b - a)}"
                if (b - a) * px >= _CHAR_PX * len(text) + 6 and drawn < RUN_LABELS:
                    ax.text(
                        (a + b) / 2,
                        y,
                        text,
                        ha="center",
                        va="center",
                        gid="run-label",
                        fontsize=_SMALL,
                        color=_MUTED,
                        clip_on=True,
                        bbox=dict(boxstyle="square,pad=0.1", fc=BACKGROUND, ec="none"),
                    )
                    drawn += 1


# -- names inside bars ------------------------------------------------------------------------
def draw_bar_labels(d: Diagram, ax: Axes) -> None:
    """Names inside bars on rows holding several bars (packed rows, "more" rows), where they fit."""
    c = d.columns
    live = np.flatnonzero(~c.empty)
    crowded = np.bincount(c.lane[live], minlength=len(d.lanes)) > 1 if len(live) else np.zeros(0, bool)
    # bars in lane order (a stable sort keeps each lane's bars in their order)
    candidates = live[np.argsort(c.lane[live], kind="stable")]
    candidates = candidates[crowded[c.lane[candidates]]].tolist() if len(live) else []
    if not candidates:
        return
    labels = [terminal(d.bars[i].label) for i in candidates]
    suffix = common_suffix(labels[:2000])
    ambiguous = shared_tails(labels, suffix)
    lo, hi = d.x_range
    per_byte = px_per_byte(d, ax)
    drawn = 0
    for i in candidates:
        b = d.bars[i]
        a, z = max(b.start, lo), min(b.stop, hi)
        fits = int((z - a) * per_byte / _CHAR_PX) - 1  # characters of 7 pt text that fit
        text = short_label(terminal(b.label), fits, suffix, ambiguous) if fits >= 1 else None
        if text is None:
            continue
        # Above the overlap strip if the bar has one; white on dark bars, black on light ones.
        y = b.lane - (BAR_HEIGHT * STRIP / 2 if b.overlaps_other else 0.0)
        ax.text(
            (a + z) / 2,
            y,
            text,
            ha="center",
            va="center",
            fontsize=_SMALL,
            clip_on=True,
            color=ink(b.color, 0.22 if b.runs is not None else 1.0),
            gid="bar-label",
        )
        drawn += 1
        if drawn == LABEL_BUDGET:
            break


def ink(color: str, alpha: float = 1.0) -> str:
    """Black or white, whichever reads better on ``color`` (drawn at ``alpha`` over white).

    Black above a relative luminance of 0.22: a little above the point of equal WCAG
    contrast (0.18), because thin white strokes on mid-dark greens and browns read better
    than black ones.

    >>> ink("#aa3377"), ink("#228833"), ink("#ccbb44"), ink("#aa3377", alpha=0.22)
    ('white', 'white', 'black', 'black')
    """
    from matplotlib.colors import to_hex, to_rgb

    from tensorviz.plan.colors import relative_luminance

    rgb = alpha * np.array(to_rgb(color)) + (1 - alpha)
    return "black" if relative_luminance(to_hex(tuple(rgb.tolist()))) > 0.22 else "white"


def common_suffix(labels: list[str]) -> str:
    """The dotted tail all labels share (".weight"), to drop from in-bar labels."""
    if len(labels) < 2:
        return ""
    tail = os.path.commonprefix([s[::-1] for s in labels])[::-1]
    return tail[tail.find(".") :] if "." in tail else ""


def _base(label: str, suffix: str) -> str:
    return label[: len(label) - len(suffix)] if suffix and label.endswith(suffix) and label != suffix else label


def shared_tails(labels: list[str], suffix: str = "") -> frozenset[str]:
    """Dotted tails (without the shared suffix) that end two or more different labels: written
    alone they would not say which bar is which ("k_proj" of which layer?).

    >>> sorted(shared_tails(["layers.0.k_proj.weight", "layers.1.k_proj.weight"], ".weight"))
    ['k_proj']
    """
    owner: dict[str, str] = {}
    shared: set[str] = set()
    for label in dict.fromkeys(labels):
        parts = _base(label, suffix).split(".")
        for k in range(1, len(parts)):
            tail = ".".join(parts[k:])
            if owner.setdefault(tail, label) != label:
                shared.add(tail)
    return frozenset(shared)


def short_label(label: str, fits: int, suffix: str = "", ambiguous: frozenset[str] = frozenset()) -> str | None:
    """The label, or its most specific dotted tail without the shared suffix, in ``fits``
    characters; never a tail in ``ambiguous`` (see :func:`shared_tails`). None if nothing fits.

    >>> short_label("layers.12.k_proj.weight", 12, ".weight"), short_label("a.b", 2)
    ('12.k_proj', None)
    >>> short_label("layers.12.k_proj.weight", 8, ".weight"), short_label("layers.12.k_proj.weight", 8, ".weight", {"k_proj"})
    ('k_proj', None)
    """
    if len(label) <= fits:
        return label
    parts = _base(label, suffix).split(".")
    for k in range(len(parts)):
        cand = ".".join(parts[k:])
        if 4 <= len(cand) <= fits and cand not in ambiguous:
            return cand
    return None


# -- tied names ---------------------------------------------------------------------------------
#: Most tied groups listed under a picture; the rest are counted (the table lists every name).
TIED_NOTES = 4
_NOTE_SIZE = 7.5
_NOTE_INCHES = 0.17  # one line of the key


def tied_notes(d: Diagram, chars: int, width: float) -> list[str]:
    """Lines listing, under the picture, every tied name of each row whose label shows only the
    first and a count ("shared.weight +3"): so each tied name is reachable from its label in a
    static picture too. Each group is one entry, wrapped to the figure's ``width`` (inches)."""
    import textwrap

    per_line = max(int(width / 0.062), 30)  # characters of 7.5 pt text per line
    lines: list[str] = []
    groups = [names for names in lane_names(d).values() if len(TIED.join(names)) > chars]
    for names in groups[:TIED_NOTES]:
        short = names_label([terminal(n) for n in names], chars)
        entry = f"{short} = " + TIED.join(terminal(n) for n in names)
        lines += textwrap.wrap(entry, per_line, subsequent_indent="    ", break_on_hyphens=False)
    if len(groups) > TIED_NOTES:
        lines.append(f"… {len(groups) - TIED_NOTES:,} more rows of tied names (the table lists them)")
    return lines


def notes_inches(d: Diagram, chars: int, width: float) -> float:
    """Height in inches of the tied-names key under the picture (0 without one)."""
    n = len(tied_notes(d, chars, width))
    return n * _NOTE_INCHES + 0.08 if n else 0.0


def draw_tied_notes(d: Diagram, fig: Any, chars: int) -> None:
    """The tied-names key (:func:`tied_notes`) at the bottom of ``fig``, one text per line
    (gid ``tied-note``)."""
    w, h = fig.get_size_inches()
    lines = tied_notes(d, chars, w)
    for k, line in enumerate(lines):
        y = (len(lines) - k - 0.5) * _NOTE_INCHES + 0.04
        fig.text(0.08 / w, y / h, line, fontsize=_NOTE_SIZE, va="center", ha="left", color=_MUTED, gid="tied-note")


# -- header and legend ------------------------------------------------------------------------
def draw_header(d: Diagram, ax: Axes) -> None:
    """The totals line over the axes; on two lines (split at a " · ") when one would run past
    the right edge of the figure (a narrow ``width``, long words for files, a zoom range)."""
    text = d.header.text
    if d.byte_range is not None:
        text += f" · zoom [{d.byte_range[0]:,}, {d.byte_range[1]:,})"
    fig_w = ax.figure.get_figwidth() * 72  # type: ignore[union-attr]  # points; axes of a top-level Figure
    x0, width = ax.get_position().x0, ax.get_position().width
    room = (1 - x0) * fig_w - 6  # from the axes' left to the figure's edge
    lines = fit_lines(text, room, _HEADER_SIZE)
    widest = max(text_width(line, _HEADER_SIZE) for line in lines.split("\n"))
    x, size = 0.0, float(_HEADER_SIZE)
    if widest > room:  # start at the figure's left edge instead, and shrink if still too wide
        x = -(x0 * fig_w - 6) / (width * fig_w)
        floor = (
            MIN_FONT_PT if fig_w >= DESIGN_INCHES * 72 - 1 else 6.0
        )  # a static picture's minimum; narrower ones, less
        size = max(floor, _HEADER_SIZE * min(1.0, 0.9 * (fig_w - 12) / widest))  # hinting widens small text
    title = ax.set_title(lines, loc="left", fontsize=size, pad=8)
    title.set_x(x)


_HEADER_SIZE = 9


def text_width(text: str, size: float) -> float:
    """Width in points of one line of ``text`` in the default font at ``size``, plus 2 % for
    hinted glyphs (``savefig``, %matplotlib inline; more at small sizes, see draw_header)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    return 1.02 * text_to_path.get_text_width_height_descent(text, FontProperties(size=size), ismath=False)[0]


def fit_lines(text: str, room: float, size: float, sep: str = " · ") -> str:
    """``text``, or split in two at the ``sep`` that best balances the lines, if it is wider
    than ``room`` points (two lines fit the space over the axes; never more).

    >>> fit_lines("a · b · c", 1000, 9), fit_lines("aa · b · cccc", 30, 9)
    ('a · b · c', 'aa · b\\ncccc')
    """
    if text_width(text, size) <= room or sep not in text:
        return text
    parts = text.split(sep)
    splits = [(sep.join(parts[:k]), sep.join(parts[k:])) for k in range(1, len(parts))]
    first, rest = min(splits, key=lambda ab: max(text_width(ab[0], size), text_width(ab[1], size)))
    return f"{first}\n{rest}"


def legend_entries(d: Diagram) -> list[tuple[str, str]]:
    """``(mark, label)`` for each mark this diagram uses; a mark is a layer gid of
    :data:`tensorviz.render.mpl.STYLE` or one of "read", "unread", "dashed", "empty"."""
    c, blocks = d.columns, d.blocks
    wanted = [
        ("read", _read_words(d), c.sparse.any()),
        ("unread", "in span, not read", c.sparse.any()),
        ("header", "file header", any(len(b.header) for b in blocks)),
        ("unreferenced", "unreferenced", any(len(b.unreferenced) for b in blocks)),
        ("overlaps", "read by ≥2 bars (bar outlined)", c.overlaps_other.any()),
        ("dashed", "non-contiguous", c.non_contiguous.any()),
        ("expanded", "expanded (stride 0)", c.expanded.any()),
        ("empty", "empty view (a tick at its offset)", c.empty.any()),
        ("reinterpreted", "other dtype", c.reinterpreted.any()),
        ("past-end", "past its storage's end (freed)", any("freed" in b.reasons for b in blocks)),
    ]
    categories = [(f"category:{colour}", label) for label, colour in d.header.legend]
    return [(mark, label) for mark, label, used in wanted if used] + categories


def _read_words(d: Diagram) -> str:
    """ "bytes read (exact)", or the cell width when a bar is drawn per cell (see ``Bar.cell``)."""
    cell = max((b.cell for b in d.bars), default=0)
    return f"bytes read (per {exact_bytes(cell)} cell)" if cell else "bytes read (exact)"


_PLAIN: dict[str, dict[str, Any]] = {
    "read": dict(facecolor="#777777", edgecolor="#444444"),
    "unread": dict(facecolor=(0.47, 0.47, 0.47, 0.22), edgecolor="#444444"),
    "dashed": dict(facecolor="none", edgecolor="#444444", linestyle=(0, (3, 2))),
    "empty": dict(facecolor="#444444", edgecolor="#444444"),
}


def _category_style(mark: str) -> dict[str, Any] | None:
    """A category's key (``category:<colour>``): the bars' fill, outlined."""
    if not mark.startswith("category:"):
        return None
    return dict(facecolor=mark.removeprefix("category:"), edgecolor="#444444")


def draw_legend(d: Diagram, ax: Axes, styles: dict[str, dict[str, Any]]) -> None:
    """A one-row key under the axis; each mark drawn as its layer actually is (hatched, or the
    plain fill a crowded layer falls back to)."""
    from matplotlib.patches import Patch

    handles = [
        Patch(label=label, **(_PLAIN.get(mark) or _category_style(mark) or _drawn_style(ax, mark, styles[mark])))
        for mark, label in legend_entries(d)
    ]
    if handles:
        from matplotlib.transforms import blended_transform_factory

        below = 0.42 / max(ax_inches(ax)[1], 0.1)  # under the tick labels and axis title
        fig = ax.figure
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -below),  # centred in the figure, under the axis
            bbox_transform=blended_transform_factory(fig.transFigure, ax.transAxes),
            ncol=legend_columns(d, fig.get_figwidth()),  # type: ignore[union-attr]  # axes of a top-level Figure
            fontsize=7,
            frameon=False,
            handlelength=1.6,
        )


def legend_columns(d: Diagram, width: float) -> int:
    """Entries per row of the key in a figure ``width`` inches wide: as many as fit (a narrow
    static picture wraps the key onto more rows instead of running past its right edge)."""
    labels = [label for _, label in legend_entries(d)]
    if not labels:
        return 1
    entry = max(text_width(label, 7) for label in labels) + 7 * (1.6 + 0.8 + 2.0)  # handle, pad, spacing
    return int(np.clip((width * 72 - 12) // entry, 1, len(labels)))


def legend_inches(d: Diagram, width: float) -> float:
    """Height of the rows of the key past its first (the figure grows by it)."""
    n = len(legend_entries(d))
    return 0.0 if n == 0 else 0.17 * (-(-n // legend_columns(d, width)) - 1)


def _drawn_style(ax: Axes, gid: str, style: dict[str, Any]) -> dict[str, Any]:
    art = next((p for p in ax.patches if p.get_gid() == gid), None)
    if art is None or art.get_hatch():
        return dict(style)
    return dict(facecolor=art.get_facecolor(), edgecolor=style["edgecolor"], linewidth=0.6)
