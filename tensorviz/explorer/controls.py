"""The explorer's controls: built, arranged, read back into a state, and shown.

A mixin of :class:`tensorviz.explorer.widget.Explorer`, which wires the callbacks. Imported only by
:mod:`tensorviz.explorer.widget` (so only through :func:`tensorviz.explore`). The styles are in
``explorer.css`` (the canvas's ``_css``).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import ipywidgets as W

from tensorviz.core.layout import Layout
from tensorviz.core.names import elide, terminal
from tensorviz.core.units import byte_text
from tensorviz.explorer.state import GROUPINGS, ExplorerState, groupings, key_storages
from tensorviz.explorer.text import details_html, offset_label, title, zoom_points

#: Names listed in the tensor list at most (a <select> of 100,000 options slows the whole page);
#: the diagram draws and the selection accepts every name.
LIST_CAP = 2000
#: Characters of a name the list and the storage picker show (start … end); the canvas's
#: tooltips keep 300 (geometry.js NAME_SHOWN), the text outputs 400 (core.names.LINE_CAP).
NAME_SHOWN = 160

_ALL = -1  # the storage picker's "all storages" (None would mean "nothing selected" to ipywidgets)


class ExplorerControls:
    """Builds the explorer's widgets from a state and reads the state back from them.

    Expects ``tensor_layout`` (the analysed Layout) and the callbacks ``_on_control`` (a control
    changed) and ``_on_list`` (the list's selection changed), which it keeps from seeing its own
    writes to the zoom slider and the list.
    """

    tensor_layout: Layout
    _on_control: Callable
    _on_list: Callable

    # -- construction --------------------------------------------------------------------
    def _build_controls(self, state: ExplorerState) -> None:
        head, _, rest = title(self.tensor_layout).partition(": ")
        self.title = W.HTML(f'<div class="tvz-title"><b>{html.escape(head)}</b>: {html.escape(rest)}</div>')
        self._build_switches(state)
        self._build_storage_controls(state)
        self._build_outputs()
        self._build_explain_pane()
        self.save_pane = self._build_save_pane()

    def _build_switches(self, state: ExplorerState) -> None:
        choices = groupings(self.tensor_layout)
        shard_tips = ["bars coloured by the rank that holds (or saved) them"] + [
            f"bars coloured by their {by.removeprefix('mesh:')} coordinate" for _, by in choices[len(GROUPINGS) + 1 :]
        ]
        self.by_toggle = W.ToggleButtons(
            options=list(choices),
            value=state.by,
            tooltips=["same storage", "same storage and identical byte span", "footprints that share bytes"]
            + shard_tips[: len(choices) - len(GROUPINGS)],
            layout=W.Layout(width="auto"),
            style={"button_width": "96px"},
        )
        self.name_filter = W.Text(
            value=state.names,
            placeholder="name regex, e.g. attn|mlp",
            description="names",
            continuous_update=False,
            layout=W.Layout(width="260px"),
            style={"description_width": "46px"},
        )
        self.only_shared_box = W.Checkbox(
            value=state.only_shared, description="only shared", indent=False, layout=W.Layout(width="auto")
        )
        self.unreferenced_box = W.Checkbox(
            value=state.show_unreferenced,
            indent=False,
            description="show unreferenced bytes",
            layout=W.Layout(width="auto"),
        )
        self.expand_box = W.Checkbox(
            value=state.expand_simple, indent=False, description="expand simple storages", layout=W.Layout(width="auto")
        )
        self.inert_hint = W.HTML(layout=W.Layout(margin="0 0 0 6px"))
        self._mark_inert()

    def _mark_inert(self) -> None:
        """Controls that cannot change this model's picture are disabled, and the hint says why."""
        lay = self.tensor_layout
        shared = any(len(s.names) > 1 for s in lay.storages)
        unref = any(s.unreferenced_nbytes for s in lay.storages)
        notes = []
        if not shared and not self.only_shared_box.value:
            self.only_shared_box.disabled = True
            notes.append("no storage is shared, so 'only shared' and the groupings change nothing")
        if not unref and self.unreferenced_box.value:
            self.unreferenced_box.disabled = True
            notes.append("every byte is read by some view (no unreferenced bytes)")
        self._inert_notes = notes
        self._say_inert(folded=True)

    def _say_inert(self, folded: bool) -> None:
        """Update the hint; ``folded``: the current picture folds simple storages into one row."""
        notes = list(self._inert_notes)
        self.expand_box.disabled = not folded and not self.expand_box.value
        if self.expand_box.disabled:
            notes.append("no simple storages are folded here")
        text = "; ".join(notes)
        self.inert_hint.value = f'<span class="tvz-muted">({html.escape(text)})</span>' if text else ""

    def _build_storage_controls(self, state: ExplorerState) -> None:
        self.storage_picker = W.Dropdown(
            options=_storage_options(self.tensor_layout),
            value=_ALL if state.storage is None else state.storage,
            layout=W.Layout(width="300px"),
        )
        self.zoom = W.SelectionRangeSlider(
            options=[("0 B", 0), ("0 B", 1)],
            index=(0, 1),
            description="bytes",
            continuous_update=False,
            layout=W.Layout(width="480px"),
            style={"description_width": "46px"},
        )
        self.zoom.observe(self._on_control, names="value")  # wired here: _set_zoom_options mutes it
        self.zoom_hint = W.HTML('<span class="tvz-muted">choose one storage to zoom into its bytes</span>')
        self._set_zoom_options(state.storage, state.byte_range)

    def _build_outputs(self) -> None:
        from tensorviz.explorer.canvas import DiagramCanvas

        self.status_line = W.HTML(layout=W.Layout(margin="0 0 0 4px"))
        self.status_line.add_class("tvz-status")
        self.canvas = DiagramCanvas()  # sized by the explorer's CSS (.tvz-diagram), not inline styles
        # The storages that matter first (state.key); this shows the rest (or only those again).
        self.all_toggle = W.ToggleButton(value=False, icon="list", layout=W.Layout(width="auto"))
        self.all_toggle.observe(self._on_control, names="value")
        self.focus_note = W.HTML()
        self.focus_row = W.HBox(
            [self.focus_note, self.all_toggle], layout=W.Layout(flex_flow="row wrap", align_items="center")
        )
        self.focus_row.add_class("tvz-row")
        self.tensor_list = W.SelectMultiple(options=[], rows=9, description="", layout=W.Layout(width="auto"))
        self.tensor_list.observe(self._on_list, names="value")  # wired here: _show_selection mutes it
        self.list_note = W.HTML()
        self._drawn_order: tuple[str, ...] = ()
        self.details = W.HTML(
            details_html(self.tensor_layout, ()), layout=W.Layout(max_height="360px", overflow="auto")
        )
        # An empty slot left of the diagram for a side panel (e.g. a module tree): see set_panel.
        self.panel = W.VBox([], layout=W.Layout(display="none"))
        self.panel.add_class("tvz-panel")

    def _build_explain_pane(self) -> None:
        self.explain_button = W.Button(
            description="explain selected",
            icon="graduation-cap",
            tooltip="draw each selected view's elements beside the storage bytes they read",
            layout=W.Layout(width="auto"),
        )
        self.explain_message = W.HTML()
        # The interactive panel of the selection (explain_widget.ExplainWidget), and the static
        # picture, shown where the interactive one cannot be drawn.
        self.explain_live = W.VBox([])
        self.explain_picture = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto", display="none"))
        # In the compare mode, b's side below a's: its heading and message, then its panel.
        self.explain_b = W.VBox([])
        body = W.VBox(
            [self.explain_message, self.explain_live, self.explain_picture, self.explain_b],
            layout=W.Layout(max_height="640px", overflow="auto"),
        )
        self.explain_pane = W.Accordion(children=[body], selected_index=None)
        self.explain_pane.set_title(0, "explain: which storage cell each element of the selected views reads")
        self.explain_pane.add_class("tvz-explain")

    def _build_save_pane(self) -> W.Accordion | None:
        try:
            from tensorviz.savecheck import (  # noqa: F401 - optional: another module of the package
                report as saving,
            )
        except ImportError:
            return None
        self.save_body = W.HTML("")
        pane = W.Accordion(children=[self.save_body], selected_index=None)
        pane.set_title(0, "what savers would do (safetensors, torch.save, transformers, accelerate)")
        return pane

    def _arrange(self) -> list:
        wrap = dict(flex_flow="row wrap", align_items="center")
        row1 = W.HBox([_label("group by"), self.by_toggle, self.name_filter], layout=W.Layout(**wrap))
        row2 = W.HBox(
            [_label("show"), self.only_shared_box, self.unreferenced_box, self.expand_box, self.inert_hint],
            layout=W.Layout(**wrap),
        )
        row3 = W.HBox([_label("storage"), self.storage_picker, self.zoom, self.zoom_hint], layout=W.Layout(**wrap))
        side = W.VBox(
            [
                W.HTML("<b>tensors in the picture</b>"),
                self.tensor_list,
                self.list_note,
                self.explain_button,
                self.details,
            ],
        )
        side.add_class("tvz-side")
        # Panel | diagram | list and details; wraps under each other in a narrow column.
        diagram = W.VBox([self.canvas, self.focus_row])
        diagram.add_class("tvz-diagram")
        main = W.HBox([self.panel, diagram, side], layout=W.Layout(flex_flow="row wrap", align_items="flex-start"))
        main.add_class("tvz-main")
        for row in (row1, row2, row3):
            row.add_class("tvz-row")  # spacing via CSS: ipywidgets' Layout has no "gap"
        children = [self.title, row1, row2, row3, self.status_line, main, self.explain_pane]
        if self.save_pane is not None:
            children.append(self.save_pane)
        return children

    def set_panel(self, widget: W.Widget | None) -> None:
        """Show ``widget`` in the side panel left of the diagram (None hides the panel)."""
        self.panel.children = () if widget is None else (widget,)
        self.panel.layout.display = "none" if widget is None else None

    # -- state <-> controls ----------------------------------------------------------------
    def _read_controls(self) -> ExplorerState:
        storage = storage_index(self.storage_picker.value)
        lo, hi = self.zoom.value
        return ExplorerState(
            by=self.by_toggle.value,
            names=self.name_filter.value.strip(),
            only_shared=self.only_shared_box.value,
            show_unreferenced=self.unreferenced_box.value,
            storage=storage,
            byte_range=None if storage is None else (lo, hi),
            expand_simple=self.expand_box.value,
            all_storages=self.all_toggle.value,
        )

    def _set_zoom_options(self, storage: int | None, byte_range: tuple[int, int] | None) -> None:
        with _unobserved(self.zoom, self._on_control):
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

    def _show_focus(self, state: ExplorerState) -> None:
        """The row under the diagram: how many storages it draws of how many, and the toggle
        to draw every storage (or only those that matter again); hidden where it changes nothing."""
        key, n = key_storages(self.tensor_layout), len(self.tensor_layout.storages)
        shown = key is not None and state.storage is None and not state.names
        self.focus_row.layout.display = None if shown else "none"
        if key is None or not shown:
            return
        with _unobserved(self.all_toggle, self._on_control):
            self.all_toggle.value = state.all_storages
        if state.all_storages:
            self.all_toggle.description = f"show only the {len(key):,} that matter"
            self.focus_note.value = f'<span class="tvz-muted">all {n:,} storages drawn</span>'
        else:
            self.all_toggle.description = f"show all {n:,} storages"
            self.focus_note.value = (
                f'<span class="tvz-muted">drawn: the {len(key):,} storages that matter of {n:,} '
                f"(every shared or freed one, and the largest)</span>"
            )

    def _show_selection(self) -> None:
        """The list and the details show the selection (held once, by the canvas): the list has
        the drawn names (the first :data:`LIST_CAP`, plus any selected)."""
        selected = tuple(self.canvas.selected)
        names = self._drawn_order
        listed = names[:LIST_CAP]
        known = set(listed)
        shown = listed + tuple(n for n in selected if n not in known)
        with _unobserved(self.tensor_list, self._on_list):  # new options first clear its value
            options = _listed(shown, self._list_tags(shown))
            if tuple(self.tensor_list.options) != tuple(options):
                self.tensor_list.options = options
                self.tensor_list.rows = max(2, min(9, len(shown)))  # no empty box under a few names
            self.tensor_list.value = selected
        self.details.value = self._details_html(selected)
        more = len(names) - len(listed)
        self.list_note.value = (
            f'<span class="tvz-muted">first {len(listed):,} of {len(names):,} listed: hover or click the '
            f"diagram, or filter by name, to reach the others</span>"
            if more > 0
            else ""
        )

    def _list_tags(self, names: tuple[str, ...]) -> list[str] | None:
        """Per listed name, a tag shown after it (the compare mode: what changed); None: none."""
        return None

    def _details_html(self, selected: tuple[str, ...]) -> str:
        """The details pane of ``selected`` (the compare mode shows both sides instead)."""
        return details_html(self.tensor_layout, selected)


@contextmanager
def _unobserved(widget: W.Widget, handler: Callable) -> Iterator[None]:
    """``widget``'s value written by the code, not the user: ``handler`` (observing it since the
    widget was built) does not see it."""
    widget.unobserve(handler, names="value")
    try:
        yield
    finally:
        widget.observe(handler, names="value")


def _label(text: str) -> W.HTML:
    return W.HTML(html.escape(text), layout=W.Layout(width="60px", margin="0 0 0 6px"))


def _listed(names: tuple[str, ...], tags: list[str] | None = None) -> tuple[str, ...] | list[tuple[str, str]]:
    """The tensor list's options: the names, or (shown, name) pairs when some name is very long
    or unsafe (elided and escaped as the text outputs show names, :func:`tensorviz.core.names.
    shown`; ipywidgets takes pairs only when every option is one), or carries a tag (``tags``,
    one per name: "" for none) after a dash."""
    labels = [elide(terminal(n), NAME_SHOWN) for n in names]
    if tags is not None:
        labels = [f"{label}  — {tag}" if tag else label for label, tag in zip(labels, tags)]
    return names if all(a == n for a, n in zip(labels, names)) else list(zip(labels, names))


def storage_index(value: int) -> int | None:
    """The storage a picker value selects (None: all storages)."""
    return None if value == _ALL else value


def _storage_options(layout: Layout) -> list[tuple[str, int]]:
    opts: list[tuple[str, int]] = [("all storages", _ALL)]
    for s in layout.storages:
        first = elide(terminal(s.names[0]), NAME_SHOWN) if s.names else "no views"
        more = f" +{len(s.names) - 1}" if len(s.names) > 1 else ""
        opts.append((f"#{s.index} {first}{more} · {byte_text(s.nbytes)}", s.index))
    return opts
