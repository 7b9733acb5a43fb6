"""``tv.explain_view(x, shape)``: why ``x.view(shape)`` works or fails, and what ``reshape`` does.

The decision is torch's own (:mod:`tensorviz.plan.viewrule`, a port of ATen's ``computeStride``),
made from the tensor's metadata; ``x`` is never read, changed or kept. The picture is the
teaching panel of ``x`` (and of the view, when it exists) with a "dims" section below it: the
input dims joined where torch can merge them, each output dim linked to the input dims it is
made of, and the pair that cannot merge marked in red.

>>> import torch, tensorviz as tv
>>> e = tv.explain_view(torch.zeros(3, 4).t(), (12,))
>>> e.view_works, e.reshape_copies
(False, True)
>>> e.reason
'output dim 0 (size 12) runs across input dims 0, 1 (sizes 4, 3), but dims 0 and 1 cannot merge: dim 0 has stride 1, and to continue dim 1 (size 3, stride 4) it needs stride 3·4 = 12'
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tensorviz.core.errors import TensorvizError, TooLargeError
from tensorviz.core.keepalive import KeptAlive, kept_alive
from tensorviz.core.names import terminal
from tensorviz.core.units import format_bytes
from tensorviz.plan import viewrule as rule
from tensorviz.plan.explain import Geometry, layout_plan

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tensorviz.core.layout import Layout

__all__ = ["explain_view", "ViewExplanation", "Alternative"]


@dataclass(frozen=True)
class Alternative:
    """A call that gives the requested shape, as the rule decides it (``works``, ``copies``)."""

    code: str
    works: bool
    copies: bool
    note: str


@dataclass(frozen=True)
class ViewExplanation:
    """What torch does with ``x.view(shape)`` and ``x.reshape(shape)``, and why.

    ``new_shape`` is ``shape`` with ``-1`` filled in; ``view_stride`` the view's strides when it
    works; ``blocked`` every place torch's rule rejects (torch's own first), empty when the
    view works; ``contiguous_nbytes`` what ``x.contiguous()`` allocates (0: it returns ``x``).
    """

    name: str
    dtype: str
    itemsize: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    target: tuple[int, ...]
    new_shape: tuple[int, ...]
    view_works: bool
    view_stride: tuple[int, ...] | None
    reshape_copies: bool
    blocked: tuple[rule.Blocked, ...]
    reason: str
    contiguous_nbytes: int
    alternatives: tuple[Alternative, ...]
    keeps: KeptAlive
    layout: Layout = field(repr=False, compare=False)

    @property
    def call(self) -> str:
        """``x.view(2, 6)``, as the user wrote it."""
        return f"{self.name}.view({_args(self.target)})"

    def figure(self, width: float | None = None) -> Figure:
        """The teaching panel of the view, with the dims marked (a matplotlib Figure)."""
        return _figure(self, width)

    def __str__(self) -> str:
        return _text(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from tensorviz.render.mpl.figure import figure_html, png_bytes

        # the picture once, in the HTML beside the text (an image/png copy would double a notebook):
        # an SVG that scales with the output, never with text under 9 CSS px (render/theme.py)
        try:
            fig = self.figure()
            picture = figure_html(fig, alt=f"{self.call}: {self.reason}")
            png = base64.b64encode(png_bytes(fig)).decode("ascii") if picture is None else ""
        except TooLargeError as err:  # views too scattered to draw: the text still explains
            return {
                "text/plain": str(self),
                "text/html": f"<pre>{html.escape(str(self))}\n({html.escape(str(err))})</pre>",
            }
        return {
            "text/plain": str(self),
            "text/html": f"<pre>{html.escape(str(self))}</pre>"
            + (picture or f"<img alt='explain_view' src='data:image/png;base64,{png}'>"),
        }


def explain_view(x: Any, shape: Any, *, name: str = "x") -> ViewExplanation:
    """Whether ``x.view(shape)`` works and ``x.reshape(shape)`` copies, decided by torch's rule.

    Args:
        x: a strided ``torch.Tensor`` (any device, also meta); only its metadata is read.
        shape: the target shape, as ``view`` takes it (an int or a sequence; one ``-1``).
        name: how ``x`` is called in the text (``x.view(...)``).

    Returns:
        A frozen :class:`ViewExplanation`; ``print`` it, show it, or call ``.figure()``.

    Raises:
        TensorvizError: ``x`` is not a strided tensor, or ``shape`` is not a shape (a
            ``ShapeError`` when torch would refuse it for both ``view`` and ``reshape``).

    >>> import torch, tensorviz as tv
    >>> tv.explain_view(torch.arange(12.).reshape(3, 4), (2, -1)).view_stride
    (6, 1)
    """
    from tensorviz.sources.live import collect

    _check_tensor(x)
    target = _check_shape(shape)
    layout = collect([(str(name), x)], source="explain_view")
    v = layout[str(name)]
    new_shape = rule.infer_shape(target, math.prod(v.shape))
    stride = rule.view_strides(v.shape, v.stride, new_shape)
    blocked = rule.blocked(v.shape, v.stride, new_shape)
    contiguous = rule.is_contiguous(v.shape, v.stride)
    return ViewExplanation(
        v.name, v.dtype, v.itemsize, tuple(v.shape), tuple(v.stride), v.offset, target, new_shape,
        stride is not None, stride, stride is None, blocked, _reason(v.shape, v.stride, new_shape, blocked),
        0 if contiguous else math.prod(v.shape) * v.itemsize,
        _alternatives(v.name, v.shape, v.stride, target, new_shape, stride is not None, contiguous),
        kept_alive(layout, v.name), layout,
    )  # fmt: skip


def _check_tensor(x: Any) -> None:
    torch = __import__("sys").modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        raise TensorvizError(f"explain_view takes a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TensorvizError(f"explain_view needs a strided tensor (view needs strides); got layout {x.layout}")


def _check_shape(shape: Any) -> tuple[int, ...]:
    items = (shape,) if isinstance(shape, int) else shape
    try:
        out = tuple(items)
    except TypeError:
        raise TensorvizError(f"shape is an int or a sequence of ints, e.g. (2, -1); got {shape!r}") from None
    if not all(hasattr(type(s), "__index__") and not isinstance(s, bool) for s in out):
        raise TensorvizError(f"shape is an int or a sequence of ints, e.g. (2, -1); got {shape!r}")
    return tuple(s.__index__() for s in out)


def _args(shape: Sequence[int]) -> str:
    return ", ".join(map(str, shape))


def _reason(shape, stride, new_shape, blocked: Sequence[rule.Blocked]) -> str:
    """One sentence per place torch rejects, torch's own first; "" when the view works."""
    parts = []
    for b in blocked:
        k, k2 = b.pair
        dims = ", ".join(map(str, b.in_dims))
        sizes = ", ".join(str(shape[d]) for d in b.in_dims)
        parts.append(
            f"output dim {b.out_dim} (size {new_shape[b.out_dim]}) runs across input dims {dims} "
            f"(sizes {sizes}), but dims {k} and {k2} cannot merge: dim {k} has stride {b.actual}, "
            f"and to continue dim {k2} (size {shape[k2]}, stride {stride[k2]}) it needs stride "
            f"{shape[k2]}·{stride[k2]} = {b.needed}"
        )
    return "; ".join(parts)


