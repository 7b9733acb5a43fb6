"""``tv.show(d)`` for a :class:`~tensorviz.core.diff.LayoutDiff`: the two layouts side by side.

One row per name, matched names on one row: a's bytes drawn to the left of the names, b's to
the right (a mirror, so a size change reads at a glance), both on one byte scale. What changed
is marked three ways, never by colour alone: a hatch (``//`` changed, ``xx`` on one side only,
``..`` a tie lost or gained), an edge style, and words at the row's end (``dtype``, ``only in
a``, ``tie lost``...). Numbered layers that are alike fold into one row
(``layers.{0…31}.mlp.up_proj.weight (32×)``) as the text does; rows with changes come first
when there are more rows than fit.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(4, 4)
>>> shown = tv.show(tv.diff({"w": w, "v": w}, {"w": w.half(), "v": w.clone()}))
>>> shown.png[:4], [r.label for r in shown.rows]
(b'\\x89PNG', ['w', 'v'])
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tensorviz.core.diff import LayoutDiff
from tensorviz.core.diff_text import fold
from tensorviz.core.names import elide
from tensorviz.core.units import format_bytes

__all__ = [
    "DiffRow",
    "DiffColumns",
    "ShownDiff",
    "diff_rows",
    "diff_items",
    "diff_columns",
    "diff_figure",
    "show_diff",
    "KINDS",
]

#: Hatch and edge per kind of row: the pattern carries the meaning, not only the colour.
STYLES: dict[str, tuple[str, str, Literal["solid", "dashed", "dotted"]]] = {
    "same": ("", "#9aa5b1", "solid"),
    "changed": ("//", "#e6a23c", "solid"),
    "tie": ("..", "#6b8fd6", "dashed"),
    "only": ("xx", "#d9534f", "dotted"),
}


@dataclass(frozen=True)
class DiffRow:
    """One drawn row: ``label`` (folded names), bytes on each side (None: absent on that side),
    ``tags`` (what changed, in words), ``kind`` (a key of :data:`STYLES`), ``count`` of names."""

    label: str
    a: int | None
    b: int | None
    tags: tuple[str, ...]
    kind: str
    count: int = 1


def _tags(d: LayoutDiff) -> dict[str, list[str]]:
    """Per a-name (b-names for b only) the words of what changed, but "renamed" (in
    :attr:`DiffColumns.renamed`)."""
    to_a = {b: a for a, b in d.renamed} if d.ties_gained else {}  # b-names of a tie gained -> a-names
    tags: dict[str, list[str]] = {}
    for c in d.changed:
        if c.field != "nbytes":
            tags.setdefault(c.name, []).append(c.field)
    for groups, word, back in ((d.ties_lost, "tie lost", False), (d.ties_gained, "tie gained", True)):
        for g in groups:
            for n in g:
                tags.setdefault(to_a.get(n, n) if back else n, []).append(word)
    if d.content is not None:
        for n in d.content.different:
            tags.setdefault(n, []).append("bytes differ")
    return tags


#: Row kinds in code order (:attr:`DiffColumns.kind`): the keys of :data:`STYLES`.
KINDS = ("same", "changed", "tie", "only")


@dataclass(frozen=True, eq=False)
class DiffColumns:
    """The rows of a diff as columns, in the order they are drawn (a's names in a's order, a
    matched name of b on its a-name's row, then the names only in b).

    ``a``/``b``: each row's position in ``layout_a``/``layout_b`` (-1: not on that side; a's
    rows are rows ``0 … len(layout_a) - 1``); ``kind``: an index into :data:`KINDS`;
    ``renamed``: matched by a rule; ``tags``: the words of what else changed, for the rows
    that have any (row -> words); ``row_of_b``: per view of b, its row; ``pos_a``/``pos_b``:
    each name's position in its layout.
    """

    a: np.ndarray
    b: np.ndarray
    kind: np.ndarray
    renamed: np.ndarray
    tags: dict[int, tuple[str, ...]]
    row_of_b: np.ndarray
    pos_a: dict[str, int]
    pos_b: dict[str, int]

    def row_tags(self, row: int) -> tuple[str, ...]:
        """Row ``row``'s words of what changed ("renamed" first, as :func:`diff_items` has them)."""
        return (("renamed",) if self.renamed[row] else ()) + self.tags.get(row, ())


