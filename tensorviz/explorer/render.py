"""Pictures for the explorer: the diagram of a state (cached), and the explain panel.

matplotlib is imported inside the functions that draw.
"""

from __future__ import annotations

import html
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tensorviz.core.layout import Layout
from tensorviz.core.records import StorageInfo, StorageKey
from tensorviz.explorer.state import ExplorerState

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_CACHE_SIZE = 48


#: Lanes planned for the canvas: every lane (the browser scrolls through them; nothing folded
#: away by a lane budget). The static PNG keeps the renderer's own budget.
ALL_LANES = 1 << 62


@dataclass(frozen=True)
class Render:
    """One planned state: its Diagram (every lane, for the canvas), how long planning took, and
    the options the plan's normaliser made of the state (the static picture's start from them)."""

    diagram: Any
    ms: float
    options: Any


class Renderer:
    """Per normalised state (LRU caches): the full Diagram for the canvas, planned once; on demand
    the static picture's capped Diagram (the full one when its lanes fit the budget, else planned
    from the same options) + PNG, drawn into one reused Figure."""

    def __init__(
        self, layout: Layout, *, dpi: int, max_lanes: int, width: float | None, canvas_lanes: int | None = None
    ):
        self.layout = layout
        self.dpi = dpi
        self.max_lanes = max_lanes
        self.canvas_lanes = ALL_LANES if canvas_lanes is None else canvas_lanes  # tv.explore(max_lanes=N)
        self.width = width
        self.figure: Figure | None = None
        self.cache: OrderedDict[ExplorerState, Render] = OrderedDict()
        self.pictures: OrderedDict[ExplorerState, tuple[Any, bytes]] = OrderedDict()
        self.misses = 0
        self.cache_size = _CACHE_SIZE  # states kept (0: plan every change, as the bench does)

    def get(self, state: ExplorerState) -> tuple[Render, bool]:
        """The render of ``state`` and whether it came from the cache."""
        hit = self.cache.get(state)
        if hit is not None:
            self.cache.move_to_end(state)
            return hit, True
        from tensorviz.plan.options import normalise
        from tensorviz.plan.planner import plan

        t0 = time.perf_counter()
        opts = normalise(self.layout, max_lanes=self.canvas_lanes, overview=True, **state.diagram_options())
        d = self._with_overview(plan(self.layout, opts))
        out = Render(d, 1000 * (time.perf_counter() - t0), opts)
        self.misses += 1
        _remember(self.cache, state, out, self.cache_size)
        return out, False

    def _with_overview(self, d: Any) -> Any:
        """The canvas draws every lane, so none is left out; it shows the overview of every
        storage where the static picture would (more storages than its lane budget, or
        thousands of them: :data:`tensorviz.plan.overview.AUTO_STORAGES`) and where it tells
        storages apart (:func:`distinguishes`), not a mosaic of identical cells."""
        from tensorviz.plan.overview import AUTO_STORAGES

        n = 0 if d.overview is None else d.overview.storage.size
        needed = n > self.max_lanes or n >= AUTO_STORAGES
        return d if needed and distinguishes(d.overview) else replace(d, overview=None)

    def picture(self, state: ExplorerState) -> tuple[Any, bytes]:
        """(capped Diagram, PNG bytes) of ``state`` for the static fallback (cached)."""
        hit = self.pictures.get(state)
        if hit is not None:
            self.pictures.move_to_end(state)
            return hit
        from tensorviz.render.mpl import png_bytes, render

        if self.figure is None:
            self.figure = _new_figure()
        figure = self.figure
        d = self._capped(self.get(state)[0])
        render(d, figure=figure, width=self.width)
        out = (d, png_bytes(figure, dpi=self.dpi, compress_level=1))
        _remember(self.pictures, state, out, self.cache_size)
        return out

    def _capped(self, full: Render) -> Any:
        """The static picture's Diagram: ``diagram(max_lanes=self.max_lanes)`` of the state. When
        every lane of the canvas's Diagram fits the budget, the planner would emit the same lanes,
        blocks and bars (none left out, so its automatic overview is there only for thousands of
        storages): that Diagram, with the picture's options. Else planned from the same options."""
        from tensorviz.plan.overview import AUTO_STORAGES
        from tensorviz.plan.planner import plan

        opts = replace(full.options, max_lanes=self.max_lanes, overview=None)
        d = full.diagram
        if len(d.lanes) > self.max_lanes or d.hidden_storages:
            return plan(self.layout, opts)
        ov = d.overview  # the canvas's plan asked for one; a fitting picture has it for thousands only
        return replace(d, options=opts, overview=ov if ov is not None and ov.storage.size >= AUTO_STORAGES else None)


