"""Byte footprints of strided views, and the run-set algebra over them.

Pure numpy; nothing here knows about torch. A view is described by the byte address of its
first element (``start``), its ``shape``, its ``stride`` (in elements, as torch counts them) and
its ``itemsize``. Element ``(i0, i1, ...)`` occupies the bytes
``[start + itemsize*Σ i_k*stride_k, ... + itemsize)``.

A *run set* is an ``int64`` array of shape ``(k, 2)`` holding sorted, disjoint, non-abutting
half-open byte ranges ``[a, b)``. Every function here returns run sets in that canonical form, so
two footprints are equal exactly when their arrays are equal.

>>> footprint(0, (4, 6), (6, 1), 4).runs.tolist()       # a whole float32 matrix: one run
[[0, 96]]
>>> footprint(0, (4, 3), (6, 2), 4).runs[:2].tolist()   # x[:, ::2]: one run per element
[[0, 4], [8, 12]]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from tensorviz.core import periodic
from tensorviz.core import towers as tw
from tensorviz.core.runsets import EMPTY, intersection_nbytes, total, union
from tensorviz.core.runsets import freeze as _freeze
from tensorviz.core.towers import is_row_major

__all__ = [
    "RUN_BUDGET",
    "Footprint",
    "span",
    "footprint",
    "dense_run",
    "is_row_major",
    "as_runs",
    "union",
    "total",
    "intersection_nbytes",
    "contains",
    "coverage",
    "EMPTY",
    "Geometry",
    "geometry",
    "byte_runs_many",
    "RowForms",
    "row_forms_many",
    "gaps",
    "clip",
    "EXPLICIT_BUDGET",
]

#: Largest number of element *starts* a single footprint is expanded into (16 Mi, 256 MiB of
#: int64 pairs at worst). Above it the footprint is reported as the whole span with
#: ``exact=False`` -- an upper bound that tensorviz flags everywhere it is used, never silently.
RUN_BUDGET = 1 << 24

#: Views needing more runs than this are not listed but kept as towers: copies of a base at a
#: fixed period, storey on storey (see :func:`~tensorviz.core.towers.tower_form` and
#: :mod:`tensorviz.core.periodic`), measured exactly without listing them.
EXPLICIT_BUDGET = 1 << 20


@dataclass(frozen=True)
class Footprint:
    """The bytes one view reads.

    Attributes:
        runs: canonical run set, ``(k, 2)`` int64 (read-only).
        exact: False when the view needed more than :data:`RUN_BUDGET` element starts and
            ``runs`` is its span instead (an upper bound).
    """

    runs: np.ndarray
    exact: bool = True

    @property
    def nbytes(self) -> int:
        return total(self.runs)


def span(start: int, shape: Sequence[int], stride: Sequence[int], itemsize: int) -> tuple[int, int]:
    """Half-open byte range from the lowest to one past the highest addressed byte.

    An empty view (a zero in ``shape``) has ``start == stop``.

    >>> span(8, (2, 3), (3, 1), 4)
    (8, 32)
    """
    reach = 0
    for size, st in zip(shape, stride):
        if size == 0:
            return start, start
        reach += (size - 1) * st
    return start, start + (reach + 1) * itemsize


def _effective_dims(shape: Sequence[int], stride: Sequence[int]) -> list[tuple[int, int]]:
    """(stride, size) of the dims that move the address, innermost (smallest stride) first.

    Size-1 dims and stride-0 (expanded) dims address no new bytes and are dropped.
    """
    dims = [(st, size) for size, st in zip(shape, stride) if size > 1 and st != 0]
    dims.sort()
    return dims


def dense_run(start: int, shape: Sequence[int], stride: Sequence[int], itemsize: int) -> tuple[int, int] | None:
    """The single run ``(start, stop)`` if the view's footprint is one gap-free block, else None.

    Pure Python and allocation-free: the fast path for the common case (contiguous tensors,
    transposes, expands, slices of leading dims). Empty views return None.
    """
    block = 1  # elements covered so far by the innermost dims, gap-free
    if 0 in shape:
        return None
    for st, size in _effective_dims(shape, stride):
        if st > block:
            return None
        block += (size - 1) * st
    return start, start + block * itemsize


def footprint(
    start: int, shape: Sequence[int], stride: Sequence[int], itemsize: int, budget: int | None = None
) -> Footprint:
    """Exact set of bytes a strided view reads, as a canonical run set.

    Steps: (1) drop size-1 and stride-0 dims; (2) from the innermost dim outwards, fold dims
    whose copies touch or overlap the block built so far into one gap-free block; (3) place one
    copy of that block at every combination of the remaining outer indices (vectorised); (4) sort
    and merge. Linear in the number of blocks (plus a sort when strides interleave).

    Args:
        start: byte address of element (0, ..., 0).
        shape, stride: as torch reports them (stride in elements, non-negative).
        itemsize: bytes per element.
        budget: most blocks to expand (default :data:`RUN_BUDGET`, read at call time); above it
            the span is returned with ``exact=False``.

    Raises:
        ValueError: on a negative stride or size, or shape and stride of different lengths.

    >>> footprint(0, (2, 3), (3, 2), 1).runs.tolist()     # rows {0, 2, 4} and {3, 5, 7} interleave
    [[0, 1], [2, 6], [7, 8]]
    """
    _check(shape, stride)
    if any(size == 0 for size in shape):
        return Footprint(EMPTY)
    block, outer, count = _plan(shape, stride)
    if count > (RUN_BUDGET if budget is None else budget):
        a, b = span(start, shape, stride, itemsize)
        return Footprint(_freeze(np.array([[a, b]], dtype=np.int64)), exact=False)
    starts = np.zeros(1, dtype=np.int64)
    for st, size in reversed(outer):  # outermost first, so nested layouts come out sorted
        starts = (starts[:, None] + np.arange(size, dtype=np.int64) * st).ravel()
    return Footprint(_freeze(_merge_equal_length(starts, block) * itemsize + start))


def _check(shape: Sequence[int], stride: Sequence[int]) -> None:
    if len(shape) != len(stride):
        raise ValueError(f"shape {tuple(shape)} and stride {tuple(stride)} differ in length")
    if any(s < 0 for s in shape) or any(st < 0 for st in stride):
        raise ValueError(f"negative size or stride: shape={tuple(shape)}, stride={tuple(stride)}")


def _plan(shape: Sequence[int], stride: Sequence[int]) -> tuple[int, list[tuple[int, int]], int]:
    """(gap-free innermost block in elements, the outer (stride, size) dims, number of blocks)."""
    dims = _effective_dims(shape, stride)
    block = 1
    k = 0
    while k < len(dims) and dims[k][0] <= block:
        block += (dims[k][1] - 1) * dims[k][0]
        k += 1
    outer = dims[k:]
    count = 1
    for _, size in outer:
        count *= size
    return block, outer, count


class Geometry:
    """Facts about ``(shape, stride)`` shared by every view with that shape and stride.

    Everything is in *elements* from the view's first element, so a view's bytes are
    ``start + itemsize * x``. Computed once per distinct geometry by :func:`geometry`.

    Attributes:
        numel: number of logical elements.
        reach: elements from the first to one past the last addressed one (0 when empty).
        footprint: distinct elements read (``reach`` itself when not ``exact``: an upper bound).
        dense: the footprint is ``[0, reach)`` with no gap.
        exact: False when the footprint needed more than the run budget.
        contiguous: torch's row-major contiguity.
        runs: canonical element runs of the footprint (None when dense, empty or a tower).
        shape, stride: as plain tuples of ints.
        tower: when the footprint needs more than :data:`EXPLICIT_BUDGET` runs, the element
            towers whose union it is (:func:`~tensorviz.core.towers.tower_form`; else None); exact.
    """

    __slots__ = (
        "numel",
        "reach",
        "footprint",
        "dense",
        "exact",
        "contiguous",
        "runs",
        "shape",
        "stride",
        "tower",
        "_rows",
    )

    def __init__(
        self,
        numel: int,
        reach: int,
        footprint: int,
        dense: bool,
        exact: bool,
        contiguous: bool,
        runs: np.ndarray | None,
        shape: tuple[int, ...] = (),
        stride: tuple[int, ...] = (),
    ):
        self.numel, self.reach, self.footprint = numel, reach, footprint
        self.dense, self.exact, self.contiguous, self.runs = dense, exact, contiguous, runs
        self.shape, self.stride = shape, stride
        self.tower: list[np.ndarray | tw.Tower] | None = None
        self._rows: tuple[np.ndarray, int, int] | None | bool = False  # False: not worked out yet

    def row_form(self) -> tuple[np.ndarray, int, int] | None:
        """``(base element runs, period, count)`` where the listed footprint is ``count`` copies
        of a base one ``period`` apart (see :func:`~tensorviz.core.towers.row_form`); None for a
        dense, empty, inexact or towered footprint, or one whose rows interleave. Cached."""
        if self._rows is False:
            runs = self.runs if self.exact and self.tower is None else None
            self._rows = (
                tw.row_form(self.shape, self.stride, runs, self.reach) if runs is not None and len(runs) > 1 else None
            )
        return cast("tuple[np.ndarray, int, int] | None", self._rows)

    def byte_runs(self, start: int, itemsize: int) -> np.ndarray:
        """The footprint of a view with this geometry starting at byte ``start``.

        A tower is listed run by run up to :data:`RUN_BUDGET` runs; above, its span stands in
        (an upper bound: measure it with :mod:`tensorviz.core.periodic` instead)."""
        if self.tower is not None:
            if sum(tw.nruns(p) for p in self.tower) > RUN_BUDGET:
                return _freeze(np.array([[start, start + self.reach * itemsize]], dtype=np.int64))
            return _freeze(union(*map(tw.listed, self.tower)) * itemsize + start)
        if self.runs is None:
            return _freeze(np.array([[start, start + self.reach * itemsize]], dtype=np.int64)) if self.reach else EMPTY
        return _freeze(self.runs * itemsize + start)

    def __repr__(self) -> str:
        return (
            f"Geometry(numel={self.numel}, reach={self.reach}, footprint={self.footprint}, "
            f"dense={self.dense}, exact={self.exact})"
        )


def geometry(shape: Sequence[int], stride: Sequence[int], budget: int | None = None) -> Geometry:
    """The :class:`Geometry` of a view shape and stride (see :func:`footprint` for ``budget``).

    >>> g = geometry((4, 3), (6, 2))                  # x[:, ::2] of a 4 x 6 matrix
    >>> g.numel, g.reach, g.footprint, g.dense
    (12, 23, 12, False)
    """
    _check(shape, stride)
    shape, stride = tuple(int(s) for s in shape), tuple(int(s) for s in stride)
    numel = 1
    for size in shape:
        numel *= size
    contiguous = is_row_major(shape, stride)
    if numel == 0:
        return Geometry(0, 0, 0, False, True, contiguous, None, shape, stride)
    run = dense_run(0, shape, stride, 1)
    if run is not None:
        return Geometry(numel, run[1], run[1], True, True, contiguous, None, shape, stride)
    reach = span(0, shape, stride, 1)[1]
    form = tw.tower_form(shape, stride, EXPLICIT_BUDGET)
    if isinstance(form, list) and len(form) == 1 and isinstance(form[0], np.ndarray):  # summed: listed
        return Geometry(numel, reach, total(form[0]), False, True, contiguous, _freeze(form[0]), shape, stride)
    if isinstance(form, list):
        u = periodic.Union(form) if len(form) > 1 else None  # one tower: its copies never overlap
        if u is None or u.exact:
            count = u.nbytes if u is not None else tw.size(form[0])
            geo = Geometry(numel, reach, count, False, True, contiguous, None, shape, stride)
            geo.tower = form
            return geo
    f = footprint(0, shape, stride, 1, budget)
    if not f.exact:
        return Geometry(numel, reach, reach, False, False, contiguous, f.runs, shape, stride)
    return Geometry(numel, reach, total(f.runs), False, True, contiguous, f.runs, shape, stride)


def byte_runs_many(
    geos: Sequence[Geometry], gid: np.ndarray, start: np.ndarray, itemsize: np.ndarray, owner: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Footprints of many views at once: view ``j`` has Geometry ``geos[gid[j]]``, first byte
    ``start[j]`` and ``itemsize[j]``. Returns ``(runs, owner)``: every view's runs stacked
    (``(k, 2)`` int64, each view's own runs canonical) and ``owner[j]`` repeated once per run.

    Vectorised per distinct geometry, so 10k slices of one shape cost one numpy expression.

    >>> g = geometry((2,), (2,))
    >>> runs, who = byte_runs_many([g], np.array([0, 0]), np.array([0, 100]), np.array([4, 4]), np.array([7, 9]))
    >>> runs.tolist(), who.tolist()
    ([[0, 4], [8, 12], [100, 104], [108, 112]], [7, 7, 9, 9])
    """
    order = np.argsort(gid, kind="stable")
    sg = gid[order]
    cut = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1], True]) if sg.size else np.zeros(1, np.int64)
    runs, owners = [EMPTY], [np.zeros(0, dtype=np.int64)]
    for a, b in zip(cut[:-1].tolist(), cut[1:].tolist()):
        geo, idx = geos[sg[a]], order[a:b]
        base = geo.runs if geo.runs is not None else np.array([[0, geo.reach]], dtype=np.int64)[: 1 if geo.reach else 0]
        runs.append((base[None] * itemsize[idx, None, None] + start[idx, None, None]).reshape(-1, 2))
        owners.append(np.repeat(owner[idx], len(base)))
    return np.concatenate(runs), np.concatenate(owners)


