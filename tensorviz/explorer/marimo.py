"""The explorer in marimo: its controls as marimo UI elements, its canvas and model map live.

marimo renders anywidgets (``mo.ui.anywidget``) but not ipywidgets layouts, so a bare
``tv.explore(m)`` showed only its static picture. marimo asks an object for ``_display_()``
first; :meth:`Explorer._display_ <tensorviz.explorer.widget.Explorer._display_>` returns
:func:`marimo_view`: the title, the model map (an anywidget), marimo's own radio, text, checkbox,
switch and dropdown elements -- each one's ``on_change`` sets the ipywidgets control it stands
for, so the explorer replans exactly as in JupyterLab -- and the canvas (an anywidget: hover,
click, zoom and scrolling in the browser; ``ex.selected`` syncs back). marimo's comms carry the
anywidgets' traits both ways.

>>> import marimo as mo, tensorviz as tv          # doctest: +SKIP
>>> ex = tv.explore(model); ex                     # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["in_marimo", "marimo_view"]


def in_marimo() -> bool:
    """Whether this code runs inside a marimo notebook or app (marimo already imported by it)."""
    mo = sys.modules.get("marimo")
    try:
        return bool(mo is not None and mo.running_in_notebook())
    except Exception:  # noqa: BLE001 - an old or partial marimo: not a notebook we can draw into
        return False


def _setter(widget: Any) -> Callable[[Any], None]:
    """An ``on_change`` that sets ``widget.value`` (the explorer observes it and redraws)."""

    def set_value(value: Any) -> None:
        widget.value = value

    return set_value


def _choices(widget: Any) -> dict[str, Any]:
    """A selection widget's options as marimo wants them: label -> value."""
    return dict(zip(widget._options_labels, widget._options_values))


def marimo_view(ex: Any) -> Any:
    """``ex`` as a marimo layout: title, model map, controls (marimo elements driving the
    explorer's own controls, kept on ``ex.marimo_controls``) and canvas."""
    import marimo as mo

    by = mo.ui.radio(
        options=_choices(ex.by_toggle),
        value=ex.by_toggle.label,
        inline=True,
        label="group by",
        on_change=_setter(ex.by_toggle),
    )
    names = mo.ui.text(
        value=ex.name_filter.value,
        placeholder=ex.name_filter.placeholder,
        label="names",
        on_change=_setter(ex.name_filter),
    )
    boxes = [
        mo.ui.checkbox(value=box.value, label=box.description, disabled=box.disabled, on_change=_setter(box))
        for box in (ex.only_shared_box, ex.unreferenced_box, ex.expand_box)
    ]
    storage = mo.ui.dropdown(
        options=_choices(ex.storage_picker),
        value=ex.storage_picker.label,
        label="storage",
        searchable=True,
        on_change=_setter(ex.storage_picker),
    )
    every = mo.ui.switch(value=ex.all_toggle.value, label="show all storages", on_change=_setter(ex.all_toggle))
    # marimo finds an element by a weak reference: held here, they live as long as the explorer
    ex.marimo_controls = (by, names, *boxes, storage, every)
    parts = [mo.Html(ex.title.value)]
    if getattr(ex, "model_map", None) is not None:
        parts.append(mo.ui.anywidget(ex.model_map))
    parts += [
        mo.hstack([by, names], justify="start", wrap=True),
        mo.hstack(boxes, justify="start", wrap=True),
        mo.hstack([storage, every], justify="start", wrap=True),
        mo.ui.anywidget(ex.canvas),
    ]
    return mo.vstack(parts)