def distinguishes(ov: Any) -> bool:
    """Whether an overview tells its storages apart: two kinds of storage (simple, packed,
    overlapping, tied), or bytes no view reads in some. 725 simple storages of one model are
    one colour: the lanes and the model map say more."""
    return ov is not None and (len(set(ov.kind.tolist())) > 1 or bool((ov.unreferenced > 0).any()))


def _remember(cache: OrderedDict, key: Any, value: Any, size: int) -> None:
    cache[key] = value
    while len(cache) > size:
        cache.popitem(last=False)


def _new_figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure()


def diagram_names(diagram: Any) -> tuple[str, ...]:
    """The names a diagram draws, each once, in drawing order."""
    seen: dict[str, None] = {}
    for bar in diagram.bars:
        for name in bar.names:
            seen.setdefault(name, None)
    return tuple(seen)


def explain_png(layout: Layout, names: tuple[str, ...]) -> tuple[str, bytes | None]:
    """(message HTML, PNG or None) for the explain pane."""
    if not names:
        return (
            '<span class="tvz-muted">Select one or more tensors in the list first, then press '
            '"explain selected".</span>',
            None,
        )
    from tensorviz.core.errors import TooLargeError

    try:
        fig = explain_figure(layout, names)
    except ImportError:
        return (
            '<span class="tvz-error">The teaching panel (tensorviz.explain) is not available '
            "in this installation.</span>",
            None,
        )
    except TooLargeError as err:
        return (f'<span class="tvz-error">Too large to explain cell by cell: {html.escape(str(err))}</span>', None)
    from tensorviz.render.mpl import png_bytes

    shown = ", ".join(names)
    return (
        f'<span class="tvz-muted">How each element of {html.escape(shown)} maps to its storage '
        f"cells (address = offset + Σ index·stride).</span>",
        png_bytes(fig, dpi=100),
    )


def explain_side(layout: Layout, names: tuple[str, ...], side: str, source: str) -> tuple[str, bytes | None, Any]:
    """The compare mode's explain pane for one side (``side``: "a" or "b", read from
    ``source``): (message HTML under a heading naming the side, PNG or None, the interactive
    panel or None). With no view of the selection on this side it says so, and draws nothing."""
    from tensorviz.core.names import elide, terminal

    heading = f'<div class="tvz-side"><b>{side}</b> · {html.escape(elide(terminal(str(source)), 120))}</div>'
    if not names:
        return heading + f'<span class="tvz-muted">No view of the selection is in {side}.</span>', None, None
    message, png = explain_png(layout, names)
    return heading + message, png, explain_live(layout, names, png)


def explain_plan_of(layout: Layout, names: tuple[str, ...]) -> Any:
    """The teaching panel's plan of some views of a layout, from metadata alone (no tensors),
    its strips numbered as the explorer numbers storages.

    Raises:
        TooLargeError: the views are too large to draw cell by cell (the message says the limit).
    """
    from tensorviz.plan.explain import layout_plan

    sub = sub_layout(layout, names)
    plan = layout_plan(sub)
    # Number the strips as the explorer does (the sub-layout counts its storages from 0).
    index = {s.index: layout.storage(s.key).index for s in sub.storages}
    return replace(plan, strips=tuple(replace(st, storage=index[st.storage]) for st in plan.strips))


def explain_figure(layout: Layout, names: tuple[str, ...]):
    """The teaching panel of some views of a layout, drawn with matplotlib (the static picture).

    Raises:
        TooLargeError: the views are too large to draw cell by cell (the message says the limit).
    """
    from tensorviz.render.mpl.panel import draw

    return draw(explain_plan_of(layout, names))


def explain_live(layout: Layout, names: tuple[str, ...], png: bytes | None) -> Any:
    """The interactive teaching panel of the selected views (an :class:`~tensorviz.explorer.
    explain_widget.ExplainWidget`: hover an element, its cell and address formula light; hover
    a cell, every element reading it; a stride playground), or None where there is nothing to
    explain or it is too large to draw cell by cell (the static message says why)."""
    from tensorviz.core.errors import TooLargeError

    if not names:
        return None
    try:
        from tensorviz.explorer.explain_widget import ExplainWidget

        return ExplainWidget(explain_plan_of(layout, names), png=png or b"")
    except (ImportError, TooLargeError):
        return None


def sub_layout(layout: Layout, names: tuple[str, ...]) -> Layout:
    """A layout of just these views, on their (whole) storages: metadata only."""
    views = [layout[n] for n in names]
    infos: dict[StorageKey, StorageInfo] = {}
    for v in views:
        s = layout.storage(v.storage)
        infos.setdefault(s.key, StorageInfo(s.key, s.device, s.nbytes, s.label))
    return Layout(views, infos.values(), source=layout.source)
