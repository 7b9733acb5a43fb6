"""Names are data: safe ways to show a name that came from a file.

A tensor name is whatever bytes a file (or a dict) holds: ``$\\frac{a}{b}$``, an ESC sequence,
a newline that forges a line of output, a right-to-left override, a lone surrogate. This module
shows such names without letting them act: visibly escaped for terminals and one-line texts,
with surrogates replaced for encoders that refuse them, elided when very long, and matched by
the name filter in time bounded by a cap on the text searched. Pure Python, no imports beyond
the standard library.
"""

from __future__ import annotations

import re

__all__ = [
    "terminal",
    "shown",
    "shown_lines",
    "LINE_CAP",
    "fit",
    "fit_lines",
    "drawable",
    "unicode_safe",
    "elide",
    "elide_name",
    "elide_names",
    "FILTER_CAP",
    "filter_text",
    "search",
]

# C0 and C1 controls, DEL; bidi embeddings/overrides/isolates and marks; zero-width characters,
# word joiner, BOM; line and paragraph separators; lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATES = re.compile("[\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    ch = m.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def terminal(text: str) -> str:
    """``text`` with every control, bidi, zero-width and surrogate character shown as an escape.

    The result holds no character that moves the cursor, changes colours, reorders text or
    hides: a name can neither forge a line of output nor restyle a terminal.

    >>> terminal("w\\x1b[31m\\nStorage #9")
    'w\\\\x1b[31m\\\\nStorage #9'
    """
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


#: Longest line of text output (a name, a skip reason) kept whole unless the user asks for all
#: (``to_text(full=True)``, ``--full``): a 50 MB name must not become 50 MB of text or HTML.
LINE_CAP = 400


def shown(text: str, full: bool = False, limit: int = LINE_CAP) -> str:
    """The one function every text output goes through: ``text`` escaped for a terminal
    (:func:`terminal`) and, unless ``full``, elided to ``limit`` characters (start … end), with
    work bounded by ``limit`` whatever the text's length.

    >>> print(shown("w\\x1b[2J" + "x" * 1000 + "end", limit=20))
    w\\x1b[2Jx…xxxxxxxend
    """
    if full:
        return terminal(text)
    return elide(terminal(elide(text, 4 * limit)), limit)


def shown_lines(text: str, full: bool = False, limit: int = 4 * LINE_CAP) -> str:
    """Like :func:`shown`, line by line: the newlines stay, every line is escaped and (unless
    ``full``) elided to ``limit``; for messages and code that span lines.

    >>> print(shown_lines("a\\x1b\\n" + "b" * 50, limit=9))
    a\\x1b
    bbbb…bbbb
    """
    return "\n".join(shown(line, full, limit) for line in text.split("\n"))


def drawable(text: str) -> str:
    """Like :func:`terminal`, but newlines stay (a drawn text may have several lines): for
    pictures, where a control character has no glyph and a bidi override would reorder."""
    if not _UNSAFE.search(text):
        return text
    return "\n".join(terminal(line) for line in text.split("\n"))


