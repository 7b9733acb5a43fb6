"""Static output: a picture of one explorer state that needs no kernel and no JavaScript."""

from __future__ import annotations

import base64
import html
import itertools
from dataclasses import dataclass
from typing import Any

_snapshot_ids = itertools.count()


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
        head = (
            f'<div style="font-size: 85%; opacity: 0.75">tensorviz {html.escape(self.kind)}{hint}: '
            f"{html.escape(self.caption)}</div>"
        )
        if not self.hide_when_live:
            return f'<div class="{cls}">{head}{self.body}</div>'
        live = html.escape(self.hide_when_live)
        style = (
            f"<style>.{uid}[hidden] {{display: block !important;}} "
            f"body:has(.{live}) .jp-OutputArea-child:has(.{uid}), "
            f"body:has(.{live}) .{uid}[hidden] {{display: none !important;}}</style>"
        )
        # hidden="hidden", not a bare hidden: sanitizers drop empty-valued attributes.
        return f'{style}<div class="{cls}" hidden="hidden">{head}{self.body}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle = {
            "text/plain": self.text,
            "image/png": base64.b64encode(self.png).decode("ascii"),
            "text/html": self.to_html(),
        }
        return {k: v for k, v in bundle.items() if (not include or k in include) and (not exclude or k not in exclude)}


def display(obj: Any) -> None:
    """Emit ``obj`` as output when running under IPython; do nothing in plain scripts."""
    try:
        from IPython import get_ipython
        from IPython.display import display as ipython_display
    except ImportError:
        return
    if get_ipython() is not None:
        ipython_display(obj)
