"""The interactive explorer: ipywidgets controls over the diagrams.

Thin by design: controls -> :class:`ExplorerState` -> diagram options -> ``Diagram`` -> PNG,
drawn into one reused matplotlib ``Figure`` and cached per state. The explorer holds the
:class:`~tensorviz.layout.Layout` (metadata only), never a tensor.

Only :func:`tensorviz.explore` imports this module, so ``import tensorviz`` never pulls in
ipywidgets.

>>> import torch, tensorviz as tv                                    # doctest: +SKIP
>>> a = torch.rand(8, 10, 50)                                        # doctest: +SKIP
>>> ex = tv.explore({"a": a, "b": a[2:4], "c": a[4:6]}, by="span")   # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import re
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable

try:
    import ipywidgets as W
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("tensorviz.explore needs ipywidgets>=8 and matplotlib: "
                      "pip install 'tensorviz[widgets]' (or use tv.show(obj) for a static picture)") from err

from ._units import format_bytes
from .layout import Layout, TensorView

__all__ = ["explore", "Explorer", "ExplorerState", "Snapshot", "GROUPINGS"]

#: Toggle labels and the ``by=`` value each one selects.
GROUPINGS = (("storage", "storage"), ("exact span", "span"), ("overlap", "overlap"))
_LABEL_OF = {by: label for label, by in GROUPINGS}
_CACHE_SIZE = 48
_ZOOM_POINTS = 256            # the byte-range slider has at most this many steps (+1 stop)
_RELATIONS_SHOWN = 12         # details pane: relations listed one by one, the rest counted
_snapshot_ids = itertools.count()


# -- the control state, and its mapping to diagram options ------------------------------------
@dataclass(frozen=True)
class ExplorerState:
    """Everything the controls say, normalised so equal pictures have equal states (cache keys).

    ``storage`` is a storage index (``None``: every storage); ``byte_range`` zooms into that
    storage and is ``None`` when it covers the whole storage or no storage is selected.
    """

    by: str = "storage"
    names: str = ""
    only_shared: bool = False
    show_unreferenced: bool = True
    storage: int | None = None
    byte_range: tuple[int, int] | None = None
    expand_simple: bool = False

    def diagram_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`tensorviz.diagram.diagram`."""
        return {
            "by": self.by,
            "names": self.names or None,
            "storages": None if self.storage is None else [self.storage],
            "only_shared": self.only_shared,
            "byte_range": self.byte_range,
            "show_unreferenced": self.show_unreferenced,
            "expand_simple": self.expand_simple,
        }

    def describe(self) -> str:
        """A short human-readable summary (used in captions and the plain-text bundle)."""
        parts = [f"grouped by {_LABEL_OF.get(self.by, self.by)}"]
        if self.names:
            parts.append(f"names matching /{self.names}/")
        if self.only_shared:
            parts.append("only shared")
        if not self.show_unreferenced:
            parts.append("unreferenced bytes hidden")
        if self.expand_simple:
            parts.append("simple storages expanded")
        if self.storage is not None:
            parts.append(f"storage #{self.storage}")
        if self.byte_range is not None:
            lo, hi = self.byte_range
            parts.append(f"bytes [{lo:#x}, {hi:#x})")
        return ", ".join(parts)


