"""Bar colours: a colour-blind-friendly palette, picked by a hash of each group's first name.

Private to the planner; :mod:`tensorviz.plan.diagram` re-exports the names.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

__all__ = ["PALETTE", "color_for", "assign_colors"]

#: Bar colours (colour-blind-friendly, no greys or reds: those mark unreferenced and overlapping
#: bytes). A group's colour is picked by a hash of its first name (see :func:`assign_colors`),
#: so it never depends on the order of the source; tied names share their group's colour.
PALETTE = (
    "#4477aa",
    "#66ccee",
    "#228833",
    "#ccbb44",
    "#aa3377",
    "#5566dd",
    "#009988",
    "#ee7733",
    "#88ccaa",
    "#997700",
    "#6699cc",
    "#bb99dd",
)


def color_for(name: str) -> str:
    """The palette colour of a group whose first name is ``name`` (stable across runs)."""
    return PALETTE[zlib.crc32(name.encode("utf-8", "surrogatepass")) % len(PALETTE)]


def assign_colors(first_names: Sequence[str]) -> dict[str, str]:
    """Colours for the groups drawn together: each group starts at the hash of its first name
    (:func:`color_for`) and moves to the next free palette colour on a collision, visiting
    groups in hash order -- so colours depend on which groups are shown, never on their order.

    >>> cs = assign_colors(["a", "b", "c"]); len(set(cs.values()))
    3
    """
    n = len(PALETTE)
    keyed = sorted({(zlib.crc32(name.encode("utf-8", "surrogatepass")), name) for name in first_names})
    out: dict[str, str] = {}
    used: set[int] = set()
    for h, name in keyed:
        if len(used) == n:
            used.clear()
        k = h % n
        while k in used:
            k = (k + 1) % n
        used.add(k)
        out[name] = PALETTE[k]
    return out
