"""The save check's exact byte accounting: what a saver writes, duplicates, loses, from footprints.

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

from tensorviz.core.layout import Layout
from tensorviz.core.records import CONJ_NOTE
from tensorviz.savecheck.outcomes import OUTCOMES
from tensorviz.savecheck.savers import common as sv
from tensorviz.savecheck.standin import Opaque, StandIn

__all__ = ["Bytes", "unique_nbytes", "written_names", "byte_counts", "file_nbytes"]


# -- step 3: exact bytes ---------------------------------------------------------------------------------
def unique_nbytes(layout: Layout) -> int:
    """Distinct bytes the layout's views read, leaving out meta storages (they hold no data)."""
    return sum(st.covered_nbytes for st in layout.storages if st.device != "meta")


def source_name(name: str, value: Any) -> tuple[str, bool]:
    """The given name a written stand-in reads from, and whether it is written as a copy."""
    src = getattr(value, "source", name)
    if src.startswith("copy of "):
        return src[len("copy of ") :], True
    return src, False


@dataclass
class Bytes:
    written: int = 0
    distinct: int = 0
    lost: int = 0
    unreferenced: int = 0

    @property
    def duplicated(self) -> int:
        return max(self.written - self.distinct, 0)


def conjugate_names(layout: Layout) -> frozenset[str]:
    """The names of ``layout`` that are conjugate views (``z.conj()``): a saver of raw bytes
    writes their values unconjugated (:data:`~tensorviz.core.records.CONJ_NOTE`)."""
    names = layout.names
    return frozenset(names[i] for i in layout.noted(CONJ_NOTE).tolist())


def written_names(
    run: sv.Run, storage_of: dict[str, Any], pieces: dict[str, tuple[str, ...]], wrong: frozenset[str] = frozenset()
) -> tuple[list[str], list[str], dict[Any, list[str]]]:
    """Names written, names written as copies, and per storage the given names they read from
    (``storage_of`` maps each name of the layout to its storage key; ``pieces`` a tensor
    subclass's name to its inner tensors' names: writing the subclass writes them). A name of
    ``wrong`` is written but its values do not come back (a conjugate view's raw bytes): it
    restores none of its storage's bytes."""
    kept: list[str] = []
    cloned: list[str] = []
    sources: dict[Any, list[str]] = collections.defaultdict(list)
    for name, value in run.written.items():
        src, copied = source_name(name, value)
        kept.append(name)
        if copied:
            cloned.append(name)
        if src not in wrong:
            _add_source(sources, storage_of, pieces, src)
    for src in (*run.carried, *run.ignored):  # written under another name, or rebuilt by the model
        _add_source(sources, storage_of, pieces, src)
    return kept, cloned, sources


def _add_source(sources: dict, storage_of: dict[str, Any], pieces: dict[str, tuple[str, ...]], src: str) -> None:
    for name in pieces.get(src, (src,)):
        key = storage_of.get(name)
        if key is not None:
            sources[key].append(name)


def byte_counts(saver: str, run: sv.Run, sub: Layout, sources: dict[Any, list[str]]) -> Bytes:
    """Exact byte accounting from footprints (meta storages hold no data and count nothing)."""
    b = Bytes()
    if run.error is not None:
        return b
    live = [st for st in sub.storages if st.device != "meta"]
    if saver == "torch.save":  # whole storage objects, once each (a memory may be several)
        b.written = sum(object_bytes(st, sub) for st in live)
        b.unreferenced = sum(st.unreferenced_nbytes for st in live)
    else:
        b.written = sum(_nbytes(v) for v in run.written.values())
    for st in live:
        lost, distinct = _storage_bytes(st, sub, sources.get(st.key, ()))
        b.lost += lost
        b.distinct += distinct
    b.lost += _unrestored_nbytes(run, sub)
    if saver == "torch.save":
        b.distinct = sum(st.nbytes for st in live)
        b.lost += _freed_nbytes(run, sub)
    return b


def storage_objects_written(st: Any, sub: Layout) -> list[tuple[int, int]]:
    """The storage objects of one memory that torch.save writes, as ``(offset, nbytes)``.

    torch.save writes each ``torch.UntypedStorage`` once, whole, keyed by the object: two objects
    over one memory (``torch.from_numpy`` twice on an array, ``set_`` on a slice of another
    storage) are two records, and come back as two memories. The layout joins such objects into
    one memory and lists them in ``facts.storage_objects``; an object is written when one
    of the views lies inside it.
    """
    objects = sub.facts.storage_objects.get(st.key)
    if not objects:
        return [(0, st.nbytes)]
    spans = [(v.start, v.stop) for v in sub.storage_views(st.key)]
    return [(off, n) for off, n in objects if any(off <= a and b <= off + n for a, b in spans)] or [(0, st.nbytes)]


