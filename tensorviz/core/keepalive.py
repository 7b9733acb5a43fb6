"""Who keeps a storage alive: a view holds its whole storage, whatever part of it the view reads.

A 4 KiB slice of a 400 MiB tensor keeps all 400 MiB allocated as long as the slice lives (and
``torch.save`` of the slice writes all 400 MiB); ``.clone()`` gives it a storage of its own, of
its own size. :func:`kept_alive` says this in numbers for one view of a layout; the save check
and the teaching panel call it (metadata only).

>>> import torch, tensorviz as tv
>>> big = torch.zeros(100, 1024)
>>> k = kept_alive(tv.analyze({"row": big[3]}), "row")
>>> k.storage_nbytes, k.read_nbytes, k.unread_nbytes
(409600, 4096, 405504)
>>> k.sentence()
'row reads 4.0 KiB but keeps its whole 400.0 KiB storage alive; row.clone() would hold 4.0 KiB (405,504 bytes fewer)'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorviz.core.names import elide, terminal
from tensorviz.core.records import LayoutLike
from tensorviz.core.units import format_bytes

__all__ = ["KeptAlive", "kept_alive", "kept_alive_lines", "storages_kept_alive"]


@dataclass(frozen=True)
class KeptAlive:
    """What one view keeps allocated: its whole storage (``storage_nbytes``) for the
    ``read_nbytes`` it reads (its footprint). ``others_read_nbytes`` is what the layout's other
    views of that storage read beyond this view's bytes (all of the storage's read bytes,
    this view's included, are ``storage_nbytes - unreferenced_nbytes``)."""

    name: str
    storage_nbytes: int
    read_nbytes: int
    unreferenced_nbytes: int  # bytes of the storage no view of the layout reads

    @property
    def unread_nbytes(self) -> int:
        """Bytes of the storage this view does not read."""
        return self.storage_nbytes - self.read_nbytes

    @property
    def wasteful(self) -> bool:
        """Whether the view reads less than the storage it keeps alive."""
        return self.unread_nbytes > 0

    def sentence(self) -> str:
        """One line for a person: what it reads, what it keeps alive, what ``.clone()`` holds."""
        name = elide(terminal(self.name), 60)
        if not self.wasteful:
            return f"{name} reads all {format_bytes(self.storage_nbytes)} of its storage"
        return (
            f"{name} reads {format_bytes(self.read_nbytes)} but keeps its whole "
            f"{format_bytes(self.storage_nbytes)} storage alive; {name}.clone() would hold "
            f"{format_bytes(self.read_nbytes)} ({self.unread_nbytes:,} bytes fewer)"
        )


def kept_alive(layout: LayoutLike, name: str) -> KeptAlive:
    """The storage ``name`` keeps alive and the bytes of it that ``name`` does not read.

    Args:
        layout: an analysed layout (``tv.analyze``); nothing is read from any tensor.
        name: a view of the layout.

    Returns:
        A :class:`KeptAlive` (``sentence()`` says it in words).

    Raises:
        KeyError: ``name`` is not a view of the layout.
    """
    v = layout[name]
    s = layout.storage(name)
    return KeptAlive(v.name, int(s.nbytes), int(v.footprint_nbytes), int(s.unreferenced_nbytes))


def storages_kept_alive(layout: LayoutLike) -> dict[str, tuple[int, int]]:
    """Per view of an in-memory storage that the layout's views do not read in full:
    ``(storage bytes, bytes no view reads)``. A file's storage is the file (its header is read
    by no tensor), so views of files are left out. Work in the storages with unread bytes only.
    """
    stats = layout.storage_stats()
    unread = stats.nbytes - stats.covered
    out: dict[str, tuple[int, int]] = {}
    for s in np.flatnonzero(unread > 0).tolist():
        for v in layout.storage_views(s):
            if v.device != "file":
                out[v.name] = (int(stats.nbytes[s]), int(unread[s]))
    return out


def kept_alive_lines(layout: LayoutLike, limit: int = 3) -> list[str]:
    """For the save check's ``torch.save`` verdict: a sentence per view that keeps a bigger
    storage alive than it reads (the first ``limit``, then how many more), e.g. ``piece reads
    64 B but keeps its whole 390.6 KiB storage alive; piece.clone() would hold 64 B (...)``."""
    names = list(storages_kept_alive(layout))
    lines = [sentence for name in names[:limit] if (sentence := kept_alive(layout, name).sentence())]
    if len(names) > limit:
        lines.append(f"… and {len(names) - limit:,} more tensors keep storages bigger than what they read alive")
    return lines