def _alternatives(name, shape, stride, target, new_shape, works: bool, contiguous: bool) -> tuple[Alternative, ...]:
    """reshape, ``.contiguous().view`` and, when the view fails, a permute that makes it work;
    each decided by the same rule (tests run every one in torch)."""
    args = _args(target)
    out = [
        Alternative(
            f"{name}.reshape({args})", True, not works, "a view, no copy" if works else "copies into a new storage"
        ),
        Alternative(
            f"{name}.contiguous().view({args})",
            True,
            not contiguous,
            "a view of x itself" if contiguous else "contiguous() copies, then the view is free",
        ),
    ]
    order = None if works else rule.viewable_permutation(shape, stride, new_shape)
    if order is not None:
        out.append(
            Alternative(
                f"{name}.permute({', '.join(map(str, order))}).view({args})",
                True,
                False,
                "no copy, but the elements come in another order than reshape gives",
            )
        )
    return tuple(out)


def _text(e: ViewExplanation) -> str:
    head = f"{terminal(e.name)}: {e.dtype}[{', '.join(map(str, e.shape))}], stride {e.stride}, offset {e.offset}"
    if e.view_works:
        lines = [head, f"{terminal(e.call)} works: a view with stride {e.view_stride}, no copy"]
    else:
        lines = [
            head,
            f"{terminal(e.call)} fails (torch: view size is not compatible with input tensor's size and stride)",
        ]
        lines += [f"  why: {r}" for r in e.reason.split("; ")]
    lines.append(_contiguous_text(e))
    lines.append("alternatives:")
    width = max(len(a.code) for a in e.alternatives)
    lines += [f"  ✓ {terminal(a.code):<{width}}  {a.note}" for a in e.alternatives]
    lines.append("keeps alive: " + e.keeps.sentence())
    return "\n".join(lines)


