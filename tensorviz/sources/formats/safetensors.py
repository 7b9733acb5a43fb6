"""safetensors headers: read and validate the 8-byte length and the JSON header, nothing else.

The standard library reads the header (no mmap, no data, no torch: ``import torch`` would cost
seconds, so dtype sizes come from the format's own table). A
header entry becomes a row whose storage is the file itself and whose span is its absolute byte
range, ``8 + header_len + data_offsets``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter

from tensorviz.core.errors import FileFormatError
from tensorviz.core.limits import current as current_limits
from tensorviz.core.limits import exceeded
from tensorviz.core.records import Skipped, StorageInfo
from tensorviz.sources.formats.st_rules import (
    DTYPES,
    HeaderEntry,
    check_tiling,
    dtype_facts,
    entry,
    file_metadata,
    header_length,
    loads,
)
from tensorviz.sources.parts import Part, open_regular, read_exactly

__all__ = [
    "SAFETENSORS_DTYPES",
    "HeaderEntry",
    "SafetensorsHeader",
    "parse_header",
    "read_safetensors_header",
    "safetensors_part",
]

#: safetensors dtype code -> torch dtype attribute name, for the byte-addressable codes.
SAFETENSORS_DTYPES = {code: name for code, (_, name) in DTYPES.items() if name}


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated safetensors header: entries in file order, ``__metadata__`` and sizes.

    ``data_start`` (= 8 + header length) is the absolute position of data offset 0.
    """

    path: str
    file_nbytes: int
    data_start: int
    entries: tuple[HeaderEntry, ...]
    metadata: Mapping[str, str]
    problems: tuple[str, ...] = ()  # always empty: whatever safetensors refuses raises


def read_safetensors_header(path: str | os.PathLike) -> SafetensorsHeader:
    """Read and validate a safetensors header without touching the tensor data.

    Args:
        path: the ``.safetensors`` file.

    Returns:
        A :class:`SafetensorsHeader` with entries sorted by data offset.

    Raises:
        FileFormatError: any header ``safetensors.safe_open`` refuses (the message names the
            rule and the tensor; see :mod:`tensorviz.sources.formats.st_rules`), or a file that is not
            a regular file (a FIFO, a device).

    >>> h = read_safetensors_header("model.safetensors")   # doctest: +SKIP
    >>> h.data_start, h.entries[0].name                     # doctest: +SKIP
    """
    p = os.fspath(path)
    with open_regular(p) as f:
        size = os.fstat(f.fileno()).st_size
        return parse_header(p, size, f.read(9), lambda k: read_exactly(p, f, k, "header"))


def parse_header(p: str, size: int, prefix: bytes, more: Callable[[int], bytes] | None) -> SafetensorsHeader:
    """Validate the header of a ``size``-byte safetensors file whose first bytes are ``prefix``.

    ``prefix`` holds at least the 8-byte length (a local file gives 9 bytes, a remote one its
    first range); ``more(k)`` reads the ``k`` header bytes that follow it, when the prefix does not
    hold the whole header. The same rules apply wherever the bytes come from.
    """
    n = header_length(p, prefix[:9], size)
    raw = prefix[8 : 8 + n]
    if len(raw) < n:
        if more is None:
            raise FileFormatError(f"{p}: the header is {n} bytes, only {len(raw)} were read")
        raw += more(n - len(raw))
    _within_budget(p, raw[:n], None)
    obj = loads(p, raw[:n])
    _within_budget(p, raw[:n], len(obj) - ("__metadata__" in obj))
    metadata = file_metadata(p, obj.pop("__metadata__", None))
    entries = [entry(p, name, info) for name, info in obj.items()]
    entries.sort(key=itemgetter(3, 4))  # (begin, end), as safetensors sorts them
    check_tiling(p, entries, size - 8 - n)
    return SafetensorsHeader(p, size, 8 + n, tuple(entries), metadata)


def _within_budget(p: str, raw: bytes, count: int | None) -> None:
    """Refuse a header of more tensors than ``tv.limits().header_tensors``, by name: first from
    the text (an entry is an object with a ``"data_offsets"`` key, or a list ``[dtype,[shape],
    [offsets]]``, the one place a header writes ``],[``), before the JSON is parsed; then,
    exactly, by ``count``."""
    limit = current_limits().header_tensors
    about = count is None
    if count is None:
        count = raw.count(b'"data_offsets"') + raw.count(b"],[")
    if count > limit:
        how = f"{'about ' if about else ''}{count:,} in this one"
        raise exceeded(f"{p}: the header lists too many tensors", "header_tensors", how, needed=count)


def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The contiguous stride of ``shape``; shared per call of :func:`safetensors_part` (a cache
    across files would keep a hostile file's 8M-dimension shape alive)."""
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(stride))


def safetensors_part(header: SafetensorsHeader) -> Part:
    """The rows of a validated header: one storage (the file), a row per byte-addressable tensor."""
    key, base = ("file", header.path), os.path.basename(header.path)
    part = Part(storages=[StorageInfo(key, "file", header.file_nbytes, base)], label=base)
    ds = header.data_start
    strides: dict[tuple[int, ...], tuple[int, ...]] = {}
    for e in header.entries:
        dtype, itemsize, bits = dtype_facts(e.code) or ("", 0, 0)  # entries are validated: never the default
        if not itemsize:
            part.skipped.append(
                Skipped(
                    e.name,
                    (
                        f"packed {bits}-bit dtype {e.code}{list(e.shape)} at bytes [{ds + e.begin}, {ds + e.end}): "
                        f"elements are not byte-addressable, so there is no strided view to lay out"
                    ),
                )
            )
            part.unlaid[e.name] = e.end - e.begin
            continue
        if e.begin % itemsize:
            part.notes[e.name] = f"data offset {e.begin} is not a multiple of itemsize {itemsize}"
        part.rows.append(
            (
                e.name,
                key,
                "file",
                header.file_nbytes,
                (dtype, itemsize),
                e.shape,
                strides[e.shape] if e.shape in strides else strides.setdefault(e.shape, _contiguous_stride(e.shape)),
                e.begin // itemsize,
                ds + e.begin,
            )
        )
    part.meta["header"] = {header.path: (0, ds)}
    if header.metadata:
        part.meta["__metadata__"] = {header.path: dict(header.metadata)}
    return part
