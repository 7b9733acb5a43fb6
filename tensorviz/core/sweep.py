"""Vectorised sort-and-sweep over the spans and footprints of many views at once.

Pure numpy; used by :class:`tensorviz.core.layout.Layout` for overlap groups and storage coverage.
Each storage's bytes are shifted to their own stretch of one global axis (``base[s] + byte``,
with a gap between storages), so one sort and one sweep handle every storage together and
nothing ever compares two storages. Never all pairs: ``O(n log n)`` in views plus runs.

Views whose footprints are rows of one period on one storage (64 column slices of a weight:
50k rows of one run each, 3.2 M runs) are swept in *period space* instead (:func:`_by_period`):
each view's base runs, reduced mod the period (a run that wraps into the next row split in
two), hold on a range of rows; the rows are cut where the set of views present changes, and
each stretch's runs are swept once, its coverage multiplied by its rows. Exact, and the same
labels and coverage as listing every run; a storage whose stretches would cost more than its
listed runs is listed as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import periodic

__all__ = [
    "Sweep",
    "sweep",
    "RowAxis",
    "row_axis",
    "RowRuns",
    "row_overlaps",
    "row_union",
    "row_parts",
    "run_parts",
    "components",
    "ranked",
    "same_keys",
    "min_roots",
]


@dataclass(frozen=True)
class Sweep:
    """The result of one sweep over every non-empty view.

    Attributes:
        overlap: per view, a label shared exactly by views connected through intersecting
            footprints (empty views get labels of their own).
        covered: per storage, bytes read by at least one footprint (clipped to the storage).
        inexact: per storage, True where ``covered`` is an upper bound (towers of periods whose
            common multiple needs a base over the budget; see :mod:`tensorviz.core.periodic`).
    """

    overlap: np.ndarray
    covered: np.ndarray
    inexact: np.ndarray | None = None


def sweep(
    sidx: np.ndarray,
    start: np.ndarray,
    stop: np.ndarray,
    dense: np.ndarray,
    nbytes: np.ndarray,
    runs_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    tower: np.ndarray | None = None,
    tower_of: Callable[[int], periodic.Tower | periodic.Union] | None = None,
    rows_of: Callable[[np.ndarray], fp.RowForms] | None = None,
) -> Sweep:
    """Overlap labels and coverage for views ``i`` on storage ``sidx[i]`` with span ``[start, stop)``.

    Args:
        sidx, start, stop, dense: one entry per view; ``dense`` means the footprint is the span.
        nbytes: one entry per storage.
        runs_of: footprint runs (storage bytes) of the views at the given indices, as
            ``(runs (k, 2), owning view of each run)``; only called for the views of span
            clusters that hold a non-dense view.
        tower, tower_of: per view, True where its footprint is a tower (too many runs to list),
            and the :class:`~tensorviz.core.periodic.Tower` (or Union of towers) of such a view; never listed.
        rows_of: the :class:`~tensorviz.core.footprint.RowForms` of the views at the given
            indices; where given, storages whose views list at least :data:`PERIOD_MIN_RUNS`
            runs at one period are swept in period space (same answers, no run listed).
    """
    n, ns = len(sidx), len(nbytes)
    labels = np.arange(n, dtype=np.int64) + n  # empty views keep these singleton labels
    covered = np.zeros(ns, dtype=np.int64)
    live = np.flatnonzero(stop > start)
    if live.size == 0:
        return Sweep(labels, covered)
    base = _bases(sidx[live], stop[live], ns)
    gs, ge = start[live] + base[sidx[live]], stop[live] + base[sidx[live]]
    order = np.argsort(gs, kind="stable")
    cid_sorted, first = _clusters(gs[order], ge[order])
    cid = np.empty(live.size, dtype=np.int64)
    cid[order] = cid_sorted
    # Clusters whose members are all dense are one gap-free block each: one group, and their
    # coverage is the block. Clusters holding a non-dense view need the exact footprint sweep.
    sparse = np.zeros(first.size, dtype=bool)
    sparse[cid[~dense[live]]] = True
    simple = ~sparse
    cl_start = gs[order][first]
    cl_stop = np.maximum.reduceat(ge[order], first)
    cl_storage = sidx[live][order][first]
    lo = base[cl_storage]
    _add_clipped(
        covered,
        cl_storage[simple],
        cl_start[simple],
        cl_stop[simple],
        lo[simple],
        lo[simple] + nbytes[cl_storage[simple]],
    )
    labels[live] = cid
    members = live[sparse[cid]]
    inexact = np.zeros(ns, dtype=bool)
    if members.size:
        towers = tower[members] if tower is not None else np.zeros(members.size, dtype=bool)
        feeds = _Feeds(runs_of, tower_of, rows_of)
        _refine(members, towers, sidx, start, base, nbytes, feeds, labels, covered, inexact, n)
    return Sweep(labels, covered, inexact)


def _bases(sidx: np.ndarray, stop: np.ndarray, ns: int) -> np.ndarray:
    top = np.zeros(ns, dtype=np.int64)
    np.maximum.at(top, sidx, stop)
    base = np.zeros(ns, dtype=np.int64)
    np.cumsum(top[:-1] + 1, out=base[1:])
    return base


def _clusters(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cluster ids of sorted half-open ranges joined when they share a byte; first index of each."""
    ends = np.maximum.accumulate(b)
    new = np.empty(a.size, dtype=bool)
    new[0] = True
    new[1:] = a[1:] >= ends[:-1]
    return np.cumsum(new) - 1, np.flatnonzero(new)


