"""Checking and normalising the options of :func:`tensorviz.plan.diagram.diagram`.

Private; every message says what is wrong, shows the value and suggests the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.core.records import GROUPINGS, is_grouping
from tensorviz.plan.model import DiagramOptionError, DiagramOptions
from tensorviz.plan.ranks import SHARD_BYS, shard_grouping

__all__ = ["normalise", "BYS"]

BYS = GROUPINGS  # the one list (tensorviz.core.records)


def normalise(
    layout: Layout,
    by: str,
    names: str | None,
    storages: Sequence[int] | None,
    only_shared: bool,
    byte_range: tuple[int, int] | None,
    max_lanes: int,
    show_unreferenced: bool,
    expand_simple: bool,
    overview: bool | None = None,
    color_by: str | None = None,
) -> DiagramOptions:
    """The checked, normalised options (storage indices as a tuple of ints, ...).

    Raises:
        DiagramOptionError: an option is out of range.
    """
    by, colour = _colouring(layout, by, color_by)
    if not is_grouping(by):
        raise DiagramOptionError(
            f"by must be one of {BYS}, 'category' for training state, or {SHARD_BYS[0]!r} / 'mesh:<dim>' "
            f"for a sharded model, got {by!r}"
        )
    if names is not None:
        try:
            re.compile(names)
        except re.error as err:
            raise DiagramOptionError(
                f"names={names!r} is not a valid regular expression ({err}); "
                f"escape special characters with re.escape(...)"
            ) from None
    if storages is not None:
        n = len(layout.storage_stats().nbytes)
        bad = [i for i in storages if not isinstance(i, (int, np.integer)) or not 0 <= i < n]
        if bad:
            raise DiagramOptionError(
                f"storages={list(storages)!r}: {bad} not storage indices; this layout has storages 0..{n - 1}"
            )
        storages = tuple(int(i) for i in storages)
    if byte_range is not None:
        lo, hi = (int(x) for x in byte_range)
        if not 0 <= lo < hi:
            raise DiagramOptionError(
                f"byte_range={tuple(byte_range)!r} must be (lo, hi) with "
                f"0 <= lo < hi, in bytes from the start of the storage"
            )
        byte_range = (lo, hi)
    if not isinstance(max_lanes, (int, np.integer)) or max_lanes < 3:
        raise DiagramOptionError(f"max_lanes must be an integer >= 3, got {max_lanes!r}")
    if overview is not None and not isinstance(overview, (bool, np.bool_)):
        raise DiagramOptionError(f"overview must be True, False or None (automatic), got {overview!r}")
    return DiagramOptions(
        by,
        names,
        storages,
        bool(only_shared),
        byte_range,
        int(max_lanes),
        bool(show_unreferenced),
        bool(expand_simple),
        colour,
        None if overview is None else bool(overview),
    )


def _colouring(layout: Layout, by: str, color_by: str | None) -> tuple[str, str]:
    """``(by, colouring)``: a colouring given as ``by`` (the older spelling of ``color_by``)
    means storage lanes coloured that way; the colouring checked against the layout."""
    if isinstance(by, str) and (by == "category" or by in SHARD_BYS or by.startswith("mesh:")):
        # A colouring given as by= (the older spelling of color_by): storage lanes coloured that way.
        if color_by is not None and color_by != by:
            raise DiagramOptionError(f"by={by!r} already colours by {by!r}; color_by={color_by!r} contradicts it")
        by, color_by = "storage", by
    if color_by is not None and not (color_by == "category" or color_by in SHARD_BYS or color_by.startswith("mesh:")):
        raise DiagramOptionError(
            f"color_by must be 'category', {SHARD_BYS[0]!r} or 'mesh:<dim>' (or None), got {color_by!r}"
        )
    if color_by == "category":  # each view coloured by what it is in training state
        if not any(layout.categories):
            raise DiagramOptionError(
                "by='category' colours views by weights, gradients, optimizer state...; this layout has "
                "no categories: analyse a model (tv.analyze(model, optimizer=opt)) or a training checkpoint"
            )
        colour = "category"
    else:
        colour = shard_grouping(layout, color_by) if color_by is not None else ""
    return by, colour
