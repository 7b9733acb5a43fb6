"""Static output: a picture of one explorer state that needs no kernel and no JavaScript.

``tv.explore(obj)`` emits two outputs: first a *stand-in* (:class:`Snapshot` with
``hide_when_live``), an ``image/png`` output with a ``text/plain`` caption and nothing else, then
the explorer itself, whose own bundle is the widget view + ``text/plain`` (no picture; with no
stand-in emitted, ``snapshot=False``, it also carries the ``image/png``). A frontend renders one
mimetype per output, so the picture shows once wherever the widget cannot render, and as a real
``<img>`` that no sanitizer strips:

==================================  ==========================  =================================
route                               the explorer's output       the stand-in (``image/png``)
==================================  ==========================  =================================
JupyterLab, Notebook 7, Voila live  the live canvas             hidden by the live explorer's rule
Lab, saved with widget state        the canvas, from the state  hidden by the same rule
Lab, kernel gone, no state          "Error displaying widget"   shown
Lab, untrusted (cloned from git)    its ``text/plain``          shown
nbconvert ``--execute``, nbviewer   nothing (offline: the       shown (hidden where an online
(with or without widget state)      widget view needs a CDN)    widget manager draws the canvas)
GitHub, VS Code reopened            its ``text/plain``          shown
VS Code live                        the live canvas             hidden (the rule matches its alt)
==================================  ==========================  =================================

The hiding rule is a ``<style>`` inside the live explorer (:func:`stand_in_rule`), so it exists only
where the explorer itself rendered, and it applies only once the explorer's canvas has drawn
(``:has(... canvas)``). It finds the stand-in by a mark only that explorer's stand-in carries: a PNG
``tEXt`` chunk naming the explorer (:func:`marked_png`), whose base64 text is a fixed substring of
the ``<img>``'s data URL (:func:`src_mark`; JupyterLab, Notebook 7, Voila and nbconvert render
``image/png`` as a data URL), and the ``text/plain`` caption, which VS Code uses as the image's alt.
"""

from __future__ import annotations

import base64
import hashlib
import html
import struct
import zlib
from dataclasses import dataclass
from typing import Any

#: The mime type of an ipywidgets view.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_IHDR_END = 33  # signature (8) + IHDR's length, type, 13 bytes of data and CRC: a multiple of 3


def png_size(png: bytes) -> tuple[int, int]:
    """The pixel width and height a PNG's header gives (``(1, 1)`` for anything else)."""
    if png[:8] != _SIGNATURE or len(png) < 24:
        return 1, 1
    w, h = struct.unpack(">II", png[16:24])
    return max(w, 1), max(h, 1)


def _mark_chunk(live: str) -> bytes:
    """The ``tEXt`` chunk (keyword ``tensorviz``) that names the explorer a stand-in stands in for."""
    if not live.replace("-", "").isalnum() or not live.isascii():
        raise ValueError(f"hide_when_live must be a CSS class name, got {live!r}")
    data = b"tensorviz\0stand-in for " + live.encode("ascii")
    return struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))


def marked_png(png: bytes, live: str) -> bytes:
    """``png`` with a ``tEXt`` chunk naming the explorer ``live`` right after its header.

    The pixels are unchanged (decoders skip text chunks); a PNG that does not start with the
    signature and IHDR is returned as it is.

    >>> from tensorviz.explorer.static import marked_png, src_mark
    >>> png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
    >>> src_mark("tvz-live-ab12") in base64.b64encode(marked_png(png, "tvz-live-ab12")).decode()
    True
    """
    chunk = _mark_chunk(live)
    if png[:8] != _SIGNATURE or png[12:16] != b"IHDR" or len(png) < _IHDR_END:
        return png
    return png[:_IHDR_END] + chunk + png[_IHDR_END:]


def src_mark(live: str) -> str:
    """The base64 text that :func:`marked_png`'s chunk for ``live`` always encodes to inside a data
    URL: the chunk starts at byte 33, a multiple of 3, so its whole 3-byte groups encode alone."""
    chunk = _mark_chunk(live)
    return base64.b64encode(chunk[: len(chunk) // 3 * 3]).decode("ascii")


def stand_in_rule(live: str) -> str:
    """The ``<style>`` the live explorer ``live`` carries: while its canvas is drawn, its stand-in
    (the ``<img>`` with :func:`src_mark` in its data URL, or VS Code's with ``live`` in its alt
    text) and, in a Lumino output area, that whole output are hidden."""
    mark = src_mark(live)  # base64 and a CSS class name: nothing to escape in a CSS string
    on = f"body:has(.{live} .tvz-canvas canvas)"
    targets = (
        f'.jp-OutputArea-child:has(img[src*="{mark}"])',
        f'img[src*="{mark}"]',
        f'img[alt*="{live}"]',
    )
    return "<style>" + ", ".join(f"{on} {t}" for t in targets) + " {display: none !important}</style>"


@dataclass(frozen=True)
class Snapshot:
    """A static picture of one explorer state: PNG, escaped HTML and plain text.

    ``body`` is the escaped HTML fragment (the inline PNG and a table of the views drawn);
    ``kind`` names its CSS class (``tvz-snapshot``, or ``tvz-static``). With ``hide_when_live``
    (an explorer's CSS class) it is that explorer's stand-in: an ``image/png`` output marked for
    the explorer's hiding rule, shown everywhere the explorer itself does not draw (see the
    module's table).
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
        """The snapshot as escaped HTML: a caption, the inline PNG and a table of the views drawn."""
        uid = "tvz-snap-" + hashlib.sha1(self.png + self.caption.encode("utf-8", "replace")).hexdigest()[:16]
        head = f'<div style="font-size: 85%; opacity: 0.75">{html.escape(self.head())}</div>'
        return f'<div class="tvz-{html.escape(self.kind)} {uid}">{head}{self.body}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        if self.hide_when_live:  # a picture only: every frontend draws image/png as a real <img>
            bundle = {
                "text/plain": f"{self.head()} [stand-in for {self.hide_when_live}]",
                "image/png": base64.b64encode(marked_png(self.png, self.hide_when_live)).decode("ascii"),
            }
        else:
            bundle = {
                "text/plain": self.text,
                "image/png": base64.b64encode(self.png).decode("ascii"),
                "text/html": self.to_html(),
            }
        return {k: v for k, v in bundle.items() if (not include or k in include) and (not exclude or k not in exclude)}


def display(obj: Any, kernel_only: bool = False) -> bool:
    """Emit ``obj`` as output when running under IPython (with ``kernel_only``, only under a
    Jupyter kernel: a terminal has no page to hide a stand-in on); do nothing in plain scripts.
    Returns whether it was emitted."""
    try:
        from IPython import get_ipython
        from IPython.display import display as ipython_display
    except ImportError:
        return False
    shell = get_ipython()
    if shell is not None and (not kernel_only or getattr(shell, "kernel", None) is not None):
        ipython_display(obj)
        return True
    return False