def diff_columns(d: LayoutDiff) -> DiffColumns:
    """The aligned rows of ``d`` as numpy columns (see :class:`DiffColumns`): a dictionary
    look-up per name, the rest per change, never a record per view."""
    la, lb = d.layout_a, d.layout_b
    assert la is not None and lb is not None  # a diff made by tv.diff holds both layouts
    names_a, names_b = la.names, lb.names
    na = len(names_a)
    pos_a, pos_b = dict(zip(names_a, range(na))), dict(zip(names_b, range(len(names_b))))
    positions = lambda names, pos: np.fromiter(map(pos.__getitem__, names), np.int64, len(names))  # noqa: E731
    assert d.matches is not None  # (the diff's own matching: exact names first, then by rule)
    ib = d.matches.copy()
    only_a, only_b = np.flatnonzero(ib < 0), positions(d.only_b, pos_b)
    renamed = np.zeros(na + len(only_b), dtype=bool)
    if d.renamed:
        renamed[positions([x for x, _ in d.renamed], pos_a)] = True
    a = np.concatenate([np.arange(na, dtype=np.int64), np.full(len(only_b), -1, dtype=np.int64)])
    b = np.concatenate([ib, only_b])
    kind = np.zeros(len(a), dtype=np.uint8)
    tags: dict[int, tuple[str, ...]] = {}
    for name, words in _tags(d).items():
        i = pos_a.get(name)
        if i is not None:
            tags[i] = tuple(dict.fromkeys(words))
            kind[i] = KINDS.index("tie" if any(w.startswith("tie") for w in tags[i]) else "changed")
    kind[only_a] = kind[na:] = KINDS.index("only")
    tags.update(dict.fromkeys(only_a.tolist(), ("only in a",)))
    tags.update(dict.fromkeys(range(na, len(a)), ("only in b",)))
    row_of_b = np.full(len(names_b), -1, dtype=np.int64)
    matched = np.flatnonzero(b >= 0)
    row_of_b[b[matched]] = matched
    return DiffColumns(a, b, kind, renamed, tags, row_of_b, pos_a, pos_b)


def diff_rows(d: LayoutDiff, max_rows: int = 40) -> tuple[list[DiffRow], int]:
    """The rows to draw (at most ``max_rows``, rows with changes first) and how many were left out."""
    rows = _folded(diff_items(d))
    changed = [r for r in rows if r.kind != "same"]
    keep = changed[:max_rows] + [r for r in rows if r.kind == "same"][: max(0, max_rows - len(changed))]
    kept = set(map(id, keep))
    return [r for r in rows if id(r) in kept], len(rows) - len(keep)


def diff_items(d: LayoutDiff) -> list[tuple[str, tuple]]:
    """One item per name before folding, in the order the rows are drawn (a's names in a's
    order, a matched name of b on its a-name's row, then the names only in b):
    ``(name, (bytes in a, bytes in b, tags, kind))``, None where a side has no such name.
    The explorer's compare mode aligns its rows by the same columns (:func:`diff_columns`)."""
    la, lb = d.layout_a, d.layout_b
    assert la is not None and lb is not None  # a diff made by tv.diff holds both layouts
    c = diff_columns(d)
    names_a, names_b = la.names, lb.names
    bytes_a, bytes_b = [v.nbytes for v in la.views], [v.nbytes for v in lb.views]
    items: list[tuple[str, tuple]] = []
    for row, (i, j, k) in enumerate(zip(c.a.tolist(), c.b.tolist(), c.kind.tolist())):
        a = bytes_a[i] if i >= 0 else None
        b = bytes_b[j] if j >= 0 else None
        items.append((names_a[i] if i >= 0 else names_b[j], (a, b, c.row_tags(row), KINDS[k])))
    return items


def _folded(items: list[tuple[str, tuple]]) -> list[DiffRow]:
    """Alike numbered rows (same bytes on each side and same tags) as one row."""
    facts = {repr(f): f for _, f in items}
    out = []
    for label, key, count in fold((name, repr(f)) for name, f in items):
        a, b, tags, kind = facts[key]
        out.append(DiffRow(label, a, b, tags, kind, count))
    return out


