"""Walking what a torch checkpoint's pickle holds, in time and memory linear in its size.

A pickle is a program: 40 KB of it can nest lists 20,000 deep, 4 MB can name one tensor two
million times, and one memoized 10 MB string can be a key in 300 dicts. So, before loading,
:func:`check_pickle_ops` counts the pickle's opcodes (up to a cap) when the pickle is large;
after loading, :func:`walk` visits the object graph with an explicit stack of iterators (no
recursion, nothing pushed per child), builds each name once from its parent's (names longer
than :data:`NAME_CAP` keep their start and end around "…"), describes keys and values with
bounded work, keeps at most :data:`MAX_VALUES` values, and stops with a
:class:`~tensorviz.core.errors.TooLargeError` past :data:`MAX_VIEWS` tensor references or
:data:`MAX_LEAVES` values. A tensor whose pickled state sets attributes that shadow
``torch.Tensor``'s own (``untyped_storage``, ``element_size``, ...) is refused: its metadata
could lie.
"""

from __future__ import annotations

import pickletools
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from tensorviz.core.errors import FileFormatError, TooLargeError
from tensorviz.core.names import elide
from tensorviz.sources.parts import short

#: Longest name kept whole; longer ones keep their start and end around "…".
NAME_CAP = 300
#: Most tensor references (views) a checkpoint may hold, plus :data:`VIEWS_PER_STORAGE` for each
#: storage record in its archive: each costs a view record.
MAX_VIEWS = 150_000
#: Most values (containers and leaves) walked, plus :data:`OPS_PER_STORAGE` per storage record.
MAX_LEAVES = 2_000_000
#: Most values described in ``metadata["values"]`` (and top-level entries in ``contents``).
MAX_VALUES = 50
#: Most opcodes that build or store an object (the weights-only unpickler takes ~1-2 us each),
#: plus :data:`OPS_PER_STORAGE` for each storage record (``data/N``) the archive really holds.
MAX_OPS = 1_000_000
#: The limits grow with what the file really holds: a state dict costs ~30 opcodes and one view
#: per tensor, and each tensor's storage is a record of the zip archive (its own ~100 bytes of
#: headers at least), so a real optimizer checkpoint of 500k tensors loads, while 2 million
#: references to one storage, or millions of empty lists, are refused.
OPS_PER_STORAGE = 32
VIEWS_PER_STORAGE = 4
#: An opcode is at least a byte: pickles up to this size are loaded as they are; larger ones
#: have their opcodes counted first (~0.6 us each, stopping at the cap).
SCAN_FROM = MAX_OPS + 1

_NAMED_CONTAINERS = 10_000  # containers whose names "<same object as ...>" can quote

Walked = tuple[list[tuple[str, torch.Tensor]], dict[str, str], dict[str, str], int]


# -- before loading: the pickle's size in opcodes --------------------------------------------------
def _opcode_table() -> tuple[list[int | None], list[int], list[bool]]:
    """Per opcode byte: argument size (or length-field size), argument kind, and whether free."""
    free_ops = {"PROTO", "FRAME", "STOP", "MARK"}  # a memo put costs a dict entry: counted
    sizes: list[int | None] = [None] * 256
    kinds, free = [0] * 256, [False] * 256
    by_n = {
        pickletools.TAKEN_FROM_ARGUMENT1: 1,
        pickletools.TAKEN_FROM_ARGUMENT4: 4,
        pickletools.TAKEN_FROM_ARGUMENT4U: 4,
        pickletools.TAKEN_FROM_ARGUMENT8U: 8,
    }
    for op in pickletools.opcodes:
        c, arg = ord(op.code), op.arg
        free[c] = op.name in free_ops
        if arg is None or arg.n >= 0:
            sizes[c] = 0 if arg is None else arg.n
        elif arg.n == pickletools.UP_TO_NEWLINE:
            kinds[c] = 2 if op.name in ("GLOBAL", "INST") else 1  # two lines, or one
        else:
            kinds[c], sizes[c] = 3, by_n[arg.n]
    return sizes, kinds, free


_SIZES, _KINDS, _FREE = _opcode_table()


