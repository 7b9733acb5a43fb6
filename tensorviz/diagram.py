"""The drawing plan: Layout + options -> :class:`Diagram` (lanes of bars), read by every renderer.

Pure Python + numpy. A Diagram says *what* to draw -- which storages, in which order, one lane
per view (or per span group, or per packed sub-lane), each bar's byte range, names, colour,
exact footprint runs and flags -- and nothing about *how*. The matplotlib, text and HTML
renderers only read it, so tests can check the plan and the drawing separately.

>>> import torch, tensorviz as tv
>>> a = torch.rand(8, 10, 50)
>>> d = tv.diagram({"a": a, "b": a[2:4], "c": a[4:6]})
>>> [(lane.kind, lane.label) for lane in d.lanes]
[('storage', 'storage #0 · 15.6 KiB'), ('view', 'a'), ('view', 'b'), ('view', 'c')]
>>> [(bar.start, bar.stop) for bar in d.bars_for("b")]
[(4000, 8000)]
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import footprint as fp
from ._units import format_bytes
from .errors import TensorvizError
from .layout import Layout, Storage, TensorView

__all__ = ["diagram", "Diagram", "DiagramOptions", "Block", "Lane", "Bar", "Summary", "Header",
           "DiagramOptionError", "PALETTE", "color_for", "assign_colors"]

_BYS = ("storage", "span", "overlap")

#: Bar colours (colour-blind-friendly, no greys or reds: those mark unreferenced and overlapping
#: bytes). A group's colour is picked by a hash of its first name (see :func:`assign_colors`),
#: so it never depends on the order of the source; tied names share their group's colour.
PALETTE = ("#4477aa", "#66ccee", "#228833", "#ccbb44", "#aa3377", "#5566dd", "#009988",
           "#ee7733", "#88ccaa", "#997700", "#6699cc", "#bb99dd")


class DiagramOptionError(TensorvizError, ValueError):
    """An option of :func:`diagram` is out of range (the message shows the value and the fix)."""


@dataclass(frozen=True)
class DiagramOptions:
    """The normalised options a Diagram was planned with (see :func:`diagram`)."""

    by: str = "storage"
    names: str | None = None
    storages: tuple[int, ...] | None = None
    only_shared: bool = False
    byte_range: tuple[int, int] | None = None
    max_lanes: int = 40
    show_unreferenced: bool = True
    expand_simple: bool = False


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
        if self.runs is None:
            return self.stop - self.start
        return fp.total(self.runs)

    def __repr__(self) -> str:
        flags = [f for f in ("overlaps_other", "non_contiguous", "reinterpreted", "expanded", "empty")
                 if getattr(self, f)]
        return f"Bar({self.label!r}, [{self.start}, {self.stop}), lane={self.lane}, flags={flags})"


@dataclass(frozen=True, eq=False)
class Block:
    """One storage shown: its lanes, bars, unreferenced runs and why it is interesting.

    ``lanes`` and ``bars`` index :attr:`Diagram.lanes` / :attr:`Diagram.bars`. ``unreferenced``
    holds the storage's runs no view reads (clipped to the byte range; empty when hidden),
    ``overlap_runs`` the bytes read by two or more bars. ``reasons`` is a subset of
    ("shared", "partial", "overlapping", "non-contiguous"); ``simple`` blocks have none.
    ``header`` holds a file's header bytes (clipped; they are not in ``unreferenced``).
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

    by: str
    tensors: int
    storages: int
    shared_groups: int
    unique_nbytes: int
    naive_nbytes: int
    storage_nbytes: int
    skipped: int = 0

    @property
    def text(self) -> str:
        s = (f"{self.tensors:,} tensor{'s' * (self.tensors != 1)} · {self.storages:,} "
             f"storage{'s' * (self.storages != 1)} · {self.shared_groups:,} shared "
             f"group{'s' * (self.shared_groups != 1)} (by {self.by}) · unique "
             f"{format_bytes(self.unique_nbytes)} vs naive {format_bytes(self.naive_nbytes)}")
        return s + (f" · {self.skipped} skipped" if self.skipped else "")


