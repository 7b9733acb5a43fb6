"""How the canvas's columns are put on the wire (pure numpy): little-endian typed arrays,
``"\\n"``-joined UTF-8 text, and unsigned LEB128 varints for integer columns whose values are
mostly small (cell counts, view counts, element offsets, byte sizes up to 2**53).

``geometry.js`` reads each form back (``column``, ``lines``, ``varints``). The columns travel as
one buffer (:func:`frame`: their lengths, then their bytes; ``unframe`` in the browser). Text is sent as the
browser shows it: names are data, so controls, bidi overrides, zero-width characters and lone
surrogates arrive as visible escapes (:func:`tensorviz.core.names.terminal`, as the static HTML
table shows them) and a newline as ``\\n``, never as a line of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from tensorviz.core.errors import TooLargeError
from tensorviz.core.names import terminal

__all__ = ["le", "text", "browser_form", "varint", "affix_code", "frame", "unframe"]


def le(a: Iterable | np.ndarray, dtype: str) -> bytes:
    """``a`` as a little-endian typed array of ``dtype`` (e.g. ``"f8"``, ``"u4"``)."""
    return np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def text(items: Iterable[str]) -> bytes:
    """Lines joined with ``"\\n"`` as UTF-8, each as :func:`browser_form` (no newline inside)."""
    return "\n".join(map(terminal, items)).encode("utf-8")


def browser_form(item: str) -> str:
    """``item`` as the browser receives and shows it: controls, bidi, zero-width and lone
    surrogate characters as escapes (``"a\\u202eb"`` for a right-to-left override). What a
    click sends back is in this form.

    >>> print(browser_form("n\\nl\\u202e"))
    n\\nl\\u202e
    """
    return terminal(item)


def varint(values: Iterable[int] | np.ndarray) -> bytes:
    """Non-negative integers (< 2**53, exact in JavaScript) as unsigned LEB128: 7 bits a byte,
    the high bit set on every byte but a value's last.

    >>> varint([0, 1, 127, 128, 300]).hex()
    '00017f8001ac02'

    Raises:
        TooLargeError: a negative value or one of 2**53 or more (a ValueError: JavaScript numbers
            are exact only below 2**53, so the browser would show a wrong byte count).
    """
    a = np.asarray(values, dtype=np.int64).ravel()
    if a.size and (a.min() < 0 or a.max() >= 1 << 53):
        raise TooLargeError(
            f"the explorer sends integers in [0, 2**53) (exact in JavaScript), got {int(a.min()):,} .. "
            f"{int(a.max()):,}; a byte size or offset this large cannot be shown exactly in the browser "
            f"(tv.analyze(...) and its text output still hold the exact values)"
        )
    v = a.astype(np.uint64)
    width = np.ones(a.size, dtype=np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        width += rest > 0
        rest >>= np.uint64(7)
    out = np.empty(int(width.sum()), dtype=np.uint8)
    pos = np.cumsum(width) - width
    for k in range(int(width.max(initial=0))):
        live = width > k
        more = np.where(width[live] > k + 1, 0x80, 0).astype(np.uint64)
        out[pos[live] + k] = ((v[live] >> np.uint64(7 * k)) & np.uint64(0x7F)) | more
    return out.tobytes()


def affix_code(names: list[str]) -> tuple[list[int], list[int], list[str]]:
    """Each name as (characters shared with the start of the previous name, characters shared
    with its end, the middle): dotted module names share long prefixes (``model.layers.``) and
    suffixes (``_proj.weight``). Only ASCII is shared (the browser counts UTF-16 units), at most
    255 characters each way; the browser's ``frontDecode`` undoes it. The names are coded as
    the browser shows them (:func:`browser_form`).

    >>> affix_code(["model.layers.0.q_proj.weight", "model.layers.0.k_proj.weight", "é.a", "é.b"])
    ([0, 15, 0, 0], [0, 12, 0, 0], ['model.layers.0.q_proj.weight', 'k', 'é.a', 'é.b'])
    """
    prefix, suffix, rest, prev = [], [], [], ""
    for name in map(browser_form, names):
        p = _shared(prev, name, min(len(prev), len(name), 255), str.startswith, lambda t, k: t[:k])
        if not prev[:p].isascii():
            p = next(i for i, c in enumerate(prev[:p]) if ord(c) >= 128)
        s = _shared(prev, name, min(len(prev), len(name) - p, 255), str.endswith, lambda t, k: t[len(t) - k :])
        tail = prev[len(prev) - s :]
        if not tail.isascii():
            s = next(i for i, c in enumerate(reversed(tail)) if ord(c) >= 128)
        prefix.append(p)
        suffix.append(s)
        rest.append(name[p : len(name) - s])
        prev = name
    return prefix, suffix, rest


def _shared(prev: str, name: str, most: int, test: Callable[[str, str], bool], part: Callable[[str, int], str]) -> int:
    """The most characters (<= ``most``) ``name`` shares with ``prev``: ``test(name, part(prev,
    k))`` holds up to some k, then not; found by bisection on C-speed startswith/endswith."""
    lo, hi = 0, max(most, 0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if test(name, part(prev, mid)):
            lo = mid
        else:
            hi = mid - 1
    return lo


def frame(columns: dict[str, bytes], names: tuple[str, ...]) -> bytes:
    """The ``names`` columns as one buffer: each one's length as a varint, in ``names`` order, then
    their bytes one after the other (``geometry.js`` ``unframe`` splits it; one binary message
    part, one buffer path, instead of one per column).

    >>> frame({"a": b"xy", "b": b""}, ("a", "b")).hex()
    '02007879'
    """
    parts = [columns[n] for n in names]
    return varint([len(p) for p in parts]) + b"".join(parts)


def unframe(data: bytes, names: tuple[str, ...]) -> dict[str, bytes]:
    """The columns of a :func:`frame` by name (what the browser reads; for tests and tools).

    >>> unframe(bytes.fromhex("02007879"), ("a", "b"))
    {'a': b'xy', 'b': b''}
    """
    lengths: list[int] = []
    pos = 0
    while len(lengths) < len(names):
        n = shift = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        lengths.append(n)
    out = {}
    for name, n in zip(names, lengths):
        out[name] = bytes(data[pos : pos + n])
        pos += n
    return out
