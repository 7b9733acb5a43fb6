"""NumPy files, header only: ``.npy`` arrays and ``.npz`` archives of them.

A ``.npy`` file is the magic ``\\x93NUMPY``, a version, a header length and a Python-literal
header ``{'descr': ..., 'fortran_order': ..., 'shape': ...}``; the array's bytes follow. Its view
is of the file (``device == "file"``) at the header's end: ``descr`` gives the dtype (numpy's
own :func:`numpy.lib.format.descr_to_dtype`), ``shape`` the shape and ``fortran_order`` the
strides (column-major: the first dimension varies fastest). The header is parsed with
:func:`ast.literal_eval`, as numpy does, and refused where ``np.load`` refuses it: more than
10,000 bytes of header (numpy's ``max_header_size``), keys other than the three, a shape that is
not a tuple of non-negative integers, data past the end of the file. An object array (``descr``
``'|O'`` or a record holding objects) is pickled Python objects: it is refused by name and never
unpickled (in an archive, that member is skipped and the others are read).

An ``.npz`` file is a zip archive of ``.npy`` members (``np.savez``, ``np.savez_compressed``). A
stored member is a view of the archive itself at its absolute offset (local header, then the
``.npy`` header, then the data); a deflated member cannot be viewed in the archive, so it is a
storage of its own (its inflated bytes, ``("file", "ARCHIVE:MEMBER")``, labelled "MEMBER
(deflated)"), and the layout's ``npz`` metadata says where each member is and, for a deflated
one, its compressed and inflated sizes. Only the zip directory and each
member's first bytes are read (at most :data:`MAX_MEMBERS` members).
"""

from __future__ import annotations

import ast
import math
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

from tensorviz.core.errors import FileFormatError, TooLargeError
from tensorviz.core.records import Skipped, StorageInfo
from tensorviz.core.rows import Field
from tensorviz.sources.parts import Part, one_line, open_regular, short

__all__ = ["NpyHeader", "npy_part", "npz_part", "read_npy_header"]

MAGIC = b"\x93NUMPY"
#: numpy's ``max_header_size`` default: np.load refuses a longer header (it may not parse safely).
MAX_NPY_HEADER = 10_000
MAX_MEMBERS = 100_000
_KEYS = {"descr", "fortran_order", "shape"}


@dataclass(frozen=True)
class NpyHeader:
    """A validated ``.npy`` header: where the data starts (from the header's first byte), the
    dtype's name and itemsize, the shape, the strides in elements and the data's size."""

    data_offset: int
    dtype: str
    itemsize: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    nbytes: int
    note: str = ""


def read_npy_header(where: str, head: bytes) -> NpyHeader:
    """Parse the ``.npy`` header at the start of ``head`` (at least its first 10,012 bytes, or
    all there is); ``where`` names the file (and member) in messages.

    Raises:
        FileFormatError: not ``.npy``, or a header ``np.load`` refuses, or an object array.
    """
    if head[:6] != MAGIC:
        raise FileFormatError(f"{where}: not a .npy array: it does not start with the magic bytes '\\x93NUMPY'")
    if len(head) < 10:
        raise FileFormatError(f"{where}: the .npy preamble is cut short ({len(head)} bytes)")
    major = head[6]
    if major not in (1, 2, 3):
        raise FileFormatError(f"{where}: .npy format version {major}.{head[7]}; numpy writes versions 1.0, 2.0 and 3.0")
    size_len = 2 if major == 1 else 4
    hlen = int.from_bytes(head[8 : 8 + size_len], "little")
    start = 8 + size_len
    if hlen > MAX_NPY_HEADER:
        raise FileFormatError(
            f"{where}: the .npy header is {hlen} bytes; np.load refuses headers over {MAX_NPY_HEADER} bytes "
            f"(max_header_size) as possibly unsafe to parse"
        )
    raw = head[start : start + hlen]
    if len(raw) < hlen:
        raise FileFormatError(f"{where}: the .npy header claims {hlen} bytes but the file ends after {len(raw)}")
    return _header_fields(where, raw, major, start + hlen)