@dataclass(frozen=True, eq=False)
class Diagram:
    """What to draw: blocks of lanes of bars, plus header, summary and byte range. Immutable."""

    by: str
    options: DiagramOptions
    blocks: tuple[Block, ...]
    lanes: tuple[Lane, ...]
    bars: tuple[Bar, ...]
    collapsed: Summary | None
    header: Header
    byte_range: tuple[int, int] | None
    hidden_storages: int = 0

    @property
    def x_range(self) -> tuple[int, int]:
        """Bytes the picture spans: the byte range, else 0 to the largest storage shown."""
        if self.byte_range is not None:
            return self.byte_range
        hi = max([b.nbytes for b in self.blocks] + [b.stop for b in self.bars] + [1])
        return 0, hi

    @property
    def unreferenced(self) -> dict[int, np.ndarray]:
        """Unreferenced byte runs per storage index shown."""
        return {b.storage: b.unreferenced for b in self.blocks}

    def bars_for(self, name: str) -> tuple[Bar, ...]:
        """The bars that draw ``name`` (several only if it appears in more than one lane)."""
        found = tuple(b for b in self.bars if name in b.names)
        if not found:
            raise KeyError(f"no bar draws {name!r} in this diagram ({len(self.bars)} bars); "
                           f"check the names/storages/byte_range filters")
        return found

    def lane_of(self, name: str) -> Lane:
        return self.lanes[self.bars_for(name)[0].lane]

    def to_text(self, width: int = 60) -> str:
        """An ASCII lane map (see :func:`tensorviz.render.text.diagram_text`)."""
        from .render.text import diagram_text

        return diagram_text(self, width=width)

    def __repr__(self) -> str:
        return (f"<Diagram by={self.by} {len(self.blocks)} blocks, {len(self.lanes)} lanes, "
                f"{len(self.bars)} bars>")


def color_for(name: str) -> str:
    """The palette colour of a group whose first name is ``name`` (stable across runs)."""
    return PALETTE[zlib.crc32(name.encode("utf-8")) % len(PALETTE)]


def assign_colors(first_names: Sequence[str]) -> dict[str, str]:
    """Colours for the groups drawn together: each group starts at the hash of its first name
    (:func:`color_for`) and moves to the next free palette colour on a collision, visiting
    groups in hash order -- so colours depend on which groups are shown, never on their order.

    >>> cs = assign_colors(["a", "b", "c"]); len(set(cs.values()))
    3
    """
    n = len(PALETTE)
    keyed = sorted({(zlib.crc32(name.encode("utf-8")), name) for name in first_names})
    out: dict[str, str] = {}
    used: set[int] = set()
    for h, name in keyed:
        if len(used) == n:
            used.clear()
        k = h % n
        while k in used:
            k = (k + 1) % n
        used.add(k)
        out[name] = PALETTE[k]
    return out


