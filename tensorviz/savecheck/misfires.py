"""Misfires: where a library's own sharing check disagrees with tensorviz's exact bytes."""

from __future__ import annotations

import itertools

import numpy as np

from tensorviz.core import periodic
from tensorviz.core.attribution import meeting_pairs
from tensorviz.core.layout import Layout
from tensorviz.core.records import Storage, StorageInfo, TensorView
from tensorviz.savecheck.savers import common as sv
from tensorviz.savecheck.standin import StandIn
from tensorviz.savecheck.subject import Subject
from tensorviz.savecheck.verdicts import Misfire


# -- misfires ---------------------------------------------------------------------------------------
def misfires(run: sv.Run, sub: Layout, s: Subject) -> list[Misfire]:
    out: list[Misfire] = []
    order, overlap, comp = _positions(sub, s.memo)
    name = run.anchor_name.rsplit(".", 1)[-1] or "its check"
    if run.anchor_error is not None:
        out.extend(_view_misfires(run, sub, s, name))
    placed = s.memo.setdefault(("placed", id(sub)), _Placed(sub, order))  # every saver's groups, placed once
    out.extend(_refusal_misfires(run, sub, placed))
    key = ("anchor misfires", id(run.anchor), id(sub), name)  # savers sharing one library answer
    if key not in s.memo:  # the entry keeps the answer alive: its id is not reused during the check
        s.memo[key] = (_anchor_misfires(run, sub, s, name, (placed, overlap, comp)), run.anchor)
    return out + s.memo[key][0]


class _Placed:
    """Each library group's known names in ``sub``'s order, with their places (:func:`_places`),
    found once for both kinds of misfire (a group may hold 100k names)."""

    def __init__(self, sub: Layout, order: dict[str, int]) -> None:
        self.sub, self.order = sub, order
        self.found: dict[int, tuple[tuple[str, ...], np.ndarray, object]] = {}

    def __call__(self, group) -> tuple[tuple[str, ...], np.ndarray]:
        hit = self.found.get(id(group))
        if hit is None:  # the entry keeps the group alive: its id is not reused meanwhile
            at = _places(self.order, group)
            hit = self.found[id(group)] = (_named(self.sub, at), at, group)
        return hit[0], hit[1]


def _anchor_misfires(run: sv.Run, sub: Layout, s: Subject, name: str, positions: tuple) -> list[Misfire]:
    """Where the groups of the library's sharing check disagree with the exact overlap groups."""
    placed, overlap, comp = positions
    storage_at = sub.view_spans().storage  # each view's storage index: no record per name
    out: list[Misfire] = []
    for group in run.anchor or ():
        if len(group) < 2:
            continue  # one name: nothing the library could call shared
        names, at = placed(group)
        if len(at) < 2:
            continue
        nkeys = len(np.unique(storage_at[at]))
        if nkeys > 1:
            why = (
                "meta tensors all report address 0, so only their size tells them apart"
                if all(sub[n].device == "meta" for n in names)
                else "their storages report the same address"
            )
            out.append(
                Misfire(
                    names,
                    f"{name} puts them on one storage",
                    f"{nkeys} different storages ({why}); they share no byte",
                )
            )
            continue
        ids = {comp[n] for n in names}
        if len(ids) == 1 and len(overlap[next(iter(ids))]) == len(names):
            continue  # exactly one overlap component: the library is right
        parts = _singletons(names) if len(ids) == len(names) else sub_layout(sub, names).groups("overlap")
        if len(parts) > 1:
            out.append(Misfire(names, f"{name} treats them as sharing memory", _parts_text(sub, names, parts)))
    if run.anchor is not None:
        out.extend(_missed(run, sub, name, s.memo))
    return out


def _positions(sub: Layout, memo: dict) -> tuple[dict[str, int], tuple, dict[str, int]]:
    """Each name's place, the overlap groups, and each name's group: once per layout and check."""
    key = ("positions", id(sub))  # the sub-layout lives as long as the check (Subject.sub_layouts)
    if key not in memo:
        overlap = sub.groups("overlap")
        comp = {n: i for i, g in enumerate(overlap) for n in g.names}
        memo[key] = ({n: i for i, n in enumerate(sub.names)}, overlap, comp)
    return memo[key]


def _singletons(names) -> list[tuple[str]]:
    return [(n,) for n in names]


def _places(order: dict[str, int], group) -> np.ndarray:
    """The places (``order``'s) of the names of ``group`` that ``order`` knows, ascending: that
    order's names as positions, sorted in numpy (a group may hold 100k names)."""
    at = np.fromiter(map(order.get, group, itertools.repeat(-1)), dtype=np.int64, count=len(group))
    at = at[at >= 0]
    at.sort()
    return at


def _named(sub: Layout, at: np.ndarray) -> tuple[str, ...]:
    """The names of ``sub`` at places ``at``."""
    return tuple(map(sub.names.__getitem__, at.tolist()))


