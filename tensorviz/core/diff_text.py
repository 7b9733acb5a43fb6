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
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from tensorviz.core.diff_modules import DiffLike
from tensorviz.core.names import elide, terminal
from tensorviz.core.units import format_bytes

__all__ = ["diff_text", "diff_html", "diff_json", "fold", "sections", "verdict"]

JSON_SCHEMA = "tensorviz.diff"
JSON_VERSION = 1
#: Lines the listed sections share (each gets at most ``limit``, at least 2), so print(d) fits a screen.
_BODY_LINES = 48
_NUMBER = re.compile(r"(?<=\.)(\d+)(?=\.|$)|^(\d+)(?=\.|$)")


def fold(items: Iterable[tuple[str, str]], least: int = 3) -> list[tuple[str, str, int]]:
    """``(name, tail)`` items with names that differ only in their numbered parts and share a
    tail folded into one ``(pattern, tail, count)`` (``least`` or more of them), first-seen order.

    >>> fold([(f"layers.{i}.w", "dtype") for i in range(4)] + [("head", "x")])
    [('layers.{0…3}.w', 'dtype', 4), ('head', 'x', 1)]
    """
    runs: dict[tuple[str, str], list] = {}
    for name, tail in items:
        numbers = [m.group(0) for m in _NUMBER.finditer(name)]
        key = (_NUMBER.sub("#", name), tail) if numbers else (name, tail)
        runs.setdefault(key, []).append((name, numbers))
    out: list[tuple[str, str, int]] = []
    for (pattern, tail), members in runs.items():
        if len(members) < least:
            out.extend((name, tail, 1) for name, _ in members)
            continue
        first = members[0][1]
        parts = pattern.split("#")
        shown = [
            _range([m[1][k] for m in members]) if any(m[1][k] != first[k] for m in members) else first[k]
            for k in range(len(first))
        ]
        text = "".join(p + v for p, v in zip(parts, shown)) + parts[-1]
        out.append((text, tail, len(members)))
    return out


def _renamed_as(a: str, b: str) -> str:
    """``b`` with the end it shares with ``a`` (at a dot) written ``…``: ``module.…``."""
    k = 0
    while k < min(len(a), len(b)) and a[-1 - k] == b[-1 - k]:
        k += 1
    if k == len(a) and (len(b) == k or b[-k - 1] == "."):
        return b[: len(b) - k] + "…"
    return b


def _range(values: list[str]) -> str:
    values = sorted(set(values), key=int)
    nums = [int(v) for v in values]
    if nums == list(range(nums[0], nums[0] + len(nums))):
        return f"{{{nums[0]}…{nums[-1]}}}"
    shown = ",".join(values[:4])
    return f"{{{shown}{',…' if len(values) > 4 else ''}}}"


def _group_text(group: frozenset[str], order: dict[str, int]) -> str:
    return " = ".join(sorted(group, key=lambda n: order.get(n, len(order))))


def sections(d: DiffLike) -> list[tuple[str, list[tuple[str, str, int]]]]:
    """The listed sections of the summary: ``(title, folded lines)``, non-empty ones only."""
    oa = {n: i for i, n in enumerate(d.layout_a.names)} if d.layout_a is not None else {}
    ob = {n: i for i, n in enumerate(d.layout_b.names)} if d.layout_b is not None else {}
    ties = {g for g in d.ties_lost} | {g for g in d.ties_gained}
    out = [
        ("only in a", _only(d.only_a, d.layout_a)),
        ("only in b", _only(d.only_b, d.layout_b)),
        ("renamed (a → b)", [(a, f"→ {_renamed_as(a, b)}") for a, b in d.renamed]),
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


def _only(names: tuple[str, ...], layout: object) -> list[tuple[str, str]]:
    """Names on one side, a buffer that ``state_dict()`` leaves out said so (a checkpoint never
    holds it: no cause for alarm)."""
    mods = layout.metadata.get("modules") if layout is not None else None  # type: ignore[attr-defined]
    unsaved = set(mods.get("not_saved", ())) if isinstance(mods, dict) else set()
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
    """``  name  tail  (count×)`` in ``width`` columns; when both do not fit, the tail goes on a
    second line, indented, and each is elided in the middle to fit."""
    name, tail = terminal(name) + (f"  ({count}×)" if count > 1 else ""), terminal(tail)
    if len(name) + len(tail) + 4 <= width:
        return f"  {name}  {tail}".rstrip()
    return f"  {elide(name, width - 2)}\n      {elide(tail, width - 6)}"


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
