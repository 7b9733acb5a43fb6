"""The drawing plan's records: :class:`Diagram` (lanes of bars), read by every renderer.

Pure Python + numpy. A Diagram says *what* to draw -- which storages, in which order, one lane
per view (or per span group, or per packed sub-lane), each bar's byte range, names, colour,
exact footprint runs and flags -- and nothing about *how*. The matplotlib, text and HTML
renderers only read it, so tests can check the plan and the drawing separately.

:func:`tensorviz.plan.diagram.diagram` makes one.

>>> import torch, tensorviz as tv
>>> a = torch.rand(8, 10, 50)
>>> d = tv.diagram({"a": a, "b": a[2:4], "c": a[4:6]})
>>> [(lane.kind, lane.label) for lane in d.lanes]
[('storage', 'storage #0 · 15.6 KiB'), ('view', 'a'), ('view', 'b'), ('view', 'c')]
>>> [(bar.start, bar.stop) for bar in d.bars_for("b")]
[(4000, 8000)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import hooks
from tensorviz.core.errors import OptionError
from tensorviz.core.records import GroupBy
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.plan.overview import Overview

__all__ = [
    "Diagram",
    "DiagramOptions",
    "Block",
    "Lane",
    "Bar",
    "BarColumns",
    "Summary",
    "Header",
    "DiagramOptionError",
]


class DiagramOptionError(OptionError):
    """An option of :func:`diagram` is out of range (the message shows the value and the fix)."""


@dataclass(frozen=True)
class DiagramOptions:
    """The normalised options a Diagram was planned with (see :func:`diagram`)."""

    by: GroupBy = "storage"
    names: str | None = None
    storages: tuple[int, ...] | None = None
    only_shared: bool = False
    byte_range: tuple[int, int] | None = None
    max_lanes: int = 40
    show_unreferenced: bool = True
    expand_simple: bool = False
    color_by: str = ""  # "rank" or "mesh:<dim>": bars coloured by shard (see tensorviz.plan.ranks)
    overview: bool | None = None


@dataclass(frozen=True)
class Lane:
    """One horizontal row of the picture, top to bottom.

    ``kind`` is ``"storage"`` (a storage's extent), ``"view"`` (bars of views), ``"simple"``
    (a storage whose single view is the whole storage: extent and view in one row), ``"more"``
    (the bars of a block's views that got no lane of their own: ``hidden`` of them),
    ``"more-storages"`` (``hidden`` storages not shown) or ``"summary"`` (collapsed storages).
    ``block`` indexes :attr:`Diagram.blocks` (-1 for diagram-wide rows), ``storage`` is the
    layout's storage index (-1 likewise), ``size`` the bytes the row stands for and ``sub`` the
    row's position inside its block (0 = the extent).
    """

    label: str
    kind: str
    block: int
    storage: int
    size: int
    sub: int = 0
    hidden: int = 0


@dataclass(frozen=True, eq=False)
class Bar:
    """One drawn byte range: a view (or a span group of views) on a lane.

    ``runs`` is the exact footprint (int64 ``(k, 2)``) when it is not the whole span, else None;
    ``overlap_runs`` the bytes of this bar that another bar of the block also reads (or None).
    Flags: ``overlaps_other``, ``non_contiguous``, ``reinterpreted`` (shares bytes with a view
    of another dtype), ``expanded`` (an element read through several indices: stride 0 or
    overlapping strides), ``empty`` (numel 0), ``exact`` (False: runs are an upper bound).

    ``cell`` (bytes; 0 when ``runs`` are exact): a footprint of more runs than a bar can show
    (:data:`tensorviz.plan.bars.DRAW_RUNS`) is drawn per cell of the storage's window: each run
    of ``runs`` (and of ``overlap_runs``) is a stretch of whole ``cell``-byte cells, every one
    of which holds at least one byte read (that another bar also reads); ``read_nbytes`` is
    then the exact count of bytes read in the window.
    """

    lane: int
    block: int
    start: int
    stop: int
    names: tuple[str, ...]
    color: str
    dtype: str
    runs: np.ndarray | None
    overlap_runs: np.ndarray | None
    overlaps_other: bool
    non_contiguous: bool
    reinterpreted: bool
    expanded: bool
    empty: bool
    exact: bool = True
    cell: int = 0
    read_nbytes: int = -1

    @property
    def label(self) -> str:
        """The names joined with "≡" (tied views share one bar when grouped by span)."""
        return " ≡ ".join(self.names)

    @property
    def is_dense(self) -> bool:
        return self.runs is None and not self.empty

    @property
    def nbytes(self) -> int:
        """Bytes this bar reads (its footprint, clipped to the diagram's byte range)."""
        if self.cell:
            return self.read_nbytes
        if self.runs is None:
            return self.stop - self.start
        return fp.total(self.runs)

    def __repr__(self) -> str:
        flags = [
            f for f in ("overlaps_other", "non_contiguous", "reinterpreted", "expanded", "empty") if getattr(self, f)
        ]
        return f"Bar({self.label!r}, [{self.start}, {self.stop}), lane={self.lane}, flags={flags})"


@dataclass(frozen=True, eq=False)
class Block:
    """One storage shown: its lanes, bars, unreferenced runs and why it is interesting.

    ``lanes`` and ``bars`` index :attr:`Diagram.lanes` / :attr:`Diagram.bars`. ``unreferenced``
    holds the storage's runs no view reads (clipped to the byte range; empty when hidden),
    ``overlap_runs`` the bytes read by two or more bars. ``reasons`` is a subset of
    ("shared", "partial", "overlapping", "non-contiguous"); ``simple`` blocks have none.
    ``header`` holds a safetensors file's header bytes (``layout.metadata["header"]``, clipped;
    they are not in ``unreferenced`` nor counted in ``unreferenced_nbytes``, though no view
    reads them, so a file is always "partial"); gaps and padding stay ``unreferenced``.
    """

    storage: int
    key: tuple
    label: str
    device: str
    nbytes: int
    lanes: tuple[int, ...]
    bars: tuple[int, ...]
    unreferenced: np.ndarray
    unreferenced_nbytes: int
    overlap_runs: np.ndarray
    reasons: tuple[str, ...]
    hidden_views: int = 0
    header: np.ndarray = field(default_factory=lambda: fp.EMPTY)

    @property
    def simple(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class Summary:
    """Storages collapsed into one line: each has a single view that is the whole storage."""

    count: int
    nbytes: int
    storages: tuple[int, ...]

    @property
    def text(self) -> str:
        return f"{self.count:,} simple storage{'s' * (self.count != 1)}, {format_bytes(self.nbytes)}"


@dataclass(frozen=True)
class Header:
    """Totals of the whole layout, for the header line."""

    by: GroupBy
    tensors: int
    storages: int
    shared_groups: int
    unique_nbytes: int
    naive_nbytes: int
    storage_nbytes: int
    skipped: int = 0
    noun: str = "storage"
    shared_how: str = ""
    categories: str = ""  # training state: "weights 1.0 GiB · grads 1.0 GiB · Adam 2.0 GiB"
    legend: tuple[tuple[str, str], ...] = ()  # (label, colour) of each category, coloured by category

    @property
    def text(self) -> str:
        """One line of totals. For safetensors files (``noun == "file"``) the storages are
        counted as files and, grouped by storage, shared groups are tensors sharing bytes
        within a file (``shared_how``; see :func:`tensorviz._text.shown_shared`)."""
        s = (
            f"{self.tensors:,} tensor{'s' * (self.tensors != 1)} · {self.storages:,} "
            f"{self.noun}{'s' * (self.storages != 1)} · {self.shared_groups:,} shared "
            f"group{'s' * (self.shared_groups != 1)} ({self.shared_how or f'by {self.by}'}) · unique "
            f"{format_bytes(self.unique_nbytes)} vs naive {format_bytes(self.naive_nbytes)}"
        )
        s += f" · {self.skipped} skipped" if self.skipped else ""
        return s + (f" · {self.categories}" if self.categories else "")


@dataclass(frozen=True)
class LogicalGroup:
    """The lanes that draw one logical tensor's stored pieces (a tensor subclass's inner
    tensors, a packed weight's parts; see :class:`~tensorviz.core.records.Piece`), drawn as one
    group: ``name`` the logical tensor, ``label`` what it is and the bytes of each piece
    (``"0.weight Int8Tensor 64×64: int8 qdata 4.0 KiB + float32 scale 256 B + int8 zero_point
    64 B = 4.3 KiB stored, 16.0 KiB as float32"``), ``lanes`` its first and last lane (inclusive),
    ``pieces`` the names of the pieces drawn."""

    name: str
    label: str
    lanes: tuple[int, int]
    pieces: tuple[str, ...]


class BarColumns(NamedTuple):
    """The bars of a diagram as numpy columns, one row per bar, for vectorised renderers:
    byte range, lane, colour (an index into ``colors``) and each flag of :class:`Bar`."""

    start: np.ndarray
    stop: np.ndarray
    lane: np.ndarray
    color: np.ndarray
    colors: tuple[str, ...]
    sparse: np.ndarray  # runs is not None: the span has gaps, the runs are drawn
    overlaps_other: np.ndarray
    non_contiguous: np.ndarray
    reinterpreted: np.ndarray
    expanded: np.ndarray
    empty: np.ndarray


@dataclass(frozen=True, eq=False)
class Diagram:
    """What to draw: blocks of lanes of bars, plus header, summary and byte range. Immutable.

    ``overview`` (a :class:`~tensorviz.plan.overview.Overview`, or None) shows every storage
    selected, when the lanes cannot (see the ``overview`` option of :func:`diagram`)."""

    by: GroupBy
    options: DiagramOptions
    blocks: tuple[Block, ...]
    lanes: tuple[Lane, ...]
    bars: tuple[Bar, ...]
    collapsed: Summary | None
    header: Header
    byte_range: tuple[int, int] | None
    hidden_storages: int = 0
    overview: Overview | None = None
    logical: tuple[LogicalGroup, ...] = ()

    @cached_property
    def x_range(self) -> tuple[int, int]:
        """Bytes the picture spans: the byte range, else 0 to the largest storage shown."""
        if self.byte_range is not None:
            return self.byte_range
        hi = max([b.nbytes for b in self.blocks] + [b.stop for b in self.bars] + [1])
        return 0, hi

    @cached_property
    def columns(self) -> BarColumns:
        """The bars as numpy columns (computed once; the diagram is immutable).

        >>> import torch, tensorviz as tv
        >>> x = torch.zeros(4, 4)
        >>> tv.diagram({"x": x, "col": x[:, 0]}).columns.sparse.tolist()
        [False, True]
        """
        bars, n = self.bars, len(self.bars)
        colors = tuple(sorted({b.color for b in bars}))
        index = {c: i for i, c in enumerate(colors)}

        def column(get, dtype) -> np.ndarray:  # one pass per column: no tuple per bar to collect
            return np.fromiter(map(get, bars), dtype, n)

        return BarColumns(
            column(attrgetter("start"), np.int64),
            column(attrgetter("stop"), np.int64),
            column(attrgetter("lane"), np.int64),
            column(lambda b: index[b.color], np.int64),
            colors,
            column(lambda b: b.runs is not None, bool),
            *(
                column(attrgetter(f), bool)
                for f in ("overlaps_other", "non_contiguous", "reinterpreted", "expanded", "empty")
            ),
        )

    @property
    def unreferenced(self) -> dict[int, np.ndarray]:
        """Unreferenced byte runs per storage index shown."""
        return {b.storage: b.unreferenced for b in self.blocks}

    def bars_for(self, name: str) -> tuple[Bar, ...]:
        """The bars that draw ``name`` (several only if it appears in more than one lane)."""
        found = tuple(b for b in self.bars if name in b.names)
        if not found:
            raise KeyError(
                f"no bar draws {name!r} in this diagram ({len(self.bars)} bars); "
                f"check the names/storages/byte_range filters"
            )
        return found

    def lane_of(self, name: str) -> Lane:
        return self.lanes[self.bars_for(name)[0].lane]

    def to_text(self, width: int = 60) -> str:
        """An ASCII lane map (see :func:`tensorviz.render.text.diagram_text`)."""
        return hooks.call("diagram.text", self, width=width)

    def __repr__(self) -> str:
        return f"<Diagram by={self.by} {len(self.blocks)} blocks, {len(self.lanes)} lanes, {len(self.bars)} bars>"