def _missed(run: sv.Run, sub: Layout, name: str, memo: dict) -> list[Misfire]:
    """Names that share bytes but sit in different groups of the library's check: per overlap
    group, one pair wherever its bytes are read under two of the library's groups
    (:func:`~tensorviz.core.attribution.meeting_pairs`, ``O(n log n)``; never every pair).
    ``memo`` (the check's) keeps each group's footprints for the next saver's check."""
    anchor = run.anchor or ()
    where: dict | None = None  # each name's library group: made only when one group cannot settle it
    out = []
    for g in sub.shared("overlap"):
        names = g.names
        if len(anchor) == 1 and isinstance(anchor[0], (set, frozenset)) and anchor[0].issuperset(names):
            continue  # the library's one group holds them all: nothing missed
        if where is None:
            where = {n: i for i, grp in enumerate(anchor) for n in grp}
        ids = [where.get(n, ("alone", n)) for n in names]
        if all(i == ids[0] for i in ids):
            continue  # one group of the library's: nothing missed
        number: dict = {}
        labels = [number.setdefault(i, len(number)) for i in ids]
        key = ("footprints", id(sub), names)  # the sub-layout lives as long as the check (Subject.sub_layouts)
        if key not in memo:
            memo[key] = [sub.footprint_piece(n) for n in names]
        pieces = memo[key]
        if any(map(periodic.is_periodic, pieces)):
            pairs = [(i, j) for i, j in itertools.combinations(range(len(names)), 2) if labels[i] != labels[j]]
            pairs = [(i, j) for i, j in pairs if periodic.intersection_nbytes(pieces[i], pieces[j])[0]]
        else:
            pairs = meeting_pairs([p for p in pieces if not periodic.is_periodic(p)], labels)  # all runs
        for i, j in pairs[:_MAX_MISSED]:
            a, b = names[i], names[j]
            why = (
                "they are meta tensors (address 0), which it skips"
                if sub[a].device == "meta"
                else "its sweep over spans misses this overlap"
            )
            out.append(
                Misfire(
                    (a, b),
                    f"{name} does not see them share memory",
                    f"{b} {sub.relation(b, a)} {a}, {sub.overlap_nbytes(a, b)} B in common; {why}",
                )
            )
    return out


#: Most missed pairs named per overlap group (each one a real pair the library keeps apart).
_MAX_MISSED = 50


def _parts_text(sub: Layout, names, parts) -> str:
    if all(len(p) == 1 for p in parts):
        return f"no byte in common: {_relations(sub, names)}"
    shared = [tuple(p) for p in parts if len(p) > 1]
    return f"only {', '.join('{' + ', '.join(p) + '}' for p in shared)} share bytes; {_relations(sub, names)}"


def _relations(sub: Layout, names) -> str:
    first = names[0]
    rel = [f"{n} {sub.relation(n, first)} {first}" for n in names[1:4]]
    more = f" (+{len(names) - 4} more)" if len(names) > 4 else ""
    return "; ".join(rel) + more


def _view_misfires(run: sv.Run, sub: Layout, s: Subject, name: str) -> list[Misfire]:
    """The library's check failed on views it cannot flatten; name them and say what is true."""
    assert run.anchor_error is not None  # called only when the library's check failed
    err = f"{run.anchor_error[0]}: {run.anchor_error[1]}"
    out = []
    for st in sub.storages:
        names = [n for n in st.names if isinstance(s.standins.get(n), StandIn)]
        if len(names) < 2 or st.device == "meta":
            continue
        bad = [n for n in names if not _flattens(s.standins[n])]
        if bad:
            out.append(
                Misfire(
                    tuple(names),
                    f"{name} calls .view(-1) on every tensor sharing a storage, "
                    f"impossible for non-contiguous {', '.join(bad)}: {err}",
                    f"{_relations(sub, names)}; " + "; ".join(f"{n} is a valid {_shape(sub[n])} view" for n in bad),
                )
            )
    if not out:
        out.append(Misfire((), f"{name} fails: {err}", "tensorviz could not tell which tensor it failed on"))
    return out


def _refusal_misfires(run: sv.Run, sub: Layout, placed: _Placed) -> list[Misfire]:
    """save_model refuses a group with no "complete" name; say when nothing was shared at all."""
    if run.error is None or "no suitable name to keep" not in run.error[1] or not run.anchor:
        return []
    out = []
    for group in run.anchor:
        names = placed(group)[0]
        if not names or f"{min(names)!r}" not in run.error[1]:
            continue
        st = sub.storage(names[0])
        reads = "; ".join(
            f"{n} reads {sub[n].footprint_nbytes} of its storage's {st.nbytes} B"
            + (
                " (expanded: every byte, read several times)"
                if sub[n].is_expanded and sub[n].footprint_nbytes == st.nbytes
                else ""
            )
            for n in names[:4]
        )
        shared = _any_shared(sub, names, st)
        what = "they share bytes" if shared else ("nothing here is shared" if len(names) == 1 else "they share no byte")
        out.append(
            Misfire(names, "save_model finds no name covering the whole storage and refuses", f"{what}; {reads}")
        )
        break
    return out


def _any_shared(sub: Layout, names: tuple[str, ...], st: Storage) -> bool:
    """Whether two of ``names`` share a byte. When they are every view of storage ``st``, the
    layout's own overlap groups on ``st`` say it (overlap never crosses storages, so a layout of
    just these views groups them the same): no layout is built for 100k names."""
    if names == st.names or (len(names) == len(st.names) and set(names) == set(st.names)):
        return any(g.storage == st.key for g in sub.shared("overlap"))
    return len(sub_layout(sub, names).shared("overlap")) > 0


def _flattens(s: StandIn) -> bool:
    if s.nelement() == 0:
        return True
    try:
        s.view(-1)
        return True
    except RuntimeError:
        return False


def _shape(v: TensorView) -> str:
    return f"{v.dtype}[{'×'.join(map(str, v.shape))}] stride {v.stride}"


def sub_layout(layout: Layout, names) -> Layout:
    names = [n for n in names if n in layout]
    views = [layout[n] for n in names]
    keys = {v.storage for v in views}
    infos = [StorageInfo(st.key, st.device, st.nbytes, st.label) for st in layout.storages if st.key in keys]
    return Layout(views, infos, source=layout.source, metadata=layout.metadata)
