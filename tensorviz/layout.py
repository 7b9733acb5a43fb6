"""Frozen layout facts: views, storages, groups and relations.

Pure Python + numpy; no torch. :mod:`tensorviz.collect` and :mod:`tensorviz.files` produce the
views and :class:`StorageInfo`; :class:`Layout` answers every question about them. A Layout keeps
its views as compact rows and builds the public records (:class:`TensorView`, :class:`Storage`,
:class:`Group`) on first use; expensive answers (footprints, coverage, overlap groups) are
computed once, vectorised over all storages (:mod:`tensorviz._sweep`), and cached. So
``analyze`` costs little more than reading the metadata.
"""

from __future__ import annotations

import difflib
import gc
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np

from . import footprint as fp
from ._sweep import components, same_keys, sweep
from ._units import format_bytes

__all__ = ["TensorView", "Storage", "StorageInfo", "Group", "Skipped", "Layout", "GroupBy", "RELATIONS"]

GroupBy = Literal["storage", "span", "overlap"]
_GROUPINGS = ("storage", "span", "overlap")
RELATIONS = ("identical", "same-bytes", "contains", "within", "overlaps", "disjoint", "unrelated")

StorageKey = tuple  # (device: str, identity: int | str)


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
    def _names(self) -> list[str]:
        return self._cached("names", lambda: [r[0] for r in self._rows])

    @property
    def _index(self) -> dict[str, int]:
        return self._cached("index", lambda: dict(zip(self._names, range(len(self._rows)))))

    @property
    def _skey(self) -> dict[StorageKey, int]:
        return self._cached("skey", lambda: {st[0]: i for i, st in enumerate(self._stores)})

    @property
    def _records(self) -> list[TensorView | None]:
        return self._cached("records", lambda: [None] * len(self._rows))

    @property
    def _full(self) -> list[tuple]:
        """Rows with storage index, start, Geometry and note: ``(name, s, dt, shape, stride,
        offset, start, geometry, note)``."""
        return self._cached("full", self._complete_rows)

    @property
    def _stores(self) -> tuple[tuple, ...]:
        """``(key, device, nbytes, label)`` per storage, in order of first appearance."""
        self._full
        return self._cache["stores"]

    def _complete_rows(self) -> list[tuple]:
        raw = self._raw
        geos, notes, labels = raw.geometries, raw.notes, raw.labels
        spos: dict[object, int] = {}
        devices: dict[object, str] = {}
        stores: list[tuple] = []
        out: list[tuple] = []
        append, make = out.append, fp.geometry
        for name, token, dev, nbytes, dt, shape, stride, offset, start in self._rows:
            s = spos.get(token)
            if s is None:
                s = spos[token] = len(stores)
                device = devices.get(dev) or devices.setdefault(dev, str(dev))
                key = token if type(token) is tuple else (device, token)
                stores.append((key, device, nbytes, labels.get(key, "") if labels else ""))
            geo = geos.get((shape, stride))
            if geo is None:
                geo = geos[(shape, stride)] = make(shape, stride)
            append((name, s, dt, shape, stride, offset, offset * dt[1] if start is None else start, geo, ""))
        for i, note in notes.items():
            out[i] = out[i][:8] + (note,)
        self._cache["stores"] = tuple(stores) + tuple(raw.extra)
        return out

    # -- basic access -------------------------------------------------------------------
    @property
    def views(self) -> tuple[TensorView, ...]:
        """Every view, in source order."""
        return self._cached("views", self._make_views)

    def _make_views(self) -> tuple[TensorView, ...]:
        records, full = self._records, self._full
        for i, v in enumerate(records):
            if v is None:
                records[i] = self._make_view(full[i])
        return tuple(records)

    def _view(self, i: int) -> TensorView:
        records = self._records
        v = records[i]
        if v is None:
            v = records[i] = self._make_view(self._full[i])
        return v

    def _make_view(self, row: tuple) -> TensorView:
        name, s, (dtype, itemsize), _, _, offset, start, geo, note = row
        key, device = self._stores[s][:2]
        return _record(TensorView, (
            name, key, device, dtype, geo.shape, geo.stride, offset, itemsize, start,
            start + geo.reach * itemsize, geo.numel * itemsize, geo.footprint * itemsize,
            geo.contiguous, geo.exact, note))

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
        cols = self._cache.get("columns")
        if cols is None:
            n, rows = len(self._rows), self._full
            start = np.fromiter((r[6] for r in rows), np.int64, n)
            reach = np.fromiter((r[7].reach * r[2][1] for r in rows), np.int64, n)
            cols = self._cache["columns"] = {
                "sidx": np.fromiter((r[1] for r in rows), np.int64, n),
                "start": start,
                "stop": start + reach,
                "dense": np.fromiter((r[7].dense for r in rows), bool, n),
                "exact": np.fromiter((r[7].exact for r in rows), bool, n),
                "nbytes": np.fromiter((st[2] for st in self._stores), np.int64, len(self._stores)),
            }
        return cols

    def _sweep(self):
        if "sweep" not in self._cache:
            c = self._columns()
            self._cache["sweep"] = sweep(c["sidx"], c["start"], c["stop"], c["dense"], c["nbytes"], self._runs_at)
        return self._cache["sweep"]

    def _runs_at(self, i: int) -> np.ndarray:
        row = self._full[i]
        return row[7].byte_runs(row[6], row[2][1])

    def _members(self) -> list[list[int]]:
        """View positions of each storage, in source order."""
        if "members" not in self._cache:
            order, bounds, _ = self._grouped("storage")
            order = order.tolist()
            members = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            members += [[] for _ in range(len(self._stores) - len(members))]  # storages with no views
            self._cache["members"] = members
        return self._cache["members"]

    def _grouped(self, by: str) -> tuple[np.ndarray, list[int], tuple[str, ...]]:
        """``(order, bounds, names in that order)``: group g is ``order[bounds[g]:bounds[g+1]]``,
        groups ordered by first member (for ``"storage"``: storage index order)."""
        key = ("grouped", by)
        if key not in self._cache:
            order, bounds = components(self._labels(by))
            names = self._names
            self._cache[key] = (order, bounds.tolist(), tuple([names[i] for i in order.tolist()]))
        return self._cache[key]

    # -- storages and coverage ----------------------------------------------------------
    @property
    def storages(self) -> tuple[Storage, ...]:
        """Every storage in order of first appearance, with its coverage."""
        return self._cached("storages", self._make_storages)

    def _make_storages(self) -> tuple[Storage, ...]:
        c = self._columns()
        covered = self._sweep().covered.tolist()
        _, bounds, sorted_names = self._grouped("storage")
        whole = c["dense"] & (c["start"] == 0) & (c["stop"] == c["nbytes"][c["sidx"]]) & (c["stop"] > 0)
        complete: dict[int, list[str]] = {}
        full, all_names = self._full, self._names
        for i in np.flatnonzero(whole).tolist():
            complete.setdefault(full[i][1], []).append(all_names[i])
        inexact = set(c["sidx"][~c["exact"]].tolist())
        bounds = bounds + [bounds[-1]] * (len(self._stores) + 1 - len(bounds))  # storages with no views
        new = object.__new__
        out = []
        for s, (key, device, nbytes, label) in enumerate(self._stores):
            # A frozen record filled directly (see _record): 60k storages are common.
            st = new(Storage)
            d = st.__dict__
            d["key"], d["index"], d["device"], d["nbytes"] = key, s, device, nbytes
            d["names"] = sorted_names[bounds[s]:bounds[s + 1]]
            d["covered_nbytes"], d["unreferenced_nbytes"] = covered[s], nbytes - covered[s]
            d["complete_names"] = tuple(complete[s]) if s in complete else ()
            d["label"], d["exact"] = label, s not in inexact
            out.append(st)
        return tuple(out)

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
            if not -len(self._stores) <= which < len(self._stores):
                raise IndexError(f"storage index {which} out of range: this layout has "
                                 f"{len(self._stores)} storages")
            return int(which) % len(self._stores)
        if isinstance(which, str):
            return self._full[self._position(which)][1]
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
        return fp.coverage(self._stores[s][2], runs).unreferenced()

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
        if not self._rows:
            return ()
        c = self._columns()
        order, bl, names = self._grouped(by)
        bounds = np.asarray(bl, dtype=np.int64)
        first, size = bounds[:-1], np.diff(bounds)
        start, stop = c["start"][order], c["stop"][order]
        live = stop > start
        big = np.iinfo(np.int64).max
        lo = np.minimum.reduceat(np.where(live, start, big), first)
        hi = np.maximum.reduceat(np.where(live, stop, -1), first)
        dead = hi < 0  # every member empty: the group sits at its first member's start
        lo[dead], hi[dead] = start[first][dead], start[first][dead]
        inexact = np.zeros(len(first), dtype=bool)
        if by == "overlap":
            bad = np.add.reduceat((~c["exact"][order]).astype(np.int64), first) > 0
            inexact = bad & (size > 1)
        stores = self._stores
        new = object.__new__
        out = []
        for a, b, s, l, h, x in zip(bl[:-1], bl[1:], c["sidx"][order[first]].tolist(), lo.tolist(),
                                    hi.tolist(), inexact.tolist()):
            g = new(Group)  # a frozen record filled directly (see _record)
            d = g.__dict__
            d["by"], d["names"], d["storage"], d["start"], d["stop"], d["exact"] = \
                by, names[a:b], stores[s][0], l, h, not x
            out.append(g)
        return tuple(out)

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
        return sum(r[7].numel * r[2][1] for r in self._full)

    @property
    def unique_nbytes(self) -> int:
        """Distinct bytes read by all views, over all storages."""
        return int(self._sweep().covered.sum())

    @property
    def storage_nbytes(self) -> int:
        """Sum of the storages' sizes: what ``torch.save`` writes."""
        return sum(st[2] for st in self._stores)

    def to_text(self, by: GroupBy = "storage", max_views: int = 12) -> str:
        """A plain-text summary: storages with their views and coverage, shared groups, skips."""
        from ._text import layout_text

        return layout_text(self, by=by, max_views=max_views)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        shared = len(self.shared("storage"))
        ns = len(self._stores)
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
