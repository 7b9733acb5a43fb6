"""The diagram as a browser canvas: an ``anywidget`` fed the Diagram as binary columns.

Python plans (:func:`tensorviz.plan.diagram.diagram`) and ships the plan
(:func:`tensorviz.explorer.payload.payload`); the ES module ``canvas.js`` (with the pure
helpers of ``geometry.js`` and the overview's ``overview.js`` in front of it, all shipped as
package data, no build step) draws it on a HiDPI canvas -- the lanes, and under them the
overview of every storage when the plan has one -- and handles hover, click, drag-zoom and
scrolling without a kernel round trip. ``selected`` (names) and ``zoom`` (bytes ``[lo, hi]``, empty when not zoomed) come back.

>>> import torch, tensorviz as tv                                          # doctest: +SKIP
>>> from tensorviz.explorer.canvas import DiagramCanvas
>>> x = {"a": torch.zeros(8)}                                               # doctest: +SKIP
>>> c = DiagramCanvas(); c.show(tv.diagram(x, max_lanes=10**9), tv.analyze(x))  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
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
from tensorviz.explorer import wire
from tensorviz.explorer.payload import payload, relations, view_names

__all__ = ["DiagramCanvas", "esm_source"]

_HERE = Path(__file__).resolve().parent


def esm_source() -> str:
    """The widget's ES module: ``geometry.js``, ``overview.js`` then ``canvas.js`` (their import
    lines dropped: one module, no build step)."""
    parts = [(_HERE / name).read_text(encoding="utf-8") for name in ("geometry.js", "overview.js", "canvas.js")]
    return "\n".join("\n".join(ln for ln in p.splitlines() if not ln.startswith("import ")) for p in parts)


def _bytes_trait() -> traitlets.Bytes:
    return traitlets.Bytes(b"").tag(sync=True)


class DiagramCanvas(anywidget.AnyWidget):
    """One Diagram on a canvas. Set the data with :meth:`show`; ``selected`` syncs both ways."""

    _esm = esm_source()
    bar_start = _bytes_trait()
    bar_stop = _bytes_trait()
    bar_lane = _bytes_trait()
    bar_color = _bytes_trait()
    bar_flags = _bytes_trait()
    pct_bar = _bytes_trait()
    pct = _bytes_trait()
    bar_view = _bytes_trait()
    tie_first = _bytes_trait()
    ties = _bytes_trait()
    run_bar = _bytes_trait()
    runs = _bytes_trait()
    lane_kind = _bytes_trait()
    lane_labels = _bytes_trait()
    block_tag = _bytes_trait()
    special_lane = _bytes_trait()
    special_size = _bytes_trait()
    block_storage = _bytes_trait()
    block_nbytes = _bytes_trait()
    mark_kind = _bytes_trait()
    mark_lane = _bytes_trait()
    mark_start = _bytes_trait()
    mark_stop = _bytes_trait()
    names = _bytes_trait()
    name_prefix = _bytes_trait()
    name_suffix = _bytes_trait()
    geom_heads = _bytes_trait()
    geom = _bytes_trait()
    dtype = _bytes_trait()
    ov_cells = _bytes_trait()
    ov_views = _bytes_trait()
    ov_nbytes = _bytes_trait()
    ov_storage = _bytes_trait()
    ov_unref = _bytes_trait()
    ov_names = _bytes_trait()
    ov_name_prefix = _bytes_trait()
    ov_name_suffix = _bytes_trait()
    ov_label_entry = _bytes_trait()
    ov_labels = _bytes_trait()
    ov_columns = traitlets.Int(0).tag(sync=True)
    ov_colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    dtypes = traitlets.List(traitlets.Unicode()).tag(sync=True)
    colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    x_range = traitlets.List(traitlets.Float(), default_value=[0.0, 1.0]).tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    revision = traitlets.Int(0).tag(sync=True)
    selected = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rel = _bytes_trait()
    rel_to = _bytes_trait()
    zoom = traitlets.List(traitlets.Float()).tag(sync=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._layout: Layout | None = None
        self._names: list[str] = []
        self._from_browser: dict[str, str] = {}  # a hostile name as the browser sends it back -> itself
        self.add_class("tvz-canvas")

    def show(self, diagram: Any, layout: Layout, caption: str = "") -> int:
        """Send ``diagram`` (one message; the browser redraws once). Returns the payload bytes."""
        data = payload(diagram, layout)
        self._layout = layout
        self._names = view_names(diagram)
        drawn = set(self._names)
        self._from_browser = {f: n for n in self._names if (f := wire.browser_form(n)) not in drawn}
        keep = [n for n in self.selected if n in drawn]
        code, to = relations(layout, self._names, keep)
        with self.hold_sync():
            for key, value in data.items():
                setattr(self, key, value)
            self.caption = caption
            self.zoom = []
            self.selected = keep
            self.rel, self.rel_to = code.tobytes(), to.astype("<u4").tobytes()
            self.revision += 1
        return sum(len(v) if isinstance(v, bytes) else len(repr(v)) for v in data.values())

    @property
    def drawn_names(self) -> list[str]:
        """The names of the views the canvas draws now (in drawing order)."""
        return list(self._names)

    @traitlets.validate("selected")
    def _own_names(self, proposal: dict) -> list[str]:
        """Names as the layout has them: a click sends a name as the browser decoded it (a
        newline as U+2424, a lone surrogate as U+FFFD; :func:`~tensorviz.explorer.wire.browser_form`)."""
        if not self._from_browser:
            return proposal["value"]
        return list(dict.fromkeys(self._from_browser.get(n, n) for n in proposal["value"]))

    @traitlets.observe("selected")
    def _on_selected(self, change: dict) -> None:
        if self._layout is None:
            return
        code, to = relations(self._layout, self._names, list(change["new"]))
        with self.hold_sync():
            self.rel, self.rel_to = code.tobytes(), to.astype("<u4").tobytes()
