"""The explorer's control state, and its mapping to diagram options (pure: no widgets).

Equal pictures must have equal states: the state is the key of the explorer's render cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from tensorviz.core.layout import Layout
from tensorviz.explorer.text import byte_text
from tensorviz.plan.ranks import is_sharded, mesh_dims

#: Toggle labels and the ``by=`` value each one selects.
GROUPINGS = (("storage", "storage"), ("exact span", "span"), ("overlap", "overlap"))
_LABEL_OF = {by: label for label, by in GROUPINGS}


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
    """

    by: str = "storage"
    names: str = ""
    only_shared: bool = False
    show_unreferenced: bool = True
    storage: int | None = None
    byte_range: tuple[int, int] | None = None
    expand_simple: bool = False

    def diagram_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`tensorviz.plan.diagram.diagram`."""
        return {
            "by": self.by,
            "names": self.names or None,
            "storages": None if self.storage is None else [self.storage],
            "only_shared": self.only_shared,
            "byte_range": self.byte_range,
            "show_unreferenced": self.show_unreferenced,
            "expand_simple": self.expand_simple,
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
        return replace(state, byte_range=None)
    n = len(layout.storages)
    if not 0 <= state.storage < n:
        raise ValueError(
            f"storage index {state.storage} is out of range: this layout has {n} storage{'s' * (n != 1)} (0..{n - 1})"
        )
    if state.byte_range is None:
        return state
    lo, hi = (int(x) for x in state.byte_range)
    nbytes = layout.storages[state.storage].nbytes
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