def normalise(state: ExplorerState, layout: Layout) -> ExplorerState:
    """Check a state and drop zooms that show everything, so equal pictures share one cache entry.

    Raises:
        ValueError: a bad name pattern, an unknown grouping, a storage index out of range, or a
            bad byte range (the message says which, and the fix).
    """
    problem = pattern_problem(state.names)
    if problem:
        raise ValueError(problem)
    if state.by not in _LABEL_OF:
        raise ValueError(f"by must be one of 'storage', 'span', 'overlap', got {state.by!r}")
    if state.storage is None:
        return replace(state, byte_range=None)
    n = len(layout.storages)
    if not 0 <= state.storage < n:
        raise ValueError(f"storage index {state.storage} is out of range: this layout has {n} "
                         f"storage{'s' * (n != 1)} (0..{n - 1})")
    if state.byte_range is None:
        return state
    lo, hi = (int(x) for x in state.byte_range)
    nbytes = layout.storages[state.storage].nbytes
    if nbytes == 0:  # nothing to zoom into
        return replace(state, byte_range=None)
    if not 0 <= lo < hi <= nbytes:
        raise ValueError(f"byte_range {(lo, hi)} must satisfy 0 <= lo < hi <= {nbytes} "
                         f"(the size of storage #{state.storage})")
    return replace(state, byte_range=None if (lo, hi) == (0, nbytes) else (lo, hi))


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable name filter, in words; None when it compiles."""
    try:
        re.compile(pattern)
    except re.error as err:
        return (f"name filter {pattern!r} is not a valid regular expression: {err}. "
                f"Fix it (escape brackets as \\( ) or clear the box to show every tensor")
    return None


# -- readable byte labels ---------------------------------------------------------------------
_BINARY = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def offset_label(n: int) -> str:
    """A byte offset in the largest binary unit that writes it exactly in <= 2 decimals.

    >>> offset_label(0), offset_label(1536), offset_label(1056), offset_label(3 << 30)
    ('0 B', '1.5 KiB', '1056 B', '3 GiB')
    """
    for unit, size in _BINARY:
        if n >= size and (n * 100) % size == 0:
            return f"{n / size:g} {unit}"
    if n < 1 << 20:
        return f"{n} B"
    return "≈" + format_bytes(n, 2)


def zoom_points(nbytes: int) -> list[int]:
    """Slider stops for a storage: multiples of a power-of-two step, then the exact end.

    >>> zoom_points(4000)[:3], zoom_points(4000)[-2:], len(zoom_points(4000))
    ([0, 16, 32], [3984, 4000], 251)
    """
    if nbytes <= 0:
        return [0, 1]
    step = 1
    while nbytes / step > _ZOOM_POINTS:
        step *= 2
    points = list(range(0, nbytes, step))
    return points + [nbytes]


def span_text(start: int, stop: int) -> str:
    """``[0xfa0, 0x1f40) = [3.9 KiB, 7.8 KiB), 3.9 KiB (4000 B)``."""
    n = stop - start
    return (f"[{start:#x}, {stop:#x}) = [{format_bytes(start)}, {format_bytes(stop)}), "
            f"{format_bytes(n)} ({n} B)")


# -- the details pane -------------------------------------------------------------------------
def details_html(layout: Layout, names: tuple[str, ...]) -> str:
    """Escaped HTML describing the selected views: geometry, span, density and relations."""
    if not names:
        return ('<div class="tvz-details tvz-muted">Select tensors in the list to see their shape, '
                'stride, byte span and how they relate to the other views on their storage.</div>')
    return '<div class="tvz-details">' + "".join(_view_block(layout, n) for n in names) + "</div>"


def view_facts(layout: Layout, name: str) -> list[tuple[str, str]]:
    """The (label, value) rows of one view's details, as plain text."""
    v = layout[name]
    s = layout.storage(name)
    kind = "contiguous" if v.is_contiguous else "non-contiguous"
    if v.is_expanded:
        kind += ", expanded (some bytes read more than once)"
    span_n = v.stop - v.start
    if v.is_empty:
        density = "empty view: reads no bytes"
    else:
        pct = 100 * v.footprint_nbytes / span_n
        tag = "dense" if v.is_dense else "strided, with gaps"
        exact = "" if v.exact else " (upper bound: footprint too large to expand exactly)"
        density = f"{v.footprint_nbytes} B read of a {span_n} B span: {pct:.4g}% ({tag}){exact}"
    rows = [
        ("dtype", f"{v.dtype} ({v.itemsize} B per element)"),
        ("shape", str(v.shape)),
        ("stride", f"{v.stride} elements ({kind})"),
        ("offset", f"{v.offset} elements = {v.start} B"),
        ("span", span_text(v.start, v.stop)),
        ("footprint", density),
        ("storage", f"#{s.index} {s.label or s.device}, {format_bytes(s.nbytes)} ({s.nbytes} B), "
                    f"{len(s.names)} view{'s' * (len(s.names) != 1)}"),
        ("relations", relations_text(layout, v)),
    ]
    if v.note:
        rows.append(("note", v.note))
    return rows


