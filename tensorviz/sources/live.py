"""Turn torch objects into layout rows, reading metadata only.

The only module that touches torch internals. It never reads tensor data, never copies, never
calls ``.cpu()``, and keeps no reference to a tensor once the layout is built.

Storage identity is the memory (:mod:`tensorviz.sources.memory`): on devices with addresses,
storage objects whose ``[data_ptr, data_ptr + nbytes)`` ranges overlap are one memory; elsewhere
(meta and fake tensors, whose ``data_ptr()`` is 0) it is the storage object itself, keyed
``(device, torch._C._storage_id(t))``.

Speed matters (a state dict can hold 100k tensors): plain tensors take a short path that reads
each attribute once and shares per-dtype, per-device and per-(shape, stride) facts; anything
unusual takes the careful path, which turns every problem into a :class:`Skipped` reason.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator, Mapping
from operator import itemgetter
from typing import Any

import numpy as np
import torch

from tensorviz.core import limits
from tensorviz.core.layout import Layout
from tensorviz.core.names import elide, terminal
from tensorviz.core.records import CONJ_NOTE, Piece, Skipped, record
from tensorviz.core.rows import Rows, gc_paused
from tensorviz.sources.bnb import tag_bitsandbytes
from tensorviz.sources.distributed.fsdp_units import local_record
from tensorviz.sources.memory import address, finish
from tensorviz.sources.modules import module_facts
from tensorviz.sources.objects import (
    READ_ERRORS,
    Unreadable,
    first_line,
    is_container,
    is_module,
    key_text,
    module_items,
    module_problem,
)
from tensorviz.sources.shared import SHARED_READS
from tensorviz.sources.subclasses import flatten, is_traceable
from tensorviz.sources.training import add_training, categorise_module, name_training_state

__all__ = ["collect", "analyze_object", "iter_named_values", "why_not_analysable", "ACCEPTED"]

ACCEPTED = (
    "an nn.Module",
    "a Mapping[str, Tensor] such as a state dict (nested mappings are flattened with '.')",
    "a Tensor",
    "a list or tuple of tensors",
    "a path to a .safetensors file, a *.safetensors.index.json, a model folder or a torch checkpoint (.pt/.pth/.bin)",
)

# torch reports element_size() == 1 for these, but their values are narrower than a byte.
_SUB_BYTE = re.compile(r"^(u?int[1-7]|quint4x2|quint2x4)$")
_TENSOR, _PARAMETER, _STRIDED = torch.Tensor, torch.nn.Parameter, torch.strided
_storage_id = torch._C._storage_id  # type: ignore[attr-defined]  # torch's stubs omit it
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunctionSubclass
_CONTAINERS = (Mapping, list, tuple, torch.nn.Module)
_SPARSE_HINTS = {
    "sparse_coo": "its values and indices live in separate storages with no strided view; analyse "
    "t.coalesce().values() and t.coalesce().indices() instead",
    "sparse_csr": "its values and compressed indices live in separate storages; analyse "
    "t.values(), t.crow_indices() and t.col_indices() instead",
    "sparse_csc": "its values and compressed indices live in separate storages; analyse "
    "t.values(), t.ccol_indices() and t.row_indices() instead",
    "sparse_bsr": "its blocks and compressed indices live in separate storages; analyse "
    "t.values(), t.crow_indices() and t.col_indices() instead",
    "sparse_bsc": "its blocks and compressed indices live in separate storages; analyse "
    "t.values(), t.ccol_indices() and t.row_indices() instead",
    "_mkldnn": "an opaque MKL-DNN tensor has no storage tensorviz can read; analyse t.to_dense()",
}
_DTENSOR_NOTE = "DTensor: only this rank's local shard is shown"
_GIVE_UP = 1024  # look-ups in a row that find nothing before a walk stops looking (tv.diff)


def iter_named_values(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(name, value)`` for every leaf of a module, mapping, sequence or tensor.

    Modules give ``state_dict(keep_vars=True)`` names (tied parameters under every name), then
    their non-persistent buffers. Mappings and sequences nest with ``.``.

    >>> import torch
    >>> [n for n, _ in iter_named_values({"a": torch.zeros(1), "b": [torch.zeros(1)], "c": {"d": 1}})]
    ['a', 'b.0', 'c.d']
    """
    if isinstance(obj, torch.nn.Module):
        yield from module_items(obj, prefix)
    elif isinstance(obj, (Mapping, list, tuple)):
        yield from _iter_nested(obj, prefix)
    else:
        yield (prefix or ("tensor" if isinstance(obj, torch.Tensor) else type(obj).__name__)), obj


