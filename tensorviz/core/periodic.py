"""Footprints too large to list run by run, measured exactly as arithmetic progressions of runs.

Pure numpy. The even bytes of a 32 MiB buffer are 16 Mi runs, and ``x[:, ::2]`` of a 50k x 4096
weight is 102 Mi: listing them costs gigabytes. Such a footprint is a :class:`Tower`
(:mod:`tensorviz.core.towers`): ``count`` copies of a base at ``start + j * period``, the base a
small canonical run set or itself a tower (one storey per strided level: the even elements of
each row's first half are rows of progressions). Copies never overlap, so a tower's size is
``count`` times its base's, and the bytes of it below any address come from one division per
storey and one search in the bottom run set (:meth:`Tower.below`). A view whose levels
interleave is the exact union of a few towers of one period.

A *piece* is a canonical run set (``(k, 2)`` int64), a Tower or a :class:`Union`. :class:`Union`
measures the union of any pieces exactly: towers of one period are cut into *row segments*
(stretches of ``period``-wide rows in which the same copies are present), each segment one
repeated pattern (a run set, or the Union of the storeys below, clipped to the row); towers of
different periods are first rewritten to their least common multiple, ``f`` copies of a base
becoming one storey of the rewritten tower (nothing listed). Listed runs join by
inclusion-exclusion against the towers' union. Never a run per copy: the cost is in the number
of pieces and storeys. Only where towers of different periods meet within one row of their
common period (nothing repeats) are their runs listed, up to :data:`BASE_BUDGET`; past it the
union is an upper bound and says so (``exact`` False).

>>> t = Tower(0, np.array([[0, 1]]), 2, 8)          # the even bytes of 16 bytes
>>> t.nbytes, int(t.below(np.array([5]))[0])
(8, 3)
>>> Union([t, Tower(1, np.array([[0, 1]]), 2, 8)]).nbytes   # even and odd: every byte
16
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tensorviz.core import runsets as rs
from tensorviz.core import towers as tw
from tensorviz.core.towers import BASE_BUDGET, Tower

__all__ = [
    "BASE_BUDGET",
    "Tower",
    "Piece",
    "Union",
    "piece",
    "piece_nbytes",
    "span_of",
    "intersection_nbytes",
    "is_periodic",
]

Piece = "np.ndarray | Tower | Union"

#: Runs listed outright when towers of different periods meet (cheaper than any rewrite).
SMALL_LIST = 1 << 12


def is_periodic(p) -> bool:
    """True for a footprint kept as a tower (or a union of towers), False for listed runs."""
    return not isinstance(p, np.ndarray)


def _below(runs: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bytes of canonical ``runs`` below each ``x``."""
    return tw.below(runs, x)


def piece_nbytes(p) -> int:
    return rs.total(p) if isinstance(p, np.ndarray) else p.nbytes


def span_of(p) -> tuple[int, int]:
    """``(first byte, one past the last)`` of a non-empty piece."""
    if isinstance(p, np.ndarray):
        return int(p[0, 0]), int(p[-1, 1])
    return p.first, p.stop


def piece(geo, start: int, itemsize: int):
    """The footprint of a view with Geometry ``geo`` at byte ``start``: a Tower (or the exact
    Union of a few) for a towered geometry, else its canonical byte runs."""
    form = getattr(geo, "tower", None)
    if form is None:
        return geo.byte_runs(start, itemsize)
    placed = [tw.shifted(tw.scaled(p, itemsize), int(start)) for p in form]
    return placed[0] if len(placed) == 1 else Union(placed)