def relations_text(layout: Layout, v: TensorView) -> str:
    """How ``v`` relates to every other view on its storage (the first few named, rest counted)."""
    others = [o.name for o in layout.storage_views(v.storage) if o.name != v.name]
    if not others:
        return "the only view on its storage"
    shown = [f"{layout.relation(v.name, o)} {o}" for o in others[:_RELATIONS_SHOWN]]
    rest = others[_RELATIONS_SHOWN:]
    if rest:
        counts: dict[str, int] = {}
        for o in rest:
            rel = layout.relation(v.name, o)
            counts[rel] = counts.get(rel, 0) + 1
        shown.append(f"… {len(rest)} more: " + ", ".join(f"{k} {c}" for k, c in counts.items()))
    return "; ".join(shown)


def _view_block(layout: Layout, name: str) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(val)}</td></tr>"
                   for k, val in view_facts(layout, name))
    return f'<div class="tvz-view"><b>{html.escape(name)}</b><table>{rows}</table></div>'


# -- static output (no kernel, still a picture) -----------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    """A static picture of one explorer state: PNG, escaped HTML and plain text.

    ``body`` is the escaped HTML fragment (the inline PNG and a table of the views drawn);
    ``kind`` names its CSS class (``tvz-snapshot``, or ``tvz-static`` inside the explorer's own
    bundle). With ``hide_when_live`` (an explorer's CSS class) the snapshot stands in for that
    explorer only where nothing else shows a picture: a trusted notebook whose kernel is gone
    (JupyterLab then shows "Error displaying widget" for the widget). While the live explorer is
    on the page a style rule hides it; untrusted and GitHub views strip the style rule, keep the
    ``hidden`` attribute and show the explorer bundle's own ``image/png``/``text/html`` instead.
    """

    png: bytes
    body: str
    caption: str
    text: str
    hide_when_live: str = ""
    kind: str = "snapshot"

    def to_html(self) -> str:
        uid = f"tvz-snap-{next(_snapshot_ids)}"
        cls = f"tvz-{html.escape(self.kind)} {uid}"
        hint = " (run the cell for the interactive explorer)" if self.hide_when_live or self.kind == "static" else ""
        head = (f'<div style="font-size: 85%; opacity: 0.75">tensorviz {html.escape(self.kind)}{hint}: '
                f'{html.escape(self.caption)}</div>')
        if not self.hide_when_live:
            return f'<div class="{cls}">{head}{self.body}</div>'
        live = html.escape(self.hide_when_live)
        style = (f"<style>.{uid}[hidden] {{display: block !important;}} "
                 f"body:has(.{live}) .jp-OutputArea-child:has(.{uid}), "
                 f"body:has(.{live}) .{uid}[hidden] {{display: none !important;}}</style>")
        # hidden="hidden", not a bare hidden: sanitizers drop empty-valued attributes.
        return f'{style}<div class="{cls}" hidden="hidden">{head}{self.body}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle = {"text/plain": self.text, "image/png": base64.b64encode(self.png).decode("ascii"),
                  "text/html": self.to_html()}
        return {k: v for k, v in bundle.items()
                if (not include or k in include) and (not exclude or k not in exclude)}


def _display(obj: Any) -> None:
    """Emit ``obj`` as output when running under IPython; do nothing in plain scripts."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is not None:
        display(obj)


# -- rendering, cached per state --------------------------------------------------------------
@dataclass(frozen=True)
class _Render:
    diagram: Any
    png: bytes
    ms: float


class _Renderer:
    """Diagram + PNG per normalised state, drawn into one reused Figure (LRU cache)."""

    def __init__(self, layout: Layout, *, dpi: int, max_lanes: int, width: float | None):
        self.layout = layout
        self.dpi = dpi
        self.max_lanes = max_lanes
        self.width = width
        self.figure = _new_figure()
        self.cache: OrderedDict[ExplorerState, _Render] = OrderedDict()
        self.misses = 0

    def get(self, state: ExplorerState) -> tuple[_Render, bool]:
        """The render of ``state`` and whether it came from the cache."""
        hit = self.cache.get(state)
        if hit is not None:
            self.cache.move_to_end(state)
            return hit, True
        from .diagram import diagram
        from .render.mpl import png_bytes, render

        t0 = time.perf_counter()
        d = diagram(self.layout, max_lanes=self.max_lanes, **state.diagram_options())
        render(d, figure=self.figure, width=self.width)
        # Fast zlib level: ~10% larger PNGs, a fifth of the encoding time (it is on every redraw).
        png = png_bytes(self.figure, dpi=self.dpi, compress_level=1)
        out = _Render(d, png, 1000 * (time.perf_counter() - t0))
        self.misses += 1
        self.cache[state] = out
        if len(self.cache) > _CACHE_SIZE:
            self.cache.popitem(last=False)
        return out, False


def _new_figure():
    from matplotlib.figure import Figure

    return Figure()


# -- the widget -------------------------------------------------------------------------------
_CSS = """<style>
.tvz-explorer { gap: 4px; max-width: 1100px; }
.tvz-explorer .tvz-title { font-size: 13px; }
.tvz-explorer .tvz-status, .tvz-explorer .tvz-status .widget-html-content {
  font-size: 12px; line-height: 1.4; min-height: 18px; }
.tvz-explorer .tvz-details { font-size: 12px; line-height: 1.35; }
.tvz-explorer .tvz-details table { border-collapse: collapse; margin: 2px 0 8px 0; }
.tvz-explorer .tvz-details th { text-align: left; padding: 1px 8px 1px 0; font-weight: 600;
  vertical-align: top; white-space: nowrap; color: var(--jp-ui-font-color1, #333); }
.tvz-explorer .tvz-details td { padding: 1px 0; font-family: var(--jp-code-font-family, monospace);
  font-size: 11.5px; }
.tvz-explorer .tvz-row { gap: 4px 14px; }
.tvz-explorer .tvz-muted { opacity: 0.7; }
.tvz-explorer .tvz-error { color: var(--jp-error-color1, #b00020); }
.tvz-explorer .tvz-picture { max-width: 100%; height: auto; }
</style>"""


def _guarded(what: str) -> Callable:
    """Decorate a callback: any exception goes to the status line and ``last_error``, loudly."""

    def wrap(method: Callable) -> Callable:
        def run(self: "Explorer", *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception as err:  # noqa: BLE001 - shown to the user, kept on the explorer
                self.last_error = err
                self.last_traceback = traceback.format_exc()
                self._say(f"{what} failed: {type(err).__name__}: {err} "
                          f"(the full traceback is in explorer.last_traceback)", error=True)
                return None

        run.__name__ = method.__name__
        run.__doc__ = method.__doc__
        return run

    return wrap


class Explorer(W.VBox):
    """An ipywidgets explorer of one :class:`~tensorviz.layout.Layout` (see :func:`explore`).

    Attributes (the controls, for scripting and tests): ``by_toggle``, ``name_filter``,
    ``only_shared_box``, ``unreferenced_box``, ``storage_picker``, ``zoom``, ``expand_box``, ``tensor_list``,
    ``explain_button``; the outputs: ``picture`` (an ``ipywidgets.Image``), ``status_line``,
    ``details``, ``explain_pane``, ``save_pane``. ``state``, ``diagram`` and ``png`` describe what
    is shown now; ``tensor_layout`` is the analysed :class:`~tensorviz.layout.Layout` (``layout``
    is the ipywidgets CSS layout); ``last_error``/``last_traceback`` keep the latest callback failure.
    """

    def __init__(self, layout: Layout, state: ExplorerState | None = None, *, max_lanes: int = 40,
                 dpi: int = 100, width: float | None = None):
        self.tensor_layout = layout
        self.last_error: BaseException | None = None
        self.last_traceback = ""
        self._quiet = False
        self._renderer = _Renderer(layout, dpi=dpi, max_lanes=max_lanes, width=width)
        state = normalise(state or ExplorerState(), layout)
        self._build_controls(state)
        super().__init__(children=self._arrange())
        self.add_class("tvz-explorer")
        self.add_class(f"tvz-live-{self.model_id}")
        self.state = state
        self._current: _Render | None = None
        self._wire()
        self._refresh(state)  # not guarded: a first render that fails raises to the caller

    # -- construction --------------------------------------------------------------------
    def _build_controls(self, state: ExplorerState) -> None:
        lay = self.tensor_layout
        head, _, rest = _title(lay).partition(": ")
        self.title = W.HTML(_CSS + f'<div class="tvz-title"><b>{html.escape(head)}</b>: {html.escape(rest)}</div>')
        self.by_toggle = W.ToggleButtons(options=list(GROUPINGS), value=state.by,
                                         tooltips=["same storage", "same storage and identical byte span",
                                                   "footprints that share bytes"],
                                         layout=W.Layout(width="auto"), style={"button_width": "96px"})
        self.name_filter = W.Text(value=state.names, placeholder="name regex, e.g. attn|mlp",
                                  description="names", continuous_update=False,
                                  layout=W.Layout(width="260px"), style={"description_width": "46px"})
        self.only_shared_box = W.Checkbox(value=state.only_shared, description="only shared",
                                          indent=False, layout=W.Layout(width="auto"))
        self.unreferenced_box = W.Checkbox(value=state.show_unreferenced, indent=False,
                                           description="show unreferenced bytes",
                                           layout=W.Layout(width="auto"))
        self.expand_box = W.Checkbox(value=state.expand_simple, indent=False,
                                     description="expand simple storages", layout=W.Layout(width="auto"))
        self.storage_picker = W.Dropdown(options=_storage_options(lay), value=_ALL if state.storage is None
                                         else state.storage, layout=W.Layout(width="300px"))
        self.zoom = W.SelectionRangeSlider(options=[("0 B", 0), ("0 B", 1)], index=(0, 1),
                                           description="bytes", continuous_update=False,
                                           layout=W.Layout(width="480px"),
                                           style={"description_width": "46px"})
        self.zoom_hint = W.HTML('<span class="tvz-muted">choose one storage to zoom into its bytes</span>')
        self._set_zoom_options(state.storage, state.byte_range)
        self.status_line = W.HTML(layout=W.Layout(margin="0 0 0 4px"))
        self.status_line.add_class("tvz-status")
        self.picture = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.picture.add_class("tvz-picture")
        self.tensor_list = W.SelectMultiple(options=[], rows=9, description="",
                                            layout=W.Layout(width="auto"))
        self.details = W.HTML(details_html(lay, ()),
                              layout=W.Layout(flex="1 1 auto", max_height="260px", overflow="auto"))
        self.explain_button = W.Button(description="explain selected", icon="graduation-cap",
                                       tooltip="draw each selected view's elements beside the storage bytes they read",
                                       layout=W.Layout(width="auto"))
        self.explain_message = W.HTML()
        self.explain_picture = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto",
                                                                     display="none"))
        body = W.VBox([self.explain_message, self.explain_picture],
                      layout=W.Layout(max_height="520px", overflow="auto"))
        self.explain_pane = W.Accordion(children=[body], selected_index=None)
        self.explain_pane.set_title(0, "explain: which storage cell each element of the selected views reads")
        self.explain_pane.add_class("tvz-explain")
        self.save_pane = self._build_save_pane()

    def _arrange(self) -> list:
        wrap = dict(flex_flow="row wrap", align_items="center")
        row1 = W.HBox([_label("group by"), self.by_toggle, self.name_filter], layout=W.Layout(**wrap))
        row2 = W.HBox([_label("show"), self.only_shared_box, self.unreferenced_box, self.expand_box],
                      layout=W.Layout(**wrap))
        row3 = W.HBox([_label("storage"), self.storage_picker, self.zoom, self.zoom_hint], layout=W.Layout(**wrap))
        side = W.VBox([W.HTML("<b>tensors in the picture</b>"), self.tensor_list, self.explain_button],
                      layout=W.Layout(width="300px", flex="0 0 auto"))
        lower = W.HBox([side, self.details], layout=W.Layout(align_items="flex-start"))
        for row in (row1, row2, row3, lower):
            row.add_class("tvz-row")  # spacing via CSS: ipywidgets' Layout has no "gap"
        children = [self.title, row1, row2, row3, self.status_line, self.picture, lower, self.explain_pane]
        if self.save_pane is not None:
            children.append(self.save_pane)
        return children

    def _build_save_pane(self):
        try:
            from . import saving  # noqa: F401 - optional: another module of the package
        except ImportError:
            return None
        self.save_body = W.HTML("")
        pane = W.Accordion(children=[self.save_body], selected_index=None)
        pane.set_title(0, "what savers would do (safetensors, torch.save, transformers, accelerate)")
        pane.observe(self._on_save_opened, names="selected_index")
        return pane

    def _wire(self) -> None:
        for box in (self.by_toggle, self.name_filter, self.only_shared_box, self.unreferenced_box,
                    self.zoom, self.expand_box):
            box.observe(self._on_control, names="value")
        self.storage_picker.observe(self._on_storage, names="value")
        self.tensor_list.observe(self._on_select, names="value")
        self.explain_button.on_click(self._on_explain)

    # -- callbacks -------------------------------------------------------------------------
    @_guarded("redraw")
    def _on_control(self, change: dict) -> None:
        if not self._quiet:
            self._refresh(self._read_controls())

    @_guarded("storage selection")
    def _on_storage(self, change: dict) -> None:
        if self._quiet:
            return
        self._set_zoom_options(_storage_index(change["new"]), None)
        self._refresh(self._read_controls())

    @_guarded("details")
    def _on_select(self, change: dict) -> None:
        if not self._quiet:
            self.details.value = details_html(self.tensor_layout, tuple(self.tensor_list.value))

    @_guarded("explain")
    def _on_explain(self, _button: Any = None) -> None:
        names = tuple(self.tensor_list.value)
        message, png = _explain_png(self.tensor_layout, names)
        self.explain_message.value = message
        if png is not None:
            self.explain_picture.value = png
        self.explain_picture.layout.display = None if png is not None else "none"
        self.explain_pane.selected_index = 0

    @_guarded("save check")
    def _on_save_opened(self, change: dict) -> None:
        if change["new"] == 0 and not self.save_body.value:
            from .saving import save_check

            self.save_body.value = save_check(self.tensor_layout).to_html()

    # -- state <-> controls ----------------------------------------------------------------
    def _read_controls(self) -> ExplorerState:
        storage = _storage_index(self.storage_picker.value)
        lo, hi = self.zoom.value
        return ExplorerState(by=self.by_toggle.value, names=self.name_filter.value.strip(),
                             only_shared=self.only_shared_box.value,
                             show_unreferenced=self.unreferenced_box.value, storage=storage,
                             byte_range=None if storage is None else (lo, hi),
                             expand_simple=self.expand_box.value)

    def _set_zoom_options(self, storage: int | None, byte_range: tuple[int, int] | None) -> None:
        quiet, self._quiet = self._quiet, True
        try:
            self.zoom.layout.display = "none" if storage is None else None
            self.zoom_hint.layout.display = None if storage is None else "none"
            if storage is None:
                self.zoom.options = [("0 B", 0), ("0 B", 1)]
                self.zoom.index = (0, 1)
                return
            nbytes = self.tensor_layout.storages[storage].nbytes
            points = zoom_points(nbytes)
            if byte_range is not None:  # keep an explicitly asked-for zoom exact
                points = sorted(set(points) | set(byte_range))
            self.zoom.options = [(offset_label(p), p) for p in points]
            lo, hi = byte_range or (0, nbytes)
            self.zoom.index = (points.index(lo), points.index(hi))
        finally:
            self._quiet = quiet

    def _refresh(self, state: ExplorerState) -> None:
        problem = pattern_problem(state.names)
        if problem:
            self._say(problem + "; the picture still shows the previous filter.", error=True)
            return
        state = normalise(state, self.tensor_layout)
        render, cached = self._renderer.get(state)
        self.state, self._current = state, render
        self.picture.value = render.png
        names = _diagram_names(render.diagram)
        self._update_list(names)
        how = "from cache" if cached else f"drawn in {render.ms:.0f} ms"
        if not names and render.diagram.collapsed is None:
            self._say(f"nothing to draw: no tensor matches ({state.describe()}).", error=False)
            return
        folded = render.diagram.collapsed
        more = f" (+ {folded.text}, folded into one row)" if folded is not None else ""
        self._say(f"{len(names)} tensor{'s' * (len(names) != 1)} shown{more}, {state.describe()} · {how}")

    def _update_list(self, names: tuple[str, ...]) -> None:
        drawn = set(names)
        keep = tuple(n for n in self.tensor_list.value if n in drawn)
        quiet, self._quiet = self._quiet, True
        try:
            self.tensor_list.options = names
            self.tensor_list.value = keep
        finally:
            self._quiet = quiet
        self.details.value = details_html(self.tensor_layout, keep)

    def _say(self, text: str, error: bool = False) -> None:
        cls = "tvz-error" if error else "tvz-muted"
        mark = "⚠ " if error else ""
        self.status_line.value = f'<span class="{cls}">{mark}{html.escape(text)}</span>'

    def clear_cache(self) -> None:
        """Forget the cached pictures (e.g. after changing matplotlib's rcParams); keeps the current one."""
        self._renderer.cache.clear()

    # -- what is shown now ---------------------------------------------------------------------
    @property
    def diagram(self) -> Any:
        """The Diagram drawn now."""
        return self._current.diagram

    @property
    def png(self) -> bytes:
        """The PNG bytes shown now."""
        return self._current.png

    @property
    def status(self) -> str:
        """The status line as plain text."""
        return html.unescape(re.sub(r"<[^>]+>", "", self.status_line.value))

    def static(self, hide_when_live: bool = False, kind: str = "snapshot") -> Snapshot:
        """The current state as a :class:`Snapshot` (PNG + escaped HTML + text), not displayed."""
        from .render.html import diagram_html

        caption = f"{_title(self.tensor_layout)}; {self.state.describe()}"
        text = f"{caption}\n{self.diagram.to_text()}"
        body = diagram_html(self.diagram, self.tensor_layout, self.png)
        live = f"tvz-live-{self.model_id}" if hide_when_live else ""
        return Snapshot(self.png, body, caption, text, hide_when_live=live, kind=kind)

    def snapshot(self) -> None:
        """Emit the current state as static output (a picture that needs no kernel).

        >>> ex.snapshot()   # doctest: +SKIP
        """
        _display(self.static())

    def to_html(self) -> str:
        """The current state as standalone escaped HTML (an embedded PNG and a caption)."""
        return self.static().to_html()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        static = self.static(kind="static")._repr_mimebundle_()
        bundle.update({"image/png": static["image/png"], "text/html": static["text/html"],
                       "text/plain": static["text/plain"]})
        return bundle