def _header_fields(where: str, raw: bytes, major: int, data_offset: int) -> NpyHeader:
    import numpy as np

    try:
        text = raw.decode("utf-8" if major == 3 else "latin1")
        d = ast.literal_eval(text)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError, TypeError) as err:
        raise FileFormatError(f"{where}: the .npy header is not a Python literal: {one_line(err)[:120]}") from None
    if type(d) is not dict or set(d) != _KEYS:
        raise FileFormatError(
            f"{where}: the .npy header must be a dict of exactly 'descr', 'fortran_order' and 'shape', got {short(d)}"
        )
    shape, fortran = d["shape"], d["fortran_order"]
    if type(shape) is not tuple or not all(type(n) is int and n >= 0 for n in shape):
        raise FileFormatError(f"{where}: shape must be a tuple of non-negative integers, got {short(shape)}")
    if type(fortran) is not bool:
        raise FileFormatError(f"{where}: fortran_order must be True or False, got {short(fortran)}")
    try:
        dt = np.lib.format.descr_to_dtype(d["descr"])
    except (TypeError, ValueError, KeyError, SyntaxError, RecursionError) as err:
        raise FileFormatError(
            f"{where}: descr {short(d['descr'])} is not a numpy dtype: {one_line(err)[:120]}"
        ) from None
    if dt.hasobject:
        raise FileFormatError(
            f"{where}: an object array (descr {short(d['descr'])}): its elements are pickled Python objects; "
            f"tensorviz never unpickles (np.load refuses it too unless allow_pickle=True)"
        )
    if dt.itemsize == 0:
        raise FileFormatError(f"{where}: descr {short(d['descr'])} has itemsize 0; there are no bytes to lay out")
    numel = math.prod(shape)
    stride = _strides(shape, fortran)
    note = "big-endian" if dt.byteorder == ">" else ""
    return NpyHeader(data_offset, _dtype_name(dt), dt.itemsize, shape, stride, numel * dt.itemsize, note)


def _dtype_name(dt: Any) -> str:
    """numpy's name of the dtype (``float32``, ``datetime64[ns]``, ``void128`` for a record)."""
    return dt.name if not dt.names else f"record{dt.itemsize * 8}"


def _strides(shape: tuple[int, ...], fortran: bool) -> tuple[int, ...]:
    dims = range(len(shape)) if fortran else reversed(range(len(shape)))
    stride, acc = [0] * len(shape), 1
    for k in dims:
        stride[k] = acc
        acc *= max(shape[k], 1)
    return tuple(stride)


def _row(name: str, key: tuple, nbytes: int, h: NpyHeader, base: int) -> tuple:
    """The view row of an array whose ``.npy`` stream starts at byte ``base`` of its storage."""
    return (name, key, "file", nbytes, (h.dtype, h.itemsize), h.shape, h.stride, 0, base + h.data_offset)


