"""Frozen layout facts: views, storages, groups and relations.

Pure Python + numpy; no torch. :mod:`tensorviz.collect` and :mod:`tensorviz.files` produce
:class:`TensorView` records and :class:`StorageInfo`; :class:`Layout` answers every question
about them. Expensive answers (footprints, coverage, overlap groups) are computed on first use
and cached, so ``analyze`` stays as cheap as reading the metadata.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping, Sequence

import numpy as np

from . import footprint as fp
from ._units import format_bytes

__all__ = ["TensorView", "Storage", "StorageInfo", "Group", "Skipped", "Layout", "GroupBy", "RELATIONS"]

GroupBy = Literal["storage", "span", "overlap"]
_GROUPINGS = ("storage", "span", "overlap")
RELATIONS = ("identical", "same-bytes", "contains", "within", "overlaps", "disjoint", "unrelated")

StorageKey = tuple  # (device: str, identity: int | str)


@dataclass(frozen=True, slots=True)
class TensorView:
    """One named tensor reading a storage through (offset, shape, stride, dtype).

    ``start``/``stop`` is the span in bytes (from the start of the storage; for a safetensors
    file, from the start of the file). ``nbytes`` counts logical elements (numel * itemsize);
    ``footprint_nbytes`` counts the distinct bytes read (smaller for expanded views).
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
        """The footprint is the whole span: one gap-free block of bytes."""
        return not self.is_empty and self.footprint_nbytes == self.stop - self.start

    @property
    def is_expanded(self) -> bool:
        """Some element is read through more than one index (stride 0 or overlapping strides)."""
        return self.footprint_nbytes < self.nbytes

    def footprint(self) -> fp.Footprint:
        """The exact bytes this view reads (see :func:`tensorviz.footprint.footprint`)."""
        if self.is_dense:
            return fp.Footprint(_single(self.start, self.stop), self.exact)
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
    """Views grouped by one rule; ``start``/``stop`` is the byte range their spans cover."""

    by: str
    names: tuple[str, ...]
    storage: StorageKey
    start: int
    stop: int

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __repr__(self) -> str:
        return f"Group(by={self.by!r}, names={self.names}, bytes=[{self.start}, {self.stop}))"


@dataclass(frozen=True)
class Skipped:
    """A value that could not be analysed, and why, in words a person understands."""

    name: str
    reason: str

    def __repr__(self) -> str:
        return f"Skipped({self.name!r}: {self.reason})"


