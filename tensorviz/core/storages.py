"""Storages and coverage of a :class:`~tensorviz.core.layout.Layout` (a mixin it inherits).

Per storage: its views, the bytes they cover, the unreferenced rest and the views that read
every byte -- vectorised over all storages from the layout's columns.
"""

from __future__ import annotations

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core.records import Storage, StorageKey, TensorView
from tensorviz.core.table import slices, slices_sharing, take

_NO_NAMES = np.empty(1, dtype=object)  # broadcasts () into object arrays (a bare () would not)
_NO_NAMES[0] = ()


class StorageFacts:
    """Storage records, coverage and lookups; mixed into :class:`Layout`."""

    __slots__ = ()

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
            out.append(st)
        return tuple(out)

    def _storage_columns(self) -> tuple[list, ...]:
        """Per storage: device, nbytes, names, covered, unreferenced, complete names, label and
        exact -- computed in a step of their own, like :meth:`_group_columns`."""
        return self._cached("storage columns", self._make_storage_columns)

    def _make_storage_columns(self) -> tuple[list, ...]:
        t = self._table
        covered = self._sweep().covered
        exact = np.ones(self._nstores, dtype=bool)
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
        return self.storages[self._storage_pos(which)]

    def _storage_pos(self, which: str | StorageKey | int) -> int:
        if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
            ns = self._nstores
            if not -ns <= which < ns:
                raise IndexError(f"storage index {which} out of range: this layout has {ns} storages")
            return int(which) % ns
        if isinstance(which, str):
            return int(self._table.sidx[self._position(which)])
        try:
            return self._skey[which]
        except (KeyError, TypeError):
            raise KeyError(
                f"no storage with key {which!r} in this layout; "
                f"use a view name, a storage index or one of layout.storages' keys"
            ) from None

    def storage_views(self, which: str | StorageKey | int) -> tuple[TensorView, ...]:
        """The views on one storage (by key, index or a view name), in source order."""
        return tuple(self._view(i) for i in self._members()[self._storage_pos(which)])

    def unreferenced_runs(self, which: str | StorageKey | int) -> np.ndarray:
        """Byte runs of a storage (by key, index or a view name) that no view reads."""
        s = self._storage_pos(which)
        runs = [self._runs_at(i) for i in self._members()[s]]
        return fp.coverage(int(self._table.nbytes[s]), runs).unreferenced()

    def footprint_runs(self, name: str) -> np.ndarray:
        """Exact footprint of a view as byte runs (its span if the view is not ``exact``)."""
        return self._runs_at(self._position(name))