def _add_clipped(covered, storage, a, b, lo, hi) -> None:
    length = np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0, None)
    np.add.at(covered, storage, length)


@dataclass(frozen=True)
class _Feeds:
    """Where :func:`_refine` gets footprints from (see :func:`sweep`'s arguments)."""

    runs_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    tower_of: Callable[[int], periodic.Tower | periodic.Union] | None
    rows_of: Callable[[np.ndarray], fp.RowForms] | None


def _refine(members, towers, sidx, start, base, nbytes, feeds, labels, covered, inexact, n) -> None:
    """Exact footprint sweep over the views of clusters that hold a non-dense view."""
    listed, towered = members[~towers], members[towers]
    a, b = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    if feeds.rows_of is not None and listed.size:
        listed = _by_period(listed, sidx[towered], sidx, start, nbytes, feeds, covered, a, b)
    runs_of, tower_of = feeds.runs_of, feeds.tower_of
    runs, owner = runs_of(listed) if listed.size else (np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    if len(runs):
        allruns = runs + base[sidx[owner]][:, None]
        order = np.argsort(allruns[:, 0], kind="stable")
        allruns, sorted_owner = allruns[order], owner[order]
        rc, first = _clusters(allruns[:, 0], allruns[:, 1])
        st = sidx[sorted_owner[first]]
        top = np.maximum.reduceat(allruns[:, 1], first)
        _add_clipped(covered, st, allruns[first, 0], top, base[st], base[st] + nbytes[st])
        # Views sharing a run cluster share a byte: link each to the cluster's first owner.
        head = sorted_owner[first][rc]
        link = head != sorted_owner
        a.append(head[link])
        b.append(sorted_owner[link])
    if towered.size:
        for ta, tb in _tower_links(towered, runs, owner, sidx, nbytes, tower_of, covered, inexact):
            a.append(ta)
            b.append(tb)
    pairs = np.stack((np.concatenate(a), np.concatenate(b)))
    if pairs.shape[1] > members.size:  # a cluster links one pair once per run: keep each pair once
        pairs = np.sort(pairs[0] * np.int64(n) + pairs[1])
        pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
        pairs = np.stack((pairs // n, pairs % n))
    local = np.searchsorted(members, pairs)  # members is sorted
    labels[members] = 2 * n + members[min_roots(members.size, local[0], local[1])]


#: Runs a storage's views must list at one period before that storage is swept in period space.
PERIOD_MIN_RUNS = 1 << 12

#: Most runs (one per row of each run of a :class:`RowRuns`) its ``below`` lists to count bytes:
#: about eight int64 columns of that length live at once (128 MiB at most, within the memory
#: budget); past it, a division per run and position, in bounded chunks.
BELOW_LISTED = 1 << 21


def _by_period(listed, towered_storages, sidx, start, nbytes, feeds, covered, a, b) -> np.ndarray:
    """Sweep in period space the storages (holding no tower) whose listed views have at least
    :data:`PERIOD_MIN_RUNS` runs at one period, appending their links to ``a``/``b`` and their
    coverage to ``covered``; returns the listed views left to list run by run."""
    rows = feeds.rows_of(listed)
    weight = rows.nruns
    if not weight.any() or weight.sum() < PERIOD_MIN_RUNS:  # no storage reaches the threshold
        return listed
    s = sidx[listed]
    key = same_keys(s, rows.period)  # one group per (storage, period)
    total = np.bincount(key, weights=weight)
    at = np.zeros(total.size, np.int64)
    at[key[::-1]] = np.arange(key.size - 1, -1, -1)  # a view of each group
    order = np.lexsort((-total, s[at]))  # per storage, its heaviest period first
    best = order[np.r_[True, s[at][order][1:] != s[at][order][:-1]]]
    best = best[(total[best] >= PERIOD_MIN_RUNS) & (rows.period[at[best]] > 0)]
    best = best[~np.isin(s[at[best]], towered_storages)]
    done = np.zeros(listed.size, dtype=bool)
    by_storage = np.argsort(s, kind="stable")  # each storage's positions, ascending
    firsts = np.searchsorted(s[by_storage], s[at[best]], side="left")
    lasts = np.searchsorted(s[by_storage], s[at[best]], side="right")
    for g, lo, hi in zip(best.tolist(), firsts.tolist(), lasts.tolist()):
        storage, period = int(s[at[g]]), int(rows.period[at[g]])
        here = by_storage[lo:hi]
        swept = _storage_by_period(listed, here, rows, period, start, int(nbytes[storage]), feeds.runs_of)
        if swept is not None:
            ha, hb, cov = swept
            a.append(ha)
            b.append(hb)
            covered[storage] += cov
            done[here] = True
    return listed[~done]


def _storage_by_period(listed, here, rows, period, start, hi, runs_of):
    """One storage's views ``listed[here]`` in period space: ``(links, links, coverage within
    [0, hi))``, or None where cutting the rows would cost more than listing the runs."""
    (owner, k0, k1, ra, rb), nruns = _parts(listed[here], rows.take(here), period, start, runs_of)
    return _row_sweep(period, hi, owner, k0, k1, ra, rb, nruns)


def _parts(views, rows, period, start, runs_of):
    """Part-runs (see :func:`_row_sweep`) of views on one storage, ``rows`` their row forms:
    the views with rows of ``period`` by their base runs, the others run by run; and the runs
    listing them would take."""
    mine = np.flatnonzero(rows.period == period)
    parts = []
    for w in np.unique(rows.which[mine]).tolist():
        at = mine[rows.which[mine] == w]
        parts.append(row_parts(views[at], start[views[at]], rows.count[at], rows.bases[w], period))
    rest = np.setdiff1d(np.arange(views.size), mine, assume_unique=True)
    nruns = int(rows.nruns[mine].sum())
    if rest.size:
        runs, owner = runs_of(views[rest])
        parts.append(run_parts(runs, owner, period))
        nruns += len(runs)
    return tuple(np.concatenate(c) for c in zip(*parts)), nruns


def row_parts(views, start, count, base, period):
    """Part-runs of views reading ``start + j * period + base`` for ``j < count`` (per view):
    per base run, the piece in the view's first row (rows ``q .. q + count``) and the piece
    wrapping into the next (rows ``q + 1 .. q + count + 1``), as ``(owner, first row, stop
    row, a, b)`` with ``0 <= a < b <= period``."""
    q, r = np.divmod(start, period)
    c = count
    x = base[None, :, :] + r[:, None, None]  # (views, runs, 2); x < r + period < 2 * period
    head = x[:, :, 0] < period
    wrap = x[:, :, 1] > period
    shape = x.shape[:2]
    own, q0, c0 = (np.broadcast_to(v[:, None], shape) for v in (views, q, c))
    return (
        np.concatenate((own[head], own[wrap])),
        np.concatenate((q0[head], q0[wrap] + 1)),
        np.concatenate((q0[head] + c0[head], q0[wrap] + c0[wrap] + 1)),
        np.concatenate((x[:, :, 0][head], np.maximum(x[:, :, 0][wrap] - period, 0))),
        np.concatenate((np.minimum(x[:, :, 1][head], period), x[:, :, 1][wrap] - period)),
    )


def run_parts(runs, owner, period):
    """Part-runs of listed runs ``[a, b)``: the piece in the first row, the whole rows after it,
    the piece in the last row (each present when not empty)."""
    qa, ra = np.divmod(runs[:, 0], period)
    qb, rb = np.divmod(runs[:, 1] - 1, period)
    rb = rb + 1
    one = qa == qb
    mid = qb > qa + 1
    many = ~one
    return (
        np.concatenate((owner[one], owner[many], owner[mid], owner[many])),
        np.concatenate((qa[one], qa[many], qa[mid] + 1, qb[many])),
        np.concatenate((qa[one] + 1, qa[many] + 1, qb[mid], qb[many] + 1)),
        np.concatenate((ra[one], ra[many], np.zeros(int(mid.sum()), np.int64), np.zeros(int(many.sum()), np.int64))),
        np.concatenate((rb[one], np.full(int(many.sum()), period), np.full(int(mid.sum()), period), rb[many])),
    )


def _place(period, owner, k0, k1, ra, rb, budget):
    """Part-runs placed once in every row stretch they span (stretch ``m`` at ``m * (period + 1)``):
    ``(lo, up, owner, cuts)``, stretch ``m`` standing for rows ``cuts[m] .. cuts[m + 1]``; None
    past ``budget`` placed runs."""
    cuts = np.unique(np.concatenate((k0, k1)))
    width = period + 1
    i0, i1 = np.searchsorted(cuts, k0), np.searchsorted(cuts, k1)
    spans = i1 - i0
    placed = int(spans.sum())
    if placed > budget or (int(cuts.size) + 1) * width >= 1 << 62:  # int64 positions stay exact
        return None
    m = np.arange(placed) - np.repeat(np.cumsum(spans) - spans - i0, spans)  # stretch of each placed run
    rep = np.repeat(np.arange(spans.size), spans)
    return m * width + ra[rep], m * width + rb[rep], owner[rep], cuts


@dataclass(frozen=True)
class RowAxis:
    """Footprints of views of one storage in period space, on an axis of their own: view
    ``owner[k]`` reads ``runs[k]``; the axis's stretch ``m``, ``[m * width, (m + 1) * width)``,
    stands for ``rows[m]`` rows of the storage, so a byte there is ``rows[m]`` bytes of it
    (:meth:`scale`). Built by :func:`row_axis`."""

    runs: np.ndarray
    owner: np.ndarray
    width: int
    rows: np.ndarray

    @property
    def span(self) -> int:
        return int(self.rows.size) * self.width

    def scale(self, x: np.ndarray) -> np.ndarray:
        """Storage bytes per axis byte at each ``x`` (``0 <= x < span``)."""
        return self.rows[np.asarray(x, dtype=np.int64) // self.width]


def row_axis(views: np.ndarray, rows: fp.RowForms, start: np.ndarray, runs_of) -> RowAxis | None:
    """The :class:`RowAxis` of ``views`` (on one storage; ``rows`` their row forms, ``start``
    every view's first byte, ``runs_of`` as for :func:`sweep`), at the period whose views list
    the most runs; None when that is under :data:`PERIOD_MIN_RUNS` runs, or placing the rows'
    stretches would cost more than listing the runs."""
    weight = rows.nruns
    if not weight.any() or weight.sum() < PERIOD_MIN_RUNS:
        return None
    periods, inverse = np.unique(rows.period, return_inverse=True)
    total = np.bincount(inverse.reshape(-1), weights=weight)
    total[periods == 0] = -1
    best = int(np.argmax(total))
    if total[best] < PERIOD_MIN_RUNS:
        return None
    period = int(periods[best])
    (owner, k0, k1, ra, rb), nruns = _parts(views, rows, period, start, runs_of)
    placed = _place(period, owner, k0, k1, ra, rb, nruns)
    if placed is None:
        return None
    lo, up, who, cuts = placed
    return RowAxis(np.stack((lo, up), axis=1), who, period + 1, np.diff(cuts))


@dataclass(frozen=True)
class RowRuns:
    """A byte set in period space: run ``k`` is ``[a[k], b[k])`` of every row ``r0[k] <= r < r1[k]``
    of ``period`` bytes (row ``r`` at byte ``r * period``); the runs are disjoint.

    >>> s = RowRuns(np.array([2]), np.array([5]), np.array([1]), np.array([3]), 10)
    >>> s.listed().tolist(), s.below(np.array([0, 14, 100])).tolist()
    ([[12, 15], [22, 25]], [0, 2, 6])
    """

    a: np.ndarray
    b: np.ndarray
    r0: np.ndarray
    r1: np.ndarray
    period: int

    def listed(self) -> np.ndarray:
        """Its canonical byte runs, one per run and row (for sets known to be drawn). The sets
        made here hold one stretch of rows per distinct ``(r0, r1)``, stretches apart: listed
        row after row they come sorted, and only runs abutting across a row's end merge."""
        if self.a.size == 0:
            return fp.EMPTY
        order = np.lexsort((self.a, self.r0))
        a, b, r0, r1 = self.a[order], self.b[order], self.r0[order], self.r1[order]
        cut = np.flatnonzero(np.r_[True, (r0[1:] != r0[:-1]) | (r1[1:] != r1[:-1]), True])
        starts, stops = [], []
        for i, j in zip(cut[:-1].tolist(), cut[1:].tolist()):  # one stretch of rows at a time
            rows = np.arange(r0[i], r1[i], dtype=np.int64)[:, None] * self.period
            starts.append((rows + a[None, i:j]).ravel())
            stops.append((rows + b[None, i:j]).ravel())
        lo, hi = np.concatenate(starts), np.concatenate(stops)
        if lo.size > 1 and not bool(np.all(lo[1:] >= hi[:-1])):  # row ranges that interleave
            return fp.union(np.stack((lo, hi), axis=1))
        first = np.flatnonzero(np.r_[True, lo[1:] > hi[:-1]])  # sorted and disjoint: merge where they abut
        last = np.r_[first[1:] - 1, lo.size - 1]
        out = np.stack((lo[first], hi[last]), axis=1)
        out.flags.writeable = False
        return out

    def below(self, x: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
        """Bytes of the set below each ``x``: from its runs one per row, sorted, where listing
        them costs less than a division per run and ``x`` (and fits :data:`BELOW_LISTED`);
        else per run a division (nothing listed: a tower of millions of rows)."""
        x = np.asarray(x, dtype=np.int64)
        rows = int((self.r1 - self.r0).sum()) if self.a.size else 0
        if rows <= BELOW_LISTED and rows < self.a.size * x.size:
            out = self._below_listed(x, rows)
            if out is not None:
                return out
        return self._below_divided(x, chunk)

    def _below_listed(self, x: np.ndarray, rows: int) -> np.ndarray | None:
        """``below`` from every run's row copy: the bytes below ``x`` are, over the runs,
        ``(x - lo)+ - (x - hi)+``: two sorted columns, their prefix sums and a binary search
        each (exact in int64: None when the sums could pass it)."""
        if not rows:
            return np.zeros(x.shape, dtype=np.int64)
        per = self.r1 - self.r0
        k = np.repeat(np.arange(self.a.size), per)
        r = self.r0[k] + (np.arange(rows) - np.repeat(np.cumsum(per) - per, per))
        lo, hi = self.a[k] + r * self.period, self.b[k] + r * self.period
        base = int(lo.min())
        reach = max(int(hi.max()), int(x.max()) if x.size else base) - base
        if reach * (rows + 1) >= 1 << 62:
            return None
        lo, hi = np.sort(lo - base), np.sort(hi - base)
        y = np.clip(x - base, 0, reach)
        sum_lo, sum_hi = np.r_[0, np.cumsum(lo)], np.r_[0, np.cumsum(hi)]
        i, j = np.searchsorted(lo, y, side="right"), np.searchsorted(hi, y, side="right")
        return (i * y - sum_lo[i]) - (j * y - sum_hi[j])

    def _below_divided(self, x: np.ndarray, chunk: int) -> np.ndarray:
        """``below`` by a division per run and ``x`` (in chunks of ``chunk`` products)."""
        out = np.zeros(x.shape, dtype=np.int64)
        step = max(1, chunk // max(1, x.size))
        for at in range(0, self.a.size, step):
            a, b = self.a[at : at + step, None], self.b[at : at + step, None]
            r0, r1 = self.r0[at : at + step, None], self.r1[at : at + step, None]
            y = x[None, :] - r0 * self.period
            q = np.clip(np.floor_divide(y, self.period), 0, r1 - r0)  # whole rows below x
            part = np.where(q < r1 - r0, np.clip(y - q * self.period - a, 0, b - a), 0)
            out += (q * (b - a) + part).sum(axis=0)
        return out


def row_overlaps(period, owner, k0, k1, ra, rb, budget) -> tuple[RowRuns, dict[int, RowRuns]] | None:
    """Bytes read by two or more owners of part-runs (see :func:`_row_sweep`), and per owner
    its bytes another owner also reads, as :class:`RowRuns`; None past ``budget`` placed runs.

    >>> multi, mine = row_overlaps(10, np.array([0, 1]), np.array([0, 2]), np.array([4, 6]),
    ...                            np.array([0, 2]), np.array([4, 6]), 100)
    >>> multi.listed().tolist(), sorted(mine)
    ([[22, 24], [32, 34]], [0, 1])
    """
    placed = _place(period, owner, k0, k1, ra, rb, budget)
    if placed is None:
        return None
    lo, up, who, cuts = placed
    pos = np.concatenate((lo, up))
    step = np.concatenate((np.ones(lo.size, np.int64), -np.ones(up.size, np.int64)))
    order = np.lexsort((step, pos))  # a run's end before another's start at one position
    pos, depth = pos[order], np.cumsum(step[order])
    two = np.flatnonzero((depth[:-1] >= 2) & (pos[1:] > pos[:-1]))
    multi = fp.union(np.stack((pos[two], pos[two + 1]), axis=1))  # placed: never across stretches
    first = np.searchsorted(multi[:, 1], lo, side="right")  # multi runs ending after each run's start
    last = np.searchsorted(multi[:, 0], up, side="left")
    n = np.maximum(last - first, 0)
    k = np.repeat(np.arange(lo.size), n)
    j = first[k] + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    a, b = np.maximum(lo[k], multi[j, 0]), np.minimum(up[k], multi[j, 1])
    keep = b > a
    width = period + 1

    def rows_of(x0: np.ndarray, x1: np.ndarray) -> RowRuns:
        m = x0 // width
        return RowRuns(x0 - m * width, x1 - m * width, cuts[m], cuts[m + 1], period)

    mine: dict[int, RowRuns] = {}
    k, a, b = who[k[keep]], a[keep], b[keep]
    for o in np.unique(k).tolist():
        sel = k == o
        runs = fp.union(np.stack((a[sel], b[sel]), axis=1))
        mine[o] = rows_of(runs[:, 0], runs[:, 1])
    return rows_of(multi[:, 0], multi[:, 1]), mine


def row_union(period, owner, k0, k1, ra, rb, budget) -> RowRuns | None:
    """The bytes of part-runs (see :func:`_row_sweep`) as :class:`RowRuns`; None past
    ``budget`` placed runs.

    >>> u = row_union(10, np.array([0, 1]), np.array([0, 2]), np.array([4, 6]),
    ...               np.array([0, 2]), np.array([4, 6]), 100)
    >>> int(u.below(np.array([100]))[0])  # rows 0-1: 4 bytes, rows 2-3: 6, rows 4-5: 4
    28
    """
    placed = _place(period, owner, k0, k1, ra, rb, budget)
    if placed is None:
        return None
    lo, up, _, cuts = placed
    runs = fp.union(np.stack((lo, up), axis=1))  # placed: never across stretches
    m = runs[:, 0] // (period + 1)
    return RowRuns(runs[:, 0] - m * (period + 1), runs[:, 1] - m * (period + 1), cuts[m], cuts[m + 1], period)


def _row_sweep(period, hi, owner, k0, k1, ra, rb, budget):
    """Sweep part-runs (view ``owner[i]`` reads ``k * period + [ra[i], rb[i])`` for rows
    ``k0[i] <= k < k1[i]``) one row stretch at a time: the rows are cut wherever a part starts
    or stops, each part is placed once in every stretch it spans (stretch ``m`` at
    ``m * (period + 1)``, so stretches never touch) and the placed runs are swept like listed
    runs. Returns ``(links, links, bytes within [0, hi))``; None past ``budget`` placed runs."""
    placed = _place(period, owner, k0, k1, ra, rb, budget)
    if placed is None:
        return None
    lo, up, who, cuts = placed
    order = np.argsort(lo, kind="stable")
    lo, up, who = lo[order], up[order], who[order]
    rc, first = _clusters(lo, up)
    width = period + 1
    mc = lo[first] // width
    x0, x1 = lo[first] - mc * width, np.maximum.reduceat(up, first) - mc * width
    kn, rn = divmod(hi, period)  # the storage ends in row kn, rn bytes into it
    full = np.clip(np.minimum(cuts[mc + 1], kn) - cuts[mc], 0, None)
    cov = int(((x1 - x0) * full).sum())
    cut = (cuts[mc] <= kn) & (kn < cuts[mc + 1])
    cov += int(np.clip(np.minimum(x1[cut], rn) - x0[cut], 0, None).sum())
    head = who[first][rc]
    link = head != who
    return head[link], who[link], cov


def _tower_links(towered, runs, owner, sidx, nbytes, tower_of, covered, inexact):
    """Links and coverage for views whose footprints are towers, storage by storage: a tower
    meets a listed view where it holds bytes of that view's runs, another tower where their
    exact union is smaller than their sum. Nothing is listed run by run."""
    for s in np.unique(sidx[towered]).tolist():
        ts = towered[sidx[towered] == s]
        pieces = [tower_of(int(i)) for i in ts.tolist()]
        mine = sidx[owner] == s if owner.size else np.zeros(0, dtype=bool)
        r, o = runs[mine], owner[mine]
        listed = fp.union(r) if len(r) else fp.EMPTY
        u = periodic.Union([listed, *pieces])
        covered[s] += u.within(0, int(nbytes[s])) - fp.total(fp.clip(listed, 0, int(nbytes[s])))
        inexact[s] |= not u.exact
        for i, t in zip(ts.tolist(), pieces):
            if len(r):
                hit = np.unique(o[(t.below(r[:, 1]) - t.below(r[:, 0])) > 0])
                yield np.full(hit.size, i, dtype=np.int64), hit
        for k, (i, t) in enumerate(zip(ts.tolist(), pieces)):
            for j, other in zip(ts[k + 1 :].tolist(), pieces[k + 1 :]):
                shared, exact = periodic.intersection_nbytes(t, other)
                inexact[s] |= not exact
                if shared:
                    yield np.array([i]), np.array([j])


def min_roots(size: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected components of nodes ``0..size-1`` joined by edges ``a[k] -- b[k]``: per node,
    the smallest node of its component. Vectorised (hook each tree's root under the smallest
    label across its edges, then pointer-jump to the roots); every round at least halves the
    number of trees, so it takes O(log size) rounds of numpy work, never a Python loop per edge.

    >>> min_roots(6, np.array([5, 4, 1]), np.array([0, 2, 4])).tolist()
    [0, 1, 1, 3, 1, 0]
    """
    label = np.arange(size, dtype=np.int64)
    while True:
        la, lb = label[a], label[b]
        if np.array_equal(la, lb):
            return label
        low = np.minimum(la, lb)
        np.minimum.at(label, la, low)
        np.minimum.at(label, lb, low)
        while True:  # point every node at its root
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up


def components(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups of equal labels, ordered by their first member, members in index order.

    Returns ``(order, bounds)``: group ``g`` is ``order[bounds[g]:bounds[g + 1]]``.

    >>> order, bounds = components(np.array([7, 3, 7, 5, 3]))
    >>> [order[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    [[0, 2], [1, 4], [3]]
    """
    n = labels.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    order = np.argsort(labels, kind="stable")  # members of a label in index order
    sl = labels[order]
    starts = np.flatnonzero(np.r_[True, sl[1:] != sl[:-1]])
    firsts = order[starts]
    if (firsts[1:] > firsts[:-1]).all():  # labels already number groups by first member
        return order, np.r_[starts, n]
    size = np.diff(np.r_[starts, n])
    # Rank groups by first member, then lay each group's members out in that rank order.
    rank = np.empty(starts.size, dtype=np.int64)
    rank[np.argsort(firsts, kind="stable")] = np.arange(starts.size)
    key = np.repeat(rank, size)
    final = order[np.argsort(key, kind="stable")]
    bounds = np.r_[0, np.cumsum(size[np.argsort(rank)])]
    return final, bounds


def ranked(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`components` for labels that already number groups by first member (0, 1, 2...).

    >>> order, bounds = ranked(np.array([0, 1, 0, 2, 1]))
    >>> order.tolist(), bounds.tolist()
    ([0, 2, 1, 4, 3], [0, 2, 4, 5])
    """
    order = np.argsort(labels, kind="stable")
    bounds = np.zeros(1 + (int(labels.max()) + 1 if labels.size else 0), dtype=np.int64)
    np.cumsum(np.bincount(labels), out=bounds[1:])
    return order, bounds


def same_keys(*columns: np.ndarray) -> np.ndarray:
    """Labels equal exactly where every column is equal (a lexsort, not a row-wise unique).

    >>> same_keys(np.array([1, 2, 1, 1]), np.array([5, 5, 5, 6])).tolist()
    [0, 2, 0, 1]
    """
    n = columns[0].size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort(columns[::-1])
    change = np.zeros(n, dtype=bool)
    for c in columns:
        sc = c[order]
        change[1:] |= sc[1:] != sc[:-1]
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.cumsum(change)
    return labels
