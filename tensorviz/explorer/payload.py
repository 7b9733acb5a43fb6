"""A Diagram as binary columns for the browser canvas (pure numpy: no widgets, no drawing).

:func:`payload` turns the plan every renderer reads into the traits of
:class:`tensorviz.explorer.canvas.DiagramCanvas`: one little-endian typed array per column
(bytes), names and labels as ``"\\n"``-joined UTF-8, and short lists for palettes. Nothing is
decided here that the plan did not say: bars, lanes, colours and marks are the Diagram's own.
:func:`relations` gives each drawn view its relation to the selected names, for highlighting.

Columns (``n`` bars, ``L`` lanes, ``B`` blocks, ``V`` views drawn, ``M`` marks):

====================  =========  ===========================================================
``bar_start/stop``     f64 n      byte range (from the start of the bar's storage)
``bar_lane``           u32 n      lane index (empty: bar k is on the k-th view/simple lane)
``bar_color``          u8 n       index into ``colors``
``bar_flags``          u8 n       :data:`FLAGS` bits
``pct_bar, pct``       u32, f32   bytes read / span of the bars where it is not 1
``bar_view``           u32 n      the bar's first view (empty when bar i draws view i)
``tie_first, ties``    u32        the bar's other views (span groups of tied names), CSR
``run_bar, runs``      u32, f64   footprint runs of sparse bars (merged past a budget)
``cell_bar, cell``     u32, f64   bytes per cell of the bars drawn per cell (``Bar.cell``: their
                                  runs are whole cells holding a byte read; ``pct`` is exact)
``lane_kind``          u8 L       :data:`LANE_KINDS` index
``lane_labels``        text L     labels of "more" and summary rows ("" for the others: the
                                  browser writes view rows from names, storage rows from blocks)
``block_tag``          text       a storage row's file name, or its device when not cpu, or ""
                                  (the blocks with a storage lane, as ``block_nbytes``)
``special_lane/size``  u32, f64   bytes a "more"/summary row stands for
``block_storage``      i32 B      layout storage index (a block starts at each storage or
                                  simple lane and runs to the next, or to a diagram-wide row)
``block_nbytes``       f64        storage size of the blocks with a storage lane (a simple
                                  block's storage is its one bar)
``mark_*``             M          unreferenced bytes (0), read by >= 2 bars (1), file header (2),
                                  bytes views address past their storage's end (3: a freed
                                  storage, as the PNG's "past-end" layer)
``names``              text V     view names, each without the first ``name_prefix`` and the last
``name_prefix``        u8 V       ``name_suffix`` characters it shares with the previous name (ASCII,
``name_suffix``        u8 V       <= 255; see :func:`~tensorviz.explorer.wire.affix_code`); no
                                  suffix column when no name shares one
``geom_heads``         text       each distinct ``"shape;stride"`` (stride empty: row-major)
``geom``               varint 2V  per view: its head (index into ``geom_heads``), its offset
``dtype``              u8 V       index into ``dtypes``
``ov_*``                          the overview of every storage, when the plan has one (see
                                  :mod:`tensorviz.explorer.payload_overview`)
====================  =========  ===========================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core.layout import Layout
from tensorviz.core.units import TO_TIB
from tensorviz.explorer import wire
from tensorviz.explorer.payload_overview import OVERVIEW_BYTES, overview_columns
from tensorviz.plan.colors import SHARES_OUTLINE
from tensorviz.plan.overview import KINDS as OVERVIEW_KINDS
from tensorviz.render.mpl.layers import past_end  # the PNG's own "past-end" runs (no matplotlib)

__all__ = [
    "payload",
    "view_names",
    "relations",
    "payload_nbytes",
    "FLAGS",
    "LANE_KINDS",
    "MARK_KINDS",
    "RELATIONS",
    "VOCAB",
    "COLUMNS",
    "RUN_BUDGET",
]

LANE_KINDS = ("storage", "view", "simple", "more", "more-storages", "summary")
FLAGS = (
    "sparse",
    "overlaps_other",
    "non_contiguous",
    "reinterpreted",
    "expanded",
    "empty",
    "partner_hidden",
    "inexact",
)
#: Relation codes of :func:`relations` (0: no selection, or not computed).
RELATIONS = ("", "selected", "identical", "same-bytes", "contains", "within", "overlaps", "disjoint", "unrelated")
#: ``mark_kind`` codes: bytes no view reads, bytes read by two or more bars, a file's header,
#: bytes views address past their storage's end.
MARK_KINDS = ("unreferenced", "read-twice", "header", "past-end")
#: The binary columns of a payload, in the order the canvas frames them into one buffer
#: (:func:`tensorviz.explorer.wire.frame`); the rest (palettes, ``x_range``) travel as JSON.
COLUMNS = (
    *("bar_start", "bar_stop", "bar_lane", "bar_color", "bar_flags", "pct_bar", "pct", "bar_view"),
    *("tie_first", "ties", "run_bar", "runs", "lane_kind", "lane_labels", "block_tag", "special_lane"),
    *("special_size", "block_storage", "block_nbytes", "mark_kind", "mark_lane", "mark_start", "mark_stop"),
    *("names", "name_prefix", "name_suffix", "geom_heads", "geom", "dtype"),
    *("cell_bar", "cell"),
    *OVERVIEW_BYTES,
)
#: The names of every code the payload sends, in code order: the canvas's constant ``vocab``
#: trait, from which the browser builds its bit masks and kind numbers (``flags[k]`` is bit k);
#: and the order of the framed columns.
VOCAB = {
    "columns": list(COLUMNS),
    "flags": list(FLAGS),
    "lane_kinds": list(LANE_KINDS),
    "mark_kinds": list(MARK_KINDS),
    "relations": list(RELATIONS),
    "overview_kinds": list(OVERVIEW_KINDS),
    "units": [[name, size] for name, size in TO_TIB],  # core/units.py's table: the one byte format
    "shares_outline": SHARES_OUTLINE,  # plan/colors.py's: the same dashed outline as the static pictures
}
#: Most footprint runs sent for all sparse bars together; past it each bar's runs are merged
#: across gaps narrower than its share (what a screen pixel could show anyway).
RUN_BUDGET = 200_000
_HIDDEN, _INEXACT = 1 << FLAGS.index("partner_hidden"), 1 << FLAGS.index("inexact")
_MARK_BUDGET = 50_000


def payload(diagram: Any, layout: Layout) -> dict[str, Any]:
    """The canvas traits of ``diagram`` (a :class:`~tensorviz.plan.diagram.Diagram` of ``layout``).

    >>> import torch, tensorviz as tv                                  # doctest: +SKIP
    >>> p = payload(tv.diagram(x := {"a": torch.zeros(4)}), tv.analyze(x))   # doctest: +SKIP
    """
    names = view_names(diagram)
    index = {n: i for i, n in enumerate(names)}
    out: dict[str, Any] = {}
    out.update(_bar_columns(diagram, index))
    out.update(_runs(diagram))
    out.update(_lanes(diagram, layout))
    out.update(_marks(diagram))
    out.update(_views(layout, names))
    out.update(overview_columns(diagram, layout))
    out["x_range"] = [float(x) for x in diagram.x_range]
    return out


def payload_nbytes(traits: dict[str, Any]) -> int:
    """Bytes a payload puts on the wire (binary columns, text and lists as JSON-ish text)."""
    total = 0
    for v in traits.values():
        total += len(v) if isinstance(v, bytes) else len(repr(v))
    return total


def view_names(diagram: Any) -> list[str]:
    """The names of the views the bars draw, in drawing order (the payload's ``names``)."""
    seen: dict[str, None] = {}
    for bar in diagram.bars:
        for name in bar.names:
            seen.setdefault(name, None)
    return list(seen)


def _bar_columns(diagram: Any, index: dict[str, int]) -> dict[str, Any]:
    cols = diagram.columns
    bars = diagram.bars
    n = len(bars)
    flags = np.zeros(n, dtype=np.uint8)
    for name in FLAGS[:6]:  # the plan's own boolean columns
        flags |= np.asarray(getattr(cols, name), dtype=np.uint8) << FLAGS.index(name)
    pct_bar: list[int] = []
    pct: list[float] = []
    first = np.fromiter((index[b.names[0]] for b in bars), dtype=np.int64, count=n)
    tie_first, ties = np.zeros(n + 1, dtype=np.int64), list[int]()
    for k in np.flatnonzero(cols.sparse | cols.empty).tolist():
        bar = bars[k]
        span = bar.stop - bar.start
        pct_bar.append(k)
        pct.append(bar.nbytes / span if span > 0 else 0.0)
    opts = diagram.options
    if opts.names is not None or opts.only_shared or opts.byte_range is not None:  # else every reader is drawn
        drawn: dict[int, np.ndarray] = {}
        for j in np.flatnonzero(cols.overlaps_other).tolist():
            if _partner_hidden(diagram, bars[j], drawn):
                flags[j] |= _HIDDEN
    cell_bar: list[int] = []
    for i, bar in enumerate(bars):
        if not bar.exact:
            flags[i] |= _INEXACT
        if bar.cell:
            cell_bar.append(i)
        if len(bar.names) > 1:
            ties.extend(index[m] for m in bar.names[1:])
        tie_first[i + 1] = len(ties)
    identity = np.array_equal(first, np.arange(n))
    return {
        "bar_start": wire.le(cols.start, "f8"),
        "bar_stop": wire.le(cols.stop, "f8"),
        "bar_lane": b"" if _lanes_implied(diagram, cols.lane) else wire.le(cols.lane, "u4"),
        "bar_color": wire.le(cols.color, "u1"),
        "bar_flags": flags.tobytes(),
        "pct_bar": wire.le(pct_bar, "u4"),
        "pct": wire.le(pct, "f4"),
        "bar_view": b"" if identity else wire.le(first, "u4"),
        "tie_first": wire.le(tie_first, "u4") if ties else b"",
        "ties": wire.le(np.array(ties, dtype=np.int64), "u4"),
        "cell_bar": wire.le(cell_bar, "u4"),
        "cell": wire.le([bars[i].cell for i in cell_bar], "f8"),
        "colors": list(cols.colors),
    }


def _lanes_implied(diagram: Any, lane: np.ndarray) -> bool:
    """True when the bars are, in order, one on each view/simple lane (the common case)."""
    own = [i for i, ln in enumerate(diagram.lanes) if ln.kind in ("view", "simple")]
    return len(own) == len(lane) and np.array_equal(np.asarray(own, dtype=np.int64), lane)


def _partner_hidden(diagram: Any, bar: Any, cache: dict[int, np.ndarray]) -> bool:
    """True when some bytes this bar shares are read by no other *drawn* bar of its block."""
    if bar.overlap_runs is None or not len(bar.overlap_runs):
        return False
    drawn = _drawn_overlaps(diagram, bar.block, cache)
    return fp.intersection_nbytes(bar.overlap_runs, drawn) < fp.total(bar.overlap_runs)


def _drawn_overlaps(diagram: Any, block: int, cache: dict[int, np.ndarray]) -> np.ndarray:
    """Bytes of a block read by two or more of its drawn bars (``cache``: per block)."""
    if block not in cache:
        from tensorviz.plan.bars import depth_runs

        bars = [diagram.bars[i] for i in diagram.blocks[block].bars]
        runs = [b.runs if b.runs is not None else np.array([[b.start, b.stop]]) for b in bars if not b.empty]
        cache[block] = depth_runs(runs, 2)
    return cache[block]


def simplify(runs: np.ndarray, max_runs: int) -> np.ndarray:
    """``runs`` merged across gaps narrower than ``span / max_runs`` (at most ``max_runs + 1``).

    >>> simplify(np.array([[0, 1], [2, 3], [50, 60], [98, 100]]), 3).tolist()
    [[0, 3], [50, 60], [98, 100]]
    """
    if len(runs) <= max_runs:
        return runs
    width = (runs[-1, 1] - runs[0, 0]) / max_runs
    keep = (runs[1:, 0] - runs[:-1, 1]) >= width
    starts = np.concatenate(([runs[0, 0]], runs[1:, 0][keep]))
    stops = np.concatenate((runs[:-1, 1][keep], [runs[-1, 1]]))
    return np.stack((starts, stops), axis=1)


def _runs(diagram: Any) -> dict[str, bytes]:
    sparse = [i for i, b in enumerate(diagram.bars) if b.runs is not None]
    per_bar = max(8, RUN_BUDGET // max(len(sparse), 1))
    owners, parts = [], []
    for i in sparse:
        r = simplify(diagram.bars[i].runs, per_bar)
        owners.append(np.full(len(r), i, dtype=np.int64))
        parts.append(r)
    if not parts:
        return {"run_bar": b"", "runs": b""}
    return {"run_bar": wire.le(np.concatenate(owners), "u4"), "runs": wire.le(np.concatenate(parts), "f8")}


def _lanes(diagram: Any, layout: Layout) -> dict[str, Any]:
    lanes = diagram.lanes
    kinds = {k: i for i, k in enumerate(LANE_KINDS)}
    own = ("view", "simple")
    special = [i for i, ln in enumerate(lanes) if ln.kind not in own and ln.kind != "storage"]
    blocks = diagram.blocks
    extents = [b.nbytes for b in blocks if lanes[b.lanes[0]].kind == "storage"]
    return {
        "lane_kind": wire.le([kinds[ln.kind] for ln in lanes], "u1"),
        "lane_labels": wire.text([_lane_label(ln, own) for ln in lanes]),
        "block_tag": wire.text([_tag(layout, b.storage) for b in blocks if lanes[b.lanes[0]].kind == "storage"]),
        "special_lane": wire.le(special, "u4"),
        "special_size": wire.le([lanes[i].size for i in special], "f8"),
        "block_storage": wire.le([b.storage for b in blocks], "i4"),
        "block_nbytes": wire.le(extents, "f8"),
    }


def _lane_label(lane: Any, own: tuple[str, ...]) -> str:
    # The browser writes a view row's label from its bars' names, a storage row's from its block
    # (geometry.js storageLabel: number, tag, size in the one byte format).
    return "" if lane.kind in own or lane.kind == "storage" else lane.label


def _tag(layout: Layout, index: int) -> str:
    s = layout.storages[index]
    return s.label or ("" if s.device == "cpu" else s.device)


def _marks(diagram: Any) -> dict[str, bytes]:
    kinds, lanes, parts = [], [], []
    share = max(16, _MARK_BUDGET // max(len(diagram.blocks), 1))
    for bi, block in enumerate(diagram.blocks):
        marks = (block.unreferenced, block.overlap_runs, block.header, past_end(diagram, bi))  # as MARK_KINDS
        for kind, runs in enumerate(marks):
            if runs is None or not len(runs):
                continue
            runs = simplify(np.asarray(runs), share)
            kinds.append(np.full(len(runs), kind, dtype=np.int64))
            lanes.append(np.full(len(runs), block.lanes[0], dtype=np.int64))
            parts.append(runs)
    if not parts:
        return {k: b"" for k in ("mark_kind", "mark_lane", "mark_start", "mark_stop")}
    runs = np.concatenate(parts)
    return {
        "mark_kind": wire.le(np.concatenate(kinds), "u1"),
        "mark_lane": wire.le(np.concatenate(lanes), "u4"),
        "mark_start": wire.le(runs[:, 0], "f8"),
        "mark_stop": wire.le(runs[:, 1], "f8"),
    }


def _views(layout: Layout, names: list[str]) -> dict[str, Any]:
    dtypes: dict[str, int] = {}
    codes = np.empty(len(names), dtype=np.uint8)
    heads: dict[tuple, int] = {}  # "shape;stride" once per distinct (shape, stride): views repeat them
    geom = np.empty((len(names), 2), dtype=np.int64)  # per view: its head, its offset
    for k, name in enumerate(names):
        v = layout[name]
        codes[k] = dtypes.setdefault(v.dtype, len(dtypes)) % 256
        geom[k] = heads.setdefault((v.shape, v.stride), len(heads)), v.offset
    prefix, suffix, rest = wire.affix_code(names)
    return {
        "names": wire.text(rest),
        "name_prefix": wire.le(prefix, "u1"),
        "name_suffix": wire.le(suffix, "u1") if any(suffix) else b"",
        "geom_heads": wire.text(_head(shape, stride) for shape, stride in heads),
        "geom": wire.varint(geom),
        "dtype": codes.tobytes(),
        "dtypes": list(dtypes),
    }


def _head(shape: tuple[int, ...], stride: tuple[int, ...]) -> str:
    """``"shape;stride"``, the stride left empty when row-major contiguous."""
    given = "" if tuple(stride) == _row_major(shape) else ", ".join(map(str, stride))
    return f"{', '.join(map(str, shape))};{given}"


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def relations(layout: Layout, names: list[str], selected: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each drawn view's relation to the selection: codes into :data:`RELATIONS` and the index
    (into ``names``) of the selected view it was compared with -- the closest relation wins.

    Views on another storage than every selected view stay 0 (not computed: "unrelated").
    Spans are compared first (numpy); only views whose span meets a selected one's are
    compared exactly with :meth:`Layout.relation`.
    """
    n = len(names)
    code, to = np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.uint32)
    index = {m: i for i, m in enumerate(names)}
    picked = [m for m in selected if m in index]
    if not picked:
        return code, to
    rank = {r: i for i, r in enumerate(RELATIONS)}
    views = [layout[m] for m in names]
    keys: dict[Any, int] = {}
    storage = np.array([keys.setdefault(v.storage, len(keys)) for v in views], dtype=np.int64)
    start = np.array([v.start for v in views], dtype=np.int64)
    stop = np.array([v.stop for v in views], dtype=np.int64)
    dense = np.array([v.is_dense for v in views], dtype=bool)
    for m in picked:
        s = index[m]
        near = np.flatnonzero((storage == storage[s]) & (start < stop[s]) & (stop > start[s]))
        r = _span_relations(start[near], stop[near], dense[near], start[s], stop[s], dense[s], rank)
        for j in np.flatnonzero(r == 0):  # not decided by spans: compare footprints exactly
            r[j] = rank[layout.relation(names[near[j]], m)]
        better = (code[near] == 0) | (r < code[near])
        code[near[better]], to[near[better]] = r[better], s
        same = np.flatnonzero((storage == storage[s]) & (code == 0))
        code[same], to[same] = rank["disjoint"], s
    for m in picked:
        code[index[m]], to[index[m]] = rank["selected"], index[m]
    return code, to


def _span_relations(
    start: np.ndarray, stop: np.ndarray, dense: np.ndarray, s0: int, s1: int, sdense: bool, rank: dict[str, int]
) -> np.ndarray:
    """Relations of dense views to a dense selected view, from spans alone (0: undecided --
    a sparse view, or an equal span, whose dtype/shape/stride decide identical vs same-bytes)."""
    r = np.zeros(len(start), dtype=np.uint8)
    if not sdense:
        return r
    inside = (start >= s0) & (stop <= s1)
    around = (start <= s0) & (stop >= s1)
    r[inside & ~around] = rank["within"]
    r[around & ~inside] = rank["contains"]
    r[~inside & ~around] = rank["overlaps"]
    r[~dense | (inside & around)] = 0
    return r
