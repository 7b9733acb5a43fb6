"""Storages and coverage of a :class:`~tensorviz.core.layout.Layout` (a mixin it inherits).

Per storage: its views, the bytes they cover, the unreferenced rest and the views that read
every byte -- vectorised over all storages from the layout's columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core.records import SourceFacts, Storage, StorageKey, StorageStats, TensorView, readonly, record
from tensorviz.core.table import slices, slices_sharing, take

if TYPE_CHECKING:
    from tensorviz.core.sweep import Sweep
    from tensorviz.core.table import Table

_T = TypeVar("_T")

_NO_NAMES = np.empty(1, dtype=object)  # broadcasts () into object arrays (a bare () would not)
_NO_NAMES[0] = ()


class StorageFacts:
    """Storage records, coverage and lookups; mixed into :class:`Layout`."""

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
        def _nstores(self) -> int: ...
        @property
        def _skey(self) -> dict[StorageKey, int]: ...
        def _member_positions(self, s: int) -> np.ndarray: ...
        def _runs_at(self, i: int) -> np.ndarray: ...
        def _view(self, i: int) -> TensorView: ...
        @property
        def facts(self) -> SourceFacts: ...

    # -- storages and coverage ----------------------------------------------------------
    @property
    def storages(self) -> tuple[Storage, ...]:
        """Every storage in order of first appearance, with its coverage."""
        if "storages" not in self._cache:
            self._storage_columns()  # first, in a step of its own (see _group_columns)
        return self._cached("storages", self._make_storages)

    def _make_storages(self) -> tuple[Storage, ...]:
        new = object.__new__
        out = []
        columns = self._cache.pop("storage columns", None) or self._make_storage_columns()  # not kept twice
        whole = self.facts.whole_files
        for values in zip(self._table.keys, range(self._nstores), *columns):
            # A frozen record filled directly (see records.record): 60k storages are common.
            st = new(Storage)
            d = st.__dict__
            (
                d["key"],
                d["index"],
                d["device"],
                d["nbytes"],
                d["names"],
                d["covered_nbytes"],
                d["unreferenced_nbytes"],
                d["complete_names"],
                d["label"],
                d["exact"],
            ) = values
            if whole:  # else the class default: False
                d["whole_file"] = d["key"] in whole
            out.append(st)
        for key in [k for k in self._cache if type(k) is tuple and k[0] == "storage"]:
            out[key[1]] = self._cache.pop(key)  # a record made alone stays the one handed out
        return tuple(out)

    def _storage_columns(self) -> tuple[list, ...]:
        """Per storage: device, nbytes, names, covered, unreferenced, complete names, label and
        exact -- computed in a step of their own, like :meth:`_group_columns`."""
        return self._cached("storage columns", self._make_storage_columns)

    def _make_storage_columns(self) -> tuple[list, ...]:
        t = self._table
        sw = self._sweep()
        covered = sw.covered
        exact = np.ones(self._nstores, dtype=bool) if sw.inexact is None else ~sw.inexact
        exact[t.sidx[~t.exact]] = False
        return (
            t.devices,
            t.nbytes.tolist(),
            self._storage_names(),
            covered.tolist(),
            (t.nbytes - covered).tolist(),
            self._complete_names(),
            t.labels,
            exact.tolist(),
        )

    def _storage_names(self) -> list[tuple[str, ...]]:
        """Per storage, the names of its views in source order: one tuple each, shared by the
        Storage records and by every group that holds all of a storage's views."""
        if "snames" not in self._cache:
            order, bounds = self._grouped("storage")
            self._cache["snames"] = slices(self._names_array, bounds, order) + [()] * (self._nstores + 1 - len(bounds))
        return self._cache["snames"]

    def _complete_names(self) -> list[tuple[str, ...]]:
        """Per storage, the names (source order) of the views that read every byte of it."""
        t, ns = self._table, self._nstores
        if not self._rows:
            return [()] * ns
        order, bounds = self._grouped("storage")
        whole = (t.dense & (t.start == 0) & (t.stop == t.nbytes[t.sidx]) & (t.stop > 0))[order]
        size = np.diff(bounds)
        count = np.add.reduceat(whole.astype(np.int64), bounds[:-1])
        # Usually every view of a storage is whole (its names tuple is reused) or none is ('()').
        mixed = (count > 0) & (count < size)
        pick = np.flatnonzero(whole & np.repeat(mixed, size))
        wbounds = np.zeros(count.size + 1, dtype=np.int64)
        np.cumsum(np.where(mixed, count, 0), out=wbounds[1:])
        snames = self._storage_names()
        shared = np.fromiter(snames[: count.size], object, count.size)
        shared[count == 0] = _NO_NAMES
        complete = slices_sharing(tuple(take(self._names_array, order[pick])), wbounds, shared, ~mixed)
        return complete + [()] * (ns - count.size)

    def storage(self, which: str | StorageKey | int) -> Storage:
        """The storage of a view name, a storage key or a storage index.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(3, 4)
        >>> tv.analyze({"w": w, "row": w[1]}).storage("row").names
        ('w', 'row')
        """
        return self._storage_at(self._storage_pos(which))

    def _storage_at(self, s: int) -> Storage:
        """Storage record ``s``: from :attr:`storages` once they exist, else made alone (the
        same record; a diagram of 1M storages needs a few dozen, not all of them)."""
        made = self._cache.get("storages")
        if made is not None:
            return made[s]
        key = ("storage", s)
        found = self._cache.get(key)
        if found is None:  # a small record: no collector pause (a context manager per record)
            found = self._cache[key] = _storage_record(self, s)
        return found

    def _storage_pos(self, which: str | StorageKey | int) -> int:
        if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
            ns = self._nstores
            if not -ns <= which < ns:
                raise IndexError(f"storage index {which} out of range: this layout has {ns} storages")
            return int(which) % ns
        if isinstance(which, str):
            return int(self._table.sidx[self._position(which)])
        try:
            if not isinstance(which, tuple):  # keys are (device, identity) tuples
                raise KeyError(which)
            return self._skey[which]
        except (KeyError, TypeError):
            raise KeyError(
                f"no storage with key {which!r} in this layout; "
                f"use a view name, a storage index or one of layout.storages' keys"
            ) from None

    def storage_views(self, which: str | StorageKey | int) -> tuple[TensorView, ...]:
        """The views on one storage (by key, index or a view name), in source order."""
        return tuple(map(self._view, self._member_positions(self._storage_pos(which)).tolist()))

    def view_positions(self, which: str | StorageKey | int) -> np.ndarray:
        """Positions (indices into :attr:`views`) of the views on one storage, in source order."""
        return readonly(self._member_positions(self._storage_pos(which)))

    def unreferenced_runs(self, which: str | StorageKey | int) -> np.ndarray:
        """Byte runs of a storage (by key, index or a view name) that no view reads."""
        s = self._storage_pos(which)
        runs = [self._runs_at(i) for i in self._member_positions(s).tolist()]
        return fp.coverage(int(self._table.nbytes[s]), runs).unreferenced()

    def storage_stats(self) -> StorageStats:
        """Per storage (index order), numpy columns of the facts a picture of thousands of
        storages needs -- without a record per storage or per view (see :class:`StorageStats`).

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4, 4)
        >>> st = tv.analyze({"w": w, "col": w[:, 0], "v": torch.zeros(2)}).storage_stats()
        >>> st.views.tolist(), st.covered.tolist(), st.footprint_nbytes.tolist(), st.non_contiguous.tolist()
        ([2, 1], [64, 8], [80, 8], [1, 0])
        """
        return self._cached("storage stats", self._make_storage_stats)

    def _make_storage_stats(self) -> StorageStats:
        t, ns = self._table, self._nstores
        geos = t.geos
        footprint = np.fromiter((g.footprint for g in geos), np.int64, len(geos))[t.gid] * t.itemsize
        contiguous = np.fromiter((g.contiguous for g in geos), bool, len(geos))[t.gid]
        order, bounds = self._grouped("storage")
        total = np.zeros(ns, dtype=np.int64)
        if len(self._rows):
            live = np.flatnonzero(np.diff(bounds))
            total[live] = np.add.reduceat(footprint[order], bounds[:-1][live])
        columns = (
            t.nbytes,
            np.bincount(t.sidx, minlength=ns),
            self._sweep().covered,
            total,
            np.bincount(t.sidx[~contiguous], minlength=ns),
        )
        return StorageStats(*map(readonly, columns))

    def footprint_runs(self, name: str) -> np.ndarray:
        """Exact footprint of a view as byte runs (its span if the view is not ``exact``, or if it
        is a tower of more than :data:`~tensorviz.core.footprint.RUN_BUDGET` runs: measure
        those with :meth:`footprint_piece` and :meth:`union_nbytes`)."""
        return self._runs_at(self._position(name))


def _storage_record(layout, s: int) -> Storage:
    """The Storage record ``s`` alone, equal to ``layout.storages[s]``."""
    t = layout._table
    members = layout._member_positions(s)
    names = tuple(layout._names_array[members].tolist())
    nbytes = int(t.nbytes[s])
    whole = t.dense[members] & (t.start[members] == 0) & (t.stop[members] == nbytes) & (t.stop[members] > 0)
    complete = names if whole.all() and names else tuple(layout._names_array[members[whole]].tolist())
    covered = int(layout._sweep().covered[s])
    values = (t.key(s), s, t.devices[s], nbytes, names, covered, nbytes - covered, complete, t.labels[s])
    inexact = layout._sweep().inexact
    exact = bool(t.exact[members].all()) and not (inexact is not None and inexact[s])
    return record(Storage, (*values, exact, values[0] in layout.facts.whole_files))