def unicode_safe(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so UTF-8 encoders accept it."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def elide(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, keeping its start and end around a "…"."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


#: Where a tensor name may be cut: after a "." (``layers.0.q``) or a "/" (ONNX, GGUF paths).
_BOUNDARY = re.compile(r"(?<=[./])")


def elide_name(name: str, limit: int) -> str:
    """``name`` in at most ``limit`` characters, cut only at a name boundary (after a "." or
    "/"): the cut components become one "…" component, the last component always stays whole,
    and as many components before it as fit (then the first one, if it still fits); with no
    room for "…." the last component follows the "…" directly. Only a last component longer
    than ``limit`` is itself cut (start … end, :func:`elide`), as is a name with no boundary.

    The one elision of names in pictures (lane labels, static and canvas) and text, so the
    same name is shortened the same way everywhere: never ``blocks.0.up.wei…al``.

    >>> elide_name("transformer.h.11.attn.c_attn.weight", 24)
    '….11.attn.c_attn.weight'
    >>> elide_name("model.layers.11.self_attn.q_proj.weight", 24)
    'model.….q_proj.weight'
    >>> elide_name("blocks.0.up.weight_orig_normal", 20), elide_name("blocks.0.up.weight_orig_normal", 19)
    ('….weight_orig_normal', '…weight_orig_normal')
    >>> elide_name("blocks.0.up.weight_orig_normal", 12), elide_name("a_long_flat_name", 9)
    ('weigh…normal', 'a_lo…name')
    """
    if len(name) <= limit:
        return name
    parts = _BOUNDARY.split(name)  # each part keeps its trailing separator: "a." "b." "c"
    if len(parts) < 2:
        return elide(name, limit)
    if len(parts[-1]) + 2 > limit:  # no room for "…." before the last component
        return "…" + parts[-1] if len(parts[-1]) < limit else elide(parts[-1], min(limit, len(parts[-1]) - 1))
    j = len(parts) - 1  # parts[j:] is kept: grow it while "…" + sep + tail fits
    while j > 1 and 2 + len("".join(parts[j - 1 :])) <= limit:
        j -= 1
    tail, sep = "".join(parts[j:]), parts[j - 1][-1]  # the separator just before the tail
    head = parts[0] + "…" + sep
    return head + tail if j > 1 and len(head) + len(tail) <= limit else "…" + sep + tail


def fit(line: str, width: int, drop: tuple[str, ...] = ()) -> str:
    """``line`` in at most ``width`` characters: first without the parts that match ``drop``
    (regular expressions, in order: details the full line keeps), then with its longest word
    (a name, usually) shortened by whole dotted components where it has them
    (:func:`elide_name`; inside the word where that would leave less than half of the room),
    then with its end cut at "…". The caller says where the whole line is
    (the CLI's ``--full``).

    >>> fit("  - model.layers.0.self_attn.q_proj.weight  float32[4096×4096] offset=0", 63, (r" offset=\\d+",))
    '  - model.layers.0.self_attn.q_proj.weight  float32[4096×4096]'
    >>> fit("  - model.layers.0.self_attn.q_proj.weight  float32[4096×4096]", 56)
    '  - ….0.self_attn.q_proj.weight  float32[4096×4096]'
    """
    for pattern in drop:
        if len(line) <= width:
            return line
        line = re.sub(pattern, "", line)
    if len(line) <= width:
        return line
    words = list(re.finditer(r"\S+", line))
    if words:
        word = max(words, key=lambda m: len(m.group()))
        keep = max(len(word.group()) - (len(line) - width), min(len(word.group()), 16))
        short = elide_name(word.group(), keep)
        if 2 * len(short) < keep:  # whole components cost most of it (a shard's number): cut inside
            short = elide(word.group(), keep)
        line = line[: word.start()] + short + line[word.end() :]
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def fit_lines(lines: list[str], width: int, drop: tuple[str, ...] = ()) -> list[str]:
    """Each line in at most ``width`` characters, as :func:`fit` makes them; a detail of
    ``drop`` left out of one line is left out of every line, so the lines stay alike.

    >>> fit_lines(["a offset=0", "bbbbbbbbbb offset=4"], 12, (r" offset=\\d+",))
    ['a', 'bbbbbbbbbb']
    """
    for pattern in drop:
        if all(len(line) <= width for line in lines):
            break
        lines = [re.sub(pattern, "", line) for line in lines]
    return [fit(line, width) for line in lines]


def elide_names(names: list[str], limit: int) -> list[str]:
    """:func:`elide_name` of each name, except that names that would look the same keep, after a
    first "…", the components where they differ (a layer's number), with the one before it:
    ``….block.0.….q.weight`` and ``….block.1.….q.weight``, not twice ``….layer.0.q.weight``.

    >>> elide_names(["enc.block.0.layer.0.attn.q.weight", "enc.block.1.layer.0.attn.q.weight"], 24)
    ['….block.0.….q.weight', '….block.1.….q.weight']
    """
    out = [elide_name(n, limit) for n in names]
    groups: dict[str, list[int]] = {}
    for k, text in enumerate(out):
        if text != names[k]:
            groups.setdefault(text, []).append(k)
    for members in groups.values():
        parts = [_BOUNDARY.split(names[k]) for k in members]
        if len(members) < 2 or len({names[k] for k in members}) < 2:
            continue
        d = next((i for i in range(min(map(len, parts))) if len({p[i] for p in parts}) > 1), None)
        if d is None:
            continue
        for k, p in zip(members, parts, strict=True):
            out[k] = _keep_part(p, max(d - 1, 0), d + 1, limit) or out[k]
    return out


def _keep_part(parts: list[str], a: int, b: int, limit: int) -> str | None:
    """``parts[a:b]`` between "…" components, then as many last components as fit (at least
    the last one, whole); None if even that does not fit."""
    middle = ("…" + parts[a - 1][-1] if a else "") + "".join(parts[a:b])
    for j in range(b + 1, len(parts)):
        tail = "".join(parts[j:])
        text = middle + "…" + parts[j - 1][-1] + tail
        if len(text) <= limit:
            return text
    return None


#: Longest part of a name the name filter searches: a regular expression such as
#: ``.*attn.*weight`` backtracks in time growing with the square (or worse) of the text length,
#: so a hostile 20,000-character name could hang a search; names up to this long are matched
#: exactly, longer ones on their elided form (start … end).
FILTER_CAP = 512


def filter_text(name: str) -> str:
    """The text of ``name`` that the name filter searches (the name itself unless it is long)."""
    return name if len(name) <= FILTER_CAP else elide(name, FILTER_CAP)


def search(rx: re.Pattern, name: str) -> bool:
    """``rx.search`` on :func:`filter_text` of ``name``: regex semantics, bounded work."""
    return rx.search(filter_text(name)) is not None
