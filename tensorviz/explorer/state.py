"""The explorer's control state, and its mapping to diagram options (pure: no widgets).

Equal pictures must have equal states: the state is the key of the explorer's render cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.core.records import GROUPINGS as _BYS
from tensorviz.core.units import byte_text
from tensorviz.plan.ranks import is_sharded, mesh_dims

#: The toggle's label of each grouping where it is not the grouping's own name.
LABELS = {"span": "exact span"}
#: Toggle labels and the ``by=`` value each one selects: core's one list of groupings
#: (:data:`tensorviz.core.records.GROUPINGS`), labelled.
GROUPINGS = tuple((LABELS.get(by, by), by) for by in _BYS)
_LABEL_OF: dict[str, str] = {by: label for label, by in GROUPINGS}
#: The largest storages the diagram draws first for a model of many storages (besides every
#: shared or freed one, up to :data:`KEY_SHARED`); "show all" draws the rest.
KEY_LARGEST = 8
KEY_SHARED = 32


def groupings(layout: Layout) -> tuple[tuple[str, str], ...]:
    """The toggle's choices for ``layout``: the three groupings, plus "by rank" and one per mesh
    dimension for a sharded model or a DCP checkpoint (bars coloured by shard)."""
    if not is_sharded(layout):
        return GROUPINGS
    return GROUPINGS + (("by rank", "rank"),) + tuple((f"mesh {d}", f"mesh:{d}") for d in mesh_dims(layout))


@dataclass(frozen=True)
class ExplorerState:
    """Everything the controls say, normalised so equal pictures have equal states (cache keys).

    ``storage`` is a storage index (``None``: every storage); ``byte_range`` zooms into that
    storage and is ``None`` when it covers the whole storage or no storage is selected.
    ``key`` (set by :func:`normalise`, never by the controls) are the storages drawn when
    neither one storage nor a name filter is chosen and ``all_storages`` is off: those that
    matter (:func:`key_storages`), or ``None`` when that is every storage.
    """

    by: str = "storage"
    names: str = ""
    only_shared: bool = False
    show_unreferenced: bool = True
    storage: int | None = None
    byte_range: tuple[int, int] | None = None
    expand_simple: bool = False
    all_storages: bool = False
    key: tuple[int, ...] | None = None

    def diagram_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`tensorviz.plan.diagram.diagram`."""
        storages = [self.storage] if self.storage is not None else None if self.key is None else list(self.key)
        return {
            "by": self.by,
            "names": self.names or None,
            "storages": storages,
            "only_shared": self.only_shared,
            "byte_range": self.byte_range,
            "show_unreferenced": self.show_unreferenced,
            # the storages that matter are few, and the largest are simple: draw them, not a summary row
            "expand_simple": self.expand_simple or self.key is not None,
        }

    def describe(self) -> str:
        """A short human-readable summary (used in captions and the plain-text bundle)."""
        parts = [f"grouped by {_LABEL_OF.get(self.by, self.by)}"]
        if self.names:
            parts.append(f"names matching /{self.names}/")
        if self.only_shared:
            parts.append("only shared")
        if not self.show_unreferenced:
            parts.append("unreferenced bytes hidden")
        if self.expand_simple:
            parts.append("simple storages expanded")
        if self.key is not None:
            parts.append(f"the {len(self.key):,} storages that matter (shared, freed, largest)")
        if self.storage is not None:
            parts.append(f"storage #{self.storage}")
        if self.byte_range is not None:
            lo, hi = self.byte_range
            parts.append(f"bytes [{byte_text(lo)}, {byte_text(hi)})")
        return ", ".join(parts)


def normalise(state: ExplorerState, layout: Layout) -> ExplorerState:
    """Check a state and drop zooms that show everything, so equal pictures share one cache entry.

    Raises:
        ValueError: a bad name pattern, an unknown grouping, a storage index out of range, or a
            bad byte range (the message says which, and the fix).
    """
    problem = pattern_problem(state.names)
    if problem:
        raise ValueError(problem)
    allowed = [by for _, by in groupings(layout)]
    if state.by not in allowed:
        raise ValueError(f"by must be one of {', '.join(map(repr, allowed))}, got {state.by!r}")
    if state.storage is None:
        focused = not state.all_storages and not state.names
        return replace(state, byte_range=None, key=key_storages(layout) if focused else None)
    return _one_storage(replace(state, key=None), state.storage, layout)


def _one_storage(state: ExplorerState, storage: int, layout: Layout) -> ExplorerState:
    """:func:`normalise` of a state on one storage: its index checked, a whole-storage zoom dropped."""
    n = len(layout.storages)
    if not 0 <= storage < n:
        raise ValueError(
            f"storage index {storage} is out of range: this layout has {n} storage{'s' * (n != 1)} (0..{n - 1})"
        )
    if state.byte_range is None:
        return state
    lo, hi = (int(x) for x in state.byte_range)
    nbytes = layout.storages[storage].nbytes
    if nbytes == 0:  # nothing to zoom into
        return replace(state, byte_range=None)
    if not 0 <= lo < hi <= nbytes:
        raise ValueError(
            f"byte_range {(lo, hi)} must satisfy 0 <= lo < hi <= {nbytes} (the size of storage #{state.storage})"
        )
    return replace(state, byte_range=None if (lo, hi) == (0, nbytes) else (lo, hi))


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable name filter, in words; None when it compiles."""
    try:
        re.compile(pattern)
    except re.error as err:
        return (
            f"name filter {pattern!r} is not a valid regular expression: {err}. "
            f"Fix it (escape brackets as \\( ) or clear the box to show every tensor"
        )
    return None


def control_problem(state: ExplorerState, layout: Layout) -> str | None:
    """Why what the controls say cannot be drawn yet, in words; None when it can.

    These are states a user passes through (a half-typed pattern, both zoom handles on one
    stop): the explorer keeps the previous picture and says why, instead of failing.
    """
    problem = pattern_problem(state.names)
    if problem:
        return problem + "; the picture still shows the previous filter."
    if state.storage is not None and state.byte_range is not None:
        lo, hi = state.byte_range
        if lo == hi and layout.storages[state.storage].nbytes:
            return (
                f"the byte range [{byte_text(lo)}, {byte_text(hi)}) is empty: drag the two handles apart; "
                f"the picture still shows the previous range."
            )
    return None


def key_storages(layout: Layout) -> tuple[int, ...] | None:
    """The storages that matter, in layout order: every shared one (two or more views: ties,
    slices, fused weights; at most :data:`KEY_SHARED`, largest first), every freed one (no
    bytes, views still reading it) and the :data:`KEY_LARGEST` largest; ``None`` when that is
    every storage (a small model draws them all). Computed once per layout.
    """
    return layout.derived("explorer.key_storages", lambda: _key_storages(layout))


def _key_storages(layout: Layout) -> tuple[int, ...] | None:
    stores = layout.storages
    if len(stores) <= KEY_LARGEST:
        return None
    nbytes = np.fromiter((s.nbytes for s in stores), dtype=np.int64, count=len(stores))
    shared = np.fromiter((len(s.names) > 1 for s in stores), dtype=bool, count=len(stores))
    freed = [s.index for s in stores if s.nbytes == 0 and any(layout[n].stop > 0 for n in s.names)]
    by_size = np.argsort(-nbytes, kind="stable")
    picked = set(by_size[:KEY_LARGEST].tolist()) | set(freed)
    picked |= set(by_size[shared[by_size]][:KEY_SHARED].tolist())
    return None if len(picked) == len(stores) else tuple(sorted(picked))