def diagram(layout_or_obj: Any, *, by: str = "storage", names: str | None = None,
            storages: Sequence[int] | None = None, only_shared: bool = False,
            byte_range: tuple[int, int] | None = None, max_lanes: int = 40,
            show_unreferenced: bool = True, expand_simple: bool = False) -> Diagram:
    """Plan the bar diagram of a layout.

    Args:
        layout_or_obj: a :class:`Layout` or anything :func:`tensorviz.analyze` accepts.
        by: ``"storage"`` (a lane per view under each storage's extent), ``"span"`` (views with
            an identical span share one bar, e.g. tied weights) or ``"overlap"`` (views packed
            onto sub-lanes so none hides another; overlapping bytes marked).
        names: regular expression; only views whose name matches (``re.search``) are drawn.
        storages: storage indices (as in ``layout.storages``) to include.
        only_shared: only storages (storage mode) or bars (span/overlap mode) in shared groups.
        byte_range: ``(lo, hi)`` bytes to zoom into (most useful with one storage).
        max_lanes: most rows drawn; extra views go to a "… N more" row that still draws them.
        show_unreferenced: draw the bytes of each storage that no view reads.
        expand_simple: draw storages whose single view is the whole storage, instead of
            collapsing them into one summary line.

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
    layout = layout_or_obj if isinstance(layout_or_obj, Layout) else _analyze(layout_or_obj)
    opts = _normalise(layout, by, names, storages, only_shared, byte_range, max_lanes,
                      show_unreferenced, expand_simple)
    return _Planner(layout, opts).plan()


def _analyze(obj: Any) -> Layout:
    from . import analyze

    return analyze(obj)


def _normalise(layout: Layout, by: str, names: str | None, storages: Sequence[int] | None,
               only_shared: bool, byte_range: tuple[int, int] | None, max_lanes: int,
               show_unreferenced: bool, expand_simple: bool) -> DiagramOptions:
    if by not in _BYS:
        raise DiagramOptionError(f"by must be one of {_BYS}, got {by!r}")
    if names is not None:
        try:
            re.compile(names)
        except re.error as err:
            raise DiagramOptionError(f"names={names!r} is not a valid regular expression ({err}); "
                                     f"escape special characters with re.escape(...)") from None
    if storages is not None:
        n = len(layout.storages)
        bad = [i for i in storages if not isinstance(i, (int, np.integer)) or not 0 <= i < n]
        if bad:
            raise DiagramOptionError(f"storages={list(storages)!r}: {bad} not storage indices; "
                                     f"this layout has storages 0..{n - 1}")
        storages = tuple(int(i) for i in storages)
    if byte_range is not None:
        lo, hi = (int(x) for x in byte_range)
        if not 0 <= lo < hi:
            raise DiagramOptionError(f"byte_range={tuple(byte_range)!r} must be (lo, hi) with "
                                     f"0 <= lo < hi, in bytes from the start of the storage")
        byte_range = (lo, hi)
    if not isinstance(max_lanes, (int, np.integer)) or max_lanes < 3:
        raise DiagramOptionError(f"max_lanes must be an integer >= 3, got {max_lanes!r}")
    return DiagramOptions(by, names, storages, bool(only_shared), byte_range, int(max_lanes),
                          bool(show_unreferenced), bool(expand_simple))


def storage_reasons(layout: Layout, storage: Storage) -> tuple[str, ...]:
    """Why a storage is worth drawing: a subset of shared/partial/overlapping/non-contiguous."""
    views = layout.storage_views(storage.key)
    reasons = []
    if len(views) > 1:
        reasons.append("shared")
    if storage.unreferenced_nbytes and storage.nbytes:
        reasons.append("partial")
    if sum(v.footprint_nbytes for v in views) > storage.covered_nbytes:
        reasons.append("overlapping")
    if any(not v.is_contiguous for v in views):
        reasons.append("non-contiguous")
    if not views and storage.nbytes:
        return ("partial",)
    return tuple(reasons)


def view_label(view: TensorView) -> str:
    """``float32[2, 10, 50]`` style description of a view's dtype and shape."""
    return f"{view.dtype}[{', '.join(map(str, view.shape))}]"


# -- planning ---------------------------------------------------------------------------------
@dataclass(eq=False)
class _Proto:
    """A bar before it has a lane: its views, byte range, exact runs and flags."""

    views: list[TensorView]
    start: int
    stop: int
    runs: np.ndarray  # canonical, unclipped (EMPTY for empty views)
    dense: bool
    overlap: np.ndarray = field(default_factory=lambda: fp.EMPTY)
    reinterpreted: bool = False
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.names = tuple(v.name for v in self.views)

    @property
    def empty(self) -> bool:
        return self.start == self.stop


@dataclass(eq=False)
class _Source:
    """A storage selected for drawing, with its bars grouped into content rows."""

    storage: Storage
    reasons: tuple[str, ...]
    protos: list[_Proto]
    rows: list[list[int]]  # proto indices per content row, in drawing order


