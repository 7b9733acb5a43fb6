"""Memory identity: storage objects whose address ranges overlap are one memory.

Two ``torch.UntypedStorage`` objects can hold the same bytes: ``torch.from_numpy`` twice on one
array, ``torch.frombuffer`` twice on one buffer, ``t.set_(s.untyped_storage()[a:b])``, or
numpy views of one array each turned into a tensor. On devices with real addresses every
storage covers ``[data_ptr, data_ptr + nbytes)``; storages whose ranges overlap (transitively)
are one *memory*, keyed like its first storage in source order, whose bytes are counted from
its lowest address. Storages with no address (meta and fake tensors, empty and freed storages,
devices without a flat address space) keep their own identity.

Numpy only: the collector's rows carry each storage object's address as a tenth field; one sort
of the rows' ranges finds the memories, so the common case (no aliasing) costs O(n log n) in
numpy and rewrites no row. The work runs when the Layout is first asked a question
(:attr:`tensorviz.core.rows.Rows.finish`), not during ``analyze``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from tensorviz.core.rows import Field, Rows

__all__ = ["ADDRESSED", "FREED", "FILE_SPACE", "Memory", "address", "finish", "memories", "rekey"]

#: Device types whose ``data_ptr`` is a real address in one flat space per device.
ADDRESSED = frozenset({"cpu", "cuda", "mps", "xpu"})

_TOKEN, _NBYTES, _ADDRESS = itemgetter(Field.TOKEN), itemgetter(Field.NBYTES), itemgetter(Field.EXTRA)


@dataclass(frozen=True)
class Memory:
    """One memory made of two or more storage objects.

    ``device`` is its device's name, ``token`` the storage id that keys it (its first storage
    in source order), ``nbytes``
    its extent from the lowest to one past the highest address, ``parts`` each storage
    object's ``(storage id, byte offset in the memory, nbytes)`` in address order.
    """

    device: str
    token: int
    nbytes: int
    parts: tuple[tuple[int, int, int], ...]


FREED = "storage freed: views point past its end"

#: Where file-backed memory lives in the address space the memories are found in: far above any
#: process address (user space ends below 2**48), one 4 TiB stretch per file.
FILE_SPACE = 1 << 61
_FILES: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) -> the file's stretch number


def address(st: Any) -> int:
    """The address a storage's bytes are identified by: for a shared map of a file
    (``UntypedStorage.from_file(name, shared=True)``, ``torch.from_file(..., shared=True)``;
    torch reports its ``filename``) the file's own place, so two maps of one file region are one
    memory, as they are (a write through one shows in the other); else ``data_ptr()``. torch
    maps a file from its first byte, so the map's offset in the file is 0. A private
    (copy-on-write) map reports no file name and keeps its own address."""
    name = st._get_filename()  # (what the ``filename`` property returns, without its Python frame)
    if name is None:
        return st.data_ptr()
    try:
        info = os.stat(name)
    except OSError:  # the file is gone: its map is memory of its own
        return st.data_ptr()
    k = _FILES.setdefault((info.st_dev, info.st_ino), len(_FILES))
    return FILE_SPACE + (k << 42)


def finish(rows: Rows) -> dict[str, object]:
    """The live collector's deferred step (``Rows.finish``, run by the Layout on first use, so
    ``analyze`` itself pays only for reading each storage's address).

    Keys every row of a shared memory as that memory (see :func:`rekey`) and notes every
    non-empty view of a freed storage (0 bytes, as ``t.untyped_storage().resize_(0)`` leaves
    it: FSDP does so between steps). Returns the metadata to add: ``storage_objects``
    (``{memory key: ((byte offset, nbytes) of each storage object, ...)}``) and ``problems``.
    """
    columns = _columns(rows.rows)
    if columns is None:
        return {}
    meta: dict[str, object] = {}
    found = _memories(rows.rows, *columns)
    if found:
        rows.rows[:] = rekey(rows.rows, found, rows.notes)  # in place: the Layout holds this list
        shared = {id(m): m for m, _ in found.values()}.values()  # one entry per memory, not per object
        meta["storage_objects"] = {(m.device, m.token): tuple((at, n) for _, at, n in m.parts) for m in shared}
    freed = _freed(rows, columns[1])
    if freed:
        meta["problems"] = freed
    return meta


def _columns(rows: list[tuple]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(address, storage nbytes)`` of every row, or None for rows without addresses."""
    n = len(rows)
    if not n or len(rows[0]) < 10:
        return None
    try:
        ptr = np.fromiter(map(_ADDRESS, rows), np.int64, n)
    except OverflowError:  # an address past 2**63 (none seen in practice)
        ptr = np.fromiter(map(_ADDRESS, rows), np.uint64, n)
    return ptr, np.fromiter(map(_NBYTES, rows), ptr.dtype, n)


