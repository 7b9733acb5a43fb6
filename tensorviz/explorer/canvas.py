"""The diagram as a browser canvas: an ``anywidget`` fed the Diagram as one binary payload.

Python plans (:func:`tensorviz.plan.diagram.diagram`) and ships the plan as one ``payload`` trait
(:func:`tensorviz.explorer.payload.payload`: its binary columns framed into one buffer, beside a
few JSON values; one message, one redraw); the ES module ``canvas.js`` (importing the pure helpers of ``geometry.js`` and the
overview's ``overview.js``: real modules, linked by :mod:`.modules`, no build step; styles in
``explorer.css``, the widget's ``_css``) draws it on a HiDPI canvas -- the lanes, and under them
the overview of every storage when the plan has one -- and handles hover, click, drag-zoom and
scrolling without a kernel round trip. ``vocab`` names the payload's codes (flag bits, lane
kinds, marks, relations) once, so the browser reads them by name. ``selected`` (names: the one
copy of the explorer's selection) and ``zoom`` (bytes ``[lo, hi]``, empty when not zoomed) come
back.

>>> import torch, tensorviz as tv                                          # doctest: +SKIP
>>> from tensorviz.explorer.canvas import DiagramCanvas
>>> x = {"a": torch.zeros(8)}                                               # doctest: +SKIP
>>> c = DiagramCanvas(); c.show(tv.diagram(x, max_lanes=10**9), tv.analyze(x))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    import anywidget
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the tensorviz explorer needs anywidget>=0.9: pip install 'tensorviz[widgets]' "
        "(or use tv.show(obj) for a static picture)"
    ) from err
import traitlets

from tensorviz.core.layout import Layout
from tensorviz.explorer import modules, wire
from tensorviz.explorer.payload import COLUMNS, VOCAB, payload, payload_nbytes, relations, view_names

__all__ = ["DiagramCanvas", "esm_source"]

_ENTRY = "canvas.js"
_ASKED = 16  # names one hover may ask the compare rows of (a bar of tied views)


def esm_source() -> str:
    """The widget's ES module: ``canvas.js`` with its imports linked (:func:`.modules.linked`)."""
    return modules.linked(_ENTRY)