class Union:
    """The exact union of pieces (run sets, towers, unions): its size, and its bytes below any
    address.

    >>> u = Union([np.array([[0, 4]]), Tower(2, np.array([[0, 1]]), 3, 4)])   # 0-3 and 2, 5, 8, 11
    >>> u.nbytes, u.below(np.array([6, 100])).tolist()
    (7, [5, 7])
    """

    def __init__(self, pieces: Sequence) -> None:
        flat = [q for p in pieces for q in (p.pieces if isinstance(p, Union) else [p])]
        self.pieces: list = [p for p in flat if piece_nbytes(p)]
        towers = [p for p in self.pieces if isinstance(p, Tower)]
        listed = [p for p in self.pieces if isinstance(p, np.ndarray)]
        self.exact = True
        if towers:
            towers, extra, self.exact = _common_period(towers)
            listed += extra
        self.listed = rs.union(*listed) if listed else rs.EMPTY
        self.rows = _Rows(towers) if towers else None
        self.exact = self.exact and (self.rows is None or self.rows.exact)
        self._inside = None
        if self.rows is not None and len(self.listed):
            r = self.listed
            self._inside = np.concatenate(([0], np.cumsum(self.rows.below(r[:, 1]) - self.rows.below(r[:, 0]))))
        self._nbytes: int | None = None

    def below(self, x: np.ndarray) -> np.ndarray:
        """Bytes of the union at addresses ``< x``, per entry of ``x``."""
        x = np.asarray(x, dtype=np.int64)
        out = _below(self.listed, x)
        if self.rows is None:
            return out
        out = out + self.rows.below(x)
        if self._inside is not None:  # bytes both listed and in a tower, counted once
            r = self.listed
            k = np.searchsorted(r[:, 1], x, side="right")  # listed runs wholly below x
            nxt = np.minimum(k, len(r) - 1)
            part = np.where((k < len(r)) & (r[nxt, 0] < x), self.rows.below(x) - self.rows.below(r[nxt, 0]), 0)
            out = out - self._inside[k] - part
        return out

    @property
    def nbytes(self) -> int:
        if self._nbytes is None:
            self._nbytes = int(self.below(np.array([np.iinfo(np.int64).max // 4]))[0])
        return self._nbytes

    @property
    def first(self) -> int:
        return min(span_of(p)[0] for p in self.pieces)

    @property
    def stop(self) -> int:
        return max(span_of(p)[1] for p in self.pieces)

    def within(self, lo: int, hi: int) -> int:
        """Bytes of the union inside ``[lo, hi)``."""
        a, b = self.below(np.array([lo, hi]))
        return int(b - a)


def _common_period(towers: list[Tower]) -> tuple[list[Tower], list[np.ndarray], bool]:
    """Towers rewritten to one period (their lcm): ``f`` copies of a base become the base of the
    rewritten tower (one storey more, nothing listed), copies left over one tower of one row.
    A handful of runs is listed instead. When no rewritten tower repeats (the periods are too
    far apart for the towers' length) the runs are listed up to :data:`BASE_BUDGET`, else the
    towers' spans stand in (inexact)."""
    if len({t.period for t in towers}) == 1:
        return towers, [], True
    runs = sum(t.nruns for t in towers)
    if runs <= SMALL_LIST:
        return [], [t.runs() for t in towers], True
    period = math.lcm(*(t.period for t in towers))
    out: list[Tower] = []
    for t in towers:
        f = period // t.period
        full, left = divmod(t.count, f)
        if full:
            out.append(Tower(t.start, Tower(0, t.base, t.period, f) if f > 1 else t.base, period, full))
        if left:
            out.append(Tower(t.start + full * period, Tower(0, t.base, t.period, left), period, 1))
    if all(t.count == 1 for t in out):  # nothing repeats at the common period
        if runs <= BASE_BUDGET:
            return [], [t.runs() for t in towers], True
        return [], [np.array([[t.first, t.stop]], dtype=np.int64) for t in towers], False
    return out, [], True


class _Rows:
    """The union of towers of one period, cut into row segments of one repeated pattern each
    (a run set, or the exact Union of the storeys below)."""

    def __init__(self, towers: list[Tower]) -> None:
        self.period = p = towers[0].period
        q = [t.start // p for t in towers]
        cuts = sorted({k for t, qt in zip(towers, q) for k in (qt, qt + 1, qt + t.count, qt + t.count + 1)})
        self.cuts = np.array(cuts, dtype=np.int64)
        self.exact = True
        patterns: list = []
        for k0 in cuts[:-1]:
            parts: list = []
            for t, qt in zip(towers, q):
                r = t.start - qt * p
                if 0 <= k0 - qt < t.count:  # copy k0 - qt starts in this row
                    parts += tw.clipped(tw.shifted(t.base, r), 0, p)
                if 0 <= k0 - qt - 1 < t.count and r + t.reach > p:  # the previous copy runs into it
                    parts += tw.clipped(tw.shifted(t.base, r - p), 0, p)
            patterns.append(self._pattern(parts))
        self.patterns = patterns
        self.sizes = np.array([piece_nbytes(pat) for pat in patterns], dtype=np.int64)
        rows = np.diff(self.cuts)
        self.before = np.concatenate(([0], np.cumsum(rows * self.sizes)))

    def _pattern(self, parts: list):
        if all(isinstance(x, np.ndarray) for x in parts):
            return rs.union(*parts) if parts else rs.EMPTY
        u = Union(parts)
        self.exact = self.exact and u.exact
        return u

    def below(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        row = np.floor_divide(x, self.period)
        seg = np.searchsorted(self.cuts, row, side="right") - 1  # -1: before the first cut
        out = np.zeros(x.shape, dtype=np.int64)
        after = seg >= len(self.sizes)
        out[after] = self.before[-1]
        live = (seg >= 0) & ~after
        if live.any():
            s, rw, xv = seg[live], row[live], x[live]
            full = self.before[s] + (rw - self.cuts[s]) * self.sizes[s]
            part = np.zeros(s.shape, dtype=np.int64)
            for k in np.unique(s).tolist():
                m = s == k
                pat = self.patterns[k]
                part[m] = (
                    _below(pat, xv[m] - rw[m] * self.period)
                    if isinstance(pat, np.ndarray)
                    else pat.below(xv[m] - rw[m] * self.period)
                )
            out[live] = full + part
        return out


def intersection_nbytes(a, b) -> tuple[int, bool]:
    """Bytes common to two pieces, and whether that figure is exact.

    >>> intersection_nbytes(Tower(0, np.array([[0, 1]]), 2, 8), np.array([[0, 16]]))
    (8, True)
    """
    na, nb = piece_nbytes(a), piece_nbytes(b)
    if not na or not nb:
        return 0, True
    (a0, a1), (b0, b1) = span_of(a), span_of(b)
    if a1 <= b0 or b1 <= a0:
        return 0, True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return rs.intersection_nbytes(a, b), True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):  # a tower and listed runs: no union needed
        t, r = (b, a) if isinstance(a, np.ndarray) else (a, b)
        return int((t.below(r[:, 1]) - t.below(r[:, 0])).sum()), True
    u = Union([a, b])
    return (na + nb - u.nbytes, True) if u.exact else (min(na, nb), False)
