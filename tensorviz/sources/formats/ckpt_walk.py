"""Walking what a torch checkpoint's pickle holds, in time and memory linear in its size.

A pickle is a program: 40 KB of it can nest lists 20,000 deep, 4 MB can name one tensor two
million times, and one memoized 10 MB string can be a key in 300 dicts. So, before loading,
:mod:`tensorviz.sources.formats.pickle_scan` scans the pickle (its opcode budget, every call it makes);
after loading, :func:`walk` visits the object graph with an explicit stack of iterators (no
recursion, nothing pushed per child), builds each name once from its parent's (names longer
than :data:`NAME_CAP` keep their start and end around "…"), describes keys and values with
bounded work, keeps at most :data:`MAX_VALUES` values, and stops with a
:class:`~tensorviz.core.errors.TooLargeError` past the ``tensor_refs`` or ``values`` budget
(:mod:`tensorviz.core.limits`; fixed, whatever the archive holds). A tensor whose pickled state
sets attributes that shadow ``torch.Tensor``'s own (``untyped_storage``, ``element_size``, ...) is refused: its metadata
could lie.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from tensorviz.core import limits
from tensorviz.core.errors import FileFormatError
from tensorviz.core.names import elide
from tensorviz.sources.parts import short

#: Longest name kept whole; longer ones keep their start and end around "…".
NAME_CAP = 300
#: Most values described in ``metadata["values"]`` (and top-level entries in ``contents``).
MAX_VALUES = 50
_NAMED_CONTAINERS = 10_000  # containers whose names "<same object as ...>" can quote

Walked = tuple[list[tuple[str, torch.Tensor]], dict[str, str], dict[str, str], int]


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

    def __init__(self, path: str) -> None:
        self.path = path
        budget = limits.current()
        self.max_views, self.max_leaves = budget.tensor_refs, budget.values
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
            raise limits.exceeded(self.path, "values", "values walked in the loaded checkpoint")
        if isinstance(value, torch.Tensor):
            name = self._unique(name or "tensor")
            _check_tensor(self.path, name, value)
            self.tensors.append((name, value))
            if len(self.tensors) > self.max_views:
                raise limits.exceeded(self.path, "tensor_refs", "is one tensor named many times over?")
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


def walk(path: str, obj: Any) -> Walked:
    """Tensors (with their path names), the first values (as short text), a top-level summary,
    and how many values there were in all; iterative, linear in the size of ``obj``, within the
    fixed ``tensor_refs`` and ``values`` budgets."""
    w = _Walk(path)
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
