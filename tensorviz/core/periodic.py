"""Footprints too large to list run by run, measured exactly as arithmetic progressions of runs.

Pure numpy. The even bytes of a 32 MiB buffer are 16 Mi runs, and ``x[:, ::2]`` of a 50k x 4096
weight is 102 Mi: listing them costs gigabytes. Such a footprint is a :class:`Tower`: ``count``
copies of a small canonical run set ``base`` (its *reach* at most ``period``), the copy ``j``
placed at ``start + j * period``. Copies never overlap, so a tower's size is
``count * total(base)`` and the bytes of it below any address come from one division and one
search in ``base`` (:meth:`Tower.below`).

A *piece* is either a canonical run set (``(k, 2)`` int64) or a Tower. :class:`Union` measures the
union of any pieces exactly: towers of one period are cut into *row segments* (stretches of
``period``-wide rows in which the same copies are present), each segment one repeated pattern;
towers of different periods are first rewritten to their least common multiple. Listed runs join
by inclusion-exclusion against the towers' union. Never a run per copy: the cost is in the number
of pieces and the size of their bases. When a rewrite would make a base over
:data:`BASE_BUDGET` runs the union is only an upper bound and says so (``exact`` False).

>>> t = Tower(0, np.array([[0, 1]]), 2, 8)          # the even bytes of 16 bytes
>>> t.nbytes, int(t.below(np.array([5]))[0])
(8, 3)
>>> Union([t, Tower(1, np.array([[0, 1]]), 2, 8)]).nbytes   # even and odd: every byte
16
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tensorviz.core import footprint as fp

__all__ = [
    "BASE_BUDGET",
    "Tower",
    "Piece",
    "Union",
    "piece",
    "piece_nbytes",
    "span_of",
    "intersection_nbytes",
]

from tensorviz.core.towers import BASE_BUDGET  # noqa: E402


@dataclass(frozen=True)
class Tower:
    """``count`` copies of ``base`` (canonical runs within ``[0, period)``) at ``start + j * period``."""

    start: int
    base: np.ndarray
    period: int
    count: int

    @property
    def reach(self) -> int:
        return int(self.base[-1, 1])

    @property
    def nbytes(self) -> int:
        return fp.total(self.base) * self.count

    @property
    def stop(self) -> int:
        return self.start + (self.count - 1) * self.period + self.reach

    @property
    def nruns(self) -> int:
        return len(self.base) * self.count

    def below(self, x: np.ndarray) -> np.ndarray:
        """Bytes of the tower at addresses ``< x``, per entry of ``x`` (int64)."""
        y = np.asarray(x, dtype=np.int64) - self.start
        q = np.clip(np.floor_divide(y, self.period), 0, self.count)
        partial = np.where(q < self.count, _below(self.base, y - q * self.period), 0)
        return q * fp.total(self.base) + partial

    def runs(self) -> np.ndarray:
        """Every run, listed (only for towers known to be small enough)."""
        at = self.start + np.arange(self.count, dtype=np.int64) * self.period
        return fp.union((self.base[None] + at[:, None, None]).reshape(-1, 2))


Piece = "np.ndarray | Tower"


def _below(runs: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bytes of canonical ``runs`` below each ``x``."""
    x = np.asarray(x, dtype=np.int64)
    if len(runs) == 0:
        return np.zeros(x.shape, dtype=np.int64)
    lengths = runs[:, 1] - runs[:, 0]
    before = np.concatenate(([0], np.cumsum(lengths)))
    k = np.searchsorted(runs[:, 0], x, side="right")  # runs starting at or before x
    last = np.maximum(k - 1, 0)
    inside = np.clip(x - runs[last, 0], 0, lengths[last])
    return np.where(k > 0, before[last] + inside, 0)


def piece_nbytes(p) -> int:
    return p.nbytes if isinstance(p, Tower) else fp.total(p)


def span_of(p) -> tuple[int, int]:
    """``(first byte, one past the last)`` of a non-empty piece."""
    if isinstance(p, Tower):
        return p.start + int(p.base[0, 0]), p.stop
    return int(p[0, 0]), int(p[-1, 1])


def piece(geo, start: int, itemsize: int):
    """The footprint of a view with Geometry ``geo`` at byte ``start``: a Tower for a towered
    geometry, else its canonical byte runs."""
    tower = getattr(geo, "tower", None)
    if tower is None:
        return geo.byte_runs(start, itemsize)
    base, period, count = tower
    return Tower(int(start), base * itemsize, int(period) * itemsize, int(count))


