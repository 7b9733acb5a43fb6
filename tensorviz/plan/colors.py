"""Bar colours: a property of the layout, not of the picture.

Private to the planner; :mod:`tensorviz.plan.diagram` re-exports the names.

What is promised, for one Layout:

- **Stable per name.** A name has one colour in every diagram of the layout: whatever the
  grouping (storage, span, overlap), name filter, storage choice, byte zoom, folding or lane
  budget, and in every renderer (the PNG, the explorer's canvas and its static fallback read
  the Diagram's colours). Names with identical byte spans (tied weights) share one colour.
- **Distinct within a storage and between neighbouring storages.** Span groups are numbered
  in the layout's drawing order (:func:`colour_ordinals`) and take palette colour
  ``ordinal mod K`` (``K = len(PALETTE)``, a prime): the groups of a storage of up to K groups
  all differ, and so do any K groups in a row of the unfiltered picture, across storages too
  (any K - 1 in a layout numbered with skips, see below).
- **Repeats only between lanes K or more groups apart** (K - 1 with skips), and every lane is
  labelled, so colour never carries the meaning alone.
- **One role per layer.** A filter that picks the same role from every layer picks ordinals
  ``a, a + p, a + 2p, ...`` (``p`` groups per layer): K distinct colours in a row, as K is
  prime, unless ``p`` is a multiple of K. So where the groups repeat (sizes and names, digits
  aside) every ``p`` groups with ``p`` a multiple of K -- a file of 13 tensors per layer --
  the numbering skips one ordinal per ``p`` groups of a storage, and a role steps by ``p + 1``.

A sharded layout drawn ``by="rank"`` or ``by="mesh:<dim>"`` colours each shard by its rank
or mesh coordinate ``r`` instead: ``PALETTE[r mod K]``
(:func:`tensorviz.plan.ranks.shard_ordinals`, :func:`palette_colour`).
"""

from __future__ import annotations

import re

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.core.records import readonly
from tensorviz.plan.select import drawing_order, file_headers

__all__ = [
    "PALETTE",
    "SHARES_OUTLINE",
    "MIN_OUTLINE_CONTRAST",
    "colour_ordinals",
    "colours_at",
    "palette_colour",
    "relative_luminance",
    "contrast_ratio",
]

#: Bar colours, from Paul Tol's colour-blind-safe sets (bright, vibrant, muted, light, medium
#: contrast), with no greys or reds (those mark unreferenced and overlapping bytes) and none
#: darker than L* 40 (the black hatches of the marks must show on every bar). Picked for the
#: largest smallest CIEDE2000 difference between any two (11.1; 4.1 under simulated protanopia
#: and deuteranopia), and ordered so that colours next to each other in the palette -- the
#: colours of neighbouring lanes -- differ most (25 or more, also under both simulations).
#: Its length, 13, is prime (see the module docstring).
PALETTE = (
    "#4477aa",
    "#ee7733",
    "#99ddff",
    "#009988",
    "#ddaa33",
    "#6699cc",
    "#997700",
    "#aa3377",
    "#999933",
    "#33bbee",
    "#ddcc77",
    "#117733",
    "#44bb99",
)


#: The outline of a bar whose bytes another bar also reads ("shares bytes"), in every picture
#: (static and canvas). It must show on every fill of :data:`PALETTE`: a WCAG contrast ratio
#: of at least :data:`MIN_OUTLINE_CONTRAST` against each (the non-text contrast of WCAG 2.1,
#: 1.4.11). The red it replaces (#d62728) had 1.1 against the blues, teal and green and 1.7
#: against orange; no red can have 3:1 against both #99ddff and #aa3377, so the outline is
#: black (3.45 or more against every palette colour) and its dashes, not its hue, say "shares".
SHARES_OUTLINE = "#000000"
MIN_OUTLINE_CONTRAST = 3.0


def relative_luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of a ``#rrggbb`` colour, from 0 (black) to 1 (white).

    >>> relative_luminance("#ffffff"), round(relative_luminance("#4477aa"), 3)
    (1.0, 0.173)
    """
    rgb = np.array([int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2.1 contrast ratio of two ``#rrggbb`` colours, from 1 (same) to 21 (black on white).

    >>> round(contrast_ratio("#000000", "#ffffff"), 1), round(contrast_ratio(SHARES_OUTLINE, "#aa3377"), 2)
    (21.0, 3.45)
    """
    la, lb = relative_luminance(a), relative_luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def palette_colour(k: int) -> str:
    """The colour of ordinal ``k`` (any integer): ``PALETTE[k mod len(PALETTE)]``."""
    return PALETTE[k % len(PALETTE)]


