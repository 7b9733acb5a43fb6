"""Lane labels and sizes of the diagram planner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tensorviz.core.names import elide_name
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.records import Storage
    from tensorviz.plan.bars import Proto

__all__ = ["storage_label", "row_label", "row_size", "names_label", "TIED"]

#: How a span group's names are joined in a label that shows them all.
TIED = " ≡ "


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
        return TIED.join(protos[0].names)
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


def names_label(names: Sequence[str], limit: int) -> str:
    """The label of a bar or lane drawing ``names`` (tied names, one span group) in at most
    ``limit`` characters: all of them joined by "≡" if they fit, else the first name and how
    many more ("shared.weight +3"), the first name elided at a name boundary
    (:func:`tensorviz.core.names.elide_name`) -- never the tail of the joined names, which hid
    the first ones. Where "+3" is shown, the picture lists the names elsewhere (a key under a
    static picture, the canvas's tooltip, the table).

    >>> names_label(["wte", "head"], 20), names_label(["shared.weight", "encoder.embed_tokens.weight", "lm_head.weight"], 30)
    ('wte ≡ head', 'shared.weight +2')
    >>> names_label(["model.decoder.embed_tokens.weight", "lm_head.weight"], 24)
    '….embed_tokens.weight +1'
    """
    joined = TIED.join(names)
    if len(names) < 2 or len(joined) <= limit:
        return elide_name(joined, limit) if len(names) < 2 else joined
    more = f" +{len(names) - 1:,}"
    return elide_name(names[0], max(limit - len(more), 1)) + more
