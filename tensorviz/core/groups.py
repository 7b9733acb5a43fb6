"""Groups of views -- by storage, by exact span, or by real byte overlap -- as functions of a
layout's columns (:class:`~tensorviz.core.table.Table`), in one vectorised pass.

:class:`~tensorviz.core.layout.Layout` calls these with what they need (the table, each
grouping's ``(order, bounds)``, the storages' name tuples) and caches the answers.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from tensorviz.core.records import GROUPINGS, Group
from tensorviz.core.sweep import same_keys
from tensorviz.core.table import Table, slices_sharing, take

__all__ = ["check_grouping", "span_labels", "group_columns", "group_records", "inverse"]


def check_grouping(by: object) -> None:
    """ValueError unless ``by`` is one of :data:`~tensorviz.core.records.GROUPINGS`."""
    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {GROUPINGS}, got {by!r}")


def span_labels(t: Table) -> np.ndarray:
    """Per view, a label shared exactly by the views of one storage with one identical
    non-empty span (an empty view gets a label of its own)."""
    n = len(t.sidx)
    empty = t.stop == t.start
    return np.where(empty, np.arange(n) + n, same_keys(t.sidx, t.start, t.stop))


def group_spans(start: np.ndarray, stop: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte range covered by the non-empty spans of each group (members laid out group by group,
    group ``g`` starting at ``first[g]``); a group of empty views sits at its first member's start."""
    live = stop > start
    lo = np.minimum.reduceat(np.where(live, start, np.iinfo(np.int64).max), first)
    hi = np.maximum.reduceat(np.where(live, stop, -1), first)
    dead = hi < 0
    lo[dead], hi[dead] = start[first][dead], start[first][dead]
    return lo, hi


def group_columns(
    by: str,
    t: Table,
    grouped: tuple[np.ndarray, np.ndarray],
    by_storage: tuple[np.ndarray, np.ndarray],
    names: np.ndarray,
    snames: list[tuple[str, ...]],
) -> tuple[list, ...]:
    """Per group: names, storage key, start, stop, exact -- the facts, before any record.

    ``grouped`` is the ``(order, bounds)`` of grouping ``by``, ``by_storage`` that of the
    grouping by storage, ``names`` every view's name (an object array), ``snames`` each
    storage's name tuple (reused by a group that holds every view of its storage).
    """
    if not len(t.sidx):
        return [], [], [], [], []
    order, bounds = grouped
    first = bounds[:-1]
    lo, hi = group_spans(t.start[order], t.stop[order], first)
    exact = [True] * len(first)
    if by == "overlap":
        # A group joined through a footprint over the run budget may be too large.
        bad = np.add.reduceat((~t.exact[order]).astype(np.int64), first) > 0
        exact = (~(bad & (np.diff(bounds) > 1))).tolist()
    owner = t.sidx[order[first]]
    return (
        _group_names(by, grouped, by_storage, owner, names, snames),
        take(t.keys, owner),
        lo.tolist(),
        hi.tolist(),
        exact,
    )


def _group_names(
    by: str,
    grouped: tuple[np.ndarray, np.ndarray],
    by_storage: tuple[np.ndarray, np.ndarray],
    owner: np.ndarray,
    names: np.ndarray,
    snames: list[tuple[str, ...]],
) -> list:
    """Names of each group; a group holding every view of its storage reuses that tuple."""
    order, bounds = grouped
    if by == "storage":
        return snames[: len(bounds) - 1]
    shared = list(map(snames.__getitem__, owner.tolist()))
    whole = np.diff(bounds) == np.diff(by_storage[1])[owner]
    if whole.all():
        return shared
    return slices_sharing(names, bounds, shared, whole, order)


def group_records(by: str, columns: tuple[list, ...]) -> tuple[Group, ...]:
    """A :class:`Group` per group from :func:`group_columns`."""
    new = object.__new__
    out = []
    for values in zip(repeat(by), *columns):
        g = new(Group)  # a frozen record filled directly (see records.record)
        d = g.__dict__
        d["by"], d["names"], d["storage"], d["start"], d["stop"], d["exact"] = values
        out.append(g)
    return tuple(out)


def inverse(order: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per member, the group it is in (group ``g`` is ``order[bounds[g]:bounds[g + 1]]``)."""
    out = np.empty(order.size, dtype=np.int64)
    out[order] = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    return out