def diff_figure(d: LayoutDiff, *, max_rows: int = 40, width: float = 10.0) -> Any:
    """A matplotlib Figure (no pyplot) of :func:`diff_rows`: a's bars left, b's right."""
    from matplotlib.patches import Patch

    from tensorviz.render.mpl.figure import TensorvizFigure, literal_texts

    rows, left_out = diff_rows(d, max_rows)
    n = max(len(rows), 1)
    height = 0.9 + 0.28 * (n + 1.2)
    fig = TensorvizFigure(figsize=(width, height))
    ax = fig.add_axes((0.01, 0.55 / height, 0.98, 0.28 * (n + 1.2) / height))
    biggest = max([r.a or 0 for r in rows] + [r.b or 0 for r in rows] + [1])
    for y, r in enumerate(rows):
        _draw_row(ax, y, r, biggest)
    ax.set_xlim(-2.3, 3.4)
    ax.set_ylim(n - 0.5, -1.7)
    ax.axis("off")
    ax.text(-1.0, -1.15, elide(f"a: {d.source_a}", 45), ha="right", va="center", fontsize=9, fontweight="bold")
    ax.text(1.0, -1.15, elide(f"b: {d.source_b}", 45), ha="left", va="center", fontsize=9, fontweight="bold")
    kinds = (("same", "same"), ("changed", "changed"), ("tie", "tie lost/gained"), ("only", "on one side only"))
    legend = [
        Patch(facecolor=STYLES[k][1], hatch=STYLES[k][0], edgecolor="#333333", linestyle=STYLES[k][2], label=w)
        for k, w in kinds
    ]
    fig.legend(handles=legend, loc="lower center", ncol=4, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
    if left_out:
        fig.text(0.99, 0.02, f"… {left_out} more unchanged rows not drawn", ha="right", va="bottom", fontsize=8)
    return literal_texts(fig)


def _draw_row(ax: Any, y: int, r: DiffRow, biggest: int) -> None:
    """One row: a's bar leftwards from x = -1, b's rightwards from x = 1, names between, tags after."""
    hatch, colour, edge = STYLES[r.kind]
    for side, n in ((-1, r.a), (1, r.b)):
        if n is None:
            continue
        length = 0.9 * n / biggest
        ax.barh(
            y,
            side * length,
            left=side * 1.0,
            height=0.7,
            color=colour,
            hatch=hatch,
            edgecolor="#333333",
            linestyle=edge,
            linewidth=0.8,
        )
        ax.text(side * (1.02 + length), y, format_bytes(n), va="center", ha="left" if side > 0 else "right", fontsize=7)
    label = elide(r.label, 56) + (f" ({r.count}×)" if r.count > 1 else "")
    ax.text(0, y, label, va="center", ha="center", fontsize=7.5, family="monospace")
    if r.tags:
        ax.text(2.35, y, elide(", ".join(r.tags), 40), va="center", ha="left", fontsize=7.5, fontweight="bold")


@dataclass(frozen=True, eq=False)
class ShownDiff:
    """A drawn diff: PNG bytes, the rows drawn, the diff; displays as PNG, HTML and text."""

    diff: LayoutDiff
    rows: tuple[DiffRow, ...]
    png: bytes
    picture: str = ""  # the HTML picture: an inline SVG that fits the output (render.mpl.figure.figure_html)

    @property
    def text(self) -> str:
        return str(self.diff)

    def to_html(self) -> str:
        """The picture (an inline SVG that fits the output, else the PNG), then the escaped
        summary (no JavaScript)."""
        data = base64.b64encode(self.png).decode("ascii")
        picture = self.picture or f'<img src="data:image/png;base64,{data}" alt="tensorviz diff"/>'
        return picture + self.diff._repr_html_()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {
            "image/png": base64.b64encode(self.png).decode("ascii"),
            "text/html": self.to_html(),
            "text/plain": self.text,
        }
        return {k: v for k, v in bundle.items() if (not include or k in include) and (not exclude or k not in exclude)}

    def __repr__(self) -> str:
        return self.text


def show_diff(d: LayoutDiff, *, dpi: int = 100, width: float = 10.0, max_rows: int = 40) -> ShownDiff:
    """Draw ``d`` (see :func:`diff_figure`) and keep its PNG for display."""
    from tensorviz.render.mpl.figure import figure_html, png_bytes

    fig = diff_figure(d, max_rows=max_rows, width=width)
    rows, _ = diff_rows(d, max_rows)
    first = str(d).split("\n", 1)[0]
    return ShownDiff(d, tuple(rows), png_bytes(fig, dpi=dpi), figure_html(fig, alt=f"tensorviz diff: {first}") or "")