def _iter_nested(obj: Mapping | list | tuple, prefix: str) -> Iterator[tuple[str, Any]]:
    """The leaves of nested containers, depth first, with a stack of iterators instead of
    recursion (a dict nested 5,000 deep is valid Python). A container holding itself is
    skipped where it repeats, as the collector does."""
    path = {id(obj)}
    stack = [(prefix, id(obj), _items(obj))]
    while stack:
        pre, ident, items = stack[-1]
        for key, value in items:
            key = key if type(key) is str else key_text(key)
            name = f"{pre}.{key}" if pre else key
            if is_module(value):
                yield from module_items(value, name)
            elif not is_container(value):
                yield name, value
            elif id(value) not in path:
                path.add(id(value))
                stack.append((name, id(value), _items(value)))
                break
        else:
            stack.pop()
            path.discard(ident)


def _items(obj: Mapping | list | tuple) -> Iterator[tuple[Any, Any]]:
    return iter(obj.items()) if isinstance(obj, Mapping) else enumerate(obj)


def why_not_analysable(t: Any) -> str | None:
    """A reason a person understands when ``t`` cannot be analysed as a strided view, else None.

    >>> import torch
    >>> why_not_analysable(torch.zeros(2)) is None, why_not_analysable(3)[:12]
    (True, 'not a tensor')
    """
    if not isinstance(t, torch.Tensor):
        return f"not a tensor ({type(t).__module__}.{type(t).__qualname__}); tensorviz only lays out tensors"
    if t.is_nested:
        return (
            "nested tensor: its components live in a packed buffer plus offsets, with no single "
            "strided view; analyse its parts instead (t.values() and t.offsets() for a jagged one, "
            "t.unbind() for a strided one)"
        )
    if t.layout != torch.strided:
        kind = str(t.layout).removeprefix("torch.")
        return f"{kind} tensor: " + _SPARSE_HINTS.get(kind, "it has no strided view over one storage")
    return _dtype_reason(t)


def _dtype_reason(t: torch.Tensor) -> str | None:
    dtype = str(t.dtype).removeprefix("torch.")
    if t.is_quantized:
        return (
            f"quantized tensor ({dtype}): its bytes are read through a scale and zero point held "
            f"outside the storage; analyse t.int_repr() for the raw layout"
        )
    if _SUB_BYTE.match(dtype):
        return (
            f"sub-byte dtype {dtype}: element_size() says {t.element_size()} byte but each value is "
            f"narrower, and how values are packed depends on the library that made it, so byte "
            f"offsets from it may be wrong; analyse the packed uint8 tensor it came from"
        )
    return None


def _subclass_reason(t: torch.Tensor) -> str | None:
    """Why a tensor subclass's own storage is not where its data lives, or None if it is."""
    cls = type(t)
    if cls is _TENSOR or cls is _PARAMETER or _is_fake(t):
        return None
    name = cls.__qualname__
    if isinstance(t, torch.nn.parameter.UninitializedTensorMixin):  # type: ignore[attr-defined]  # not in stubs
        return (
            f"{name}: a lazy module's parameter has no shape or storage until its first forward; "
            f"run one forward pass (or build the module with concrete sizes) first"
        )
    if cls.__torch_dispatch__ is not _TENSOR.__torch_dispatch__:
        return (
            f"tensor subclass {name} overrides __torch_dispatch__, so its storage may not be where "
            f"its data lives; analyse t.as_subclass(torch.Tensor) if it is a plain view"
        )
    return None