# -- helpers ----------------------------------------------------------------------------------
def _label(text: str) -> W.HTML:
    return W.HTML(html.escape(text), layout=W.Layout(width="60px", margin="0 0 0 6px"))


def _title(layout: Layout) -> str:
    n, s = len(layout), len(layout.storages)
    src = f" ({layout.source})" if layout.source else ""
    return (f"tensorviz explorer{src}: {n} tensor{'s' * (n != 1)} on {s} storage{'s' * (s != 1)} · "
            f"unique {format_bytes(layout.unique_nbytes)} · storages {format_bytes(layout.storage_nbytes)}")


_ALL = -1  # the storage picker's "all storages" (None would mean "nothing selected" to ipywidgets)


def _storage_index(value: int) -> int | None:
    return None if value == _ALL else value


def _storage_options(layout: Layout) -> list[tuple[str, int]]:
    opts: list[tuple[str, int]] = [("all storages", _ALL)]
    for s in layout.storages:
        first = s.names[0] if s.names else "no views"
        more = f" +{len(s.names) - 1}" if len(s.names) > 1 else ""
        opts.append((f"#{s.index} {first}{more} · {format_bytes(s.nbytes)}", s.index))
    return opts


def _diagram_names(diagram: Any) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for bar in diagram.bars:
        for name in bar.names:
            seen.setdefault(name, None)
    return tuple(seen)


