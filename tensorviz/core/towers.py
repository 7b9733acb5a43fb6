"""Strided footprints too long to list, kept as towers: copies of a base at a fixed period.

Pure numpy, imported by :mod:`tensorviz.core.footprint` (for each Geometry) and measured by
:mod:`tensorviz.core.periodic`.

A :class:`Tower` is ``count`` copies of a *base* placed at ``start + j * period``; the base is a
canonical run set or itself a Tower (relative to ``start``), and one copy never reaches past
``period``, so copies never overlap. Every strided level of a view is one more storey: the rows
of ``x.as_strided((4096, 4096), (8200, 2))`` are a tower of period 8200 whose base is a tower of
period 2. A level whose copies interleave (its stride is shorter than what the levels inside it
reach) becomes a few towers of one period whose union is the footprint (:func:`tower_form`):
``n`` shifted copies when it has few, or the inner footprint cut into period-wide slices when
those are few; else, when the sum stays under :data:`BASE_BUDGET` runs, it is listed by doubling
(``{2a + 3b}`` is a few runs, whatever ``a`` and ``b`` run to). Sizes and counts below any address
come from divisions, never from listing runs copy by copy.

>>> t = Tower(0, Tower(0, np.array([[0, 1]]), 2, 3), 10, 4)   # 4 rows of bytes 0, 2, 4
>>> t.nbytes, t.stop, int(t.below(np.array([13]))[0])
(12, 35, 5)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tensorviz.core.runsets import union

__all__ = [
    "BASE_BUDGET",
    "LIST_BUDGET",
    "UNION_BUDGET",
    "Tower",
    "Base",
    "tower_form",
    "row_form",
    "listed",
    "is_row_major",
    "size",
    "below",
    "first",
    "reach",
    "nruns",
    "shifted",
    "scaled",
    "clipped",
]

#: Most runs listed at the bottom of a tower: inner levels are listed while their copies fit,
#: the levels above are storeys (a storey costs a division; a listed run a search and a copy in
#: every row pattern of a union).
LIST_BUDGET = 1 << 12

#: Most runs a level summed by doubling may hold (and a base listed where periods meet).
BASE_BUDGET = 1 << 20

#: Most towers one footprint may be the union of (a level whose copies interleave multiplies them).
UNION_BUDGET = 64


@dataclass(frozen=True, eq=False)
class Tower:
    """``count`` copies of ``base`` (canonical runs or a Tower, relative to ``start``, reaching
    at most ``period``) at ``start + j * period``."""

    start: int
    base: np.ndarray | Tower
    period: int
    count: int

    @property
    def reach(self) -> int:
        """One past the last byte of one copy, relative to ``start``."""
        return reach(self.base)

    @property
    def first(self) -> int:
        return self.start + first(self.base)

    @property
    def stop(self) -> int:
        return self.start + (self.count - 1) * self.period + self.reach

    @property
    def nbytes(self) -> int:
        return size(self.base) * self.count

    @property
    def nruns(self) -> int:
        """Runs listed copy by copy (an upper bound: abutting copies merge)."""
        return nruns(self.base) * self.count

    def below(self, x: np.ndarray) -> np.ndarray:
        """Bytes of the tower at addresses ``< x``, per entry of ``x`` (int64)."""
        y = np.asarray(x, dtype=np.int64) - self.start
        q = np.clip(np.floor_divide(y, self.period), 0, self.count)
        partial = np.where(q < self.count, below(self.base, y - q * self.period), 0)
        return q * size(self.base) + partial

    def runs(self) -> np.ndarray:
        """Every run, listed (only for towers known to be small enough)."""
        return listed(self)


Base = "np.ndarray | Tower"


def size(b: np.ndarray | Tower) -> int:
    """Bytes of a run set or a tower."""
    if isinstance(b, Tower):
        return b.nbytes
    return int((b[:, 1] - b[:, 0]).sum()) if len(b) else 0


def first(b: np.ndarray | Tower) -> int:
    return b.first if isinstance(b, Tower) else int(b[0, 0])


def reach(b: np.ndarray | Tower) -> int:
    """One past the last byte."""
    return b.stop if isinstance(b, Tower) else int(b[-1, 1])


def nruns(b: np.ndarray | Tower) -> int:
    return b.nruns if isinstance(b, Tower) else len(b)


def below(b: np.ndarray | Tower, x: np.ndarray) -> np.ndarray:
    """Bytes of ``b`` at addresses ``< x``, per entry of ``x``."""
    if isinstance(b, Tower):
        return b.below(x)
    x = np.asarray(x, dtype=np.int64)
    if len(b) == 0:
        return np.zeros(x.shape, dtype=np.int64)
    lengths = b[:, 1] - b[:, 0]
    before = np.concatenate(([0], np.cumsum(lengths)))
    k = np.searchsorted(b[:, 0], x, side="right")  # runs starting at or before x
    last = np.maximum(k - 1, 0)
    inside = np.clip(x - b[last, 0], 0, lengths[last])
    return np.where(k > 0, before[last] + inside, 0)


def shifted(b: np.ndarray | Tower, d: int) -> np.ndarray | Tower:
    return replace(b, start=b.start + d) if isinstance(b, Tower) else b + d


def scaled(b: np.ndarray | Tower, k: int) -> np.ndarray | Tower:
    """Element runs to byte runs: every address times ``k`` (an element is ``k`` bytes)."""
    if isinstance(b, Tower):
        return Tower(b.start * k, scaled(b.base, k), b.period * k, b.count)
    return b * k


def clipped(b: np.ndarray | Tower, lo: int, hi: int) -> list[np.ndarray | Tower]:
    """The part of ``b`` inside ``[lo, hi)``, as pieces (run sets and towers) whose union it is:
    whole copies stay a tower, the at most two copies cut by an edge are clipped in turn."""
    if hi <= lo:
        return []
    if not isinstance(b, Tower):
        kept = np.clip(b, lo, hi)
        kept = kept[kept[:, 1] > kept[:, 0]]
        return [kept] if len(kept) else []
    f, r, p = first(b.base), b.reach, b.period
    meet_a = max(0, (lo - b.start - r) // p + 1)  # first copy ending after lo
    meet_b = min(b.count - 1, -((b.start + f - hi) // p) - 1)  # last copy starting before hi
    if meet_a > meet_b:
        return []
    full_a = max(meet_a, -((b.start + f - lo) // p))  # first copy wholly at or after lo
    full_b = min(meet_b, (hi - b.start - r) // p)  # last copy wholly before hi
    out: list[np.ndarray | Tower] = []
    if full_a <= full_b:
        out.append(Tower(b.start + full_a * p, b.base, p, full_b - full_a + 1))
        cut = [j for j in (meet_a, meet_b) if not full_a <= j <= full_b]
    else:
        cut = list(range(meet_a, meet_b + 1))  # at most two copies, each cut by an edge
    for j in sorted(set(cut)):
        out += clipped(shifted(b.base, b.start + j * p), lo, hi)
    return out


def listed(b: np.ndarray | Tower) -> np.ndarray:
    """Canonical runs of ``b``, listed copy by copy (for run sets and small towers only)."""
    if not isinstance(b, Tower):
        return b
    base = listed(b.base)
    runs = (base[None] + (b.start + np.arange(b.count, dtype=np.int64) * b.period)[:, None, None]).reshape(-1, 2)
    if len(runs) == 0:
        return runs
    new = np.r_[True, runs[1:, 0] > runs[:-1, 1]]  # sorted and disjoint: merge where copies abut
    firsts = np.flatnonzero(new)
    return np.stack((runs[firsts, 0], runs[np.r_[firsts[1:] - 1, len(runs) - 1], 1]), axis=1)


def tower_form(shape: Sequence[int], stride: Sequence[int], explicit: int) -> list[np.ndarray | Tower] | None | bool:
    """The element footprint of a view needing more than ``explicit`` runs, as towers whose union
    it is (one tower unless a level's copies interleave); None when it needs no more (list it);
    False when it has no such form within :data:`UNION_BUDGET` towers (a level with many copies
    interleaving many slices is then listed by doubling, up to :data:`BASE_BUDGET` runs).

    Dimensions that continue one another (``stride == inner stride * inner size``) are merged
    first, so ``x[:, ::2]`` of a row-major matrix is one progression of single elements.

    >>> (t,) = tower_form((4096, 2048), (4096, 2), explicit=1000)
    >>> t.base.tolist(), t.period, t.count
    ([[0, 1]], 2, 8388608)
    """
    block, outer = _levels(shape, stride)
    count = math.prod(size for _, size in outer)
    if count <= explicit:
        return None
    k = 0  # inner levels listed while their copies fit the list budget (at least one level left)
    while k < len(outer) - 1 and math.prod(n for _, n in outer[: k + 1]) <= LIST_BUDGET:
        k += 1
    pieces: list[np.ndarray | Tower] = [_listed_levels(block, outer[:k])]
    for st, n in outer[k:]:
        nxt = _storey(pieces, st, n)
        if nxt is None:
            return False
        pieces = nxt
    return pieces


def row_form(
    shape: Sequence[int], stride: Sequence[int], runs: np.ndarray, reach: int
) -> tuple[np.ndarray, int, int] | None:
    """A listed footprint as rows: ``(base, period, count)`` such that ``runs`` (its canonical
    element runs, the first element at 0, ``reach`` one past the last) are ``count`` copies of
    ``base`` at ``j * period``, one copy per ``period``-wide row; None when its outermost level's
    copies interleave (or it has none). Copy 0 is what lies below ``period``: copies never reach
    past the next one, so that is a search, never a listing.

    >>> base, period, count = row_form((3, 2), (8, 1), np.array([[0, 2], [8, 10], [16, 18]]), 18)
    >>> base.tolist(), period, count
    ([[0, 2]], 8, 3)
    """
    _, outer = _levels(shape, stride)
    if not outer:
        return None
    period, count = outer[-1]
    if reach - (count - 1) * period > period:  # one copy reaches past the next: they interleave
        return None
    k = int(np.searchsorted(runs[:, 0], period))  # runs starting in row 0 are copy 0's
    return np.minimum(runs[:k], period), period, count  # a run merged with copy 1 ends at the row's end


def _levels(shape: Sequence[int], stride: Sequence[int]) -> tuple[int, list[tuple[int, int]]]:
    """(gap-free innermost block in elements, the outer (stride, size) levels, innermost first)."""
    dims = sorted((st, size) for size, st in zip(shape, stride) if size > 1 and st != 0)
    merged: list[list[int]] = []
    for st, size in dims:
        if merged and merged[-1][0] * merged[-1][1] == st:
            merged[-1][1] *= size
        else:
            merged.append([st, size])
    block, k = 1, 0
    while k < len(merged) and merged[k][0] <= block:
        block += (merged[k][1] - 1) * merged[k][0]
        k += 1
    return block, [(st, size) for st, size in merged[k:]]


def _listed_levels(block: int, levels: Sequence[tuple[int, int]]) -> np.ndarray:
    """Canonical runs of blocks placed at every combination of ``levels`` (may interleave)."""
    starts = np.zeros(1, dtype=np.int64)
    for st, size in reversed(levels):
        starts = (starts[:, None] + np.arange(size, dtype=np.int64) * st).ravel()
    starts.sort()
    breaks = np.flatnonzero(np.diff(starts) > block)  # equal-length runs: merge where they meet
    firsts, lasts = np.r_[0, breaks + 1], np.r_[breaks, starts.size - 1]
    return np.stack((starts[firsts], starts[lasts] + block), axis=1)


def _storey(pieces: list[np.ndarray | Tower], st: int, n: int) -> list[np.ndarray | Tower] | None:
    """``n`` copies at stride ``st`` of the union of ``pieces``, as towers of period ``st``;
    None past :data:`UNION_BUDGET` towers."""
    r = max(reach(p) for p in pieces)
    if st >= r:  # copies do not interleave: one more storey on each piece
        return [Tower(0, p, st, n) for p in pieces]
    if n * len(pieces) <= UNION_BUDGET:  # few copies: each one a shifted piece
        return [shifted(p, j * st) for j in range(n) for p in pieces]
    rows = -(-r // st)  # many copies: the union cut into period-wide slices, each a tower
    if rows * len(pieces) <= UNION_BUDGET:
        cut = [(j, c) for j in range(rows) for p in pieces for c in clipped(p, j * st, (j + 1) * st)]
        if len(cut) <= UNION_BUDGET:
            return [Tower(j * st, shifted(c, -j * st), st, n) for j, c in cut]
    if sum(nruns(p) for p in pieces) > BASE_BUDGET:
        return None
    summed = _sumset(union(*map(listed, pieces)), st, n)  # many copies, many slices: list the sum
    return None if summed is None else [summed]


def _sumset(runs: np.ndarray, st: int, n: int) -> np.ndarray | None:
    """Canonical runs of ``runs + {0, st, ..., (n - 1) * st}`` by doubling (``O(log n)`` unions,
    never a run per copy); None once it needs more than :data:`BASE_BUDGET` runs.

    >>> _sumset(np.array([[0, 1], [2, 3], [4, 5]]), 3, 4).tolist()   # {0, 2, 4} + {0, 3, 6, 9}
    [[0, 1], [2, 12], [13, 14]]
    """
    out, k = runs, 1  # out = runs + {0, ..., k - 1} * st
    for bit in bin(n)[3:]:
        out, k = union(out, out + k * st), 2 * k
        if bit == "1":
            out, k = union(out, runs + k * st), k + 1
        if len(out) > BASE_BUDGET:
            return None
    return out


def is_row_major(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """torch's row-major contiguity rule, from metadata alone (size-1 dims ignored).

    >>> is_row_major((2, 3), (3, 1)), is_row_major((3, 2), (1, 3)), is_row_major((2, 1), (1, 7))
    (True, False, True)
    """
    if 0 in shape:
        return True
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True
