"""The explorer's browser code as real ES modules, linked for anywidget with no build step.

anywidget imports a widget's ``_esm`` from a ``blob:`` URL, where a relative specifier such as
``"./geometry.js"`` cannot resolve (manzt/anywidget#78, #399: "bundle it"). Instead of a bundler,
:func:`linked` points each relative import at a ``data:`` URL of that module's own (linked) source:
``canvas.js``, ``overview.js`` and ``geometry.js`` stay separate modules with their ``import``
lines, byte for byte what ``node --test`` imports, and the browser caches one instance of each
(``geometry.js`` is imported by both others under one URL). Everything ships in the wheel: no
network, no build.

Hot reload: with ``ANYWIDGET_HMR=1`` (anywidget's own switch) and ``watchfiles`` installed, a
change to any of this folder's ``.js`` files re-links the module and sets ``_esm`` on every live
canvas, which anywidget re-renders, as it does for a single-file ``_esm``.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import weakref
from pathlib import Path
from typing import Any

__all__ = ["linked", "watch", "data_url"]

HERE = Path(__file__).resolve().parent
_IMPORT = re.compile(r"""(\bfrom\s*)(["'])\./([\w.-]+\.js)\2""")
_LIVE: weakref.WeakSet = weakref.WeakSet()
_WATCHER: list[threading.Thread] = []


def linked(entry: str) -> str:
    """``entry`` (a file beside this module) with each ``from "./x.js"`` pointing at a data URL of
    ``x.js``, itself linked the same way.

    >>> linked("geometry.js").startswith("// Pure geometry")
    True
    """
    source = (HERE / entry).read_text(encoding="utf-8")
    return _IMPORT.sub(lambda m: f'{m[1]}"{data_url(linked(m[3]))}"', source)


def data_url(source: str) -> str:
    """``source`` as a ``data:`` URL of a JavaScript module."""
    return "data:text/javascript;base64," + base64.b64encode(source.encode("utf-8")).decode("ascii")


def watch(widget: Any, entry: str) -> None:
    """Keep ``widget._esm`` linked from the files on disk while anywidget's hot reload is on."""
    if os.environ.get("ANYWIDGET_HMR") != "1" or "site-packages" in HERE.parts:
        return
    try:
        import watchfiles
    except ImportError:
        return
    _LIVE.add(widget)
    if not _WATCHER:
        thread = threading.Thread(target=_reload, args=(watchfiles, entry), daemon=True, name="tensorviz-esm")
        _WATCHER.append(thread)
        thread.start()


def _reload(watchfiles: Any, entry: str) -> None:
    for _changes in watchfiles.watch(HERE, watch_filter=lambda _change, path: path.endswith(".js")):
        source = linked(entry)
        for widget in list(_LIVE):
            widget._esm = source
