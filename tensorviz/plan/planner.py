"""The diagram planner: a Layout and normalised options -> a :class:`~tensorviz.plan.diagram.Diagram`.

Private; :func:`tensorviz.plan.diagram.diagram` is the public door. Five steps (:meth:`_Planner.plan`):
select and order the storages (:mod:`tensorviz.plan.select`: numpy over all of them), collapse
the simple ones into a summary row, make the bars (:mod:`tensorviz.plan.bars`) of the leading
storages only -- as many as the lane budget can hold --, share the lane budget
(:func:`~tensorviz.plan.budget.allocate`), emit lanes and bars. So planning a diagram of 1M
tensors costs a few numpy passes plus the bars drawn; every count ("N more") stays exact.
The frozen records are filled directly (see :func:`_new`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core.categories import CATEGORIES, COLOURS, LABELS, category_words, is_training
from tensorviz.core.layout import Layout
from tensorviz.core.names import search
from tensorviz.core.records import Storage, TensorView
from tensorviz.core.rows import gc_paused
from tensorviz.plan.bars import Proto, cell_unread, make_protos, mark_overlaps, mark_reinterpreted, pack, subtract
from tensorviz.plan.budget import allocate
from tensorviz.plan.colors import colours_at, palette_colour
from tensorviz.plan.labels import row_label, row_size, storage_label
from tensorviz.plan.model import Bar, Block, Diagram, DiagramOptions, Header, Lane, LogicalGroup, Summary
from tensorviz.plan.overview import AUTO_STORAGES, Overview, overview
from tensorviz.plan.ranks import shard_ordinals
from tensorviz.plan.select import Selection, file_headers, file_indices, select, shared_count, storage_reasons

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["plan", "allocate", "storage_reasons", "file_headers"]


def plan(layout: Layout, opts: DiagramOptions) -> Diagram:
    """Plan the diagram of ``layout`` (options already checked by ``diagram()``).

    The cyclic collector is paused meanwhile (see :func:`~tensorviz.core.rows.gc_paused`): the
    bars are thousands of small acyclic records, and each collection it would start walks
    every object of the caller (a state dict of 100k tensors) -- most of the planning time.
    """
    with gc_paused():
        return _Planner(layout, opts).plan()


_NFIELDS: dict[type, int] = {}
_R = TypeVar("_R", bound="DataclassInstance")


def _new(cls: type[_R], **values: object) -> _R:
    """A frozen record filled in one step: its generated ``__init__`` sets each field through
    ``object.__setattr__``, a third of the planning time of 10,000 bars. Every field is given."""
    n = _NFIELDS.get(cls) or _NFIELDS.setdefault(cls, len(fields(cls)))
    if len(values) != n:
        raise TypeError(f"{cls.__name__} needs all {n} fields, got {sorted(values)}")
    obj: _R = object.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    return obj


class _Source:
    """A storage selected for drawing, with its bars grouped into content rows."""

    __slots__ = ("storage", "reasons", "protos", "rows", "overlap", "unread")

    def __init__(
        self,
        storage: Storage,
        reasons: tuple[str, ...],
        protos: list[Proto],
        rows: list[list[int]],
        overlap: np.ndarray,
    ):
        self.storage, self.reasons, self.protos, self.rows = storage, reasons, protos, rows
        self.overlap = overlap  # bytes read by two or more of ``protos``
        self.unread: np.ndarray | None = None  # per cell, when a bar is drawn per cell


class _Planner:
    """Turns a Layout and options into a Diagram, in numbered steps (see :meth:`plan`)."""

    def __init__(self, layout: Layout, opts: DiagramOptions):
        self.layout, self.opts = layout, opts
        self.rx = re.compile(opts.names) if opts.names is not None else None
        self.filtering = (
            self.rx is not None or opts.byte_range is not None or (opts.only_shared and opts.by != "storage")
        )
        self.headers = file_headers(layout)
        self.files = frozenset(self.headers)  # storages that are whole safetensors files
        self._colors: dict[str, str] = {}

    def plan(self) -> Diagram:
        # 1. select and order the storages (all at once, from numpy columns); 2. collapse the
        # simple ones; 3. make the bars of the leading ones until the lane budget is spent;
        # 4. share the lane budget; 5. emit lanes and bars.
        sel = select(self.layout, self.opts, self.files)
        order, collapsed = self._collapse(sel)
        budget = self.opts.max_lanes - (collapsed is not None)
        needs = self._needs(order, collapsed is not None or sel.interesting)
        if needs is None:  # rows known only once the bars are made (packing, filters)
            sources = self._leading(order, budget)
            caps, shown = allocate([_need(src) for src in sources], budget, total=len(order))
        else:
            caps, shown = allocate(needs, budget, total=len(order))
            made = [self._source(self.layout.storage(s), self.layout.storage_views(s)) for s in order[:shown].tolist()]
            assert None not in made  # no filter is on (else _needs is None): every storage has a source
            sources = [src for src in made if src is not None]
        hidden = len(order) - shown
        ov = overview(self.layout, sel.order) if self._wants_overview(len(sel.order), hidden) else None
        return self._emit(sources[:shown], caps, collapsed, hidden, ov)

    def _wants_overview(self, selected: int, hidden: int) -> bool:
        """As asked, else when lanes leave storages out or there are thousands of them (never
        of no storage: there is nothing to show)."""
        if not selected:
            return False
        if self.opts.overview is not None:
            return self.opts.overview
        return hidden > 0 or selected >= AUTO_STORAGES

    def _needs(self, order: np.ndarray, interesting: np.ndarray | bool) -> list[int] | None:
        """Lanes the leading storages ask for, from counts alone (see :func:`_need`): a row per
        view, or per span group; only as many storages as the budget could hold at three lanes
        each. None when rows depend on the bars (packed by overlap, or filtered)."""
        if self.filtering or self.opts.by == "overlap":
            return None
        layout = self.layout
        if self.opts.by == "storage":
            rows = layout.storage_stats().views
        else:
            order_s, bounds = layout.group_members("span")
            owner = layout.view_spans().storage[order_s[bounds[:-1]]]
            rows = np.bincount(owner, minlength=len(layout.storage_stats().nbytes))
        need = np.where(interesting, 1 + rows[order], 1)
        k = int(np.searchsorted(np.cumsum(np.minimum(need, 3)), self.opts.max_lanes, side="right")) + 1
        return need[:k].tolist()

    # -- step 3: the bars of the storages that may be drawn --------------------------------------
    def _leading(self, order: np.ndarray, budget: int) -> list[_Source]:
        """Sources of the leading storages, until they would take more lanes than the budget
        holds even at three each: no later storage can be drawn (see :func:`allocate`)."""
        out: list[_Source] = []
        used = 0
        for at in range(0, len(order), 256):
            for s in order[at : at + 256].tolist():
                src = self._source(self.layout.storage(s), self.layout.storage_views(s))
                if src is None:  # select() already left it out; kept for safety
                    continue
                out.append(src)
                used += min(_need(src), 3)
                if used > budget:
                    return out
        return out

    def _source(self, storage: Storage, views: Sequence[TensorView]) -> _Source | None:
        opts = self.opts
        whole_file = storage.key in self.files
        reasons = storage_reasons(storage, views, whole_file)
        if (
            opts.only_shared
            and opts.by == "storage"
            and (len(views) < 2 or (whole_file and "overlapping" not in reasons))
        ):
            return None  # in a whole file, only tensors sharing bytes are shared
        if len(views) == 1 and not self.filtering and views[0].is_dense:  # most storages: one bar
            return _Source(storage, reasons, [Proto(list(views), None, True)], [[0]], fp.EMPTY)
        protos = make_protos(
            views,
            opts.by == "span",
            self.layout.footprint_runs,
            self.layout.footprint_piece,
            self._window(storage, views),
        )
        multi = mark_overlaps(protos)
        mark_reinterpreted(protos)
        unread = cell_unread(protos, storage.nbytes)
        keep = [p for p in protos if self._wanted(p)] if self.filtering else protos
        if not keep and (views or self.rx is not None or opts.only_shared):
            return None
        if opts.byte_range is not None and not keep and storage.nbytes <= opts.byte_range[0]:
            return None
        rows = pack(keep) if opts.by == "overlap" else [[i] for i in range(len(keep))]
        if keep is not protos:  # bytes two of the *kept* bars read
            overlaps = [p.overlap for p in keep if len(p.overlap)]
            multi = fp.union(*overlaps) if overlaps else fp.EMPTY
        src = _Source(storage, reasons, keep, rows, multi)
        src.unread = unread
        return src

    def _window(self, storage: Storage, views: Sequence[TensorView]) -> tuple[int, int]:
        """The storage's bytes on the picture (a bar drawn per cell is cut into cells of it)."""
        lo, hi = 0, max([storage.nbytes, *(v.stop for v in views)])
        if self.opts.byte_range is not None:
            lo, hi = max(lo, self.opts.byte_range[0]), min(hi, self.opts.byte_range[1])
        return lo, max(lo, hi)

    def _wanted(self, p: Proto) -> bool:
        if self.rx is not None and not any(search(self.rx, n) for n in p.names):
            return False
        if self.opts.only_shared and self.opts.by != "storage":
            if len(self.layout.group_of(p.names[0], self.opts.by)) < 2:
                return False
        if self.opts.byte_range is not None:
            lo, hi = self.opts.byte_range
            return (lo <= p.start < hi) if p.empty else (p.start < hi and p.stop > lo)
        return True

    # -- step 2: collapse simple storages -----------------------------------------------------
    def _collapse(self, sel: Selection) -> tuple[np.ndarray, Summary | None]:
        """Fold the simple storages into one summary row, when there is anything else to show."""
        if self.opts.expand_simple or not sel.interesting.any() or sel.interesting.all():
            return sel.order, None
        simple = sel.order[~sel.interesting]
        nbytes = self.layout.storage_stats().nbytes
        summary = Summary(len(simple), int(nbytes[simple].sum()), tuple(simple.tolist()))
        return sel.order[sel.interesting], summary

    # -- step 5: emit ---------------------------------------------------------------------
    def _emit(
        self, sources: list[_Source], caps: list[int], collapsed: Summary | None, hidden: int, ov: Overview | None
    ) -> Diagram:
        lanes: list[Lane] = []
        bars: list[Bar] = []
        blocks: list[Block] = []
        self._colors = self._colours(sources)
        for src, cap in zip(sources, caps):
            blocks.append(self._emit_block(src, cap, len(blocks), lanes, bars))
        if hidden:
            where = " (all in the overview)" if ov is not None else ""
            text = f"… {hidden:,} more storage{'s' * (hidden != 1)}{where}"
            lanes.append(Lane(text, "more-storages", -1, -1, 0, hidden=hidden))
        if collapsed is not None:
            lanes.append(Lane(collapsed.text, "summary", -1, -1, collapsed.nbytes, hidden=collapsed.count))
        return Diagram(
            self.opts.by,
            self.opts,
            tuple(blocks),
            tuple(lanes),
            tuple(bars),
            collapsed,
            self._header(),
            self.opts.byte_range,
            hidden,
            ov,
            self._logical(blocks, bars),
        )

    def _logical(self, blocks: list[Block], bars: list[Bar]) -> tuple[LogicalGroup, ...]:
        """A group per logical tensor whose pieces are drawn, every storage of it as a block of
        its own, one after the other (select.py orders them so), holding nothing else."""
        groups = self.layout.piece_storages()
        if not groups:
            return ()
        from tensorviz.core.pieces import PackedTensor, group_label

        at = {b.storage: i for i, b in enumerate(blocks)}
        owner = {s: name for name, found in groups.items() for s in found}
        out = []
        for name in dict.fromkeys(owner[b.storage] for b in blocks if b.storage in owner):  # drawn ones only
            storages = groups[name]
            where = sorted(at.get(s, -1) for s in storages)
            if where[0] < 0 or where != list(range(where[0], where[0] + len(where))):
                continue
            drawn = [n for i in where for b in blocks[i].bars for n in bars[b].names]
            parts = [v for s in storages for v in self.layout.storage_views(s)]
            if not drawn or any(v.piece is None or v.piece.of != name for v in parts):
                continue
            if any(blocks[i].hidden_views for i in where):
                continue
            pieces = PackedTensor(parts[0].piece, tuple(parts))  # type: ignore[arg-type]  # checked just above
            lanes = (blocks[where[0]].lanes[0], blocks[where[-1]].lanes[-1])
            stored = sum(self.layout.storage(s).covered_nbytes for s in storages)  # only its pieces read them
            out.append(LogicalGroup(name, group_label(pieces, self.layout, stored), lanes, tuple(drawn)))
        return tuple(out)

    def _header(self) -> Header:
        layout = self.layout
        ns = len(layout.storage_stats().nbytes)
        shared, how = shared_count(layout, self.opts.by, self.files)
        noun = "file" if ns and len(file_indices(layout, self.files)) == ns else "storage"
        return Header(
            self.opts.by,
            len(layout),
            ns,
            shared,
            layout.unique_nbytes,
            layout.naive_nbytes,
            layout.storage_nbytes,
            len(layout.skipped),
            noun,
            how,
            *self._category_words(),
        )

    def _category_words(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Training state's totals for the header, and the legend when coloured by category."""
        layout, words, optimizer = self.layout, "", ""
        legend: tuple[tuple[str, str], ...] = ()
        if is_training(layout):
            tree = layout.tree()
            words, optimizer = category_words(tree.root.categories, tree.optimizer), tree.optimizer
        if self.opts.color_by == "category":
            present = set(layout.categories)
            labels = {**LABELS, "": "unclassified", **({"optimizer": optimizer} if optimizer else {})}
            legend = tuple((labels[c], COLOURS[c]) for c in (*CATEGORIES, "") if c in present)
        return words, legend

    def _colours(self, sources: list[_Source]) -> dict[str, str]:
        """Per name drawn, its colour: the layout's colour of its span group (see
        :mod:`tensorviz.plan.colors`), or of its rank or mesh coordinate when colouring by one."""
        layout = self.layout
        each = [layout.view_positions(src.storage.index) for src in sources]
        pos = np.concatenate(each) if each else np.zeros(0, dtype=np.int64)
        out = dict(zip(map(layout.names.__getitem__, pos.tolist()), colours_at(layout, pos)))
        if self.opts.color_by == "category":
            cats = layout.categories
            return {n: COLOURS.get(cats[i], COLOURS[""]) for n, i in zip(out, pos.tolist())}
        if self.opts.color_by:
            shards = shard_ordinals(layout, self.opts.color_by)
            out.update((n, palette_colour(shards[n])) for n in out.keys() & shards.keys())
        return out

    def _emit_block(self, src: _Source, cap: int, bi: int, lanes: list[Lane], bars: list[Bar]) -> Block:
        s, label = src.storage, storage_label(src.storage)
        first_lane, first_bar = len(lanes), len(bars)
        if not src.reasons and src.protos:  # a simple storage drawn in full: one row is extent and view
            lanes.append(
                _new(
                    Lane,
                    label=src.protos[0].names[0],
                    kind="simple",
                    block=bi,
                    storage=s.index,
                    size=s.nbytes,
                    sub=0,
                    hidden=0,
                )
            )
            bars.append(self._bar(src.protos[0], first_lane, bi))
        else:
            lanes.append(
                _new(Lane, label=label, kind="storage", block=bi, storage=s.index, size=s.nbytes, sub=0, hidden=0)
            )
            self._emit_rows(src, cap, bi, lanes, bars)
        hidden = lanes[-1].hidden if lanes[-1].kind == "more" else 0
        header, unref = self._storage_runs(s, src.unread)
        return _new(
            Block,
            storage=s.index,
            key=s.key,
            label=label,
            device=s.device,
            nbytes=s.nbytes,
            lanes=tuple(range(first_lane, len(lanes))),
            bars=tuple(range(first_bar, len(bars))),
            unreferenced=self._clip(unref),
            unreferenced_nbytes=fp.total(unref) if src.unread is None or not len(unref) else s.unreferenced_nbytes,
            overlap_runs=self._clip(src.overlap),
            reasons=src.reasons,
            hidden_views=hidden,
            header=self._clip(header),
        )

    def _emit_rows(self, src: _Source, cap: int, bi: int, lanes: list[Lane], bars: list[Bar]) -> None:
        """A lane per content row while the cap allows, then one "… N more views" lane."""
        s, rows, first_lane = src.storage, src.rows, len(lanes) - 1
        own = rows if len(rows) + 1 <= cap else rows[: max(cap - 2, 0)]
        for row in own:
            lanes.append(
                _new(
                    Lane,
                    label=row_label(src.protos, row),
                    kind="view",
                    block=bi,
                    storage=s.index,
                    size=row_size(src.protos, row),
                    sub=len(lanes) - first_lane,
                    hidden=0,
                )
            )
            bars.extend(self._bar(src.protos[i], len(lanes) - 1, bi) for i in row)
        rest = [i for row in rows[len(own) :] for i in row]
        if rest:
            n = sum(len(src.protos[i].views) for i in rest)
            lanes.append(
                Lane(
                    f"… {n:,} more view{'s' * (n != 1)}",
                    "more",
                    bi,
                    s.index,
                    row_size(src.protos, rest),
                    sub=len(lanes) - first_lane,
                    hidden=n,
                )
            )
            bars.extend(self._bar(src.protos[i], len(lanes) - 1, bi) for i in rest)

    def _storage_runs(self, s: Storage, unread: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """A file's header runs, and the storage's other unreferenced runs (if shown; per cell,
        ``unread``, when a bar of it is drawn per cell)."""
        span = self.headers.get(s.key) if s.device == "file" else None
        header = fp.clip(fp.as_runs([span]), 0, s.nbytes) if span else fp.EMPTY
        if not (self.opts.show_unreferenced and s.unreferenced_nbytes):
            return header, fp.EMPTY
        unref = self.layout.unreferenced_runs(s.index) if unread is None else unread
        return header, subtract(unref, header) if len(header) else unref

    def _bar(self, p: Proto, lane: int, block: int) -> Bar:
        views, v0 = p.views, p.views[0]
        one = len(views) == 1
        return _new(
            Bar,
            lane=lane,
            block=block,
            start=p.start,
            stop=p.stop,
            names=p.names,
            color=self._colors[v0.name],
            dtype=v0.dtype if one or len({v.dtype for v in views}) == 1 else "mixed",
            runs=None if p.dense or p.empty else self._clip(p.runs),
            overlap_runs=self._clip(p.overlap) if len(p.overlap) else None,
            overlaps_other=bool(len(p.overlap)),
            non_contiguous=not v0.is_contiguous if one else any(not v.is_contiguous for v in views),
            reinterpreted=p.reinterpreted,
            expanded=v0.is_expanded if one else any(v.is_expanded for v in views),
            empty=p.empty,
            exact=v0.exact if one else all(v.exact for v in views),
            cell=p.cell,
            read_nbytes=p.read,
        )

    def _clip(self, runs: np.ndarray) -> np.ndarray:
        if self.opts.byte_range is None or not len(runs):
            return runs
        return fp.clip(runs, *self.opts.byte_range)


def _need(src: _Source) -> int:
    """Lanes a source asks for: one for a simple storage, else its extent and one per row."""
    return 1 if not src.reasons else 1 + len(src.rows)