class Union:
    """The exact union of pieces: its size, and its bytes below any address.

    >>> u = Union([np.array([[0, 4]]), Tower(2, np.array([[0, 1]]), 3, 4)])   # 0-3 and 2, 5, 8, 11
    >>> u.nbytes, u.below(np.array([6, 100])).tolist()
    (7, [5, 7])
    """

    def __init__(self, pieces: Sequence) -> None:
        towers = [p for p in pieces if isinstance(p, Tower) and p.count and len(p.base)]
        listed = [p for p in pieces if not isinstance(p, Tower) and len(p)]
        self.exact = True
        if towers:
            towers, extra, self.exact = _common_period(towers)
            listed += extra
        self.listed = fp.union(*listed) if listed else fp.EMPTY
        self.rows = _Rows(towers) if towers else None
        self._inside = None
        if self.rows is not None and len(self.listed):
            r = self.listed
            self._inside = np.concatenate(([0], np.cumsum(self.rows.below(r[:, 1]) - self.rows.below(r[:, 0]))))

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
        return int(self.below(np.array([np.iinfo(np.int64).max // 4]))[0])

    def within(self, lo: int, hi: int) -> int:
        """Bytes of the union inside ``[lo, hi)``."""
        a, b = self.below(np.array([lo, hi]))
        return int(b - a)


def _common_period(towers: list[Tower]) -> tuple[list[Tower], list[np.ndarray], bool]:
    """Towers rewritten to one period (their lcm); copies left over are listed runs. When a
    rewritten base would be over :data:`BASE_BUDGET` runs, the towers' spans stand in (inexact)."""
    period = math.lcm(*(t.period for t in towers))
    if all(t.period == period for t in towers):
        return towers, [], True
    if any(len(t.base) * (period // t.period) > BASE_BUDGET for t in towers):
        return [], [np.array([[t.start, t.stop]], dtype=np.int64) for t in towers], False
    out, extra = [], []
    for t in towers:
        f = period // t.period
        if f == 1:
            out.append(t)
            continue
        base = (t.base[None] + (np.arange(f, dtype=np.int64) * t.period)[:, None, None]).reshape(-1, 2)
        full, left = divmod(t.count, f)
        if full:
            out.append(Tower(t.start, fp.union(base), period, full))
        if left:
            extra.append(Tower(t.start + full * period, t.base, t.period, left).runs())
    return out, extra, True


class _Rows:
    """The union of towers of one period, cut into row segments of one repeated pattern each."""

    def __init__(self, towers: list[Tower]) -> None:
        self.period = p = towers[0].period
        q = [t.start // p for t in towers]
        cuts = sorted({k for t, qt in zip(towers, q) for k in (qt, qt + 1, qt + t.count, qt + t.count + 1)})
        self.cuts = np.array(cuts, dtype=np.int64)
        patterns, sizes = [], []
        for k0 in cuts[:-1]:
            parts = []
            for t, qt in zip(towers, q):
                r = t.start - qt * p
                if 0 <= k0 - qt < t.count:  # copy k0 - qt starts in this row
                    parts.append(fp.clip(t.base + r, 0, p))
                if 0 <= k0 - qt - 1 < t.count and r + t.reach > p:  # the previous copy runs into it
                    parts.append(fp.clip(t.base + r - p, 0, p))
            pat = fp.union(*parts) if parts else fp.EMPTY
            patterns.append(pat)
            sizes.append(fp.total(pat))
        self.patterns = patterns
        self.sizes = np.array(sizes, dtype=np.int64)
        rows = np.diff(self.cuts)
        self.before = np.concatenate(([0], np.cumsum(rows * self.sizes)))

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
                part[m] = _below(self.patterns[k], xv[m] - rw[m] * self.period)
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
    if not isinstance(a, Tower) and not isinstance(b, Tower):
        return fp.intersection_nbytes(a, b), True
    if isinstance(a, Tower) != isinstance(b, Tower):  # a tower and listed runs: no union needed
        t, r = (a, b) if isinstance(a, Tower) else (b, a)
        return int((t.below(r[:, 1]) - t.below(r[:, 0])).sum()), True
    u = Union([a, b])
    return (na + nb - u.nbytes, True) if u.exact else (min(na, nb), False)
