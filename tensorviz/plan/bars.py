"""Bars before they have a lane: one per view (or per span group), with exact runs and flags.

Private to the diagram planner (:mod:`tensorviz._plan`). A :class:`Proto` is mutable while the
planner marks overlaps and reinterpretations on the protos of one storage; the planner then
freezes each into a :class:`~tensorviz.plan.diagram.Bar`. Everything here works per storage and
costs little for the common storage of one or two dense views (no numpy on that path).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core import periodic
from tensorviz.core import sweep as sw
from tensorviz.core import towers as tw
from tensorviz.core.records import TensorView

__all__ = [
    "Proto",
    "make_protos",
    "mark_overlaps",
    "mark_reinterpreted",
    "pack",
    "depth_runs",
    "subtract",
    "DRAW_RUNS",
    "DRAW_CELLS",
    "cell_counts",
    "cell_runs",
    "cell_unread",
]

#: Most runs a bar lists. A footprint with more (a tower of millions of strided runs) is drawn
#: per cell instead (see :func:`cell_runs`): nothing is listed run by run.
DRAW_RUNS = 1 << 16

#: Cells a storage's drawn window is cut into when a bar of it is drawn per cell: more than a
#: bar is ever pixels wide (a few thousand), so the picture is the same as the exact runs'.
DRAW_CELLS = 1 << 13


class Proto:
    """A bar before it has a lane: its views, byte range, exact runs and flags.

    ``runs`` is canonical and unclipped (``EMPTY`` for empty views; made on first use for a
    dense proto, whose runs are its span); ``dense`` says the runs are the whole span;
    ``overlap`` the bytes another bar of the storage also reads.
    """

    __slots__ = (
        "views",
        "names",
        "start",
        "stop",
        "_runs",
        "dense",
        "overlap",
        "reinterpreted",
        "piece",
        "cell",
        "read",
        "edges",
    )

    def __init__(self, views: list[TensorView], runs: np.ndarray | None, dense: bool):
        v0 = views[0]
        self.views, self.names = views, tuple([v.name for v in views])
        self.start, self.stop = v0.start, v0.stop
        self._runs, self.dense = runs, dense
        self.overlap: np.ndarray = fp.EMPTY
        self.reinterpreted = False
        # Drawn per cell (see :func:`cell_runs`): the exact footprint (a periodic piece), the cell
        # width in bytes (0: ``runs`` are exact) and the bytes read inside the drawn window.
        self.piece: object = None
        self.cell = 0
        self.read = -1
        self.edges: np.ndarray = fp.EMPTY[:, 0]

    @property
    def runs(self) -> np.ndarray:
        if self._runs is None:
            self._runs = np.array([[self.start, self.stop]], dtype=np.int64)
        return self._runs

    @property
    def empty(self) -> bool:
        return self.start == self.stop


Pieces = Callable[[str], "np.ndarray | periodic.Tower | periodic.Union"]


def make_protos(
    views: Sequence[TensorView],
    by_span: bool,
    footprint_runs: Callable[[str], np.ndarray],
    footprint_piece: Pieces | None = None,
    window: tuple[int, int] = (0, 0),
) -> list[Proto]:
    """One proto per view; with ``by_span``, one per group of views with an identical span
    (empty views never group). With ``footprint_piece``, a footprint of more than
    :data:`DRAW_RUNS` runs is drawn per cell of ``window`` (the storage's bytes on the
    picture) instead of listed."""
    groups: list[list[TensorView]] = [[v] for v in views]
    if by_span:
        spans: dict[object, list[TensorView]] = {}
        for i, v in enumerate(views):
            spans.setdefault(("empty", i) if v.is_empty else (v.start, v.stop), []).append(v)
        groups = list(spans.values())
    return [_proto(vs, footprint_runs, footprint_piece, window) for vs in groups]


def _proto(
    views: list[TensorView],
    footprint_runs: Callable[[str], np.ndarray],
    footprint_piece: Pieces | None,
    window: tuple[int, int],
) -> Proto:
    v0 = views[0]
    if v0.is_empty:
        return Proto(views, fp.EMPTY, dense=False)
    if len(views) == 1 and v0.is_dense:
        return Proto(views, None, dense=True)
    pieces = [footprint_piece(v.name) for v in views] if footprint_piece is not None else None
    if pieces is not None and sum(_nruns(p) for p in pieces) > DRAW_RUNS:
        return _cell_proto(views, pieces, window)
    listed = [p for p in pieces or () if isinstance(p, np.ndarray)]
    if pieces is not None and len(listed) == len(pieces):
        runs = listed  # a listed piece is the view's footprint runs
    else:
        runs = [footprint_runs(v.name) for v in views]
    merged = runs[0] if len(runs) == 1 else fp.union(*runs)
    dense = len(merged) == 1 and merged[0, 0] == v0.start and merged[0, 1] == v0.stop
    return Proto(views, merged, dense)


def _nruns(p: object) -> int:
    """Runs a piece would list (an upper bound for towers: abutting copies merge)."""
    if isinstance(p, np.ndarray):
        return len(p)
    if isinstance(p, periodic.Union):
        return len(p.listed) + sum(map(_nruns, p.pieces))
    return tw.nruns(p)  # type: ignore[arg-type]  # a Tower


def _cell_proto(views: list[TensorView], pieces: list, window: tuple[int, int]) -> Proto:
    """A proto drawn per cell of ``window``: its runs are the cells it reads bytes in."""
    piece = pieces[0] if len(pieces) == 1 else periodic.Union(pieces)
    edges = _edges(window)
    counts = cell_counts(piece, edges)
    p = Proto(views, _clip_runs(cell_runs(edges, counts > 0), views[0].start, views[0].stop), dense=False)
    p.piece, p.read, p.edges = piece, int(counts.sum()), edges
    p.cell = int(edges[1] - edges[0]) if len(edges) > 1 else 1
    return p


# -- drawing per cell ---------------------------------------------------------------------------
def _edges(window: tuple[int, int], cells: int | None = None) -> np.ndarray:
    """Cell edges over ``window``: equal cells of a whole number of bytes (the last one cut)."""
    lo, hi = window
    n = DRAW_CELLS if cells is None else cells
    width = max(1, -(-(hi - lo) // n))
    return np.minimum(np.arange(lo, hi + width, width, dtype=np.int64), hi) if hi > lo else np.array([lo], np.int64)


def cell_counts(piece: object, edges: np.ndarray) -> np.ndarray:
    """Bytes of a footprint (runs, Tower or Union) in each cell between consecutive ``edges``,
    exact (from its bytes below each edge: a division per storey, nothing listed).

    >>> cell_counts(periodic.Tower(0, np.array([[0, 1]]), 2, 8), np.array([0, 4, 16])).tolist()
    [2, 6]
    """
    below = tw.below(piece, edges) if isinstance(piece, np.ndarray) else piece.below(edges)  # type: ignore[attr-defined]
    return np.diff(below)


def cell_runs(edges: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """The drawn runs of cells: each maximal stretch of cells with ``hit`` (cells reading at
    least one byte) is one run from its first cell's start to its last cell's end.

    >>> cell_runs(np.array([0, 4, 8, 12, 16]), np.array([True, True, False, True])).tolist()
    [[0, 8], [12, 16]]
    """
    if not hit.any():
        return fp.EMPTY
    d = np.diff(np.concatenate(([0], hit.view(np.int8), [0])))
    first, last = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    out = np.stack((edges[first], edges[last]), axis=1)
    out.flags.writeable = False
    return out


def cell_unread(protos: list[Proto], nbytes: int) -> np.ndarray | None:
    """None unless a proto of the storage is drawn per cell; else the cells of its first
    ``nbytes`` holding a byte no proto reads (from the exact union's count per cell)."""
    drawn = [p for p in protos if p.cell]
    if not drawn:
        return None
    edges = drawn[0].edges
    rows = _row_parts_of([p for p in protos if not p.empty])
    union = sw.row_union(*rows) if rows is not None else None
    read = (
        np.diff(union.below(edges))
        if union is not None
        else cell_counts(periodic.Union([_piece(p) for p in protos if not p.empty]), edges)
    )
    return _clip_runs(cell_runs(edges, read < np.diff(edges)), 0, nbytes)


def _clip_runs(runs: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return fp.clip(runs, lo, hi) if len(runs) else runs


# -- bytes read by two or more bars -------------------------------------------------------------
def depth_runs(run_sets: Sequence[np.ndarray], at_least: int = 2) -> np.ndarray:
    """Bytes covered by at least ``at_least`` of the given canonical run sets (a sweep).

    >>> depth_runs([np.array([[0, 10]]), np.array([[5, 20]]), np.array([[8, 9]])]).tolist()
    [[5, 10]]
    """
    sets = [r for r in run_sets if len(r)]
    if len(sets) < at_least:
        return fp.EMPTY
    return _depth(np.concatenate(sets), at_least)


def _depth(allr: np.ndarray, at_least: int) -> np.ndarray:
    """Bytes inside at least ``at_least`` of the runs ``allr`` (k, 2), canonical."""
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


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The runs of ``a`` outside ``b`` (both canonical).

    >>> subtract(np.array([[0, 100]]), np.array([[0, 16], [40, 50]])).tolist()
    [[16, 40], [50, 100]]
    """
    if not len(a) or not len(b):
        return a
    return _intersect(a, fp.gaps(b, int(a[0, 0]), int(a[-1, 1])))


def mark_overlaps(protos: list[Proto]) -> np.ndarray:
    """Set each proto's ``overlap``: its bytes that another proto of the storage also reads.
    Returns the bytes read by two or more protos (the union of those overlaps)."""
    if len(protos) < 2:
        return fp.EMPTY
    if len(protos) <= 64 and all(p.dense or p.empty for p in protos):
        return _mark_dense_overlaps(protos)  # the common case (ties, slices), without numpy overhead
    multi = _mark_row_overlaps(protos)
    if multi is not None:
        return multi
    if any(p.cell for p in protos):
        return _mark_cell_overlaps(protos)
    dense = [p for p in protos if p.dense]
    other = [p for p in protos if not p.dense and len(p.runs)]
    spans = np.array([(p.start, p.stop) for p in dense], dtype=np.int64).reshape(-1, 2)
    if len(spans) + sum(len(p.runs) for p in other) < 2:
        return fp.EMPTY
    multi = _depth(np.concatenate([spans, *(p.runs for p in other)]), 2)
    if len(multi):
        _clip_to_spans(dense, spans, multi)
    for p in other if len(multi) else ():
        if p.start < multi[-1, 1] and p.stop > multi[0, 0]:
            p.overlap = _intersect(p.runs, multi)
    return multi


def _mark_row_overlaps(protos: list[Proto]) -> np.ndarray | None:
    """Overlaps in period space (:func:`~tensorviz.core.sweep.row_overlaps`) where the bars
    are mostly rows of one period (column slices): the bytes read by two or more bars and each
    bar's share of them, exact, without sorting every run of every bar (nor a union per bar
    for bars drawn per cell). Listed where a bar drawn per cell has no row form or the rows
    would cost more than the runs (None)."""
    live = [p for p in protos if not p.empty]
    rows = _row_parts_of(live)
    if rows is None:
        return None
    period, owner, k0, k1, ra, rb, nruns = rows
    found = sw.row_overlaps(period, owner, k0, k1, ra, rb, nruns)
    if found is None:
        return None
    multi, mine = found
    cells = next((p.edges for p in protos if p.cell), None)
    for i, share in mine.items():
        p = live[i]
        if cells is None:
            p.overlap = share.listed()
        else:  # counted in the cells of the bar's own span: a share lies within it
            mine_cells = _cells_over(cells, p.start, p.stop)
            p.overlap = _clip_runs(cell_runs(mine_cells, np.diff(share.below(mine_cells)) > 0), p.start, p.stop)
    return multi.listed() if cells is None else cell_runs(cells, np.diff(multi.below(cells)) > 0)


def _cells_over(edges: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The edges of the cells that hold a byte of ``[lo, hi)``: one count per cell of a bar's
    span instead of per cell of the storage's window (bars x cells, 20 s for 800 slices of a
    storage a strided view is drawn per cell of).

    >>> _cells_over(np.array([0, 4, 8, 12, 16]), 5, 9).tolist()
    [4, 8, 12]
    """
    first = max(0, int(np.searchsorted(edges, lo, side="right")) - 1)
    return edges[first : int(np.searchsorted(edges, hi, side="left")) + 1]


def _row_parts_of(live: list[Proto]) -> tuple | None:
    """The part-runs (see :func:`~tensorviz.core.sweep.row_parts`) of non-empty bars at the
    period whose one-view bars list the most runs, ``(period, owner, k0, k1, ra, rb, runs
    listing them would take)``; None under :data:`~tensorviz.core.sweep.PERIOD_MIN_RUNS` runs,
    or where a bar drawn per cell is not rows of that period."""
    forms = [_row_form(p) for p in live]
    periods: dict[int, int] = {}
    for f in forms:
        if f is not None:
            periods[f[0]] = periods.get(f[0], 0) + f[1] * len(f[3])
    if not periods or max(periods.values()) < sw.PERIOD_MIN_RUNS:
        return None
    period = max(periods, key=lambda q: periods[q])
    parts, nruns = [], 0
    for i, (p, f) in enumerate(zip(live, forms)):
        if f is not None and f[0] == period:
            parts.append(sw.row_parts(np.array([i]), np.array([f[2]]), np.array([f[1]]), f[3], period))
            nruns += f[1] * len(f[3])
        elif p.cell:
            return None  # a footprint too long to list, not in rows of this period
        else:
            parts.append(sw.run_parts(p.runs, np.full(len(p.runs), i), period))
            nruns += len(p.runs)
    owner, k0, k1, ra, rb = (np.concatenate(c) for c in zip(*parts))
    return period, owner, k0, k1, ra, rb, nruns


def _row_form(p: Proto) -> tuple[int, int, int, np.ndarray] | None:
    """``(period, count, start, base)`` (bytes) where a one-view bar's exact footprint is
    ``count`` copies of ``base`` at ``start + j * period``; None otherwise."""
    v = p.views[0]
    if len(p.views) > 1 or p.dense or not v.exact or not v.itemsize:
        return None
    if p.cell:
        t = p.piece
        if isinstance(t, tw.Tower) and isinstance(t.base, np.ndarray):
            return t.period, t.count, t.start, t.base
        if not isinstance(t, np.ndarray):
            return None
    runs = np.asarray(p.piece if p.cell else p.runs)
    if len(runs) < 2:
        return None
    rel = (runs - v.start) // v.itemsize
    form = tw.row_form(v.shape, v.stride, rel, (v.stop - v.start) // v.itemsize)
    if form is None:
        return None
    base, period, count = form
    return period * v.itemsize, count, v.start, base * v.itemsize


def _piece(p: Proto) -> object:
    """A proto's exact footprint: its periodic piece, else its runs (its span when dense)."""
    return p.piece if p.cell else p.runs


def _mark_cell_overlaps(protos: list[Proto]) -> np.ndarray:
    """Overlaps on a storage with a bar drawn per cell, per cell of that bar's grid: a cell is
    marked when another bar reads one of the bytes this one reads in it (exact counts from the
    footprints' union, :class:`~tensorviz.core.periodic.Union`; nothing listed). Returns the
    cells holding a byte read by two or more bars."""
    live = [p for p in protos if not p.empty]
    edges = next(p.edges for p in protos if p.cell)
    pieces = [_piece(p) for p in live]
    counts = [cell_counts(q, edges) for q in pieces]
    every = periodic.Union(pieces)
    total = cell_counts(every, edges)
    multi = cell_runs(edges, sum(counts) - total > 0) if every.exact else fp.EMPTY
    for i, p in enumerate(live):
        others = periodic.Union(pieces[:i] + pieces[i + 1 :])
        theirs = cell_counts(others, edges)
        both = counts[i] + theirs - total if others.exact and every.exact else np.minimum(counts[i], theirs)
        p.overlap = _clip_runs(cell_runs(edges, both > 0), p.start, p.stop)
    if not every.exact:  # an upper bound: cells where two bars each read something
        multi = (
            fp.union(*(p.overlap for p in live if len(p.overlap))) if any(len(p.overlap) for p in live) else fp.EMPTY
        )
    return multi


def _clip_to_spans(dense: list[Proto], spans: np.ndarray, multi: np.ndarray) -> None:
    """Each dense proto's overlap: the runs of ``multi`` inside its span, for all at once
    (a binary search each; one run is the usual answer, cut from one shared array)."""
    lo = np.searchsorted(multi[:, 1], spans[:, 0], side="right")
    hi = np.searchsorted(multi[:, 0], spans[:, 1], side="left")
    one = np.flatnonzero(hi - lo == 1)
    clipped = np.stack((np.maximum(spans[one, 0], multi[lo[one], 0]), np.minimum(spans[one, 1], multi[lo[one], 1])), 1)
    clipped.flags.writeable = False
    for k, i in enumerate(one.tolist()):
        dense[i].overlap = clipped[k : k + 1]
    for i in np.flatnonzero(hi - lo > 1).tolist():
        runs = multi[lo[i] : hi[i]].copy()
        runs[0, 0], runs[-1, 1] = max(runs[0, 0], spans[i, 0]), min(runs[-1, 1], spans[i, 1])
        runs.flags.writeable = False
        dense[i].overlap = runs


def _mark_dense_overlaps(protos: list[Proto]) -> np.ndarray:
    live = [p for p in protos if not p.empty]
    events = sorted([(p.start, 1) for p in live] + [(p.stop, -1) for p in live])
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
    for p in live if multi else ():
        mine = [[max(a, p.start), min(b, p.stop)] for a, b in multi if a < p.stop and b > p.start]
        if mine:
            p.overlap = _frozen(mine)
    return _frozen(multi) if multi else fp.EMPTY


def _frozen(runs: list[list[int]]) -> np.ndarray:
    """A run set from runs already sorted, disjoint and not abutting (no union needed)."""
    out = np.array(runs, dtype=np.int64)
    out.flags.writeable = False
    return out


def mark_reinterpreted(protos: list[Proto]) -> None:
    """Flag protos that read bytes as another dtype than the storage's first view does (and
    share those bytes with it): ``x.view(torch.int32)`` is flagged, ``x`` is not."""
    if not protos:
        return
    primary = protos[0].views[0].dtype
    if all(v.dtype == primary for p in protos for v in p.views):
        return
    dtypes = [{v.dtype for v in p.views} for p in protos]
    if any(p.cell for p in protos):  # exact, from the pieces (the drawn cells are coarser)
        native_piece = periodic.Union([_piece(p) for p, ds in zip(protos, dtypes) if primary in ds])
        for p, ds in zip(protos, dtypes):
            if len(ds) > 1 or (ds != {primary} and len(p.overlap) and _meets(_piece(p), native_piece)):
                p.reinterpreted = True
        return
    native = fp.union(*(p.runs for p, ds in zip(protos, dtypes) if primary in ds))
    for p, ds in zip(protos, dtypes):
        if len(ds) > 1 or (ds != {primary} and len(p.overlap) and fp.intersection_nbytes(p.runs, native)):
            p.reinterpreted = True


def _meets(a: object, b: periodic.Union) -> bool:
    """Whether two footprints share a byte (True when that cannot be settled exactly)."""
    if not periodic.piece_nbytes(a) or not b.nbytes:
        return False
    u = periodic.Union([a, b])
    return not u.exact or u.nbytes < periodic.piece_nbytes(a) + b.nbytes


# -- packing ------------------------------------------------------------------------------------
def pack(protos: list[Proto]) -> list[list[int]]:
    """Greedy interval packing of spans onto rows: each bar takes the lowest free row, so no bar
    hides another. Empty views go on the first row.

    >>> v = [type("V", (), dict(start=a, stop=b))() for a, b in ((0, 4), (2, 6), (4, 8))]
    >>> pack(v)
    [[0, 2], [1]]
    """
    order = sorted(range(len(protos)), key=lambda i: (protos[i].start, -protos[i].stop, i))
    rows: list[list[int]] = []
    busy: list[tuple[int, int]] = []  # (end, row)
    free: list[int] = []
    for i in order:
        p = protos[i]
        if p.start == p.stop:
            if not rows:
                rows.append([])
            rows[0].append(i)
            continue
        while busy and busy[0][0] <= p.start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        r = heapq.heappop(free) if free else len(rows)
        if r == len(rows):
            rows.append([])
        rows[r].append(i)
        heapq.heappush(busy, (p.stop, r))
    return rows