def _is_fake(t: torch.Tensor) -> bool:
    """FakeTensor (and friends) carry real metadata and storage identity, so they are analysed."""
    return type(t).__module__.startswith("torch._subclasses")


def _dtensor_local(t: Any) -> torch.Tensor | None:
    if type(t).__name__ != "DTensor":
        return None
    local = getattr(t, "_local_tensor", None)
    return local if isinstance(local, torch.Tensor) else None


class _Collector:
    """Accumulates layout rows; one pass, metadata only, no reference to a tensor kept.

    Each row holds the storage's id (``untyped_storage()._cdata``, the same number as
    ``torch._C._storage_id``), device and size; :class:`Layout` groups rows by storage later.
    While collecting, every tensor seen is alive (its container holds it), so no two storages
    seen share an id.
    """

    def __init__(self) -> None:
        self.rows = Rows()
        self.skipped: list[Skipped] = []
        self._dtypes: dict[torch.dtype, tuple[str, int]] = {}
        self._complex: dict[torch.dtype, tuple[str, int]] = {}  # (kept off the fast path: see _dtype)
        self._path: set[int] = set()
        self._left = limits.current().live_names  # names this walk may still take
        shared = SHARED_READS.get()  # within tv.diff: what earlier walks read, and what this one reads
        self._shared = shared
        self._reads = shared.read if shared is not None else []
        self._read = shared.read.append if shared is not None else None
        self._begun = len(self._reads)  # reads made before this walk (by earlier walks)
        self._end = self._begun  # the earlier walks' reads looked in (0: none, or given up)
        self._cursor = 0  # the earlier walks' read expected next (see _elsewhere)
        self._last_miss = -2
        self._failed = 0  # look-ups in a row that found nothing
        self._index: dict[int, int] | None = None
        self._copied: list[int] = []  # per row copied from an earlier walk, its read
        self._copied_at: list[int] = []  # and its row here
        self._known: dict[int, tuple] | None = None  # storage id -> an earlier walk's row (see _elsewhere)
        if shared is not None:
            shared.walks += 1

    # -- walking containers ---------------------------------------------------------------
    def walk(self, obj: Any, prefix: str) -> None:
        """Record every leaf under ``obj``, depth first, with a stack of iterators instead of
        recursion (a dict nested 5,000 deep is valid Python)."""
        stack: list[tuple[Iterator, str, int | None]] = []
        self._enter(obj, prefix, stack)
        while stack:
            items, pre, ident = stack[-1]
            nested = self._walk_items(items, pre)
            if nested is None:  # this container is done
                stack.pop()
                self._path.discard(ident)
            else:
                self._enter(nested[1], nested[0], stack)

    def _enter(self, obj: Any, prefix: str, stack: list) -> None:
        """Start walking ``obj``: push its items, or record it when it is a leaf."""
        if isinstance(obj, torch.nn.Module):
            stack.append((module_items(obj, ""), prefix, None))
        elif isinstance(obj, torch.Tensor):
            self.add(prefix or "tensor", obj)
        elif id(obj) in self._path:
            self.skipped.append(
                Skipped(
                    prefix,
                    "the container holds itself (a reference cycle); its contents are listed under the outer name",
                )
            )
        else:
            if prefix:  # flattened names from nested containers can collide ("a.b" vs a -> b)
                self.rows.unique = False
            self._path.add(id(obj))
            stack.append((_items(obj), prefix, id(obj)))

    def _walk_items(self, items: Iterator, prefix: str) -> tuple[str, Any] | None:
        """The hot loop: plain strided tensors are recorded inline; all else goes the careful way.

        Stops at a nested container and returns ``(its name, it)`` (``items`` resumes after
        it); returns None when ``items`` is exhausted.
        """
        pre = f"{prefix}." if prefix else ""
        dtypes, rows, read, reads, end = self._dtypes, self.rows.rows, self._read, self._reads, self._end
        append, copied, copied_at = rows.append, self._copied.append, self._copied_at.append
        cursor, known = self._cursor, self._known
        for key, t in items:
            self._left -= 1
            if self._left < 0:  # a Mapping of 10**7 names, or one whose iteration never ends
                raise limits.exceeded(_where(prefix), "live_names", "a Mapping, module or list of that many names")
            if type(key) is not str:
                key = self._key_text(key)
            name = pre + key
            if cursor < end and (seen := reads[cursor])[0] is t:  # read by an earlier walk of this tv.diff
                copied(cursor)  # (a read tensor is plain: no need to look at t itself)
                copied_at(len(rows))
                append((name, *seen[1][1:]))
                cursor += 1
                continue
            cls = type(t)
            if cls is Unreadable:
                self.skipped.append(Skipped(name, t.reason))
                continue
            if cls is _TENSOR or cls is _PARAMETER:
                if end:  # read by an earlier walk elsewhere, maybe
                    j = self._elsewhere(t, cursor)
                    if j >= 0:
                        copied(j)
                        copied_at(len(rows))
                        append((name, *reads[j][1][1:]))
                        cursor = j + 1
                        continue
                    cursor, end, known = cursor + 1, self._end, self._known
                dt = dtypes.get(t.dtype)
                # Nested (strided) tensors have no strides: stride() raises and they go the
                # careful way, like sparse, mkldnn and storage-less tensors (no storage).
                if dt is not None and t.layout is _STRIDED:
                    try:
                        st = t.untyped_storage()
                        shape, stride, offset = t.shape, t.stride(), t.storage_offset()
                    except Exception:  # noqa: BLE001 - the careful path says what went wrong
                        self._add_careful(name, t)
                        continue
                    ident = st._cdata
                    if known is not None and (had := known.get(ident)) is not None:  # its storage was read
                        row = (name, ident, had[2], had[3], dt, shape, stride, offset, None, had[9])
                    else:
                        row = (name, ident, st.device, st.nbytes(), dt, shape, stride, offset, None, address(st))
                    append(row)
                    if read is not None:
                        read((t, row))
                else:
                    self._add_careful(name, t)
            elif is_container(t):
                self._cursor = cursor
                return name, t
            else:
                self._add_careful(name, t)
        self._cursor = cursor
        return None

    def _elsewhere(self, t: Any, cursor: int) -> int:
        """Where an earlier walk read ``t``, found not where the walks' orders put it (-1: not
        read). A miss right after a hit is a tensor in place of another (a cast, a clone: read
        afresh, as it is new); a second miss in a row means the orders differ here, and from
        then on a miss is looked up by ``id`` among the earlier walks' reads, until
        :data:`_GIVE_UP` look-ups in a row find nothing (reading afresh is always right, only
        slower)."""
        if self._index is None:
            if self._last_miss != cursor - 1:
                self._last_miss = cursor
                return -1
            assert self._shared is not None  # (only walks after a first one look)
            self._index = self._shared.index()
        self._last_miss = cursor
        j = self._index.get(id(t), -1)
        if 0 <= j < self._end and self._reads[j][0] is t:
            self._failed = 0
            return j
        self._failed += 1
        if self._failed > _GIVE_UP:  # these tensors are new ones (a state_dict() of detached copies),
            assert self._shared is not None
            self._known = self._shared.storages(self._end)  # over storages read before, maybe
            self._end = 0
        return -1

    def _key_text(self, key: Any) -> str:
        """A non-string key as a name part (1 and "1" would collide, so names may repeat)."""
        self.rows.unique = False
        return key_text(key)

    # -- one value, the careful way -------------------------------------------------------
    def add(self, name: str, value: Any) -> None:
        """Record one named value: a row for an analysable tensor, else a Skipped reason."""
        if isinstance(value, _CONTAINERS):
            self.walk(value, name)
        else:
            self._walk_items(iter(((name, value),)), "")

    def _add_careful(self, name: str, value: Any) -> None:
        try:
            reason = self._try_add(name, value)
        except READ_ERRORS + (RecursionError,) as err:  # one odd value never stops the analysis
            reason = f"its metadata cannot be read ({type(err).__name__}: {first_line(err)})"
        if reason is not None:
            self.skipped.append(Skipped(name, reason))

    def _try_add(self, name: str, value: Any) -> str | None:
        note = ""
        local = _dtensor_local(value)
        if local is not None:
            value, note = local, _DTENSOR_NOTE
        if is_traceable(value) and not type(value).__module__.startswith("torch.nested"):
            return self._add_pieces(name, value)  # (a jagged nested tensor keeps its own reason)
        reason = why_not_analysable(value) or _subclass_reason(value)
        if reason is not None:
            return reason
        return self._add_plain(name, value, note)

    def _add_pieces(self, name: str, value: torch.Tensor) -> str | None:
        """A traceable tensor subclass as its inner tensors (recursively), each a row named
        ``<name>.<inner>`` with a :class:`Piece` saying what it is part of; or why not. The
        inner tensors go the hot path (plain tensors) or the careful one (anything else)."""
        inner = flatten(value)
        if isinstance(inner, str):
            return inner
        with _NO_TORCH_FUNCTION():  # the wrapper's own metadata; its __torch_function__ costs ~7 us a read
            kind, dtype, shape = type(value).__qualname__, str(value.dtype).removeprefix("torch."), tuple(value.shape)
        rows, pieces = self.rows.rows, self.rows.pieces
        first, pre = len(rows), name + "."
        self._walk_items(iter([(pre + part, t) for part, t in inner]), "")
        cut = len(pre)
        for i in range(first, len(rows)):
            pieces[i] = record(Piece, (name, rows[i][0][cut:], kind, dtype, shape, 0, ()))
        return None

    def _add_plain(self, name: str, value: torch.Tensor, note: str) -> str | None:
        """One plain (or fake) strided tensor as a row, or why it cannot be one."""
        dt = self._dtype(value)
        st = value.untyped_storage()
        ident, nbytes = _storage_id(value), st.nbytes()
        where = 0 if _is_fake(value) or value.device.type == "meta" else address(st)
        shape, stride, offset = tuple(value.shape), tuple(value.stride()), value.storage_offset()
        if not all(type(x) is int for x in (*shape, *stride, offset, nbytes)):
            # Never int() a SymInt: that would add a guard to the caller's shape environment.
            return (
                f"symbolic sizes or strides (shape {shape}, stride {stride}): byte offsets need "
                f"concrete numbers; analyse real, meta or static-shape fake tensors instead"
            )
        self.rows.geometry(shape, stride)  # fails here, not later, on odd metadata
        if value.is_conj():
            note = f"{note}; {CONJ_NOTE}" if note else CONJ_NOTE
        row = (name, ident, value.device, nbytes, dt, shape, stride, offset, None, where)
        if note:
            self.rows.notes[len(self.rows.rows)] = note
        self.rows.rows.append(row)
        if not note and self._read is not None and (type(value) is _TENSOR or type(value) is _PARAMETER):
            self._read((value, row))  # read once per tv.diff
        return None

    def _dtype(self, t: torch.Tensor) -> tuple[str, int]:
        """(name, itemsize) of an analysable dtype, remembered for the fast path -- but for a
        complex dtype, whose tensors keep going the careful way (a conjugate view is noted)."""
        dt = self._dtypes.get(t.dtype) or self._complex.get(t.dtype)
        if dt is None:
            dt = (str(t.dtype).removeprefix("torch."), t.element_size())
            (self._complex if t.is_complex() else self._dtypes)[t.dtype] = dt
        return dt

    def layout(self, source: str, metadata: dict | None = None) -> Layout:
        """The Layout of the rows; on first use it keys storage objects over one memory as that
        memory (:func:`tensorviz.sources.memory.finish`)."""
        self.rows.finish = finish
        layout = Layout._from_rows(self.rows, self.skipped, source=source, metadata=metadata)
        shared = self._shared
        if shared is not None and layout._raw is self.rows:  # (no row was dropped as a repeated name)
            if shared.walks == 1 and not self._begun:  # the first walk: read j is its row rows_of[j]
                rows_of = _rows_of(self.rows.rows, self._reads)
                shared.first = (layout, rows_of) if rows_of is not None else None
            elif shared.walks == 2 and shared.first is not None and self._copied:
                first, rows_of = shared.first
                src = np.full(len(self.rows.rows), -1, dtype=np.int64)
                src[np.array(self._copied_at, dtype=np.int64)] = rows_of[np.array(self._copied, dtype=np.int64)]
                self.rows.copied = (first, src)
        return layout


