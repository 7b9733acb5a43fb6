"""``dcp.load``'s load plan on a checkpoint's global layout: which saved chunks, files and byte
ranges each rank reads. Pure: records, the per-rank table, and where the plan goes on a Diagram.

A DCP folder's layout (``tv.analyze(folder)``, :mod:`tensorviz.sources.formats.dcp`) has every
saved tensor as a global storage whose views are its saved chunks (``w[0:4, 0:6]``), and every
``.distcp`` file as a storage whose views are the chunks' byte ranges (``__0_0.distcp:w[0:4, 0:6]``).
A rank's read of a chunk (the load check's ``ChunkRead``: the file, byte offset and length DCP's
``FileSystemReader`` reads) names both views; :func:`readers` lists, per view, the ranks that
read it, and :func:`strips` places one strip per (bar, reading rank) on a Diagram of that layout.

>>> plan = LoadPlan("ckpt", 2, (RankRead(0, "w", "__0_0.distcp", 0, 100), RankRead(1, "w", "__0_0.distcp", 0, 100)))
>>> [(r.rank, r.files, r.nbytes, r.chunks) for r in plan.rows()]
[(0, ('__0_0.distcp',), 100, 1), (1, ('__0_0.distcp',), 100, 1)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RankRead", "RankRow", "LoadPlan", "readers", "strips"]


@dataclass(frozen=True)
class RankRead:
    """One saved chunk rank ``rank`` reads: the tensor's name (DCP's flattened fqn) and where the
    chunk's record lies (``file``, byte ``offset``, ``length``: what the reader reads)."""

    rank: int
    fqn: str
    file: str
    offset: int
    length: int


@dataclass(frozen=True)
class RankRow:
    """One rank's line of the plan: the files it opens, the bytes it reads (each chunk record
    once, however many of its pieces the rank's tensors take) and how many chunks."""

    rank: int
    files: tuple[str, ...]
    nbytes: int
    chunks: int


@dataclass(frozen=True)
class LoadPlan:
    """What ``dcp.load`` reads on each of ``world`` ranks from the checkpoint ``folder``."""

    folder: str
    world: int
    reads: tuple[RankRead, ...]

    def rows(self) -> list[RankRow]:
        """Per rank (every rank, also those that read nothing): files, bytes and chunks."""
        out = []
        for rank in range(self.world):
            chunks = {(r.file, r.offset, r.length) for r in self.reads if r.rank == rank}
            files = tuple(sorted({c[0] for c in chunks}))
            out.append(RankRow(rank, files, sum(c[2] for c in chunks), len(chunks)))
        return out


def readers(chunks: Mapping[str, Mapping[str, Any]], plan: LoadPlan) -> dict[str, tuple[int, ...]]:
    """``{view name: reading ranks}`` for a DCP layout's views (``layout.facts.chunks``: chunk
    view name -> its file, offset and length): a saved chunk's global view and its file view are
    read by the ranks whose reads name that file range.

    >>> chunks = {"w[0:4]": {"file": "__0_0.distcp", "offset": 0, "length": 9}}
    >>> readers(chunks, LoadPlan("f", 3, (RankRead(2, "w", "__0_0.distcp", 0, 9),)))
    {'w[0:4]': (2,), '__0_0.distcp:w[0:4]': (2,)}
    """
    by_range: dict[tuple[str, int, int], set[int]] = {}
    for r in plan.reads:
        by_range.setdefault((r.file, r.offset, r.length), set()).add(r.rank)
    out: dict[str, tuple[int, ...]] = {}
    for name, c in chunks.items():
        ranks = by_range.get((str(c.get("file")), int(c.get("offset", -1)), int(c.get("length", -1))))
        if ranks:
            out[name] = out[f"{c['file']}:{name}"] = tuple(sorted(ranks))
    return out


def strips(diagram: Any, read_by: Mapping[str, tuple[int, ...]], world: int, top: float, height: float) -> list[tuple]:
    """Where the plan goes on ``diagram``: per (bar, reading rank), ``(bar index, rank, x0, x1,
    y0, y1)`` in data coordinates (bytes, lanes): the bar's byte range, and slot ``rank`` of
    ``world`` equal slots stacked in the band ``[lane + top, lane + top + height]`` (rank 0 first).

    >>> from types import SimpleNamespace as NS
    >>> d = NS(bars=[NS(lane=3, start=0, stop=96, names=("w[0:4]",))])
    >>> strips(d, {"w[0:4]": (0, 1)}, 2, -0.1, 0.4)
    [(0, 0, 0.0, 96.0, 2.9, 3.1), (0, 1, 0.0, 96.0, 3.1, 3.3)]
    """
    out = []
    slot = height / max(world, 1)
    for i, bar in enumerate(diagram.bars):
        ranks = sorted({r for n in bar.names for r in read_by.get(n, ())})
        for rank in ranks:
            y0 = round(bar.lane + top + rank * slot, 12)
            out.append((i, rank, float(bar.start), float(bar.stop), y0, round(y0 + slot, 12)))
    return out
