"""Text, HTML and JSON of a :class:`~tensorviz.core.diff.LayoutDiff`.

The text fits a screen and an 80-column terminal: repeated layers fold into one line
(``model.layers.{0…31}.mlp.up_proj.weight  dtype float32 → bfloat16  (32×)``) as the module
tree folds alike layers, each list shows its first lines and counts the rest, and long names
are elided in the middle. Every name is escaped (:func:`tensorviz.core.names.terminal`); the
HTML escapes it again for the page and uses no JavaScript (collapsible sections are
``<details>``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from itertools import accumulate, repeat
from operator import and_, getitem, itemgetter, methodcaller, not_, or_, sub
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorviz.core.diff_modules import DiffLike
from tensorviz.core.names import elide, elide_name, terminal
from tensorviz.core.table import first_seen, objects, take
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout

__all__ = ["diff_text", "diff_html", "diff_json", "fold", "sections", "verdict"]

JSON_SCHEMA = "tensorviz.diff"
JSON_VERSION = 1
#: Lines the listed sections share (each gets at most ``limit``, at least 2), so print(d) fits a screen.
_BODY_LINES = 48
#: A numbered part of a dotted name (a whole part of digits); ``split`` keeps it, between the text around it.
_NUMBER = re.compile(r"((?:(?<=\.)|^)[0-9]+(?=\.|$))")


def fold(items: Iterable[tuple[str, str]], least: int = 3) -> list[tuple[str, str, int]]:
    """``(name, tail)`` items with names that differ only in their numbered parts and share a
    tail folded into one ``(pattern, tail, count)`` (``least`` or more of them), first-seen order.

    Built for a million names in C-level passes. Names are first grouped by their *shape* (each
    ASCII digit written ``0``: ``str.translate``): one name of a shape is split around its
    numbered parts, and when every digit of it is in a numbered part, every name of that shape
    splits alike, so their numbers are cut at the same places (``itemgetter(slice)``). Names of
    a shape with other digits (``x1.w``), and names alone in their shape, are split one by one
    (``re.split``). Runs -- the same text around the numbers and the same tail -- are then
    joined across shapes (``layers.9`` and ``layers.10``) in order of first appearance.

    >>> fold([(f"layers.{i}.w", "dtype") for i in range(12)] + [("head", "x")])
    [('layers.{0…11}.w', 'dtype', 12), ('head', 'x', 1)]
    """
    items = list(items)
    names, tails = list(map(_FIRST, items)), list(map(_SECOND, items))
    shapes, order, bounds = _grouped(list(zip(map(_SHAPE, names), tails)))
    sizes = np.diff(bounds)
    runs: dict[tuple[tuple[str, ...], str], list[tuple[list[int], list[list[str]]]]] = {}
    alone = np.sort(order[bounds[:-1][sizes == 1]])  # names alone in their shape: split one by one
    splits = list(map(_NUMBER.split, take(names, alone)))
    keys = zip(map(tuple, map(_TEXTS, splits)), take(tails, alone))
    for key, row, parts in zip(keys, alone.tolist(), splits):
        runs.setdefault(key, []).append(([row], [[v] for v in parts[1::2]]))
    if len(runs) == len(items):  # nothing to fold
        return list(zip(names, tails, repeat(1)))
    for g in np.flatnonzero(sizes > 1).tolist():
        rows = order[bounds[g] : bounds[g + 1]].tolist()
        _shape_runs(take(names, rows), rows, tails[rows[0]], runs)
    out: list[tuple[str, str, int]] = []
    for (texts, tail), pieces in sorted(runs.items(), key=lambda kv: min(p[0][0] for p in kv[1])):
        rows = [r for p in pieces for r in p[0]]
        if len(rows) < least:
            out.extend((names[i], tail, 1) for i in sorted(rows))
            continue
        columns = [[v for p in pieces for v in p[1][k]] for k in range(len(texts) - 1)]
        shown = [col[0] if col.count(col[0]) == len(col) else _range(col) for col in columns]
        out.append(("".join(t + v for t, v in zip(texts, shown)) + texts[-1], tail, len(rows)))
    return out


def _shape_runs(members: list[str], rows: list[int], tail: str, runs: dict) -> None:
    """Add the names of one shape (``rows``: where they are) to ``runs``. Their digits are in
    the same places, so their numbered parts are too (a run of digits is numbered by the
    characters around it, the same in every name of the shape): each name is cut at the first
    one's places. Names whose other digits differ (``fc1``, ``fc2``) are runs of their own."""
    parts = _NUMBER.split(members[0])
    ends = [0, *accumulate(map(len, parts))]
    cuts = [slice(ends[k], ends[k + 1]) for k in range(len(parts))]
    numbers = [list(map(itemgetter(cut), members)) for cut in cuts[1::2]]
    if not _DIGIT.search("".join(parts[::2])):  # every digit numbered: one text for all
        runs.setdefault((tuple(parts[::2]), tail), []).append((rows, numbers))
        return
    texts = itemgetter(*cuts[::2]) if len(cuts) > 1 else (lambda name: (name,))
    keys, order, bounds = _grouped(list(map(texts, members)))
    row_of, number_of = np.asarray(rows, dtype=np.int64), [objects(column) for column in numbers]
    for key, a, b in zip(keys, bounds[:-1].tolist(), bounds[1:].tolist()):
        mine = order[a:b]
        runs.setdefault((key, tail), []).append((row_of[mine].tolist(), [c[mine].tolist() for c in number_of]))


