"""Vectorised sort-and-sweep over the spans and footprints of many views at once.

Pure numpy; used by :class:`tensorviz.core.layout.Layout` for overlap groups and storage coverage.
Each storage's bytes are shifted to their own stretch of one global axis (``base[s] + byte``,
with a gap between storages), so one sort and one sweep handle every storage together and
nothing ever compares two storages. Never all pairs: ``O(n log n)`` in views plus runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import periodic

__all__ = ["Sweep", "sweep", "components", "ranked", "same_keys", "min_roots"]


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
        _refine(members, towers, sidx, base, nbytes, runs_of, tower_of, labels, covered, inexact, n)
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


def _refine(members, towers, sidx, base, nbytes, runs_of, tower_of, labels, covered, inexact, n) -> None:
    """Exact footprint sweep over the views of clusters that hold a non-dense view."""
    listed, towered = members[~towers], members[towers]
    a, b = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
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
    order = np.lexsort((np.arange(n), labels))
    sl = labels[order]
    starts = np.flatnonzero(np.r_[True, sl[1:] != sl[:-1]])
    firsts = order[starts]
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
