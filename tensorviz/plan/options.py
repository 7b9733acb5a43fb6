"""Checking and normalising the options of :func:`tensorviz.plan.diagram.diagram`.

Private; every message says what is wrong, shows the value and suggests the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from tensorviz.core.keywords import did_you_mean
from tensorviz.core.layout import Layout
from tensorviz.core.records import GROUPINGS, is_grouping
from tensorviz.plan.model import DiagramOptionError, DiagramOptions
from tensorviz.plan.ranks import SHARD_BYS, shard_grouping

__all__ = ["normalise", "BYS", "LABELS", "by_value", "by_problem", "OPTION_DOCS"]

BYS = GROUPINGS  # the one list (tensorviz.core.records)

#: The explorer's toggle labels (``tensorviz.explorer.state.groupings``) and the value each one
#: means, so ``by="exact span"`` works as the button reads; ``"mesh <dim>"`` means ``"mesh:<dim>"``.
LABELS = {"exact span": "span", "by rank": "rank"}

#: The options several public functions share (``tv.diagram``, ``tv.show``, ``tv.explore``),
#: described once; :func:`tensorviz.core.keywords.fill_args` writes each function's entries.
OPTION_DOCS = {
    "by": (
        'the grouping: ``"storage"`` (a lane per view under each storage\'s extent), ``"span"``'
        ' (views with an identical span share one bar, e.g. tied weights; also ``"exact span"``, the'
        ' explorer\'s label) or ``"overlap"`` (views packed onto sub-lanes so none hides another;'
        ' overlapping bytes marked). A colouring given as ``by`` (``"category"``, ``"rank"``,'
        ' ``"mesh:<dim>"``) still means storage lanes coloured that way (``color_by``).'
    ),
    "names": "regular expression; only views whose name matches (``re.search``) are drawn.",
    "storages": "storage indices (as in ``layout.storages``) to include.",
    "only_shared": "only storages (storage mode) or bars (span/overlap mode) in shared groups.",
    "byte_range": "``(lo, hi)``: only these bytes of each storage are drawn (a zoom; most useful with one storage).",
    "max_lanes": 'most rows drawn; extra views go to a "… N more" row that still draws them.',
    "show_unreferenced": "draw the bytes of each storage that no view reads.",
    "expand_simple": (
        "draw storages whose single view is the whole storage, instead of collapsing them into one summary line."
    ),
    "overview": (
        "plan an overview of every selected storage (``Diagram.overview``: a grid of cells sized by bytes,"
        " coloured by how views share each storage). None (the default): when lanes cannot show them all"
        " -- from 1,000 storages, or when more storages than ``max_lanes`` leave some out. Never when no"
        " storage is selected."
    ),
    "color_by": (
        'colour the bars by what each view is in training state (``"category"``), or those of a sharded'
        ' model or DCP folder by the shard\'s ``"rank"`` or its coordinate along one mesh dimension'
        ' (``"mesh:dp"``); None: by span group.'
    ),
    "dpi": "resolution of the PNG picture (dots per inch).",
    "width": (
        "picture width in inches (default 10; ``tv.show`` lays its picture out for a 590-px output,"
        " 590/96 in, and its HTML's SVG scales with the output): the PNG is ``width * dpi`` pixels"
        " wide (a width in pixels, such as 800, is refused)."
    ),
}


def by_value(by: object) -> object:
    """The value an explorer label stands for (``"exact span"`` -> ``"span"``, ``"mesh dp"`` ->
    ``"mesh:dp"``); any other value as it is.

    >>> by_value("exact span"), by_value("mesh dp"), by_value("overlap")
    ('span', 'mesh:dp', 'overlap')
    """
    if not isinstance(by, str):
        return by
    if by in LABELS:
        return LABELS[by]
    if by.startswith("mesh ") and by[5:].strip():
        return "mesh:" + by[5:].strip()
    return by


def by_problem(option: str, value: object) -> str:
    known = (*GROUPINGS, "category", *SHARD_BYS, *LABELS)
    return (
        f"{option} must be one of {BYS}, 'category' for training state, or {SHARD_BYS[0]!r} / 'mesh:<dim>' "
        f"for a sharded model, got {value!r}{did_you_mean(value, known)}"
    )


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
        raise DiagramOptionError(by_problem("by", by))
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
    by, color_by = by_value(by), by_value(color_by)  # type: ignore[assignment]
    if isinstance(by, str) and (by == "category" or by in SHARD_BYS or by.startswith("mesh:")):
        # A colouring given as by= (the older spelling of color_by): storage lanes coloured that way.
        if color_by is not None and color_by != by:
            raise DiagramOptionError(f"by={by!r} already colours by {by!r}; color_by={color_by!r} contradicts it")
        by, color_by = "storage", by
    if color_by is not None and not (
        isinstance(color_by, str) and (color_by == "category" or color_by in SHARD_BYS or color_by.startswith("mesh:"))
    ):
        raise DiagramOptionError(
            f"color_by must be 'category', {SHARD_BYS[0]!r} or 'mesh:<dim>' (or None), got {color_by!r}"
            + did_you_mean(color_by, ("category", *SHARD_BYS, "by rank"))
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
