"""How two views relate -- identical, same bytes, contains/within, overlaps, disjoint or
unrelated -- from their records or their exact footprints; functions of a layout's columns
(:class:`~tensorviz.core.table.Table`) and records, called and cached by
:class:`~tensorviz.core.layout.Layout`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tensorviz.core import periodic
from tensorviz.core.records import StorageKey, TensorView
from tensorviz.core.table import Table

__all__ = [
    "tower_mask",
    "piece_at",
    "union_nbytes",
    "record_relation",
    "footprint_relation",
    "nbytes_relation",
    "span_overlap",
]


def tower_mask(t: Table) -> np.ndarray:
    """Per view, True where its footprint is a tower (see :mod:`tensorviz.core.periodic`)."""
    return np.fromiter((g.tower is not None for g in t.geos), bool, len(t.geos))[t.gid]


def piece_at(t: Table, i: int) -> np.ndarray | periodic.Tower | periodic.Union:
    """View ``i``'s exact footprint: a Tower, or canonical byte runs."""
    return periodic.piece(t.geos[t.gid[i]], int(t.start[i]), int(t.itemsize[i]))


def union_nbytes(pieces: Iterable[tuple[StorageKey, np.ndarray | periodic.Tower | periodic.Union]]) -> int:
    """Distinct bytes read by footprints ``(storage, piece)`` together (exact, towers included;
    pieces on different storages count apart)."""
    by_storage: dict = {}
    for storage, piece in pieces:
        by_storage.setdefault(storage, []).append(piece)
    return sum(periodic.Union(p).nbytes for p in by_storage.values())


def footprint_relation(
    va: TensorView,
    vb: TensorView,
    pa: np.ndarray | periodic.Tower | periodic.Union,
    pb: np.ndarray | periodic.Tower | periodic.Union,
) -> str:
    """The relation of two views on one storage from their footprints ``pa`` and ``pb`` (when
    :func:`record_relation` cannot settle it)."""
    inter, exact = periodic.intersection_nbytes(pa, pb)
    if inter == 0:
        return "disjoint"
    na, nb = periodic.piece_nbytes(pa), periodic.piece_nbytes(pb)
    if not exact:  # two towers whose common period is too long: the figure is a bound
        return "overlaps"
    return _compare(inter, na, va.exact, nb, vb.exact)


def nbytes_relation(inter: int, na: int, nb: int) -> str:
    """The relation of two exact footprints of ``na`` and ``nb`` bytes on one storage sharing ``inter``.

    >>> nbytes_relation(4, 8, 4), nbytes_relation(4, 4, 4), nbytes_relation(2, 4, 8), nbytes_relation(0, 4, 8)
    ('contains', 'same-bytes', 'overlaps', 'disjoint')
    """
    return _compare(inter, na, True, nb, True) if inter else "disjoint"


def span_overlap(va: TensorView, vb: TensorView) -> int | None:
    """Bytes read by both views when their records settle it (different storages, both
    dense); None when it needs their footprints."""
    if va.storage != vb.storage:
        return 0
    if va.is_dense and vb.is_dense:
        return max(0, min(va.stop, vb.stop) - max(va.start, vb.start))
    return None


def record_relation(va: TensorView, vb: TensorView) -> str | None:
    """The relation of two views when their records settle it (different storages, empty,
    identical, spans apart, both dense); None when it needs their footprints."""
    if va.storage != vb.storage:
        return "unrelated"
    if va.is_empty or vb.is_empty:
        return "disjoint"
    if (va.start, va.shape, va.stride, va.dtype) == (vb.start, vb.shape, vb.stride, vb.dtype):
        return "identical"
    if va.stop <= vb.start or vb.stop <= va.start:
        return "disjoint"
    if va.is_dense and vb.is_dense:  # two gap-free blocks: their spans say it all
        inter = min(va.stop, vb.stop) - max(va.start, vb.start)
        return _compare(inter, va.stop - va.start, True, vb.stop - vb.start, True)
    return None


def _compare(inter: int, na: int, exact_a: bool, nb: int, exact_b: bool) -> str:
    """Relation of two intersecting footprints of ``na`` and ``nb`` bytes sharing ``inter``.

    An inexact footprint is an upper bound, so its byte count and the intersection are too.
    """
    if exact_a and exact_b:
        if inter == na == nb:
            return "same-bytes"
        if inter == nb:
            return "contains"
        return "within" if inter == na else "overlaps"
    # b lies inside its bound, and the bound inside a: proven; strict when the bound is smaller.
    if exact_a and inter == nb < na:
        return "contains"
    if exact_b and inter == na < nb:
        return "within"
    return "overlaps"
