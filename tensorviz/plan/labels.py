"""Lane labels and sizes of the diagram planner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.records import Storage
    from tensorviz.plan.bars import Proto

__all__ = ["storage_label", "row_label", "row_size"]


def storage_label(s: Storage) -> str:
    """A storage lane's label: its number, its label or device, its size."""
    parts = [f"storage #{s.index}"]
    if s.label:
        parts.append(s.label)
    elif s.device != "cpu":
        parts.append(s.device)
    parts.append(format_bytes(s.nbytes))
    return " · ".join(parts)


def row_label(protos: Sequence[Proto], row: list[int]) -> str:
    """The lane label of a row of bars: its names (a span group's joined by ≡), or the first and a count."""
    protos = [protos[i] for i in row]
    if len(protos) == 1:
        return " ≡ ".join(protos[0].names)
    names = [n for p in protos for n in p.names]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, … ({len(names):,} views)"


def row_size(protos: Sequence[Proto], row: list[int]) -> int:
    """Bytes a row of bars spans."""
    if len(row) == 1:
        p = protos[row[0]]
        return p.stop - p.start
    return max((protos[i].stop for i in row), default=0) - min((protos[i].start for i in row), default=0)
