"""Where the bytes went between two layouts: bytes per module on each side, counted once.

Pure Python + numpy. Each view owns the bytes the module tree attributes to it (the first name
in source order that reads a byte owns it; :mod:`tensorviz.core.tree`), so a module's bytes here
are exactly its ``nbytes`` in ``layout.tree()``. Side b's names are put in a's words first (a
matched pair counts under a's name), so a renamed wrapper does not read as everything moving.

>>> import torch, tensorviz as tv
>>> from tensorviz.core.diff import diff_layouts
>>> w = torch.zeros(10, 4)
>>> d = diff_layouts(tv.analyze({"emb.weight": w, "head.weight": w}),
...                  tv.analyze({"emb.weight": w, "head.weight": w.clone()}))
>>> [(m.path, m.a, m.b) for m in d.modules()]
[('head', 0, 160), ('head.weight', 0, 160)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter, methodcaller
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tensorviz.core.attribution import attribution
from tensorviz.core.table import first_seen, take

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout

__all__ = ["module_bytes", "prefix_totals", "owned_bytes", "ModuleBytes", "DiffLike"]


class DiffLike(Protocol):
    """What the diff's words and module totals read of a :class:`~tensorviz.core.diff.LayoutDiff`
    (which satisfies it); naming the reads here keeps this module and :mod:`tensorviz.core.diff_text`
    below the diff, whose methods call them, so the module graph has no cycle."""

    @property
    def source_a(self) -> str: ...
    @property
    def source_b(self) -> str: ...
    @property
    def only_a(self) -> tuple[str, ...]: ...
    @property
    def only_b(self) -> tuple[str, ...]: ...
    @property
    def renamed(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def rules(self) -> tuple[str, ...]: ...
    @property
    def changed(self) -> tuple[Any, ...]: ...  # Change records
    @property
    def ties_lost(self) -> tuple[frozenset[str], ...]: ...
    @property
    def ties_gained(self) -> tuple[frozenset[str], ...]: ...
    @property
    def not_compared(self) -> tuple[tuple[str, str, str], ...]: ...
    @property
    def sharing_lost(self) -> tuple[frozenset[str], ...]: ...
    @property
    def sharing_gained(self) -> tuple[frozenset[str], ...]: ...
    @property
    def dtypes_a(self) -> tuple[Any, ...]: ...  # DtypeTotal records
    @property
    def dtypes_b(self) -> tuple[Any, ...]: ...
    @property
    def moved(self) -> tuple[Any, ...]: ...  # Moved records
    @property
    def content(self) -> Any: ...  # a ContentDiff, or None
    @property
    def layout_a(self) -> Layout | None: ...
    @property
    def layout_b(self) -> Layout | None: ...
    @property
    def matches(self) -> np.ndarray | None: ...
    @property
    def same(self) -> bool: ...
    @property
    def matched(self) -> int: ...
    def modules(self, depth: int | None = 2) -> tuple[ModuleBytes, ...]: ...


@dataclass(frozen=True)
class ModuleBytes:
    """Bytes of one module (a name prefix, in a's names) on each side, counted once as the
    module tree counts them (:mod:`tensorviz.core.tree`)."""

    path: str
    a: int
    b: int

    @property
    def delta(self) -> int:
        return self.b - self.a


def owned_bytes(layout: Layout) -> list[int]:
    """Per view (source order), the bytes the module tree counts under its name."""
    if not len(layout):
        return []
    return layout.derived("diff.owned_bytes", lambda: attribution(layout)[0])


def module_bytes(d: DiffLike, depth: int | None = 2) -> tuple[ModuleBytes, ...]:
    """Per prefix (down to ``depth`` levels; None for all) whose bytes differ between the sides:
    ``ModuleBytes(path, a, b)``, largest change first, then by path.

    A prefix's bytes differ exactly where the bytes its names own differ: b's totals are a's
    plus the sum of the per-name changes (a matched name's bytes on b less those on a, a name
    only in b, less a name only in a), so side b's prefixes are summed only over the names
    whose bytes changed (``d.matches`` aligns the sides)."""
    a, b = d.layout_a, d.layout_b
    if a is None or b is None:
        return ()
    own_a = np.asarray(owned_bytes(a), dtype=np.int64)
    own_b = np.asarray(owned_bytes(b), dtype=np.int64)
    to_b = d.matches
    assert to_b is not None  # (tv.diff's diffs hold their matching)
    hit = np.flatnonzero(to_b >= 0)
    change = own_b[to_b[hit]] - own_a[hit]
    moved_a = np.concatenate((hit[change != 0], np.flatnonzero(to_b < 0)))  # rows of a whose bytes changed
    delta_a = np.concatenate((change[change != 0], -own_a[to_b < 0]))
    from_b = np.ones(len(own_b), dtype=bool)
    from_b[to_b[hit]] = False  # rows of b matched by none of a: their bytes are new
    new_b = np.flatnonzero(from_b & (own_b != 0))
    names = take(a.names, moved_a) + take(b.names, new_b)
    delta = prefix_totals(names, np.concatenate((delta_a, own_b[new_b])), depth)
    changed = {p: v for p, v in delta.items() if v}
    if not changed:
        return ()
    totals = prefix_totals(a.names, own_a, depth)
    moved = [ModuleBytes(p, totals.get(p, 0), totals.get(p, 0) + v) for p, v in changed.items()]
    moved.sort(key=lambda m: (-abs(m.delta), m.path))
    return tuple(moved)


def prefix_totals(names: Sequence[str], own: Sequence[int] | np.ndarray, depth: int | None) -> dict[str, int]:
    """Per prefix of the dotted ``names`` (whole parts, down to ``depth`` of them; None for
    all), the sum of ``own`` over the names under it (a name is under itself). Exact in int64.

    Level by level from the names up: each level's distinct paths are numbered in one dict
    pass, their sums added by numpy, and their parents cut by ``str.rpartition`` (C-level
    passes; Python only per distinct path kept), so 100k names take milliseconds.

    >>> prefix_totals(["a.0.w", "a.1.w", "a", "b.w"], [4, 6, 1, 2], 2)
    {'a': 11, 'b.w': 2, 'a.0': 4, 'a.1': 6, 'b': 2}
    """
    totals: dict[str, int] = {}
    paths, values = list(names), np.asarray(own, dtype=np.int64)
    while paths:
        rank, _, distinct = first_seen(paths, len(paths))
        sums = np.zeros(len(distinct), dtype=np.int64)
        np.add.at(sums, rank, values)
        if depth is None:
            keep = np.ones(len(distinct), dtype=bool)
        else:
            keep = np.fromiter(map(_DOTS, distinct), np.int64, len(distinct)) < depth
        level = dict(zip(compress(distinct, keep.tolist()), sums[keep].tolist()))
        for p in level.keys() & totals.keys():  # a name that is also another name's prefix
            level[p] += totals[p]
        totals.update(level)
        cut = list(map(_PARENT, distinct))
        up = np.fromiter(map(bool, map(_SEP, cut)), bool, len(cut))
        paths, values = list(map(_FIRST, compress(cut, up.tolist()))), sums[up]
    return totals


_FIRST, _SEP = itemgetter(0), itemgetter(1)
_PARENT, _DOTS = methodcaller("rpartition", "."), methodcaller("count", ".")