def _grouped(keys: list) -> tuple[list, np.ndarray, np.ndarray]:
    """The distinct ``keys`` in order of first appearance, the positions of ``keys`` ordered by
    group (each group's in order), and each group's bounds in that order: one dict pass and a
    stable sort.

    >>> distinct, order, bounds = _grouped(["b", "a", "b"])
    >>> distinct, order.tolist(), bounds.tolist()
    (['b', 'a'], [0, 2, 1], [0, 2, 3])
    """
    rank, _, distinct = first_seen(keys, len(keys))
    bounds = np.concatenate(([0], np.cumsum(np.bincount(rank, minlength=len(distinct)))))
    return distinct, np.argsort(rank, kind="stable"), bounds


_FIRST, _SECOND, _TEXTS = itemgetter(0), itemgetter(1), itemgetter(slice(None, None, 2))
#: A name's shape: each ASCII digit written 0 (names of one shape have their digits in the same places).
_SHAPE = methodcaller("translate", str.maketrans("123456789", "000000000"))
_DIGIT = re.compile(r"[0-9]")
_DOT_END = methodcaller("endswith", ".")


def _renamed_as(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Per renamed pair ``(a, b)``: ``(a, "→ " + b)``, b's end that it shares with a (at a dot)
    written ``…`` (``module.…``). C-level passes: a wrapper rule renames every name.

    >>> _renamed_as([("layers.0.w", "module.layers.0.w"), ("w", "wrapped.v"), ("a.w", "xa.w")])
    [('layers.0.w', '→ module.…'), ('w', '→ wrapped.v'), ('a.w', '→ xa.w')]
    """
    names_a, names_b = list(map(_FIRST, pairs)), list(map(_SECOND, pairs))
    heads = list(map(getitem, names_b, map(slice, map(sub, map(len, names_b), map(len, names_a)))))
    cut = map(and_, map(str.endswith, names_b, names_a), map(or_, map(not_, heads), map(_DOT_END, heads)))
    return [(a, f"→ {h}…" if c else f"→ {b}") for a, b, h, c in zip(names_a, names_b, heads, cut)]


def _range(column: Iterable[str]) -> str:
    values = sorted(set(column), key=int)
    nums = [int(v) for v in values]
    if nums == list(range(nums[0], nums[0] + len(nums))):
        return f"{{{nums[0]}…{nums[-1]}}}"
    shown = ",".join(values[:4])
    return f"{{{shown}{',…' if len(values) > 4 else ''}}}"


#: A group of more names is written by its first few and a count (its JSON lists every name).
_GROUP_SHOWN = 4


def _group_text(group: frozenset[str], order: dict[str, int]) -> str:
    """The group's names in source order, joined by " = "; a big group's first few and a count.

    >>> _group_text(frozenset(f"h.{i}" for i in range(6)), {f"h.{i}": i for i in range(6)})
    'h.0 = h.1 = h.2 = … (6 names)'
    """
    try:
        names = sorted(group, key=order.__getitem__)
    except KeyError:  # a name the layout does not hold (none here): it goes last
        names = sorted(group, key=lambda n: order.get(n, len(order)))
    if len(names) > _GROUP_SHOWN:
        return " = ".join(names[: _GROUP_SHOWN - 1]) + f" = … ({len(names)} names)"
    return " = ".join(names)


def sections(d: DiffLike) -> list[tuple[str, list[tuple[str, str, int]]]]:
    """The listed sections of the summary: ``(title, folded lines)``, non-empty ones only."""
    oa, ob = _positions(d.layout_a), _positions(d.layout_b)
    ties = {g for g in d.ties_lost} | {g for g in d.ties_gained}
    out = [
        ("only in a", _only(d.only_a, d.layout_a)),
        ("only in b", _only(d.only_b, d.layout_b)),
        ("renamed (a → b)", _renamed_as(d.renamed)),
        ("changed", _changed_items(d)),
        ("ties lost (tied in a, not in b)", [(_group_text(g, oa), "") for g in d.ties_lost]),
        ("ties gained (tied in b, not in a)", [(_group_text(g, ob), "") for g in d.ties_gained]),
        (
            "sharing lost (overlapping bytes in a, not in b)",
            [(_group_text(g, oa), "") for g in d.sharing_lost if g not in ties],
        ),
        ("sharing gained", [(_group_text(g, ob), "") for g in d.sharing_gained if g not in ties]),
        ("moved to another file (tensors per move)", _moves(d)),
    ]
    if d.content is not None:
        c = d.content
        out.append(("content differs", [(n, "") for n in c.different]))
        out.append(
            (
                "redundant copies",
                [
                    (f"{x.name} duplicates {x.of}", f"{x.side}, {format_bytes(x.nbytes)}; a tie would save it")
                    for x in c.duplicates
                ],
            )
        )
        out.append(("not read", [(name, f"{side}: {why}") for side, name, why in c.unread]))
    out.append(("not compared (could not be analysed)", [(n, f"{side}: {why}") for side, n, why in d.not_compared]))
    return [(title, fold(items)) for title, items in out if items]


def _positions(layout: Any) -> dict[str, int]:
    """Name -> place in ``layout`` (one C-level pass), or nothing without a layout."""
    return {} if layout is None else dict(zip(layout.names, range(len(layout))))


def _only(names: tuple[str, ...], layout: Layout | None) -> list[tuple[str, str]]:
    """Names on one side, a buffer that ``state_dict()`` leaves out said so (a checkpoint never
    holds it: no cause for alarm)."""
    unsaved = set(layout.facts.modules.get("not_saved", ())) if layout is not None else set()
    return [(n, "buffer, not in state_dict()" if n in unsaved else "") for n in names]


def _moves(d: DiffLike) -> list[tuple[str, str]]:
    """One item per (file in a, file in b): how many tensors moved that way, most first."""
    counts: dict[tuple[str, str], int] = {}
    for m in d.moved:
        counts[(m.file_a, m.file_b)] = counts.get((m.file_a, m.file_b), 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return [(f"{fa} → {fb}", f"{n} tensor{'s' * (n != 1)}") for (fa, fb), n in ranked]


def _changed_items(d: DiffLike) -> list[tuple[str, str]]:
    """One item per changed name: its fields' changes joined (``dtype float32 → bfloat16, ...``)."""
    per: dict[str, list[str]] = {}
    for c in d.changed:
        text = f"{c.field} {_value(c.a)} → {_value(c.b)}"
        if c.field == "conjugate":  # z.conj() on one side, its values plain on the other
            text = "a conjugate view in a, plain in b" if c.a else "plain in a, a conjugate view in b"
        per.setdefault(c.name, []).append(text)
    return [(name, ", ".join(texts)) for name, texts in per.items()]


def _value(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


def _line(name: str, tail: str, count: int, width: int) -> str:
    """``  name  tail  (count×)`` in ``width`` columns. When both do not fit, the tail goes on a
    line of its own, indented, and a group of names (``a = b = c``) puts each name on a line of
    its own; a name still too long is cut at its dots (:func:`~tensorviz.core.names.elide_name`,
    as every picture cuts it), a tail in the middle.

    >>> print(_line("layers.{0…31}.qkv.weight = layers.{0…31}.q.weight", "", 32, 40))
      layers.{0…31}.qkv.weight =
        layers.{0…31}.q.weight  (32×)
    >>> print(_line("model.layers.{0…31}.self_attn.q_proj.weight", "dtype float32 → bfloat16", 32, 40))
      model.….self_attn.q_proj.weight  (32×)
          dtype float32 → bfloat16
    """
    name, tail = terminal(name), terminal(tail)
    times = f"  ({count}×)" if count > 1 else ""
    if len(name) + len(times) + len(tail) + 4 <= width:
        return f"  {name}{times}  {tail}".rstrip()
    members = name.split(" = ")
    lines = []
    for k, member in enumerate(members):
        indent, end = ("  " if k == 0 else "    "), (" =" if k < len(members) - 1 else times)
        lines.append(indent + elide_name(member, max(1, width - len(indent) - len(end))) + end)
    if tail:
        lines.append(f"      {elide(tail, width - 6)}")
    return "\n".join(lines)


def diff_text(d: DiffLike, width: int = 80, limit: int = 8) -> str:
    """The summary: sources, counts, the rules used, each non-empty section (``limit`` lines
    each), dtype totals, where the bytes went, and the verdict."""
    lines = [
        _fit(f"a: {terminal(d.source_a)}", width),
        _fit(f"b: {terminal(d.source_b)}", width),
        _counts(d),
    ]
    lines += [_fit(f"names matched by rule: {r}", width) for r in d.rules]
    listed = sections(d)
    each = max(2, min(limit, _BODY_LINES // max(len(listed), 1) - 2))  # one screen for all of them
    for title, items in listed:
        lines += _section_lines(title, items, width, each)
    lines += _dtype_lines(d, width)
    lines += _module_lines(d, width, limit)
    if d.content is not None:
        c = d.content
        lines.append(
            f"content: {len(c.identical)} identical, {len(c.different)} differ ({format_bytes(c.hashed_nbytes)} hashed)"
        )
    lines.append(verdict(d))
    return "\n".join(lines)


def verdict(d: DiffLike) -> str:
    """``same`` or ``differ``; with values not compared, ``same`` says it is of the rest.

    >>> import torch, tensorviz as tv
    >>> verdict(tv.diff({"w": torch.zeros(2).to_sparse()}, {}))
    'same, of the tensors compared (1 value not compared)'
    """
    if not d.same:
        return "differ"
    n = len(d.not_compared)
    return f"same, of the tensors compared ({n} value{'s' * (n != 1)} not compared)" if n else "same"


def _section_lines(title: str, items: list[tuple[str, str, int]], width: int, limit: int) -> list[str]:
    """A section's title and at most ``limit`` lines of items (an item may take two lines),
    then how many names were left out."""
    out = [f"{title} ({sum(n for _, _, n in items)}):"]
    shown = 0
    for k, (name, tail, n) in enumerate(items):
        text = _line(name, tail, n, width).split("\n")
        if shown + len(text) > limit:
            out.append(f"  … {sum(c for _, _, c in items[k:])} more")
            break
        out += text
        shown += len(text)
    return out


def _fit(text: str, width: int) -> str:
    return elide(text, width)


def _counts(d: DiffLike) -> str:
    na = len(d.layout_a) if d.layout_a is not None else 0
    nb = len(d.layout_b) if d.layout_b is not None else 0
    renamed = f" ({len(d.renamed)} by rule)" if d.renamed else ""
    return f"{na} tensors in a, {nb} in b, {d.matched} matched{renamed}"


def _dtype_lines(d: DiffLike, width: int) -> list[str]:
    if d.dtypes_a == d.dtypes_b:
        return []
    out = ["dtypes (tensors, bytes; a tie counted once):"]
    for side, totals in (("a", d.dtypes_a), ("b", d.dtypes_b)):
        text = ", ".join(f"{t.dtype} {t.ntensors} {format_bytes(t.nbytes)}" for t in totals) or "none"
        out.append(_fit(f"  {side}: {text}", width))
    return out


def _module_lines(d: DiffLike, width: int, limit: int) -> list[str]:
    if d.same or d.layout_a is None:
        return []
    mods = _not_repeated(d.modules(depth=3))
    if not mods:
        return []
    items = fold([(m.path, f"{format_bytes(m.a)} → {format_bytes(m.b)} ({_signed(m.delta)})") for m in mods])
    out = ["where the bytes went (per module, counted once):"]
    out += [_line(name, tail, n, width) for name, tail, n in items[:limit]]
    if len(items) > limit:
        out.append(f"  … {len(items) - limit} more")
    return out


def _not_repeated(mods: tuple) -> list:
    """Modules whose numbers differ from their parent's: a single child repeats its parent."""
    seen = {m.path: (m.a, m.b) for m in mods}
    return [m for m in mods if seen.get(m.path.rpartition(".")[0]) != (m.a, m.b)]


def _signed(n: int) -> str:
    return ("+" if n > 0 else "") + format_bytes(n)


# -- HTML ---------------------------------------------------------------------------------------
def diff_html(d: DiffLike, limit: int = 200) -> str:
    """Escaped static HTML (no JavaScript): the counts, then each section in a ``<details>``."""
    esc = lambda s: html.escape(terminal(str(s)))  # noqa: E731
    parts = [
        '<div class="tv-diff">',
        f"<p><b>{esc(verdict(d))}</b>: a = <code>{esc(d.source_a)}</code>, b = <code>{esc(d.source_b)}</code>; {esc(_counts(d))}</p>",
    ]
    parts += [f"<p>names matched by rule: {esc(r)}</p>" for r in d.rules]
    for title, items in sections(d):
        total = sum(n for _, _, n in items)
        rows = "".join(
            f"<tr><td><code>{esc(name)}</code></td><td>{esc(tail)}</td><td>{'' if n == 1 else f'{n}×'}</td></tr>"
            for name, tail, n in items[:limit]
        )
        more = f"<p>… {len(items) - limit} more</p>" if len(items) > limit else ""
        parts.append(f"<details open><summary>{esc(title)} ({total})</summary><table>{rows}</table>{more}</details>")
    if d.dtypes_a != d.dtypes_b:
        for side, totals in (("a", d.dtypes_a), ("b", d.dtypes_b)):
            text = ", ".join(f"{t.dtype} {t.ntensors} {format_bytes(t.nbytes)}" for t in totals) or "none"
            parts.append(f"<p>dtypes {side}: {esc(text)}</p>")
    parts.append("</div>")
    return "".join(parts)


# -- JSON ---------------------------------------------------------------------------------------
def diff_json(d: DiffLike) -> dict[str, Any]:
    """Plain JSON data of the diff (schema ``tensorviz.diff``, version 1)."""
    groups = lambda gs: [sorted(g) for g in gs]  # noqa: E731
    doc: dict[str, Any] = {
        "schema": JSON_SCHEMA,
        "version": JSON_VERSION,
        "same": d.same,
        "a": d.source_a,
        "b": d.source_b,
        "only_a": list(d.only_a),
        "only_b": list(d.only_b),
        "renamed": [list(p) for p in d.renamed],
        "rules": list(d.rules),
        "changed": [{"name": c.name, "field": c.field, "a": _plain(c.a), "b": _plain(c.b)} for c in d.changed],
        "ties_lost": groups(d.ties_lost),
        "ties_gained": groups(d.ties_gained),
        "sharing_lost": groups(d.sharing_lost),
        "sharing_gained": groups(d.sharing_gained),
        "dtypes_a": [asdict(t) for t in d.dtypes_a],
        "dtypes_b": [asdict(t) for t in d.dtypes_b],
        "moved": [asdict(m) for m in d.moved],
        "not_compared": [{"side": side, "name": n, "reason": why} for side, n, why in d.not_compared],
    }
    if d.content is not None:
        c = d.content
        doc["content"] = {
            "identical": list(c.identical),
            "different": list(c.different),
            "duplicates": [asdict(x) for x in c.duplicates],
            "unread": [list(u) for u in c.unread],
            "hashed_nbytes": c.hashed_nbytes,
        }
    return doc


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v
