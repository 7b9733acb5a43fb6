"""Two layouts side by side: what changed between a model and a checkpoint, two checkpoints,
before and after (:func:`diff_layouts`, the :class:`LayoutDiff` record).

Pure Python + numpy (no torch): everything is compared from the two layouts' columns, in time
linear in the number of tensors. Names are matched exactly first; names left over on both sides
are then matched by a stated rule, wrapper prefixes (:data:`WRAPPER_PREFIXES`) removed, and the
rule used is recorded in :attr:`LayoutDiff.rules` (printed, never silent). A matched pair is
compared field by field (:data:`FIELDS`); ties are compared as span groups, sharing as overlap
groups (see DESIGN.md, "v0.3 additions").

What each field means when the two sides are of different kinds:

- ``device`` is compared only when neither side is a file (a file has no device);
- ``offset`` is compared only when neither view is on a whole safetensors file (a tensor's
  place in a file is packing: resizing one tensor moves every later one);
- ``stride`` is compared only when the shapes are equal (a new shape has new strides);
- ``nbytes`` (elements x itemsize) is reported whenever it differs.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(4, 4)
>>> d = diff_layouts(tv.analyze({"w": w, "head": w}), tv.analyze({"module.w": w, "module.head": w.clone()}))
>>> d.renamed, [sorted(g) for g in d.ties_lost], d.same
((('w', 'module.w'), ('head', 'module.head')), [['head', 'w']], False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np

from tensorviz.core.diff_match import WRAPPER_PREFIXES, match_names, match_positions
from tensorviz.core.diff_modules import ModuleBytes
from tensorviz.core.records import CONJ_NOTE, GroupBy
from tensorviz.core.rows import gc_paused
from tensorviz.core.table import take
from tensorviz.core.text import whole_files
from tensorviz.core.tree import _file_name

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout

__all__ = [
    "LayoutDiff",
    "Change",
    "Moved",
    "DtypeTotal",
    "ModuleBytes",
    "ContentDiff",
    "Duplicate",
    "diff_layouts",
    "match_names",
    "FIELDS",
    "WRAPPER_PREFIXES",
]

#: Fields a matched pair is compared on, in the order changes are listed.
FIELDS = ("shape", "dtype", "conjugate", "stride", "offset", "device", "nbytes")


#: Storage devices that are no device: a file's bytes, a DCP checkpoint's global tensors.
_NO_DEVICE = ("file", "global")


_V = TypeVar("_V")


class Later(Generic[_V]):
    """A field's value to be made on first read (see :class:`_Deferred`)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], _V]) -> None:
        self.make = make


class _Deferred(Generic[_V]):
    """A field of a frozen dataclass that may be given as :class:`Later`: made on its first
    read, then kept (a diff of 100k renamed names makes its 100k pairs only when asked --
    pairs made during the diff are all young objects that the garbage collector walks once
    the diff's collector pause ends). Reads always give the value."""

    def __init__(self, default: _V) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = "_deferred_" + name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Deferred[_V]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _V: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> _V | _Deferred[_V]:
        if obj is None:
            return self  # the class attribute: dataclasses takes it for the default, given back to __set__
        value = obj.__dict__[self.key]
        if type(value) is Later:
            value = obj.__dict__[self.key] = value.make()
        return value

    def __set__(self, obj: object, value: _V | Later[_V] | _Deferred[_V]) -> None:
        obj.__dict__[self.key] = self.default if value is self else value  # not given: the default


@dataclass(frozen=True)
class Change:
    """One field of a matched tensor that differs: ``name`` as on side a."""

    name: str
    field: str
    a: Any
    b: Any


@dataclass(frozen=True)
class Moved:
    """A tensor of two file-backed sides that is in a different file on each side."""

    name: str
    file_a: str
    file_b: str