def object_bytes(st: Any, sub: Layout) -> int:
    """Bytes torch.save writes for one memory: each storage object over it, whole."""
    return sum(n for _, n in storage_objects_written(st, sub))


def _storage_bytes(st: Any, sub: Layout, kept_names) -> tuple[int, int]:
    """Bytes of one storage lost, and kept, when only ``kept_names`` come back. Footprint unions
    only where some names are kept and others not (the common cases are read off the storage)."""
    if not kept_names:
        return st.covered_nbytes, 0
    kept = set(kept_names)
    if kept.issuperset(st.names) or not kept.isdisjoint(st.complete_names):
        return 0, st.covered_nbytes
    every, kept_nbytes = sub.union_nbytes(st.names), sub.union_nbytes(kept)
    return every - kept_nbytes, kept_nbytes


def _nbytes(v: Any) -> int:
    return v.nelement() * v.element_size() if isinstance(v, StandIn) else 0


def _freed_nbytes(run: sv.Run, sub: Layout) -> int:
    """torch.save writes a freed storage as it is now (0 bytes): what its views read is gone."""
    freed = [n for n, t in run.written.items() if isinstance(t, StandIn) and t.is_freed() and n in sub]
    if freed:
        run.notes.append(
            f"storage freed (resize_): torch.save writes it as it is now, and torch.load of the file fails "
            f"for {', '.join(freed[:3])}"
        )
    by_storage: dict[Any, list[str]] = collections.defaultdict(list)
    for n in freed:
        by_storage[sub[n].storage].append(n)
    return sum(sub.union_nbytes(names) for names in by_storage.values())


def _unrestored_nbytes(run: sv.Run, sub: Layout) -> int:
    """transformers: dropped names from_pretrained will not re-tie come back as fresh weights."""
    names = [n for n in run.dropped if any(n in note and "will not restore" in note for note in run.notes)]
    return sum(sub[n].footprint_nbytes for n in names if n in sub)


def file_nbytes(run: sv.Run) -> int | None:
    if run.error is not None:
        return None
    if run.file_nbytes is not None:
        return run.file_nbytes
    if not run.files:
        return None
    sizes = [sv.safetensors_file_nbytes(t, md) for _, t, md in run.files]
    known = [x for x in sizes if x is not None]
    return sum(known) if len(known) == len(sizes) else None


#: The note on a torch.save verdict whose written bytes are unknown.
UNKNOWN_WRITTEN = (
    "bytes written unknown: torch.save also writes {names} (quantized or a tensor subclass, which it "
    "serialises its own way), and tensorviz does not lay those out"
)


def unlaid(saver: str, run: sv.Run) -> list[str]:
    """For torch.save, the written names tensorviz has no layout for (their bytes are not counted)."""
    if saver != "torch.save" or run.error is not None:
        return []
    return [n for n, v in run.written.items() if isinstance(v, Opaque)]


#: The note on a verdict whose byte figures are bounds, not exact counts.
INEXACT = (
    "byte figures are upper bounds, not exact: a footprint here has too many runs to list and no "
    "periodic form tensorviz can measure ({names}); no outcome is derived from them"
)

#: The report's note when its unique tensor bytes are a bound.
UNIQUE_BOUND = (
    "unique tensor bytes is an upper bound, not exact: some footprints could not be measured exactly ({names})"
)


def bound_notes(layout: Layout) -> tuple[str, ...]:
    """The report's note on its unique bytes when they are only a bound (else none)."""
    names = inexact_names(layout)
    return (UNIQUE_BOUND.format(names=", ".join(names[:3]) + (", ..." if len(names) > 3 else "")),) if names else ()


def inexact_names(sub: Layout) -> list[str]:
    """Names on storages whose coverage is only an upper bound (empty when every figure is exact)."""
    return [n for st in sub.storages if st.device != "meta" and not st.exact for n in st.names]


def problems(run: sv.Run, b: Bytes, inexact: bool = False) -> list[str]:
    """Every outcome that applies to a saver's run, worst first (see :data:`OUTCOMES`). With
    ``inexact`` byte figures nothing is derived from bytes: "could not evaluate" unless it raises."""
    if inexact:
        return ["raises" if run.error is not None else "could not evaluate"]
    flags = [
        ("raises", run.error is not None),
        ("drops data", b.lost),
        ("duplicates bytes", b.duplicated),
        ("writes unreferenced bytes", b.unreferenced),
    ]
    return sorted((label for label, on in flags if on), key=OUTCOMES.index)