@dataclass(frozen=True)
class RowForms:
    """Footprints of many views as rows (see :func:`row_forms_many`): view ``k`` reads
    ``start[k] + j * period[k] + bases[which[k]]`` (byte runs) for ``j < count[k]``; ``period``
    is 0 (and ``which`` -1) where its footprint has no row form."""

    period: np.ndarray
    count: np.ndarray
    which: np.ndarray
    bases: list[np.ndarray]

    def take(self, at: np.ndarray) -> RowForms:
        """The row forms of the views at positions ``at``."""
        return RowForms(self.period[at], self.count[at], self.which[at], self.bases)

    @property
    def nruns(self) -> np.ndarray:
        """Per view, the runs its rows list (0 without a row form)."""
        sizes = np.array([len(b) for b in self.bases] + [0], dtype=np.int64)
        return self.count * sizes[self.which]


def row_forms_many(geos: Sequence[Geometry], gid: np.ndarray, itemsize: np.ndarray) -> RowForms:
    """The :class:`RowForms` of views with Geometry ``geos[gid[k]]`` and ``itemsize[k]``, one
    row form per distinct geometry and item size.

    >>> g = geometry((3, 2), (8, 1))
    >>> r = row_forms_many([g], np.array([0, 0]), np.array([4, 2]))
    >>> r.period.tolist(), r.count.tolist(), [b.tolist() for b in r.bases], r.which.tolist()
    ([32, 16], [3, 3], [[[0, 4]], [[0, 8]]], [1, 0])
    """
    bases: list[np.ndarray] = []
    if gid.size == 0:
        none = np.zeros(0, np.int64)
        return RowForms(none, none, none, bases)
    keys, inverse = np.unique(gid * (int(itemsize.max()) + 1) + itemsize, return_inverse=True)
    inverse = inverse.reshape(-1)
    first = np.zeros(keys.size, np.int64)
    first[inverse[::-1]] = np.arange(gid.size - 1, -1, -1)  # a view of each key
    period, count, which = np.zeros(keys.size, np.int64), np.zeros(keys.size, np.int64), np.full(keys.size, -1)
    for key, at in enumerate(first.tolist()):
        form = geos[gid[at]].row_form()
        if form is not None:
            size = int(itemsize[at])
            period[key], count[key], which[key] = form[1] * size, form[2], len(bases)
            bases.append(form[0] * size)
    return RowForms(period[inverse], count[inverse], which[inverse], bases)


