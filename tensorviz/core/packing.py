"""Where one element of a packed logical weight lives: which bits of which byte hold it, and
which scale (and zero point) it is read with.

A logical weight stored in pieces (see :class:`~tensorviz.core.records.Piece`) is ``[out, in]``;
element ``(o, i)`` of it is, per format (bits ``b``, ``k = 32 // b`` values per int32 word,
words little-endian, value ``j`` of a word in bits ``[j·b, (j+1)·b)``):

- GPTQ: ``qweight[i // k, o]``, value ``i % k``; scale ``scales[g, o]``, zero point
  ``qzeros[g, o // k]`` value ``o % k``, with ``g = g_idx[i]`` (``i // group`` unless
  ``desc_act`` reordered the inputs: then ``g_idx`` in the file decides).
- AWQ (GEMM): ``qweight[i, o // k]``, value ``AWQ_SLOT[o % k]`` (AutoAWQ packs the columns in the
  order 0 2 4 6 1 3 5 7); scale ``scales[g, o]``, zero point ``qzeros[g, o // k]`` the same slot;
  ``g = i // group``.
- bitsandbytes 4-bit (``Params4bit``): flat index ``n = o·in + i``, byte ``n // 2`` of the packed
  weight, the high nibble (bits 4-7) for even ``n``, the low one for odd; ``absmax[n // blocksize]``.
- bitsandbytes int8 (``Int8Params``): ``CB[o, i]`` one byte; ``SCB[o]``.
- FP8 with block scales: ``weight[o, i]`` one byte; ``weight_scale_inv[o // b0, i // b1]``.
- compressed-tensors ``pack-quantized``: row ``o`` of ``weight_packed`` one little-endian bit
  stream, value ``i`` at bits ``[i·b, (i+1)·b)``, stored as ``q + 2^(b-1)``; ``weight_scale[o, i // group]``.

Pure Python: byte positions come from the views' offsets and strides, nothing is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorviz.core.records import LayoutLike, TensorView

__all__ = ["PackedPlace", "Cell", "packed_place", "AWQ_SLOT", "PackedWord", "PackingMap", "packing_map"]

#: AWQ's packing order: the value of column ``o`` sits in slot ``AWQ_SLOT[o % 8]`` of its word.
AWQ_SLOT = (0, 4, 1, 5, 2, 6, 3, 7)


@dataclass(frozen=True)
class Cell:
    """Bits ``[lo, hi)`` from byte ``byte`` on (from the start of the storage; of the file for a
    file) hold what is read (``hi - lo`` over 8: whole bytes, a scale's element);
    ``name[index]`` is the stored element they belong to."""

    name: str
    index: tuple[int, ...]
    byte: int
    lo: int
    hi: int

    def __str__(self) -> str:
        at = f"({self.name}[{', '.join(map(str, self.index))}])"
        if self.lo == 0 and self.hi > 8 and self.hi % 8 == 0:
            return f"bytes [{self.byte:,}, {self.byte + self.hi // 8:,}) {at}"
        if self.hi > 8:
            return f"bits {self.lo}–{self.hi - 1} counted from byte {self.byte:,} (little-endian) {at}"
        bits = "all 8 bits" if (self.lo, self.hi) == (0, 8) else f"bits {self.lo}–{self.hi - 1}"
        return f"{bits} of byte {self.byte:,} {at}"


@dataclass(frozen=True)
class PackedPlace:
    """Where element ``index`` of logical weight ``name`` lives: ``value`` (its bits), ``scale``
    (the first byte of its scale's element) and ``zero`` (its zero point's bits), as far as
    the format has them; ``group`` the index of the scale group, ``how`` the rule applied."""

    name: str
    index: tuple[int, ...]
    kind: str
    value: Cell
    scale: Cell | None
    zero: Cell | None
    group: tuple[int, ...]
    how: str

    def __str__(self) -> str:
        at = f"{self.name}[{', '.join(map(str, self.index))}]"
        lines = [f"{at} ({self.kind}): {self.value}"]
        if self.scale is not None:
            lines.append(f"  scale group {', '.join(map(str, self.group))}: {self.scale}")
        if self.zero is not None:
            lines.append(f"  zero point: {self.zero}")
        return "\n".join(lines + [f"  rule: {self.how}"])


def _cell(v: TensorView, index: tuple[int, ...], bit: int = 0, width: int = 0) -> Cell:
    """Bits ``[bit, bit + width)`` of element ``index`` of view ``v`` (little-endian words)."""
    if len(index) != len(v.shape) or any(not 0 <= x < n for x, n in zip(index, v.shape)):
        raise IndexError(f"{v.name} is {list(v.shape)}: no element {list(index)}")
    elem = sum(x * s for x, s in zip(index, v.stride))
    width = width or v.itemsize * 8
    return Cell(v.name, index, v.start + elem * v.itemsize + bit // 8, bit % 8, bit % 8 + width)


def packed_place(layout: LayoutLike, name: str, index: tuple[int, ...]) -> PackedPlace:
    """Where element ``index`` (``(o, i)``) of the packed logical weight ``name`` lives (see
    :func:`tensorviz.explain_packing`); KeyError, IndexError or ValueError saying why not."""
    parts = {v.piece.part: v for v in layout.views if v.piece is not None and v.piece.of == name}
    if not parts:
        raise KeyError(f"{name!r} is not a logical weight stored in pieces in this layout")
    piece = next(iter(parts.values())).piece
    assert piece is not None  # every view of parts has one
    if len(index) != len(piece.shape) or any(not 0 <= x < n for x, n in zip(index, piece.shape)):
        raise IndexError(f"{name} is {list(piece.shape)} ({piece.kind}): no element {list(index)}")
    rule = _RULES.get(piece.kind.split()[0])
    if rule is None or len(piece.shape) != 2:
        raise ValueError(f"{name} is a {piece.kind}: tensorviz knows where the elements of GPTQ, AWQ, "
                         "bitsandbytes and FP8 block-scaled weights live, not of this one")  # fmt: skip
    return rule(name, piece.kind, tuple(index), parts, piece.bits, piece.group)


def _gptq(name, kind, index, parts, bits, group) -> PackedPlace:
    (o, i), k = index, 32 // bits
    g = i // group[0]
    value = _cell(parts["qweight"], (i // k, o), (i % k) * bits, bits)
    zero = _cell(parts["qzeros"], (g, o // k), (o % k) * bits, bits) if "qzeros" in parts else None
    scale = _cell(parts["scales"], (g, o)) if "scales" in parts else None
    how = f"qweight[i // {k}, o] value i % {k}; scales[g, o], qzeros[g, o // {k}] value o % {k}; g = i // {group[0]}"
    if "g_idx" in parts:
        how += " (g_idx[i] in the file decides when desc_act reordered the inputs)"
    return PackedPlace(name, index, f"{kind} int{bits}, group {group[0]}", value, scale, zero, (g,), how)


def _awq(name, kind, index, parts, bits, group) -> PackedPlace:
    (o, i), k = index, 32 // bits
    g, slot = i // group[0], AWQ_SLOT[o % k] if k == 8 else o % k
    value = _cell(parts["qweight"], (i, o // k), slot * bits, bits)
    zero = _cell(parts["qzeros"], (g, o // k), slot * bits, bits) if "qzeros" in parts else None
    scale = _cell(parts["scales"], (g, o)) if "scales" in parts else None
    how = f"qweight[i, o // {k}] slot {list(AWQ_SLOT)}[o % {k}]; scales[g, o], qzeros[g, o // {k}]; g = i // {group[0]}"
    return PackedPlace(name, index, f"{kind} int{bits}, group {group[0]}", value, scale, zero, (g,), how)


def _bnb(name, kind, index, parts, bits, group) -> PackedPlace:
    if "CB" in parts:  # Int8Params
        (o, i) = index
        scb = parts.get("SCB")
        scale = _cell(scb, (o,)) if scb is not None else None
        how = "CB[o, i], one byte; SCB[o], the row's absmax: W = CB * SCB[o] / 127"
        return PackedPlace(name, index, kind, _cell(parts["CB"], index), scale, None, (o,), how)
    packed, cols = parts["packed"], _shape_of(parts)[1]
    n = index[0] * cols + index[1]
    flat = tuple(divmod(n // 2, packed.shape[1])) if len(packed.shape) == 2 else (n // 2,)
    value = _cell(packed, flat, 4 if n % 2 == 0 else 0, 4)
    block = n // group[0]
    absmax = parts.get("absmax")
    scale = _cell(absmax, (block,)) if absmax is not None else None
    how = f"n = o·{cols} + i; byte n // 2, high nibble for even n; absmax[n // {group[0]}]"
    return PackedPlace(name, index, f"bitsandbytes {kind.split()[-1]} 4-bit, blocksize {group[0]}", value, scale, None,
                       (block,), how)  # fmt: skip


def _fp8(name, kind, index, parts, bits, group) -> PackedPlace:
    (o, i), (b0, b1) = index, group
    g = (o // b0, i // b1)
    scale = _cell(parts["weight_scale_inv"], g) if "weight_scale_inv" in parts else None
    how = f"weight[o, i], one byte; weight_scale_inv[o // {b0}, i // {b1}]"
    return PackedPlace(name, index, f"FP8, blocks {b0}×{b1}", _cell(parts["weight"], index), scale, None, g, how)


def _compressed(name, kind, index, parts, bits, group) -> PackedPlace:
    """compressed-tensors' dense packing: row ``o`` of ``weight_packed`` is one little-endian
    bit stream, value ``i`` at bits ``[i·b, (i+1)·b)`` (it may cross a byte or word), stored as
    ``q + 2^(b-1)``; zero points are packed the same way down each column of ``weight_zero_point``."""
    (o, i) = index
    value = _cell(parts["weight_packed"], (o, 0), i * bits, bits)
    scales = parts.get("weight_scale")
    g = i // group[0] if group and scales is not None and scales.shape[-1] > 1 else 0
    scale = _cell(scales, (o, g)) if scales is not None else None
    zp = parts.get("weight_zero_point")
    zero = None
    if zp is not None and 32 % bits == 0:  # a column's words are not adjacent: only whole values per word
        zero = _cell(zp, ((o * bits) // 32, g), (o * bits) % 32, bits)
    how = (f"weight_packed[o] as one bit stream, value i at bit i·{bits}, stored as q + {1 << (bits - 1)}; "
           f"weight_scale[o, i // {group[0] if group else 'in'}]")  # fmt: skip
    return PackedPlace(name, index, f"{kind} int{bits}" + (f", group {group[0]}" if group else ""), value, scale,
                       zero, (g,), how)  # fmt: skip


def _shape_of(parts: dict[str, TensorView]) -> tuple[int, ...]:
    piece = next(iter(parts.values())).piece
    assert piece is not None
    return piece.shape


_RULES = {
    "compressed-tensors": _compressed,
    "GPTQ": _gptq,
    "AWQ": _awq,
    "Params4bit": _bnb,
    "bitsandbytes": _bnb,
    "Int8Params": _bnb,
    "FP8": _fp8,
}


# -- the other way round: which logical elements each stored word holds ------------------------------
@dataclass(frozen=True)
class PackedWord:
    """One stored element (a word: an int32 of GPTQ/AWQ, a byte of bitsandbytes 4-bit) of a
    packed weight and the logical elements it holds: ``elements`` are ``((o, i), lo, hi)``, the
    element's value in bits ``[lo, hi)`` of the word (little-endian; ``hi`` past the word's
    width when a value crosses into the next word). ``holds`` is how many values the word holds
    in all (some may lie outside the region asked for)."""

    name: str
    index: tuple[int, ...]
    byte: int
    nbytes: int
    holds: int
    elements: tuple[tuple[tuple[int, int], int, int], ...]

    def __str__(self) -> str:
        at = f"{self.name}[{', '.join(map(str, self.index))}] bytes [{self.byte:,}, {self.byte + self.nbytes:,})"
        held = ", ".join(f"[{o}, {i}] bits {lo}–{hi - 1}" for (o, i), lo, hi in self.elements)
        rest = self.holds - len(self.elements)
        return f"{at}: {held}" + (f" (+{rest} outside the region)" if rest > 0 else "")


@dataclass(frozen=True)
class PackingMap:
    """Which stored word holds each element of the ``rows`` × ``cols`` corner of the packed
    logical weight ``name`` (``kind``, by the rule ``how``): ``words`` in the order their first
    element appears (row by row). :meth:`word_of` finds an element's word; ``print`` it, or draw
    it with :func:`tensorviz.render.explain.packing_figure` (what ``tv.explain(obj,
    packed=name)`` returns)."""

    name: str
    kind: str
    rows: int
    cols: int
    words: tuple[PackedWord, ...]
    how: str

    def word_of(self, o: int, i: int) -> int:
        """The index in :attr:`words` of the word holding element ``(o, i)`` of the region."""
        for k, w in enumerate(self.words):
            if any(e == (o, i) for e, _, _ in w.elements):
                return k
        raise IndexError(f"element [{o}, {i}] is outside the {self.rows}×{self.cols} corner drawn")

    def __str__(self) -> str:
        head = f"{self.name} ({self.kind}): the words holding its [{self.rows}, {self.cols}] corner"
        return "\n".join([head, *(f"  {w}" for w in self.words), f"  rule: {self.how}"])


def packing_map(layout: LayoutLike, name: str, rows: int = 8, cols: int = 16) -> PackingMap:
    """:class:`PackingMap` of the ``rows`` × ``cols`` corner of ``name`` (each element placed by
    :func:`packed_place`, then grouped by the stored word its value starts in)."""
    words: dict[tuple[str, tuple[int, ...]], list] = {}
    place = packed_place(layout, name, (0, 0))  # KeyError/ValueError saying why not, before any work
    shape = _logical_shape(layout, name)
    rows, cols = min(rows, shape[0]), min(cols, shape[1])
    for o in range(rows):
        for i in range(cols):
            place = packed_place(layout, name, (o, i))
            key, lo, hi = _word(layout[place.value.name], place.value)
            words.setdefault(key, []).append(((o, i), lo, hi))
    out = []
    for (part, index), elements in words.items():
        v = layout[part]
        bits = (v.piece.bits if v.piece is not None else 0) or v.itemsize * 8
        start = v.start + sum(x * s for x, s in zip(index, v.stride)) * v.itemsize
        out.append(PackedWord(part, index, start, v.itemsize, max(1, v.itemsize * 8 // bits), tuple(elements)))
    return PackingMap(name, place.kind, rows, cols, tuple(out), place.how)


def _logical_shape(layout: LayoutLike, name: str) -> tuple[int, ...]:
    piece = next(v.piece for v in layout.views if v.piece is not None and v.piece.of == name)
    return piece.shape


def _word(v: TensorView, cell: Cell) -> tuple[tuple[str, tuple[int, ...]], int, int]:
    """The stored word of ``v`` that ``cell``'s first bit is in, and the cell's bits in it."""
    size = v.itemsize * 8
    bit = (cell.byte - v.start) * 8 + cell.lo
    flat, lo = divmod(bit, size)
    index = []
    for n in reversed(v.shape):  # the pieces of a packed weight are contiguous rows of words
        flat, x = divmod(flat, n) if n else (flat, 0)
        index.append(x)
    return (v.name, tuple(reversed(index))), lo, lo + (cell.hi - cell.lo)
