"""Plain-text summary of a Layout: for terminals, logs and golden tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._units import format_bytes

if TYPE_CHECKING:
    from .layout import Layout, TensorView


def view_line(v: "TensorView") -> str:
    shape = "×".join(map(str, v.shape)) or "scalar"
    flags = []
    if v.is_empty:
        flags.append("empty")
    elif not v.is_contiguous:
        flags.append("non-contiguous")
    if v.is_expanded:
        flags.append("expanded")
    if not v.exact:
        flags.append("footprint≈span")
    if v.note:
        flags.append(v.note)
    tail = f"  ({', '.join(flags)})" if flags else ""
    return (f"{v.name}  {v.dtype}[{shape}] stride={v.stride} offset={v.offset}  "
            f"bytes [{v.start}, {v.stop}){tail}")


def layout_text(layout: "Layout", by: str = "storage", max_views: int = 12) -> str:
    """Storages with their views and coverage, then the shared groups, then what was skipped."""
    storages = layout.storages
    lines = [
        f"{len(layout)} tensors on {len(storages)} storage{'s' * (len(storages) != 1)}"
        + (f" ({layout.source})" if layout.source else ""),
        f"unique bytes {format_bytes(layout.unique_nbytes)} · sum of views "
        f"{format_bytes(layout.naive_nbytes)} · storages {format_bytes(layout.storage_nbytes)}",
    ]
    for s in storages:
        cov = f"{format_bytes(s.covered_nbytes)} read"
        if s.unreferenced_nbytes:
            cov += f", {format_bytes(s.unreferenced_nbytes)} unreferenced"
        name = s.label or s.device
        lines.append(f"storage #{s.index} {name} {format_bytes(s.nbytes)} ({s.nbytes} B): "
                     f"{len(s.names)} view{'s' * (len(s.names) != 1)}, {cov}")
        views = layout.storage_views(s.key)
        for v in views[:max_views]:
            mark = "=" if v.name in s.complete_names else "-"
            lines.append(f"  {mark} {view_line(v)}")
        if len(views) > max_views:
            lines.append(f"  … {len(views) - max_views} more")
    shared = layout.shared(by)
    lines.append(f"shared groups (by {by}): {len(shared) or 'none'}")
    for g in shared:
        lines.append(f"  {{{', '.join(g.names)}}} bytes [{g.start}, {g.stop})")
    if layout.skipped:
        lines.append(f"skipped: {len(layout.skipped)}")
        for sk in layout.skipped:
            lines.append(f"  {sk.name}: {sk.reason}")
    return "\n".join(lines)