def _explain_png(layout: Layout, names: tuple[str, ...]) -> tuple[str, bytes | None]:
    """(message HTML, PNG or None) for the explain pane."""
    if not names:
        return ('<span class="tvz-muted">Select one or more tensors in the list first, then press '
                '"explain selected".</span>', None)
    from .errors import TooLargeError

    try:
        fig = explain_figure(layout, names)
    except ImportError:
        return ('<span class="tvz-error">The teaching panel (tensorviz.explain) is not available '
                'in this installation.</span>', None)
    except TooLargeError as err:
        return (f'<span class="tvz-error">Too large to explain cell by cell: {html.escape(str(err))}'
                f'</span>', None)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    shown = ", ".join(names)
    return (f'<span class="tvz-muted">How each element of {html.escape(shown)} maps to its storage '
            f'cells (address = offset + Σ index·stride).</span>', buf.getvalue())


def explain_figure(layout: Layout, names: tuple[str, ...]):
    """The teaching panel of some views of a layout, from metadata alone (no tensors).

    Raises:
        TooLargeError: the views are too large to draw cell by cell (the message says the limit).
    """
    from .explain import layout_plan
    from .render.panel import draw

    sub = sub_layout(layout, names)
    plan = layout_plan(sub)
    # Number the strips as the explorer does (the sub-layout counts its storages from 0).
    index = {s.index: layout.storage(s.key).index for s in sub.storages}
    plan = replace(plan, strips=tuple(replace(st, storage=index[st.storage]) for st in plan.strips))
    return draw(plan)


