"""Groups of a :class:`~tensorviz.core.layout.Layout` (a mixin it inherits): by storage, by
exact span, or by real byte overlap, built from the layout's columns in one vectorised pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from tensorviz.core.records import GROUPINGS, Group, GroupBy, readonly
from tensorviz.core.sweep import same_keys
from tensorviz.core.table import slices_sharing, take

if TYPE_CHECKING:
    from tensorviz.core.sweep import Sweep
    from tensorviz.core.table import Table

_T = TypeVar("_T")


def _group_spans(start: np.ndarray, stop: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte range covered by the non-empty spans of each group (members laid out group by group,
    group ``g`` starting at ``first[g]``); a group of empty views sits at its first member's start."""
    live = stop > start
    lo = np.minimum.reduceat(np.where(live, start, np.iinfo(np.int64).max), first)
    hi = np.maximum.reduceat(np.where(live, stop, -1), first)
    dead = hi < 0
    lo[dead], hi[dead] = start[first][dead], start[first][dead]
    return lo, hi


class GroupFacts:
    """Groups and group lookups; mixed into :class:`Layout`."""

    __slots__ = ()

    if TYPE_CHECKING:  # what this mixin reads of Layout (tensorviz.core.layout); for the type checker only
        _cache: dict
        _rows: Sequence

        @property
        def _table(self) -> Table: ...
        @property
        def _names_array(self) -> np.ndarray: ...
        def _cached(self, key: object, make: Callable[[], _T]) -> _T: ...
        def _grouped(self, by: str) -> tuple[np.ndarray, np.ndarray]: ...
        def _position(self, name: str) -> int: ...
        def _sweep(self) -> Sweep: ...
        @property
        def _names(self) -> tuple[str, ...]: ...
        def _columns(self) -> dict[str, np.ndarray]: ...
        def _storage_names(self) -> list[tuple[str, ...]]: ...

    # -- groups -------------------------------------------------------------------------
    def groups(self, by: GroupBy = "storage") -> tuple[Group, ...]:
        """Views grouped by ``"storage"``, ``"span"`` (same storage, identical non-empty span) or
        ``"overlap"`` (connected by intersecting footprints), ordered by first member, names
        inside in source order.

        >>> import torch, tensorviz as tv
        >>> x = torch.zeros(4, 6)
        >>> [g.names for g in tv.analyze({"x": x, "e": x[:, ::2], "o": x[:, 1::2]}).groups("overlap")]
        [('x', 'e', 'o')]
        """
        if by not in GROUPINGS:
            raise ValueError(f"by must be one of {GROUPINGS}, got {by!r}")
        if ("groups", by) not in self._cache:
            self._group_columns(by)  # first, in a step of its own (see there)
        return self._cached(("groups", by), lambda: self._make_groups(by))

    def _labels(self, by: str) -> np.ndarray:
        c = self._columns()
        if by == "storage":
            return c["sidx"]
        if by == "overlap":
            return self._sweep().overlap
        n = len(self._names)
        empty = c["stop"] == c["start"]
        return np.where(empty, np.arange(n) + n, same_keys(c["sidx"], c["start"], c["stop"]))

    def _make_groups(self, by: str) -> tuple[Group, ...]:
        new = object.__new__
        out = []
        columns = self._cache.pop(("group columns", by), None) or self._make_group_columns(by)  # not kept twice
        for values in zip(repeat(by), *columns):
            g = new(Group)  # a frozen record filled directly (see records.record)
            d = g.__dict__
            d["by"], d["names"], d["storage"], d["start"], d["stop"], d["exact"] = values
            out.append(g)
        return tuple(out)

    def _group_columns(self, by: str) -> tuple[list, ...]:
        """Per group: names, storage key, start, stop, exact -- the facts, before any record.

        Computed (and cached) in a step of its own: the fresh tuples it makes (names, keys) are
        then walked once by the garbage collector, which untracks them, before the records
        that hold them are made; so the records' dicts stay untracked and cost no later walk.
        """
        return self._cached(("group columns", by), lambda: self._make_group_columns(by))

    def _make_group_columns(self, by: str) -> tuple[list, ...]:
        if not self._rows:
            return [], [], [], [], []
        t = self._table
        order, bounds = self._grouped(by)
        first = bounds[:-1]
        lo, hi = _group_spans(t.start[order], t.stop[order], first)
        exact = [True] * len(first)
        if by == "overlap":
            # A group joined through a footprint over the run budget may be too large.
            bad = np.add.reduceat((~t.exact[order]).astype(np.int64), first) > 0
            exact = (~(bad & (np.diff(bounds) > 1))).tolist()
        owner = t.sidx[order[first]]
        return (self._group_names(by, bounds, owner), take(t.keys, owner), lo.tolist(), hi.tolist(), exact)

    def _group_names(self, by: str, bounds: np.ndarray, owner: np.ndarray) -> list:
        """Names of each group; a group holding every view of its storage reuses that tuple."""
        snames = self._storage_names()
        if by == "storage":
            return snames[: len(bounds) - 1]
        shared = list(map(snames.__getitem__, owner.tolist()))
        whole = np.diff(bounds) == np.diff(self._grouped("storage")[1])[owner]
        if whole.all():
            return shared
        return slices_sharing(self._names_array, bounds, shared, whole, self._grouped(by)[0])

    def group_index(self, by: GroupBy = "storage") -> np.ndarray:
        """Per view (source order), the index of its group in :meth:`groups` -- without the
        group records (read-only int64 array).

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4)
        >>> tv.analyze({"a": torch.zeros(2), "w": w, "tied": w}).group_index("span").tolist()
        [0, 1, 1]
        """
        order, bounds = self.group_members(by)
        return self._cached(("group index", by), lambda: readonly(_inverse(order, bounds)))

    def group_members(self, by: GroupBy = "storage") -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: the views of group ``g`` of :meth:`groups` are at positions
        ``order[bounds[g]:bounds[g + 1]]`` (in source order) -- without the group records.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4)
        >>> [a.tolist() for a in tv.analyze({"a": torch.zeros(2), "w": w, "tied": w}).group_members("span")]
        [[0, 1, 2], [0, 1, 3]]
        """
        if by not in GROUPINGS:
            raise ValueError(f"by must be one of {GROUPINGS}, got {by!r}")
        order, bounds = self._grouped(by)
        return readonly(order), readonly(bounds)

    def group_sizes(self, by: GroupBy = "storage") -> np.ndarray:
        """Per group of :meth:`groups` (same order), its number of names (int64 array)."""
        return np.diff(self.group_members(by)[1])

    def shared(self, by: GroupBy = "storage") -> tuple[Group, ...]:
        """Only the groups with two or more names."""
        return tuple(g for g in self.groups(by) if len(g) > 1)

    def group_of(self, name: str, by: GroupBy = "storage") -> Group:
        """The group a view belongs to."""
        self._position(name)  # KeyError with suggestions
        lookup = self._cache.get(("group_of", by))
        if lookup is None:
            lookup = self._cache[("group_of", by)] = {n: g for g in self.groups(by) for n in g.names}
        return lookup[name]


def _inverse(order: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per member, the group it is in (group ``g`` is ``order[bounds[g]:bounds[g + 1]]``)."""
    out = np.empty(order.size, dtype=np.int64)
    out[order] = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    return out
