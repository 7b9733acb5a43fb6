"""How the canvas's columns are put on the wire (pure numpy): little-endian typed arrays,
``"\\n"``-joined UTF-8 text, and unsigned LEB128 varints for integer columns whose values are
mostly small (cell counts, view counts, element offsets, byte sizes up to 2**53).

``geometry.js`` reads each form back (``column``, ``lines``, ``varints``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["le", "text", "varint", "front_code"]


def le(a: Iterable | np.ndarray, dtype: str) -> bytes:
    """``a`` as a little-endian typed array of ``dtype`` (e.g. ``"f8"``, ``"u4"``)."""
    return np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def text(items: Iterable[str]) -> bytes:
    """Lines joined with ``"\\n"`` as UTF-8 (a newline inside an item becomes U+2424)."""
    # surrogatepass: a lone surrogate in a name (a pickle can hold one) reaches the browser as
    # bytes its TextDecoder shows as U+FFFD, instead of failing here
    return "\n".join(s.replace("\n", "\u2424") for s in items).encode("utf-8", "surrogatepass")


def varint(values: Iterable[int] | np.ndarray) -> bytes:
    """Non-negative integers (< 2**53, exact in JavaScript) as unsigned LEB128: 7 bits a byte,
    the high bit set on every byte but a value's last.

    >>> varint([0, 1, 127, 128, 300]).hex()
    '00017f8001ac02'

    Raises:
        ValueError: a negative value or one of 2**53 or more.
    """
    a = np.asarray(values, dtype=np.int64).ravel()
    if a.size and (a.min() < 0 or a.max() >= 1 << 53):
        raise ValueError(f"varint takes integers in [0, 2**53), got {a.min()} .. {a.max()}")
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


def front_code(names: list[str]) -> tuple[list[int], list[str]]:
    """Each name as (characters shared with the previous name, the rest): dotted module names
    share long prefixes. Only an ASCII prefix is shared (the browser counts UTF-16 units).

    >>> front_code(["model.layers.0.q.weight", "model.layers.0.k.weight", "é.a", "é.b"])
    ([0, 15, 0, 0], ['model.layers.0.q.weight', 'k.weight', 'é.a', 'é.b'])
    """
    prefix, rest, prev = [], [], ""
    for name in names:
        lo, hi = 0, min(len(prev), len(name), 255)
        while lo < hi:  # the longest shared prefix, by bisection on startswith (C-speed compares)
            mid = (lo + hi + 1) // 2
            if name.startswith(prev[:mid]):
                lo = mid
            else:
                hi = mid - 1
        k = lo
        if not prev[:k].isascii():
            k = next(i for i, c in enumerate(prev[:k]) if ord(c) >= 128)
        prefix.append(k)
        rest.append(name[k:])
        prev = name
    return prefix, rest
