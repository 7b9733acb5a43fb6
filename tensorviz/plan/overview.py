"""The overview: every storage of a layout at once, as cells of a grid sized by bytes.

Pure numpy. Lanes show a few dozen storages in detail; a checkpoint has thousands. The overview
gives each selected storage at least one cell of a ``columns``-wide grid (in source order, row
after row), larger storages more cells in proportion to their bytes, and a *kind* saying how
its views share it: ``tied`` (two views read the same span: tied weights), ``overlapping``
(views share bytes otherwise: slices, fused projections), ``packed`` (several views, no byte
shared: flat buffers, files) or ``simple`` (one view or none). The share of a storage's bytes
no view reads is its last cells (``unreferenced_cells``). The largest storages and the largest
shared ones are labelled. Renderers draw it from these columns (see
:mod:`tensorviz.render.mpl.overview`); the browser explorer can read them as binary columns.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(64)
>>> ov = tv.diagram({"w": w, "tied": w, "x": torch.zeros(8)}, overview=True).overview
>>> [KINDS[k] for k in ov.kind], int(ov.cells.sum()) == ov.cells_total
(['tied', 'simple'], True)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tensorviz.core.names import elide
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout

__all__ = ["Overview", "OverviewLabel", "KINDS", "overview", "AUTO_STORAGES"]

#: Storage kinds, by index (``Overview.kind``), from least to most shared.
KINDS = ("simple", "packed", "overlapping", "tied")
#: An overview is drawn by default from this many selected storages on (or when lanes hide some).
AUTO_STORAGES = 1000
_LABELS = 4  # largest storages labelled, and as many of the largest tied and overlapping ones
_MARKER_PX = 14  # a numbered marker's diameter in pixels, at the nominal width
_NAME_SHOWN = 100  # characters of a name a label shows (its start and end of a longer one)
_WIDTH = 900  # nominal grid width in pixels: columns are chosen for cells of a few pixels
_AREA = 900 * 300  # nominal grid area in pixels


class OverviewLabel(NamedTuple):
    """A labelled storage: its entry in the overview's columns, storage index and text."""

    entry: int
    storage: int
    text: str