def count_ops(data: bytes, cap: int) -> int:
    """Opcodes in ``data`` that build or store an object, counting stops past ``cap``.

    A malformed pickle ends the count (the unpickler reports it properly).
    """
    i, n, ops = 0, len(data), 0
    sizes, kinds, free, find = _SIZES, _KINDS, _FREE, data.find
    while i < n:
        c = data[i]
        i += 1
        kind = kinds[c]
        if kind == 0:
            size = sizes[c]
            if size is None:
                return ops
            i += size
        elif kind == 3:
            size = sizes[c]
            i += size + int.from_bytes(data[i : i + size], "little")
        else:
            i = find(b"\n", i) + 1
            if kind == 2 and i:
                i = find(b"\n", i) + 1
            if not i:
                return ops
        if not free[c]:
            ops += 1
            if ops > cap or c == 0x2E:  # STOP
                return ops
    return ops


def ops_limit(n_storages: int) -> int:
    """Most objects a pickle may build when its archive holds ``n_storages`` storage records."""
    return MAX_OPS + OPS_PER_STORAGE * n_storages


def check_pickle_ops(path: str, data: bytes, n_storages: int = 0) -> None:
    """Refuse a pickle that would build more objects than :func:`ops_limit` (before loading it)."""
    cap = ops_limit(n_storages)
    if len(data) > cap and count_ops(data, cap) > cap:
        raise TooLargeError(
            f"{path}: its pickle builds more than {cap:,} objects ({len(data):,} bytes of pickle, "
            f"{n_storages:,} storages); tensorviz refuses to load it (the work limit for a checkpoint's "
            f"metadata: {MAX_OPS:,} plus {OPS_PER_STORAGE} per storage). A state dict needs about 30 "
            f"per tensor: is this a state dict?"
        )


# -- after loading: tensors, names and values ------------------------------------------------------
def key_text(key: Any) -> str:
    """A dict key or list index as name text, with bounded work whatever the key is."""
    if type(key) is str:
        return elide(key, NAME_CAP)
    if type(key) is int:
        return str(key) if -(10**30) < key < 10**30 else f"<int of {key.bit_length()} bits>"
    if isinstance(key, (str, int, float, bool, type(None))):
        return elide(str(key), NAME_CAP) if not isinstance(key, int) or abs(key) < 10**30 else "<int>"
    return f"<{type(key).__name__}>"


def _name(parent: str, key: Any) -> str:
    name = f"{parent}.{key_text(key)}" if parent else key_text(key)
    return name if len(name) <= NAME_CAP else elide(name, NAME_CAP)


def _children(value: Any) -> Iterator[tuple[Any, Any]] | None:
    """The items to descend into, or None for a leaf (a number, string, list of numbers...)."""
    if isinstance(value, Mapping):
        return iter(value.items())
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.Tensor, Mapping, list, tuple)) for v in value):
        return enumerate(value)
    return None


def _check_tensor(path: str, name: str, t: torch.Tensor) -> None:
    """Refuse a tensor whose pickled state shadows torch.Tensor's own attributes."""
    state = t.__dict__
    lying = [k for k in state if not isinstance(k, str) or hasattr(torch.Tensor, k)]
    if lying:
        shown = ", ".join(short(k, 40) for k in lying[:4])
        raise FileFormatError(
            f"{path}: tensor {name!r}: its pickle sets {shown} on the tensor (state given to "
            f"_rebuild_from_type_v2), shadowing torch.Tensor's own; the checkpoint could misreport "
            f"its storage, size or shape, so tensorviz refuses it"
        )


class _Said(str):
    """A value's description already written (not a value to describe)."""


