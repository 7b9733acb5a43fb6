"""The explorer's words: byte labels, zoom stops, the details pane and the title (pure).

Everything here returns plain text, or HTML whose every user string is escaped.
"""

from __future__ import annotations

import html

from tensorviz.core.layout import Layout
from tensorviz.core.names import shown as shown_name
from tensorviz.core.names import terminal
from tensorviz.core.records import TensorView
from tensorviz.core.units import byte_text

_RELATIONS_SHOWN = 12  # details pane: relations listed one by one, the rest counted
_ZOOM_POINTS = 256  # the byte-range slider has at most this many steps (+1 stop)


def offset_label(n: int) -> str:
    """A slider stop's label: :func:`byte_text`.

    >>> offset_label(0), offset_label(1536), offset_label(1056), offset_label(3 << 30)
    ('0 B', '1.5 KiB', '1.031 KiB', '3 GiB')
    """
    return byte_text(n)


def zoom_points(nbytes: int) -> list[int]:
    """Slider stops for a storage: multiples of a power-of-two step, then the exact end.

    >>> zoom_points(4000)[:3], zoom_points(4000)[-2:], len(zoom_points(4000))
    ([0, 16, 32], [3984, 4000], 251)
    """
    if nbytes <= 0:
        return [0, 1]
    step = 1
    while nbytes / step > _ZOOM_POINTS:
        step *= 2
    points = list(range(0, nbytes, step))
    return points + [nbytes]


def span_text(start: int, stop: int) -> str:
    """``[0xfa0, 0x1f40) = [3.906 KiB, 7.813 KiB), 3.906 KiB (4000 B)``."""
    n = stop - start
    return f"[{start:#x}, {stop:#x}) = [{byte_text(start)}, {byte_text(stop)}), {byte_text(n)} ({n} B)"


# -- the details pane -------------------------------------------------------------------------
def details_html(layout: Layout, names: tuple[str, ...]) -> str:
    """Escaped HTML describing the selected views: geometry, span, density and relations."""
    if not names:
        return (
            '<div class="tvz-details tvz-muted">Select tensors in the list to see their shape, '
            "stride, byte span and how they relate to the other views on their storage.</div>"
        )
    return '<div class="tvz-details">' + "".join(_view_block(layout, n) for n in names) + "</div>"


def view_facts(layout: Layout, name: str) -> list[tuple[str, str]]:
    """The (label, value) rows of one view's details, as plain text."""
    v = layout[name]
    s = layout.storage(name)
    kind = "contiguous" if v.is_contiguous else "non-contiguous"
    if v.is_expanded:
        kind += ", expanded (some bytes read more than once)"
    span_n = v.stop - v.start
    if v.is_empty:
        density = "empty view: reads no bytes"
    else:
        pct = 100 * v.footprint_nbytes / span_n
        tag = "dense" if v.is_dense else "strided, with gaps"
        exact = "" if v.exact else " (upper bound: footprint too large to expand exactly)"
        density = f"{v.footprint_nbytes} B read of a {span_n} B span: {pct:.4g}% ({tag}){exact}"
    rows = [
        ("dtype", f"{v.dtype} ({v.itemsize} B per element)"),
        ("shape", str(v.shape)),
        ("stride", f"{v.stride} elements ({kind})"),
        ("offset", f"{v.offset} elements = {v.start} B"),
        ("span", span_text(v.start, v.stop)),
        ("footprint", density),
        (
            "storage",
            f"#{s.index} {s.label or s.device}, {byte_text(s.nbytes)} ({s.nbytes} B), "
            f"{len(s.names)} view{'s' * (len(s.names) != 1)}",
        ),
        ("relations", relations_text(layout, v)),
    ]
    if v.note:
        rows.append(("note", v.note))
    return rows


def relations_text(layout: Layout, v: TensorView) -> str:
    """How ``v`` relates to every other view on its storage (the first few named, rest counted)."""
    others = [o.name for o in layout.storage_views(v.storage) if o.name != v.name]
    if not others:
        return "the only view on its storage"
    shown = [f"{layout.relation(v.name, o)} {shown_name(o)}" for o in others[:_RELATIONS_SHOWN]]
    rest = others[_RELATIONS_SHOWN:]
    if rest:
        counts: dict[str, int] = {}
        for o in rest:
            rel = layout.relation(v.name, o)
            counts[rel] = counts.get(rel, 0) + 1
        shown.append(f"… {len(rest)} more: " + ", ".join(f"{k} {c}" for k, c in counts.items()))
    return "; ".join(shown)


def _view_block(layout: Layout, name: str) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(val)}</td></tr>" for k, val in view_facts(layout, name)
    )
    return f'<div class="tvz-view"><b>{html.escape(shown_name(name))}</b><table>{rows}</table></div>'


def shown_text(layout: Layout, diagram: object, drawn: int) -> str:
    """``"12 of 15 tensors shown (+ 3 simple storages, 1.5 KiB, folded into one row)"``: never a
    silent cap; says what the filters left out and what is folded.

    >>> import torch, tensorviz as tv
    >>> x = torch.zeros(4, 4)
    >>> lay = tv.analyze({"x": x, "row": x[1], "solo": torch.zeros(2)})
    >>> shown_text(lay, tv.diagram(lay), 2)
    '2 of 3 tensors shown (+ 1 simple storage, 8 B, folded into one row)'
    """
    total = len(layout)
    parts = [f"{drawn:,} of {total:,} tensor{'s' * (total != 1)} shown"]
    folded = getattr(diagram, "collapsed", None)
    hidden = getattr(diagram, "hidden_storages", 0)
    if folded is not None:
        parts.append(f" (+ {folded.text}, folded into one row)")
    if hidden:
        parts.append(f" (+ {hidden:,} storage{'s' * (hidden != 1)} past the lane budget)")
    return "".join(parts)


def title(layout: Layout) -> str:
    """``tensorviz explorer (source): N tensors on S storages · unique … · storages …``."""
    n, s = len(layout), len(layout.storages)
    src = f" ({terminal(layout.source)})" if layout.source else ""  # a path is data: escapes shown
    return (
        f"tensorviz explorer{src}: {n} tensor{'s' * (n != 1)} on {s} storage{'s' * (s != 1)} · "
        f"unique {byte_text(layout.unique_nbytes)} · storages {byte_text(layout.storage_nbytes)}"
    )