@dataclass(frozen=True, eq=False)
class Overview:
    """Every selected storage as cells of a grid (see the module docstring). Columns are numpy
    arrays, one entry per storage in source order: ``storage`` (index), ``nbytes``,
    ``unreferenced`` (bytes no view reads), ``views``, ``kind`` (index into :data:`KINDS`),
    ``cells`` (>= 1) and ``unreferenced_cells`` (the last cells of the storage drawn as
    unreferenced). ``columns`` is the grid width in cells; ``labels`` name a few storages."""

    storage: np.ndarray
    nbytes: np.ndarray
    unreferenced: np.ndarray
    views: np.ndarray
    kind: np.ndarray
    cells: np.ndarray
    unreferenced_cells: np.ndarray
    columns: int
    labels: tuple[OverviewLabel, ...]

    @property
    def cells_total(self) -> int:
        return int(self.cells.sum())

    @property
    def rows(self) -> int:
        return -(-self.cells_total // self.columns) if self.columns else 0

    @cached_property
    def first_cell(self) -> np.ndarray:
        """Index of each storage's first cell (row-major)."""
        return np.concatenate(([0], np.cumsum(self.cells)[:-1])).astype(np.int64)

    def cell_entry(self) -> np.ndarray:
        """Per cell (row-major, ``cells_total`` of them), the entry of the storage it shows."""
        return np.repeat(np.arange(self.cells.size), self.cells)

    def counts(self) -> dict[str, int]:
        """Storages of each kind.

        >>> import torch, tensorviz as tv
        >>> tv.diagram({"a": torch.zeros(2)}, overview=True).overview.counts()
        {'simple': 1, 'packed': 0, 'overlapping': 0, 'tied': 0}
        """
        return dict(zip(KINDS, np.bincount(self.kind, minlength=len(KINDS)).tolist()))

    @property
    def text(self) -> str:
        """One line: how many storages of each kind (for text renderers)."""
        parts = [f"{n:,} {k}" for k, n in self.counts().items() if n]
        unref = int(self.unreferenced.sum())
        more = f" · {format_bytes(unref)} unreferenced" if unref else ""
        n = self.storage.size
        return f"overview of {n:,} storage{'s' * (n != 1)}: {', '.join(parts)}{more}"


def kinds(layout: Layout) -> np.ndarray:
    """Per storage of the layout, its kind (index into :data:`KINDS`), for all at once."""
    st = layout.storage_stats()
    order, bounds = layout.group_members("span")
    sizes = np.diff(bounds)
    owner = layout.view_spans().storage[order[bounds[:-1]]]
    tied = np.bincount(owner[sizes >= 2], minlength=st.nbytes.size) > 0
    out = np.where(st.views >= 2, 1, 0)
    out[(st.views >= 2) & (st.footprint_nbytes > st.covered)] = 2
    out[tied] = 3
    return out.astype(np.int8)


def overview(layout: Layout, storages: np.ndarray) -> Overview:
    """The overview of the given storages (indices; drawn in increasing order)."""
    idx = np.sort(np.asarray(storages, dtype=np.int64))
    st = layout.storage_stats()
    nbytes, covered, views = st.nbytes[idx], st.covered[idx], st.views[idx]
    cells = _cells(nbytes)
    unref = nbytes - covered
    share = np.where(nbytes > 0, unref / np.maximum(nbytes, 1), 0.0)
    ucells = np.round(cells * share).astype(np.int64)
    ucells = np.where((unref > 0) & (cells > 1), np.maximum(ucells, 1), ucells)
    ucells = np.where(covered > 0, np.minimum(ucells, cells - 1), cells * (nbytes > 0))
    kind = kinds(layout)[idx]
    columns = _columns(int(cells.sum()))
    labels = _labels(layout, idx, nbytes, kind, views, columns, cells)
    return Overview(idx, nbytes, unref, views, kind, cells, ucells, columns, labels)


def _cells(nbytes: np.ndarray) -> np.ndarray:
    """One cell per storage, plus a share of ``extra`` cells in proportion to its bytes (so a
    storage ten times larger looks larger; the smallest still has its cell)."""
    n = nbytes.size
    extra = min(max(n, 8000), max(1_200_000 - n, 0))
    total = int(nbytes.sum())
    if not total:
        return np.ones(n, dtype=np.int64)
    return 1 + (extra * (nbytes.astype(np.float64) / total)).astype(np.int64)


def _columns(cells: int) -> int:
    """Grid width in cells: square cells of as many pixels as fill the nominal area."""
    px = int(np.clip(np.floor(np.sqrt(_AREA / max(cells, 1))), 1, 24))
    return max(1, min(_WIDTH // px, cells))


def _labels(
    layout: Layout,
    idx: np.ndarray,
    nbytes: np.ndarray,
    kind: np.ndarray,
    views: np.ndarray,
    columns: int,
    cells: np.ndarray,
) -> tuple[OverviewLabel, ...]:
    """The largest storages, the largest tied ones and the largest overlapping ones (at most
    ``_LABELS`` of each), in grid order, placed so their markers do not cover each other.

    Among storages of equal size (10,000 tied 256-byte pairs) any is "the largest": those picked
    are spread over the grid (see :func:`_spread`) and one whose marker would touch a marker
    already placed is passed over for the next of the same size. A storage strictly larger
    than the rest of its kind is always labelled, crowded or not."""
    rank = np.lexsort((idx, -nbytes))  # largest first, then grid order
    mid = np.concatenate(([0], np.cumsum(cells)[:-1])) + cells // 2
    at = np.stack(divmod(mid, max(columns, 1)), axis=1)  # (row, column) of each marker
    reach = -(-_MARKER_PX // max(_WIDTH // max(columns, 1), 1))  # cells a marker covers
    placed: list[int] = []
    for pool in (rank, rank[kind[rank] == 3], rank[kind[rank] == 2]):  # largest; tied; overlapping
        _place(pool, nbytes, at, reach, placed)
    names = layout.names
    out = []
    for e in sorted(set(placed)):
        s = int(idx[e])
        who = _who(layout, s, int(kind[e]), int(views[e]), names)
        out.append(OverviewLabel(e, s, f"#{s} {who} · {format_bytes(int(nbytes[e]))} · {KINDS[kind[e]]}"))
    return tuple(out)


def _place(pool: np.ndarray, nbytes: np.ndarray, at: np.ndarray, reach: int, placed: list[int]) -> None:
    """Add up to ``_LABELS`` entries of ``pool`` (largest first) to ``placed``: run by run of
    equal sizes, spread out, skipping one whose marker would touch a placed one unless it is the
    only storage of its size."""
    sizes = -nbytes[pool]  # non-decreasing
    taken, i = 0, 0
    while taken < _LABELS and i < pool.size:
        j = int(np.searchsorted(sizes, sizes[i], side="right"))
        run = pool[i:j]
        for e in run[_spread(run.size)].tolist():
            if taken == _LABELS:
                break
            if e in placed:
                taken += 1
            elif run.size == 1 or not any(np.abs(at[p] - at[e]).max() < reach for p in placed):
                placed.append(e)
                taken += 1
        i = j


def _spread(n: int, most: int = 64) -> np.ndarray:
    """Up to ``most`` positions in ``range(n)``, each as far as it can be from those before it
    (0, n/2, n/4, 3n/4, ...: the van der Corput sequence)."""
    k = np.arange(min(n, most) * 4)
    bits = np.zeros(k.size)
    for b in range(1, 13):  # bit-reversed fractions
        bits += ((k >> (b - 1)) & 1) / 2.0**b
    pos = np.floor(bits * n).astype(np.int64)
    _, first = np.unique(pos, return_index=True)
    return pos[np.sort(first)][:most]


def _who(layout: Layout, s: int, kind: int, views: int, names: tuple[str, ...]) -> str:
    """A storage's first view name (for a tied one, its first tied pair) and how many more."""
    pos = layout.view_positions(s)
    if not pos.size:
        return "no views"
    if kind == 3:
        order, bounds = layout.group_members("span")
        gi = layout.group_index("span")[pos]
        g = int(gi[np.flatnonzero(np.diff(bounds)[gi] >= 2)[0]])
        a, b = order[bounds[g]], order[bounds[g] + 1]
        return f"{_shown(names[a])} ≡ {_shown(names[b])}" + (f" +{views - 2:,} views" if views > 2 else "")
    return _shown(names[int(pos[0])]) + (f" +{views - 1:,} view{'s' * (views > 2)}" if views > 1 else "")


def _shown(name: str) -> str:
    """A name as a label shows it: a hostile 20,000-character one by its start and end."""
    return elide(name, _NAME_SHOWN)
