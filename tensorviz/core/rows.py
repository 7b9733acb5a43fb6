"""What a source hands to :class:`~tensorviz.core.layout.Layout`: compact :class:`Rows`.

Pure Python; no records are built here (see :mod:`tensorviz.core.records`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core.records import Logical, Piece, Skipped, StorageInfo, StorageKey

__all__ = ["Rows", "Field", "gc_paused"]

_FINISHING = threading.Lock()  # one deferred step at a time (they are short and rare)


class Field:
    """Where each fact sits in a row of :class:`Rows`: code reads ``row[Field.SHAPE]``,
    ``row[Field.DTYPE][Field.ITEMSIZE]``. Rows stay plain tuples (a collector makes 100k of them
    at C speed, where a named tuple costs a Python call each); these names are how they are read.
    """

    NAME, TOKEN, DEVICE, NBYTES, DTYPE, SHAPE, STRIDE, OFFSET, START = range(9)
    #: a source's own fields start here (the core reads the first nine)
    EXTRA = 9
    #: in ``row[Field.DTYPE]``, a ``(dtype name, itemsize)`` pair: the itemsize
    ITEMSIZE = 1


class Rows:
    """The compact form a collector hands to :class:`Layout`: plain tuples, no records yet.

    ``rows`` holds one tuple per view: ``(name, storage token, device, storage nbytes,
    (dtype name, itemsize), shape, stride, offset in elements, start in bytes or None for
    offset * itemsize)``. The token is the storage id (an int; the key becomes ``(str(device),
    id)``) or the storage key itself (a tuple). ``labels`` names storages by key, ``extra``
    lists ``(key, device, nbytes, label)`` of storages no view reads, ``notes`` a note by row,
    ``categories`` a category by row (:data:`~tensorviz.core.records.CATEGORIES`) and
    ``category`` the category of every row not in ``categories``;
    ``logical`` a :class:`~tensorviz.core.records.Logical` by row (block-quantized bytes),
    ``pieces`` a :class:`~tensorviz.core.records.Piece` by row (a stored piece of a tensor
    subclass or a packed weight).
    Set ``unique`` to False when names may repeat (flattened nested containers). Building
    records for 100k views costs more than reading their metadata, so :class:`Layout` groups
    storages and derives geometries and records on first use. ``finish``, if set, is a source's
    deferred step that the Layout runs once (:meth:`finished`) before anything is derived: it
    may rewrite rows in place and notes (names and order kept) and returns metadata to add
    (live tensors: storage objects over one memory, :mod:`tensorviz.sources.memory`). Rows
    may carry fields past the ninth for it; the core reads the first nine. ``copied``, if set,
    is ``(layout, src)``: row ``i`` with ``src[i] >= 0`` copies row ``src[i]`` of that other
    Layout's rows (all fields but the name; ``tv.diff``'s second walk of shared tensors), so
    this Layout's table can be derived from that Layout's (:func:`tensorviz.core.table.derive`).

    A Rows is handed to one Layout, which consumes it: when the Layout builds its columns it
    lets the row tuples go (``rows`` becomes empty), so the rows and the columns of 1M views
    never all live at once.
    """

    __slots__ = (
        "rows",
        "notes",
        "categories",
        "category",
        "logical",
        "pieces",
        "labels",
        "extra",
        "geometries",
        "unique",
        "finish",
        "copied",
    )

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.notes: dict[int, str] = {}
        self.categories: dict[int, str] = {}
        self.category = ""
        self.logical: dict[int, Logical] = {}
        self.pieces: dict[int, Piece] = {}
        self.labels: dict[StorageKey, str] = {}
        self.extra: list[tuple] = []
        self.geometries: dict[tuple, fp.Geometry] = {}
        self.unique = True
        self.finish: Callable[[Rows], dict] | None = None
        self.copied: tuple[Any, np.ndarray] | None = None

    def finished(self, metadata: dict) -> list[tuple]:
        """The rows after the deferred step, run on the first call; its facts go to ``metadata``.

        Thread-safe: ``finish`` is cleared only once the step is done, so a second thread
        either waits for it or sees its result, never the rows half rewritten.
        """
        if self.finish is not None:
            with _FINISHING:
                if self.finish is not None:
                    metadata.update(self.finish(self))
                    self.finish = None
        return self.rows

    def category_of(self, i: int) -> str:
        """The category of row ``i``."""
        return self.categories.get(i, self.category)

    def geometry(self, shape: Sequence[int], stride: Sequence[int]) -> fp.Geometry:
        """The shared :class:`~tensorviz.core.footprint.Geometry` of a shape and stride."""
        key = (shape, stride)
        geo = self.geometries.get(key)
        if geo is None:
            geo = self.geometries[key] = fp.geometry(shape, stride)
        return geo


class _GcPause:
    """The collector's pause: one process-wide state, counted and locked. The first pause of any
    thread records whether the collector was on and turns it off; the last one to end restores
    exactly that, once. (Reading ``gc.isenabled()`` and calling ``gc.disable()`` per caller,
    without a lock, lets two threads each see the other's pause as the user's setting and leave
    the collector off for the whole process.)"""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False

    def enter(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.depth += 1

    def exit(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and self.was_enabled:
                gc.enable()


_GC = _GcPause()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small records.

    They are acyclic, but each few hundred allocations would trigger a collection pass, and
    passes reach every live object of the caller (100k tensors and their containers) -- that
    costs more than the work itself. Re-entrant and thread-safe: pauses are counted in one
    process-wide state (:class:`_GcPause`), and the collector's state from before the first is
    restored when the last ends.
    """
    _GC.enter()
    try:
        yield
    finally:
        _GC.exit()


def store(info: StorageInfo) -> tuple:
    return (info.key, info.device, info.nbytes, info.label)


def drop_duplicates(rows: Rows, skipped: tuple) -> tuple[Rows, tuple]:
    """Rows keeping each name's first row only; the rest become Skipped."""
    out, seen, extra = Rows(), set(), []
    for i, row in enumerate(rows.rows):
        if row[Field.NAME] in seen:
            extra.append(Skipped(row[Field.NAME], "duplicate name: an earlier value already has this name"))
            continue
        seen.add(row[Field.NAME])
        if i in rows.notes:
            out.notes[len(out.rows)] = rows.notes[i]
        if i in rows.categories:
            out.categories[len(out.rows)] = rows.categories[i]
        if i in rows.logical:
            out.logical[len(out.rows)] = rows.logical[i]
        if i in rows.pieces:
            out.pieces[len(out.rows)] = rows.pieces[i]
        out.rows.append(row)
    out.labels, out.extra, out.geometries, out.finish = rows.labels, rows.extra, rows.geometries, rows.finish
    out.category = rows.category
    return out, skipped + tuple(extra)
