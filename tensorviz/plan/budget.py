"""The lane budget: how many rows each storage block gets when not all fit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


# -- step 4: the lane budget ------------------------------------------------------------------
def allocate(needs: Sequence[int], budget: int, min_cap: int = 6, total: int | None = None) -> tuple[list[int], int]:
    """Lanes per block under a budget, blocks in priority order.

    All blocks if they fit. Otherwise a common cap on the largest blocks (water filling), over
    as many leading blocks as keep that cap useful: at least ``min_cap`` lanes (extent, a few
    views, the "more" row), or every shown block complete. One lane is kept for the
    "… N more storages" row when blocks are dropped. Returns the caps and the blocks shown.

    ``needs`` may list only the leading blocks of ``total`` (default: all), as long as the
    leading ones already ask for more than ``budget`` lanes at three each: later ones cannot
    be shown. ``O(k log k)`` for ``k`` needs: the largest count shown is found by a binary
    search (a count that works leaves room for every smaller one).

    >>> allocate([10, 2], 8)
    ([6, 2], 2)
    """
    total = len(needs) if total is None else total
    if len(needs) == total and sum(needs) <= budget:
        return list(needs), len(needs)
    arr = np.asarray(needs, dtype=np.int64)
    three = np.concatenate(([0], np.cumsum(np.minimum(arr, 3))))
    top = np.maximum.accumulate(arr) if arr.size else arr

    def fits(shown: int) -> int | None:  # the cap if ``shown`` leading blocks can be drawn
        room = budget - (shown < total)
        if three[shown] > room and shown > 1:
            return None
        cap = _water_level(arr[:shown], room)
        return cap if cap >= min_cap or top[shown - 1] <= cap or shown == 1 else None

    if not len(arr):
        return [], 0
    lo, hi = 1, len(arr)  # fits(1) always holds
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) is not None else (lo, mid - 1)
    cap = fits(lo)
    assert cap is not None  # fits(1) always holds, and lo only moves to a shown count that fits
    return np.minimum(arr[:lo], cap).tolist(), lo


def _water_level(needs: np.ndarray, room: int) -> int:
    """The largest cap c (>= 3) with sum(min(n, c)) <= room."""
    srt = np.sort(needs)
    below = np.concatenate(([0], np.cumsum(srt)))

    def used(c: int) -> int:
        k = int(np.searchsorted(srt, c, side="left"))  # needs below c count whole
        return int(below[k]) + c * (len(srt) - k)

    lo, hi = 3, max(int(srt[-1]) if len(srt) else 3, 3)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if used(mid) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo
