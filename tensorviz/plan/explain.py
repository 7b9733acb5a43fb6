"""Teaching panel: how (offset, shape, stride) map each logical index to a storage cell.

For small tensors: the storage drawn as a strip of cells (wrapped in rows), each view's logical
grid beside it, every grid cell showing and coloured by the storage cell it reads, so colour and
number link the two. Under each strip row, one "reach" row per view marks the cells it reads
and its offset. Cells no view reads are grey and hatched; cells a view reads through several
indices (stride 0, overlapping ``as_strided``) get a "×n" badge. Each grid is titled with its
address formula in real numbers: ``addr = 2 + 4·i + 1·j``.

>>> import torch, tensorviz as tv
>>> from tensorviz.render.explain import explain_plan
>>> x = torch.arange(12.).reshape(3, 4)
>>> plan = explain_plan(x, x.t(), x[:, ::2], names=["x", "x.t()", "x[:, ::2]"])
>>> [v.formula for v in plan.strips[0].views]
['addr = 0 + 4·i + 1·j', 'addr = 0 + 1·i + 4·j', 'addr = 0 + 4·i + 2·j']
>>> plan.strips[0].views[2].addresses.tolist()
[[0, 2], [4, 6], [8, 10]]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tensorviz.core.errors import TensorvizError, TooLargeError
from tensorviz.core.keepalive import KeptAlive, kept_alive
from tensorviz.plan.corner import part

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout
    from tensorviz.core.records import TensorView

__all__ = ["layout_plan", "Geometry", "names_for", "ExplainPlan", "Strip", "ExplainedView", "MAX_ELEMENTS", "MAX_CELLS"]

#: Most logical elements one view may have in the panel.
MAX_ELEMENTS = 256
#: Most storage cells one strip may show.
MAX_CELLS = 256
#: Most "keeps alive" lines per strip.
MAX_ALIVE = 3
_INDEX = "ijklmnpq"
_VIEW_COLORS = ("#222222", "#aa3377", "#228833", "#4477aa", "#ee7733", "#66ccee", "#997700", "#5566dd")


@dataclass(frozen=True, eq=False)
class ExplainedView:
    """One view in storage-cell units: ``addresses[idx]`` is the cell logical ``idx`` reads."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    itemsize: int
    addresses: np.ndarray  # int64, shape == self.shape, in strip cells
    formula: str
    color: str
    shown: str = ""  # for a part of a larger view: which part, e.g. "[:8, :8] of [4096, 4096]"

    @property
    def reads(self) -> np.ndarray:
        """Distinct cells read (each element covers itemsize // cell_bytes cells)."""
        return np.unique(self.addresses)

    def reuse(self) -> dict[int, int]:
        """Cells read through more than one logical index: ``{cell: times}``."""
        cells, counts = np.unique(self.addresses, return_counts=True)
        return {int(c): int(n) for c, n in zip(cells, counts) if n > 1}


@dataclass(frozen=True, eq=False)
class Strip:
    """One storage: the cells drawn, ``[lo, hi)`` or, when the views read far-apart places of a
    large storage (a corner of a big matrix), the runs ``segments`` (cells of ``cell_bytes``
    bytes); the cells between runs are not drawn."""

    storage: int
    nbytes: int
    cell_bytes: int
    lo: int
    hi: int
    views: tuple[ExplainedView, ...]
    segments: tuple[tuple[int, int], ...] = ()
    alive: tuple[KeptAlive, ...] = ()  # when no view reads the whole storage: what each keeps alive

    def __post_init__(self) -> None:
        if not self.segments:
            object.__setattr__(self, "segments", ((self.lo, self.hi),))

    @property
    def cells(self) -> int:
        """Cells drawn (gaps between segments not counted)."""
        return sum(b - a for a, b in self.segments)

    def window(self) -> np.ndarray:
        """The storage cell number of each drawn cell, in order."""
        return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in self.segments])

    def index(self, cells: np.ndarray) -> np.ndarray:
        """Position of storage cells among the drawn cells (cells must be drawn)."""
        starts = np.array([a for a, _ in self.segments], dtype=np.int64)
        before = np.concatenate(([0], np.cumsum([b - a for a, b in self.segments])))
        seg = np.searchsorted(starts, cells, side="right") - 1
        return before[seg] + np.asarray(cells, dtype=np.int64) - starts[seg]

    def readers(self) -> np.ndarray:
        """Per drawn cell, how many views read it."""
        out = np.zeros(self.cells, dtype=np.int64)
        for v in self.views:
            out[self.index(span_cells(v, self.cell_bytes))] += 1
        return out

    def reuse(self) -> np.ndarray:
        """Per drawn cell, the most times a single view reads it (1 = once, 0 = never)."""
        out = np.zeros(self.cells, dtype=np.int64)
        for v in self.views:
            cells, counts = np.unique(span_cells(v, self.cell_bytes, unique=False), return_counts=True)
            np.maximum.at(out, self.index(cells), counts)
        return out


