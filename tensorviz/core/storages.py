"""Storages and their coverage, as functions of a layout's columns (:class:`~tensorviz.core.table.Table`).

Per storage: its views, the bytes they cover, the unreferenced rest and the views that read
every byte -- vectorised over all storages. :class:`~tensorviz.core.layout.Layout` calls these
with what they need (the table, the sweep, the views grouped by storage) and caches the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tensorviz.core.records import Storage, StorageKey, StorageStats, readonly, record
from tensorviz.core.sweep import Sweep
from tensorviz.core.table import Table, slices, slices_sharing, take

__all__ = ["storage_names", "storage_columns", "storage_records", "storage_record", "storage_stats", "header_nbytes"]

_NO_NAMES = np.empty(1, dtype=object)  # broadcasts () into object arrays (a bare () would not)
_NO_NAMES[0] = ()


def storage_names(names: np.ndarray, order: np.ndarray, bounds: np.ndarray, nstores: int) -> list[tuple[str, ...]]:
    """Per storage, the names of its views in source order (``order``/``bounds``: the views
    grouped by storage): one tuple each, shared by the Storage records and by every group that
    holds all of a storage's views."""
    return slices(names, bounds, order) + [()] * (nstores + 1 - len(bounds))


def complete_names(
    t: Table, names: np.ndarray, order: np.ndarray, bounds: np.ndarray, snames: list[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """Per storage, the names (source order) of the views that read every byte of it."""
    ns = len(t.nbytes)
    if not len(t.sidx):
        return [()] * ns
    whole = (t.dense & (t.start == 0) & (t.stop == t.nbytes[t.sidx]) & (t.stop > 0))[order]
    size = np.diff(bounds)
    count = np.add.reduceat(whole.astype(np.int64), bounds[:-1])
    # Usually every view of a storage is whole (its names tuple is reused) or none is ('()').
    mixed = (count > 0) & (count < size)
    pick = np.flatnonzero(whole & np.repeat(mixed, size))
    wbounds = np.zeros(count.size + 1, dtype=np.int64)
    np.cumsum(np.where(mixed, count, 0), out=wbounds[1:])
    shared = np.fromiter(snames[: count.size], object, count.size)
    shared[count == 0] = _NO_NAMES
    complete = slices_sharing(tuple(take(names, order[pick])), wbounds, shared, ~mixed)
    return complete + [()] * (ns - count.size)


def header_nbytes(t: Table, spans: Mapping[str, Any], skey: Callable[[], Mapping[StorageKey, int]]) -> np.ndarray:
    """Per storage, the bytes of a whole file's header (``spans``: the facts' ``header``, file ->
    ``(start, stop)``; a safetensors file's 8 + N bytes), which no view reads and which are not
    unreferenced; 0 for every other storage. ``skey()`` maps keys to indices (made only for files)."""
    out = np.zeros(len(t.nbytes), dtype=np.int64)
    for path, span in spans.items():
        s = skey().get(("file", path)) if isinstance(span, (tuple, list)) and len(span) == 2 else None
        if s is not None:
            lo, hi = max(0, int(span[0])), min(int(span[1]), int(t.nbytes[s]))
            out[s] = max(0, hi - lo)
    return readonly(out)


def storage_columns(
    t: Table, sw: Sweep, snames: list[tuple[str, ...]], complete: list[tuple[str, ...]], header: np.ndarray
) -> tuple[list, ...]:
    """Per storage: device, nbytes, names, covered, unreferenced (less a file's ``header``),
    complete names, label and exact -- the facts of every :class:`Storage` record, before any
    record."""
    covered = sw.covered
    exact = np.ones(len(t.nbytes), dtype=bool) if sw.inexact is None else ~sw.inexact
    exact[t.sidx[~t.exact]] = False
    return (
        t.devices,
        t.nbytes.tolist(),
        snames,
        covered.tolist(),
        (t.nbytes - covered - header).tolist(),
        complete,
        t.labels,
        exact.tolist(),
    )


def storage_records(
    keys: list, columns: tuple[list, ...], whole: frozenset[StorageKey], header: np.ndarray
) -> list[Storage]:
    """A :class:`Storage` per storage from :func:`storage_columns`; ``whole``: the keys of the
    storages that are whole files read header-only, ``header`` their headers' bytes."""
    new = object.__new__
    out = []
    for values in zip(keys, range(len(keys)), *columns):
        # A frozen record filled directly (see records.record): 60k storages are common.
        st = new(Storage)
        d = st.__dict__
        (
            d["key"],
            d["index"],
            d["device"],
            d["nbytes"],
            d["names"],
            d["covered_nbytes"],
            d["unreferenced_nbytes"],
            d["complete_names"],
            d["label"],
            d["exact"],
        ) = values
        if whole:  # else the class defaults: False, 0
            d["whole_file"] = d["key"] in whole
            d["header_nbytes"] = int(header[d["index"]])
        out.append(st)
    return out


def storage_record(
    t: Table, s: int, members: np.ndarray, names: np.ndarray, sw: Sweep, whole: frozenset, header: np.ndarray
) -> Storage:
    """The Storage record ``s`` alone (``members``: its views' positions), equal to the one
    :func:`storage_records` makes: a diagram of 1M storages needs a few dozen, not all."""
    member_names = tuple(names[members].tolist())
    nbytes = int(t.nbytes[s])
    full = t.dense[members] & (t.start[members] == 0) & (t.stop[members] == nbytes) & (t.stop[members] > 0)
    complete = member_names if full.all() and member_names else tuple(names[members[full]].tolist())
    covered = int(sw.covered[s])
    key = t.key(s)
    head = int(header[s])
    values = (key, s, t.devices[s], nbytes, member_names, covered, nbytes - covered - head, complete, t.labels[s])
    exact = bool(t.exact[members].all()) and not (sw.inexact is not None and sw.inexact[s])
    return record(Storage, (*values, exact, key in whole, head))


def storage_stats(t: Table, sw: Sweep, order: np.ndarray, bounds: np.ndarray) -> StorageStats:
    """Per storage, numpy columns of the facts a picture of thousands of storages needs (see
    :class:`StorageStats`); ``order``/``bounds``: the views grouped by storage."""
    ns = len(t.nbytes)
    geos = t.geos
    footprint = np.fromiter((g.footprint for g in geos), np.int64, len(geos))[t.gid] * t.itemsize
    contiguous = np.fromiter((g.contiguous for g in geos), bool, len(geos))[t.gid]
    total = np.zeros(ns, dtype=np.int64)
    if len(t.sidx):
        live = np.flatnonzero(np.diff(bounds))
        total[live] = np.add.reduceat(footprint[order], bounds[:-1][live])
    columns = (
        t.nbytes,
        np.bincount(t.sidx, minlength=ns),
        sw.covered,
        total,
        np.bincount(t.sidx[~contiguous], minlength=ns),
    )
    return StorageStats(*map(readonly, columns))
