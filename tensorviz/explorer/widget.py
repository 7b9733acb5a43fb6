"""The interactive explorer: ipywidgets controls around a browser-side diagram canvas.

Thin by design: controls -> :class:`ExplorerState` -> diagram options -> ``Diagram`` (every
lane; cached per state) -> binary columns -> :class:`~tensorviz.explorer.canvas.DiagramCanvas`,
which draws, hovers, zooms and scrolls in the browser. The static fallback (matplotlib PNG +
escaped HTML, for saved notebooks) is drawn from the same options on first use. The explorer
holds the :class:`~tensorviz.core.layout.Layout` (metadata only), never a tensor.

Only :func:`tensorviz.explore` imports this module, so ``import tensorviz`` never pulls in
ipywidgets. The parts: :mod:`.state` (the state and its checks), :mod:`.text` (labels, the one
byte format, the details pane), :mod:`.render` (planned states, static pictures, the explain
panel), :mod:`.payload` (a Diagram as binary columns), :mod:`.canvas` (the anywidget, with
``geometry.js`` + ``canvas.js``), :mod:`.static` (snapshots) and :mod:`.controls` (the widgets).

>>> import torch, tensorviz as tv                                    # doctest: +SKIP
>>> a = torch.rand(8, 10, 50)                                        # doctest: +SKIP
>>> ex = tv.explore({"a": a, "b": a[2:4], "c": a[4:6]}, by="span")   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import traceback
import weakref
from collections.abc import Callable
from typing import Any

try:
    import ipywidgets as W
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "tensorviz.explore needs ipywidgets>=8 and matplotlib: "
        "pip install 'tensorviz[widgets]' (or use tv.show(obj) for a static picture)"
    ) from err

from tensorviz.core.diff import LayoutDiff, diff_layouts
from tensorviz.core.layout import Layout, as_layout
from tensorviz.core.rows import gc_paused
from tensorviz.explorer.compare import CompareRows
from tensorviz.explorer.comparepane import attach as attach_compare
from tensorviz.explorer.comparepane import choice_layouts
from tensorviz.explorer.controls import ExplorerControls, storage_index

# The pure helpers, also importable from here (tests and notebooks use them).
from tensorviz.explorer.render import (  # noqa: E402,F401
    Render,
    Renderer,
    diagram_names,
    explain_figure,
    explain_live,
    explain_png,
    explain_side,
    sub_layout,
)
from tensorviz.explorer.state import (
    GROUPINGS,
    ExplorerState,
    control_problem,
    normalise,
    pattern_problem,  # noqa: E402,F401
)
from tensorviz.explorer.static import WIDGET_VIEW, Snapshot, stand_in_rule
from tensorviz.explorer.static import display as _display
from tensorviz.explorer.text import (  # noqa: E402,F401
    details_html,
    offset_label,
    relations_text,
    shown_text,
    span_text,
    title,
    view_facts,
    zoom_points,
)

__all__ = ["explore", "Explorer", "ExplorerState", "Snapshot", "GROUPINGS"]


def _guarded(what: str) -> Callable:
    """Decorate a callback: any exception goes to the status line and ``last_error``, loudly."""

    def wrap(method: Callable) -> Callable:
        def run(self: Explorer, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception as err:  # noqa: BLE001 - shown to the user, kept on the explorer
                self.last_error = err
                self.last_traceback = traceback.format_exc()
                self._say(
                    f"{what} failed: {type(err).__name__}: {err} (the full traceback is in explorer.last_traceback)",
                    error=True,
                )
                return None

        run.__name__ = method.__name__
        run.__doc__ = method.__doc__
        return run

    return wrap


class Explorer(ExplorerControls, W.VBox):
    """An ipywidgets explorer of one :class:`~tensorviz.core.layout.Layout` (see :func:`explore`).

    Attributes (the controls, for scripting and tests): ``by_toggle``, ``name_filter``,
    ``only_shared_box``, ``unreferenced_box``, ``storage_picker``, ``zoom``, ``expand_box``, ``tensor_list``,
    ``explain_button``; the outputs: ``canvas`` (a :class:`~tensorviz.explorer.canvas.DiagramCanvas`),
    ``status_line``, ``details``, ``explain_pane``, ``save_pane``; ``panel``, the slot left of
    the diagram (:meth:`set_panel`), holding ``tree_panel`` (the model map) when names nest.
    ``selected`` is the list of selected names, synced both ways with clicks in the diagram and
    the tensor list (held once: ``canvas.selected``; observe that trait for changes). ``state``
    and ``diagram`` describe what is shown now (``png`` is the static picture of that state,
    derived from the same plan); ``tensor_layout`` is the analysed
    :class:`~tensorviz.core.layout.Layout` (``layout`` is the ipywidgets CSS layout);
    ``last_error``/``last_traceback`` keep the latest callback failure. Compare mode:
    ``compare_rows`` (None when not comparing), :meth:`compare_with`, and the "compare with…"
    row ``compare_box`` (``compare_path``, ``compare_choice``, ``compare_button``,
    ``compare_stop``, ``compare_note``: :mod:`tensorviz.explorer.comparepane`).
    """

    children: Any  # ipywidgets' trait (ipywidgets has no type information)

    def __init__(
        self,
        layout: Layout,
        state: ExplorerState | None = None,
        *,
        max_lanes: int = 40,
        dpi: int = 100,
        width: float | None = None,
        canvas_lanes: int | None = None,
        compare: Any = None,
    ):
        self.tensor_layout = layout
        self.compare_rows: CompareRows | None = None
        self._set_compare(compare)
        self.last_error: BaseException | None = None
        self.last_traceback = ""
        self.save_subject: Callable[[], Any] | None = None  # weakref to the analysed object
        self._renderer = Renderer(layout, dpi=dpi, max_lanes=max_lanes, width=width, canvas_lanes=canvas_lanes)
        state = normalise(state or ExplorerState(), layout)
        self._build_controls(state)
        self._set_compare(self.compare_rows and self.compare_rows.diff)
        super().__init__(children=self._arrange())
        self.add_class("tvz-explorer")
        self.add_class(f"tvz-live-{self.model_id}")
        self._add_stand_in_rule()
        self.state = state
        self._current: Render | None = None
        self._wire()
        self._add_tree_panel()
        self._show(state)  # not guarded: a first render that fails raises to the caller

    def compare_with(self, other: Any) -> None:
        """Compare with ``other`` from now on (the compare mode: both layouts row by row above
        the lanes), or stop comparing (None). The "compare with…" row calls it.

        Args:
            other: anything ``tv.explore(obj, compare=)`` takes: a model, a state dict, a path
                or URL (a file, folder, index, DCP folder, ``hf://``), a Layout, or a
                ``tv.diff(obj, other)`` result; None goes back to one source.

        Raises:
            TensorvizError: ``other`` cannot be read (the message names it and the fix); the
                picture stays as it was.

        >>> ex.compare_with("reloaded/model.safetensors")   # doctest: +SKIP
        """
        with gc_paused():
            self._set_compare(other)
        self._show(self.state)

    def _set_compare(self, compare: Any) -> None:
        """Keep the compare mode's rows: ``compare`` is a LayoutDiff, or b (anything tv.diff
        takes), or None (one source)."""
        if compare is not None and not isinstance(compare, LayoutDiff):
            compare = diff_layouts(self.tensor_layout, as_layout(compare))
        self.compare_rows = None if compare is None else CompareRows(compare)
        self._compare_to_panes()

    def _compare_to_panes(self) -> None:
        """The panes that show a's views hover with b's side: the canvas asks for rows not sent,
        the model map's tensor cells get a line each."""
        rows = self.compare_rows
        if hasattr(self, "canvas"):
            self.canvas.compare_lookup = None if rows is None else rows.lookup
        model_map = getattr(self, "model_map", None)  # none before _add_tree_panel, or for flat names
        if model_map is not None:
            model_map.set_notes(None if rows is None else rows.note)

    def _add_stand_in_rule(self) -> None:
        """The hidden ``<style>`` that hides this explorer's stand-in while its canvas is drawn
        (:func:`~tensorviz.explorer.static.stand_in_rule`); it is on a page only where the
        explorer itself rendered."""
        rule = W.HTML(stand_in_rule(f"tvz-live-{self.model_id}"), layout=W.Layout(display="none"))
        rule.add_class("tvz-stand-in-rule")
        self.children = (*self.children, rule)
        self.stand_in_emitted = False  # explore(snapshot=True) sets it once the stand-in is out

    def _wire(self) -> None:
        for box in (self.by_toggle, self.name_filter, self.only_shared_box, self.unreferenced_box, self.expand_box):
            box.observe(self._on_control, names="value")
        self.storage_picker.observe(self._on_storage, names="value")
        self.canvas.observe(self._on_selected, names="selected")
        self.explain_button.on_click(self._on_explain)
        if self.save_pane is not None:
            self.save_pane.observe(self._on_save_opened, names="selected_index")

    def _add_tree_panel(self) -> None:
        """For a model (names nest), the model map leads: a treemap of where the bytes go
        (:mod:`tensorviz.explorer.modelmap`) under the title, and under it the module list
        and search (:mod:`tensorviz.explorer.tree`) folded in ``modules_pane``. Choosing a
        module in either filters the diagram to its tensors and opens the map there."""
        self.tree_panel = self.model_map = self.modules_pane = None
        if not any("." in n for n in self.tensor_layout.names):
            return
        from tensorviz.explorer.modelmap import ModelMap
        from tensorviz.explorer.tree import TreePanel

        self.tree_panel = TreePanel(self.tensor_layout, layout=W.Layout(width="100%"))
        self.tree_panel.memory.layout.display = "none"  # the map above draws the same shares
        self.tree_panel.observe(self._on_module, names="selected")
        self.model_map = ModelMap(self.tree_panel.tree)
        self.model_map.observe(self._on_map, names="picked")
        self._compare_to_panes()
        self.modules_pane = W.Accordion(children=[self.tree_panel], selected_index=None)
        count = self.tree_panel.tree.count()
        self.modules_pane.set_title(0, f"modules: list and search ({count:,} modules and tensors)")
        self.modules_pane.add_class("tvz-modules")
        self.children = (self.children[0], self.model_map, self.modules_pane, *self.children[1:])

    @_guarded("filtering to a module")
    def _on_module(self, change: dict) -> None:
        panel, model_map = self.tree_panel, self.model_map  # both there: they called
        if panel is not None and model_map is not None:
            self.name_filter.value = panel.name_pattern()
            model_map.focus(panel.selected)

    @_guarded("opening a module")
    def _on_map(self, change: dict) -> None:
        if self.tree_panel is not None:
            self.tree_panel.select(change["new"][0] if change["new"] else "")

    @property
    def selected(self) -> list[str]:
        """The selected tensor names (the canvas holds them; a click there or in the list sets them).

        Raises (on assignment):
            KeyError: no such tensor (naming close matches).
            traitlets.TraitError: a tensor not in the picture now (the message says how to show it).
        """
        return list(self.canvas.selected)

    @selected.setter
    def selected(self, names: list[str]) -> None:
        self.canvas.selected = list(names)

    # -- callbacks -------------------------------------------------------------------------
    @_guarded("selection")
    def _on_selected(self, change: dict) -> None:
        self._show_selection()
        if self.explain_pane.selected_index == 0:  # open: it follows the selection
            self._explain()

    @_guarded("redraw")
    def _on_control(self, change: dict) -> None:
        self._refresh(self._read_controls())

    @_guarded("storage selection")
    def _on_storage(self, change: dict) -> None:
        self._set_zoom_options(storage_index(change["new"]), None)
        self._refresh(self._read_controls())

    @_guarded("details")
    def _on_list(self, change: dict) -> None:
        self.canvas.selected = list(change["new"])

    @_guarded("explain")
    def _on_explain(self, _button: Any = None) -> None:
        """Explain the selection in the explain pane: the interactive panel (hover an element:
        its cell and address; a stride playground), the static picture where it cannot run."""
        self._explain()
        self.explain_pane.selected_index = 0

    def _explain(self) -> None:
        """The explain pane of the selection; in the compare mode a's views, then b's (the
        matched names and the names only in b), each under a heading naming its side."""
        rows = self.compare_rows
        if rows is None:
            names = tuple(n for n in self.selected if n in self.tensor_layout)
            message, png = explain_png(self.tensor_layout, names)
            live = explain_live(self.tensor_layout, names, png)
            self.explain_b.children = ()
        elif not self.selected:
            message, png, live = explain_png(self.tensor_layout, ())[0], None, None
            self.explain_b.children = ()
        else:
            (names, names_b), d = rows.side_names(self.selected), rows.diff
            message, png, live = explain_side(self.tensor_layout, names, "a", d.source_a)
            message_b, png_b, live_b = explain_side(rows.layouts[1], names_b, "b", d.source_b)
            shown_b = live_b if live_b is not None or png_b is None else W.Image(value=png_b, format="png")
            self.explain_b.children = (W.HTML(message_b),) + (() if shown_b is None else (shown_b,))
        self.explain_message.value = message
        if png is not None:
            self.explain_picture.value = png
        self.explain_live.children = () if live is None else (live,)
        self.explain_picture.layout.display = None if png is not None and live is None else "none"

    @_guarded("save check")
    def _on_save_opened(self, change: dict) -> None:
        if change["new"] == 0 and not self.save_body.value:
            from tensorviz.savecheck.report import save_check

            # The same check as tv.save_check(model) while the model lives (all its savers and
            # module facts); a weak reference only, so deleting the model still frees it.
            subject = self.save_subject() if self.save_subject is not None else None
            self.save_body.value = save_check(self.tensor_layout if subject is None else subject).to_html()

    # -- redrawing --------------------------------------------------------------------------
    def _refresh(self, state: ExplorerState) -> None:
        """Show what the controls say, once it can be drawn (else say why, keeping the picture)."""
        problem = control_problem(state, self.tensor_layout)
        if problem:
            self._say(problem, error=True)
            return
        self._show(normalise(state, self.tensor_layout))

    def _show(self, state: ExplorerState) -> None:
        """Plan (or take from the cache) a normalised state and show it."""
        render, cached = self._renderer.get(state)
        self.state, self._current = state, render
        d = render.diagram
        names = diagram_names(d)
        self._drawn_order = names
        shown = shown_text(self.tensor_layout, d, len(names))
        section = None if self.compare_rows is None else self.compare_rows.section(state.names)
        self.payload_nbytes = self.canvas.show(
            d, self.tensor_layout, caption=shown, context=state.describe(), compare=section
        )
        self._show_selection()
        self._show_focus(state)
        self._say_inert(folded=d.collapsed is not None)
        how = "from cache" if cached else f"planned in {render.ms:.0f} ms"
        if not names and d.collapsed is None:
            self._say(f"nothing to draw: no tensor matches ({state.describe()}).", error=False)
            return
        self._say(f"{state.describe()} · {how}")

    def _list_tags(self, names: tuple[str, ...]) -> list[str] | None:
        """In compare mode, what changed for each listed name (``CompareRows.list_tags``)."""
        return None if self.compare_rows is None else self.compare_rows.list_tags(names)

    def _details_html(self, selected: tuple[str, ...]) -> str:
        """The details pane: the selected views, or in compare mode both sides of each selected row."""
        if self.compare_rows is not None:
            return self.compare_rows.details_html(selected)
        return details_html(self.tensor_layout, selected)

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
        if self._current is None:  # pragma: no cover - the constructor draws the first state
            raise RuntimeError("the explorer has drawn nothing yet")
        return self._current.diagram

    @property
    def png(self) -> bytes:
        """The static PNG of the state shown now (drawn on first use, cached per state)."""
        return self._renderer.picture(self.state)[1]

    @property
    def status(self) -> str:
        """The status line as plain text."""
        return html.unescape(re.sub(r"<[^>]+>", "", self.status_line.value))

    def static(self, hide_when_live: bool = False, kind: str = "snapshot") -> Snapshot:
        """The current state as a :class:`Snapshot` (PNG + escaped HTML + text), not displayed;
        in compare mode the static side by side of the two layouts (:meth:`CompareRows.static`)."""
        from tensorviz.render.html.diagram import diagram_html

        live = f"tvz-live-{self.model_id}" if hide_when_live else ""
        if self.compare_rows is not None:
            return Snapshot(*self.compare_rows.static(title(self.tensor_layout)), hide_when_live=live, kind=kind)
        caption = f"{title(self.tensor_layout)}; {self.state.describe()}"
        capped, png = self._renderer.picture(self.state)
        text = f"{caption}\n{capped.to_text()}"
        body = diagram_html(capped, self.tensor_layout, png)
        return Snapshot(png, body, caption, text, hide_when_live=live, kind=kind)

    def snapshot(self) -> None:
        """Emit the current state as static output (a picture that needs no kernel).

        >>> ex.snapshot()   # doctest: +SKIP
        """
        _display(self.static())

    def to_html(self) -> str:
        """The current state as standalone escaped HTML (an embedded PNG and a caption)."""
        return self.static().to_html()

    def _display_(self) -> Any:
        """What marimo draws (it asks ``_display_`` first): the live explorer as marimo elements
        and anywidgets (:mod:`tensorviz.explorer.marimo`); elsewhere the static picture."""
        from tensorviz.explorer.marimo import in_marimo, marimo_view

        return marimo_view(self) if in_marimo() else self.static(kind="static")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget view and the current state as text; the picture too only when no stand-in
        was emitted (each frontend renders one mimetype of an output, and the stand-in is the
        picture wherever the widget does not draw: see :mod:`tensorviz.explorer.static`)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        static = self.static(kind="static")
        bundle = {WIDGET_VIEW: bundle[WIDGET_VIEW], "text/plain": static.text}
        if not self.stand_in_emitted:
            bundle["image/png"] = static._repr_mimebundle_(include={"image/png"})["image/png"]
        return bundle