# -- .npy ------------------------------------------------------------------------------------------
def npy_part(path: str) -> Part:
    """One ``.npy`` file: one storage (the file), one view."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        h = read_npy_header(path, f.read(12 + MAX_NPY_HEADER))
    if h.data_offset + h.nbytes > size:
        raise FileFormatError(
            f"{path}: {h.dtype}{list(h.shape)} needs {h.nbytes} bytes after the {h.data_offset}-byte header, but "
            f"the file is {size} bytes; it is truncated"
        )
    key, base = ("file", path), os.path.basename(path)
    part = Part(storages=[StorageInfo(key, "file", size, base)], label=base)
    name = base[:-4] if base.lower().endswith(".npy") else base
    part.rows.append(_row(name, key, size, h, 0))
    if h.note:
        part.notes[name] = h.note
    part.meta["header"] = {path: (0, h.data_offset)}
    return part


# -- .npz ------------------------------------------------------------------------------------------
def npz_part(path: str) -> Part:
    """One ``.npz`` archive: the archive (stored members' views) and a storage per deflated member."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        _check_member_count(path, f, size)
        try:
            with zipfile.ZipFile(f) as zf:
                infos = zf.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as err:
            raise FileFormatError(f"{path}: not a readable zip archive (.npz): {one_line(err)}") from None
        key, base = ("file", path), os.path.basename(path)
        part = Part(storages=[StorageInfo(key, "file", size, base)], label=base)
        members: dict[str, dict[str, Any]] = {}
        for info in infos:
            _member(path, f, size, info, part, members)
    part.meta["npz"] = members
    firsts = [row[Field.START] for row in part.rows if row[Field.TOKEN] == key]
    if firsts:  # zip and .npy headers precede the first stored array
        part.meta["header"] = {path: (0, min(firsts))}
    return part


def _member(path: str, f: BinaryIO, size: int, info: zipfile.ZipInfo, part: Part, members: dict) -> None:
    """Add one member's view (or the reason it has none) to ``part``."""
    name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
    where = f"{path}: member {info.filename!r}"
    if not info.filename.endswith(".npy") or info.is_dir():
        part.skipped.append(Skipped(name, "not a .npy member; np.load does not read it as an array"))
        return
    data_start = _local_data_start(where, f, size, info)
    if info.compress_type == zipfile.ZIP_STORED:
        head = _read_at(f, data_start, min(info.file_size, 12 + MAX_NPY_HEADER))
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        head = _inflate_head(where, f, data_start, info.compress_size)
    else:
        part.skipped.append(Skipped(name, f"compressed with zip method {info.compress_type}; tensorviz reads stored and deflated members"))  # fmt: skip
        return
    try:
        h = read_npy_header(where, head)
    except FileFormatError as err:
        part.skipped.append(Skipped(name, str(err).split(": ", 2)[-1]))  # np.load reads the others
        return
    if h.data_offset + h.nbytes > info.file_size:
        raise FileFormatError(
            f"{where}: {h.dtype}{list(h.shape)} needs {h.nbytes} bytes after its {h.data_offset}-byte header, but "
            f"the member holds {info.file_size} bytes"
        )
    if info.compress_type == zipfile.ZIP_STORED:
        part.rows.append(_row(name, part.storages[0].key, size, h, data_start))
        members[name] = f"stored at bytes [{data_start}, {data_start + info.file_size})"
    else:
        key = ("file", f"{path}:{info.filename}")
        label = f"{info.filename} (deflated)"
        part.storages.append(StorageInfo(key, "file", info.file_size, label))
        part.rows.append(_row(name, key, info.file_size, h, 0))
        members[name] = (
            f"deflated: {info.compress_size} B at bytes [{data_start}, {data_start + info.compress_size}) "
            f"of the archive, {info.file_size} B inflated"
        )
    if h.note:
        part.notes[name] = h.note


def _read_at(f: BinaryIO, at: int, n: int) -> bytes:
    f.seek(at)
    return f.read(n)


def _local_data_start(where: str, f: BinaryIO, size: int, info: zipfile.ZipInfo) -> int:
    """Where a member's data starts: after its local header (whose extra field may differ from
    the directory's), checked to lie in the archive."""
    local = _read_at(f, info.header_offset, 30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise FileFormatError(f"{where}: the zip directory puts its local header at byte {info.header_offset}, where there is none")  # fmt: skip
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    if start + info.compress_size > size:
        raise FileFormatError(
            f"{where}: its {info.compress_size} bytes from byte {start} run past the end of the archive ({size} bytes)"
        )
    return start


def _inflate_head(where: str, f: BinaryIO, at: int, compressed: int) -> bytes:
    """The first bytes of a deflated member, inflated (never more than a .npy header's worth)."""
    want = 12 + MAX_NPY_HEADER
    d = zlib.decompressobj(-15)
    out, left = b"", compressed
    f.seek(at)
    try:
        while len(out) < want and left > 0:
            chunk = f.read(min(left, 1 << 14))
            if not chunk:
                break
            left -= len(chunk)
            out += d.decompress(d.unconsumed_tail + chunk, want - len(out))
    except zlib.error as err:
        raise FileFormatError(f"{where}: its deflated bytes are corrupt ({err})") from None
    return out


def _check_member_count(path: str, f: BinaryIO, size: int) -> None:
    """Refuse an archive whose directory lists more than :data:`MAX_MEMBERS` members, before
    the zip module reads the directory into memory."""
    tail = _read_at(f, max(0, size - 65557), 65557)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or len(tail) < i + 22:
        raise FileFormatError(f"{path}: not a zip archive (.npz): no end of central directory record")
    count = struct.unpack("<H", tail[i + 10 : i + 12])[0]
    if count == 0xFFFF and i >= 20 and tail[i - 20 : i - 16] == b"PK\x06\x07":  # zip64
        at = struct.unpack("<Q", tail[i - 12 : i - 4])[0]
        rec = _read_at(f, at, 56) if at < size else b""
        count = struct.unpack("<Q", rec[32:40])[0] if rec[:4] == b"PK\x06\x06" and len(rec) == 56 else count
    if count > MAX_MEMBERS:
        raise TooLargeError(f"{path}: the archive lists {count:,} members; tensorviz reads .npz files of up to {MAX_MEMBERS:,}")  # fmt: skip
