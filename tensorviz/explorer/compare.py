"""The explorer's compare mode: two layouts row by row in the canvas (``tv.explore(a, compare=b)``).

A :class:`~tensorviz.core.diff.LayoutDiff` becomes a :class:`CompareSection`, the typed section
the canvas's one payload carries under ``"compare"`` (:meth:`CompareSection.wire`). One row per
name, a matched pair on one row, in the order the static side by side draws them
(:func:`tensorviz.render.diff.diff_columns`: a's names in a's order, then the names only in b);
each row carries its marks (:data:`MARKS`: what changed, as a glyph and words besides a colour)
and both sides' facts (name, shape, dtype, stride, offset, bytes, storage, tie), which the hover
shows side by side. ``compare.js`` draws it. The selection stays the explorer's one selection:
a row's key is its a-name, or its b-name when the name is only in b (never an a-name: exact
names match first).

Bounded for big models as the diagram is: at most :data:`ROW_BUDGET` rows are sent, rows with a
mark first, then unmarked ones in order (the rest counted, "… N more"); the explorer's name
filter narrows the rows as it narrows the diagram, which reaches every row.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(4, 4)
>>> rows = CompareRows(tv.diff({"w": w, "v": w}, {"module.w": w.half(), "module.v": w.clone()}))
>>> [(r.key, r.name_b, r.words) for r in rows.section().rows]
[('w', 'module.w', ('tie lost', 'dtype', 'renamed')), ('v', 'module.v', ('tie lost', 'renamed'))]
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tensorviz.core.diff import LayoutDiff
from tensorviz.core.layout import Layout
from tensorviz.core.names import elide, search, terminal
from tensorviz.core.records import GroupBy
from tensorviz.core.units import byte_text
from tensorviz.explorer import wire
from tensorviz.render.diff import KINDS, STYLES, DiffColumns, diff_columns

__all__ = ["CompareRows", "CompareSection", "CompareRow", "SideFacts", "MARKS", "ROW_BUDGET", "COLUMNS"]

#: What a row can say changed, one bit each, most telling first (a row's badge shows its first):
#: key, glyph, words, colour. The glyph and the words carry the meaning; the colour repeats it.
MARKS: tuple[tuple[str, str, str, str], ...] = (
    ("removed", "−", "only in a", "#d9534f"),
    ("added", "+", "only in b", "#2e8b57"),
    ("tie lost", "≢", "tie lost", "#8e5cc7"),
    ("tie gained", "≡", "tie gained", "#8e5cc7"),
    ("shape", "Δ", "shape", "#e6a23c"),
    ("dtype", "Δ", "dtype", "#e6a23c"),
    ("conjugate", "Δ", "conjugate", "#e6a23c"),
    ("stride", "Δ", "stride", "#e6a23c"),
    ("offset", "Δ", "offset", "#e6a23c"),
    ("device", "Δ", "device", "#e6a23c"),
    ("sharing lost", "⊘", "sharing lost", "#6b8fd6"),
    ("sharing gained", "∩", "sharing gained", "#6b8fd6"),
    ("bytes differ", "≠", "bytes differ", "#c2185b"),
    ("moved", "⇄", "moved to another file", "#607d8b"),
    ("renamed", "→", "renamed", "#3d7ad6"),
)
_BIT = {words: 1 << k for k, (_, _, words, _) in enumerate(MARKS)}
#: Most rows sent to the browser (rows with a mark first).
ROW_BUDGET = 3000
#: Characters of a partner's name in a tie's text.
_PARTNER = 80
#: The section's binary columns, in frame order (:func:`tensorviz.explorer.wire.frame`).
COLUMNS = (
    *("side", "marks", "kind", "names_a", "names_b", "rule", "bytes_a", "bytes_b"),
    *("shape_a", "shape_b", "stride_a", "stride_b", "dtype_a", "dtype_b", "offset_a", "offset_b"),
    *("storage_a", "storage_b", "tie_a", "tie_b"),
)


@dataclass(frozen=True)
class SideFacts:
    """One side's facts of a row's tensor, as the hover and the details show them."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]
    offset: int
    nbytes: int
    storage: str
    tie: str


@dataclass(frozen=True)
class CompareRow:
    """One row: its selection ``key``, the names on each side (None: absent), the ``marks``
    bits of :data:`MARKS` (``words`` the same in words), ``kind`` (a key of the static
    picture's styles), the renaming ``rule`` (words, "" when not renamed), and each side's facts."""

    key: str
    name_a: str | None
    name_b: str | None
    marks: int
    kind: str
    rule: str
    a: SideFacts | None
    b: SideFacts | None

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(w for _, _, w, _ in MARKS if self.marks & _BIT[w])


