"""``tv.explain``: the teaching figure, from tensors to a drawn panel.

Reads the tensors' metadata through :mod:`tensorviz.sources.live`, plans the strips with
:mod:`tensorviz.plan.explain` and draws them with :mod:`tensorviz.render.mpl.panel`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensorviz.core.errors import TensorvizError
from tensorviz.plan.explain import ExplainPlan, layout_plan, names_for
from tensorviz.render.mpl.panel import draw
from tensorviz.sources.live import collect

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["explain", "explain_plan"]


def explain_plan(*tensors: Any, names: Sequence[str] | None = None, region: Any = None) -> ExplainPlan:
    """The numbers behind :func:`explain`: strips of cells and each view's addresses.

    Raises:
        TooLargeError: a region has more than :data:`MAX_ELEMENTS` elements or a strip would
            need more than :data:`MAX_CELLS` cells.
        TensorvizError: no tensors, a name count mismatch, or a tensor that cannot be analysed.
    """
    names = names_for(tensors, names)
    layout = collect(list(zip(names, tensors)), source="explain")
    if layout.skipped:
        sk = layout.skipped[0]
        raise TensorvizError(f"explain cannot draw {sk.name!r}: {sk.reason}")
    return layout_plan(layout, region)


def explain(
    *tensors: Any, names: Sequence[str] | None = None, width: float | None = None, region: Any = None
) -> Figure:
    """Draw how each view's logical indices map onto its storage's cells.

    Args:
        *tensors: views of one storage share one strip, views of different storages get
            separate strips. A tensor over :data:`MAX_ELEMENTS` elements is drawn as its corner
            (the first 8×8 elements of a matrix), labelled with the part shown; the strip then
            shows only the runs of cells that part reads.
        names: one label per tensor (default ``t0``, ``t1``, ...).
        width: figure width in inches (default: fits the strip).
        region: the part of every tensor to draw instead, as slices (``t[region]`` with every
            dimension kept), e.g. ``region=(slice(100, 108), slice(0, 8))`` or ``np.s_[100:108, :8]``.

    Returns:
        A ``matplotlib.figure.Figure`` (no pyplot state), with ``tensorviz_plan`` attached.

    Raises:
        TooLargeError: a region above the size limits (the message names the limit).

    >>> import torch, tensorviz as tv
    >>> x = torch.arange(12.).reshape(3, 4)
    >>> fig = tv.explain(x, x.t(), names=["x", "x.t()"])
    >>> [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("addr")]
    ['addr = 0 + 4·i + 1·j', 'addr = 0 + 1·i + 4·j']
    """
    plan = explain_plan(*tensors, names=names, region=region)
    return draw(plan, width=width)
