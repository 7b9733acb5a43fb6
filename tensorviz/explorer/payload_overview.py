"""The Diagram's overview (every storage as cells sized by bytes, :mod:`tensorviz.plan.overview`)
as binary columns for the canvas, in O(storages) bytes -- about three a storage for big models.

One entry per storage the overview shows, in its order (pure numpy, nothing decided here):

====================  =========  ===========================================================
``ov_cells``           varint     ``cells << 2 | kind`` (kind: index into ``KINDS``)
``ov_views``           varint     views on the storage
``ov_nbytes``          varint     the storage's bytes
``ov_storage``         varint     layout storage indices as deltas (first absolute); empty when
                                  the overview shows every storage of the layout, in order
``ov_unref``           varint     ``(entry, unreferenced cells, unreferenced bytes)`` triples,
                                  for the storages some of whose bytes no view reads
``ov_names``           text       the first view name of each storage the lanes do not draw
                                  (a drawn storage's names are its bars'), coded with
``ov_name_prefix/suffix`` u8      (see :func:`tensorviz.explorer.wire.affix_code`)
``ov_label_entry``     u32        the labelled storages (largest, largest tied/overlapping) ...
``ov_labels``          text       ... and their labels, as the PNG lists them
``ov_columns``         int        the plan's grid width in cells (0: no overview)
``ov_colors``          list       two shades per kind, then two for unreferenced cells: the
                                  PNG's own (:data:`tensorviz.render.mpl.overview.KIND_COLORS`)
====================  =========  ===========================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.explorer import wire
from tensorviz.plan.overview import KINDS
from tensorviz.render.mpl.overview import KIND_COLORS, UNREFERENCED

__all__ = ["overview_columns", "OVERVIEW_BYTES"]

#: The bytes traits of the overview (``ov_columns`` and ``ov_colors`` are an int and a list).
OVERVIEW_BYTES = (
    "ov_cells",
    "ov_views",
    "ov_nbytes",
    "ov_storage",
    "ov_unref",
    "ov_names",
    "ov_name_prefix",
    "ov_name_suffix",
    "ov_label_entry",
    "ov_labels",
)
_COLORS = [c for k in KINDS for c in KIND_COLORS[k]] + list(UNREFERENCED)


def overview_columns(diagram: Any, layout: Layout) -> dict[str, Any]:
    """The ``ov_*`` traits of ``diagram.overview`` (empty ones when it has none)."""
    ov = diagram.overview
    if ov is None:
        return {**{k: b"" for k in OVERVIEW_BYTES}, "ov_columns": 0, "ov_colors": []}
    storage = ov.storage.astype(np.int64)
    every = storage.size == len(layout.storages) and np.array_equal(storage, np.arange(storage.size))
    drawn = np.isin(storage, np.fromiter((b.storage for b in diagram.blocks), np.int64, len(diagram.blocks)))
    prefix, suffix, rest = wire.affix_code([_first_name(layout, s) for s in storage[~drawn].tolist()])
    unref = np.flatnonzero(ov.unreferenced > 0)
    triples = np.stack((unref, ov.unreferenced_cells[unref], ov.unreferenced[unref]), axis=1)
    return {
        "ov_cells": wire.varint((ov.cells.astype(np.int64) << 2) | ov.kind),
        "ov_views": wire.varint(ov.views),
        "ov_nbytes": wire.varint(ov.nbytes),
        "ov_storage": b"" if every else wire.varint(np.diff(storage, prepend=0)),
        "ov_unref": wire.varint(triples),
        "ov_names": wire.text(rest),
        "ov_name_prefix": wire.le(prefix, "u1"),
        "ov_name_suffix": wire.le(suffix, "u1") if any(suffix) else b"",
        "ov_label_entry": wire.le([label.entry for label in ov.labels], "u4"),
        "ov_labels": wire.text(label.text for label in ov.labels),
        "ov_columns": int(ov.columns),
        "ov_colors": list(_COLORS),
    }


def _first_name(layout: Layout, storage: int) -> str:
    """The storage's first view name ("" when no view reads it)."""
    pos = layout.view_positions(storage)
    return layout.names[int(pos[0])] if pos.size else ""