class _Planner:
    """Turns a Layout and options into a Diagram, in numbered steps (see :meth:`plan`)."""

    def __init__(self, layout: Layout, opts: DiagramOptions):
        self.layout, self.opts = layout, opts
        self.rx = re.compile(opts.names) if opts.names is not None else None
        self._first: dict[str, str] = {}

    def plan(self) -> Diagram:
        # 1. select storages and make their bars; 2. order them; 3. collapse simple ones;
        # 4. share the lane budget; 5. emit lanes and bars.
        sources = [src for s in self._selected_storages() if (src := self._source(s)) is not None]
        sources.sort(key=lambda src: (not src.reasons, -src.storage.nbytes, src.storage.index))
        collapsed = None
        if not self.opts.expand_simple and any(src.reasons for src in sources):
            simple = [src for src in sources if not src.reasons]
            if simple:
                collapsed = Summary(len(simple), sum(src.storage.nbytes for src in simple),
                                    tuple(src.storage.index for src in simple))
            sources = [src for src in sources if src.reasons]
        needs = [1 if not src.reasons else 1 + len(src.rows) for src in sources]
        caps, shown = _allocate(needs, self.opts.max_lanes - (collapsed is not None))
        return self._emit(sources[:shown], caps, collapsed, hidden=len(sources) - shown)

    # -- step 1: selection ----------------------------------------------------------------
    def _selected_storages(self) -> list[Storage]:
        wanted = self.opts.storages
        return [s for s in self.layout.storages if wanted is None or s.index in wanted]

    def _source(self, storage: Storage) -> _Source | None:
        views = self.layout.storage_views(storage.key)
        if self.opts.only_shared and self.opts.by == "storage" and len(views) < 2:
            return None
        protos = self._protos(views)
        _mark_overlaps(protos)
        _mark_reinterpreted(protos)
        keep = [p for p in protos if self._wanted(p)]
        if not keep and (views or self.rx is not None or self.opts.only_shared):
            return None
        if self.opts.byte_range is not None and not keep and storage.nbytes <= self.opts.byte_range[0]:
            return None
        rows = _pack(keep) if self.opts.by == "overlap" else [[i] for i in range(len(keep))]
        return _Source(storage, storage_reasons(self.layout, storage), keep, rows)

    def _protos(self, views: Sequence[TensorView]) -> list[_Proto]:
        if self.opts.by != "span":
            return [self._proto([v]) for v in views]
        spans: dict[object, list[TensorView]] = {}
        for i, v in enumerate(views):
            spans.setdefault(("empty", i) if v.is_empty else (v.start, v.stop), []).append(v)
        return [self._proto(vs) for vs in spans.values()]

    def _proto(self, views: list[TensorView]) -> _Proto:
        v0 = views[0]
        if v0.is_empty:
            return _Proto(views, v0.start, v0.stop, fp.EMPTY, dense=False)
        if len(views) == 1 and v0.is_dense:
            return _Proto(views, v0.start, v0.stop, np.array([[v0.start, v0.stop]], dtype=np.int64), dense=True)
        runs = [self.layout.footprint_runs(v.name) for v in views]
        merged = runs[0] if len(runs) == 1 else fp.union(*runs)
        dense = len(merged) == 1 and merged[0, 0] == v0.start and merged[0, 1] == v0.stop
        return _Proto(views, v0.start, v0.stop, merged, dense)

    def _wanted(self, p: _Proto) -> bool:
        if self.rx is not None and not any(self.rx.search(n) for n in p.names):
            return False
        if self.opts.only_shared and self.opts.by != "storage":
            by = self.opts.by
            if len(self.layout.group_of(p.names[0], by)) < 2:
                return False
        lo_hi = self.opts.byte_range
        if lo_hi is not None:
            lo, hi = lo_hi
            return (lo <= p.start < hi) if p.empty else (p.start < hi and p.stop > lo)
        return True

    def _first_name(self, name: str) -> str:
        if not self._first:
            self._first = {n: g.names[0] for g in self.layout.groups("span") for n in g.names}
        return self._first.get(name, name)

    # -- step 5: emit ---------------------------------------------------------------------
    def _emit(self, sources: list[_Source], caps: list[int], collapsed: Summary | None,
              hidden: int) -> Diagram:
        lanes: list[Lane] = []
        bars: list[Bar] = []
        blocks: list[Block] = []
        self._colors = assign_colors([self._first_name(p.views[0].name) for src in sources for p in src.protos])
        for src, cap in zip(sources, caps):
            blocks.append(self._emit_block(src, cap, len(blocks), lanes, bars))
        if hidden:
            lanes.append(Lane(f"… {hidden:,} more storage{'s' * (hidden != 1)}", "more-storages",
                              -1, -1, 0, hidden=hidden))
        if collapsed is not None:
            lanes.append(Lane(collapsed.text, "summary", -1, -1, collapsed.nbytes, hidden=collapsed.count))
        layout = self.layout
        header = Header(self.opts.by, len(layout), len(layout.storages), len(layout.shared(self.opts.by)),
                        layout.unique_nbytes, layout.naive_nbytes, layout.storage_nbytes,
                        len(layout.skipped))
        return Diagram(self.opts.by, self.opts, tuple(blocks), tuple(lanes), tuple(bars), collapsed,
                       header, self.opts.byte_range, hidden)

    def _emit_block(self, src: _Source, cap: int, bi: int, lanes: list[Lane], bars: list[Bar]) -> Block:
        s = src.storage
        first_lane, first_bar = len(lanes), len(bars)
        if not src.reasons:  # a simple storage drawn in full: one row is extent and view
            p = src.protos[0]
            lanes.append(Lane(p.names[0], "simple", bi, s.index, s.nbytes))
            bars.append(self._bar(p, first_lane, bi))
        else:
            lanes.append(Lane(_storage_label(s), "storage", bi, s.index, s.nbytes))
            rows = src.rows
            own = rows if len(rows) + 1 <= cap else rows[:max(cap - 2, 0)]
            for row in own:
                lanes.append(Lane(self._row_label(src, row), "view", bi, s.index,
                                  _row_size(src, row), sub=len(lanes) - first_lane))
                bars.extend(self._bar(src.protos[i], len(lanes) - 1, bi) for i in row)
            rest = [i for row in rows[len(own):] for i in row]
            if rest:
                n = sum(len(src.protos[i].views) for i in rest)
                lanes.append(Lane(f"… {n:,} more view{'s' * (n != 1)}", "more", bi, s.index,
                                  _row_size(src, rest), sub=len(lanes) - first_lane, hidden=n))
                bars.extend(self._bar(src.protos[i], len(lanes) - 1, bi) for i in rest)
        hidden = lanes[-1].hidden if lanes[-1].kind == "more" else 0
        unref = (self.layout.unreferenced_runs(s.key) if self.opts.show_unreferenced and s.unreferenced_nbytes
                 else fp.EMPTY)
        overlaps = [p.overlap for p in src.protos if len(p.overlap)]
        overlap = fp.union(*overlaps) if overlaps else fp.EMPTY
        return Block(s.index, s.key, _storage_label(s), s.device, s.nbytes,
                     tuple(range(first_lane, len(lanes))), tuple(range(first_bar, len(bars))),
                     self._clip(unref), fp.total(unref), self._clip(overlap), src.reasons, hidden)

    def _row_label(self, src: _Source, row: list[int]) -> str:
        protos = [src.protos[i] for i in row]
        if len(protos) == 1:
            return " ≡ ".join(protos[0].names)
        names = [n for p in protos for n in p.names]
        if len(names) <= 3:
            return ", ".join(names)
        return f"{names[0]}, … ({len(names):,} views)"

    def _bar(self, p: _Proto, lane: int, block: int) -> Bar:
        views = p.views
        return Bar(lane=lane, block=block, start=p.start, stop=p.stop, names=p.names,
                   color=self._colors[self._first_name(views[0].name)],
                   dtype=views[0].dtype if len({v.dtype for v in views}) == 1 else "mixed",
                   runs=None if p.dense or p.empty else self._clip(p.runs),
                   overlap_runs=self._clip(p.overlap) if len(p.overlap) else None,
                   overlaps_other=bool(len(p.overlap)),
                   non_contiguous=any(not v.is_contiguous for v in views),
                   reinterpreted=p.reinterpreted, expanded=any(v.is_expanded for v in views),
                   empty=p.empty, exact=all(v.exact for v in views))

    def _clip(self, runs: np.ndarray) -> np.ndarray:
        if self.opts.byte_range is None or not len(runs):
            return runs
        return fp.clip(runs, *self.opts.byte_range)


