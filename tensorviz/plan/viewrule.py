"""Whether ``x.view(shape)`` works and ``x.reshape(shape)`` copies: torch's own rule, in numbers.

A port of ATen's ``infer_size`` (the ``-1`` dimension) and ``computeStride``
(``aten/src/ATen/TensorUtils.cpp``), which both ``view`` and ``reshape`` call: the input
dimensions fall into *chunks*, runs of dimensions that are contiguous with each other
(``stride[k] == size[k'] * stride[k']`` for the next dimension ``k'`` of size > 1; dimensions of
size 1 never split a chunk); the view exists exactly when every chunk boundary is also a boundary
of the new shape, that is, when no new dimension has to run across two chunks. ``reshape``
returns that view when it exists and a contiguous copy when it does not. Pure arithmetic on
(shape, stride): no tensor is needed.

>>> view_strides((3, 4), (1, 3), (12,)) is None        # x.t().view(12): dims 0 and 1 cannot merge
True
>>> view_strides((3, 4), (4, 1), (2, 6))
(6, 1)
>>> [(b.out_dim, b.in_dims, b.pair, b.needed, b.actual) for b in blocked((3, 4), (1, 3), (12,))]
[(0, (0, 1), (0, 1), 12, 1)]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tensorviz.core.errors import TensorvizError

__all__ = [
    "Blocked",
    "ShapeError",
    "infer_shape",
    "view_strides",
    "blocked",
    "is_contiguous",
    "contiguous_strides",
    "viewable_permutation",
    "chunks",
    "overlapping",
]

#: Most dimensions for which every permutation is tried in :func:`viewable_permutation`.
MAX_PERMUTED_DIMS = 6


class ShapeError(TensorvizError, ValueError):
    """The target shape is invalid for the tensor: ``view`` and ``reshape`` both raise."""


@dataclass(frozen=True)
class Blocked:
    """A place where torch's rule rejects the view.

    ``out_dim`` of the new shape would have to run across input dims ``in_dims``; of those,
    the adjacent pair ``pair`` (input dims of size > 1, size-1 dims between them skipped) is not
    contiguous: merging needs ``stride[pair[0]] == needed`` (``size * stride`` of the block of
    dims starting at ``pair[1]``), but it is ``actual``.
    """

    out_dim: int
    in_dims: tuple[int, ...]
    pair: tuple[int, int]
    needed: int
    actual: int


def infer_shape(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    """The new shape with ``-1`` filled in, or :class:`ShapeError` as torch would raise it.

    >>> infer_shape((2, -1), 12), infer_shape((-1,), 0)
    ((2, 6), (0,))
    """
    shape = tuple(int(s) for s in shape)
    newsize, infer = 1, None
    for d, s in enumerate(shape):
        if s == -1:
            if infer is not None:
                raise ShapeError(f"shape {list(shape)}: only one dimension can be inferred (-1)")
            infer = d
        elif s >= 0:
            newsize *= s
        else:
            raise ShapeError(f"shape {list(shape)}: invalid shape dimension {s}")
    if numel == newsize or (infer is not None and newsize > 0 and numel % newsize == 0):
        if infer is None:
            return shape
        if newsize == 0:  # (0, -1) for 0 elements: any size fits, so torch refuses
            raise ShapeError(
                f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                "unspecified dimension size -1 can be any value and is ambiguous"
            )
        return shape[:infer] + (numel // newsize,) + shape[infer + 1 :]
    raise ShapeError(
        f"shape {list(shape)} is invalid for input of size {numel}: the new shape must hold exactly {numel} elements"
    )


def chunks(shape: Sequence[int], stride: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """torch's chunks, right to left: ``(first, last, numel, base_stride)`` per chunk, where
    dims ``first..last`` are contiguous with each other and the chunk's elements step by
    ``base_stride`` (the stride of its last dim). Assumes a non-empty shape."""
    out = []
    base, numel, last = stride[-1], 1, len(shape) - 1
    for d in range(len(shape) - 1, -1, -1):
        numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and stride[d - 1] != numel * base):
            out.append((d, last, numel, base))
            if d > 0:
                base, numel, last = stride[d - 1], 1, d - 1
    return out


def view_strides(shape: Sequence[int], stride: Sequence[int], new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of ``x.view(new_shape)``, or None where torch refuses (``computeStride``).

    ``new_shape`` must already hold as many elements as ``shape`` (see :func:`infer_shape`).
    """
    shape, stride, new_shape = tuple(shape), tuple(stride), tuple(new_shape)
    if not shape:
        return (1,) * len(new_shape)
    if math.prod(shape) == 0:
        if shape == new_shape:
            return stride
        out, step = [0] * len(new_shape), 1
        for d in range(len(new_shape) - 1, -1, -1):
            out[d] = step
            step *= max(new_shape[d], 1)
        return tuple(out)
    out, view_d = [0] * len(new_shape), len(new_shape) - 1
    for _first, _last, numel, base in chunks(shape, stride):
        view_numel = 1
        while view_d >= 0 and (view_numel < numel or new_shape[view_d] == 1):
            out[view_d] = view_numel * base
            view_numel *= new_shape[view_d]
            view_d -= 1
        if view_numel != numel:
            return None
    return tuple(out) if view_d == -1 else None


