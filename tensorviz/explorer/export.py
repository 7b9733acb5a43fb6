"""One self-contained HTML page of the canvas explorer: no kernel, no network (``tv.export_html``).

The page carries what a kernel would send: for each grouping (storage, exact span, overlap) the
same framed binary payload the live canvas gets (:func:`tensorviz.explorer.payload.payload`,
base64 in a JSON block), and each view's relations to the others on its storage, precomputed
(:func:`tensorviz.explorer.payload.relations` per view, kept sparse), so a click outlines what
shares bytes exactly as in a notebook. The ES modules run unchanged: ``page.js`` plays the
anywidget model (``get``/``set``/``on``/``save_changes``) and imports ``canvas.js`` (with
``overview.js`` and ``geometry.js``); each module's source is in the page once, as inert text, and
a few lines of boot script link them through ``blob:`` URLs (as anywidget loads ``_esm``). The model
map is the static module tree (:func:`tensorviz.render.html.tree.tree_html`, expands with no
script). A Content-Security-Policy forbids every request but ``data:``; everything from the
layout is escaped (HTML text, or JSON with ``<``, ``>`` and ``&`` as ``\\u`` escapes).

Needs only numpy (no matplotlib, no ipywidgets).

>>> import torch, tensorviz as tv                                      # doctest: +SKIP
>>> tv.export_html({"w": torch.zeros(4, 4)}, "layout.html")           # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.core.names import unicode_safe
from tensorviz.explorer import modules, wire
from tensorviz.explorer.payload import COLUMNS, VOCAB, payload, relations, view_names
from tensorviz.explorer.render import Renderer
from tensorviz.explorer.state import ExplorerState, groupings, normalise
from tensorviz.explorer.text import shown_text, title

__all__ = ["page_html", "write_page", "RELATION_LIMIT"]

#: Most drawn views whose relations are precomputed (one relations() pass per view); above it a
#: click outlines the selected views only (the page says so).
RELATION_LIMIT = 5000
_CSP = "default-src 'none'; script-src 'unsafe-inline' blob:; style-src 'unsafe-inline'; img-src data:"
_IMPORT = re.compile(r"""\bfrom\s*(["'])\./([\w.-]+\.js)\1""")
# Links the inert module texts into blob: URLs (each import of "./x.js" pointed at x.js's URL).
_BOOT = """const src = {}, urls = {};
for (const s of document.querySelectorAll('script[type="text/x-tvz-module"]')) src[s.dataset.name] = s.textContent;
const link = (name) => urls[name] ??= URL.createObjectURL(new Blob([src[name].replace(
  /(\\bfrom\\s*)(["'])\\.\\/([\\w.-]+\\.js)\\2/g, (_m, f, _q, dep) => `${f}"${link(dep)}"`)], { type: "text/javascript" }));
const { mount } = await import(link("page.js"));
const data = JSON.parse(document.getElementById("tvz-data").textContent);
const el = document.getElementById("tvz-canvas");
el.tvzModel = mount(el, [...document.querySelectorAll(".tvz-page-by button")], data);
"""
_PAGE_CSS = """body{font-family:system-ui,sans-serif;margin:16px;color:#222;background:#fff;}
.tvz-page-head{font-size:14px;margin-bottom:6px;} .tvz-page-note{font-size:12px;color:#666;margin:4px 0 8px;}
.tvz-page-by button{font:inherit;font-size:12px;padding:3px 10px;border:1px solid #bbb;background:#f4f4f4;cursor:pointer;}
.tvz-page-by button.tvz-on{background:#ddd;font-weight:600;} .tvz-page-map{margin-top:16px;overflow-x:auto;}"""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _sparse_relations(layout: Layout, names: list[str]) -> dict[str, str]:
    """Per drawn view, the other views on its storage and how each relates to it (codes into
    ``RELATIONS``; views on other storages are "unrelated", code 0, and not stored): CSR columns
    ``first`` (n+1 offsets), ``to`` and ``code``, base64. Nothing when over RELATION_LIMIT views."""
    pairs: list[list[tuple[int, int]]] = [[] for _ in names]
    if len(names) <= RELATION_LIMIT:
        by_storage: dict[Any, list[int]] = {}
        for i, name in enumerate(names):
            by_storage.setdefault(layout[name].storage, []).append(i)
        for members in by_storage.values():
            if len(members) < 2:
                continue  # alone on its storage: only "selected", which the page sets itself
            local = [names[i] for i in members]
            for i, name in zip(members, local):
                code, _ = relations(layout, local, [name])
                pairs[i] = [(members[j], int(code[j])) for j in np.flatnonzero(code)]
    first = np.cumsum([0] + [len(p) for p in pairs], dtype=np.int64)
    flat = [pair for p in pairs for pair in p]
    return {
        "first": _b64(first.astype("<u4").tobytes()),
        "to": _b64(np.array([j for j, _ in flat], dtype="<u4").tobytes()),
        "code": _b64(np.array([c for _, c in flat], dtype="u1").tobytes()),
    }


def _view(layout: Layout, renderer: Renderer, state: ExplorerState) -> dict[str, Any]:
    """One grouping as the page draws it: payload (frame base64), names, relations."""
    d = renderer.get(state)[0].diagram
    names = view_names(d)
    data = payload(d, layout)
    sent = {k: v for k, v in data.items() if k not in COLUMNS}
    sent.update(frame=_b64(wire.frame(data, COLUMNS)), caption=shown_text(layout, d, len(names)), revision=1)
    return {
        "payload": sent,
        "names": [wire.browser_form(n) for n in names],
        "relations": _sparse_relations(layout, names),
        "describe": state.describe(),
    }


def _json(value: Any) -> str:
    """JSON that cannot end a ``<script>`` element or open a comment (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_html(layout: Layout, state: ExplorerState, *, heading: str | None = None, max_lanes: int = 40) -> str:
    """The page (a string) for ``layout``, starting in ``state``'s grouping and filters; the
    other groupings are one click away."""
    state = normalise(replace(state, all_storages=True), layout)  # a page to share draws every storage
    renderer = Renderer(layout, dpi=100, max_lanes=max_lanes, width=None)
    choices = groupings(layout)  # the explorer's toggle: plus "by rank" and mesh dimensions when sharded
    views = {by: _view(layout, renderer, normalise(replace(state, by=by), layout)) for _label, by in choices}
    data = {"vocab": VOCAB, "views": views, "first": state.by}
    head = html.escape(heading if heading is not None else title(layout))
    on = ' class="tvz-on"'
    buttons = "".join(
        f'<button type="button" data-by="{by}"{on if by == state.by else ""}>{html.escape(label)}</button>'
        for label, by in choices
    )
    note = "hover a bar for its bytes · click to select (shift-click adds) · drag to zoom · double-click resets"
    if max(len(v["names"]) for v in views.values()) > RELATION_LIMIT:
        note += f" · over {RELATION_LIMIT:,} views: a click outlines the selection only, not what shares its bytes"
    return _page(head, buttons, note, _json(data), _model_map(layout))


def _model_map(layout: Layout) -> str:
    if not any("." in n for n in layout.names):
        return ""
    from tensorviz.render.html.tree import tree_html

    return f'<div class="tvz-page-map"><b>model map</b>{tree_html(layout.tree())}</div>'


def _sources(entry: str, seen: dict[str, str] | None = None) -> dict[str, str]:
    """``entry`` and every module it imports (``from "./x.js"``), by file name."""
    seen = {} if seen is None else seen
    if entry not in seen:
        seen[entry] = (modules.HERE / entry).read_text(encoding="utf-8")
        for m in _IMPORT.finditer(seen[entry]):
            _sources(m[2], seen)
    return seen


def _module_tags() -> str:
    tags = []
    for name, source in _sources("page.js").items():
        if "</script" in source.lower() or "<!--" in source:  # our own files: refuse rather than mangle
            raise RuntimeError(f"{name} contains '</script' or '<!--' and cannot be inlined")
        tags.append(f'<script type="text/x-tvz-module" data-name="{html.escape(name)}">{source}</script>')
    return "".join(tags)


def _page(head: str, buttons: str, note: str, data: str, model_map: str) -> str:
    css = (modules.HERE / "explorer.css").read_text(encoding="utf-8")
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width"><title>{head}</title>'
        f"<style>{_PAGE_CSS}\n{css}</style></head><body>"
        f'<div class="tvz-page-head">{head}</div>'
        f'<div class="tvz-page-by">group by {buttons}</div><div class="tvz-page-note">{html.escape(note)}</div>'
        f'<div class="tvz-explorer"><div class="tvz-main"><div id="tvz-canvas" class="tvz-canvas"></div></div></div>'
        f"{model_map}"
        f'<script type="application/json" id="tvz-data">{data}</script>{_module_tags()}'
        f'<script type="module">{_BOOT}</script></body></html>\n'
    )


def write_page(layout: Layout, path: str | os.PathLike, state: ExplorerState, *, heading: str | None = None) -> Path:
    """Write :func:`page_html` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(unicode_safe(page_html(layout, state, heading=heading)), encoding="utf-8")
    return out