@dataclass(frozen=True, eq=False)
class ExplainPlan:
    strips: tuple[Strip, ...]


def span_cells(v: ExplainedView, cell_bytes: int, unique: bool = True) -> np.ndarray:
    """The strip cells a view reads (each element covers ``itemsize // cell_bytes`` cells)."""
    per = v.itemsize // cell_bytes
    cells = (v.addresses.reshape(-1)[:, None] + np.arange(per)[None, :]).reshape(-1)
    return np.unique(cells) if unique else cells


def formula(offset: int, stride: Sequence[int]) -> str:
    """The address formula with real numbers, in elements of the view's own dtype.

    >>> formula(2, (4, 1)), formula(0, (0, 1)), formula(5, ())
    ('addr = 2 + 4·i + 1·j', 'addr = 0 + 0·i + 1·j', 'addr = 5')
    """
    terms = [str(offset)] + [f"{s}·{_INDEX[k] if k < len(_INDEX) else f'i{k}'}" for k, s in enumerate(stride)]
    return "addr = " + " + ".join(terms)


def layout_plan(layout: Layout, region: Any = None, extra: Sequence[Any] = ()) -> ExplainPlan:
    """:func:`explain_plan` from an analysed layout (metadata only, no tensors needed).

    The explorer uses it: it keeps layouts, never tensors. Strip ``storage`` numbers are the
    layout's storage indices. A view over :data:`MAX_ELEMENTS` elements is drawn as its corner
    (see :mod:`tensorviz.plan.corner`); ``region`` (slices, as in ``t[region]``) picks the part
    of every view to draw instead.

    ``extra`` are more views of the first storage that the layout does not hold (records with
    a TensorView's ``name, dtype, shape, stride, offset, itemsize, start, numel``, e.g. the
    view ``x.view(shape)`` would make, see :class:`Geometry`), drawn after its own views.

    Raises:
        TooLargeError: a region over :data:`MAX_ELEMENTS` elements, or views reaching more than
            :data:`MAX_CELLS` storage cells.
    """
    strips = []
    palette = iter(_VIEW_COLORS * (1 + (len(layout.views) + len(extra)) // len(_VIEW_COLORS)))
    for k, s in enumerate(layout.storages):
        views = [_drawn(v, region) for v in (*layout.storage_views(s.key), *(extra if k == 0 else ()))]
        if views:
            strip = _strip(s.index, s.nbytes, views, palette)
            if s.unreferenced_nbytes:
                alive = tuple(kept_alive(layout, v.name) for v in layout.storage_views(s.key)[:MAX_ALIVE])
                strip = dataclasses.replace(strip, alive=alive)
            strips.append(strip)
    return ExplainPlan(tuple(strips))


class Geometry(NamedTuple):
    """A view that exists only as numbers (``x.view(shape)`` before it is made): the fields of a
    :class:`~tensorviz.core.records.TensorView` that the panel reads."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    itemsize: int
    start: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class _Drawn(NamedTuple):
    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    itemsize: int
    shown: str
    shift: int = 0  # bytes from the storage's start to element 0 when not a whole number of elements


def _drawn(v: TensorView, region: Any) -> _Drawn:
    """The part of a view the panel draws: all of it when small, else a corner or ``region``.

    Offsets count from the storage's first byte: a safetensors tensor's offset counts from the
    data section, but its storage is the whole file (header first), so its start says where.
    """
    lead, shift = divmod(v.start - v.offset * v.itemsize, v.itemsize)
    if region is None and v.numel <= MAX_ELEMENTS:
        return _Drawn(v.name, v.dtype, tuple(v.shape), tuple(v.stride), v.offset + lead, v.itemsize, "", shift)
    shape, stride, offset, text = part(v.shape, v.stride, v.offset + lead, region)
    n = math.prod(shape)
    if n > MAX_ELEMENTS:
        raise TooLargeError(
            f"explain draws at most MAX_ELEMENTS={MAX_ELEMENTS} elements per view; the region "
            f"{text} of {v.name!r} has {n:,}. Choose a smaller region, e.g. region=(slice(0, 8), slice(0, 8))"
        )
    return _Drawn(v.name, v.dtype, shape, stride, offset, v.itemsize, text, shift)


def names_for(tensors: Sequence[Any], names: Sequence[str] | None) -> list[str]:
    if not tensors:
        raise TensorvizError("explain needs at least one tensor, e.g. tv.explain(x, x.t())")
    if names is None:
        return [f"t{i}" for i in range(len(tensors))]
    names = [str(n) for n in names]
    if len(names) != len(tensors):
        raise TensorvizError(f"got {len(names)} names for {len(tensors)} tensors: {names!r}")
    if len(set(names)) != len(names):
        raise TensorvizError(f"names must be unique, got {names!r}")
    return names


def _strip(index: int, nbytes: int, views: list[_Drawn], palette) -> Strip:
    cell = math.gcd(*[v.itemsize for v in views], *[v.shift for v in views])
    explained = [_explained(v, cell, next(palette)) for v in views]
    # Views of a freed storage (resize_(0)) read cells past its end: the strip reaches them too.
    reach = max((int(span_cells(v, cell).max()) + 1 for v in explained if v.addresses.size), default=0)
    total = max(nbytes // cell, reach)
    if total <= MAX_CELLS:
        return Strip(index, nbytes, cell, 0, total, tuple(explained))
    reads = np.unique(np.concatenate([span_cells(v, cell) for v in explained] + [np.zeros(0, np.int64)]))
    if reads.size == 0:
        return Strip(index, nbytes, cell, 0, 0, tuple(explained))
    lo, hi = int(reads[0]), int(reads[-1]) + 1
    if hi - lo <= MAX_CELLS:
        return Strip(index, nbytes, cell, lo, hi, tuple(explained))
    segments = _segments(reads)
    drawn = sum(b - a for a, b in segments)
    if drawn > MAX_CELLS:
        raise TooLargeError(
            f"explain draws at most MAX_CELLS={MAX_CELLS} storage cells per strip; the views of "
            f"storage #{index} read {drawn:,} cells in {len(segments)} runs ([{lo:,}, {hi:,}) in "
            f"{cell}-byte cells). Explain fewer views or a smaller region"
        )
    return Strip(index, nbytes, cell, lo, hi, tuple(explained), segments)


#: Unread cells between two read runs that are still drawn (hatched) rather than cut out.
GAP_CELLS = 8


def _segments(reads: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Runs of read cells, neighbours closer than :data:`GAP_CELLS` joined (sorted ``reads``)."""
    cut = np.flatnonzero(np.diff(reads) > GAP_CELLS + 1) + 1
    starts = np.concatenate(([0], cut))
    stops = np.concatenate((cut, [reads.size]))
    return tuple((int(reads[a]), int(reads[b - 1]) + 1) for a, b in zip(starts, stops))


def _explained(v: _Drawn, cell: int, color: str) -> ExplainedView:
    idx = np.indices(v.shape, dtype=np.int64) if v.shape else np.zeros((0,), dtype=np.int64)
    elems = (
        v.offset + sum((idx[k] * st for k, st in enumerate(v.stride)), np.int64(0))
        if v.shape
        else np.array(v.offset, dtype=np.int64)
    )
    addresses = np.asarray(elems * (v.itemsize // cell) + v.shift // cell, dtype=np.int64)
    return ExplainedView(
        v.name, v.dtype, v.shape, v.stride, v.offset, v.itemsize, addresses, formula(v.offset, v.stride), color, v.shown
    )