def _storage_label(s: Storage) -> str:
    parts = [f"storage #{s.index}"]
    if s.label:
        parts.append(s.label)
    elif s.device != "cpu":
        parts.append(s.device)
    parts.append(format_bytes(s.nbytes))
    return " · ".join(parts)


def _row_size(src: _Source, row: list[int]) -> int:
    return max((src.protos[i].stop for i in row), default=0) - min((src.protos[i].start for i in row), default=0)


def _allocate(needs: list[int], budget: int, min_cap: int = 6) -> tuple[list[int], int]:
    """Lanes per block under a budget, blocks in priority order.

    All blocks if they fit. Otherwise a common cap on the largest blocks (water filling), over
    as many leading blocks as keep that cap useful: at least ``min_cap`` lanes (extent, a few
    views, the "more" row), or every shown block complete. One lane is kept for the
    "… N more storages" row when blocks are dropped. Returns the caps and the blocks shown.
    """
    if sum(needs) <= budget:
        return list(needs), len(needs)
    for shown in range(len(needs), 0, -1):
        room = budget - (shown < len(needs))
        part = needs[:shown]
        if sum(min(n, 3) for n in part) > room and shown > 1:
            continue
        cap = _water_level(part, room)
        if cap >= min_cap or all(n <= cap for n in part) or shown == 1:
            return [min(n, cap) for n in part], shown
    return [], 0