def _merge_equal_length(starts: np.ndarray, length: int) -> np.ndarray:
    """Merge runs ``[s, s+length)`` (unsorted, possibly overlapping) into a canonical run set."""
    if starts.size > 1 and not bool(np.all(starts[1:] >= starts[:-1])):
        starts = np.sort(starts)
    if starts.size == 0:
        return EMPTY.copy()
    # Equal lengths: after sorting, the furthest end so far is always the last start + length.
    breaks = np.flatnonzero(np.diff(starts) > length)
    firsts = np.concatenate(([0], breaks + 1))
    lasts = np.concatenate((breaks, [starts.size - 1]))
    return np.stack((starts[firsts], starts[lasts] + length), axis=1)


def as_runs(pairs: Iterable[tuple[int, int]] | np.ndarray) -> np.ndarray:
    """Canonical run set from any ``[a, b)`` pairs (unsorted, overlapping, empty ones dropped)."""
    arr = np.asarray(list(pairs) if not isinstance(pairs, np.ndarray) else pairs, dtype=np.int64)
    return union(arr.reshape(-1, 2))


def contains(outer: np.ndarray, inner: np.ndarray) -> bool:
    """True when every byte of ``inner`` lies in ``outer``."""
    return intersection_nbytes(outer, inner) == total(inner)


