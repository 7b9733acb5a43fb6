"""Reads shared by the live walks of one call (``tv.diff``): a tensor object on both sides is
read once. Torch-free (the facade enters the block before knowing what it reads)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count
from operator import itemgetter
from typing import Any

__all__ = ["shared_reads", "SharedReads", "SHARED_READS"]


class SharedReads:
    """What the live walks of one :func:`shared_reads` block read: ``(tensor, row)`` per plain
    tensor, in walk order, and the index of those by ``id(tensor)`` (made when a walk starts).

    ``walks`` counts the walks begun; ``first`` is ``(Layout, row of each read)`` of the first
    walk, which the second walk's rows copied from it name (``Rows.copied``: the second
    layout's table is then derived from the first's)."""

    __slots__ = ("read", "_index", "_indexed", "walks", "first", "_storages")

    def __init__(self) -> None:
        self.read: list[tuple[Any, tuple]] = []
        self._index: dict[int, int] = {}
        self._indexed = 0
        self.walks = 0
        self.first: Any = None
        self._storages: dict[int, tuple] | None = None

    def index(self) -> dict[int, int]:
        """``id(tensor) -> its position in read`` of every tensor read so far."""
        fresh = self.read[self._indexed :]
        self._index.update(zip(map(id, map(itemgetter(0), fresh)), count(self._indexed)))
        self._indexed = len(self.read)
        return self._index

    def storages(self, upto: int) -> dict[int, tuple]:
        """``storage id -> a row that read it`` over the first ``upto`` reads: what a later
        walk meeting new tensor objects over storages read before (a ``state_dict()``'s
        detached copies, a model and its state dict) takes for each storage's device, size
        and address instead of reading them again. Every read tensor is held until the block
        ends, so a storage id here names one live storage throughout."""
        if self._storages is None:
            self._storages = {row[1]: row for _, row in self.read[:upto]}
        return self._storages


#: Set by :func:`shared_reads` while its block runs.
SHARED_READS: ContextVar[SharedReads | None] = ContextVar("tensorviz_shared_reads", default=None)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Within this block, the live walks (:mod:`.live`) read each plain tensor object once: a
    walk meeting a tensor an earlier walk of the block read (the two sides of ``tv.diff``: a
    model and its wrapped self, a state dict and a renamed copy) takes that row under its own
    name. The tensors are held until the block ends, so no id is reused meanwhile; nothing is
    kept after it.

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(2)
    >>> with shared_reads():
    ...     a, b = tv.analyze({"w": w}), tv.analyze({"module.w": w})
    >>> b["module.w"].storage == a["w"].storage, SHARED_READS.get()
    (True, None)
    """
    token = SHARED_READS.set(SharedReads())
    try:
        yield
    finally:
        SHARED_READS.reset(token)
