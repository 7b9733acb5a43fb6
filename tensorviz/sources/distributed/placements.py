"""Where each rank's shard of a DTensor lies in the global tensor, from its placements alone.

Pure Python; no torch. A placement is a tuple: ``("S", dim)`` for ``Shard(dim)``, ``("SS", dim,
split_factor)`` for ``_StridedShard``, ``("R",)`` for ``Replicate`` and ``("P", op)`` for
``Partial``. Placements apply left to right over the mesh dimensions, as DTensor applies them:
``Shard`` follows ``torch.chunk`` (chunks of ``ceil(n / k)``; the last ones short or empty), and
``_StridedShard(dim, sf)`` first chunks the dimension into ``sf`` pieces, chunks each piece over
the mesh dimension and gives rank ``i`` the ``i``-th chunk of every piece, concatenated -- so a
shard may be several interleaved row ranges. Every dimension's indices are kept as an ordered
list of ``(start, stop)`` ranges, never as one assumed-contiguous range.

>>> shard_ranges((16, 8), (("SS", 0, 2), ("S", 0)), (2, 2), (1, 0))
([(4, 8)], [(0, 8)])
>>> shard_ranges((8,), (("SS", 0, 2),), (2,), (1,))      # one mesh dim: interleaved pieces
([(2, 4), (6, 8)],)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

__all__ = [
    "shard_ranges",
    "chunk",
    "strided_chunk",
    "shard_views",
    "coordinate",
    "contiguous_strides",
    "placement_text",
]

Ranges = list[tuple[int, int]]


def chunk(ranges: Ranges, n: int, i: int) -> Ranges:
    """The ``i``-th of ``n`` ``torch.chunk`` pieces of the index sequence ``ranges``."""
    total = sum(b - a for a, b in ranges)
    size = -(-total // n) if n else 0
    return _take(ranges, min(i * size, total), min((i + 1) * size, total))


def strided_chunk(ranges: Ranges, n: int, split_factor: int, i: int) -> Ranges:
    """Rank ``i``'s part under ``_StridedShard``: chunk ``i`` of each of ``split_factor`` pieces."""
    out: Ranges = []
    for j in range(split_factor):
        out += chunk(chunk(ranges, split_factor, j), n, i)
    return _merge(out)


def _take(ranges: Ranges, lo: int, hi: int) -> Ranges:
    """Positions ``[lo, hi)`` of the concatenated index sequence, as ranges of indices."""
    out: Ranges = []
    pos = 0
    for a, b in ranges:
        n = b - a
        s, e = max(lo - pos, 0), min(hi - pos, n)
        if s < e:
            out.append((a + s, a + e))
        pos += n
    return out


def _merge(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for a, b in ranges:
        if a == b:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def shard_ranges(
    shape: Sequence[int], placements: Sequence[tuple], mesh_shape: Sequence[int], coord: Sequence[int]
) -> tuple[Ranges, ...]:
    """Per tensor dimension, the ordered index ranges the rank at mesh ``coord`` holds."""
    dims = [[(0, int(n))] if n else [] for n in shape]
    for mesh_dim, p in enumerate(placements):
        n, i = mesh_shape[mesh_dim], coord[mesh_dim]
        if p[0] == "S":
            dims[p[1]] = chunk(dims[p[1]], n, i)
        elif p[0] == "SS":
            dims[p[1]] = strided_chunk(dims[p[1]], n, p[2], i)
    return tuple(_merge(d) for d in dims)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(out))


def shard_views(shape: Sequence[int], ranges: tuple[Ranges, ...]) -> list[tuple[tuple, tuple, int]]:
    """``(shape, stride, offset)`` strided views of the global tensor covering exactly ``ranges``.

    One view when every dimension is one range, or evenly spaced equal ranges (an interleaved
    shard: that dimension becomes two, ``(pieces, length)``); otherwise one view per block.
    An empty shard is one empty view.
    """
    gstride = contiguous_strides(shape)
    if any(not r for r in ranges) or not ranges:
        return [(tuple(sum(b - a for a, b in r) for r in ranges), gstride, 0)]
    dims = []
    for r, st in zip(ranges, gstride):
        dims.append(_regular(r, st))
    if all(d is not None for d in dims):
        shp: list[int] = []
        strd: list[int] = []
        off = 0
        for s, t, o in filter(None, dims):
            shp += s
            strd += t
            off += o
        return [(tuple(shp), tuple(strd), off)]
    out = []
    for block in product(*ranges):
        off = sum(a * st for (a, _), st in zip(block, gstride))
        out.append((tuple(b - a for a, b in block), gstride, off))
    return out


def _regular(r: Ranges, st: int) -> tuple[list, list, int] | None:
    (a0, b0) = r[0]
    if len(r) == 1:
        return [b0 - a0], [st], a0 * st
    length, step = b0 - a0, r[1][0] - a0
    if all(b - a == length and a - a0 == k * step for k, (a, b) in enumerate(r)):
        return [len(r), length], [step * st, st], a0 * st
    return None


def coordinate(ranks: Sequence[int], mesh_shape: Sequence[int], rank: int) -> tuple[int, ...]:
    """The mesh coordinate of ``rank`` in a mesh of ``mesh_shape`` listing ``ranks`` row-major."""
    flat = list(ranks).index(rank)
    coord = []
    for n in reversed(mesh_shape):
        coord.append(flat % n)
        flat //= n
    return tuple(reversed(coord))


def placement_text(p: tuple) -> str:
    """DTensor's own short form: ``S(0)``, ``_S(0, 2)``, ``R``, ``P(sum)``."""
    if p[0] == "S":
        return f"S({p[1]})"
    if p[0] == "SS":
        return f"_S({p[1]}, {p[2]})"
    if p[0] == "P":
        return f"P({p[1]})"
    return "R"
