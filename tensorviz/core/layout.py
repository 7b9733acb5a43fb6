"""Frozen layout facts: views, storages, groups and relations.

Pure Python + numpy; no torch. :mod:`tensorviz.collect` and :mod:`tensorviz.files` produce the
views and :class:`StorageInfo`; :class:`Layout` answers every question about them. A Layout keeps
its views as compact rows and builds the public records (:class:`TensorView`, :class:`Storage`,
:class:`Group`) on first use; expensive answers (footprints, coverage, overlap groups) are
computed once from per-view numpy columns (:mod:`tensorviz._table`), vectorised over all
storages (:mod:`tensorviz._sweep`), and cached. So ``analyze`` costs little more than reading
the metadata, and the full exact answer for 100k views little more than making its records.
"""

from __future__ import annotations

import difflib
import gc
from contextlib import contextmanager
from dataclasses import dataclass, fields
from itertools import repeat
from operator import itemgetter, mul
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np

from . import footprint as fp
from ._sweep import components, ranked, same_keys, sweep
from ._table import Table, objects, slices, slices_sharing, take
from ._table import build as build_table
from ._units import format_bytes

__all__ = ["TensorView", "Storage", "StorageInfo", "Group", "Skipped", "Layout", "GroupBy", "RELATIONS"]

GroupBy = Literal["storage", "span", "overlap"]
_GROUPINGS = ("storage", "span", "overlap")
RELATIONS = ("identical", "same-bytes", "contains", "within", "overlaps", "disjoint", "unrelated")

StorageKey = tuple  # (device: str, identity: int | str)
_NAME = itemgetter(0)
_NO_NAMES = np.empty(1, dtype=object)  # broadcasts () into object arrays (a bare () would not)
_NO_NAMES[0] = ()


@dataclass(frozen=True)
class TensorView:
    """One named tensor reading a storage through (offset, shape, stride, dtype).

    ``start``/``stop`` is the span in bytes (from the start of the storage; for a safetensors
    file, from the start of the file). ``nbytes`` counts logical elements (numel * itemsize);
    ``footprint_nbytes`` counts the distinct bytes read (smaller for expanded views). ``exact``
    is False when the footprint has more blocks than :data:`tensorviz.footprint.RUN_BUDGET`:
    then the span stands in for it (an upper bound) and ``footprint_nbytes`` is the span size.
    """

    name: str
    storage: StorageKey
    device: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    itemsize: int
    start: int
    stop: int
    nbytes: int
    footprint_nbytes: int
    is_contiguous: bool
    exact: bool = True
    note: str = ""

    @property
    def numel(self) -> int:
        return self.nbytes // self.itemsize if self.itemsize else 0

    @property
    def is_empty(self) -> bool:
        return self.start == self.stop

    @property
    def is_dense(self) -> bool:
        """The footprint is the whole span: one gap-free block of bytes (and known exactly)."""
        return self.exact and not self.is_empty and self.footprint_nbytes == self.stop - self.start

    @property
    def is_expanded(self) -> bool:
        """Some element is read through more than one index (stride 0 or overlapping strides)."""
        return self.footprint_nbytes < self.nbytes

    def footprint(self) -> fp.Footprint:
        """The exact bytes this view reads (see :func:`tensorviz.footprint.footprint`)."""
        if self.is_dense:
            return fp.Footprint(_single(self.start, self.stop))
        return fp.footprint(self.start, self.shape, self.stride, self.itemsize)

    def footprint_runs(self) -> np.ndarray:
        """Sorted, merged, disjoint byte runs ``[[a0, b0], [a1, b1], ...]`` (int64, read-only)."""
        return self.footprint().runs

    def __repr__(self) -> str:
        shape = ", ".join(map(str, self.shape))
        flags = "" if self.is_contiguous else " non-contiguous"
        return (f"TensorView({self.name!r}, {self.dtype}[{shape}], stride={self.stride}, "
                f"offset={self.offset}, bytes=[{self.start}, {self.stop}){flags}, "
                f"storage={_key_text(self.storage)})")


