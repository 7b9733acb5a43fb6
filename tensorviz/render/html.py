"""Static HTML for a diagram: the PNG inline plus a compact table of the views shown.

No scripts and no external files, so a saved notebook shows it in JupyterLab, VS Code and on
GitHub with no kernel. Every user string goes through :func:`html.escape`.

>>> import torch, tensorviz as tv
>>> from tensorviz.plan.diagram import diagram
>>> t = torch.zeros(2)
>>> layout = tv.analyze({"<b>x</b>": t})
>>> "&lt;b&gt;x&lt;/b&gt;" in diagram_html(diagram(layout), layout, b"png")
True
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout
    from tensorviz.core.records import TensorView
    from tensorviz.plan.diagram import Diagram

__all__ = ["diagram_html", "table_rows", "MAX_ROWS"]

#: Most table rows written; the rest are counted in a last row.
MAX_ROWS = 200

_CELL = "padding:1px 8px;text-align:left;font-family:monospace;font-size:12px;white-space:nowrap"


def table_rows(d: Diagram, layout: Layout) -> list[tuple[str, ...]]:
    """``(names, dtype[shape], stride, offset, span, group)`` per view drawn, in lane order."""
    by = _table_grouping(d, layout)[0]
    groups = {g.names[0]: (i, g) for i, g in enumerate(layout.groups(by))}
    group_of = {n: groups[g.names[0]] for n in layout.names for g in (layout.group_of(n, by),)}
    rows = []
    seen: set[str] = set()
    for bar in d.bars:
        for name in bar.names:
            if name in seen:
                continue
            seen.add(name)
            rows.append(_row(layout[name], *group_of[name]))
    return rows


def _table_grouping(d: Diagram, layout: Layout) -> tuple[str, str]:
    """The grouping of the table's group column and its heading. In safetensors files, every
    tensor of a file is on its one storage: there the column groups tensors sharing bytes."""
    from tensorviz.core.summary import storage_noun

    if d.by == "storage" and storage_noun(layout) == "file":
        return "overlap", "group (by shared bytes within a file)"
    return d.by, f"group (by {d.by})"


def _row(v: TensorView, gi: int, g) -> tuple[str, ...]:
    others = [n for n in g.names if n != v.name]
    shared = f"#{gi}" + (f": with {', '.join(others[:3])}{', …' if len(others) > 3 else ''}" if others else "")
    shape = ", ".join(map(str, v.shape))
    return (v.name, f"{v.dtype}[{shape}]", str(tuple(v.stride)), str(v.offset), f"[{v.start:,}, {v.stop:,})", shared)


def diagram_html(d: Diagram, layout: Layout, png: bytes) -> str:
    """An HTML fragment: the diagram as an inline PNG, then the table (collapsed if long)."""
    e = html.escape
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    rows = table_rows(d, layout)
    head = ("name", "dtype[shape]", "stride", "offset", "bytes", _table_grouping(d, layout)[1])
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{e(c)}</td>' for c in r) + "</tr>" for r in rows[:MAX_ROWS])
    if len(rows) > MAX_ROWS:
        body += f'<tr><td style="{_CELL}" colspan="6">… {len(rows) - MAX_ROWS:,} more views</td></tr>'
    thead = "".join(f'<th style="{_CELL}">{e(h)}</th>' for h in head)
    summary = (
        f"{len(rows):,} view{'s' * (len(rows) != 1)} drawn · "
        f"{format_bytes(d.header.unique_nbytes)} unique of {format_bytes(d.header.naive_nbytes)}"
    )
    if d.collapsed is not None:
        summary += f" · {d.collapsed.text} not listed"
    opened = " open" if len(rows) <= 12 else ""
    return (
        f'<div class="tensorviz-show">'
        f'<img src="{src}" alt="{e(d.header.text)}" style="max-width:100%"/>'
        f"<details{opened}><summary>{e(summary)}</summary>"
        f'<table class="tensorviz-table"><thead><tr>{thead}</tr></thead><tbody>{body}</tbody></table>'
        f"</details></div>"
    )
