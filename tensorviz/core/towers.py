"""Which strided footprints are towers: copies of a small base run set at a fixed period.

Pure numpy, imported by :mod:`tensorviz.core.footprint` (for each Geometry) and measured by
:mod:`tensorviz.core.periodic`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["BASE_BUDGET", "tower_geometry", "listed", "is_row_major"]

#: Most runs a tower's base (or a base rewritten to a common period) may hold.
BASE_BUDGET = 1 << 20


def tower_geometry(
    shape: Sequence[int], stride: Sequence[int], explicit: int
) -> tuple[np.ndarray, int, int] | None | bool:
    """The element tower ``(base runs, period, count)`` of a view needing more than ``explicit``
    runs; None when it needs no more (list it); False when it cannot be a tower (its outermost
    dimension's copies interleave, or its base would be over :data:`BASE_BUDGET` runs).

    Dimensions that continue one another (``stride == inner stride * inner size``) are merged
    first, so ``x[:, ::2]`` of a row-major matrix is one progression of single elements.

    >>> base, period, count = tower_geometry((4096, 2048), (4096, 2), explicit=1000)
    >>> base.tolist(), period, count
    ([[0, 1]], 2, 8388608)
    """
    dims = sorted((st, size) for size, st in zip(shape, stride) if size > 1 and st != 0)
    merged: list[list[int]] = []
    for st, size in dims:
        if merged and merged[-1][0] * merged[-1][1] == st:
            merged[-1][1] *= size
        else:
            merged.append([st, size])
    block, k = 1, 0
    while k < len(merged) and merged[k][0] <= block:
        block += (merged[k][1] - 1) * merged[k][0]
        k += 1
    outer = merged[k:]
    count = math.prod(size for _, size in outer)
    if count <= explicit:
        return None
    period, copies = outer[-1]
    inner = outer[:-1]
    if count // copies > BASE_BUDGET:
        return False
    starts = np.zeros(1, dtype=np.int64)
    for st, size in reversed(inner):
        starts = (starts[:, None] + np.arange(size, dtype=np.int64) * st).ravel()
    starts.sort()
    breaks = np.flatnonzero(np.diff(starts) > block)  # equal-length runs: merge where they meet
    firsts, lasts = np.r_[0, breaks + 1], np.r_[breaks, starts.size - 1]
    base = np.stack((starts[firsts], starts[lasts] + block), axis=1)
    if int(base[-1, 1]) > period:
        return False
    return base, period, copies


def listed(tower: tuple[np.ndarray, int, int], reach: int, budget: int) -> np.ndarray:
    """A tower's element runs, listed copy by copy when it has at most ``budget`` runs; else its
    span ``[0, reach)`` (an upper bound)."""
    base, period, count = tower
    if len(base) * count > budget:
        return np.array([[0, reach]], dtype=np.int64)
    runs = (base[None] + (np.arange(count, dtype=np.int64) * period)[:, None, None]).reshape(-1, 2)
    new = np.r_[True, runs[1:, 0] > runs[:-1, 1]]  # sorted and disjoint: merge where copies abut
    firsts = np.flatnonzero(new)
    return np.stack((runs[firsts, 0], runs[np.r_[firsts[1:] - 1, len(runs) - 1], 1]), axis=1)


def is_row_major(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """torch's row-major contiguity rule, from metadata alone (size-1 dims ignored).

    >>> is_row_major((2, 3), (3, 1)), is_row_major((3, 2), (1, 3)), is_row_major((2, 1), (1, 7))
    (True, False, True)
    """
    if 0 in shape:
        return True
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True