@dataclass(frozen=True)
class CompareSection:
    """What the canvas's compare mode draws: ``rows`` (at most :data:`ROW_BUDGET`, aligned),
    ``left_out`` rows not sent, ``total`` rows the filter kept, the ``summary`` line of the diff,
    the ``sources`` and the naming ``rules``, and ``counts`` of each mark over every row."""

    rows: tuple[CompareRow, ...]
    left_out: int
    total: int
    summary: str
    sources: tuple[str, str]
    rules: tuple[str, ...]
    counts: tuple[int, ...]
    pattern: str = ""

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.rows)

    def wire(self) -> dict[str, Any]:
        """The payload's ``"compare"`` entry: the binary columns framed into one buffer
        (``frame``, in :data:`COLUMNS` order) beside a few JSON values. Text goes as the
        browser shows it (:func:`tensorviz.explorer.wire.text`: controls escaped)."""
        rows = self.rows
        dtypes: dict[str, int] = {}
        cols: dict[str, bytes] = {
            "side": wire.le([(r.a is not None) | (r.b is not None) << 1 for r in rows], "u1"),
            "marks": wire.le([r.marks for r in rows], "u2"),
            "kind": wire.le([KINDS.index(r.kind) for r in rows], "u1"),
            "names_a": wire.text(r.name_a or "" for r in rows),
            "names_b": wire.text("" if r.name_b is None or r.name_b == r.name_a else r.name_b for r in rows),
            "rule": wire.text(r.rule for r in rows),
        }
        for side in ("a", "b"):
            facts = [getattr(r, side) for r in rows]
            cols[f"bytes_{side}"] = wire.le([-1 if f is None else f.nbytes for f in facts], "f8")
            cols[f"offset_{side}"] = wire.le([-1 if f is None else f.offset for f in facts], "f8")
            cols[f"shape_{side}"] = wire.text("" if f is None else _dims(f.shape) for f in facts)
            cols[f"stride_{side}"] = wire.text("" if f is None else _dims(f.stride) for f in facts)
            cols[f"dtype_{side}"] = wire.le(
                [255 if f is None else dtypes.setdefault(f.dtype, len(dtypes)) for f in facts], "u1"
            )
            cols[f"storage_{side}"] = wire.text("" if f is None else f.storage for f in facts)
            cols[f"tie_{side}"] = wire.text("" if f is None else f.tie for f in facts)
        return {
            "frame": wire.frame(cols, COLUMNS),
            "columns": list(COLUMNS),
            "marks": [list(m) for m in MARKS],
            "kinds": [[k, STYLES[k][1]] for k in KINDS],
            "dtypes": list(dtypes),
            "summary": terminal(self.summary),
            "sources": [terminal(s) for s in self.sources],
            "rules": [terminal(r) for r in self.rules],
            "counts": list(self.counts),
            "left_out": self.left_out,
            "total": self.total,
            "pattern": terminal(self.pattern),
        }


