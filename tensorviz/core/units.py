"""Binary byte units, shared by the text summary and every renderer."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: float, digits: int = 1) -> str:
    """Human-readable binary size.

    >>> format_bytes(0), format_bytes(1023), format_bytes(1536), format_bytes(3 * 2**30)
    ('0 B', '1023 B', '1.5 KiB', '3.0 GiB')
    """
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in _UNITS:
        if n < 1024 or unit == _UNITS[-1]:
            if unit == "B":
                return f"{sign}{int(n)} B"
            return f"{sign}{n:.{digits}f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