class DiagramCanvas(anywidget.AnyWidget):
    """One Diagram on a canvas. Set the data with :meth:`show`; ``selected`` syncs both ways."""

    _esm = esm_source()
    _css = modules.HERE / "explorer.css"
    vocab = traitlets.Dict(VOCAB).tag(sync=True)  # constant: sent once, with the widget
    payload = traitlets.Dict().tag(sync=True)
    relations = traitlets.Dict({"code": b"", "to": b""}).tag(sync=True)
    selected = traitlets.List(traitlets.Unicode()).tag(sync=True)
    zoom = traitlets.List(traitlets.Float()).tag(sync=True)
    # The load check's marks (explorer/loadpane.py, drawn by loadmarks.js): a code per drawn view.
    load_marks = traitlets.Dict({"code": b"", "kinds": []}).tag(sync=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._layout: Layout | None = None
        self._names: list[str] = []
        self._drawn: frozenset[str] = frozenset()
        self._selectable: frozenset[str] = frozenset()  # drawn names, and the compare rows' keys
        self._context = "nothing drawn yet"
        self._from_browser: dict[str, str] = {}  # a hostile name as the browser sends it back -> itself
        self._marks: tuple[dict[str, str], tuple[str, ...]] = ({}, ())
        self.add_class("tvz-canvas")
        modules.watch(self, _ENTRY)
        # compare mode: the rows of a-names as a wire section (CompareRows.lookup), for a hover
        # on a view of a whose row was not sent
        self.compare_lookup: Callable[[list[str]], dict[str, Any]] | None = None
        self.on_msg(self._on_message)

    def _on_message(self, _widget: Any, content: dict, _buffers: list) -> None:
        """The browser asks for the compare rows of views it hovers (``{"kind": "compare_rows",
        "names": [...]}``, names as it shows them): the answer is their section, its frame the
        message's one buffer, with the names asked and this payload's revision."""
        if content.get("kind") != "compare_rows" or self.compare_lookup is None:
            return
        asked = [str(n) for n in content.get("names", [])][:_ASKED]
        sent = dict(self.compare_lookup([self._from_browser.get(n, n) for n in asked]))
        frame = sent.pop("frame")
        self.send({**sent, "kind": "compare_rows", "asked": asked, "revision": self.revision}, [frame])

    def show(self, diagram: Any, layout: Layout, caption: str = "", context: str = "", compare: Any = None) -> int:
        """Send ``diagram`` (one message; the browser redraws once) and keep the selected names it
        still draws. ``context`` says what is drawn, for the message when a name is not.
        ``compare``: the compare mode's :class:`~tensorviz.explorer.compare.CompareSection`,
        sent in the payload as its ``"compare"`` section; its rows' keys are selectable too.
        Returns the payload bytes."""
        data = payload(diagram, layout)
        nbytes = payload_nbytes(data)
        sent = {k: v for k, v in data.items() if k not in COLUMNS}
        sent.update(frame=wire.frame(data, COLUMNS), caption=caption, revision=self.revision + 1)
        keys: frozenset[str] = frozenset()
        if compare is not None:
            sent["compare"], keys = compare.wire(), compare.keys
            nbytes += payload_nbytes(sent["compare"])
        self._layout, self._names = layout, view_names(diagram)
        self._drawn = frozenset(self._names)
        self._selectable = self._drawn | keys
        self._context = context or caption
        self._from_browser = {
            f: n for n in (*self._names, *keys) if (f := wire.browser_form(n)) not in self._selectable
        }
        keep = [n for n in self.selected if n in self._selectable]
        with self.hold_sync():
            self.payload = sent
            self.zoom = []
            self._send_marks()
            if keep == self.selected:
                self._send_relations()
            self.selected = keep  # the observer sends the relations
        return nbytes

    def mark_views(self, marks: dict[str, str], kinds: tuple[str, ...]) -> None:
        """Mark views by name (``{name: kind}``, ``kinds`` in code order) on this and every later picture."""
        self._marks = (dict(marks), tuple(kinds))
        self._send_marks()

    def _send_marks(self) -> None:
        from tensorviz.explorer.loadpane import mark_codes

        marks, kinds = self._marks
        trait: dict[str, Any] = {"code": mark_codes(self._names, marks) if marks else b"", "kinds": list(kinds)}
        self.load_marks = trait

    @property
    def drawn_names(self) -> list[str]:
        """The names of the views the canvas draws now (in drawing order)."""
        return list(self._names)

    @property
    def columns(self) -> dict[str, bytes]:
        """The binary columns sent now, by name (the payload's ``frame`` split as the browser does)."""
        return wire.unframe(self.payload.get("frame", b""), COLUMNS) if self.payload else {}

    @property
    def caption(self) -> str:
        """The caption above the lanes."""
        return self.payload.get("caption", "")

    @property
    def revision(self) -> int:
        """How many diagrams were sent (the browser redraws on each)."""
        return self.payload.get("revision", 0)

    def set_state(self, sync_data: dict) -> None:
        """A message from the browser: a click on a picture Python has since redrawn may name a
        view no longer drawn; it is dropped (a name set from Python raises instead)."""
        if "selected" in sync_data:
            names = (self._from_browser.get(n, n) for n in sync_data["selected"])
            sync_data = {**sync_data, "selected": [n for n in names if n in self._selectable]}
        super().set_state(sync_data)

    @traitlets.validate("selected")
    def _own_names(self, proposal: dict) -> list[str]:
        """Names as the layout has them (a click sends a name as the browser decoded it: a newline
        as ``\\n``, a lone surrogate escaped; :func:`~tensorviz.explorer.wire.browser_form`), each
        drawn now.

        Raises:
            KeyError: no such tensor (naming close matches).
            traitlets.TraitError: a tensor not in the picture now (the message says how to show it).
        """
        names = list(dict.fromkeys(self._from_browser.get(n, n) for n in proposal["value"]))
        for name in names:
            if name in self._selectable:
                continue
            if self._layout is not None:
                self._layout[name]  # KeyError naming close matches when there is no such tensor
            raise traitlets.TraitError(
                f"{name!r} is not in the picture now ({self._context}): clear the name filter "
                f"or pick its storage to select it"
            )
        return names

    @traitlets.observe("selected")
    def _on_selected(self, change: dict) -> None:
        self._send_relations()

    def _send_relations(self) -> None:
        """Each drawn view's relation to the selection (the browser outlines and dims by it)."""
        if self._layout is None:
            return
        code, to = relations(self._layout, self._names, list(self.selected))
        self.relations = {"code": code.tobytes(), "to": to.astype("<u4").tobytes()}
