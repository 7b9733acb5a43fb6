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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tensorviz.core.attribution import attribution

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout

__all__ = ["module_bytes", "owned_bytes", "ModuleBytes", "DiffLike"]


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
    ``ModuleBytes(path, a, b)``, largest change first, then by path."""
    a, b = d.layout_a, d.layout_b
    if a is None or b is None:
        return ()
    in_a = {nb: na for na, nb in d.renamed}
    totals: dict[str, list[int]] = {}
    _add(totals, a.names, owned_bytes(a), 0, depth)
    _add(totals, (in_a.get(n, n) for n in b.names), owned_bytes(b), 1, depth)
    moved = [ModuleBytes(p, ab[0], ab[1]) for p, ab in totals.items() if ab[0] != ab[1]]
    moved.sort(key=lambda m: (-abs(m.delta), m.path))
    return tuple(moved)


def _add(totals: dict[str, list[int]], names: Iterable[str], own: list[int], side: int, depth: int | None) -> None:
    for name, n in zip(names, own):
        parts = name.split(".")
        last = len(parts) if depth is None else min(depth, len(parts))
        for k in range(1, last + 1):
            path = ".".join(parts[:k])
            entry = totals.get(path)
            if entry is None:
                entry = totals[path] = [0, 0]
            entry[side] += n