def _water_level(needs: list[int], room: int) -> int:
    """The largest cap c (>= 3) with sum(min(n, c)) <= room."""
    lo, hi = 3, max(max(needs, default=3), 3)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in needs) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _pack(protos: list[_Proto]) -> list[list[int]]:
    """Greedy interval packing of spans onto rows: each bar takes the lowest free row, so no bar
    hides another. Empty views go on the first row."""
    import heapq

    order = sorted(range(len(protos)), key=lambda i: (protos[i].start, -protos[i].stop, i))
    rows: list[list[int]] = []
    busy: list[tuple[int, int]] = []  # (end, row)
    free: list[int] = []
    for i in order:
        p = protos[i]
        if p.empty:
            if not rows:
                rows.append([])
            rows[0].append(i)
            continue
        while busy and busy[0][0] <= p.start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            r = heapq.heappop(free)
        else:
            r = len(rows)
            rows.append([])
        rows[r].append(i)
        heapq.heappush(busy, (p.stop, r))
    return rows


def depth_runs(run_sets: Sequence[np.ndarray], at_least: int = 2) -> np.ndarray:
    """Bytes covered by at least ``at_least`` of the given canonical run sets (a sweep)."""
    sets = [r for r in run_sets if len(r)]
    if len(sets) < at_least:
        return fp.EMPTY
    allr = np.concatenate(sets)
    pos = np.concatenate((allr[:, 0], allr[:, 1]))
    delta = np.concatenate((np.ones(len(allr), np.int64), -np.ones(len(allr), np.int64)))
    order = np.lexsort((delta, pos))  # at a shared position, ends before starts: abutting != overlap
    pos, depth = pos[order], np.cumsum(delta[order])
    keep = (depth[:-1] >= at_least) & (pos[1:] > pos[:-1])
    return fp.union(np.stack((pos[:-1][keep], pos[1:][keep]), axis=1))


def _intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not len(a) or not len(b):
        return fp.EMPTY
    lo = np.searchsorted(b[:, 1], a[0, 0], side="right")
    hi = np.searchsorted(b[:, 0], a[-1, 1], side="left")
    b = b[lo:hi]
    return depth_runs([a, b], 2) if len(b) else fp.EMPTY


def _mark_overlaps(protos: list[_Proto]) -> None:
    """Set each bar's ``overlap``: its bytes that another bar of the block also reads."""
    if len(protos) < 2:
        return
    if len(protos) <= 64 and all(p.dense or p.empty for p in protos):
        _mark_dense_overlaps(protos)  # the common case (ties, slices), without numpy overhead
        return
    multi = depth_runs([p.runs for p in protos], 2)
    if not len(multi):
        return
    for p in protos:
        if len(p.runs):
            p.overlap = _intersect(p.runs, multi)


def _mark_dense_overlaps(protos: list[_Proto]) -> None:
    events = sorted([(p.start, 1) for p in protos if not p.empty] + [(p.stop, -1) for p in protos if not p.empty])
    multi: list[list[int]] = []
    depth, prev = 0, None
    for pos, delta in events:  # ends sort before starts at one position: abutting is not overlap
        if depth >= 2 and prev is not None and pos > prev:
            if multi and multi[-1][1] == prev:
                multi[-1][1] = pos
            else:
                multi.append([prev, pos])
        depth += delta
        prev = pos
    if not multi:
        return
    for p in protos:
        if p.empty:
            continue
        mine = [[max(a, p.start), min(b, p.stop)] for a, b in multi if a < p.stop and b > p.start]
        if mine:
            p.overlap = fp.as_runs(mine)


def _mark_reinterpreted(protos: list[_Proto]) -> None:
    """Flag bars that read bytes as another dtype than the storage's first view does (and
    share those bytes with it): ``x.view(torch.int32)`` is flagged, ``x`` is not."""
    if not protos:
        return
    primary = protos[0].views[0].dtype
    dtypes = [{v.dtype for v in p.views} for p in protos]
    if all(ds == {primary} for ds in dtypes):
        return
    native = fp.union(*(p.runs for p, ds in zip(protos, dtypes) if primary in ds))
    for p, ds in zip(protos, dtypes):
        if len(ds) > 1 or (ds != {primary} and len(p.overlap) and fp.intersection_nbytes(p.runs, native)):
            p.reinterpreted = True
