"""Static output: a picture of one explorer state that needs no kernel and no JavaScript.

Where each picture shows (the explorer's own bundle is widget view + ``image/png`` + escaped
``text/html``; see :meth:`Explorer._repr_mimebundle_`):

============================  ===================================  ==============================
frontend                      the explorer's own output            the first-state snapshot
============================  ===================================  ==============================
JupyterLab / Notebook 7 live  the canvas                           hidden (the live class is on
                                                                   the page)
same, kernel gone, trusted    "Error displaying widget"            shown: the only picture
same, untrusted               its ``text/html`` picture            nothing (``<style>`` stripped)
nbconvert, nbviewer           its ``text/html`` picture            nothing (no Lumino widgets)
VS Code, kernel gone          its ``image/png`` (VS Code's         nothing (no Lumino widgets)
                              widget renderer falls back to it)
GitHub, any sanitizer         its picture                          nothing (``<style>`` stripped)
============================  ===================================  ==============================

The snapshot can be hidden that robustly because it holds no visible content at all: its
picture and caption live in its ``<style>`` element, as a background image and a ``::before``
text, under a rule that matches only inside a running JupyterLab's output area (``.lm-Widget``)
while no live explorer of that model is on the page. A sanitizer that strips the style, or one
that strips the ``hidden`` attribute (nbconvert's does), leaves an empty element.
"""

from __future__ import annotations

import base64
import hashlib
import html
import struct
from dataclasses import dataclass
from typing import Any

#: The mime type of an ipywidgets view.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def css_string(text: str) -> str:
    """``text`` as a CSS string literal that is also inert inside an HTML ``<style>`` element.

    Every character other than ASCII letters, digits and spaces becomes a hex escape, so no
    quote, backslash, newline or ``</style>`` can end the string or the element.

    >>> css_string('a"</style>')
    '"a\\\\22 \\\\3c \\\\2f style\\\\3e "'
    """
    out = (c if c.isascii() and (c.isalnum() or c == " ") else f"\\{ord(c):x} " for c in text)
    return '"' + "".join(out) + '"'


def png_size(png: bytes) -> tuple[int, int]:
    """The pixel width and height a PNG's header gives (``(1, 1)`` for anything else)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        return 1, 1
    w, h = struct.unpack(">II", png[16:24])
    return max(w, 1), max(h, 1)


@dataclass(frozen=True)
class Snapshot:
    """A static picture of one explorer state: PNG, escaped HTML and plain text.

    ``body`` is the escaped HTML fragment (the inline PNG and a table of the views drawn);
    ``kind`` names its CSS class (``tvz-snapshot``, or ``tvz-static`` inside the explorer's own
    bundle). With ``hide_when_live`` (an explorer's CSS class) the snapshot stands in for that
    explorer only in a running JupyterLab whose live explorer is missing (a trusted notebook
    reopened after its kernel is gone, which shows "Error displaying widget"); everywhere else it
    shows nothing (see the module's table).
    """

    png: bytes
    body: str
    caption: str
    text: str
    hide_when_live: str = ""
    kind: str = "snapshot"

    def head(self) -> str:
        hint = " (run the cell for the interactive explorer)" if self.hide_when_live or self.kind == "static" else ""
        return f"tensorviz {self.kind}{hint}: {self.caption}"

    def to_html(self) -> str:
        """The snapshot as HTML: visible, or (``hide_when_live``) drawn by its own style rule."""
        if self.hide_when_live:  # one stand-in per explorer, named after it (stable in saved files)
            return self._stand_in_html("tvz-snap-" + self.hide_when_live.removeprefix("tvz-live-"))
        uid = "tvz-snap-" + hashlib.sha1(self.png + self.caption.encode("utf-8", "replace")).hexdigest()[:16]
        head = f'<div style="font-size: 85%; opacity: 0.75">{html.escape(self.head())}</div>'
        return f'<div class="tvz-{html.escape(self.kind)} {uid}">{head}{self.body}</div>'

    def _stand_in_html(self, uid: str) -> str:
        live = self.hide_when_live
        if not live.replace("-", "").isalnum():
            raise ValueError(f"hide_when_live must be a CSS class name, got {live!r}")
        png = base64.b64encode(self.png).decode("ascii")
        w, h = png_size(self.png)
        shown = f"body:not(:has(.{live})) .lm-Widget .{uid}"
        style = (
            f"{shown} {{display: block !important; max-width: {w}px}}"
            f" {shown}::before {{content: {css_string(self.head())}; display: block; font-size: 85%; opacity: 0.75}}"
            f" {shown}::after {{content: ''; display: block; aspect-ratio: {w} / {h};"
            f" background: url(data:image/png;base64,{png}) 0 0 / contain no-repeat}}"
            f" body:has(.{live}) .jp-OutputArea-child:has(.{uid}) {{display: none !important}}"
        )
        return (
            f'<style>{style}</style><div class="tvz-{html.escape(self.kind)} {uid}" hidden="hidden"'
            f' style="display: none" role="img" aria-label="{html.escape(self.caption)}"></div>'
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        if self.hide_when_live:  # no picture a frontend could pick instead of the HTML
            bundle = {"text/plain": "", "text/html": self.to_html()}
        else:
            bundle = {
                "text/plain": self.text,
                "image/png": base64.b64encode(self.png).decode("ascii"),
                "text/html": self.to_html(),
            }
        return {k: v for k, v in bundle.items() if (not include or k in include) and (not exclude or k not in exclude)}


def display(obj: Any, kernel_only: bool = False) -> None:
    """Emit ``obj`` as output when running under IPython (with ``kernel_only``, only under a
    Jupyter kernel: a terminal has no page to hide a stand-in on); do nothing in plain scripts."""
    try:
        from IPython import get_ipython
        from IPython.display import display as ipython_display
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and (not kernel_only or getattr(shell, "kernel", None) is not None):
        ipython_display(obj)
