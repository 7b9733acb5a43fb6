"""The Layout: every named view of a set of tensors, and every answer about them.

Pure Python + numpy; no torch. Sources (:mod:`tensorviz.sources`) produce :class:`Rows`;
:class:`Layout` answers every question about them. A Layout keeps its views as compact rows and
builds the public records (:mod:`tensorviz.core.records`) on first use; expensive answers
(footprints, coverage, overlap groups) are computed once from per-view numpy columns
(:mod:`tensorviz.core.table`), vectorised over all storages (:mod:`tensorviz.core.sweep`), and
cached. Storage facts live in :mod:`tensorviz.core.storages`, groups in
:mod:`tensorviz.core.groups` (mixins). Drawing and save checks are reached through
:mod:`tensorviz.core.hooks`, which the package facade wires to the upper layers.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter, mul
from typing import Any

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import hooks
from tensorviz.core.groups import GroupFacts
from tensorviz.core.records import (
    RELATIONS,
    GroupBy,
    Skipped,
    SourceFacts,
    StorageInfo,
    StorageKey,
    TensorView,
    ViewSpans,
    readonly,
    view_record,
)
from tensorviz.core.relations import RelationFacts
from tensorviz.core.rows import Rows, drop_duplicates, gc_paused, store
from tensorviz.core.storages import StorageFacts
from tensorviz.core.sweep import components, ranked, sweep
from tensorviz.core.table import Table, beyond_int64, byte_limit_error, objects
from tensorviz.core.table import build as build_table
from tensorviz.core.text import compact_text, fits_screen, layout_text
from tensorviz.core.tree import ModelTree, model_tree

__all__ = ["Layout", "RELATIONS", "as_layout"]

_NAME = itemgetter(0)


class Layout(StorageFacts, GroupFacts, RelationFacts):
    """Every named view of a set of tensors, grouped by the storage it reads.

    Immutable: all public attributes are tuples of frozen records; derived answers are cached.

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
        self._rows = rows.rows
        self._skipped = skipped
        self._source = source
        self._metadata = dict(metadata or {})
        self._cache: dict = {}
        self._lock = threading.RLock()

    # -- derived on first use -----------------------------------------------------------
    def _cached(self, key: object, make):
        """``make()`` once per key, also when threads ask a fresh layout at once: building the
        table consumes the source's rows, so a second build would see none."""
        value = self._cache.get(key)
        if value is None:
            with self._lock:
                value = self._cache.get(key)
                if value is None:
                    with gc_paused():
                        value = self._cache[key] = make()
        return value

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
        table = build_table(rows, raw.geometries, raw.labels, raw.extra, release=rows is self._rows)
        self._rows = names
        raw.rows = []
        wrong = beyond_int64(table)
        if wrong is not None:
            raise byte_limit_error(self._source, wrong, names, table)
        return table

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

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return self._skipped

    @property
    def source(self) -> str:
        """A short description of what was analysed (a type or a path)."""
        return self._source

    @property
    def metadata(self) -> dict[str, Any]:
        """Extra facts from the source (a safetensors ``__metadata__``, checkpoint wrapper keys...)."""
        self._raw.finished(self._metadata)  # the source's deferred step may add facts
        return dict(self._metadata)

    @property
    def facts(self) -> SourceFacts:
        """What the source knew besides the tensors, typed (see :class:`~tensorviz.core.records.SourceFacts`)."""
        return self._cached("facts", lambda: SourceFacts.of(self.metadata))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    @property
    def categories(self) -> tuple[str, ...]:
        """Each view's category, in source order: weights, buffers, gradients, optimizer, copies,
        other (:data:`~tensorviz.core.records.CATEGORIES`), or "" where the source cannot tell."""
        raw = self._raw
        return self._cached("categories", lambda: tuple(map(raw.category_of, range(len(self)))))

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[TensorView]:
        return iter(self.views)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> TensorView:
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

    # -- columns for the vectorised answers ----------------------------------------------
    def _columns(self) -> dict[str, np.ndarray]:
        t = self._table
        return {
            "sidx": t.sidx,
            "start": t.start,
            "stop": t.stop,
            "dense": t.dense,
            "exact": t.exact,
            "nbytes": t.nbytes,
        }

    def _sweep(self):
        if "sweep" not in self._cache:
            t = self._table
            tower = self._tower_mask()
            self._cache["sweep"] = sweep(
                t.sidx,
                t.start,
                t.stop,
                t.dense,
                t.nbytes,
                self._runs_of,
                tower if tower.any() else None,
                self._piece_at,
            )
        return self._cache["sweep"]

    def _runs_at(self, i: int) -> np.ndarray:
        t = self._table
        return t.geos[t.gid[i]].byte_runs(int(t.start[i]), int(t.itemsize[i]))

    def _runs_of(self, views: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Footprint runs of many views at once: ``(runs (k, 2), owner view of each run)``."""
        t = self._table
        return fp.byte_runs_many(t.geos, t.gid[views], t.start[views], t.itemsize[views], views)

    def _member_positions(self, s: int) -> np.ndarray:
        """View positions of storage ``s`` in source order (a slice: no list per storage)."""
        order, bounds = self._grouped("storage")
        if s + 1 >= len(bounds):
            return order[:0]
        return order[bounds[s] : bounds[s + 1]]

    def view_spans(self) -> ViewSpans:
        """Per view (source order): storage index, span start and stop, as read-only numpy columns.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(4)
        >>> [c.tolist() for c in tv.analyze({"w": w, "v": w[1:3], "x": torch.zeros(1)}).view_spans()]
        [[0, 0, 1], [0, 4, 0], [16, 12, 4]]
        """
        t = self._table
        return ViewSpans(readonly(t.sidx), readonly(t.start), readonly(t.stop))

    def _grouped(self, by: str) -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: group g is ``order[bounds[g]:bounds[g+1]]``, groups ordered by
        first member (for ``"storage"``: storage index order)."""
        key = ("grouped", by)
        if key not in self._cache:
            # Storage indices already number storages by first appearance: a stable sort suffices.
            self._cache[key] = ranked(self._table.sidx) if by == "storage" else components(self._labels(by))
        return self._cache[key]

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
