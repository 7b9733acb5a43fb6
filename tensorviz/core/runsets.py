"""Canonical run sets: the algebra every footprint module shares.

Pure numpy. A *run set* is an ``int64`` array of shape ``(k, 2)`` holding sorted, disjoint,
non-abutting half-open byte ranges ``[a, b)``; every function here returns that canonical form.
:mod:`tensorviz.core.footprint` re-exports them.

>>> union(np.array([[4, 6], [0, 2], [2, 3]])).tolist()
[[0, 3], [4, 6]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["EMPTY", "freeze", "union", "total", "intersection_nbytes"]

EMPTY = np.zeros((0, 2), dtype=np.int64)
EMPTY.flags.writeable = False


def freeze(runs: np.ndarray) -> np.ndarray:
    runs = np.ascontiguousarray(runs, dtype=np.int64)
    runs.flags.writeable = False
    return runs


def union(*run_sets: np.ndarray) -> np.ndarray:
    """Union of run sets (or of any ``(k, 2)`` arrays of half-open ranges)."""
    runs = np.concatenate([np.asarray(r, dtype=np.int64).reshape(-1, 2) for r in run_sets]) if run_sets else EMPTY
    runs = runs[runs[:, 1] > runs[:, 0]]
    if runs.shape[0] <= 1:
        return freeze(runs.copy())
    runs = runs[np.argsort(runs[:, 0], kind="stable")]
    ends = np.maximum.accumulate(runs[:, 1])
    new = np.empty(runs.shape[0], dtype=bool)
    new[0] = True
    new[1:] = runs[1:, 0] > ends[:-1]  # abutting runs merge
    firsts = np.flatnonzero(new)
    lasts = np.concatenate((firsts[1:] - 1, [runs.shape[0] - 1]))
    return freeze(np.stack((runs[firsts, 0], ends[lasts]), axis=1))


def total(runs: np.ndarray) -> int:
    """Number of bytes in a canonical run set."""
    return int((runs[:, 1] - runs[:, 0]).sum()) if len(runs) else 0


def intersection_nbytes(a: np.ndarray, b: np.ndarray) -> int:
    """Bytes common to two canonical run sets (a linear sweep over their endpoints)."""
    if len(a) == 0 or len(b) == 0:
        return 0
    if a[-1, 1] <= b[0, 0] or b[-1, 1] <= a[0, 0]:
        return 0
    if len(a) == 1 and len(b) == 1:
        return max(0, int(min(a[0, 1], b[0, 1]) - max(a[0, 0], b[0, 0])))
    pos = np.concatenate((a[:, 0], a[:, 1], b[:, 0], b[:, 1]))
    delta = np.concatenate((np.ones(len(a)), -np.ones(len(a)), np.ones(len(b)), -np.ones(len(b)))).astype(np.int8)
    order = np.argsort(pos, kind="stable")
    pos, depth = pos[order], np.cumsum(delta[order])
    return int((np.diff(pos)[depth[:-1] == 2]).sum())
