"""bitsandbytes 4-bit parameters (``Params4bit``) as logical weights stored in pieces.

A ``Linear4bit``'s state dict already names every stored piece: the packed weight itself
(``weight``, uint8, two 4-bit values a byte) and its quant state (``weight.absmax``,
``weight.quant_map``, ``weight.nested_absmax``, ``weight.nested_quant_map`` and the packed JSON
``weight.quant_state.bitsandbytes__nf4``). This tags those rows with a
:class:`~tensorviz.core.records.Piece` naming the logical weight (its dtype and shape from the
quant state, 4 bits, its block size). Nothing is imported: it runs only when bitsandbytes is.
"""

from __future__ import annotations

import sys
from typing import Any

from tensorviz.core.records import Piece
from tensorviz.core.rows import Field, Rows

__all__ = ["tag_bitsandbytes"]

_STATE_KEYS = ("absmax", "quant_map", "nested_absmax", "nested_quant_map")


def tag_bitsandbytes(rows: Rows, module: Any) -> None:
    """Give every row of a ``Params4bit`` weight (and its quant state) the weight's Piece."""
    if "bitsandbytes" not in sys.modules:
        return
    found: dict[str, tuple[Piece, tuple[str, ...]]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        qs = getattr(p, "quant_state", None)
        if type(p).__name__ != "Params4bit" or qs is None:
            continue
        kind = f"Params4bit {qs.quant_type}"
        piece = Piece(name, "packed", kind, str(qs.dtype).removeprefix("torch."), tuple(qs.shape), 4, (qs.blocksize,))
        found[name] = (piece, (*_STATE_KEYS, f"quant_state.bitsandbytes__{qs.quant_type}"))
    if not found:
        return
    for i, row in enumerate(rows.rows):
        own = _piece_of(row[Field.NAME], found)
        if own is not None:
            rows.pieces[i] = own


def _piece_of(name: str, found: dict[str, tuple[Piece, tuple[str, ...]]]) -> Piece | None:
    hit = found.get(name)
    if hit is not None:
        return hit[0]
    of, _, key = name.partition(".quant_state.") if ".quant_state." in name else name.rpartition(".")
    key = f"quant_state.{key}" if ".quant_state." in name else key
    hit = found.get(of)
    if hit is None or key not in hit[1]:
        return None
    return Piece(of, key, hit[0].kind, hit[0].dtype, hit[0].shape, hit[0].bits, hit[0].group)
