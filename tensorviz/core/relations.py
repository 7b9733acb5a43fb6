"""How two views relate (a mixin of :class:`~tensorviz.core.layout.Layout`): identical, same
bytes, contains/within, overlaps, disjoint or unrelated, from their exact footprints.
"""

from __future__ import annotations

from tensorviz.core import footprint as fp


class RelationFacts:
    """``relation`` and ``overlap_nbytes``; mixed into :class:`Layout`."""

    __slots__ = ()

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
        if va.storage != vb.storage:
            return "unrelated"
        if va.is_empty or vb.is_empty:
            return "disjoint"
        if (va.start, va.shape, va.stride, va.dtype) == (vb.start, vb.shape, vb.stride, vb.dtype):
            return "identical"
        if va.stop <= vb.start or vb.stop <= va.start:
            return "disjoint"
        ra, rb = self.footprint_runs(a), self.footprint_runs(b)
        inter = fp.intersection_nbytes(ra, rb)
        if inter == 0:
            return "disjoint"
        return _compare(inter, fp.total(ra), va.exact, fp.total(rb), vb.exact)

    def overlap_nbytes(self, a: str, b: str) -> int:
        """Bytes read by both views (0 for different storages)."""
        va, vb = self[a], self[b]
        if va.storage != vb.storage:
            return 0
        return fp.intersection_nbytes(self.footprint_runs(a), self.footprint_runs(b))


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