class Layout:
    """Every named view of a set of tensors, grouped by the storage it reads.

    Immutable: all public attributes are tuples of frozen records; derived answers are cached.

    >>> import torch, tensorviz as tv
    >>> a = torch.rand(8, 10, 50); layout = tv.analyze({"a": a, "b": a[2:4], "c": a[4:6]})
    >>> layout["b"].start, layout["b"].stop, layout.relation("b", "c"), layout.relation("a", "b")
    (4000, 8000, 'disjoint', 'contains')
    """

    __slots__ = ("_views", "_index", "_storage_info", "_by_storage", "_skipped", "_source", "_metadata", "_cache")

    def __init__(self, views: Iterable[TensorView], storages: Iterable[StorageInfo],
                 skipped: Iterable[Skipped] = (), *, source: str = "", metadata: Mapping[str, object] | None = None):
        views = tuple(views)
        index: dict[str, int] = {}
        by_storage: dict[StorageKey, list[int]] = {}
        for i, v in enumerate(views):
            if v.name in index:
                raise ValueError(f"duplicate tensor name {v.name!r}: every view needs a unique name")
            index[v.name] = i
            by_storage.setdefault(v.storage, []).append(i)
        infos = {s.key: s for s in storages}
        missing = [k for k in by_storage if k not in infos]
        if missing:
            raise ValueError(f"views refer to storages with no StorageInfo: {missing[:3]}")
        self._views = views
        self._index = index
        # Storages in order of first appearance; storages with no views (possible for files) last.
        order = list(by_storage) + [k for k in infos if k not in by_storage]
        self._storage_info = {k: infos[k] for k in order}
        self._by_storage = {k: tuple(by_storage.get(k, ())) for k in order}
        self._skipped = tuple(skipped)
        self._source = source
        self._metadata = dict(metadata or {})
        self._cache: dict = {}

    # -- basic access -------------------------------------------------------------------
    @property
    def views(self) -> tuple[TensorView, ...]:
        return self._views

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
        return tuple(self._index)

    def __len__(self) -> int:
        return len(self._views)

    def __iter__(self):
        return iter(self._views)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> TensorView:
        try:
            return self._views[self._index[name]]
        except KeyError:
            close = difflib.get_close_matches(str(name), self._index, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"no tensor named {name!r} in this layout ({len(self)} tensors){hint}") from None

    # -- storages and coverage ----------------------------------------------------------
    @property
    def storages(self) -> tuple[Storage, ...]:
        if "storages" not in self._cache:
            self._cache["storages"] = tuple(self._make_storage(i, k) for i, k in enumerate(self._storage_info))
        return self._cache["storages"]

    def storage(self, which: str | StorageKey | int) -> Storage:
        """The storage of a view name, a storage key or a storage index."""
        if isinstance(which, int):
            return self.storages[which]
        key = self[which].storage if isinstance(which, str) else which
        return self.storages[list(self._storage_info).index(key)]

    def storage_views(self, key: StorageKey) -> tuple[TensorView, ...]:
        return tuple(self._views[i] for i in self._by_storage[key])

    def _make_storage(self, index: int, key: StorageKey) -> Storage:
        info = self._storage_info[key]
        members = [self._views[i] for i in self._by_storage[key]]
        cov = fp.coverage(info.nbytes, (self._runs(v) for v in members if not v.is_empty))
        complete = tuple(v.name for v in members
                         if info.nbytes and v.start == 0 and v.stop == info.nbytes and v.is_dense)
        return Storage(key=key, index=index, device=info.device, nbytes=info.nbytes,
                       names=tuple(v.name for v in members), covered_nbytes=cov.covered_nbytes,
                       unreferenced_nbytes=cov.unreferenced_nbytes, complete_names=complete,
                       label=info.label, exact=all(v.exact for v in members))

    def unreferenced_runs(self, key: StorageKey) -> np.ndarray:
        """Byte runs of a storage that no view reads."""
        info = self._storage_info[key]
        members = [self._views[i] for i in self._by_storage[key]]
        return fp.coverage(info.nbytes, (self._runs(v) for v in members if not v.is_empty)).unreferenced()

    def _runs(self, view: TensorView) -> np.ndarray:
        if view.is_dense:
            return _single(view.start, view.stop)
        cache = self._cache.setdefault("runs", {})
        runs = cache.get(view.name)
        if runs is None:
            runs = cache[view.name] = view.footprint_runs()
        return runs

    def footprint_runs(self, name: str) -> np.ndarray:
        """Cached exact footprint of a view."""
        return self._runs(self[name])

    # -- groups -------------------------------------------------------------------------
    def groups(self, by: GroupBy = "storage") -> tuple[Group, ...]:
        """Views grouped by ``"storage"``, ``"span"`` (same storage, identical non-empty span) or
        ``"overlap"`` (connected by intersecting footprints), ordered by first member."""
        if by not in _GROUPINGS:
            raise ValueError(f"by must be one of {_GROUPINGS}, got {by!r}")
        key = ("groups", by)
        if key not in self._cache:
            parts: list[list[int]] = []
            for skey, members in self._by_storage.items():
                if members:
                    parts.extend(getattr(self, f"_split_{by}")(members))
            parts.sort(key=lambda p: p[0])
            self._cache[key] = tuple(self._make_group(by, p) for p in parts)
        return self._cache[key]

    def shared(self, by: GroupBy = "storage") -> tuple[Group, ...]:
        """Only the groups with two or more names."""
        return tuple(g for g in self.groups(by) if len(g) > 1)

    def group_of(self, name: str, by: GroupBy = "storage") -> Group:
        """The group a view belongs to."""
        self[name]  # KeyError with suggestions
        lookup = self._cache.get(("group_of", by))
        if lookup is None:
            lookup = self._cache[("group_of", by)] = {n: g for g in self.groups(by) for n in g.names}
        return lookup[name]

    def _make_group(self, by: str, members: list[int]) -> Group:
        views = [self._views[i] for i in members]
        spans = [(v.start, v.stop) for v in views if not v.is_empty] or [(views[0].start, views[0].start)]
        return Group(by=by, names=tuple(v.name for v in views), storage=views[0].storage,
                     start=min(a for a, _ in spans), stop=max(b for _, b in spans))

    def _split_storage(self, members: Sequence[int]) -> list[list[int]]:
        return [list(members)]

    def _split_span(self, members: Sequence[int]) -> list[list[int]]:
        out: dict[object, list[int]] = {}
        for i in members:
            v = self._views[i]
            out.setdefault(("empty", i) if v.is_empty else (v.start, v.stop), []).append(i)
        return list(out.values())

    def _split_overlap(self, members: Sequence[int]) -> list[list[int]]:
        # Step 1: sweep spans; views whose spans touch no other span are singletons at once.
        views = [self._views[i] for i in members]
        order = sorted((v.start, v.stop, i) for v, i in zip(views, members) if not v.is_empty)
        clusters: list[list[int]] = []
        end = None
        for a, b, i in order:
            if end is None or a >= end:
                clusters.append([i])
                end = b
            else:
                clusters[-1].append(i)
                end = max(end, b)
        parent = {i: i for i in members}
        # Step 2: inside each span cluster, sweep the exact footprint runs of all its views.
        for cluster in clusters:
            if len(cluster) > 1:
                self._union_overlapping_runs(cluster, parent)
        comps: dict[int, list[int]] = {}
        for i in members:
            comps.setdefault(_find(parent, i), []).append(i)
        return list(comps.values())

    def _union_overlapping_runs(self, cluster: list[int], parent: dict[int, int]) -> None:
        runs = [self._runs(self._views[i]) for i in cluster]
        owner = np.repeat(np.asarray(cluster, dtype=np.int64), [len(r) for r in runs])
        allruns = np.concatenate(runs)
        order = np.argsort(allruns[:, 0], kind="stable")
        allruns, owner = allruns[order], owner[order]
        ends = np.maximum.accumulate(allruns[:, 1])
        # A run starting before the furthest end so far overlaps an earlier run: same component.
        joins = np.flatnonzero(allruns[1:, 0] < ends[:-1]) + 1
        if joins.size == 0:
            return
        new_cluster = np.ones(len(allruns), dtype=bool)
        new_cluster[joins] = False
        cid = np.cumsum(new_cluster) - 1
        pairs = np.unique(np.stack((cid, owner), axis=1), axis=0)
        first_owner: dict[int, int] = {}
        for c, o in pairs.tolist():
            if c in first_owner:
                _union(parent, first_owner[c], o)
            else:
                first_owner[c] = o

    # -- relations ----------------------------------------------------------------------
    def relation(self, a: str, b: str) -> str:
        """How two views relate: one of :data:`RELATIONS`.

        ``identical`` (same storage, byte offset, shape, stride, dtype; non-empty),
        ``same-bytes`` (equal footprints otherwise), ``contains``/``within`` (one footprint
        strictly inside the other), ``overlaps``, ``disjoint`` (same storage, no common byte --
        always so when either is empty), ``unrelated`` (different storages).
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
        ra, rb = self._runs(va), self._runs(vb)
        inter = fp.intersection_nbytes(ra, rb)
        na, nb = va.footprint_nbytes, vb.footprint_nbytes
        if inter == 0:
            return "disjoint"
        if inter == na == nb:
            return "same-bytes"
        if inter == nb:
            return "contains"
        if inter == na:
            return "within"
        return "overlaps"

    def overlap_nbytes(self, a: str, b: str) -> int:
        """Bytes read by both views (0 for different storages)."""
        va, vb = self[a], self[b]
        if va.storage != vb.storage:
            return 0
        return fp.intersection_nbytes(self._runs(va), self._runs(vb))

    # -- totals and text ----------------------------------------------------------------
    @property
    def naive_nbytes(self) -> int:
        """Sum of every view's logical size: what a saver that copies each name would write."""
        return sum(v.nbytes for v in self._views)

    @property
    def unique_nbytes(self) -> int:
        """Distinct bytes read by all views, over all storages."""
        return sum(s.covered_nbytes for s in self.storages)

    @property
    def storage_nbytes(self) -> int:
        """Sum of the storages' sizes: what ``torch.save`` writes."""
        return sum(s.nbytes for s in self.storages)

    def to_text(self, by: GroupBy = "storage", max_views: int = 12) -> str:
        """A plain-text summary: storages with their views and coverage, shared groups, skips."""
        from ._text import layout_text

        return layout_text(self, by=by, max_views=max_views)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        shared = len(self.shared("storage"))
        return (f"<Layout {len(self)} tensors on {len(self._storage_info)} storages, "
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


def _find(parent: dict[int, int], i: int) -> int:
    root = i
    while parent[root] != root:
        root = parent[root]
    while parent[i] != root:
        parent[i], i = root, parent[i]
    return root


def _union(parent: dict[int, int], a: int, b: int) -> None:
    ra, rb = _find(parent, a), _find(parent, b)
    if ra != rb:
        parent[max(ra, rb)] = min(ra, rb)