@dataclass(frozen=True)
class DtypeTotal:
    """Tensors of one dtype on one side; ``nbytes`` counts each span group (a tie) once."""

    dtype: str
    ntensors: int
    nbytes: int


@dataclass(frozen=True)
class Duplicate:
    """On one side (``"a"`` or ``"b"``), ``name`` holds the same bytes as ``of`` (same dtype and
    shape) without being tied to it: a redundant copy of ``nbytes``."""

    side: str
    name: str
    of: str
    nbytes: int


@dataclass(frozen=True)
class ContentDiff:
    """What the tensors' bytes say (``tv.diff(..., content=True)``): matched tensors of equal
    shape and dtype whose bytes are identical or different (names as in a), redundant copies
    on each side, and tensors whose bytes could not be read (``(side, name, reason)``)."""

    identical: tuple[str, ...]
    different: tuple[str, ...]
    duplicates: tuple[Duplicate, ...]
    unread: tuple[tuple[str, str, str], ...]
    hashed_nbytes: int


@dataclass(frozen=True, eq=False)
class LayoutDiff:
    """The difference between two layouts (see DESIGN.md, "v0.3 additions").

    ``same`` is True when nothing below differs. ``only_a``/``only_b`` are names on one side
    only after matching; ``renamed`` the pairs matched by a rule, ``rules`` the rules used in
    words; ``changed`` the fields that differ (:data:`FIELDS`); ``ties_lost``/``ties_gained``
    span groups of two or more names on one side whose matched names are not one span group
    on the other (in a's names for lost, b's for gained); ``sharing_lost``/``sharing_gained``
    the same for overlap groups; ``dtypes_a``/``dtypes_b`` totals per dtype; ``moved`` the
    tensors in another file (both sides files); ``content`` what the bytes say, when read;
    ``not_compared`` the values a side holds that could not be analysed (``(side, name,
    reason)``: a sparse tensor, a name repeated, a container holding itself), which nothing
    above compares -- ``same`` speaks of the tensors compared, and the summary says so.
    ``matches``: per name of ``layout_a`` (in its order), the position of its match among
    ``layout_b``'s names, or -1 (the matching itself, which the pictures and the module totals
    read instead of matching names again).
    """

    source_a: str
    source_b: str
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    rules: tuple[str, ...]
    changed: tuple[Change, ...]
    ties_lost: tuple[frozenset[str], ...]
    ties_gained: tuple[frozenset[str], ...]
    sharing_lost: tuple[frozenset[str], ...]
    sharing_gained: tuple[frozenset[str], ...]
    dtypes_a: tuple[DtypeTotal, ...]
    dtypes_b: tuple[DtypeTotal, ...]
    moved: tuple[Moved, ...]
    renamed: _Deferred[tuple[tuple[str, str], ...]] = _Deferred(())
    content: ContentDiff | None = None
    not_compared: tuple[tuple[str, str, str], ...] = ()
    layout_a: Layout | None = field(default=None, repr=False)
    layout_b: Layout | None = field(default=None, repr=False)
    matches: np.ndarray | None = field(default=None, repr=False)

    @property
    def same(self) -> bool:
        """Nothing differs: names, fields, ties, sharing, files and (when read) bytes."""
        names = (self.only_a, self.only_b, self.renamed, self.changed, self.ties_lost, self.ties_gained)
        sharing = (self.sharing_lost, self.sharing_gained, self.moved)
        differ = any(names) or any(sharing) or (self.content is not None and bool(self.content.different))
        return not differ

    @property
    def matched(self) -> int:
        """Number of names matched on both sides."""
        return (len(self.layout_a) if self.layout_a is not None else 0) - len(self.only_a)

    def modules(self, depth: int | None = 2) -> tuple[ModuleBytes, ...]:
        """Where the bytes went: per module (name prefix of a's names, b's names mapped to a's;
        down to ``depth`` levels, None for all) whose bytes differ, largest change first.
        Bytes are counted once, as the module tree counts them."""
        from tensorviz.core.diff_modules import module_bytes

        return module_bytes(self, depth)

    def __str__(self) -> str:
        from tensorviz.core.diff_text import diff_text

        return diff_text(self)

    def to_text(self, *, width: int = 80, limit: int = 8) -> str:
        """The summary ``print(d)`` writes: at most ``limit`` lines per list, lines of at most
        ``width`` columns (names elided in the middle)."""
        from tensorviz.core.diff_text import diff_text

        return diff_text(self, width=width, limit=limit)

    def _repr_html_(self) -> str:
        from tensorviz.core.diff_text import diff_html

        return diff_html(self)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (schema ``tensorviz.diff``, version 1)."""
        from tensorviz.core.diff_text import diff_json

        return diff_json(self)


# -- the diff ----------------------------------------------------------------------------------
def diff_layouts(a: Layout, b: Layout) -> LayoutDiff:
    """Compare two layouts (metadata only; linear in tensors). See :class:`LayoutDiff`."""
    with gc_paused():  # as analyze does: the fresh tuples of 1M names need no collector pass
        return _diff(global_tensors(a), global_tensors(b))


def _diff(a: Layout, b: Layout) -> LayoutDiff:
    names_a, names_b = a.names, b.names
    pos, by_rule, rules = match_positions(names_a, names_b)
    ia = np.flatnonzero(pos >= 0)
    ib = pos[ia]
    back = np.full(len(names_b), -1, dtype=np.int64)
    back[ib] = ia
    only_a = tuple(names_a[i] for i in np.flatnonzero(pos < 0).tolist())
    only_b = tuple(names_b[j] for j in np.flatnonzero(back < 0).tolist())
    devices: dict[str, int] = {}
    ca, cb = _Columns(a, devices), _Columns(b, devices)
    return LayoutDiff(
        source_a=a.source,
        source_b=b.source,
        only_a=only_a,
        only_b=only_b,
        renamed=Later(lambda: tuple(zip(take(names_a, by_rule), take(names_b, pos[by_rule])))),
        rules=tuple(rules),
        changed=_changes(ca, cb, ia, ib, names_a),
        ties_lost=_groups_not_kept(a, b, pos, "span"),
        ties_gained=_groups_not_kept(b, a, back, "span"),
        sharing_lost=_groups_not_kept(a, b, pos, "overlap"),
        sharing_gained=_groups_not_kept(b, a, back, "overlap"),
        dtypes_a=_dtype_totals(ca, a),
        dtypes_b=_dtype_totals(cb, b),
        moved=_moved(ca, cb, ia, ib, names_a),
        not_compared=tuple((side, s.name, s.reason) for side, x in (("a", a), ("b", b)) for s in x.skipped),
        layout_a=a,
        layout_b=b,
        matches=pos,
    )


def global_tensors(layout: Layout) -> Layout:
    """A DCP checkpoint's layout as the tensors it saves (one view per global tensor, named by
    its FQN, contiguous in a storage of its own), which is what a model's names compare with;
    any other layout as it is. The global shape is where the saved chunks end."""
    if layout.facts.format != "dcp":
        return layout
    from tensorviz.core import footprint as fp
    from tensorviz.core.layout import Layout as _Layout
    from tensorviz.core.records import StorageInfo, view_record

    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, tuple[str, int]] = {}
    for chunk, info in layout.facts.chunks.items():
        fqn = chunk[: chunk.rindex("[")]
        ends = [o + n for o, n in zip(info["offsets"], info["sizes"])]
        shapes[fqn] = [max(x, y) for x, y in zip(shapes.get(fqn, ends), ends)]
        v = layout[chunk]
        dtypes[fqn] = (v.dtype, v.itemsize)
    views, infos = [], []
    for fqn, shape in shapes.items():
        stride = tuple(int(np.prod(shape[k + 1 :], dtype=np.int64)) for k in range(len(shape)))
        geo = fp.geometry(tuple(shape), stride)
        key = ("global", fqn)
        views.append(view_record(fqn, dtypes[fqn], 0, key, "global", geo, 0, ""))
        infos.append(StorageInfo(key, "global", geo.numel * dtypes[fqn][1]))
    return _Layout(views, infos, layout.skipped, source=layout.source, metadata={"format": "dcp"})


class _Columns:
    """Per view of one layout: the comparable facts as numpy columns (no records)."""

    def __init__(self, layout: Layout, devices: dict[str, int]) -> None:
        t = layout._table
        self.table = t
        self.did, self.gid, self.sidx, self.offset = t.did, t.gid, t.sidx, t.offset
        numel = np.fromiter((g.numel for g in t.geos), np.int64, len(t.geos))
        self.nbytes = numel[t.gid] * t.itemsize if len(t.gid) else np.zeros(0, np.int64)
        self.device = _codes(t.devices, devices)  # per storage; ``devices`` numbers both sides' alike
        self.file = np.array([d in _NO_DEVICE for d in devices], dtype=bool)[self.device]
        whole = whole_files(layout) if self.file.any() else frozenset()
        self.conj = np.zeros(len(t.gid), dtype=bool)  # a conjugate view (z.conj(): its note says so)
        self.conj[layout.noted(CONJ_NOTE)] = True
        self.packed = np.zeros(len(t.devices), dtype=bool)
        if whole:  # a few files: a key per storage is cheap
            self.packed[:] = [t.key(s) in whole for s in range(len(t.devices))]

    def codes(self, kind: str, values: dict) -> np.ndarray:
        """Per distinct value (geometry shape/stride, dtype, device): a code shared across sides."""
        t = self.table
        if kind == "device":
            return self.device  # (numbered when made)
        if kind == "dtype":
            return _codes([d[0] for d in t.dtypes], values)
        return _codes([getattr(g, kind) for g in t.geos], values)

    def value(self, kind: str, i: int) -> Any:
        t = self.table
        if kind in ("shape", "stride"):
            return getattr(t.geos[t.gid[i]], kind)
        if kind == "dtype":
            return t.dtypes[t.did[i]][0]
        if kind == "device":
            return t.devices[t.sidx[i]]
        if kind == "conjugate":
            return bool(self.conj[i])
        return int(self.offset[i] if kind == "offset" else self.nbytes[i])


def _codes(items: list, values: dict) -> np.ndarray:
    """Per item, a number per distinct value (``values``: value -> number, shared by both
    sides, grown here); a dict pass in C, Python only per distinct value."""
    for v in dict.fromkeys(items):
        values.setdefault(v, len(values))
    return np.fromiter(map(values.__getitem__, items), np.int64, len(items))


def _changes(ca: _Columns, cb: _Columns, ia: np.ndarray, ib: np.ndarray, names_a: Sequence[str]) -> tuple:
    """Every (name, field) of the matched pairs that differs, in a's order, fields in FIELDS order."""
    if not ia.size:
        return ()
    per_view = {"shape": "gid", "stride": "gid", "dtype": "did", "device": "sidx"}
    differs: dict[str, np.ndarray] = {}
    for kind, column in per_view.items():
        values: dict = {}
        code_a, code_b = ca.codes(kind, values), cb.codes(kind, values)
        differs[kind] = code_a[getattr(ca, column)[ia]] != code_b[getattr(cb, column)[ib]]
    differs["stride"] &= ~differs["shape"]
    differs["device"] &= ~(ca.file[ca.sidx[ia]] | cb.file[cb.sidx[ib]])
    differs["offset"] = (ca.offset[ia] != cb.offset[ib]) & ~(ca.packed[ca.sidx[ia]] | cb.packed[cb.sidx[ib]])
    differs["nbytes"] = ca.nbytes[ia] != cb.nbytes[ib]
    differs["conjugate"] = ca.conj[ia] != cb.conj[ib]
    found = []
    for f, kind in enumerate(FIELDS):
        for k in np.flatnonzero(differs[kind]).tolist():
            found.append((int(ia[k]), f, kind, k))
    found.sort()
    return tuple(Change(names_a[i], kind, ca.value(kind, i), cb.value(kind, int(ib[k]))) for i, _, kind, k in found)


