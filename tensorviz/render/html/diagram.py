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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tensorviz.core.names import shown
from tensorviz.core.records import GroupBy
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout
    from tensorviz.core.records import TensorView
    from tensorviz.plan.diagram import Diagram

__all__ = ["diagram_html", "picture_alt", "table_rows", "drawn_names", "MAX_ROWS", "BOX"]

#: Most table rows written; the rest are counted in a last row.
MAX_ROWS = 200

_CELL = "padding:1px 8px;text-align:left;font-family:monospace;font-size:12px;white-space:nowrap"
#: The box of a static output: as wide as the output, scrolling sideways inside itself when a
#: table row is wider (a 200-character name), never past the output's right edge.
BOX = "max-width:100%;overflow-x:auto;box-sizing:border-box"


def table_rows(d: Diagram, layout: Layout, limit: int | None = None) -> list[tuple[str, ...]]:
    """``(names, dtype[shape], stride, offset, span, group)`` per view drawn, in lane order
    (the first ``limit`` of them). Groups are looked up through :meth:`Layout.group_index`,
    so a table of 200 rows costs 200 rows, whatever the size of the layout."""
    by = _table_grouping(d)[0]
    index = layout.group_index(by)
    order, bounds = layout.group_members(by)
    names = layout.names
    rows = []
    for name in drawn_names(d)[:limit]:
        g = int(index[layout.position(name)])
        first = order[bounds[g] : min(bounds[g] + 5, bounds[g + 1])].tolist()
        others = [names[i] for i in first if names[i] != name]
        rows.append(_row(layout[name], g, others[:3], int(bounds[g + 1] - bounds[g]) - 1 > 3))
    return rows


def drawn_names(d: Diagram) -> list[str]:
    """Every name the diagram draws, once each, in lane order."""
    return list(dict.fromkeys(n for bar in d.bars for n in bar.names))


def _table_grouping(d: Diagram) -> tuple[GroupBy, str]:
    """The grouping of the table's group column and its heading. In safetensors files, every
    tensor of a file is on its one storage: there the column groups tensors sharing bytes."""
    if d.by == "storage" and d.header.noun == "file":
        return "overlap", "group (by shared bytes within a file)"
    return d.by, f"group (by {d.by})"


def _row(v: TensorView, gi: int, others: list[str], more: bool) -> tuple[str, ...]:
    shared = f"#{gi}" + (f": with {', '.join(others)}{', …' if more else ''}" if others else "")
    shape = ", ".join(map(str, v.shape))
    return (v.name, f"{v.dtype}[{shape}]", str(tuple(v.stride)), str(v.offset), f"[{v.start:,}, {v.stop:,})", shared)


def picture_alt(d: Diagram) -> str:
    """The words of a picture for its alt text: the header line, then every group of tied names
    in full (a lane label may show only "shared.weight +3")."""
    from tensorviz.plan.labels import TIED

    ties = [TIED.join(b.names) for b in d.bars if len(b.names) > 1]
    return shown(d.header.text) + "".join(f"; tied: {shown(t)}" for t in ties[:50])


def diagram_html(d: Diagram, layout: Layout, png: bytes, *, svg: str = "") -> str:
    """An HTML fragment: the diagram (``svg`` inline if given, else the PNG), then the table
    (collapsed if long), in a box that scrolls sideways rather than clip (names can be long)."""
    e = html.escape
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    picture = svg or f'<img src="{src}" alt="{e(picture_alt(d))}" style="max-width:100%"/>'
    rows = table_rows(d, layout, MAX_ROWS)
    count = len(drawn_names(d))
    head = ("name", "dtype[shape]", "stride", "offset", "bytes", _table_grouping(d)[1])
    # names are data: control, bidi and zero-width characters are shown as escapes, not obeyed
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{e(shown(c))}</td>' for c in r) + "</tr>" for r in rows)
    if count > MAX_ROWS:
        body += f'<tr><td style="{_CELL}" colspan="6">… {count - MAX_ROWS:,} more views</td></tr>'
    thead = "".join(f'<th style="{_CELL}">{e(h)}</th>' for h in head)
    summary = (
        f"{count:,} view{'s' * (count != 1)} drawn · "
        f"{format_bytes(d.header.unique_nbytes)} unique of {format_bytes(d.header.naive_nbytes)}"
    )
    if d.collapsed is not None:
        summary += f" · {d.collapsed.text} not listed"
    opened = " open" if count <= 12 else ""
    return (
        f'<div class="tensorviz-show" style="{BOX}">{picture}'
        f"<details{opened}><summary>{e(summary)}</summary>"
        f'<table class="tensorviz-table"><thead><tr>{thead}</tr></thead><tbody>{body}</tbody></table>'
        f"</details>{fsdp_html(layout.facts.fsdp)}</div>"
    )


def fsdp_html(record: Mapping[str, Any] | None) -> str:
    """FSDP2's per-rank memory (``layout.metadata["fsdp"]``) as a small table, or nothing."""
    if not record or not record.get("ranks"):
        return ""
    from tensorviz.core.fsdp import PEAK_RULE, RANK_COLUMNS, rank_rows

    e = html.escape
    rows = rank_rows(record)
    head = "".join(f'<th style="{_CELL}">{e(h)}</th>' for h in RANK_COLUMNS)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{e(c)}</td>' for c in r) + "</tr>" for r in rows)
    more = len(record["ranks"]) - len(rows)
    if more > 0:
        body += f'<tr><td style="{_CELL}" colspan="{len(RANK_COLUMNS)}">… {more:,} more ranks</td></tr>'
    summary = (
        f"FSDP2 per rank ({len(record['ranks'])} ranks): sharded parameter storage, all-gathers, freed between steps"
    )
    return (
        f"<details><summary>{e(summary)}</summary>"
        f'<table class="tensorviz-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        f'<p style="font-size:11px">{e(str(record.get("peak_rule", PEAK_RULE)))}</p></details>'
    )
