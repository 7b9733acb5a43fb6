"""Which storages a diagram draws, in which order, decided for all storages at once.

Private to the diagram planner. The planner makes bars only for the storages it will draw (a
few dozen), but the "N more storages" and summary rows count every storage the options select,
so selection and order are decided here from numpy columns of the layout
(:meth:`~tensorviz.core.layout.Layout.storage_stats`, :meth:`~tensorviz.core.layout.Layout.view_spans`,
group sizes): no record per storage or per view, ``O(n log n)`` in views and storages.
Each rule mirrors the per-storage one of :mod:`tensorviz.plan.planner` (the tests compare them).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tensorviz.core.names import search
from tensorviz.core.records import GroupBy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tensorviz.core.layout import Layout
    from tensorviz.core.records import Storage, TensorView
    from tensorviz.plan.model import DiagramOptions

__all__ = [
    "Selection",
    "select",
    "drawing_order",
    "interesting",
    "shared_count",
    "file_indices",
    "file_headers",
    "storage_reasons",
]


def storage_reasons(storage: Storage, views: Sequence[TensorView], whole_file: bool = False) -> tuple[str, ...]:
    """Why a storage is worth drawing: a subset of freed/shared/partial/overlapping/non-contiguous
    ("freed": 0 bytes, yet views address bytes, as after ``t.untyped_storage().resize_(0)``).

    A ``whole_file`` (a safetensors file, every tensor of it on the one storage) is not
    "shared" for holding several tensors; "overlapping" says when two of them share bytes.
    """
    if not views:
        return ("partial",) if storage.nbytes else ()
    reasons = ["freed"] if not storage.nbytes and any(not v.is_empty for v in views) else []
    if len(views) > 1 and not whole_file:
        reasons.append("shared")
    if (storage.unreferenced_nbytes or storage.header_nbytes) and storage.nbytes:  # a file: its header
        reasons.append("partial")
    if len(views) > 1 and sum(v.footprint_nbytes for v in views) > storage.covered_nbytes:
        reasons.append("overlapping")
    if any(not v.is_contiguous for v in views):
        reasons.append("non-contiguous")
    return tuple(reasons)


def file_headers(layout: Layout) -> dict[tuple, tuple[int, int]]:
    """``{storage key: (0, 8 + header length)}`` for the safetensors files of a layout."""
    spans = layout.facts.header
    return {
        ("file", path): (int(ab[0]), int(ab[1]))
        for path, ab in spans.items()
        if isinstance(ab, (tuple, list)) and len(ab) == 2
    }


class Selection(NamedTuple):
    """The storages to draw: ``order`` (storage indices, interesting ones first, then larger,
    then by index) and ``interesting`` (per entry of ``order``: it has a reason to be drawn,
    see :func:`storage_reasons`)."""

    order: np.ndarray
    interesting: np.ndarray


def file_indices(layout: Layout, keys: frozenset) -> np.ndarray:
    """Indices of the storages whose key is in ``keys`` (the whole safetensors files)."""
    out = []
    for key in keys:
        try:
            out.append(layout.storage(key).index)
        except KeyError:
            continue
    return np.array(sorted(out), dtype=np.int64)


def interesting(layout: Layout, whole_file: np.ndarray) -> np.ndarray:
    """Per storage: :func:`storage_reasons` is not empty (vectorised)."""
    st = layout.storage_stats()
    many = st.views > 1
    partial = (st.nbytes - st.covered > 0) & (st.nbytes > 0)
    out = (many & ~whole_file) | partial | (many & (st.footprint_nbytes > st.covered)) | (st.non_contiguous > 0)
    out |= (st.nbytes == 0) & (st.footprint_nbytes > 0)  # freed
    return np.where(st.views == 0, st.nbytes > 0, out)


def select(layout: Layout, opts: DiagramOptions, files: frozenset) -> Selection:
    """The storages ``opts`` select, in drawing order."""
    st = layout.storage_stats()
    ns = st.nbytes.size
    whole = _whole_files(layout, files, ns)
    keep = np.zeros(ns, dtype=bool)
    if opts.storages is None:
        keep[:] = True
    else:
        keep[np.asarray(opts.storages, dtype=np.int64)] = True
    if opts.only_shared and opts.by == "storage":
        overlapping = (st.views > 1) & (st.footprint_nbytes > st.covered)
        keep &= (st.views >= 2) & ~(whole & ~overlapping)
    rx = re.compile(opts.names) if opts.names is not None else None
    if rx is not None or opts.byte_range is not None or (opts.only_shared and opts.by != "storage"):
        keep &= _any_view_kept(layout, opts, rx, st.views, st.nbytes)
    return _ordered(np.flatnonzero(keep), interesting(layout, whole), st.nbytes, _logical_ids(layout, ns))


def drawing_order(layout: Layout, files: frozenset) -> np.ndarray:
    """Every storage index, in the order a diagram with no filter draws them (see :func:`select`)."""
    nbytes = layout.storage_stats().nbytes
    whole = _whole_files(layout, files, nbytes.size)
    return _ordered(np.arange(nbytes.size), interesting(layout, whole), nbytes, _logical_ids(layout, nbytes.size)).order


def _ordered(idx: np.ndarray, hot: np.ndarray, nbytes: np.ndarray, logical: np.ndarray | None = None) -> Selection:
    """Storages ``idx``: interesting ones (``hot``, per storage) first, then larger, then by
    index; then the storages of one logical tensor's pieces (``logical``: a group id per
    storage, -1 for none) are pulled up next to the first of them, so they draw as one group."""
    hot = hot[idx]
    rank = np.lexsort((idx, -nbytes[idx], ~hot))
    if logical is not None and (logical[idx] >= 0).any():
        gid = logical[idx[rank]]
        pos = np.arange(gid.size)
        lead = np.full(int(gid.max(initial=-1)) + 1, gid.size, dtype=np.int64)
        np.minimum.at(lead, gid[gid >= 0], pos[gid >= 0])
        key = np.where(gid >= 0, lead[np.maximum(gid, 0)], pos)
        rank = rank[np.lexsort((pos, key))]
    return Selection(idx[rank], hot[rank])


def _logical_ids(layout: Layout, ns: int) -> np.ndarray | None:
    """Per storage, the logical tensor whose pieces it holds (an id; -1 for none, and for a
    storage holding pieces of several, such as a file); None when no view is a piece."""
    groups = layout.piece_storages()
    if not groups:
        return None
    sids = np.fromiter((s for found in groups.values() for s in found), np.int64)
    gids = np.repeat(np.arange(len(groups)), [len(found) for found in groups.values()])
    out = np.full(ns, -1, dtype=np.int64)
    out[sids] = gids
    out[np.bincount(sids, minlength=ns) > 1] = -1
    return out


def _whole_files(layout: Layout, files: frozenset, ns: int) -> np.ndarray:
    """Per storage: it is one of the whole safetensors files ``files``."""
    whole = np.zeros(ns, dtype=bool)
    whole[file_indices(layout, files)] = True
    return whole


def _any_view_kept(
    layout: Layout, opts: DiagramOptions, rx: re.Pattern | None, views: np.ndarray, nbytes: np.ndarray
) -> np.ndarray:
    """Per storage, whether a filtered diagram keeps it: some view passes every filter (a view
    passes when its bar does: a span group's members share span and group, and the names
    filter keeps a group when any name matches); a storage no view reads stays unless the
    names or shared filters are set or it ends before the byte range."""
    sp = layout.view_spans()
    kept = np.ones(sp.start.size, dtype=bool)
    if rx is not None:
        kept &= np.fromiter((search(rx, n) for n in layout.names), bool, sp.start.size)
    if opts.only_shared and opts.by != "storage":
        kept &= layout.group_sizes(opts.by)[layout.group_index(opts.by)] >= 2
    if opts.byte_range is not None:
        lo, hi = opts.byte_range
        empty = sp.start == sp.stop
        kept &= np.where(empty, (lo <= sp.start) & (sp.start < hi), (sp.start < hi) & (sp.stop > lo))
    out = np.bincount(sp.storage[kept], minlength=views.size) > 0
    if rx is None and not opts.only_shared:
        lone = views == 0
        if opts.byte_range is not None:
            lone &= nbytes > opts.byte_range[0]
        out |= lone
    return out


def shared_count(layout: Layout, by: GroupBy, files: frozenset) -> tuple[int, str]:
    """How many shared groups the header counts, and how (as
    :func:`tensorviz.core.text.shown_shared`, whose groups it counts without making them)."""
    whole = file_indices(layout, files) if by == "storage" else np.zeros(0, dtype=np.int64)
    if not whole.size:
        return int(np.count_nonzero(layout.group_sizes(by) >= 2)), f"by {by}"
    ns = len(layout.storage_stats().nbytes)
    if whole.size == ns:
        return int(np.count_nonzero(layout.group_sizes("overlap") >= 2)), "by shared bytes within a file"
    is_file = np.zeros(ns, dtype=bool)
    is_file[whole] = True
    count = 0
    pairs: tuple[tuple[GroupBy, bool], ...] = (("storage", False), ("overlap", True))
    for grouping, in_files in pairs:
        storage = _group_storage(layout, grouping)
        count += int(np.count_nonzero((layout.group_sizes(grouping) >= 2) & (is_file[storage] == in_files)))
    return count, "by storage; by shared bytes within a file"


def _group_storage(layout: Layout, by: GroupBy) -> np.ndarray:
    order, bounds = layout.group_members(by)
    return layout.view_spans().storage[order[bounds[:-1]]]
