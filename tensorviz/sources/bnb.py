"""bitsandbytes parameters (``Params4bit``, ``Int8Params``) as logical weights stored in pieces.

A ``Linear4bit``'s state dict already names every stored piece: the packed weight itself
(``weight``, uint8, two 4-bit values a byte) and its quant state (``weight.absmax``,
``weight.quant_map``, ``weight.nested_absmax``, ``weight.nested_quant_map`` and the packed JSON
``weight.quant_state.bitsandbytes__nf4``). This tags those rows with a
:class:`~tensorviz.core.records.Piece` naming the logical weight (its dtype and shape from the
quant state, 4 bits, its block size). Nothing is imported: it runs only when bitsandbytes is.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from tensorviz.core.records import Piece
from tensorviz.core.rows import Field, Rows

__all__ = ["tag_bitsandbytes"]

_STATE_KEYS = ("absmax", "quant_map", "nested_absmax", "nested_quant_map")


def tag_bitsandbytes(rows: Rows, module: Any) -> None:
    """Give every row of a ``Params4bit`` weight (and its quant state) and of a quantized
    ``Int8Params`` weight (its int8 ``CB`` and its module's ``SCB`` row scales) the weight's Piece."""
    if "bitsandbytes" not in sys.modules:
        return
    found: dict[str, tuple[Piece, tuple[str, ...]]] = {}
    direct: dict[str, Piece] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        kind = type(p).__name__
        qs = getattr(p, "quant_state", None)
        if kind == "Params4bit" and qs is not None:
            label = f"Params4bit {qs.quant_type}"
            dtype = str(qs.dtype).removeprefix("torch.")
            piece = Piece(name, "packed", label, dtype, tuple(qs.shape), 4, (qs.blocksize,))
            found[name] = (piece, (*_STATE_KEYS, f"quant_state.bitsandbytes__{qs.quant_type}"))
        elif kind == "Int8Params" and getattr(p, "SCB", None) is not None:
            direct.update(_int8_pieces(name, p))
    if not found and not direct:
        return
    for i, row in enumerate(rows.rows):
        own = direct.get(row[Field.NAME]) or _piece_of(row[Field.NAME], found)
        if own is not None:
            rows.pieces[i] = own


def _int8_pieces(name: str, p: Any) -> dict[str, Piece]:
    """A quantized ``Int8Params`` (``Linear8bitLt`` with ``has_fp16_weights=False``): its data
    is ``CB``, the int8 weight row by row, and its module's ``SCB`` buffer holds each row's
    absmax, so ``W ≈ CB * SCB[:, None] / 127`` in float16 (bitsandbytes 0.50's
    ``int8_vectorwise_quant`` / ``int8_vectorwise_dequant``); ``weight_format`` is the layout flag
    saved beside them. The module's rows are named ``<module>.SCB``, not ``<name>.SCB``."""
    prefix = name[: -len("weight")] if name.endswith("weight") else f"{name}."
    group = (1, int(p.shape[-1])) if p.dim() else ()
    piece = Piece(name, "CB", "Int8Params", "float16", tuple(p.shape), 8, group)
    return {name: piece, **{f"{prefix}{part}": replace(piece, part=part) for part in ("SCB", "weight_format")}}


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
