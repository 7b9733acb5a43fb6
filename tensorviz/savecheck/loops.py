"""A fix plan's repeated statements written as loops: one ``for`` per statement that repeats
over numbered layers, so the plan for 80 tied layers reads as a few lines, not 80 of each.

A fix plan's statements are independent (each edits one name and reads only names the file
holds), so statements alike may be gathered from anywhere in the plan into one loop. A
statement folds when its numbered name part (``layers.12.attn``: a number between two dots) is
one number throughout the statement, comment included, and every string in its code is a plain
dotted name; any other statement is written as it is. Pure Python (``re``).

>>> print("\\n".join(fold_statements([f"del fixed['h.{i}.q']  # a view into h.{i}.qkv" for i in range(4)])))
for i in range(4):
    del fixed[f'h.{i}.q']  # a view into h.{i}.qkv
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["fold_statements", "loop_values", "instance"]

#: A numbered part of a dotted name, between two dots (``.12.``): ASCII digits only (``int("٣")``
#: is 3, and ``f"{i}"`` would write ``3``).
_NUMBERED = re.compile(r"(?<=\.)([0-9]+)(?=\.)")
#: A statement whose strings are all plain dotted names, then its comment (if any).
_FOLDABLE = re.compile(r"^(?:[^'\"#{}\\]|'[\w.]*')*(?:  # [^{}\\]*)?$")
#: A string literal that holds the loop variable (made an f-string), and that f-string.
_TEMPLATE_NAME = re.compile(r"'[\w.]*\{i\}[\w.{}]*'")
_F_NAME = re.compile(r"\bf('[\w.]*\{i\}[\w.{}]*')")
_RANGE = r"range\((\d+)(?:, (\d+))?(?:, (\d+))?\)"
_INTS = r"([\d, ]*)"
#: The loop heads :func:`fold_statements` writes (a wrapped literal joined back onto one line).
_HEADS = (
    (re.compile(rf"for i in {_RANGE}:"), lambda g: list(range(*_args(g[0:3])))),
    (re.compile(rf"for i in \({_INTS}\):"), lambda g: _ints(g[0])),
    (
        re.compile(rf"for i in sorted\(set\({_RANGE}\) - set\({_RANGE}\)\):"),
        lambda g: sorted(set(range(*_args(g[0:3]))) - set(range(*_args(g[3:6])))),
    ),
    (
        re.compile(rf"for i in sorted\(set\({_RANGE}\) - \{{{_INTS}\}}\):"),
        lambda g: sorted(set(range(*_args(g[0:3]))) - set(_ints(g[3]))),
    ),
)
_WIDTH = 100


def fold_statements(lines: list[str], least: int = 3) -> list[str]:
    """``lines`` (independent statements) with each statement repeated over ``least`` or more
    layer numbers written once, in a loop over those numbers, where its first instance was;
    statements over the same numbers share one loop.

    >>> print("\\n".join(fold_statements([f"del d['h.{i}.{p}']" for i in range(3) for p in "qk"])))
    for i in range(3):
        del d[f'h.{i}.q']
        del d[f'h.{i}.k']
    """
    templates: list[tuple[str, str] | None] = [_template(line) for line in lines]
    numbers: dict[str, list[str]] = {}
    for t in templates:
        if t is not None:
            numbers.setdefault(t[0], []).append(t[1])
    loops: dict[tuple[int, ...], int] = {}  # the numbers -> their loop
    statements: list[list[str]] = []  # per loop, the statements looped over its numbers
    looped: dict[str, int] = {}  # statement -> its loop
    for template, given in numbers.items():
        values = tuple(sorted(set(map(int, given))))
        if len(values) >= max(least, 2) and not _padded(given):
            k = loops.setdefault(values, len(loops))
            if k == len(statements):
                statements.append([])
            statements[k].append(template)
            looped[template] = k
    heads = {k: list(values) for values, k in loops.items()}
    out: list[str] = []
    for line, t in zip(lines, templates):
        if t is None or (k := looped.get(t[0], -1)) < 0:
            out.append(line)
        elif k in heads:  # the loop's first statement: the whole loop goes here
            out += _loop(statements[k], heads.pop(k))
    return out


def _template(line: str) -> tuple[str, str] | None:
    """``(line with its layer number as {i}, the number)``, or None when it does not fold."""
    parts = _NUMBERED.split(line)
    if len(parts) < 3 or len(set(parts[1::2])) != 1 or not _FOLDABLE.match(line):
        return None
    return "{i}".join(parts[::2]), parts[1]


def _padded(numbers: list[str]) -> bool:
    """Whether a number is written with a leading zero (``007``: ``f"{i}"`` would not give it)."""
    return any(len(n) > 1 and n[0] == "0" for n in numbers)


def _loop(templates: list[str], values: list[int]) -> list[str]:
    """``for i in ...:`` and each statement, its names made f-strings over ``i``."""
    body = []
    for template in templates:
        code, sep, comment = template.partition("  # ")
        body.append("    " + _TEMPLATE_NAME.sub(lambda m: "f" + m.group(0), code) + sep + comment)
    return [*_head(values), *body]


def _head(values: list[int]) -> list[str]:
    """``for i in ...:`` over the sorted, distinct ``values``: a range, a range less a few, or a
    tuple; long literals wrapped."""
    lo, hi = values[0], values[-1] + 1
    step = values[1] - values[0] if len(values) > 1 else 1
    if values == list(range(lo, hi, step)):
        return [f"for i in {_range(lo, hi, step)}:"]
    missing = sorted(set(range(lo, hi)) - set(values))
    gap = missing[1] - missing[0] if len(missing) > 2 else 0
    if gap > 1 and missing == list(range(missing[0], missing[-1] + 1, gap)):  # every gap-th one left out
        return [f"for i in sorted(set({_range(lo, hi, 1)}) - set({_range(missing[0], missing[-1] + 1, gap)})):"]
    if len(missing) <= len(values) // 2:
        return _wrapped(f"for i in sorted(set({_range(lo, hi, 1)}) - {{", missing, "}):")
    return _wrapped("for i in (", values, "):")


def _range(lo: int, hi: int, step: int) -> str:
    args = [str(lo)] if lo or step != 1 else []
    return f"range({', '.join([*args, str(hi), *([str(step)] if step != 1 else [])])})"


def _wrapped(opening: str, values: list[int], closing: str) -> list[str]:
    """``opening v, v, ... closing`` in lines of at most :data:`_WIDTH` columns."""
    text = ", ".join(map(str, values))
    lines = textwrap.wrap(text, _WIDTH - len(opening), break_long_words=False, break_on_hyphens=False)
    pad = " " * len(opening)
    return [(opening if k == 0 else pad) + part for k, part in enumerate(lines[:-1])] + [
        (opening if len(lines) == 1 else pad) + lines[-1] + closing
    ]


# -- reading a loop back (what fix_title reads) ----------------------------------------------------
def loop_values(head: str) -> list[int] | None:
    """The numbers a loop head :func:`fold_statements` wrote runs over (its wrapped lines joined
    with spaces), or None for any other line. Parsed, not evaluated.

    >>> loop_values("for i in sorted(set(range(1, 12)) - {5, 10}):")
    [1, 2, 3, 4, 6, 7, 8, 9, 11]
    """
    for pattern, values in _HEADS:
        m = pattern.fullmatch(head)
        if m:
            return values(m.groups())
    return None


def instance(body: str, i: int) -> str:
    """A loop's statement (indent removed) as it runs for ``i``: what it was before folding.

    >>> instance("    del fixed[f'h.{i}.q']  # a view into h.{i}.qkv", 7)
    "del fixed['h.7.q']  # a view into h.7.qkv"
    """
    return _F_NAME.sub(r"\1", body.removeprefix("    ")).replace("{i}", str(i))


def _args(groups: tuple[str | None, ...]) -> list[int]:
    return [int(g) for g in groups if g is not None]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]
