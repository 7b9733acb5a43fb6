"""Logical tensors stored in pieces: a tensor subclass's inner tensors, a packed checkpoint's
``qweight`` + ``scales`` + ``qzeros``. Each piece's view carries a :class:`Piece`; this module
gathers them per logical tensor and says in words what is stored and what it encodes.

Pure Python (no torch, no numpy).

>>> import torch, tensorviz as tv
>>> from torch.testing._internal.two_tensor import TwoTensor
>>> layout = tv.analyze({"w": TwoTensor(torch.zeros(2, 2), torch.ones(2, 2))})
>>> packed_line(packed_tensors(layout)[0], layout)
'w  TwoTensor 2×2 (float32 logical) = a float32[2×2] + b float32[2×2]: 32 B stored, 16 B as float32'
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorviz.core.records import LayoutLike, Piece, TensorView
from tensorviz.core.units import format_bytes

__all__ = [
    "PackedTensor",
    "packed_tensors",
    "packed_line",
    "packed_lines",
    "group_label",
    "logical_nbytes",
    "ITEMSIZE",
]

#: Bytes per element of the dtypes a logical (dequantised) tensor is usually computed in.
ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}


#: The order packed formats' pieces are named in (others keep their source order, after these).
_ORDER = {"qweight": 0, "weight": 0, "packed": 0, "scales": 1, "weight_scale_inv": 1, "absmax": 1, "qzeros": 2,
          "quant_map": 2, "g_idx": 3, "nested_absmax": 3, "nested_quant_map": 4}  # fmt: skip


@dataclass(frozen=True)
class PackedTensor:
    """One logical tensor and the views that store it (in source order)."""

    piece: Piece
    parts: tuple[TensorView, ...]

    @property
    def name(self) -> str:
        return self.piece.of


def logical_nbytes(piece: Piece) -> int:
    """Bytes the logical tensor would take in its logical dtype (0 for a dtype not known here).

    >>> logical_nbytes(Piece("w", "qweight", "GPTQ", "float16", (4096, 4096), 4, (128,)))
    33554432
    """
    return piece.numel * ITEMSIZE.get(piece.dtype, 0)


def packed_tensors(layout: LayoutLike) -> tuple[PackedTensor, ...]:
    """Every logical tensor stored in pieces, in the order its first piece appears."""
    parts: dict[str, list[TensorView]] = {}
    first: dict[str, Piece] = {}
    for v in layout.views:
        if v.piece is not None:
            parts.setdefault(v.piece.of, []).append(v)
            first.setdefault(v.piece.of, v.piece)
    return tuple(PackedTensor(first[of], tuple(views)) for of, views in parts.items())


def shape_words(shape: tuple[int, ...]) -> str:
    return "×".join(map(str, shape)) or "scalar"


def packed_line(p: PackedTensor, layout: LayoutLike) -> str:
    """What a logical tensor is and which stored pieces hold it, with both sizes."""
    pc = p.piece
    bits = f" int{pc.bits}" if pc.bits else ""
    group = f", group {shape_words(pc.group)}" if pc.group else ""
    parts = sorted(p.parts, key=lambda v: _ORDER.get(v.piece.part if v.piece else "", len(_ORDER)))
    pieces = " + ".join(f"{v.piece.part if v.piece else v.name} {v.dtype}[{shape_words(v.shape)}]" for v in parts)
    stored = layout.union_nbytes([v.name for v in p.parts])
    unpacked = logical_nbytes(pc)
    as_logical = f", {format_bytes(unpacked)} as {pc.dtype}" if unpacked else ""
    return (
        f"{p.name}  {pc.kind} {shape_words(pc.shape)}{bits}{group} ({pc.dtype} logical) = {pieces}: "
        f"{format_bytes(stored)} stored{as_logical}"
    )


def group_label(p: PackedTensor, layout: LayoutLike, stored: int | None = None) -> str:
    """One line for a diagram's group of a logical tensor's pieces: what it is, each piece's
    dtype, part and bytes, what they take together (``stored``, when the caller knows it: else
    the union of the pieces' footprints) and what the logical tensor would.

    >>> import torch, tensorviz as tv
    >>> from torch.testing._internal.two_tensor import TwoTensor
    >>> layout = tv.analyze({"w": TwoTensor(torch.zeros(2, 2), torch.ones(2, 2))})
    >>> group_label(packed_tensors(layout)[0], layout)
    'w TwoTensor 2×2: float32 a 16 B + float32 b 16 B = 32 B stored, 16 B as float32'
    """
    pc = p.piece
    parts = sorted(p.parts, key=lambda v: _ORDER.get(v.piece.part if v.piece else "", len(_ORDER)))
    pieces = " + ".join(f"{v.dtype} {v.piece.part if v.piece else v.name} {format_bytes(v.nbytes)}" for v in parts)
    unpacked = logical_nbytes(pc)
    as_logical = f", {format_bytes(unpacked)} as {pc.dtype}" if unpacked else ""
    total = layout.union_nbytes([v.name for v in p.parts]) if stored is None else stored
    return f"{p.name} {pc.kind} {shape_words(pc.shape)}: {pieces} = {format_bytes(total)} stored{as_logical}"


def packed_lines(layout: LayoutLike, limit: int = 20) -> list[str]:
    """The text summary's section on logical tensors stored in pieces (empty when none)."""
    packed = packed_tensors(layout)
    if not packed:
        return []
    lines = [f"stored in pieces: {len(packed)} logical tensor{'s' * (len(packed) != 1)}"]
    lines += [f"  {packed_line(p, layout)}" for p in packed[:limit]]
    if len(packed) > limit:
        lines.append(f"  … {len(packed) - limit} more")
    return lines