@dataclass(frozen=True)
class Coverage:
    """How a storage's bytes are used by the footprints that read it."""

    nbytes: int
    covered: np.ndarray  # canonical run set, clipped to [0, nbytes)

    @property
    def covered_nbytes(self) -> int:
        return total(self.covered)

    @property
    def unreferenced_nbytes(self) -> int:
        return self.nbytes - self.covered_nbytes

    def unreferenced(self) -> np.ndarray:
        """Runs of the storage that no footprint reads (``torch.save`` still writes them)."""
        return gaps(self.covered, 0, self.nbytes)


def gaps(runs: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The complement of a canonical run set within ``[lo, hi)``."""
    if hi <= lo:
        return EMPTY
    runs = clip(runs, lo, hi)
    edges = np.concatenate(([lo], runs.ravel(), [hi])).reshape(-1, 2)
    return _freeze(edges[edges[:, 1] > edges[:, 0]])


def clip(runs: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """A canonical run set restricted to ``[lo, hi)``."""
    if len(runs) == 0:
        return EMPTY
    out = np.clip(runs, lo, hi)
    return _freeze(out[out[:, 1] > out[:, 0]])


def coverage(nbytes: int, run_sets: Iterable[np.ndarray]) -> Coverage:
    """Coverage of a storage of ``nbytes`` bytes by the given footprints."""
    sets = list(run_sets)
    return Coverage(nbytes, clip(union(*sets), 0, nbytes) if sets else EMPTY)
