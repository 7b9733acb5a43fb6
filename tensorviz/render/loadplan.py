"""``dcp.load``'s load plan drawn on the checkpoint's global layout, and as a per-rank table.

The picture is the checkpoint folder's own diagram (:func:`tensorviz.plan.diagram.diagram` of
``tv.analyze(folder)``: a lane per saved tensor and its chunks, a lane per ``.distcp`` file and
its chunk records, simple storages expanded; its bars grey) with one more layer, ``load-plan``: over each bar a
rank reads, a strip in that rank's palette colour, in the rank's slot of the lower
:data:`BAND` of the bar (rank 0 on top), and, right of the plot, each such lane's readers in words (``load-plan-readers``:
"read by r0 r2", runs as "r0–r3"), so colour never carries the meaning alone. The table (text and escaped HTML) lists per
rank the files it opens, the bytes it reads and the chunks.

>>> from tensorviz.plan.loadplan import LoadPlan, RankRead
>>> print(plan_text(LoadPlan("ckpt", 2, (RankRead(1, "w", "__0_0.distcp", 0, 2048),))))
dcp.load plan of ckpt: 2 ranks
rank  files         bytes    chunks
   0  -             0 B           0
   1  __0_0.distcp  2.0 KiB       1
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.core.names import elide, terminal
from tensorviz.core.units import format_bytes
from tensorviz.plan.colors import SHARES_OUTLINE, contrast_ratio, palette_colour
from tensorviz.plan.loadplan import LoadPlan, readers, strips

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plan_figure", "plan_text", "plan_html", "rank_words", "COLUMN_INCHES", "BAND"]

#: Inches right of the plot for the readers' column.
COLUMN_INCHES = 1.3
#: The share of a bar's height (its lower part) the ranks' strips take; the bar's own colour
#: stays above them.
BAND = 0.75


def plan_figure(layout: Layout, plan: LoadPlan, *, width: float | None = None) -> Figure:
    """The checkpoint's diagram with the load plan over it (see the module docstring).

    Raises:
        OptionError: ``layout`` is not a DCP checkpoint folder's layout.
    """
    from matplotlib.collections import PolyCollection
    from matplotlib.transforms import blended_transform_factory

    from tensorviz.core.errors import OptionError
    from tensorviz.plan.diagram import diagram
    from tensorviz.render.mpl import BAR_HEIGHT, layer, rect_vertices, render
    from tensorviz.render.theme import ROW

    if layout.facts.format != "dcp":
        raise OptionError(
            f"a load plan is drawn on a DCP checkpoint folder's layout; this one is {layout.facts.format!r}"
        )
    d = diagram(layout, expand_simple=True, max_lanes=max(40, len(layout.names) * 2 + len(layout.storages)))
    fig = render(d, width=width)
    ax = fig.axes[0]
    pos, (w, _h) = ax.get_position(), fig.get_size_inches()
    ax.set_position((pos.x0, pos.y0, pos.width - COLUMN_INCHES / w, pos.height))
    spans: Any = layer(fig, "spans")  # a PolyCollection (layer() is typed as its base, Artist)
    spans.set_facecolor(ROW)  # the bars neutral: colour here is the reading rank's
    read_by = readers(layout.facts.chunks, plan)
    placed = strips(d, read_by, plan.world, BAR_HEIGHT / 2 - BAND * BAR_HEIGHT, BAND * BAR_HEIGHT)
    if placed:
        i, rank, x0, x1, y0, y1 = (np.array(c) for c in zip(*placed))
        verts = rect_vertices(x0, x1, (y0 + y1) / 2, height=float(y1[0] - y0[0]))
        colours = [palette_colour(int(r)) for r in rank]
        art = PolyCollection(verts, facecolors=colours, edgecolors=SHARES_OUTLINE, linewidths=0.5)  # type: ignore[arg-type]  # matplotlib's stubs want a Sequence; an array is what it takes
        art.set_gid("load-plan")
        art.set_zorder(4)
        art.tensorviz_owner = i.astype(np.int64)  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
        art.tensorviz_rank = rank.astype(np.int64)  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
        ax.add_collection(art)
    ax.set_title(f"dcp.load plan of {plan.world} rank{'s' if plan.world != 1 else ''}", loc="left", fontsize=9, pad=8)
    side = blended_transform_factory(ax.transAxes, ax.transData)
    lanes: dict[int, set[int]] = {}
    for i_, rank_, *_ in placed:
        lanes.setdefault(d.bars[i_].lane, set()).add(rank_)
    _rank_key(ax, side, plan.world)
    for lane, ranks in sorted(lanes.items()):
        ax.text(
            1.02, lane, f"read by {rank_words(ranks)}", transform=side, fontsize=8, va="center", gid="load-plan-readers"
        )
    return fig


#: Most ranks given a colour chip over the readers' column (more: "strip k: rank k").
KEY_RANKS = 6


def _rank_key(ax: Any, side: Any, world: int) -> None:
    """Over the readers' column: a chip per rank in its strip colour (its number on it), or
    for many ranks the rule in words (gid ``load-plan-key``)."""
    from matplotlib.transforms import offset_copy

    if world > KEY_RANKS:
        ax.text(1.02, -0.55, "strip k: rank k", transform=side, fontsize=8, va="bottom", gid="load-plan-key")
        return
    for k in range(world):
        fill = palette_colour(k)
        ink = "#000000" if contrast_ratio(fill, "#000000") >= contrast_ratio(fill, "#ffffff") else "#ffffff"
        at = offset_copy(side, ax.figure, x=k * 19, y=0, units="points")
        ax.text(1.02, -0.55, f"r{k}", transform=at, fontsize=7.5, va="bottom", color=ink, gid="load-plan-key",
                bbox=dict(facecolor=fill, edgecolor=SHARES_OUTLINE, linewidth=0.5, pad=1.2))  # fmt: skip


def rank_words(ranks: set[int] | list[int]) -> str:
    """Ranks in words, runs of three or more as a range.

    >>> rank_words({0, 1, 2, 3, 5, 7, 8})
    'r0–r3 r5 r7 r8'
    """
    out: list[str] = []
    run: list[int] = []
    for r in [*sorted(ranks), None]:
        if run and (r is None or r != run[-1] + 1):
            out += [f"r{run[0]}–r{run[-1]}"] if len(run) >= 3 else [f"r{x}" for x in run]
            run = []
        if r is not None:
            run.append(r)
    return " ".join(out)


def plan_text(plan: LoadPlan) -> str:
    """The per-rank table as text (files elided past 60 characters, names escaped)."""
    rows = plan.rows()
    files = [elide(terminal(", ".join(r.files) or "-"), 60) for r in rows]
    fw = max([len("files"), *map(len, files)])
    lines = [f"dcp.load plan of {terminal(plan.folder)}: {plan.world} ranks", f"rank  {'files':<{fw}}  bytes    chunks"]
    for r, f in zip(rows, files):
        lines.append(f"{r.rank:>4}  {f:<{fw}}  {format_bytes(r.nbytes):<8} {r.chunks:>6}")
    return "\n".join(lines)


def plan_html(plan: LoadPlan) -> str:
    """The per-rank table as escaped HTML (a rank's colour chip beside its number, as drawn)."""
    esc = lambda s: html.escape(terminal(str(s)))  # noqa: E731
    body = "".join(
        f'<tr><td><span style="display:inline-block;width:10px;height:10px;background:{palette_colour(r.rank)};'
        f'border:1px solid {SHARES_OUTLINE}"></span> r{r.rank}</td><td><code>{esc(", ".join(r.files) or "-")}</code></td>'
        f"<td>{esc(format_bytes(r.nbytes))} ({r.nbytes:,} B)</td><td>{r.chunks:,}</td></tr>"
        for r in plan.rows()
    )
    head = "<tr><th>rank</th><th>files</th><th>bytes</th><th>chunks</th></tr>"
    return (
        f'<div class="tv-loadplan"><p><b>dcp.load plan</b> of <code>{esc(plan.folder)}</code>: {plan.world} ranks</p>'
        f"<table>{head}{body}</table></div>"
    )