def _groups_not_kept(x: Layout, y: Layout, to_y: np.ndarray, by: GroupBy) -> tuple[frozenset[str], ...]:
    """Groups of ``by`` with two or more names in ``x`` whose names are not all matched into
    one group of ``y`` (``to_y``: per view of x, its match in y or -1). Vectorised: each
    member's group label in y (a unique negative number when unmatched), then per group the
    least and greatest label over its members, which are contiguous in ``order``."""
    order, bounds = x.group_members(by)
    sizes = np.diff(bounds)
    if not (sizes >= 2).any():
        return ()
    in_big = np.repeat(sizes >= 2, sizes)
    members = order[in_big]
    partner = to_y[members]
    label_y = y.group_index(by) if len(y) else np.zeros(0, np.int64)
    labels = np.where(partner >= 0, label_y[np.maximum(partner, 0)] if label_y.size else -1, -1 - members)
    starts = np.concatenate(([0], np.cumsum(sizes[sizes >= 2])[:-1]))
    lo, hi = np.minimum.reduceat(labels, starts), np.maximum.reduceat(labels, starts)
    lost = np.flatnonzero((lo != hi) | (lo < 0))
    names, ends = x.names, np.append(starts[1:], members.size)
    return tuple(frozenset(names[i] for i in members[starts[g] : ends[g]].tolist()) for g in lost.tolist())


