"""First reader wins: which of several footprints owns each byte, in one vectorised pass.

Pure numpy; used by :mod:`tensorviz.core.tree` for the overlap groups whose footprints have many
runs (64 column slices of one weight: 3.2 M runs). Every run end cuts the byte axis into
*elementary pieces*; a segment tree over the pieces takes each run as ``O(log m)`` nodes, keeps
per node the lowest rank (and the set of readers, as a bit mask, for groups of at most 64) and
pushes them down to the pieces. ``O(R log R)`` numpy work for ``R`` runs, never a pair of
footprints compared, never a union grown run set by run set.

Groups of more than 64 exact footprints (a flat ZeRO/FSDP1 buffer and its 100k views, an overlap
chain) go the same way without masks (:func:`_big`): a member's partners are every member
reading one of its pieces (from the listed (piece, reader) pairs), its first earlier partner
the least first reader over its pieces (a range minimum) -- exact, where the group as a whole
used to stand in for both. Groups with towers or inexact footprints go one by one.

>>> own, partners = first_reader([np.array([[0, 8]]), np.array([[4, 12]]), np.array([[20, 24]])])
>>> own.tolist(), partners
([8, 4, 4], [(1,), (0,), ()])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import periodic
from tensorviz.core import sweep as sw
from tensorviz.core.records import LayoutLike
from tensorviz.core.relations import nbytes_relation, record_relation

__all__ = ["first_reader", "meeting_pairs", "attribution", "Others"]

_NONE = np.iinfo(np.int64).max


def first_reader(
    footprints: Sequence[np.ndarray], masks: bool = True, scale: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[np.ndarray, list | None]:
    """Per footprint (canonical byte runs, in rank order), the bytes no earlier one reads; and,
    for at most 64 footprints when ``masks``, per footprint the indices of the others that share
    a byte with it (else None). ``scale``: bytes each position stands for (a
    :class:`~tensorviz.core.sweep.RowAxis`), 1 without it."""
    k = len(footprints)
    sizes = np.fromiter((len(f) for f in footprints), np.int64, k)
    runs = np.concatenate(footprints) if k else np.zeros((0, 2), np.int64)
    rank = np.repeat(np.arange(k, dtype=np.int64), sizes)
    edges, at = _ranked(runs.ravel())
    if edges.size < 2:
        return np.zeros(k, dtype=np.int64), ([() for _ in range(k)] if masks and k <= 64 else None)
    lo, hi = at[0::2], at[1::2]
    m = edges.size - 1
    first = _paint(lo, hi, rank, m, np.minimum, _NONE)
    length = np.diff(edges) if scale is None else np.diff(edges) * scale(edges[:-1])
    read = first != _NONE
    own = np.bincount(first[read], weights=length[read], minlength=k).astype(np.int64)
    if not (masks and k <= 64):
        return own, None
    bits = np.left_shift(np.uint64(1), rank.astype(np.uint64))
    seen = _distinct(_paint(lo, hi, bits, m, np.bitwise_or, np.uint64(0)))
    partners = []
    for i in range(k):
        b = np.uint64(1) << np.uint64(i)
        mask = int(np.bitwise_or.reduce(seen[(seen & b) != 0], initial=np.uint64(0))) & ~(1 << i)
        partners.append(tuple(j for j in range(k) if mask >> j & 1))
    return own, partners


def meeting_pairs(footprints: Sequence[np.ndarray], labels: Sequence[int]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` of footprints with different labels that share a byte: wherever bytes are
    read under two or more labels, the reader with the lowest ``(label, index)`` and the one
    with the highest. Every label boundary inside shared bytes shows, in ``O(R log R)``; not
    every pair (a byte read under labels 1, 2 and 3 gives the pair of 1 and 3).

    >>> meeting_pairs([np.array([[0, 8]]), np.array([[4, 12]]), np.array([[6, 7]])], [0, 0, 1])
    [(0, 2)]
    """
    k = len(footprints)
    sizes = np.fromiter((len(f) for f in footprints), np.int64, k)
    runs = np.concatenate(footprints) if k else np.zeros((0, 2), np.int64)
    edges, at = _ranked(runs.ravel())
    if edges.size < 2:
        return []
    key = np.repeat(np.asarray(labels, dtype=np.int64) * k + np.arange(k, dtype=np.int64), sizes)
    lo, hi, m = at[0::2], at[1::2], edges.size - 1
    low = _paint(lo, hi, key, m, np.minimum, _NONE)
    high = _paint(lo, hi, key, m, np.maximum, np.int64(-1))
    both = (low != _NONE) & (low // k != high // k)
    pairs = _distinct((low[both] % k) * k + high[both] % k)
    return [(min(p // k, p % k), max(p // k, p % k)) for p in pairs.tolist()]


def _ranked(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values of ``flat`` and each entry's index among them. One stable argsort
    (a merge of the footprints' already sorted runs), no binary search per run."""
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    new = np.r_[True, s[1:] != s[:-1]] if s.size else np.zeros(0, dtype=bool)
    at = np.empty(flat.size, dtype=np.int64)
    at[order] = np.cumsum(new) - 1
    return s[new], at


def _distinct(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, not numpy's hash-based unique: 10x faster on millions)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if a.size else a


def _paint(lo: np.ndarray, hi: np.ndarray, value: np.ndarray, m: int, op: np.ufunc, empty) -> np.ndarray:
    """Per elementary piece ``0..m-1``, ``op`` over the values of the ranges ``[lo, hi)`` that
    cover it (``empty`` where none does): a segment tree, filled level by level, pushed down."""
    size = 1 << max(int(m - 1).bit_length(), 0)
    tree = np.full(2 * size, empty, dtype=value.dtype)
    left, right, v = lo + size, hi + size, value
    while left.size:
        odd = (left & 1) == 1
        op.at(tree, left[odd], v[odd])
        left = left + odd
        odd = (right & 1) == 1
        right = right - odd
        op.at(tree, right[odd], v[odd])
        left, right = left >> 1, right >> 1
        keep = left < right
        left, right, v = left[keep], right[keep], v[keep]
    level = 1
    while level < size:
        parents = np.arange(level, 2 * level)
        for child in (2 * parents, 2 * parents + 1):
            tree[child] = op(tree[child], tree[parents])
        level *= 2
    return tree[size : size + m]


@dataclass(frozen=True)
class Painted:
    """The overlap groups attributed in one numpy pass (:func:`owners`), as columns: painted
    group ``g`` is ``groups[g]`` of the layout's overlap groups, its members the views
    ``members[first[g] : first[g] + size[g]]`` (source order; member ``k`` is bit ``k`` of a
    mask); per distinct ``(group, readers)`` an entry: its group ``gid``, the bit ``mask`` of
    the members reading those bytes and how many bytes ``nbytes``. The byte's owner is the
    mask's lowest bit (first reader wins)."""

    groups: np.ndarray
    members: np.ndarray
    first: np.ndarray
    size: np.ndarray
    gid: np.ndarray
    mask: np.ndarray
    nbytes: np.ndarray


@dataclass(frozen=True)
class Big:
    """The overlap groups of more than 64 exact footprints (no towers), attributed in one numpy
    pass without bit masks (:func:`_big`): group ``g`` is ``groups[g]`` of the layout's overlap
    groups, its members the views ``members[first[g] : first[g] + size[g]]`` (source order).
    The groups lie side by side on one byte axis cut into elementary pieces: per piece its
    ``length`` and its first reader ``reader`` (a member index; -1 for a gap). ``piece`` and
    ``member``: every (piece, member reading it) pair, by piece -- None where there would be
    more than :data:`BIG_PAIRS` of them."""

    groups: np.ndarray
    members: np.ndarray
    first: np.ndarray
    size: np.ndarray
    reader: np.ndarray
    length: np.ndarray
    piece: np.ndarray | None
    member: np.ndarray | None


#: The most byte runs a big group's footprints may have to be attributed in columns (64 column
#: slices of a 50k-row weight have 3.2M: the one-by-one path measures them as towers).
BIG_RUNS = 1 << 20

#: The most (piece, reader) pairs the big groups list for exact partners and shared bytes;
#: past it a big group's partners are the whole group (:class:`Others`) and the tree counts
#: its shared bytes name by name.
BIG_PAIRS = 1 << 23


@dataclass(frozen=True)
class Attribution:
    """Who owns which bytes (see :func:`owners`)."""

    own: list[int]  # per view, the bytes it owns (first reader wins)
    groups: Sequence[tuple[str, ...]]  # the overlap groups of two or more names
    partners: ByName  # per shared name, the names whose bytes intersect its own
    counted: ByName  # per name not owning all it reads, (relation, first earlier partner)
    distinct: Callable[[list[str]], int]  # the distinct bytes of some names of one group
    painted: Painted | None  # the groups attributed in one numpy pass, as columns
    rest: list[int]  # the groups attributed one by one (towers, inexact footprints)
    big: Big | None = None  # the groups of more than 64 exact footprints, as columns


def attribution(layout: LayoutLike) -> tuple[list[int], Sequence[tuple[str, ...]], Mapping, Mapping, Callable]:
    """Per view the bytes it owns (first reader wins); the overlap groups of two or more names;
    per shared name its partners (names whose bytes intersect its own); per name that does not
    own all it reads, ``(relation, first earlier partner)``; the distinct bytes of some names of
    one group, as a function (see :func:`owners`)."""
    a = owners(layout)
    return a.own, a.groups, a.partners, a.counted, a.distinct


def owners(layout: LayoutLike) -> Attribution:
    """First reader wins over every overlap group: groups of at most 64 exact footprints (ties,
    slices, strided views) in one numpy pass over all of them (:func:`_painted`), the rest (big
    groups, towers) one by one."""
    own = _footprint_nbytes(layout)
    pos = getattr(layout, "_index", None) or {n: i for i, n in enumerate(layout.names)}  # name -> position
    rows, sizes = _overlap_members(layout, pos)
    groups = _Groups(layout.names, rows, sizes)
    partners, counted = ByName(), ByName()
    runs: dict[str, _Runs] = {}
    owned: list[int] | np.ndarray
    partners.pos = counted.pos = pos
    partners.names = counted.names = layout.names
    painted = _painted(layout, rows, sizes, pos, own, partners, counted)
    big = _big(layout, rows, sizes, own, partners, counted)
    done = [x.groups for x in (painted, big) if x is not None]
    rest = np.setdiff1d(np.arange(len(groups)), np.concatenate(done) if done else []).tolist()
    axes: dict[str, sw.RowAxis] = {}  # a rest group's names -> its footprints in period space
    for g in rest:
        names = groups[g]
        axis = _rest_axis(layout, rows, int(groups.first[g]), int(sizes[g]))
        if axis is not None:
            owned, near = _rows_first(axis, rows[groups.first[g] : groups.first[g] + int(sizes[g])])
            axes.update(dict.fromkeys(names, axis))

            head = pos[names[0]]  # a group past 64 names: every name's first earlier partner
            inter = _rows_shared(axis, head)

            def relation(a: str, b: str, axis: sw.RowAxis = axis, head: int = head, inter: dict = inter) -> str:
                na, nb = layout[a].footprint_nbytes, layout[b].footprint_nbytes
                both = inter[pos[a]] if pos[b] == head else na + nb - _rows_union(axis, np.array([pos[a], pos[b]]))
                return nbytes_relation(both, na, nb)

            _attribute(layout, names, owned, near, pos, own, partners, counted, relation)
            continue
        pieces = [layout.footprint_piece(n) for n in names]
        if any(map(periodic.is_periodic, pieces)):
            owned, near = _towers_first(pieces)
        elif sum(len(p) for p in pieces) > _SMALL_GROUP:
            owned, near = first_reader(pieces)
        else:
            runs.update(zip(names, map(_Runs, pieces)))
            owned, near = _small_first([runs[n] for n in names])
        if (near is None or len(names) > 64) and not any(map(periodic.is_periodic, pieces)):
            near = _exact_partners(pieces)  # listed runs: every partner, however big the group
        _attribute(layout, names, owned, near, pos, own, partners, counted)

    def distinct(inside: list[str]) -> int:
        if len(inside) == 1:
            return layout[inside[0]].footprint_nbytes
        axis = axes.get(inside[0])
        if axis is not None and all(axes.get(n) is axis for n in inside):
            return _rows_union(axis, np.fromiter((pos[n] for n in inside), np.int64, len(inside)))
        if all(n in runs for n in inside):
            union = runs[inside[0]]
            for n in inside[1:]:
                union = union.union(runs[n])
            return union.total
        return layout.union_nbytes(inside)

    return Attribution(own, groups, partners, counted, distinct, painted, rest, big)


def _attribute(layout, names, owned, near, pos, own, partners, counted, relation=None) -> None:
    """Records one group's owned bytes, partners and ``counted`` (the first earlier partner,
    related by ``relation``, the layout's own by default)."""
    for name, o in zip(names, owned):
        own[pos[name]] = int(o)
    if near is None or len(near) != len(names):  # too many to list: the rest of the group
        partners.update({n: Others(names, k) for k, n in enumerate(names)})
    else:
        partners.update({n: tuple(names[j] for j in near[k]) for k, n in enumerate(names)})
    for name in names:
        earlier = next((p for p in partners[name] if pos[p] < pos[name]), None)  # stops at the first
        if earlier is not None and own[pos[name]] < layout[name].footprint_nbytes:
            rel = record_relation(layout[name], layout[earlier]) or (relation or layout.relation)(name, earlier)
            counted[name] = (rel, earlier)


def _axis_of(t, views: np.ndarray) -> sw.RowAxis | None:
    """The footprints of one group's views (positions, on one storage) in period space, where
    they are rows of one period with enough runs (see :func:`~tensorviz.core.sweep.row_axis`)."""
    exact = t.exact[views] & (t.stop[views] > t.start[views])
    tower = np.fromiter((t.geos[k].tower is not None for k in t.gid[views].tolist()), bool, views.size)
    if not exact.all() or tower.any():
        return None
    rows = fp.row_forms_many(t.geos, t.gid[views], t.itemsize[views])

    def runs_of(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return fp.byte_runs_many(t.geos, t.gid[at], t.start[at], t.itemsize[at], at)

    return sw.row_axis(views, rows, t.start, runs_of)


def _rest_axis(layout: LayoutLike, rows: np.ndarray, first: int, size: int) -> sw.RowAxis | None:
    t = getattr(layout, "_table", None)
    return None if t is None else _axis_of(t, rows[first : first + size])


def _rows_first(axis: sw.RowAxis, views: np.ndarray) -> tuple[np.ndarray, list | None]:
    """:func:`first_reader` over one group's footprints in period space (``views`` in rank order)."""
    rank = np.searchsorted(views, axis.owner)  # views ascending: a group's members in source order
    order = np.argsort(rank, kind="stable")
    cuts = np.searchsorted(rank[order], np.arange(views.size + 1))
    runs = axis.runs[order]
    pieces = [runs[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    owned, near = first_reader(pieces, scale=axis.scale)
    if near is None:  # past 64 names: partners from the (piece, reader) pairs in period space
        near = _exact_partners(pieces)
    return owned, near


def _rows_shared(axis: sw.RowAxis, head: int) -> dict[int, int]:
    """Per view of an axis, the bytes it shares with view ``head`` (one pass: each run's bytes
    inside ``head``'s runs, from their running sums)."""
    mine = fp.union(axis.runs[axis.owner == head])
    if not len(mine):
        return dict.fromkeys(np.unique(axis.owner).tolist(), 0)
    before = np.r_[0, np.cumsum((mine[:, 1] - mine[:, 0]) * axis.scale(mine[:, 0]))]

    def below(x: np.ndarray) -> np.ndarray:  # head's bytes (as storage bytes) below axis positions x
        k = np.searchsorted(mine[:, 1], x, side="right")  # head's runs wholly below x
        at = np.minimum(k, len(mine) - 1)
        inside = np.where(k < len(mine), np.clip(x - mine[at, 0], 0, None) * axis.scale(mine[at, 0]), 0)
        return before[k] + inside

    each = below(axis.runs[:, 1]) - below(axis.runs[:, 0])
    views, at = np.unique(axis.owner, return_inverse=True)
    sums = np.zeros(views.size, dtype=np.int64)
    np.add.at(sums, at.reshape(-1), each)
    return dict(zip(views.tolist(), sums.tolist()))


def _rows_union(axis: sw.RowAxis, views: np.ndarray) -> int:
    """Distinct bytes read by some of a group's views, from its footprints in period space."""
    runs = axis.runs[np.isin(axis.owner, views)]
    runs = runs[np.argsort(runs[:, 0], kind="stable")]
    if not len(runs):
        return 0
    top = np.maximum.accumulate(runs[:, 1])
    first = np.flatnonzero(np.r_[True, runs[1:, 0] >= top[:-1]])
    last = np.r_[first[1:] - 1, len(runs) - 1]
    lo, hi = runs[first, 0], top[last]  # stretches never touch: a merged run stays in one
    return int(((hi - lo) * axis.scale(lo)).sum())


def _overlap_members(layout: LayoutLike, pos: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The view positions of the overlap groups of two or more names, group after group, and
    each group's size: from the layout's member columns when it has them (no group records)."""
    members = getattr(layout, "group_members", None)
    if members is None:
        groups = [g.names for g in layout.shared("overlap")]
        sizes = np.fromiter(map(len, groups), np.int64, len(groups))
        return np.fromiter((pos[n] for names in groups for n in names), np.int64, int(sizes.sum())), sizes
    order, bounds = members("overlap")
    every = np.diff(bounds)
    return order[np.repeat(every > 1, every)], every[every > 1]


class _Groups(Sequence):
    """The overlap groups of two or more names, each a tuple of names made when read."""

    def __init__(self, names: Sequence[str], rows: np.ndarray, sizes: np.ndarray) -> None:
        self.names, self.rows, self.sizes = names, rows, sizes
        self.first = (np.cumsum(sizes) - sizes).tolist()

    def __len__(self) -> int:
        return len(self.first)

    def __getitem__(self, g):
        if isinstance(g, slice):
            return [self[k] for k in range(*g.indices(len(self)))]
        a = self.first[g]
        return tuple(self.names[p] for p in self.rows[a : a + int(self.sizes[g])].tolist())


#: Groups with more runs than this go to :func:`~tensorviz.core.attribution.first_reader`.
_SMALL_GROUP = 256


def _footprint_nbytes(layout: LayoutLike) -> list[int]:
    """Each view's footprint bytes, from the layout's columns when it has them."""
    t = getattr(layout, "_table", None)
    if t is None:
        return [v.footprint_nbytes for v in layout.views]
    return _footprints(t).tolist()


def _footprints(t) -> np.ndarray:
    """Per view of a layout's columns, its footprint bytes."""
    return np.fromiter((g.footprint for g in t.geos), np.int64, len(t.geos))[t.gid] * t.itemsize


def _painted(
    layout: LayoutLike,
    rows: np.ndarray,
    sizes: np.ndarray,
    pos: Mapping[str, int],
    own: list,
    partners: ByName,
    counted: ByName,
) -> Painted | None:
    """First reader wins for every group of at most 64 exact footprints (not towers) in one
    numpy pass: the groups are laid side by side on one byte axis and every elementary piece
    painted with the bit mask of its readers (see :func:`first_reader`); a piece belongs to
    the lowest bit. Fills ``own``, ``partners`` and ``counted`` for them as the per-group
    path would (tests/core/test_attribution.py, tests/core/test_tree_reference.py)."""
    t = getattr(layout, "_table", None)
    if t is None or not sizes.size:
        return None
    first, fine = _listed_groups(t, rows, sizes)
    ok = fine & (sizes <= 64)
    if not ok.any():
        return None
    keep = np.repeat(ok, sizes)
    members, size = rows[keep], sizes[ok]
    mfirst = np.cumsum(size) - size
    gid = np.repeat(np.arange(size.size), size)
    rank = np.arange(members.size) - mfirst[gid]
    runs, who, base, scale = _laid_out(t, members, mfirst, size, gid)
    edges, at = _ranked(runs.ravel())
    bits = np.left_shift(np.uint64(1), rank[who].astype(np.uint64))
    mask = _paint(at[0::2], at[1::2], bits, edges.size - 1, np.bitwise_or, np.uint64(0))
    read = mask != 0
    piece_gid = np.searchsorted(base, edges[:-1][read], side="right") - 1
    length = np.diff(edges)[read] if scale is None else np.diff(edges)[read] * scale(edges[:-1][read])
    key_g, key_m, length = _sum_by(piece_gid, mask[read], length)
    low = _lowest_bit(key_m)
    owned = np.bincount(mfirst[key_g] + low, weights=length, minlength=members.size).astype(np.int64)
    for p, o in zip(members.tolist(), owned.tolist()):
        own[p] = o
    near = _partner_masks(key_g, key_m, mfirst, members.size)
    near &= ~np.left_shift(np.uint64(1), rank.astype(np.uint64))
    names = layout.names
    member = np.full(len(names), -1, dtype=np.int64)
    member[members] = np.arange(members.size)
    painted = Painted(np.flatnonzero(ok), members, mfirst, size, key_g, key_m, length)
    partners.add(member, _Partners(names, members, mfirst[gid], near))
    counted.add(member, _counted(t, names, painted, gid, rank, near, own))
    return painted


def _laid_out(t, members: np.ndarray, mfirst: np.ndarray, size: np.ndarray, gid: np.ndarray) -> tuple:
    """The painted groups side by side on one axis: ``(runs, member of each run, each group's
    base, scale)``. A group whose footprints are rows of one period with many runs lies in
    period space (its :class:`~tensorviz.core.sweep.RowAxis`; ``scale`` says how many bytes
    each position stands for, None when every position is one byte), the others as listed."""
    start, stop = t.start[members], t.stop[members]
    lo = np.minimum.reduceat(start, mfirst)
    span = np.maximum.reduceat(stop, mfirst) - lo
    many = np.add.reduceat(fp.row_forms_many(t.geos, t.gid[members], t.itemsize[members]).nruns, mfirst)
    axes = {}
    for g in np.flatnonzero(many >= sw.PERIOD_MIN_RUNS).tolist():
        axis = _axis_of(t, members[mfirst[g] : mfirst[g] + size[g]])
        if axis is not None:
            axes[g] = axis
            span[g] = axis.span
    base = np.cumsum(span) - span  # group g's positions at [base[g], base[g] + span[g])
    listed = np.flatnonzero(~np.isin(gid, list(axes)))
    own_runs, who = fp.byte_runs_many(
        t.geos, t.gid[members[listed]], start[listed], t.itemsize[members[listed]], listed
    )
    runs, whose = [own_runs + (base - lo)[gid[who], None]], [who]
    if not axes:
        return runs[0], who, base, None
    for g, axis in axes.items():
        runs.append(axis.runs + base[g])
        whose.append(mfirst[g] + np.searchsorted(members[mfirst[g] : mfirst[g] + size[g]], axis.owner))
    keep = np.ones(base.size, dtype=bool)
    keep[list(axes)] = False
    at = [base[keep]] + [base[g] + np.arange(a.rows.size) * a.width for g, a in axes.items()]
    per = [np.ones(int(keep.sum()), np.int64)] + [a.rows for a in axes.values()]
    order = np.argsort(np.concatenate(at), kind="stable")
    at_sorted, per_sorted = np.concatenate(at)[order], np.concatenate(per)[order]

    def scale(x: np.ndarray) -> np.ndarray:
        return per_sorted[np.searchsorted(at_sorted, x, side="right") - 1]

    return np.concatenate(runs), np.concatenate(whose), base, scale


def _listed_groups(t: Any, rows: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each group's first member (``rows`` holds the groups one after another, ``sizes`` long)
    and whether all its footprints are exact, non-empty listed runs (no tower): the groups the
    column passes (:func:`_painted`, :func:`_big`) can attribute."""
    first = np.cumsum(sizes) - sizes
    tower = np.fromiter((g.tower is not None for g in t.geos), bool, len(t.geos))[t.gid[rows]]
    fine = t.exact[rows] & ~tower & (t.stop[rows] > t.start[rows])
    return first, np.logical_and.reduceat(fine, first)


def _big(
    layout: LayoutLike, rows: np.ndarray, sizes: np.ndarray, own: list, partners: ByName, counted: ByName
) -> Big | None:
    """First reader wins for every group of more than 64 exact footprints (not towers) in one
    numpy pass: the groups side by side on one byte axis, each elementary piece's first reader
    the least member index over the runs covering it (:func:`_paint`, a segment tree). A
    member's first earlier partner is the least first reader over its pieces (a range minimum);
    its partners, every member reading one of its pieces. Fills ``own``, ``partners`` and
    ``counted`` as the one-by-one path would, with exact partners."""
    t = getattr(layout, "_table", None)
    if t is None or not sizes.size:
        return None
    first, fine = _listed_groups(t, rows, sizes)
    nruns = np.fromiter((1 if g.runs is None else len(g.runs) for g in t.geos), np.int64, len(t.geos))[t.gid[rows]]
    total = np.add.reduceat(nruns, first)
    ok = fine & (sizes > 64) & (total <= BIG_RUNS)
    for g in np.flatnonzero(ok & (total >= sw.PERIOD_MIN_RUNS)).tolist():  # rows of one period: swept
        if _axis_of(t, rows[first[g] : first[g] + sizes[g]]) is not None:  # in period space, one by one
            ok[g] = False
    if not ok.any():
        return None
    members, size = rows[np.repeat(ok, sizes)], sizes[ok]
    mfirst = np.cumsum(size) - size
    gid = np.repeat(np.arange(size.size), size)
    start, stop = t.start[members], t.stop[members]
    lo = np.minimum.reduceat(start, mfirst)
    span = np.maximum.reduceat(stop, mfirst) - lo
    base = np.cumsum(span) - span
    runs, who = fp.byte_runs_many(t.geos, t.gid[members], start, t.itemsize[members], np.arange(members.size))
    edges, at = _ranked((runs + (base - lo)[gid[who], None]).ravel())
    a, b = at[0::2], at[1::2]
    reader = _paint(a, b, who, edges.size - 1, np.minimum, _NONE)
    length = np.diff(edges)
    read = reader != _NONE
    owned = np.bincount(reader[read], weights=length[read], minlength=members.size).astype(np.int64)
    for p, o in zip(members.tolist(), owned.tolist()):
        own[p] = o
    earliest = np.full(members.size, _NONE, dtype=np.int64)
    np.minimum.at(earliest, who, _range_min(reader, a, b))
    view_member = np.full(len(layout.names), -1, dtype=np.int64)
    view_member[members] = np.arange(members.size)
    counted.add(view_member, _big_counted(layout, t, members, earliest, owned))
    piece, member = _pairs(a, b, who)
    reader = np.where(read, reader, -1)
    if piece is None or member is None:
        partners.add(view_member, _BigOthers(layout.names, members, mfirst, gid))
    else:
        partners.add(view_member, _BigPartners(layout.names, members, piece, member, a, b, who, length.size))
    return Big(np.flatnonzero(ok), members, mfirst, size, reader, length, piece, member)


def _exact_partners(pieces: Sequence[np.ndarray]) -> list[tuple[int, ...]] | None:
    """Per footprint (canonical byte runs), the indices of the others sharing a byte with it;
    None past :data:`BIG_PAIRS` (piece, reader) pairs."""
    k = len(pieces)
    sizes = np.fromiter((len(p) for p in pieces), np.int64, k)
    who = np.repeat(np.arange(k, dtype=np.int64), sizes)
    edges, at = _ranked(np.concatenate(pieces).ravel() if k else np.zeros(0, np.int64))
    a, b = at[0::2], at[1::2]
    piece, member = _pairs(a, b, who)
    if piece is None or member is None:
        return None
    find = _BigPartners(range(k), np.arange(k), piece, member, a, b, who, max(edges.size - 1, 0))
    return [find(i) for i in range(k)]


def _range_min(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per range ``[lo, hi)`` (non-empty), the least of ``values`` over it: a segment tree,
    every range walked up at once (``O((m + R) log m)``, ``O(m)`` memory)."""
    size = 1 << max(int(values.size - 1).bit_length(), 0)
    tree = np.full(2 * size, _NONE, dtype=np.int64)
    tree[size : size + values.size] = values
    level = size // 2
    while level >= 1:
        parents = np.arange(level, 2 * level)
        tree[parents] = np.minimum(tree[2 * parents], tree[2 * parents + 1])
        level //= 2
    out = np.full(lo.size, _NONE, dtype=np.int64)
    left, right, at = lo + size, hi + size, np.arange(lo.size)
    while at.size:
        odd = (left & 1) == 1
        np.minimum.at(out, at[odd], tree[left[odd]])
        left = left + odd
        odd = (right & 1) == 1
        right = right - odd
        np.minimum.at(out, at[odd], tree[right[odd]])
        left, right = left >> 1, right >> 1
        keep = left < right
        left, right, at = left[keep], right[keep], at[keep]
    return out


def _pairs(a: np.ndarray, b: np.ndarray, who: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Every (piece, member) pair of the runs (run ``r`` covers pieces ``a[r]..b[r]-1``),
    sorted by piece; ``(None, None)`` past :data:`BIG_PAIRS`."""
    count = b - a
    total = int(count.sum())
    if total > BIG_PAIRS:
        return None, None
    offset = np.repeat(a - (np.cumsum(count) - count), count)
    piece = np.arange(total, dtype=np.int64) + offset
    member = np.repeat(who, count)
    order = np.argsort(piece, kind="stable")
    return piece[order], member[order]


def _big_counted(layout: LayoutLike, t: Any, members: np.ndarray, earliest: np.ndarray, owned: np.ndarray) -> _Counted:
    """``(relation, first earlier partner)`` of the big groups' members owning less than they
    read: identical and two gap-free blocks from the columns (as
    :func:`~tensorviz.core.relations.record_relation` settles them), any other pair by the layout."""
    idx = np.arange(members.size)
    fpn = _footprints(t)[members]
    k = np.flatnonzero((earliest < idx) & (owned < fpn))
    slot = np.full(members.size, -1, dtype=np.int64)
    slot[k] = np.arange(k.size)
    va, vb = members[k], members[earliest[k]]
    same = (t.start[va] == t.start[vb]) & (t.gid[va] == t.gid[vb]) & (t.did[va] == t.did[vb])
    dense = t.dense[va] & t.dense[vb]
    inter = np.minimum(t.stop[va], t.stop[vb]) - np.maximum(t.start[va], t.start[vb])
    na, nb = fpn[k], fpn[earliest[k]]
    words = np.select(
        [same, dense & (inter == na) & (inter == nb), dense & (inter == nb), dense & (inter == na), dense],
        [0, 1, 2, 3, 4],
        -1,
    )
    names = layout.names
    for j in np.flatnonzero(words < 0).tolist():  # footprints with gaps: the layout measures them
        words[j] = _RELATIONS.index(layout.relation(names[int(va[j])], names[int(vb[j])]))
    return _Counted(names, slot, words, vb)


class _BigPartners:
    """Big-group member ``k``'s partners: the members reading one of its pieces, in source
    order, made when asked for."""

    def __init__(
        self,
        names: Sequence[Any],
        members: np.ndarray,
        piece: np.ndarray,
        member: np.ndarray,
        a: np.ndarray,
        b: np.ndarray,
        who: np.ndarray,
        npieces: int,
    ) -> None:
        self.names, self.members, self.member, self.a, self.b = names, members, member, a, b
        self.cuts = np.searchsorted(piece, np.arange(npieces + 1))  # piece p's pairs: cuts[p]..cuts[p+1]
        self.runs = np.argsort(who, kind="stable")  # each member's runs, together
        self.run_cuts = np.searchsorted(who[self.runs], np.arange(members.size + 1))

    @cached_property
    def _every(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every member's partners as one sorted column with a cut per member, from the pairs
        of readers of each piece -- None when those would pass :data:`BIG_PAIRS` (a piece read
        by thousands): then each member's are found when asked."""
        count = np.diff(self.cuts)
        total = int((count * count).sum())
        if total > BIG_PAIRS:
            return None
        rep = np.repeat(count, count)  # per (piece, reader) pair: how many readers its piece has
        left = np.repeat(self.member, rep)
        first = np.repeat(np.repeat(self.cuts[:-1], count), rep)
        right = self.member[first + np.arange(total) - np.repeat(np.cumsum(rep) - rep, rep)]
        n = self.members.size
        key = _distinct((left * n + right)[left != right])
        return key % n, np.searchsorted(key // n, np.arange(n + 1))

    def __call__(self, k: int) -> tuple[Any, ...]:
        names, members = self.names, self.members
        if self._every is not None:  # every member's partners, made on the first ask
            near, cut = self._every
            return tuple(names[members[j]] for j in near[cut[k] : cut[k + 1]].tolist())
        runs = self.runs[self.run_cuts[k] : self.run_cuts[k + 1]]
        lo, hi = self.cuts[self.a[runs]], self.cuts[self.b[runs]]
        count = hi - lo
        at = np.arange(int(count.sum())) + np.repeat(lo - (np.cumsum(count) - count), count)
        near = _distinct(self.member[at])
        return tuple(names[members[j]] for j in near.tolist() if j != k)

    def keys(self) -> range:
        return range(self.members.size)


class _BigOthers:
    """Big-group member ``k``'s partners where the pairs were too many to list: the rest of its
    group (:class:`Others`)."""

    def __init__(self, names: Sequence[str], members: np.ndarray, mfirst: np.ndarray, gid: np.ndarray) -> None:
        self.names, self.members, self.mfirst, self.gid = names, members, mfirst, gid
        self.groups: dict[int, tuple[str, ...]] = {}

    def __call__(self, k: int) -> Others:
        g = int(self.gid[k])
        lo = int(self.mfirst[g])
        group = self.groups.get(g)
        if group is None:
            hi = int(self.mfirst[g + 1]) if g + 1 < self.mfirst.size else self.members.size
            group = self.groups[g] = tuple(self.names[j] for j in self.members[lo:hi].tolist())
        return Others(group, k - lo)

    def keys(self) -> range:
        return range(self.members.size)


def _sum_by(g: np.ndarray, m: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ``(g, m)`` pairs (sorted) and the sum of ``n`` over each."""
    order = np.lexsort((m, g))
    g, m, n = g[order], m[order], n[order]
    new = np.r_[True, (g[1:] != g[:-1]) | (m[1:] != m[:-1])] if g.size else np.zeros(0, bool)
    cut = np.flatnonzero(new)
    return g[cut], m[cut], np.add.reduceat(n, cut) if cut.size else n[:0]


def _lowest_bit(m: np.ndarray) -> np.ndarray:
    """The index of each mask's lowest set bit (masks non-zero)."""
    low = m & (~m + np.uint64(1))
    return np.log2(low.astype(np.float64)).astype(np.int64)  # powers of two are exact in float64


def _partner_masks(g: np.ndarray, m: np.ndarray, first: np.ndarray, n: int) -> np.ndarray:
    """Per member, the OR of the masks of the bytes it reads together with another member."""
    near = np.zeros(n, dtype=np.uint64)
    shared = (m & (m - np.uint64(1))) != 0
    g, m = g[shared], m[shared]
    for b in range(64):
        if not m.size:
            break
        hit = ((m >> np.uint64(b)) & np.uint64(1)) != 0
        np.bitwise_or.at(near, first[g[hit]] + b, m[hit])
        more = (m >> np.uint64(b + 1)) != 0
        g, m = g[more], m[more]
    return near


class _Partners:
    """Painted member ``k``'s partners: the names of the bits of ``near[k]`` (ascending:
    source order), made when asked for."""

    def __init__(self, names: Sequence[str], members: np.ndarray, first: np.ndarray, near: np.ndarray) -> None:
        self.names, self.members, self.first, self.near = names, members, first, near

    def __call__(self, k: int) -> tuple[str, ...]:
        m, base, names, members = int(self.near[k]), int(self.first[k]), self.names, self.members
        out = []
        while m:
            low = m & -m
            out.append(names[members[base + low.bit_length() - 1]])
            m ^= low
        return tuple(out)

    def keys(self) -> range:
        return range(self.members.size)


class _Counted:
    """``(relation, first earlier partner)`` of the painted members that own less than they
    read, made when asked for."""

    def __init__(self, names: Sequence[str], slot: np.ndarray, words: np.ndarray, earlier: np.ndarray) -> None:
        self.names, self.slot, self.words, self.earlier = names, slot, words, earlier

    def __call__(self, k: int) -> tuple[str, str] | None:
        j = int(self.slot[k])
        return None if j < 0 else (_RELATIONS[self.words[j]], self.names[self.earlier[j]])

    def keys(self) -> list[int]:
        return np.flatnonzero(self.slot >= 0).tolist()


_RELATIONS = ("identical", "same-bytes", "contains", "within", "overlaps")


class ByName(Mapping):
    """``name -> value`` for the names of the overlap groups: a dict for the groups attributed
    one by one, the column-attributed groups' values (painted, big) made from their columns on
    first read (no tuple per name for 100k names up front). Reads like a dict."""

    def __init__(self) -> None:
        self.known: dict = {}
        self.sources: list[tuple[np.ndarray, Any]] = []  # (per view its member index or -1, values)
        self.pos: Mapping[str, int] = {}
        self.names: Sequence[str] = ()

    def add(self, member: np.ndarray, values: Any) -> None:
        """Values made on read: ``values(k)`` for member ``k`` (``member``: per view, its member
        index or -1), None where a member has none; ``values.keys()`` the members that have one."""
        self.sources.append((member, values))

    def __setitem__(self, name: str, value: Any) -> None:
        self.known[name] = value

    def update(self, values: Mapping) -> None:
        self.known.update(values)

    def __getitem__(self, name: str) -> Any:
        if name in self.known:
            return self.known[name]
        i = self.pos.get(name) if self.sources else None
        for member, values in self.sources if i is not None else ():
            k = int(member[i])
            if k >= 0:
                value = values(k)
                if value is not None:
                    return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self.known
        for member, values in self.sources:
            views = np.empty(int(member.max()) + 1, dtype=np.int64)
            views[member[member >= 0]] = np.flatnonzero(member >= 0)
            for k in values.keys():
                yield self.names[int(views[k])]

    def __len__(self) -> int:
        return len(self.known) + sum(len(values.keys()) for _, values in self.sources)


def _counted(
    t: Any, names: Sequence[str], pt: Painted, gid: np.ndarray, rank: np.ndarray, near: np.ndarray, own: list
) -> _Counted:
    """``(relation, first earlier partner)`` of every member owning less than it reads: the
    relation from the records when they settle it (identical), else from the bytes both read
    (every footprint here is exact)."""
    one = np.uint64(1)
    before = near & (np.left_shift(one, rank.astype(np.uint64)) - one)
    fpn = _footprints(t)[pt.members]
    mine = np.asarray([own[p] for p in pt.members.tolist()], dtype=np.int64)
    k = np.flatnonzero((before != 0) & (mine < fpn))
    slot = np.full(pt.members.size, -1, dtype=np.int64)
    slot[k] = np.arange(k.size)
    e = pt.first[gid[k]] + _lowest_bit(before[k])
    both = np.left_shift(one, rank[k].astype(np.uint64)) | np.left_shift(one, rank[e].astype(np.uint64))
    cuts = np.searchsorted(pt.gid, np.arange(pt.size.size + 1))
    lo, hi = cuts[gid[k]], cuts[gid[k] + 1]
    idx = np.repeat(np.arange(k.size), hi - lo)
    ent = np.arange(idx.size) - np.repeat(np.cumsum(hi - lo) - (hi - lo), hi - lo) + np.repeat(lo, hi - lo)
    hit = (pt.mask[ent] & both[idx]) == both[idx]
    inter = np.bincount(idx[hit], weights=pt.nbytes[ent[hit]], minlength=k.size).astype(np.int64)
    a, b = pt.members[k], pt.members[e]
    na, nb = fpn[k], fpn[e]
    same = (t.start[a] == t.start[b]) & (t.gid[a] == t.gid[b]) & (t.did[a] == t.did[b])
    words = np.select([same, (inter == na) & (inter == nb), inter == nb, inter == na], [0, 1, 2, 3], 4)
    return _Counted(names, slot, words, b)


def _small_first(runs: list[_Runs]) -> tuple[list[int], list[tuple[int, ...]]]:
    """First reader wins over a few short run lists, in plain Python; partners pairwise."""
    own, seen = [], _Runs(fp.EMPTY)
    for r in runs:
        own.append(r.total - r.intersection(seen))
        seen = seen.union(r)
    if len(runs) > 64:
        return own, []
    return own, [tuple(j for j, q in enumerate(runs) if j != i and r.intersection(q)) for i, r in enumerate(runs)]


def _towers_first(pieces: list) -> tuple[list[int], list[tuple[int, ...]] | None]:
    """First reader wins where some footprints are towers: owned bytes from exact unions of the
    first k pieces (a group with a tower is a handful of views; no run is listed)."""
    own, before = [], 0
    for k in range(1, len(pieces) + 1):
        upto = periodic.Union(pieces[:k]).nbytes
        own.append(upto - before)
        before = upto
    if len(pieces) > 64:
        return own, None
    hits = [
        [j for j, q in enumerate(pieces) if j != i and periodic.intersection_nbytes(p, q)[0]]
        for i, p in enumerate(pieces)
    ]
    return own, [tuple(h) for h in hits]


class _Runs:
    """A footprint's byte runs, as a short Python list when small (most shared tensors: one
    run) -- numpy's per-call cost would dominate 100k tiny set operations -- else numpy."""

    __slots__ = ("runs", "small", "total")

    def __init__(self, runs: np.ndarray) -> None:
        self.small = len(runs) <= 32
        self.runs: list | np.ndarray = (
            [tuple(r) for r in runs.tolist()] if self.small and hasattr(runs, "tolist") else runs
        )
        self.total = sum(b - a for a, b in self.runs) if self.small else fp.total(np.asarray(self.runs))

    @classmethod
    def one(cls, a: int, b: int) -> _Runs:
        """The footprint of one run ``[a, b)``."""
        r = cls.__new__(cls)
        r.small, r.runs, r.total = True, [(a, b)], b - a
        return r

    def _array(self):
        return fp.as_runs(self.runs) if self.small else self.runs

    def intersection(self, other: _Runs) -> int:
        if not (self.small and other.small):
            return fp.intersection_nbytes(self._array(), other._array())
        return sum(max(0, min(b, d) - max(a, c)) for a, b in self.runs for c, d in other.runs)

    def union(self, other: _Runs) -> _Runs:
        if not (self.small and other.small) or len(self.runs) + len(other.runs) > 32:
            return _Runs(fp.union(self._array(), other._array()))
        out: list[list[int]] = []
        for a, b in sorted(self.runs + other.runs):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        merged = _Runs.__new__(_Runs)
        merged.small, merged.runs = True, [tuple(r) for r in out]
        merged.total = sum(b - a for a, b in out)
        return merged


class Others(Sequence):
    """The names of a group but one (``names[at]``), read from the group's own tuple: what a
    name of a large overlap group shares bytes with, in O(1) memory. Compares like a tuple.

    >>> o = Others(("a", "b", "c", "d"), 1)
    >>> len(o), o[0], o[1:], o == ("a", "c", "d")
    (3, 'a', ('c', 'd'), True)
    """

    __slots__ = ("names", "at")

    def __init__(self, names: tuple[str, ...], at: int) -> None:
        self.names, self.at = names, at

    def __len__(self) -> int:
        return len(self.names) - 1

    def __getitem__(self, k):
        if isinstance(k, slice):
            return tuple(self[i] for i in range(*k.indices(len(self))))
        if not -len(self) <= k < len(self):
            raise IndexError("partner index out of range")
        k %= len(self)
        return self.names[k if k < self.at else k + 1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (tuple, Others)) and len(self) == len(other) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Others({len(self)} names: {', '.join(map(repr, self[:3]))}, …)"