def _rows_of(rows: list[tuple], reads: list[tuple[Any, tuple]]) -> np.ndarray | None:
    """Per read (``(tensor, row)``, in walk order), the position of its row in ``rows``: every
    row is a read (the common case: one per row), or found by identity; None when a read's row
    is no longer there (a training checkpoint's rows are renamed after the walk)."""
    if len(rows) == len(reads) and all(map(operator.is_, rows, map(itemgetter(1), reads))):
        return np.arange(len(rows))
    where = {id(row): k for k, row in enumerate(rows)}
    found = [where.get(id(row), -1) for _, row in reads]
    return np.array(found, dtype=np.int64) if -1 not in found else None


def _where(prefix: str) -> str:
    return f"the values under {terminal(elide(prefix, 80))!r}" if prefix else "the object analysed"


def collect(items: Any, source: str = "") -> Layout:
    """Build a :class:`Layout` from ``(name, value)`` pairs (not nested)."""
    c = _Collector()
    c.rows.unique = False  # arbitrary pairs may repeat a name
    with gc_paused():
        for name, value in items:
            c.add(name, value)
        return c.layout(source)


def analyze_object(obj: Any, *, optimizer: Any = None, grad: bool | None = None) -> Layout:
    """Analyse an in-memory object (module, mapping, tensor, sequence); for a module, also its
    gradients (``grad``: None means "when an optimizer is given") and its optimizer's state
    (:mod:`tensorviz.sources.training`)."""
    if not isinstance(obj, (torch.nn.Module, Mapping, torch.Tensor, list, tuple)):
        raise TypeError(
            f"tensorviz.analyze cannot read a {type(obj).__module__}.{type(obj).__qualname__}; "
            f"it accepts " + "; ".join(ACCEPTED)
        )
    if not isinstance(obj, torch.nn.Module) and (optimizer is not None or grad):
        raise TypeError(
            f"optimizer= and grad= need the model (an nn.Module) to name the state after its "
            f"parameters; got a {type(obj).__qualname__}"
        )
    c = _Collector()
    with gc_paused():
        c.walk(obj, "")
        if not isinstance(obj, torch.nn.Module):
            try:
                training = (
                    name_training_state(c.rows, obj, iter_named_values(obj)) if isinstance(obj, Mapping) else None
                )
            except READ_ERRORS:  # a value whose own code raises: the walk already skipped it by name
                training = None
            return c.layout(type(obj).__name__, {"training": training} if training else None)
        if module_problem(obj):  # a module cycle was skipped, with why, by the walk
            return c.layout(type(obj).__name__)
        # Submodule classes and buffer names, for the module tree (tensorviz.core.tree).
        facts = module_facts(obj)
        metadata: dict[str, Any] = {"modules": facts}
        categorise_module(c.rows, facts["buffers"])
        tag_bitsandbytes(c.rows, obj)  # Params4bit weights: the logical weight on each stored piece
        if optimizer is not None or grad:
            with_grads = optimizer is not None if grad is None else grad
            metadata["training"] = add_training(c.add, c.rows, obj, optimizer, with_grads)
        fsdp = local_record(obj)
        if fsdp:  # FSDP2's sharded and gathered parameter storages on this rank
            metadata["fsdp"] = fsdp
        return c.layout(type(obj).__name__, metadata)
