"""Bytes in binary units: the one unit table and every way tensorviz writes a byte count.

- :func:`format_bytes`: the text summary and the pictures' labels ("1.5 KiB", "3.0 GiB").
- :func:`byte_text`: the explorer (axis, slider, status, title): at most 4 significant digits
  ("3.906 KiB", "3 GiB"); the canvas's ``formatBytes`` (``explorer/geometry.js``) is the same.
- :func:`exact_bytes`: an axis tick, in the largest unit that states it exactly ("3.5 MiB").
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

__all__ = ["UNITS", "TO_TIB", "format_bytes", "byte_text", "exact_bytes"]

#: Binary units, largest first, with their sizes in bytes. The explorer and the axis stop at TiB
#: (:data:`TO_TIB`), as the canvas's JavaScript does.
UNITS = (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
TO_TIB = UNITS[1:]


def format_bytes(n: float, digits: int = 1) -> str:
    """Human-readable binary size.

    >>> format_bytes(0), format_bytes(1023), format_bytes(1536), format_bytes(3 * 2**30)
    ('0 B', '1023 B', '1.5 KiB', '3.0 GiB')
    """
    n = float(n)
    sign = "-" if n < 0 else ""
    a = abs(n)
    for unit, size in UNITS:
        if a >= size or unit == "B":
            if unit == "B":
                return f"{sign}{int(a)} B"
            return f"{sign}{a / size:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def byte_text(n: float) -> str:
    """The explorer's one byte format (axis, slider, status, title; the canvas's ``formatBytes``
    is the same): binary units, at most 4 significant digits. Hex appears only in details.

    >>> byte_text(0), byte_text(1023), byte_text(1536), byte_text(4000), byte_text(3 << 30)
    ('0 B', '1023 B', '1.5 KiB', '3.906 KiB', '3 GiB')
    """
    sign, a = ("-" if n < 0 else ""), abs(float(n))
    for unit, size in TO_TIB[:-1]:
        if a >= size:
            v = a / size
            digits = max(0, 3 - int(math.floor(math.log10(v))))
            # half up on the exact binary value, as JavaScript's toFixed rounds (15.625 -> 15.63)
            text = str(Decimal(v).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            return f"{sign}{text} {unit}"
    return f"{sign}{int(Decimal(a).quantize(Decimal(1), rounding=ROUND_HALF_UP))} B"


def exact_bytes(n: int) -> str:
    """A byte count in the largest binary unit that states it exactly (<= 3 decimals).

    >>> exact_bytes(1 << 30), exact_bytes(3584 * 1024), exact_bytes(1000), exact_bytes(1536)
    ('1 GiB', '3.5 MiB', '1000 B', '1.5 KiB')
    """
    n = int(n)
    sign, n = ("-" if n < 0 else ""), abs(n)
    for name, size in TO_TIB[:-1]:
        if n >= size and (n * 1000) % size == 0:
            text = f"{n / size:.3f}".rstrip("0").rstrip(".")
            return f"{sign}{text} {name}"
    return f"{sign}{n} B"
