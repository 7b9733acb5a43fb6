"""The lane budget: how many rows each storage block gets when not all fit."""

from __future__ import annotations


# -- step 4: the lane budget ------------------------------------------------------------------
def allocate(needs: list[int], budget: int, min_cap: int = 6) -> tuple[list[int], int]:
    """Lanes per block under a budget, blocks in priority order.

    All blocks if they fit. Otherwise a common cap on the largest blocks (water filling), over
    as many leading blocks as keep that cap useful: at least ``min_cap`` lanes (extent, a few
    views, the "more" row), or every shown block complete. One lane is kept for the
    "… N more storages" row when blocks are dropped. Returns the caps and the blocks shown.

    >>> allocate([10, 2], 8)
    ([6, 2], 2)
    """
    if sum(needs) <= budget:
        return list(needs), len(needs)
    for shown in range(len(needs), 0, -1):
        room = budget - (shown < len(needs))
        part = needs[:shown]
        if sum(min(n, 3) for n in part) > room and shown > 1:
            continue
        cap = _water_level(part, room)
        if cap >= min_cap or all(n <= cap for n in part) or shown == 1:
            return [min(n, cap) for n in part], shown
    return [], 0


def _water_level(needs: list[int], room: int) -> int:
    """The largest cap c (>= 3) with sum(min(n, c)) <= room."""
    lo, hi = 3, max(max(needs, default=3), 3)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in needs) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo
