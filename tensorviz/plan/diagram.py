"""``tv.diagram``: plan the bar diagram of a layout (see :mod:`tensorviz.plan.model` for what a
Diagram holds, and :mod:`tensorviz.plan.planner` for how it is made).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorviz.core.keywords import fill_args
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
from tensorviz.plan.options import OPTION_DOCS, normalise
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


@fill_args(OPTION_DOCS)
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
        <shared options>

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