def _load_pane(ex: Explorer, model: Any, source: Any, loader: str | None) -> None:
    """The load-check pane of ``tv.explore(model, load=source)`` (:mod:`.loadpane`), if asked for."""
    if source is None:
        return
    from tensorviz.explorer.loadpane import LoadSubject, attach

    attach(ex, LoadSubject(model, source, loader))


def explore(
    obj: Any,
    *,
    by: str = "storage",
    names: str | None = None,
    only_shared: bool = False,
    show_unreferenced: bool = True,
    storage: int | str | None = None,
    byte_range: tuple[int, int] | None = None,
    expand_simple: bool = False,
    all_storages: bool = False,
    max_lanes: int | None = None,
    dpi: int = 100,
    width: float | None = None,
    snapshot: bool = True,
    load: Any = None,
    loader: str | None = None,
    compare: Any = None,
    compare_choices: dict[str, Any] | None = None,
) -> Explorer:
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
        all_storages: draw every storage from the start; by default a model of many storages
            first draws those that matter (every shared or freed one, and the largest), with
            the rest one click away ("show all N storages").
        max_lanes: most lanes drawn, on the live canvas and in the static picture (the rest go
            to a "… N more" row); None (the default): the canvas draws every lane and scrolls
            through them, the static picture 40.
        dpi, width: size of the static picture (PNG) in the display bundle and snapshots (see
            :func:`tensorviz.plan.diagram.diagram`).
        snapshot: also emit the first state's picture as an ``image/png`` output just before
            the explorer, for every page without a live explorer (nbconvert with or without
            widget state, GitHub, nbviewer, VS Code, a saved notebook whose kernel is gone); the
            live explorer hides it (:mod:`tensorviz.explorer.static`). With ``False`` the picture
            travels in the explorer's own bundle instead, where the widget view outranks it.
        load, loader: a source to load into ``obj``, the first loader (:func:`tensorviz.explore`).
        compare, compare_choices: b, drawn with a row by row (:func:`tensorviz.explore`); named
            things the "compare with…" row offers (:mod:`tensorviz.explorer.comparepane`).

    Returns:
        The :class:`Explorer` widget (display it, e.g. as the cell's last expression).

    Raises:
        ValueError: a bad pattern, grouping, storage or byte range (the message says which).

    >>> import torch, tensorviz as tv                                # doctest: +SKIP
    >>> a = torch.rand(8, 10, 50)                                    # doctest: +SKIP
    >>> tv.explore({"a": a, "b": a[2:4], "c": a[4:6]}, by="span")    # doctest: +SKIP
    """
    with gc_paused():  # widgets, plan and picture: no collector pass over the whole kernel's heap
        layout = as_layout(obj)
        if isinstance(storage, str):
            storage = layout.storage(storage).index
        state = ExplorerState(
            by=by, names=names or "", only_shared=only_shared, show_unreferenced=show_unreferenced, storage=storage,
            byte_range=(int(byte_range[0]), int(byte_range[1])) if byte_range is not None else None,
            expand_simple=expand_simple, all_storages=all_storages,
        )  # fmt: skip
        static = 40 if max_lanes is None else max_lanes  # the canvas: every lane, unless max_lanes says
        choices = choice_layouts(compare_choices)  # before the explorer: a bad choice raises first
        ex = Explorer(layout, state, max_lanes=static, dpi=dpi, width=width, canvas_lanes=max_lanes, compare=compare)
        attach_compare(ex, choices)
        if not isinstance(obj, (Layout, str, os.PathLike)):
            with contextlib.suppress(TypeError):  # a dict or list: the layout's check is what its savers see
                ex.save_subject = weakref.ref(obj)
        _load_pane(ex, obj, load, loader)
        if snapshot:
            ex.stand_in_emitted = _display(ex.static(hide_when_live=True), kernel_only=True)
    return ex
