"""``tv.explain(..., interactive=True)``: the teaching panel drawn in the browser.

An ``anywidget`` with its own ES module (``explain.js``, no build step): Python plans the panel
(:func:`tensorviz.plan.explain.layout_plan`, metadata only) and ships each view's numbers
(shape, stride, offset, itemsize, name, colour); the browser computes every element's storage
cell itself, so hovering an element lights its cell and formula, hovering a cell lights every
element that reads it, and the stride playground redraws a view with typed-in numbers, all
without a kernel round trip. ``playground`` (the last geometry typed in) syncs back to Python. Where no kernel
runs (a saved notebook, GitHub), the display bundle carries the static panel's PNG.

>>> import torch, tensorviz as tv                                   # doctest: +SKIP
>>> x = torch.arange(12.).reshape(3, 4)                             # doctest: +SKIP
>>> tv.explain(x, x.t(), names=["x", "x.t()"], interactive=True)    # doctest: +SKIP
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import anywidget
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the interactive explain needs anywidget>=0.9: pip install 'tensorviz[widgets]' "
        "(or use tv.explain(...) for a static picture)"
    ) from err
import traitlets

from tensorviz.core.names import elide, terminal
from tensorviz.explorer import modules
from tensorviz.plan.explain import MAX_CELLS, MAX_ELEMENTS, ExplainPlan, Strip

__all__ = ["ExplainWidget", "explain_widget", "plan_payload", "ESM"]

#: The widget's ES module (pure geometry exported for ``node --test``, ``render`` for the DOM).
ESM = Path(__file__).resolve().with_name("explain.js")


def plan_payload(plan: ExplainPlan) -> dict[str, Any]:
    """What the browser needs: per strip its size and cell size, per view its numbers. The
    browser derives every address from them (tests compare with ``plan``'s addresses)."""
    return {
        "maxCells": MAX_CELLS,
        "maxElements": MAX_ELEMENTS,
        "strips": [_strip_payload(s) for s in plan.strips],
    }


def _strip_payload(s: Strip) -> dict[str, Any]:
    views = []
    for v in s.views:
        per = v.itemsize // s.cell_bytes
        base = int(v.addresses.reshape(-1)[0]) - v.offset * per if v.addresses.size else 0
        views.append(
            {
                "name": _shown(v.name),
                "dtype": v.dtype,
                "shape": list(v.shape),
                "stride": list(v.stride),
                "offset": v.offset,
                "itemsize": v.itemsize,
                "base": base,
                "color": v.color,
                "formula": v.formula,
                "shown": v.shown,
            }
        )
    return {"storage": s.storage, "nbytes": s.nbytes, "cellBytes": s.cell_bytes, "views": views}


def _shown(name: str) -> str:
    """A name as the panel draws it: controls and bidi overrides as escapes, a very long one
    by its start and end (a canvas text has no wrap)."""
    return elide(terminal(name), 120)


class ExplainWidget(anywidget.AnyWidget):
    """The interactive teaching panel of one storage's views (the first strip of the plan).

    ``plan`` is the payload of :func:`plan_payload`; ``playground`` is the last geometry typed
    into the stride playground (``{"view", "shape", "stride", "offset", "leaves", "outside"}``).
    """

    _esm = modules.linked(ESM.name)  # its imports (theme.js, treemap.js) linked: see .modules
    plan = traitlets.Dict().tag(sync=True)
    playground = traitlets.Dict().tag(sync=True)

    def __init__(self, plan: ExplainPlan, png: bytes = b"", **kwargs: Any) -> None:
        super().__init__(plan=plan_payload(plan), **kwargs)
        self._png = png
        self._text = "\n".join(f"{_shown(v.name)}: {v.formula}" for s in plan.strips for v in s.views)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:  # type: ignore[override]  # IPython calls it with include/exclude
        bundle = super()._repr_mimebundle_(include=include, exclude=exclude)
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        if data is None:  # no widget front end: the static twin alone
            data = {}
        data = dict(data)
        data["text/plain"] = self._text
        if self._png:
            png = base64.b64encode(self._png).decode("ascii")
            data["image/png"] = png  # once: the widget view, else this picture
        return (data, meta) if isinstance(bundle, tuple) else data


def explain_widget(
    *tensors: Any, names: Sequence[str] | None = None, region: Any = None, width: float | None = None
) -> ExplainWidget:
    """The interactive panel of ``tensors`` (see :func:`tensorviz.render.explain.explain` for
    the arguments); its display bundle carries the static figure's PNG as the fallback."""
    from tensorviz.render.explain import explain_plan
    from tensorviz.render.mpl.figure import png_bytes
    from tensorviz.render.mpl.panel import draw

    plan = explain_plan(*tensors, names=names, region=region)
    return ExplainWidget(plan, png=png_bytes(draw(plan, width=width)))
