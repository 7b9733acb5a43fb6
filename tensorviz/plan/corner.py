"""Which part of a large view the teaching panel draws: a corner by default, or a region the
caller names with slices. Pure arithmetic on (offset, shape, stride): a part of a view is a view
of the same storage, so its addresses are the real ones.

>>> part((4096, 4096), (4096, 1), 0, None)
Part(shape=(8, 8), stride=(4096, 1), offset=0, text='[:8, :8] of [4096, 4096]')
>>> part((4096, 4096), (4096, 1), 0, (slice(100, 104), slice(None, None, 2)))
Part(shape=(4, 2048), stride=(4096, 2), offset=409600, text='[100:104, ::2] of [4096, 4096]')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from tensorviz.core.errors import TensorvizError

__all__ = ["Part", "part", "corner_shape", "CORNER"]

#: Elements along each of the last two dimensions of a default corner (2 on the one before,
#: 1 on any earlier one): a 4096×4096 weight is drawn as its first 8×8 elements.
CORNER = 8


class Part(NamedTuple):
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    text: str


def corner_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The default corner: up to 8 along the last two dims, 2 along the third-last, 1 before.

    >>> corner_shape((4096,)), corner_shape((3, 4096, 4096)), corner_shape((5, 5, 5, 5))
    ((8,), (2, 8, 8), (1, 2, 5, 5))
    """
    n = len(shape)
    sizes = [1] * max(n - 3, 0) + [2] * min(max(n - 2, 0), 1) + [CORNER] * min(n, 2)
    return tuple(min(s, k) for s, k in zip(shape, sizes))


def part(shape: Sequence[int], stride: Sequence[int], offset: int, region: Any) -> Part:
    """The part of a view to draw: ``region`` (a tuple of slices or ints, one per leading
    dimension, as in ``t[region]`` but every dimension kept) or, when None, the corner."""
    shape, stride = tuple(shape), tuple(stride)
    if region is None:
        keys = tuple(slice(0, k) for k in corner_shape(shape))
    else:
        keys = _keys(region, len(shape))
    new_shape, new_stride, texts = [], [], []
    for d, (size, st) in enumerate(zip(shape, stride)):
        key = keys[d] if d < len(keys) else slice(None)
        start, stop, step = key.indices(size)
        if step < 1:
            raise TensorvizError(f"region: dimension {d} has step {step}; explain draws steps of 1 or more")
        offset += start * st
        new_shape.append(len(range(start, stop, step)))
        new_stride.append(st * step)
        texts.append(_slice_text(key, size))
    whole = f"[{', '.join(map(str, shape))}]"
    return Part(tuple(new_shape), tuple(new_stride), offset, f"[{', '.join(texts)}] of {whole}")


def _keys(region: Any, ndim: int) -> tuple[slice, ...]:
    keys = region if isinstance(region, tuple) else (region,)
    if len(keys) > ndim:
        raise TensorvizError(f"region {region!r} has {len(keys)} entries for a view with {ndim} dimensions")
    out = []
    for k in keys:
        if isinstance(k, slice):
            out.append(k)
        elif isinstance(k, int) and not isinstance(k, bool):
            out.append(slice(k, k + 1) if k != -1 else slice(k, None))
        else:
            raise TensorvizError(
                f"region entries are slices or ints (e.g. region=(slice(0, 8), slice(100, 108))), got {k!r}"
            )
    return tuple(out)


def _slice_text(key: slice, size: int) -> str:
    """``:8``, ``100:104``, ``::2``, ``:`` -- how a person would write the slice."""
    start, stop, step = key.indices(size)
    a = "" if start == 0 else str(start)
    b = "" if stop == size else str(stop)
    c = "" if step == 1 else f":{step}"
    return f"{a}:{b}{c}"