def _contiguous_text(e: ViewExplanation) -> str:
    if not e.contiguous_nbytes:
        return f"{terminal(e.name)}.contiguous() is {terminal(e.name)} itself: it allocates nothing"
    n = math.prod(e.shape)
    return (
        f"{terminal(e.name)}.contiguous() allocates a new {format_bytes(e.contiguous_nbytes)} storage "
        f"({n:,} {e.dtype} elements) and copies into it"
    )


# -- the picture ---------------------------------------------------------------------------------
_OK, _BAD, _LINK = "#228833", "#cc3311", "#777777"
_BOX_W, _BOX_H, _GAP = 1.25, 0.5, 0.3


def _figure(e: ViewExplanation, width: float | None) -> Figure:
    from tensorviz.render.mpl.figure import literal_texts
    from tensorviz.render.mpl.panel import draw

    v = e.layout[e.name]
    extra: tuple[Geometry, ...] = ()
    if e.view_works:
        assert e.view_stride is not None  # a view that works has its stride
        extra = (Geometry(e.call, v.dtype, e.new_shape, e.view_stride, v.offset, v.itemsize, v.start),)
    fig = draw(layout_plan(e.layout, extra=extra), width=width)
    ax = fig.axes[0]
    w, y = fig.get_size_inches()
    y, right = _draw_dims(ax, e, float(y))
    w = max(float(w), right + 0.3)
    y = _draw_words(ax, e, y, chars=int((w - 0.3) / 0.062))  # 7.5-pt text: ~0.06 inch a character
    fig.set_size_inches(w, y + 0.1)
    ax.set_xlim(0, w)
    ax.set_ylim(y + 0.1, 0)
    return literal_texts(fig)


def _draw_dims(ax: Axes, e: ViewExplanation, y: float) -> tuple[float, float]:
    """Input dims on one row (joined where torch merges them), output dims below, a line from
    each output dim to the input dims it is made of; the rejected pair in red."""
    verdict = "works (a view, no copy)" if e.view_works else "fails: view cannot merge the dims marked ✗"
    ax.text(0.15, y + 0.1, f"{terminal(e.call)} {verdict}", fontsize=10, fontweight="bold", va="center",
            color=_OK if e.view_works else _BAD)  # fmt: skip
    top, bottom = y + 0.4, y + 1.6
    left = max(1.0, 0.3 + 0.075 * len(terminal(e.name)))  # room for the row label
    xin = [left + d * (_BOX_W + _GAP) for d in range(len(e.shape))]
    xout = [left + j * (_BOX_W + _GAP) for j in range(len(e.new_shape))]
    bad_out = {b.out_dim for b in e.blocked}
    bad_pairs = {b.pair for b in e.blocked}
    _boxes(ax, "dims-in", xin, top, [f"dim {d}\nsize {s} · stride {t}" for d, (s, t) in enumerate(zip(e.shape, e.stride))],
           [False] * len(e.shape))  # fmt: skip
    ax.text(left - 0.1, top + _BOX_H / 2, terminal(e.name), ha="right", va="center", fontsize=8, fontweight="bold")
    _joins(ax, e, xin, top, bad_pairs)
    out_stride = e.view_stride or (None,) * len(e.new_shape)
    labels = [
        f"dim {j}\nsize {s}" + ("" if t is None else f" · stride {t}")
        for j, (s, t) in enumerate(zip(e.new_shape, out_stride))
    ]
    _boxes(ax, "dims-out", xout, bottom, labels, [j in bad_out for j in range(len(e.new_shape))])
    ax.text(left - 0.1, bottom + _BOX_H / 2, "view", ha="right", va="center", fontsize=8, fontweight="bold")
    _links(ax, e, xin, xout, top + _BOX_H, bottom, bad_out)
    right = max(xin[-1] if xin else left, xout[-1] if xout else left) + _BOX_W
    return bottom + _BOX_H + 0.25, right