class _Walk:
    """The state of one walk: what was found so far, and the work limits."""

    def __init__(self, path: str, n_storages: int = 0) -> None:
        self.path = path
        self.max_views = MAX_VIEWS + VIEWS_PER_STORAGE * n_storages
        self.max_leaves = MAX_LEAVES + OPS_PER_STORAGE * n_storages
        self.tensors: list[tuple[str, torch.Tensor]] = []
        self.values: dict[str, str] = {}
        self.n_values = 0
        self.per_top: dict[str, int] = {}
        self.top_values: dict[str, str] = {}
        self.seen: dict[int, str | None] = {}  # id -> name, kept for the first containers only
        self.leaves = 0
        self.elided: set[str] = set()  # elided tensor names given so far

    def visit(self, name: str, top: str, value: Any, depth: int) -> Iterator[tuple[Any, Any]] | None:
        """Record ``value``; returns its children to walk, if any."""
        self.leaves += 1
        if self.leaves > self.max_leaves:
            raise TooLargeError(
                f"{self.path}: more than {self.max_leaves:,} values in the checkpoint; refusing to walk it"
            )
        if isinstance(value, torch.Tensor):
            name = self._unique(name or "tensor")
            _check_tensor(self.path, name, value)
            self.tensors.append((name, value))
            if len(self.tensors) > self.max_views:
                raise TooLargeError(
                    f"{self.path}: more than {self.max_views:,} tensor references in the checkpoint (the work "
                    f"limit: one view each, {MAX_VIEWS:,} plus {VIEWS_PER_STORAGE} per storage); is one "
                    f"tensor named many times over?"
                )
            self.per_top[top] = self.per_top.get(top, 0) + 1
            return None
        children = _children(value)
        if children is not None and id(value) in self.seen:
            first = self.seen[id(value)]
            again = "<the same object again>" if first is None else f"<same object as {first or 'the root'}>"
            self._value(name, depth, _Said(again))
            return None
        if children is None:
            self._value(name, depth, value)
            return None
        self.seen[id(value)] = name if len(self.seen) < _NAMED_CONTAINERS else None
        return children

    def _unique(self, name: str) -> str:
        """An elided name made unique: two long paths may share their start and end."""
        if len(name) < NAME_CAP or "…" not in name:
            return name
        if name in self.elided:
            name = f"{name} #{len(self.tensors)}"
        self.elided.add(name)
        return name

    def _value(self, name: str, depth: int, value: Any) -> None:
        """Count a value; describe it (bounded work) only if it is among those kept."""
        self.n_values += 1
        keep, top = len(self.values) < MAX_VALUES, depth == 1 and len(self.top_values) < MAX_VALUES
        if keep or top:
            text = str(value) if isinstance(value, _Said) else short(value)
            if keep:
                self.values[name or "value"] = text
            if top:
                self.top_values[name] = text


def walk(path: str, obj: Any, n_storages: int = 0) -> Walked:
    """Tensors (with their path names), the first values (as short text), a top-level summary,
    and how many values there were in all; iterative, linear in the size of ``obj``. The work
    limits grow with ``n_storages``, the storage records the archive holds."""
    w = _Walk(path, n_storages)
    first = w.visit("", "", obj, 0)
    stack: list[tuple[str, str, int, Iterator[tuple[Any, Any]]]] = [("", "", 0, first)] if first else []
    while stack:
        name, top, depth, children = stack[-1]
        item = next(children, None)
        if item is None:
            stack.pop()
            continue
        key, value = item
        child = _name(name, key)
        child_top = top or child
        more = w.visit(child, child_top, value, depth + 1)
        if more is not None:
            stack.append((child, child_top, depth + 1, more))
    return w.tensors, w.values, _contents(obj, len(w.tensors), w.per_top, w.top_values), w.n_values


def _contents(obj: Any, n_tensors: int, per_top: dict[str, int], values: dict[str, str]) -> dict[str, str]:
    """What the top level holds besides tensors: wrappers with their tensor counts, and values."""
    if not isinstance(obj, Mapping):
        return {} if isinstance(obj, torch.Tensor) else {"": f"{type(obj).__name__} with {n_tensors} tensors"}
    out: dict[str, str] = {}
    others = 0
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            continue  # a flat state dict: its tensors are the layout
        if len(out) >= MAX_VALUES:
            others += 1
            continue
        k = key_text(k)
        n = per_top.get(k, 0)
        out[k] = f"{n} tensor{'s' * (n != 1)}" if n else values.get(k) or f"{type(v).__name__} without tensors"
    if others:
        out["…"] = f"{others} more entries"
    return out