def sub_layout(layout: Layout, names: tuple[str, ...]) -> Layout:
    """A layout of just these views, on their (whole) storages: metadata only."""
    from .layout import StorageInfo

    views = [layout[n] for n in names]
    infos = {}
    for v in views:
        s = layout.storage(v.storage)
        infos.setdefault(s.key, StorageInfo(s.key, s.device, s.nbytes, s.label))
    return Layout(views, infos.values(), source=layout.source)


def explore(obj: Any, *, by: str = "storage", names: str | None = None, only_shared: bool = False,
            show_unreferenced: bool = True, storage: int | str | None = None,
            byte_range: tuple[int, int] | None = None, expand_simple: bool = False,
            max_lanes: int = 40, dpi: int = 100, width: float | None = None,
            snapshot: bool = True) -> Explorer:
    """An interactive explorer of where ``obj``'s tensors live (ipywidgets, in a notebook).

    Args:
        obj: anything :func:`tensorviz.analyze` accepts, or a :class:`Layout`. Only the layout
            (metadata) is kept: deleting the model frees it.
        by: initial grouping: ``"storage"``, ``"span"`` (exact span) or ``"overlap"``.
        names: initial name filter (a regular expression).
        only_shared: start with only views that share their storage.
        show_unreferenced: draw storage bytes that no view reads.
        storage: start on one storage (its index, or the name of a tensor on it).
        byte_range: start zoomed to ``(lo, hi)`` bytes of that storage.
        expand_simple: draw storages whose one view is the whole storage one by one, instead of
            folding them into a summary row.
        max_lanes, dpi, width: drawing size (see :func:`tensorviz.diagram.diagram`).
        snapshot: also emit a static picture of the first state for a saved, trusted notebook
            whose kernel is gone (hidden while the live explorer is on screen, and where the
            explorer's own ``image/png``/``text/html`` already shows: GitHub, untrusted).

    Returns:
        The :class:`Explorer` widget (display it, e.g. as the cell's last expression).

    Raises:
        ValueError: a bad pattern, grouping, storage or byte range (the message says which).

    >>> import torch, tensorviz as tv                                # doctest: +SKIP
    >>> a = torch.rand(8, 10, 50)                                    # doctest: +SKIP
    >>> tv.explore({"a": a, "b": a[2:4], "c": a[4:6]}, by="span")    # doctest: +SKIP
    """
    layout = obj if isinstance(obj, Layout) else _analyze(obj)
    if isinstance(storage, str):
        storage = layout.storage(storage).index
    state = ExplorerState(by=by, names=names or "", only_shared=only_shared,
                          show_unreferenced=show_unreferenced, storage=storage,
                          byte_range=tuple(byte_range) if byte_range is not None else None,
                          expand_simple=expand_simple)
    ex = Explorer(layout, state, max_lanes=max_lanes, dpi=dpi, width=width)
    if snapshot:
        _display(ex.static(hide_when_live=True))
    return ex


def _analyze(obj: Any) -> Layout:
    from . import analyze

    return analyze(obj)