def _boxes(ax: Axes, gid: str, xs: list[float], y: float, labels: list[str], bad: list[bool]) -> None:
    import numpy as np

    from tensorviz.render.mpl.panel_grid import _add, _rects

    if not xs:
        return
    _add(ax, gid, _rects(np.array(xs), np.full(len(xs), y), _BOX_W, _BOX_H), np.arange(len(xs)),
         facecolors=["#fde0dc" if b else "#eef3fb" for b in bad], edgecolors=[_BAD if b else "#333333" for b in bad],
         linewidths=[1.6 if b else 0.7 for b in bad])  # fmt: skip
    for x, label in zip(xs, labels):
        ax.text(x + _BOX_W / 2, y + _BOX_H / 2, label, ha="center", va="center", fontsize=7, gid=f"{gid}-label")


def _joins(ax: Axes, e: ViewExplanation, xin: list[float], top: float, bad_pairs: set) -> None:
    """Between adjacent input dims: a green bar where torch's chunk continues (they merge), a
    red ✗ where a chunk ends and the view needs them merged, nothing where a chunk ends freely."""
    import numpy as np

    from tensorviz.render.mpl.panel_grid import _add

    if not e.shape or math.prod(e.shape) == 0:
        return
    starts = {first for first, _last, _n, _b in rule.chunks(e.shape, e.stride)}
    merged = [d for d in range(1, len(e.shape)) if d not in starts]
    if merged:
        verts = np.array(
            [
                [[xin[d] - _GAP, top + 0.2], [xin[d], top + 0.2], [xin[d], top + 0.3], [xin[d] - _GAP, top + 0.3]]
                for d in merged
            ]
        )
        _add(ax, "dims-merge", verts, merged, facecolors=_OK, edgecolors="none")
    for k, _k2 in sorted(bad_pairs):
        x = xin[k] + _BOX_W + _GAP / 2
        ax.text(
            x,
            top + _BOX_H / 2,
            "✗",
            ha="center",
            va="center",
            fontsize=13,
            color=_BAD,
            fontweight="bold",
            gid=f"dims-blocked-{k}",
        )


def _links(ax: Axes, e: ViewExplanation, xin, xout, y0: float, y1: float, bad_out: set) -> None:
    """A line from each output dim to each input dim (size > 1) it shares elements with."""
    from matplotlib.collections import LineCollection

    segs, colors, owners = [], [], []
    for j in range(len(e.new_shape)):
        for d in _made_of(e.shape, e.new_shape, j):
            segs.append([(xin[d] + _BOX_W / 2, y0), (xout[j] + _BOX_W / 2, y1)])
            colors.append(_BAD if j in bad_out else _LINK)
            owners.append((j, d))
    if segs:
        lines = LineCollection(segs, colors=colors, linewidths=1.2)
        lines.set_gid("dims-links")
        lines.tensorviz_owner = owners  # type: ignore[attr-defined]  # tensorviz hangs its own attribute on a matplotlib object
        ax.add_collection(lines, autolim=False)


def _made_of(shape: tuple[int, ...], new_shape: tuple[int, ...], j: int) -> tuple[int, ...]:
    if not shape or math.prod(shape) == 0 or new_shape[j] == 1:
        return ()
    return rule.overlapping(shape, new_shape, j)


def _draw_words(ax: Axes, e: ViewExplanation, y: float, chars: int) -> float:
    lines = []
    if not e.view_works:
        lines += [(f"why: {r}", _BAD) for r in e.reason.split("; ")]
    lines.append((_contiguous_text(e), "#333333"))
    lines += [(f"✓ {terminal(a.code)}: {a.note}", _OK) for a in e.alternatives]
    lines.append(("keeps alive: " + e.keeps.sentence(), "#b45309" if e.keeps.wasteful else "#333333"))
    for text, color in lines:
        for part in _wrap(text, chars):
            ax.text(0.15, y + 0.08, part, fontsize=7.5, va="center", color=color, gid="view-words")
            y += 0.2
    return y


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, subsequent_indent="    ") or [""]