def _dtype_totals(c: _Columns, layout: Layout) -> tuple[DtypeTotal, ...]:
    """Tensors and bytes per dtype, each span group (a tie) counted once, in order of first use."""
    if not len(c.did):
        return ()
    first = np.zeros(len(c.did), dtype=bool)
    order, bounds = layout.group_members("span")
    first[order[bounds[:-1]]] = True
    ntensors = np.bincount(c.did, minlength=len(c.table.dtypes))
    nbytes = np.bincount(c.did, weights=np.where(first, c.nbytes, 0), minlength=len(c.table.dtypes))
    seen = np.unique(c.did, return_index=True)
    out = []
    for d in seen[0][np.argsort(seen[1])].tolist():
        out.append(DtypeTotal(c.table.dtypes[d][0], int(ntensors[d]), int(nbytes[d])))
    return tuple(out)


def _moved(ca: _Columns, cb: _Columns, ia: np.ndarray, ib: np.ndarray, names_a: Sequence[str]) -> tuple:
    """Matched tensors in a different file on each side (only when both sides are files)."""
    if not ia.size or not (ca.file.all() and cb.file.all()):
        return ()
    files_a = [_file_name(str(k[1])) for k in (ca.table.key(s) for s in range(len(ca.table.devices)))]
    files_b = [_file_name(str(k[1])) for k in (cb.table.key(s) for s in range(len(cb.table.devices)))]
    if len(set(files_a)) < 2 and len(set(files_b)) < 2:
        return ()  # one file on each side: nothing to move between
    values: dict = {}
    code_a = np.fromiter((values.setdefault(f, len(values)) for f in files_a), np.int64, len(files_a))
    code_b = np.fromiter((values.setdefault(f, len(values)) for f in files_b), np.int64, len(files_b))
    sa, sb = ca.sidx[ia], cb.sidx[ib]
    out = []
    for k in np.flatnonzero(code_a[sa] != code_b[sb]).tolist():
        out.append(Moved(names_a[int(ia[k])], files_a[int(sa[k])], files_b[int(sb[k])]))
    return tuple(out)