def _freed(rows: Rows, size: np.ndarray) -> list[str]:
    """Note each non-empty view of a 0-byte storage; one problem per such storage."""
    by_storage: dict[int, list[str]] = {}
    for i in np.flatnonzero(size == 0).tolist():
        row = rows.rows[i]
        if 0 not in row[Field.SHAPE]:  # it addresses at least one element, past the end of no bytes
            rows.notes[i] = f"{rows.notes[i]}; {FREED}" if i in rows.notes else FREED
            by_storage.setdefault(row[Field.TOKEN], []).append(row[Field.NAME])
    return [
        f"{FREED} (0 bytes, as after t.untyped_storage().resize_(0)): {_names(names)}" for names in by_storage.values()
    ]


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def memories(rows: list[tuple]) -> dict[int, tuple[Memory, int]]:
    """``{storage id: (its memory, its byte offset in the memory)}`` for every storage object
    that shares its memory with another one; empty when none does.

    ``rows`` are collector rows ``(name, storage id, device, storage nbytes, ..., address)``
    (:class:`tensorviz.core.rows.Rows` with a tenth field; address 0: none). One sort of the
    rows' ranges; devices are read only where two storage objects overlap.

    >>> r = lambda sid, ptr: ("x", sid, "cpu", 16, ("uint8", 1), (16,), (1,), 0, None, ptr)
    >>> found = memories([r(7, 1000), r(8, 1008), r(9, 1032), r(7, 1000)])
    >>> found[8]
    (Memory(device='cpu', token=7, nbytes=24, parts=((7, 0, 16), (8, 8, 16))), 8)
    >>> 9 in found
    False
    """
    columns = _columns(rows)
    return _memories(rows, *columns) if columns is not None else {}


def _memories(rows: list[tuple], ptr: np.ndarray, size: np.ndarray) -> dict[int, tuple[Memory, int]]:
    """:func:`memories` from the rows' address and size columns."""
    live = np.flatnonzero((ptr != 0) & (size > 0))
    if live.size < 2:
        return {}
    order = live[np.argsort(ptr[live], kind="stable")]
    p = ptr[order]
    reach = np.maximum.accumulate(p + size[order])
    # A row starts a new run of overlapping ranges when it begins at or past every earlier end.
    new = np.flatnonzero(np.r_[True, p[1:] >= reach[:-1]])
    if new.size == order.size:
        return {}
    tokens = np.fromiter(map(_TOKEN, rows), np.int64, len(rows))[order]
    several = np.flatnonzero(np.minimum.reduceat(tokens, new) != np.maximum.reduceat(tokens, new))
    bounds = np.r_[new, order.size]
    found: dict[int, tuple[Memory, int]] = {}
    for m in several.tolist():  # runs of two or more storage objects: rare
        by_device: dict[str, dict[int, tuple[int, int, int, int]]] = {}
        for i in order[bounds[m] : bounds[m + 1]].tolist():  # address order
            row = rows[i]
            # (first row, storage id, address, nbytes) of each storage object, by device
            by_device.setdefault(str(row[Field.DEVICE]), {}).setdefault(
                row[Field.TOKEN], (i, row[Field.TOKEN], row[Field.EXTRA], row[Field.NBYTES])
            )
        for device, members in by_device.items():
            if device.split(":")[0] in ADDRESSED:
                _merge(device, [members[t] for t in sorted(members, key=lambda t: members[t][2])], found)
    return found


def _merge(device: str, members: list[tuple[int, int, int, int]], found: dict[int, tuple[Memory, int]]) -> None:
    """The memories of one device's storages ``(first appearance, id, address, nbytes)`` in
    address order (after splitting by device, a run may fall apart)."""
    run: list[tuple[int, int, int, int]] = []
    reach = -1
    for m in [*members, None]:
        if m is None or (run and m[2] >= reach):
            if len(run) > 1:
                _add(device, run, found)
            run, reach = [], -1
        if m is not None:
            run.append(m)
            reach = max(reach, m[2] + m[3])


def _add(device: str, run: list[tuple[int, int, int, int]], found: dict[int, tuple[Memory, int]]) -> None:
    base = run[0][2]
    parts = tuple((t, ptr - base, nbytes) for _, t, ptr, nbytes in run)
    stop = max(ptr + nbytes for _, _, ptr, nbytes in run)
    memory = Memory(device=device, token=min(run)[1], nbytes=stop - base, parts=parts)
    for t, delta, _ in parts:
        found[t] = (memory, delta)


def rekey(rows: list[tuple], found: dict[int, tuple[Memory, int]], notes: dict[int, str]) -> list[tuple]:
    """``rows`` with every row of a shared memory keyed by the memory, sized as it, and its
    byte start and element offset counted from the memory's lowest address; other rows are
    kept as they are. A view starting between two elements of its dtype keeps its storage
    object's offset and gets a note in ``notes`` (by row), as safetensors files do."""
    if not found:
        return rows
    tokens = np.fromiter(map(_TOKEN, rows), np.int64, len(rows))
    hit = np.flatnonzero(np.isin(tokens, np.fromiter(found, np.int64, len(found))))
    out = list(rows)
    for i in hit.tolist():
        row = rows[i]
        memory, delta = found[row[Field.TOKEN]]
        itemsize = row[Field.DTYPE][Field.ITEMSIZE]
        offset = row[Field.OFFSET]
        start = delta + (offset * itemsize if row[Field.START] is None else row[Field.START])
        offset, odd = divmod(start, itemsize) if itemsize else (offset, 0)
        if odd:
            offset = row[Field.OFFSET]
            note = f"starts at byte {start} of its memory, not a multiple of itemsize {itemsize}"
            notes[i] = f"{notes[i]}; {note}" if i in notes else note
        out[i] = (
            *(row[Field.NAME], memory.token, row[Field.DEVICE], memory.nbytes),
            *(row[Field.DTYPE], row[Field.SHAPE], row[Field.STRIDE], offset, start, row[Field.EXTRA]),
        )
    return out