def colour_ordinals(layout: Layout) -> np.ndarray:
    """Per span group of ``layout`` (the order of ``layout.groups("span")``), its colour ordinal:
    its place when the groups are listed storage by storage in drawing order (the order of a
    diagram with no filter: interesting storages first, then larger, then by index), and
    within a storage by first member in source order -- the order of the lanes; with one
    ordinal skipped per layer where layers of a multiple of K groups repeat (module docstring).

    Computed once per layout (cached with it) in a few numpy passes over the views, plus the
    sort of the storages that every diagram makes anyway.

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(4)
    >>> colour_ordinals(tv.analyze({"a": torch.zeros(2), "w": w, "tied": w, "half": w[:2]})).tolist()
    [2, 0, 1]
    """
    return layout.derived("plan.colors.colour_ordinals", lambda: readonly(_ordinals(layout)))


def colours_at(layout: Layout, positions: np.ndarray) -> list[str]:
    """The colour of the view at each of ``positions`` (indices in source order)."""
    ordinal = colour_ordinals(layout)[layout.group_index("span")[positions]]
    return list(map(PALETTE.__getitem__, (ordinal % len(PALETTE)).tolist()))


def _ordinals(layout: Layout) -> np.ndarray:
    members, bounds = layout.group_members("span")
    out = np.zeros(bounds.size - 1, dtype=np.int64)
    if not out.size:
        return out
    first = members[bounds[:-1]]  # the first view of each span group
    group = layout.group_index("span")
    by_storage = layout.group_members("storage")[0]  # storage by storage, source order within
    g = group[by_storage]
    heads = g[first[g] == by_storage]  # the span groups, storage by storage, by first member within
    spans = layout.view_spans()
    owner = spans.storage[first[heads]]
    counts = np.bincount(owner, minlength=len(layout.storage_stats().nbytes))
    within = np.arange(heads.size) - (np.cumsum(counts) - counts)[owner]  # place in its storage
    order = drawing_order(layout, frozenset(file_headers(layout)))
    at = _starts(counts, order)[owner] + within
    in_order = np.empty_like(at)
    in_order[at] = first[heads]  # the groups' first views, in drawing order
    period = _layer_period(layout, in_order[:PERIOD_SAMPLE])
    if period and period % len(PALETTE) == 0:  # one role per layer would be one colour: skip one per layer
        at = _starts(counts + np.maximum(counts - 1, 0) // period, order)[owner] + within + within // period
    out[heads] = at
    return out


def _starts(width: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per storage, its first ordinal when storage ``s`` takes ``width[s]``, in ``order``."""
    start = np.zeros_like(width)
    start[order] = np.cumsum(width[order]) - width[order]
    return start


#: Groups :func:`_layer_period` compares (the first of them, in drawing order).
PERIOD_SAMPLE = 4096
_DIGITS = re.compile(r"[0-9]+")


def _layer_period(layout: Layout, views: np.ndarray) -> int:
    """The period of the groups in drawing order, given their first ``views`` (positions):
    the smallest ``p`` up to ``3 K`` at which two thirds of the groups, or more, have the size
    and the name pattern (digits aside: ``layers.#.q_proj.weight``) of the group ``p`` later --
    the groups per layer of a file or flat buffer that holds layer after layer; 0 if none.

    >>> import torch, tensorviz as tv
    >>> flat = torch.zeros(40 * 3)
    >>> names = [f"layers.{i}.{r}" for i in range(8) for r in "abcde"]
    >>> lay = tv.analyze({n: flat[3 * k : 3 * k + 3] for k, n in enumerate(names)})
    >>> _layer_period(lay, np.arange(40)), _layer_period(lay, np.arange(40)[::-1])
    (5, 5)
    """
    spans = layout.view_spans()
    size = (spans.stop - spans.start)[views]
    names = layout.names
    patterns: dict[str, int] = {}
    kind = np.fromiter(
        (patterns.setdefault(_DIGITS.sub("#", names[v]), len(patterns)) for v in views.tolist()), np.int64, views.size
    )
    for p in range(1, min(3 * len(PALETTE), views.size // 2) + 1):
        same = (size[p:] == size[:-p]) & (kind[p:] == kind[:-p])
        if np.count_nonzero(same) * 3 >= 2 * (views.size - p):
            return p
    return 0