def _group_spans(start: np.ndarray, stop: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte range covered by the non-empty spans of each group (members laid out group by group,
    group ``g`` starting at ``first[g]``); a group of empty views sits at its first member's start."""
    live = stop > start
    lo = np.minimum.reduceat(np.where(live, start, np.iinfo(np.int64).max), first)
    hi = np.maximum.reduceat(np.where(live, stop, -1), first)
    dead = hi < 0
    lo[dead], hi[dead] = start[first][dead], start[first][dead]
    return lo, hi


def _single(a: int, b: int) -> np.ndarray:
    runs = np.array([[a, b]], dtype=np.int64)
    runs.flags.writeable = False
    return runs


def _key_text(key: StorageKey) -> str:
    device, ident = key
    return f"{device}:{ident:#x}" if isinstance(ident, int) else f"{device}:{ident}"


@dataclass(frozen=True, slots=True)
class StorageInfo:
    """What a collector knows about a storage before layout: its key, device, size and label."""

    key: StorageKey
    device: str
    nbytes: int
    label: str = ""


@dataclass(frozen=True)
class Storage:
    """One storage and how its bytes are used by the views on it.

    ``covered_nbytes`` counts bytes read by at least one view, ``unreferenced_nbytes`` the rest
    (``torch.save`` writes them anyway), ``complete_names`` the views that read every byte.
    ``exact`` is False when a view's footprint was over the run budget (coverage is then an
    upper bound).
    """

    key: StorageKey
    index: int
    device: str
    nbytes: int
    names: tuple[str, ...]
    covered_nbytes: int
    unreferenced_nbytes: int
    complete_names: tuple[str, ...]
    label: str = ""
    exact: bool = True

    def __repr__(self) -> str:
        return (f"Storage(#{self.index} {self.label or self.device}, {format_bytes(self.nbytes)}, "
                f"{len(self.names)} view{'s' * (len(self.names) != 1)}, "
                f"unreferenced={format_bytes(self.unreferenced_nbytes)})")


@dataclass(frozen=True)
class Group:
    """Views grouped by one rule; ``start``/``stop`` is the byte range their spans cover.

    ``exact`` is False for an overlap group joined through a footprint over the run budget
    (its span stood in for its bytes, so the group may be too large).
    """

    by: str
    names: tuple[str, ...]
    storage: StorageKey
    start: int
    stop: int
    exact: bool = True

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __repr__(self) -> str:
        flag = "" if self.exact else ", inexact"
        return f"Group(by={self.by!r}, names={self.names}, bytes=[{self.start}, {self.stop}){flag})"


@dataclass(frozen=True)
class Skipped:
    """A value that could not be analysed, and why, in words a person understands."""

    name: str
    reason: str

    def __repr__(self) -> str:
        return f"Skipped({self.name!r}: {self.reason})"


class Rows:
    """The compact form a collector hands to :class:`Layout`: plain tuples, no records yet.

    ``rows`` holds one tuple per view: ``(name, storage token, device, storage nbytes,
    (dtype name, itemsize), shape, stride, offset in elements, start in bytes or None for
    offset * itemsize)``. The token is the storage id (an int; the key becomes ``(str(device),
    id)``) or the storage key itself (a tuple). ``labels`` names storages by key, ``extra``
    lists ``(key, device, nbytes, label)`` of storages no view reads, ``notes`` a note by row.
    Set ``unique`` to False when names may repeat (flattened nested containers). Building
    records for 100k views costs more than reading their metadata, so :class:`Layout` groups
    storages and derives geometries and records on first use.
    """

    __slots__ = ("rows", "notes", "labels", "extra", "geometries", "unique")

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.notes: dict[int, str] = {}
        self.labels: dict[StorageKey, str] = {}
        self.extra: list[tuple] = []
        self.geometries: dict[tuple, fp.Geometry] = {}
        self.unique = True

    def geometry(self, shape: Sequence[int], stride: Sequence[int]) -> fp.Geometry:
        """The shared :class:`~tensorviz.footprint.Geometry` of a shape and stride."""
        key = (shape, stride)
        geo = self.geometries.get(key)
        if geo is None:
            geo = self.geometries[key] = fp.geometry(shape, stride)
        return geo


class Layout:
    """Every named view of a set of tensors, grouped by the storage it reads.

    Immutable: all public attributes are tuples of frozen records; derived answers are cached.

    >>> import torch, tensorviz as tv
    >>> a = torch.rand(8, 10, 50); layout = tv.analyze({"a": a, "b": a[2:4], "c": a[4:6]})
    >>> layout["b"].start, layout["b"].stop, layout.relation("b", "c"), layout.relation("a", "b")
    (4000, 8000, 'disjoint', 'contains')
    """

    __slots__ = ("_rows", "_raw", "_skipped", "_source", "_metadata", "_cache")

    def __init__(self, views: Iterable[TensorView], storages: Iterable[StorageInfo],
                 skipped: Iterable[Skipped] = (), *, source: str = "", metadata: Mapping[str, object] | None = None):
        views = tuple(views)
        infos = {s.key: s for s in storages}
        rows = Rows()
        for i, v in enumerate(views):
            info = infos.get(v.storage)
            if info is None:
                raise ValueError(f"view {v.name!r} refers to storage {v.storage!r}, which has no StorageInfo")
            rows.rows.append((v.name, info.key, info.device, info.nbytes, (v.dtype, v.itemsize),
                              v.shape, v.stride, v.offset, v.start))
            if v.note:
                rows.notes[i] = v.note
        used = {v.storage for v in views}
        rows.labels = {key: info.label for key, info in infos.items() if info.label}
        # Storages with no views (possible for files) come last.
        rows.extra = [_store(info) for key, info in infos.items() if key not in used]
        self._setup(rows, tuple(skipped), source, metadata)
        if len(self._index) != len(views):
            dup = next(n for i, n in enumerate(self._names) if self._index[n] != i)
            raise ValueError(f"duplicate tensor name {dup!r}: every view needs a unique name")
        self._records[:] = views

    @classmethod
    def _from_rows(cls, rows: Rows, skipped: Iterable[Skipped] = (), *, source: str = "",
                   metadata: Mapping[str, object] | None = None) -> Layout:
        """Build from a collector's rows; a repeated name keeps its first row, the rest are skipped.

        Costs O(1) when ``rows.unique``: names, geometries and records are derived on first use.
        """
        self = cls.__new__(cls)
        self._setup(rows, tuple(skipped), source, metadata)
        if not rows.unique and len(self._index) != len(rows.rows):
            self._setup(*_drop_duplicates(rows, self._skipped), source, metadata)
        return self

    def _setup(self, rows: Rows, skipped: tuple, source: str, metadata: Mapping[str, object] | None) -> None:
        self._raw = rows
        self._rows = rows.rows
        self._skipped = skipped
        self._source = source
        self._metadata = dict(metadata or {})
        self._cache: dict = {}

    # -- derived on first use -----------------------------------------------------------
    def _cached(self, key: object, make):
        value = self._cache.get(key)
        if value is None:
            with gc_paused():
                value = self._cache[key] = make()
        return value

    @property
    def _names(self) -> tuple[str, ...]:
        return self._cached("names", lambda: tuple(map(_NAME, self._rows)))

    @property
    def _names_array(self) -> np.ndarray:
        return self._cached("names_array", lambda: objects(self._names))

    @property
    def _index(self) -> dict[str, int]:
        return self._cached("index", lambda: dict(zip(self._names, range(len(self._rows)))))

    @property
    def _skey(self) -> dict[StorageKey, int]:
        return self._cached("skey", lambda: dict(zip(self._table.keys, range(self._nstores))))

    @property
    def _records(self) -> list[TensorView | None]:
        return self._cached("records", lambda: [None] * len(self._rows))

    @property
    def _table(self) -> Table:
        """Columns of every view and storage (see :mod:`tensorviz._table`)."""
        raw = self._raw
        return self._cached("table", lambda: build_table(self._rows, raw.geometries, raw.labels, raw.extra))

    @property
    def _nstores(self) -> int:
        return len(self._table.keys)

    # -- basic access -------------------------------------------------------------------
    @property
    def views(self) -> tuple[TensorView, ...]:
        """Every view, in source order."""
        return self._cached("views", self._make_views)

    def _make_views(self) -> tuple[TensorView, ...]:
        t, records, rows, notes = self._table, self._records, self._rows, self._raw.notes
        keys, devices, geos = t.keys, t.devices, t.geos
        for i, s, g, start in zip(range(len(rows)), t.sidx.tolist(), t.gid.tolist(), t.start.tolist()):
            if records[i] is None:
                records[i] = _view_record(rows[i], keys[s], devices[s], geos[g], start, notes.get(i, ""))
        return tuple(records)

    def _view(self, i: int) -> TensorView:
        records = self._records
        v = records[i]
        if v is None:
            t = self._table
            s = int(t.sidx[i])
            v = records[i] = _view_record(self._rows[i], t.keys[s], t.devices[s], t.geos[t.gid[i]],
                                          int(t.start[i]), self._raw.notes.get(i, ""))
        return v

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return self._skipped

    @property
    def source(self) -> str:
        """A short description of what was analysed (a type or a path)."""
        return self._source

    @property
    def metadata(self) -> dict[str, object]:
        """Extra facts from the source (a safetensors ``__metadata__``, checkpoint wrapper keys...)."""
        return dict(self._metadata)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[TensorView]:
        return iter(self.views)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> TensorView:
        return self._view(self._position(name))

    def _position(self, name: str) -> int:
        try:
            return self._index[name]
        except (KeyError, TypeError):
            close = difflib.get_close_matches(str(name), self._names, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"no tensor named {name!r} in this layout ({len(self)} tensors){hint}") from None

    # -- columns for the vectorised answers ----------------------------------------------
    def _columns(self) -> dict[str, np.ndarray]:
        t = self._table
        return {"sidx": t.sidx, "start": t.start, "stop": t.stop, "dense": t.dense, "exact": t.exact,
                "nbytes": t.nbytes}

    def _sweep(self):
        if "sweep" not in self._cache:
            t = self._table
            self._cache["sweep"] = sweep(t.sidx, t.start, t.stop, t.dense, t.nbytes, self._runs_of)
        return self._cache["sweep"]

    def _runs_at(self, i: int) -> np.ndarray:
        t = self._table
        return t.geos[t.gid[i]].byte_runs(int(t.start[i]), int(t.itemsize[i]))

    def _runs_of(self, views: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Footprint runs of many views at once: ``(runs (k, 2), owner view of each run)``."""
        t = self._table
        return fp.byte_runs_many(t.geos, t.gid[views], t.start[views], t.itemsize[views], views)

    def _members(self) -> list[list[int]]:
        """View positions of each storage, in source order."""
        if "members" not in self._cache:
            order, bounds = self._grouped("storage")
            order, bounds = order.tolist(), bounds.tolist()
            members = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            members += [[] for _ in range(self._nstores - len(members))]  # storages with no views
            self._cache["members"] = members
        return self._cache["members"]

    def _grouped(self, by: str) -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: group g is ``order[bounds[g]:bounds[g+1]]``, groups ordered by
        first member (for ``"storage"``: storage index order)."""
        key = ("grouped", by)
        if key not in self._cache:
            # Storage indices already number storages by first appearance: a stable sort suffices.
            self._cache[key] = ranked(self._table.sidx) if by == "storage" else components(self._labels(by))
        return self._cache[key]


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
            # A frozen record filled directly (see _record): 60k storages are common.
            st = new(Storage)
            d = st.__dict__
            (d["key"], d["index"], d["device"], d["nbytes"], d["names"], d["covered_nbytes"],
             d["unreferenced_nbytes"], d["complete_names"], d["label"], d["exact"]) = values
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
        return (t.devices, t.nbytes.tolist(), self._storage_names(), covered.tolist(),
                (t.nbytes - covered).tolist(), self._complete_names(), t.labels, exact.tolist())

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
        shared = np.fromiter(snames[:count.size], object, count.size)
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
            raise KeyError(f"no storage with key {which!r} in this layout; "
                           f"use a view name, a storage index or one of layout.storages' keys") from None

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
        if by not in _GROUPINGS:
            raise ValueError(f"by must be one of {_GROUPINGS}, got {by!r}")
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
            g = new(Group)  # a frozen record filled directly (see _record)
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
        return (self._group_names(by, bounds, owner), take(t.keys, owner), lo.tolist(), hi.tolist(),
                exact)

    def _group_names(self, by: str, bounds: np.ndarray, owner: np.ndarray) -> list:
        """Names of each group; a group holding every view of its storage reuses that tuple."""
        snames = self._storage_names()
        if by == "storage":
            return snames[:len(bounds) - 1]
        shared = list(map(snames.__getitem__, owner.tolist()))
        whole = np.diff(bounds) == np.diff(self._grouped("storage")[1])[owner]
        if whole.all():
            return shared
        return slices_sharing(self._names_array, bounds, shared, whole, self._grouped(by)[0])

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

    # -- relations ----------------------------------------------------------------------
    def relation(self, a: str, b: str) -> str:
        """How two views relate: one of :data:`RELATIONS`.

        ``identical`` (same storage, byte offset, shape, stride, dtype; non-empty),
        ``same-bytes`` (equal footprints otherwise), ``contains``/``within`` (one footprint
        strictly inside the other), ``overlaps``, ``disjoint`` (same storage, no common byte --
        always so when either is empty), ``unrelated`` (different storages).

        When a footprint is over the run budget (``exact=False``) its span stands in for it:
        ``unrelated``, ``identical`` and ``disjoint`` stay exact, ``contains``/``within`` are
        only claimed when proven, and anything else is reported as ``overlaps``.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(3, 4)
        >>> tv.analyze({"w": w, "t": w.t(), "row": w[1]}).relation("row", "t")
        'within'
        """
        va, vb = self[a], self[b]
        if va.storage != vb.storage:
            return "unrelated"
        if va.is_empty or vb.is_empty:
            return "disjoint"
        if (va.start, va.shape, va.stride, va.dtype) == (vb.start, vb.shape, vb.stride, vb.dtype):
            return "identical"
        if va.stop <= vb.start or vb.stop <= va.start:
            return "disjoint"
        ra, rb = self.footprint_runs(a), self.footprint_runs(b)
        inter = fp.intersection_nbytes(ra, rb)
        if inter == 0:
            return "disjoint"
        return _compare(inter, fp.total(ra), va.exact, fp.total(rb), vb.exact)

    def overlap_nbytes(self, a: str, b: str) -> int:
        """Bytes read by both views (0 for different storages)."""
        va, vb = self[a], self[b]
        if va.storage != vb.storage:
            return 0
        return fp.intersection_nbytes(self.footprint_runs(a), self.footprint_runs(b))

    # -- totals and text ----------------------------------------------------------------
    @property
    def naive_nbytes(self) -> int:
        """Sum of every view's logical size: what a saver that copies each name would write."""
        t = self._table
        numel = [g.numel for g in t.geos]
        return sum(map(mul, map(numel.__getitem__, t.gid.tolist()), t.itemsize.tolist()))

    @property
    def unique_nbytes(self) -> int:
        """Distinct bytes read by all views, over all storages."""
        return int(self._sweep().covered.sum())

    @property
    def storage_nbytes(self) -> int:
        """Sum of the storages' sizes: what ``torch.save`` writes."""
        return sum(self._table.nbytes.tolist())

    def to_text(self, by: GroupBy = "storage", max_views: int = 12) -> str:
        """A plain-text summary: storages with their views and coverage, shared groups, skips."""
        from ._text import layout_text

        return layout_text(self, by=by, max_views=max_views)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        shared = len(self.shared("storage"))
        ns = self._nstores
        return (f"<Layout {len(self)} tensor{'s' * (len(self) != 1)} on {ns} storage{'s' * (ns != 1)}, "
                f"{shared} shared, {len(self._skipped)} skipped>")

    # -- rich display (implemented in the renderers, imported lazily) -------------------
    def _repr_mimebundle_(self, include=None, exclude=None):
        from .show import show

        return show(self)._repr_mimebundle_(include=include, exclude=exclude)

    def plot(self, by: GroupBy = "storage", **options):
        """A matplotlib Figure of this layout (see :func:`tensorviz.diagram`)."""
        from .diagram import diagram
        from .render.mpl import render

        return render(diagram(self, by=by, **options))

    def save_check(self, **options):
        """What each installed saver would do with these views (see :func:`tensorviz.save_check`)."""
        from .saving import save_check

        return save_check(self, **options)


def as_layout(obj: Any) -> "Layout":
    """``obj`` itself when it is a :class:`Layout`, else ``tensorviz.analyze(obj)``."""
    if isinstance(obj, Layout):
        return obj
    from . import analyze

    return analyze(obj)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small records.

    They are acyclic, but each few hundred allocations would trigger a collection pass, and
    passes reach every live object of the caller (100k tensors and their containers) -- that
    costs more than the work itself. Re-entrant; restores the collector's previous state.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


_FIELDS: dict[type, tuple[str, ...]] = {}


def _record(cls: type, values: tuple) -> object:
    """A frozen dataclass record built without its generated ``__init__``.

    That ``__init__`` calls ``object.__setattr__`` once per field, which is most of the cost of
    a layout of 100k views. This fills the instance ``__dict__`` in one step instead; ``values``
    must list every field in declaration order (the tests compare against ``cls(*values)``).
    """
    obj = object.__new__(cls)
    obj.__dict__.update(zip(_FIELDS.get(cls) or _field_names(cls), values))
    return obj


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


def _view_record(row: tuple, key: StorageKey, device: str, geo: fp.Geometry, start: int, note: str) -> TensorView:
    """The TensorView of a collector row, given its storage and Geometry."""
    name, offset, (dtype, itemsize) = row[0], row[7], row[4]
    return _record(TensorView, (
        name, key, device, dtype, geo.shape, geo.stride, offset, itemsize, start,
        start + geo.reach * itemsize, geo.numel * itemsize, geo.footprint * itemsize,
        geo.contiguous, geo.exact, note))


def _store(info: StorageInfo) -> tuple:
    return (info.key, info.device, info.nbytes, info.label)


def _drop_duplicates(rows: Rows, skipped: tuple) -> tuple[Rows, tuple]:
    """Rows keeping each name's first row only; the rest become Skipped."""
    out, seen, extra = Rows(), set(), []
    for i, row in enumerate(rows.rows):
        if row[0] in seen:
            extra.append(Skipped(row[0], "duplicate name: an earlier value already has this name"))
            continue
        seen.add(row[0])
        if i in rows.notes:
            out.notes[len(out.rows)] = rows.notes[i]
        out.rows.append(row)
    out.labels, out.extra, out.geometries = rows.labels, rows.extra, rows.geometries
    return out, skipped + tuple(extra)


def _compare(inter: int, na: int, exact_a: bool, nb: int, exact_b: bool) -> str:
    """Relation of two intersecting footprints of ``na`` and ``nb`` bytes sharing ``inter``.

    An inexact footprint is an upper bound, so its byte count and the intersection are too.
    """
    if exact_a and exact_b:
        if inter == na == nb:
            return "same-bytes"
        if inter == nb:
            return "contains"
        return "within" if inter == na else "overlaps"
    # b lies inside its bound, and the bound inside a: proven; strict when the bound is smaller.
    if exact_a and inter == nb < na:
        return "contains"
    if exact_b and inter == na < nb:
        return "within"
    return "overlaps"
