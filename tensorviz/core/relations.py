"""How two views relate (a mixin of :class:`~tensorviz.core.layout.Layout`): identical, same
bytes, contains/within, overlaps, disjoint or unrelated, from their exact footprints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tensorviz.core import periodic

if TYPE_CHECKING:
    from tensorviz.core.records import TensorView
    from tensorviz.core.table import Table


class RelationFacts:
    """``relation``, ``overlap_nbytes``, ``footprint_piece`` and ``union_nbytes``; mixed into :class:`Layout`."""

    __slots__ = ()

    if TYPE_CHECKING:  # what this mixin reads of Layout (tensorviz.core.layout); for the type checker only

        @property
        def _table(self) -> Table: ...
        def _position(self, name: str) -> int: ...
        def __getitem__(self, name: str) -> TensorView: ...

    def _tower_mask(self) -> np.ndarray:
        """Per view, True where its footprint is a tower (see :mod:`tensorviz.core.periodic`)."""
        t = self._table
        return np.fromiter((g.tower is not None for g in t.geos), bool, len(t.geos))[t.gid]

    def _piece_at(self, i: int):
        """View ``i``'s exact footprint: a Tower, or canonical byte runs."""
        t = self._table
        return periodic.piece(t.geos[t.gid[i]], int(t.start[i]), int(t.itemsize[i]))

    def footprint_piece(self, name: str):
        """The exact footprint of a view: canonical byte runs, or a
        :class:`~tensorviz.core.periodic.Tower` when it has too many runs to list
        (measure it with :func:`union_nbytes` or :func:`~tensorviz.core.periodic.intersection_nbytes`)."""
        return self._piece_at(self._position(name))

    def union_nbytes(self, names) -> int:
        """Distinct bytes read by the named views together (exact, towers included; views on
        different storages count apart).

        >>> import torch, tensorviz as tv
        >>> x = torch.zeros(8, dtype=torch.uint8)
        >>> tv.analyze({"even": x[::2], "odd": x[1::2], "head": x[:3]}).union_nbytes(["even", "head"])
        5
        """
        by_storage: dict = {}
        for n in names:
            by_storage.setdefault(self[n].storage, []).append(self._piece_at(self._position(n)))
        return sum(periodic.Union(p).nbytes for p in by_storage.values())

    # -- relations ----------------------------------------------------------------------
    def relation(self, a: str, b: str) -> str:
        """How two views relate: one of :data:`RELATIONS`.

        ``identical`` (same storage, byte offset, shape, stride, dtype; non-empty),
        ``same-bytes`` (equal footprints otherwise), ``contains``/``within`` (one footprint
        strictly inside the other), ``overlaps``, ``disjoint`` (same storage, no common byte --
        always so when either is empty), ``unrelated`` (different storages).

        When a footprint is over the run budget (``exact=False``) its span stands in for it:
        ``unrelated``, ``identical`` and ``disjoint`` stay exact, ``contains``/``within`` are
        only claimed when proven, and anything else is reported as ``overlaps``.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(3, 4)
        >>> tv.analyze({"w": w, "t": w.t(), "row": w[1]}).relation("row", "t")
        'within'
        """
        va, vb = self[a], self[b]
        known = record_relation(va, vb)
        if known is not None:
            return known
        pa, pb = self.footprint_piece(a), self.footprint_piece(b)
        inter, exact = periodic.intersection_nbytes(pa, pb)
        if inter == 0:
            return "disjoint"
        na, nb = periodic.piece_nbytes(pa), periodic.piece_nbytes(pb)
        if not exact:  # two towers whose common period is too long: the figure is a bound
            return "overlaps"
        return _compare(inter, na, va.exact, nb, vb.exact)

    def overlap_nbytes(self, a: str, b: str) -> int:
        """Bytes read by both views (0 for different storages)."""
        va, vb = self[a], self[b]
        if va.storage != vb.storage:
            return 0
        if va.is_dense and vb.is_dense:
            return max(0, min(va.stop, vb.stop) - max(va.start, vb.start))
        return periodic.intersection_nbytes(self.footprint_piece(a), self.footprint_piece(b))[0]


def record_relation(va, vb) -> str | None:
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
