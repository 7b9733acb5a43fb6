"""``tv.diagram``: plan the bar diagram of a layout (see :mod:`tensorviz.plan.model` for what a
Diagram holds, and :mod:`tensorviz.plan.planner` for how it is made).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorviz.core.layout import Layout, as_layout
from tensorviz.core.records import Storage
from tensorviz.plan.colors import PALETTE, colour_ordinals, palette_colour
from tensorviz.plan.model import (
    Bar,
    BarColumns,
    Block,
    Diagram,
    DiagramOptionError,
    DiagramOptions,
    Header,
    Lane,
    Summary,
)
from tensorviz.plan.options import normalise
from tensorviz.plan.planner import plan
from tensorviz.plan.planner import storage_reasons as _reasons

__all__ = [
    "diagram",
    "storage_reasons",
    "Diagram",
    "DiagramOptions",
    "Block",
    "Lane",
    "Bar",
    "BarColumns",
    "Summary",
    "Header",
    "DiagramOptionError",
    "PALETTE",
    "palette_colour",
    "colour_ordinals",
]


def diagram(
    layout_or_obj: Any,
    *,
    by: str = "storage",
    names: str | None = None,
    storages: Sequence[int] | None = None,
    only_shared: bool = False,
    byte_range: tuple[int, int] | None = None,
    max_lanes: int = 40,
    show_unreferenced: bool = True,
    expand_simple: bool = False,
    overview: bool | None = None,
    color_by: str | None = None,
) -> Diagram:
    """Plan the bar diagram of a layout.

    Args:
        layout_or_obj: a :class:`Layout` or anything :func:`tensorviz.analyze` accepts.
        by: the grouping (one of :data:`~tensorviz.core.records.GROUPINGS`): ``"storage"`` (a
            lane per view under each storage's extent), ``"span"`` (views with an identical span
            share one bar, e.g. tied weights) or ``"overlap"`` (views packed onto sub-lanes so
            none hides another; overlapping bytes marked). A colouring given as ``by``
            (``"category"``, ``"rank"``, ``"mesh:<dim>"``) still means storage lanes coloured
            that way (``color_by``).
        names: regular expression; only views whose name matches (``re.search``) are drawn.
        storages: storage indices (as in ``layout.storages``) to include.
        only_shared: only storages (storage mode) or bars (span/overlap mode) in shared groups.
        byte_range: ``(lo, hi)`` bytes to zoom into (most useful with one storage).
        max_lanes: most rows drawn; extra views go to a "… N more" row that still draws them.
        show_unreferenced: draw the bytes of each storage that no view reads.
        expand_simple: draw storages whose single view is the whole storage, instead of
            collapsing them into one summary line.
        overview: plan an overview of every selected storage (``Diagram.overview``: a grid
            of cells sized by bytes, coloured by how views share each storage). None (the
            default): when lanes cannot show them all -- from 1,000 storages, or when more
            storages than ``max_lanes`` leave some out. Never when no storage is selected.
        color_by: colour the bars by what each view is in training state (``"category"``), or
            those of a sharded model or DCP folder by the shard's ``"rank"`` or its coordinate
            along one mesh dimension (``"mesh:dp"``); None: by span group.

    Returns:
        An immutable :class:`Diagram`.

    Raises:
        DiagramOptionError: an option is out of range (a bad regex, an unknown ``by``, ...).

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(4, 4)
    >>> d = tv.diagram({"wte": w, "head": w}, by="span")
    >>> [bar.label for bar in d.bars]
    ['wte ≡ head']
    """
    layout = as_layout(layout_or_obj)
    opts = normalise(
        layout,
        by,
        names,
        storages,
        only_shared,
        byte_range,
        max_lanes,
        show_unreferenced,
        expand_simple,
        overview,
        color_by=color_by,
    )
    return plan(layout, opts)


def storage_reasons(layout: Layout, storage: Storage) -> tuple[str, ...]:
    """Why a storage is worth drawing: a subset of shared/partial/overlapping/non-contiguous.

    >>> import torch, tensorviz as tv
    >>> x = torch.zeros(4, 4)
    >>> layout = tv.analyze({"x": x, "col": x[:, 0]})
    >>> storage_reasons(layout, layout.storages[0])
    ('shared', 'overlapping', 'non-contiguous')
    """
    return _reasons(storage, layout.storage_views(storage.key), storage.whole_file)
