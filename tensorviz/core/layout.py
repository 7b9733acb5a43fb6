"""The Layout: every named view of a set of tensors, and every answer about them.

Pure Python + numpy; no torch. Sources (:mod:`tensorviz.sources`) produce :class:`Rows`;
:class:`Layout` answers every question about them. A Layout keeps its views as compact rows and
builds the public records (:mod:`tensorviz.core.records`) on first use; expensive answers
(footprints, coverage, overlap groups) are computed once from per-view numpy columns
(:mod:`tensorviz.core.table`), vectorised over all storages (:mod:`tensorviz.core.sweep`), and
cached. The Layout is one class over its :class:`~tensorviz.core.table.Table`: storages,
groups and relations are plain functions of that table (:mod:`tensorviz.core.storages`,
:mod:`tensorviz.core.groups`, :mod:`tensorviz.core.relations`) that the Layout calls with their
inputs and caches by one idiom, :meth:`Layout._cached`. Drawing and save checks are reached
through :mod:`tensorviz.core.hooks`, which the package facade wires to the upper layers.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter, mul
from typing import Any, TypeVar, cast

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import groups as gr
from tensorviz.core import hooks, periodic
from tensorviz.core import relations as rel
from tensorviz.core import storages as st
from tensorviz.core.facts import plain
from tensorviz.core.records import (
    RELATIONS,
    Group,
    GroupBy,
    Skipped,
    SourceFacts,
    Storage,
    StorageInfo,
    StorageKey,
    StorageStats,
    TensorView,
    ViewSpans,
    readonly,
    view_record,
)
from tensorviz.core.rows import Field, Rows, drop_duplicates, gc_paused, store
from tensorviz.core.sweep import Sweep, components, ranked, sweep
from tensorviz.core.table import Table, beyond_int64, byte_limit_error, objects
from tensorviz.core.table import build as build_table
from tensorviz.core.table import derive as derive_table
from tensorviz.core.text import compact_text, fits_screen, layout_text
from tensorviz.core.tree import ModelTree, model_tree

__all__ = ["Layout", "RELATIONS", "as_layout"]

_NAME = itemgetter(Field.NAME)
_T = TypeVar("_T")


class Layout:
    """Every named view of a set of tensors, grouped by the storage it reads.

    Immutable: all public attributes are tuples of frozen records; derived answers are cached
    (each once, by :meth:`_cached`).

    >>> import torch, tensorviz as tv
    >>> a = torch.rand(8, 10, 50); layout = tv.analyze({"a": a, "b": a[2:4], "c": a[4:6]})
    >>> layout["b"].start, layout["b"].stop, layout.relation("b", "c"), layout.relation("a", "b")
    (4000, 8000, 'disjoint', 'contains')
    """

    __slots__ = ("_rows", "_raw", "_skipped", "_source", "_metadata", "_cache", "_lock")

    def __init__(
        self,
        views: Iterable[TensorView],
        storages: Iterable[StorageInfo],
        skipped: Iterable[Skipped] = (),
        *,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
    ):
        views = tuple(views)
        infos = {s.key: s for s in storages}
        rows = Rows()
        for i, v in enumerate(views):
            info = infos.get(v.storage)
            if info is None:
                raise ValueError(f"view {v.name!r} refers to storage {v.storage!r}, which has no StorageInfo")
            rows.rows.append(
                (
                    v.name,
                    info.key,
                    info.device,
                    info.nbytes,
                    (v.dtype, v.itemsize),
                    v.shape,
                    v.stride,
                    v.offset,
                    v.start,
                )
            )
            if v.note:
                rows.notes[i] = v.note
            if v.category:
                rows.categories[i] = v.category
            if v.logical is not None:
                rows.logical[i] = v.logical
            if v.piece is not None:
                rows.pieces[i] = v.piece
        used = {v.storage for v in views}
        rows.labels = {key: info.label for key, info in infos.items() if info.label}
        # Storages with no views (possible for files) come last.
        rows.extra = [store(info) for key, info in infos.items() if key not in used]
        self._setup(rows, tuple(skipped), source, metadata)
        if len(self._index) != len(views):
            dup = next(n for i, n in enumerate(self._names) if self._index[n] != i)
            raise ValueError(f"duplicate tensor name {dup!r}: every view needs a unique name")
        self._records[:] = views

    @classmethod
    def _from_rows(
        cls,
        rows: Rows,
        skipped: Iterable[Skipped] = (),
        *,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> Layout:
        """Build from a collector's rows; a repeated name keeps its first row, the rest are skipped.

        Costs O(1) when ``rows.unique``: names, geometries and records are derived on first use.
        """
        self = cls.__new__(cls)
        self._setup(rows, tuple(skipped), source, metadata)
        if not rows.unique and len(self._index) != len(rows.rows):
            self._setup(*drop_duplicates(rows, self._skipped), source, metadata)
        return self

    def _setup(self, rows: Rows, skipped: tuple, source: str, metadata: Mapping[str, Any] | None) -> None:
        self._raw = rows
        self._rows: Sequence[tuple | str] = rows.rows  # the row tuples; once the table is built, the names
        self._skipped = skipped
        self._source = source
        self._metadata = dict(metadata or {})
        self._cache: dict = {}
        self._lock = threading.RLock()

    # -- derived on first use -----------------------------------------------------------
    def _cached(
        self, key: object, make: Callable[[], _T], *, before: Callable[[], object] | None = None, pause: bool = True
    ) -> _T:
        """``make()`` once per key: the one way a Layout keeps what it derived.

        Also once when threads ask a fresh layout at once (building the table consumes the
        source's rows, so a second build would see none). ``make`` runs with the garbage
        collector paused (``pause``; a small record needs none); ``before``, when given, is a
        step computed first in a pause of its own: the fresh tuples it makes are then walked once
        by the collector, which untracks them, before the records that hold them are made.
        """
        value = self._cache.get(key)
        if value is None:
            if before is not None:
                before()
            with self._lock:
                value = self._cache.get(key)
                if value is None:
                    if pause:
                        with gc_paused():
                            value = self._cache[key] = make()
                    else:
                        value = self._cache[key] = make()
        return value

    def _taken(self, key: object, make: Callable[[], _T]) -> _T:
        """What :meth:`_cached` keeps under ``key`` (or ``make()``), no longer kept: a step's
        columns, once their records hold them, are not kept twice."""
        value = self._cache.pop(key, None)
        return make() if value is None else value

    def derived(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()``, once per layout: an upper layer's answer about this layout, kept with
        it like the layout's own (e.g. :func:`tensorviz.plan.colors.colour_ordinals`).
        ``key`` names the answer: by convention its module and name."""
        return self._cached(("derived", key), make)

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
        """Columns of every view and storage (see :mod:`tensorviz.core.table`)."""
        return self._cached("table", self._make_table)

    def _make_table(self) -> Table:
        raw = self._raw
        rows = raw.finished(self._metadata)  # the source's deferred step runs first (Rows.finished)
        # The table and the names hold every fact of the rows: the table is read from the row
        # tuples chunk by chunk, letting each go once read (a tuple, a shape and a stride per
        # view, ~250 bytes), and names come from the names tuple from then on.
        names = self._names
        table = self._derived_table(rows)
        if table is None:
            table = build_table(rows, raw.geometries, raw.labels, raw.extra, release=rows is self._rows)
        self._rows = names
        raw.rows = []
        wrong = beyond_int64(table)
        if wrong is not None:
            raise byte_limit_error(self._source, wrong, names, table)
        return table

    def _derived_table(self, rows: list[tuple]) -> Table | None:
        """The table of rows copied from another layout's (``Rows.copied``: ``tv.diff``'s second
        walk), gathered from that layout's table; None when there is none to derive from or
        either side's memories were rekeyed (the rows no longer hold what was copied)."""
        raw = self._raw
        copied, raw.copied = raw.copied, None
        if copied is None or raw.labels or raw.extra or len(copied[1]) != len(rows):
            return None
        other, src = copied
        source = other._table  # its memories found first (its metadata says when rekeyed)
        if "storage_objects" in self._metadata or "storage_objects" in other._metadata:
            return None
        return derive_table(rows, src, source, raw.geometries)

    @property
    def _nstores(self) -> int:
        return len(self._table.nbytes)

    # -- basic access -------------------------------------------------------------------
    @property
    def views(self) -> tuple[TensorView, ...]:
        """Every view, in source order."""
        return self._cached("views", self._make_views)

    def _make_views(self) -> tuple[TensorView, ...]:
        t, records, names, notes, raw = self._table, self._records, self._names, self._raw.notes, self._raw
        keys, devices, geos, dtypes = t.keys, t.devices, t.geos, t.dtypes
        columns = (t.sidx.tolist(), t.gid.tolist(), t.start.tolist(), t.did.tolist(), t.offset.tolist())
        for i, (s, g, start, d, offset) in enumerate(zip(*columns)):
            if records[i] is None:
                note, cat, lg = notes.get(i, ""), raw.category_of(i), raw.logical.get(i)
                records[i] = view_record(
                    names[i], dtypes[d], offset, keys[s], devices[s], geos[g], start, note, cat, lg, raw.pieces.get(i)
                )
        return tuple(r for r in records if r is not None)  # every record is made above

    def _view(self, i: int) -> TensorView:
        records = self._records
        v = records[i]
        if v is None:
            t = self._table
            s = int(t.sidx[i])
            dtype, offset, start = t.dtypes[t.did[i]], int(t.offset[i]), int(t.start[i])
            note, cat, lg = self._raw.notes.get(i, ""), self._raw.category_of(i), self._raw.logical.get(i)
            geo = t.geos[t.gid[i]]
            piece = self._raw.pieces.get(i)
            v = view_record(self._names[i], dtype, offset, t.key(s), t.devices[s], geo, start, note, cat, lg, piece)
            records[i] = v
        return v

    def noted(self, text: str) -> np.ndarray:
        """The views (by index, ascending) whose note contains ``text`` (notes are few: a
        pass over them, not over the views)."""
        raw = self._raw
        raw.finished(self._metadata)  # the source's deferred step may add notes
        found = sorted(i for i, note in raw.notes.items() if text in note)
        return np.array(found, dtype=np.int64)

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return self._skipped

    @property
    def source(self) -> str:
        """A short description of what was analysed (a type or a path)."""
        return self._source

    @property
    def metadata(self) -> dict[str, Any]:
        """Extra facts from the source (a safetensors ``__metadata__``, checkpoint wrapper keys...)
        as a plain dict, a copy: :attr:`facts` has them typed."""
        self._raw.finished(self._metadata)  # the source's deferred step may add facts
        return {key: plain(value) for key, value in self._metadata.items()}  # records as their dicts

    @property
    def facts(self) -> SourceFacts:
        """What the source knew besides the tensors, typed (see :class:`~tensorviz.core.records.SourceFacts`)."""
        return self._cached("facts", self._make_facts)

    def _make_facts(self) -> SourceFacts:
        self._raw.finished(self._metadata)  # the source's deferred step may add facts
        return SourceFacts.of(self._metadata)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    @property
    def categories(self) -> tuple[str, ...]:
        """Each view's category, in source order: weights, buffers, gradients, optimizer, copies,
        other (:data:`~tensorviz.core.records.CATEGORIES`), or "" where the source cannot tell."""
        raw = self._raw
        return self._cached(
            "categories",
            lambda: tuple(map(raw.category_of, range(len(self)))) if raw.categories else (raw.category,) * len(self),
        )

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[TensorView]:
        return iter(self.views)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> TensorView:
        records, index = self._cache.get("records"), self._cache.get("index")
        if records is not None and index is not None and type(name) is str:  # the made record: two lookups
            i = index.get(name)
            if i is not None and (v := records[i]) is not None:
                return v
        return self._view(self._position(name))

    def position(self, name: str) -> int:
        """Where view ``name`` is in :attr:`views` (KeyError naming close matches if absent).

        >>> import torch, tensorviz as tv
        >>> tv.analyze({"a": torch.zeros(1), "b": torch.zeros(2)}).position("b")
        1
        """
        return self._position(name)

    def _position(self, name: str) -> int:
        try:
            return self._index[name]
        except (KeyError, TypeError):
            close = difflib.get_close_matches(str(name), self._names, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"no tensor named {name!r} in this layout ({len(self)} tensors){hint}") from None

    # -- the vectorised answers' inputs, from the table -------------------------------
    def _sweep(self) -> Sweep:
        """Overlap labels and coverage of every storage (see :mod:`tensorviz.core.sweep`)."""
        return self._cached("sweep", self._make_sweep)

    def _make_sweep(self) -> Sweep:
        t = self._table
        tower = rel.tower_mask(t)
        towers = tower if tower.any() else None
        return sweep(t.sidx, t.start, t.stop, t.dense, t.nbytes, self._runs_of, towers, self._tower_at, self._rows_of)

    def _tower_at(self, i: int) -> periodic.Tower | periodic.Union:
        """View ``i``'s footprint, a tower or a union of towers (the sweep asks only for those)."""
        return cast("periodic.Tower | periodic.Union", self._piece_at(i))

    def _runs_at(self, i: int) -> np.ndarray:
        t = self._table
        return t.geos[t.gid[i]].byte_runs(int(t.start[i]), int(t.itemsize[i]))

    def _runs_of(self, views: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Footprint runs of many views at once: ``(runs (k, 2), owner view of each run)``."""
        t = self._table
        return fp.byte_runs_many(t.geos, t.gid[views], t.start[views], t.itemsize[views], views)

    def _rows_of(self, views: np.ndarray) -> fp.RowForms:
        """Footprints of many views as rows of one base (see :func:`~tensorviz.core.footprint.row_forms_many`)."""
        t = self._table
        return fp.row_forms_many(t.geos, t.gid[views], t.itemsize[views])

    def _piece_at(self, i: int) -> np.ndarray | periodic.Tower | periodic.Union:
        return rel.piece_at(self._table, i)

    def _member_positions(self, s: int) -> np.ndarray:
        """View positions of storage ``s`` in source order (a slice: no list per storage)."""
        order, bounds = self._grouped("storage")
        if s + 1 >= len(bounds):
            return order[:0]
        return order[bounds[s] : bounds[s + 1]]

    def _grouped(self, by: str) -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: group g is ``order[bounds[g]:bounds[g+1]]``, groups ordered by
        first member (for ``"storage"``: storage index order)."""
        return self._cached(("grouped", by), lambda: self._make_grouped(by))

    def _make_grouped(self, by: str) -> tuple[np.ndarray, np.ndarray]:
        t = self._table
        if by == "storage":  # storage indices number storages by first appearance: a stable sort suffices
            return ranked(t.sidx)
        return components(self._sweep().overlap if by == "overlap" else gr.span_labels(t))

    def _storage_names(self) -> list[tuple[str, ...]]:
        """Per storage, the names of its views in source order (see :func:`~tensorviz.core.storages.storage_names`)."""
        return self._cached(
            "snames", lambda: st.storage_names(self._names_array, *self._grouped("storage"), self._nstores)
        )

    def view_spans(self) -> ViewSpans:
        """Per view (source order): storage index, span start and stop, as read-only numpy columns.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4)
        >>> [c.tolist() for c in tv.analyze({"w": w, "v": w[1:3], "x": torch.zeros(1)}).view_spans()]
        [[0, 0, 1], [0, 4, 0], [16, 12, 4]]
        """
        t = self._table
        return ViewSpans(readonly(t.sidx), readonly(t.start), readonly(t.stop))

    # -- storages and coverage (tensorviz.core.storages) ---------------------------------
    @property
    def storages(self) -> tuple[Storage, ...]:
        """Every storage in order of first appearance, with its coverage."""
        return self._cached("storages", self._make_storages, before=self._storage_columns)

    def _make_storages(self) -> tuple[Storage, ...]:
        columns = self._taken("storage columns", self._make_storage_columns)
        out = st.storage_records(self._table.keys, columns, self.facts.whole_files, self._header_nbytes())
        for key in [k for k in self._cache if type(k) is tuple and k[0] == "storage"]:
            out[key[1]] = self._cache.pop(key)  # a record made alone stays the one handed out
        return tuple(out)

    def _storage_columns(self) -> tuple[list, ...]:
        """Per storage, the facts of its record (:func:`~tensorviz.core.storages.storage_columns`)."""
        return self._cached("storage columns", self._make_storage_columns)

    def _make_storage_columns(self) -> tuple[list, ...]:
        t, snames = self._table, self._storage_names()
        complete = st.complete_names(t, self._names_array, *self._grouped("storage"), snames)
        return st.storage_columns(t, self._sweep(), snames, complete, self._header_nbytes())

    def _header_nbytes(self) -> np.ndarray:
        """Per storage, a whole file's header bytes (:func:`~tensorviz.core.storages.header_nbytes`)."""
        return self._cached(
            "header nbytes", lambda: st.header_nbytes(self._table, self.facts.header, lambda: self._skey)
        )

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
        return self._cached(("storage", s), lambda: self._make_storage(s), pause=False)

    def _make_storage(self, s: int) -> Storage:
        members = self._member_positions(s)
        whole, header = self.facts.whole_files, self._header_nbytes()
        return st.storage_record(self._table, s, members, self._names_array, self._sweep(), whole, header)

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
        """Byte runs of a storage (by key, index or a view name) that no view reads, less a
        whole file's header (:meth:`header_run`)."""
        s = self._storage_pos(which)
        runs = [self._runs_at(i) for i in self._member_positions(s).tolist()]
        header = self.header_run(s)
        if header is not None:
            runs.append(np.array([header], dtype=np.int64))
        return fp.coverage(int(self._table.nbytes[s]), runs).unreferenced()

    def piece_storages(self) -> dict[str, tuple[int, ...]]:
        """Each logical tensor stored in pieces (a tensor subclass, a packed checkpoint weight;
        see :class:`~tensorviz.core.records.Piece`) -> the indices of the storages its pieces
        read, in the order they first appear; empty when no view is a piece (no record is made).

        >>> import torch, tensorviz as tv
        >>> from torch.testing._internal.two_tensor import TwoTensor
        >>> tv.analyze({"b": torch.zeros(2), "w": TwoTensor(torch.zeros(2), torch.ones(2))}).piece_storages()
        {'w': (1, 2)}
        """
        return self._cached("piece storages", self._make_piece_storages)

    def _make_piece_storages(self) -> dict[str, tuple[int, ...]]:
        pieces, sidx = self._raw.pieces, self._table.sidx
        out: dict[str, dict[int, None]] = {}
        for i in sorted(pieces):
            out.setdefault(pieces[i].of, {})[int(sidx[i])] = None
        return {of: tuple(found) for of, found in out.items()}

    def header_run(self, which: str | StorageKey | int) -> tuple[int, int] | None:
        """A whole file's header bytes ``(start, stop)`` (a safetensors file's ``(0, 8 + N)``),
        or None for a storage that is no such file."""
        s = self._storage_pos(which)
        n = int(self._header_nbytes()[s])
        if not n:
            return None
        lo = max(0, int(self.facts.header[self._table.key(s)[1]][0]))
        return lo, lo + n

    def storage_stats(self) -> StorageStats:
        """Per storage (index order), numpy columns of the facts a picture of thousands of
        storages needs -- without a record per storage or per view (see :class:`StorageStats`).

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4, 4)
        >>> st = tv.analyze({"w": w, "col": w[:, 0], "v": torch.zeros(2)}).storage_stats()
        >>> st.views.tolist(), st.covered.tolist(), st.footprint_nbytes.tolist(), st.non_contiguous.tolist()
        ([2, 1], [64, 8], [80, 8], [1, 0])
        """
        return self._cached(
            "storage stats", lambda: st.storage_stats(self._table, self._sweep(), *self._grouped("storage"))
        )

    def footprint_runs(self, name: str) -> np.ndarray:
        """Exact footprint of a view as byte runs (its span if the view is not ``exact``, or if it
        is a tower of more than :data:`~tensorviz.core.footprint.RUN_BUDGET` runs: measure
        those with :meth:`footprint_piece` and :meth:`union_nbytes`)."""
        return self._runs_at(self._position(name))

    # -- groups (tensorviz.core.groups) ---------------------------------------------------
    def groups(self, by: GroupBy = "storage") -> tuple[Group, ...]:
        """Views grouped by ``"storage"``, ``"span"`` (same storage, identical non-empty span) or
        ``"overlap"`` (connected by intersecting footprints), ordered by first member, names
        inside in source order.

        >>> import torch, tensorviz as tv
        >>> x = torch.zeros(4, 6)
        >>> [g.names for g in tv.analyze({"x": x, "e": x[:, ::2], "o": x[:, 1::2]}).groups("overlap")]
        [('x', 'e', 'o')]
        """
        gr.check_grouping(by)
        return self._cached(("groups", by), lambda: self._make_groups(by), before=lambda: self._group_columns(by))

    def _make_groups(self, by: str) -> tuple[Group, ...]:
        return gr.group_records(by, self._taken(("group columns", by), lambda: self._make_group_columns(by)))

    def _group_columns(self, by: str) -> tuple[list, ...]:
        """Per group: names, storage key, start, stop, exact (:func:`~tensorviz.core.groups.group_columns`)."""
        return self._cached(("group columns", by), lambda: self._make_group_columns(by))

    def _make_group_columns(self, by: str) -> tuple[list, ...]:
        if not len(self):
            return [], [], [], [], []
        by_storage = self._grouped("storage")
        names, snames = self._names_array, self._storage_names()
        return gr.group_columns(by, self._table, self._grouped(by), by_storage, names, snames)

    def group_index(self, by: GroupBy = "storage") -> np.ndarray:
        """Per view (source order), the index of its group in :meth:`groups` -- without the
        group records (read-only int64 array).

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4)
        >>> tv.analyze({"a": torch.zeros(2), "w": w, "tied": w}).group_index("span").tolist()
        [0, 1, 1]
        """
        order, bounds = self.group_members(by)
        return self._cached(("group index", by), lambda: readonly(gr.inverse(order, bounds)))

    def group_members(self, by: GroupBy = "storage") -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: the views of group ``g`` of :meth:`groups` are at positions
        ``order[bounds[g]:bounds[g + 1]]`` (in source order) -- without the group records.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4)
        >>> [a.tolist() for a in tv.analyze({"a": torch.zeros(2), "w": w, "tied": w}).group_members("span")]
        [[0, 1, 2], [0, 1, 3]]
        """
        gr.check_grouping(by)
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
        lookup = self._cached(("group_of", by), lambda: {n: g for g in self.groups(by) for n in g.names})
        return lookup[name]

    # -- relations (tensorviz.core.relations) ---------------------------------------------
    def footprint_piece(self, name: str) -> np.ndarray | periodic.Tower | periodic.Union:
        """The exact footprint of a view: canonical byte runs, or a
        :class:`~tensorviz.core.periodic.Tower` (or the exact Union of a few) when it has too many runs to list
        (measure it with :func:`union_nbytes` or :func:`~tensorviz.core.periodic.intersection_nbytes`)."""
        return self._piece_at(self._position(name))

    def union_nbytes(self, names: Iterable[str]) -> int:
        """Distinct bytes read by the named views together (exact, towers included; views on
        different storages count apart).

        >>> import torch, tensorviz as tv
        >>> x = torch.zeros(8, dtype=torch.uint8)
        >>> tv.analyze({"even": x[::2], "odd": x[1::2], "head": x[:3]}).union_nbytes(["even", "head"])
        5
        """
        return rel.union_nbytes((self[n].storage, self.footprint_piece(n)) for n in names)

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
        known = rel.record_relation(va, vb)
        if known is not None:
            return known
        return rel.footprint_relation(va, vb, self.footprint_piece(a), self.footprint_piece(b))

    def overlap_nbytes(self, a: str, b: str) -> int:
        """Bytes read by both views (0 for different storages)."""
        known = rel.span_overlap(self[a], self[b])
        if known is not None:
            return known
        return periodic.intersection_nbytes(self.footprint_piece(a), self.footprint_piece(b))[0]

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

    def __repr__(self) -> str:
        shared = int(np.count_nonzero(self.group_sizes("storage") >= 2))  # no group records
        ns = self._nstores
        return (
            f"<Layout {len(self)} tensor{'s' * (len(self) != 1)} on {ns} storage{'s' * (ns != 1)}, "
            f"{shared} shared, {len(self._skipped)} skipped>"
        )

    # -- text: print(layout) and the module tree (see tensorviz.core.text, tensorviz.core.tree) --
    def to_text(self, by: GroupBy = "storage", max_views: int | None = None, full: bool | None = None) -> str:
        """A plain-text summary: storages with their views and coverage, shared groups, skips.

        ``full=None`` (what ``print(layout)`` writes) lists everything when that fits in 60
        lines, else writes a compact summary (totals, ties, shared groups, the largest modules);
        ``full=True`` always lists every storage and view, ``full=False`` always summarises.
        ``max_views`` caps the views listed per storage (default 12; all when ``full=True``).
        Every line is escaped for a terminal; unless ``full=True``, a line longer than
        :data:`~tensorviz.core.names.LINE_CAP` (a very long name) keeps its start and end.
        """
        if full:
            return layout_text(self, by=by, max_views=len(self) if max_views is None else max_views, full=True)
        text = None if full is False else fits_screen(self, by, 12 if max_views is None else max_views)
        return text if text is not None else compact_text(self, by=by)

    def tree(self) -> ModelTree:
        """The module tree: totals per prefix, bytes counted once (see :mod:`tensorviz.core.tree`)."""
        return self._cached("tree", lambda: model_tree(self))

    def __str__(self) -> str:
        return self.to_text()

    # -- rich display and drawing: owned by the upper layers, reached through hooks -----
    def _repr_mimebundle_(self, include=None, exclude=None):
        return hooks.call("layout.mimebundle", self, include=include, exclude=exclude)

    def plot(self, by: GroupBy = "storage", **options):
        """A matplotlib Figure of this layout (see :func:`tensorviz.diagram`)."""
        return hooks.call("layout.plot", self, by=by, **options)

    def save_check(self, **options):
        """What each installed saver would do with these views (see :func:`tensorviz.save_check`)."""
        return hooks.call("layout.save_check", self, **options)


def as_layout(obj: Any) -> Layout:
    """``obj`` itself when it is a :class:`Layout`, else ``tensorviz.analyze(obj)``."""
    if isinstance(obj, Layout):
        return obj
    return hooks.call("analyze", obj)