def blocked(shape: Sequence[int], stride: Sequence[int], new_shape: Sequence[int]) -> tuple[Blocked, ...]:
    """Every chunk boundary the new shape runs across, right to left (torch stops at the
    first). Empty exactly when :func:`view_strides` finds the view."""
    shape, stride, new_shape = tuple(shape), tuple(stride), tuple(new_shape)
    if not shape or math.prod(shape) == 0:
        return ()
    ends = _suffix_products(new_shape)
    found, right = [], 1
    for first, last, numel, _base in chunks(shape, stride)[:-1]:
        right *= numel
        if right in ends or numel == 1:
            continue
        k = first - 1
        k2 = next(d for d in range(first, last + 1) if shape[d] != 1)
        j = _straddling(new_shape, right)
        found.append(Blocked(j, overlapping(shape, new_shape, j), (k, k2), shape[k2] * stride[k2], stride[k]))
    return tuple(found)


def _suffix_products(shape: tuple[int, ...]) -> set[int]:
    out, p = {1}, 1
    for s in reversed(shape):
        p *= s
        out.add(p)
    return out


def _straddling(new_shape: tuple[int, ...], boundary: int) -> int:
    """The output dim whose elements run across the input boundary ``boundary`` (a product of
    trailing input sizes that no product of trailing output sizes equals)."""
    p = 1
    for j in range(len(new_shape) - 1, -1, -1):
        if p < boundary < p * new_shape[j]:
            return j
        p *= new_shape[j]
    raise AssertionError("a boundary inside the shape is crossed by some output dim")


def overlapping(shape: tuple[int, ...], new_shape: tuple[int, ...], j: int) -> tuple[int, ...]:
    """Input dims (size > 1) that share elements with output dim ``j`` in row-major order."""
    lo = math.prod(new_shape[j + 1 :])
    hi = lo * new_shape[j]
    return tuple(
        d for d in range(len(shape)) if shape[d] != 1 and math.prod(shape[d + 1 :]) < hi and lo < math.prod(shape[d:])
    )


def is_contiguous(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """torch's ``is_contiguous()`` (row-major; size-1 dims and empty tensors always qualify).

    >>> is_contiguous((3, 1, 4), (4, 99, 1)), is_contiguous((3, 4), (1, 3)), is_contiguous((0, 4), (9, 9))
    (True, False, True)
    """
    if math.prod(shape) == 0:
        return True
    want = 1
    for s, st in zip(reversed(tuple(shape)), reversed(tuple(stride))):
        if s != 1:
            if st != want:
                return False
            want *= s
    return True


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides, as a fresh ``contiguous()`` tensor gets them (size 0 counts as 1)."""
    out, step = [], 1
    for s in reversed(tuple(shape)):
        out.append(step)
        step *= max(s, 1)
    return tuple(reversed(out))


def viewable_permutation(
    shape: Sequence[int], stride: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...] | None:
    """A ``permute`` order after which ``.view(new_shape)`` works, or None.

    Tries the storage order first (dims sorted by stride, largest first: it undoes a
    transpose), then every order for up to :data:`MAX_PERMUTED_DIMS` dims; never the identity.
    """
    shape, stride = tuple(shape), tuple(stride)
    n = len(shape)
    first = tuple(sorted(range(n), key=lambda d: (-stride[d], d)))
    rest = itertools.permutations(range(n)) if n <= MAX_PERMUTED_DIMS else iter(())
    for order in itertools.chain([first], rest):
        if order == tuple(range(n)):
            continue
        if view_strides([shape[d] for d in order], [stride[d] for d in order], new_shape) is not None:
            return tuple(order)
    return None
