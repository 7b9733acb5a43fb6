"""Inline styles of the save-check HTML (inline only: they survive JupyterLab, untrusted
notebooks and GitHub), with JupyterLab's ``--jp-*`` colours and plain fallbacks."""

from __future__ import annotations

import re

_VAR = re.compile(r"var\(--[\w-]+,\s*([^()]*(?:\([^()]*\))?[^()]*)\)")


def _css(*decls: str) -> str:
    """Join declarations; each one using ``var(--x, fallback)`` is preceded by ``prop:fallback``."""
    out = []
    for d in decls:
        if "var(" in d:
            out.append(_VAR.sub(lambda m: m.group(1).strip(), d))
        out.append(d)
    return ";".join(out)


_ERR = "var(--jp-error-color1,#d32f2f)"
_WARN = "var(--jp-warn-color0,#e65100)"
_OK = "var(--jp-success-color1,#388e3c)"
_LINE = "rgba(128,128,128,0.35)"
_MONO = "font-family:var(--jp-code-font-family,monospace)"

#: Inline styles by role, computed once.
#: A table cell, as the "td" style and the start of the "names" style.
_CELL = (
    "padding:3px 10px 3px 0",
    "text-align:left",
    "vertical-align:top",
    "white-space:normal",
    f"border-bottom:1px solid {_LINE}",
    "line-height:1.35",
)

STYLES = {
    "root": _css("font-size:13px", "line-height:1.4", "text-align:left", "max-width:1100px"),
    "head": _css("margin:0 0 4px 0", "text-align:left"),
    "table": _css(
        "border-collapse:collapse",
        "table-layout:auto",
        "margin:2px 0 8px 0",
        "font-size:13px",
        "width:auto",
        "border:none",
    ),
    "th": _css(
        "padding:3px 10px 3px 0",
        "text-align:left",
        "vertical-align:bottom",
        "font-weight:bold",
        "white-space:nowrap",
        f"border-bottom:2px solid {_LINE}",
    ),
    "td": _css(*_CELL),
    "names": _css(*_CELL, "max-width:16em", "overflow-wrap:break-word"),
    "bytes": _css(
        "padding:3px 10px 3px 0",
        "text-align:left",
        "vertical-align:top",
        "white-space:nowrap",
        f"border-bottom:1px solid {_LINE}",
        "line-height:1.35",
    ),
    "versions": _css("font-size:11px", "opacity:0.75", "margin:6px 0 0 0", "text-align:left"),
    "value": _css("white-space:nowrap"),
    "small": _css("font-size:11px", "opacity:0.75", "white-space:nowrap"),
    "muted": _css("opacity:0.75", "text-align:left"),
    "code": _css(
        _MONO,
        "font-size:12px",
        "background:rgba(128,128,128,0.12)",
        "padding:0 3px",
        "border-radius:2px",
        "white-space:pre-wrap",
    ),
    "pre": _css(
        _MONO,
        "font-size:12px",
        "line-height:1.4",
        "white-space:pre-wrap",
        "word-break:normal",
        "overflow-wrap:break-word",
        "text-align:left",
        "margin:2px 0 6px 0",
        "padding:5px 8px",
        "background:rgba(128,128,128,0.1)",
        "border:none",
        "border-radius:3px",
        "max-width:78em",
    ),
    "details": _css("margin:1px 0", "text-align:left"),
    "summary": _css("cursor:pointer", "padding:1px 0", "text-align:left"),
    "body": _css("margin:2px 0 8px 1.1em", "padding:0 0 0 10px", f"border-left:2px solid {_LINE}", "text-align:left"),
    "line": _css("margin:2px 0", "text-align:left"),
    "warn": _css(f"color:{_WARN}", "margin:2px 0", "text-align:left"),
    "section": _css("margin:8px 0 2px 0", "font-weight:bold", "text-align:left"),
}

_BADGE = _css(
    "display:inline-block",
    "padding:0 5px",
    "border:1px solid",
    "border-radius:3px",
    "font-weight:bold",
    "white-space:nowrap",
    "line-height:1.3",
)

#: outcome -> (symbol, colour); the word is the outcome itself.
_LOOK = {
    "ok": ("✓", _OK),
    "raises": ("✗", _ERR),
    "drops data": ("✗", _ERR),
    "duplicates bytes": ("⚠", _WARN),
    "writes unreferenced bytes": ("⚠", _WARN),
    "could not evaluate": ("?", "var(--jp-content-font-color2,#777777)"),
}