class CompareRows:
    """Every aligned row of a diff (as columns, computed once), and the sections the canvas is
    sent (records only for the rows sent).

    ``diff`` must hold both layouts (what :func:`tensorviz.diff` returns).
    """

    def __init__(self, diff: LayoutDiff, budget: int = ROW_BUDGET) -> None:
        if diff.layout_a is None or diff.layout_b is None:
            raise ValueError("the compare mode needs a diff that holds both layouts (what tv.diff returns)")
        self.diff = diff
        self.budget = budget
        self._sections: dict[str, CompareSection] = {}
        self._layouts: tuple[Layout, Layout] = (diff.layout_a, diff.layout_b)

    @property
    def layouts(self) -> tuple[Layout, Layout]:
        """The two layouts compared, a's and b's."""
        return self._layouts

    @cached_property
    def _aligned(self) -> tuple[DiffColumns, np.ndarray]:
        """The rows (the static side by side's order: :func:`tensorviz.render.diff.diff_columns`)
        and each row's marks (bits of :data:`MARKS`)."""
        c = diff_columns(self.diff)
        marks = np.zeros(len(c.a), dtype=np.int64)
        marks[c.renamed] |= _BIT["renamed"]
        for rows, bits in _sparse_marks(self.diff, c):
            np.bitwise_or.at(marks, rows, bits)
        return c, marks

    @cached_property
    def counts(self) -> tuple[int, ...]:
        """Rows with each mark of :data:`MARKS` (over every row, not only those sent)."""
        marks = self._aligned[1]
        return tuple(int(np.count_nonzero((marks >> k) & 1)) for k in range(len(MARKS)))

    def section(self, pattern: str = "") -> CompareSection:
        """The rows whose a- or b-name matches ``pattern`` (a regular expression; "" for every
        row), within the budget: rows with a mark first, then the others, in aligned order."""
        if pattern not in self._sections:
            c, marks = self._aligned
            rows = np.arange(len(c.a)) if not pattern else self._matching(re.compile(pattern))
            marked = rows[marks[rows] != 0]
            unmarked = rows[marks[rows] == 0][: max(0, self.budget - len(marked))]
            keep = np.sort(np.concatenate([marked[: self.budget], unmarked]))
            sent = tuple(self._row(r) for r in keep.tolist())
            d = self.diff
            self._sections[pattern] = CompareSection(
                sent, len(rows) - len(sent), len(rows), summary_line(d, self.counts),
                (d.source_a, d.source_b), d.rules, self.counts, pattern,
            )  # fmt: skip
        return self._sections[pattern]

    def _matching(self, rx: re.Pattern) -> np.ndarray:
        """The rows whose a- or b-name ``rx`` finds."""
        c = self._aligned[0]
        names_a, names_b = (lay.names for lay in self._layouts)
        hit = (
            (i >= 0 and search(rx, names_a[i])) or (j >= 0 and search(rx, names_b[j]))
            for i, j in zip(c.a.tolist(), c.b.tolist())
        )
        return np.flatnonzero(np.fromiter(hit, dtype=bool, count=len(c.a)))

    @cached_property
    def _by_key(self) -> dict[str, int]:
        c = self._aligned[0]
        names_a, names_b = (lay.names for lay in self._layouts)
        out = dict(zip(names_a, range(len(names_a))))
        out.update((names_b[j], len(names_a) + k) for k, j in enumerate(c.b[len(names_a) :].tolist()))
        return out

    def row(self, key: str) -> CompareRow | None:
        """The row of ``key`` (an a-name, or a name only in b), sent or not; None when no row has it."""
        i = self._by_key.get(key)
        return None if i is None else self._row(i)

    def side_names(self, keys: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The names on each side of the rows of ``keys`` (a key without a row is left out),
        in the order of ``keys``: what the explain pane draws, a's views and b's.

        >>> import torch, tensorviz as tv
        >>> w = torch.zeros(2)
        >>> CompareRows(tv.diff({"w": w, "x": w}, {"module.w": w, "y": w})).side_names(["w", "x", "y", "z"])
        (('w', 'x'), ('module.w', 'y'))
        """
        rows = [r for r in map(self.row, dict.fromkeys(keys)) if r is not None]
        return (
            tuple(r.name_a for r in rows if r.name_a is not None),
            tuple(r.name_b for r in rows if r.name_b is not None),
        )

    def note(self, key: str) -> str:
        """One line about the match in b of the view of a ``key`` (the model map's hover adds it):
        ``in b: module.w · Δ dtype · → renamed``, ``in b: w · no change``, or only in a; "" when
        no row has it."""
        r = self.row(key)
        if r is None or r.name_a is None:
            return ""
        if r.name_b is None:
            return "in b: — only in a (no tensor of b matches it by name or rule)"
        return f"in b: {elide(terminal(r.name_b), _PARTNER)} · {_tag(r.marks, keep_rename=True) or 'no change'}"

    def list_tags(self, names: Sequence[str]) -> list[str]:
        """Per a-name, what changed for the tensor list, in words: ``≢ tie lost · Δ dtype``,
        ``− only in a``; "" where nothing changed but the name (a rename is every name of a
        wrapped model: the rows say it) or where no row has the name."""
        marks, by_key = self._aligned[1], self._by_key
        return [_tag(int(marks[r])) if (r := by_key.get(n)) is not None else "" for n in names]

    def lookup(self, keys: list[str]) -> dict[str, Any]:
        """The rows of ``keys`` (a-names; a key without a row is left out) in the wire form of
        :meth:`CompareSection.wire`: what the browser asks for when a view of a is hovered whose
        row was not sent (the hover shows its matched view in b)."""
        found = [self._by_key[k] for k in dict.fromkeys(keys) if k in self._by_key]
        rows = tuple(self._row(i) for i in found)
        d = self.diff
        return CompareSection(rows, 0, len(rows), "", (d.source_a, d.source_b), d.rules, self.counts).wire()

    def _row(self, r: int) -> CompareRow:
        c, marks = self._aligned
        (la, lb), i, j = self._layouts, int(c.a[r]), int(c.b[r])
        name_a = la.names[i] if i >= 0 else None
        name_b = lb.names[j] if j >= 0 else None
        rule = rename_rule(name_a, name_b) if name_a is not None and name_b is not None and name_a != name_b else ""
        a = self._facts(0, i) if i >= 0 else None
        b = self._facts(1, j) if j >= 0 else None
        key = name_a if name_a is not None else str(name_b)
        return CompareRow(key, name_a, name_b, int(marks[r]), KINDS[int(c.kind[r])], rule, a, b)

    @cached_property
    def _ties(self) -> tuple[tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...], ...]:
        """Per side, per :data:`_TIES` grouping: (order, bounds, each view's group)."""
        return tuple(tuple((*lay.group_members(by), lay.group_index(by)) for by, _ in _TIES) for lay in self._layouts)

    def _facts(self, side: int, i: int) -> SideFacts:
        """Side ``side``'s (0: a, 1: b) facts of its view ``i``: geometry, bytes, its storage
        in words and its tie (the other names of its exact span; else the names it shares
        bytes with)."""
        layout = self._layouts[side]
        names = layout.names
        name = names[i]
        v = layout[name]
        s = layout.storage(name)
        storage = f"#{s.index} {s.label or s.device} · {byte_text(s.nbytes)}"
        tie = ""
        for (order, bounds, index), (_, words) in zip(self._ties[side], _TIES):
            g = int(index[i])
            members = [names[m] for m in order[bounds[g] : bounds[g + 1]].tolist() if m != i]
            if members:
                shown = ", ".join(elide(m, _PARTNER) for m in members[:2])
                tie = f"{words} {shown}{f' +{len(members) - 2}' if len(members) > 2 else ''}"
                break
        return SideFacts(name, tuple(v.shape), v.dtype, tuple(v.stride), v.offset, v.nbytes, storage, tie)

    def static(self, heading: str) -> tuple[bytes, str, str, str]:
        """The picture a page without the live explorer shows in compare mode: the static side
        by side (:func:`tensorviz.render.diff.show_diff`): its PNG, escaped HTML (no JavaScript),
        the caption (``heading`` and the summary line) and the text (``print(diff)``)."""
        from tensorviz.render.diff import show_diff

        shown = show_diff(self.diff)
        caption = f"{heading}; compared with b: {summary_line(self.diff, self.counts)}"
        return shown.png, shown.to_html(), caption, f"{caption}\n{self.diff}"

    def details_html(self, keys: tuple[str, ...]) -> str:
        """Escaped HTML of the selected rows: each side's facts in two columns, the marks in words."""
        if not keys:
            return (
                '<div class="tvz-details tvz-muted">Select a row of the comparison (or a tensor) to see '
                "both sides' shape, dtype, stride, offset, bytes, storage and tie.</div>"
            )
        return '<div class="tvz-details">' + "".join(_pair_block(self.row(k), k) for k in keys) + "</div>"


def _sparse_marks(d: LayoutDiff, c: DiffColumns) -> list[tuple[np.ndarray, int]]:
    """(rows, bits) of the marks not in :attr:`DiffColumns.renamed`: what changed in words
    (:attr:`DiffColumns.tags`, "only in a/b" included), a tie lost or gained on a row only in
    one side too, sharing lost/gained (overlap groups that are not also a tie lost/gained) and
    moved to another file. Per change, never per row."""
    pos_a, pos_b = c.pos_a, c.pos_b
    out: list[tuple[np.ndarray, int]] = []
    by_bits: dict[int, list[int]] = {}
    for row, words in c.tags.items():
        bits = 0
        for w in words:
            bits |= _BIT.get(w, 0)
        by_bits.setdefault(bits, []).append(row)
    out += [(np.array(rows, dtype=np.int64), bits) for bits, rows in by_bits.items() if bits]
    ties = set(d.ties_lost) | set(d.ties_gained)
    kinds = (
        (d.ties_lost, "tie lost", False, ()),
        (d.ties_gained, "tie gained", True, ()),
        (d.sharing_lost, "sharing lost", False, ties),
        (d.sharing_gained, "sharing gained", True, ties),
    )
    for groups, word, side_b, skip in kinds:
        names = [n for g in groups if g not in skip for n in g]
        if names:
            rows = c.row_of_b[[pos_b[n] for n in names]] if side_b else np.array([pos_a[n] for n in names])
            out.append((rows, _BIT[word]))
    if d.moved:
        out.append((np.array([pos_a[m.name] for m in d.moved]), _BIT["moved to another file"]))
    return out


def _tag(marks: int, keep_rename: bool = False) -> str:
    """A row's marks in words with their glyphs (``≢ tie lost · Δ dtype``); the rename left out
    unless ``keep_rename`` (the tensor list leaves it out, :meth:`CompareRows.note` keeps it)."""
    return " · ".join(
        f"{glyph} {words}"
        for _, glyph, words, _ in MARKS
        if marks & _BIT[words] and (keep_rename or words != "renamed")
    )


def summary_line(d: LayoutDiff, counts: tuple[int, ...]) -> str:
    """One line: how many tensors on each side and matched, how many rows carry each mark, and
    the verdict (``same``/``differ``), e.g. ``723 tensors in a, 723 in b, 723 matched · dtype 9 · differ``."""
    na = len(d.layout_a) if d.layout_a is not None else 0
    nb = len(d.layout_b) if d.layout_b is not None else 0
    renamed = f" ({len(d.renamed):,} by rule)" if d.renamed else ""
    parts = [f"{na:,} tensors in a, {nb:,} in b, {d.matched:,} matched{renamed}"]
    marks = [f"{w} {n:,}" for (_, _, w, _), n in zip(MARKS, counts) if n and w != "renamed"]
    parts.append(", ".join(marks) if marks else "no field, tie or sharing changed")
    if d.not_compared:
        parts.append(f"{len(d.not_compared):,} not compared")
    parts.append("same" if d.same else "differ")
    return " · ".join(parts)


def rename_rule(a: str, b: str) -> str:
    """How ``a`` and ``b`` were matched, in words: the wrapper prefix each has before the part
    they share (cut at a dot).

    >>> rename_rule("module.model.w", "model.w"), rename_rule("w", "_orig_mod.w")
    ("prefix 'module.' removed from a", "prefix '_orig_mod.' removed from b")
    """
    k = 0
    while k < min(len(a), len(b)) and a[-1 - k] == b[-1 - k]:
        k += 1
    while k and not all(k == len(x) or x[-k - 1] == "." for x in (a, b)):
        k -= 1
    parts = [f"{p!r} removed from {side}" for p, side in ((a[: len(a) - k], "a"), (b[: len(b) - k], "b")) if p]
    return f"prefix {' and '.join(parts)}" if parts else ""


_TIES: tuple[tuple[GroupBy, str], ...] = (("span", "tied with"), ("overlap", "shares bytes with"))


def _dims(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


_FIELDS = (
    ("name", lambda f: f.name),
    ("shape", lambda f: _dims(f.shape)),
    ("dtype", lambda f: f.dtype),
    ("stride", lambda f: _dims(f.stride)),
    ("offset", lambda f: f"{f.offset:,}"),
    ("bytes", lambda f: f"{byte_text(f.nbytes)} ({f.nbytes:,} B)"),
    ("storage", lambda f: f.storage),
    ("tie", lambda f: f.tie or "—"),
)


def _pair_block(row: CompareRow | None, key: str) -> str:
    esc = lambda t: html.escape(terminal(t))  # noqa: E731 - names are data: escaped for the terminal and the page
    if row is None:
        return f"<div><b>{esc(key)}</b>: not in the comparison</div>"
    words = ", ".join(row.words) or "nothing changed"
    rule = f" ({esc(row.rule)})" if row.rule else ""
    body = "".join(
        f"<tr><th>{label}</th><td>{esc(get(row.a)) if row.a else '—'}</td>"
        f"<td>{'≠' if row.a and row.b and get(row.a) != get(row.b) and label != 'name' else ''}</td>"
        f"<td>{esc(get(row.b)) if row.b else '—'}</td></tr>"
        for label, get in _FIELDS
    )
    return (
        f"<div><b>{esc(elide(row.key, 160))}</b>: {esc(words)}{rule}</div>"
        f"<table><tr><th></th><th>a</th><th></th><th>b</th></tr>{body}</table>"
    )
