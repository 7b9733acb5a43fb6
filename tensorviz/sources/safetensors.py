"""safetensors headers: read and validate the 8-byte length and the JSON header, nothing else.

The standard library reads the header (no mmap, no data, no torch: ``import torch`` would cost
seconds, so dtype sizes come from the format's own table). A
header entry becomes a row whose storage is the file itself and whose span is its absolute byte
range, ``8 + header_len + data_offsets``.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from operator import itemgetter
from typing import Any, NamedTuple

from tensorviz.core.errors import FileFormatError
from tensorviz.core.records import Skipped, StorageInfo
from tensorviz.sources.parts import MAX_HEADER_BYTES, Part, parse_json, short

#: safetensors dtype code -> torch dtype attribute name (byte sizes always come from torch).
SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
    "C64": "complex64",
}
# Packed sub-byte codes: elements are not byte-addressable, so no strided view exists. Their
# bit width is part of the safetensors format (torch has no per-element dtype to ask).
_SUB_BYTE_BITS = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


class HeaderEntry(NamedTuple):
    """One tensor of a safetensors header, validated: name, dtype code, shape, data offsets.

    A NamedTuple rather than a dataclass: a 20,000-tensor header makes 20,000 of them.
    """

    name: str
    code: str
    shape: tuple[int, ...]
    begin: int
    end: int


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
    problems: tuple[str, ...] = ()


def read_safetensors_header(path: str | os.PathLike) -> SafetensorsHeader:
    """Read and validate a safetensors header without touching the tensor data.

    Args:
        path: the ``.safetensors`` file.

    Returns:
        A :class:`SafetensorsHeader` with entries sorted by data offset.

    Raises:
        FileFormatError: anything that is not a well-formed header (message names the tensor).

    >>> h = read_safetensors_header("model.safetensors")   # doctest: +SKIP
    >>> h.data_start, h.entries[0].name                     # doctest: +SKIP
    """
    p = os.fspath(path)
    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        n = _header_length(p, f.read(8), size)
        raw = f.read(n)
    if len(raw) != n:  # the file shrank while we read it
        raise FileFormatError(f"{p}: truncated header: expected {n} bytes, read {len(raw)}")
    obj = _parse_header_json(p, raw)
    if not isinstance(obj, dict):
        raise FileFormatError(
            f"{p}: the header must be a JSON object of tensors, got a JSON "
            f"{type(obj).__name__}; this is not a safetensors file"
        )
    metadata = _file_metadata(p, obj.pop("__metadata__", None))
    entries = [_entry(p, name, info) for name, info in obj.items()]
    entries.sort(key=itemgetter(3, 4))  # (begin, end)
    problems = _check_offsets(p, entries, size - 8 - n)
    return SafetensorsHeader(p, size, 8 + n, tuple(entries), metadata, tuple(problems))


def _header_length(path: str, first8: bytes, size: int) -> int:
    if size == 0:
        raise FileFormatError(
            f"{path}: the file is empty (0 bytes); a safetensors file starts with an 8-byte header length"
        )
    if len(first8) < 8:
        raise FileFormatError(
            f"{path}: the file is {size} bytes, too short for the 8-byte header "
            f"length a safetensors file starts with (truncated download?)"
        )
    n = struct.unpack("<Q", first8)[0]
    if n > MAX_HEADER_BYTES:
        raise FileFormatError(
            f"{path}: the header claims {n} bytes, over the {MAX_HEADER_BYTES}-byte "
            f"limit safetensors itself enforces; the file is corrupt or not safetensors"
        )
    if n > size - 8:
        raise FileFormatError(
            f"{path}: the header claims {n} bytes but only {size - 8} follow the "
            f"length field; the file is truncated or not safetensors"
        )
    return n


def _parse_header_json(path: str, raw: bytes) -> Any:
    """Parse a header with the fast parser; re-parse strictly when a name may be given twice.

    The strict parser (which names the repeated key) costs a Python call per object, a quarter
    of the analysis of a 20,000-tensor header, so it runs only when :func:`_may_repeat_a_name`
    cannot rule a repeat out.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return parse_json(path, raw, "header")  # the same failure, with a precise message
    if isinstance(obj, dict) and _may_repeat_a_name(raw, obj):
        obj = parse_json(path, raw, "header")
    return obj


def _may_repeat_a_name(raw: bytes, obj: dict) -> bool:
    """False only if no object in ``raw`` names a key twice, or the header is invalid anyway.

    Every key is followed by one colon; any other colon is inside a string. Without ``\\u``
    escapes each colon of a parsed name or ``__metadata__`` string is a colon of ``raw``, so
    ``raw.count(b":")`` minus those is at least the number of keys written. A valid header
    keeps, after parsing, one key per tensor and per metadata item, and three per tensor
    entry: if that equals the upper bound, no key was written twice (and overwritten).
    """
    md = obj.get("__metadata__", {})
    if not isinstance(md, dict) or b"\\u" in raw:
        return True
    n = len(obj) - ("__metadata__" in obj)
    kept = len(obj) + 3 * n + len(md)
    strings = "\0".join(obj) + "\0".join(md) + "\0".join(v for v in md.values() if isinstance(v, str))
    return raw.count(b":") - strings.count(":") != kept


def _file_metadata(path: str, md: Any) -> dict[str, str]:
    if md is None:
        return {}
    if not isinstance(md, dict) or not all(isinstance(v, str) for v in md.values()):
        raise FileFormatError(
            f"{path}: __metadata__ must map strings to strings, got {short(md)}; safetensors refuses such a file"
        )
    return md


# -- one header entry ------------------------------------------------------------------------------
def _entry(path: str, name: str, info: Any) -> HeaderEntry:
    """Validate one header entry: a fast path for the well-formed case, else the precise error."""
    if type(info) is dict:
        code, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        facts = _dtype_facts(code) if type(code) is str else None
        if facts and type(shape) is list and type(offs) is list and len(offs) == 2:
            begin, end = offs
            if type(begin) is int and type(end) is int and 0 <= begin <= end:
                numel = 1
                for size in shape:
                    if type(size) is not int or size < 0:
                        break
                    numel *= size
                else:
                    if numel * facts[2] == (end - begin) * 8:
                        return HeaderEntry(name, code, tuple(shape), begin, end)
    return _checked_entry(path, name, info)


def _checked_entry(path: str, name: str, info: Any) -> HeaderEntry:
    """The slow path of :func:`_entry`: each check in turn, raising the first that fails."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
        raise FileFormatError(f"{where}: expected an object with dtype, shape and data_offsets, got {short(info)}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise FileFormatError(f"{where}: missing {', '.join(missing)}")
    code, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(_is_count(s) for s in shape):
        raise FileFormatError(f"{where}: shape must be a list of non-negative integers, got {short(shape)}")
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_count(o) for o in offs)):
        raise FileFormatError(
            f"{where}: data_offsets must be [begin, end] with non-negative integers, got {short(offs)}"
        )
    begin, end = offs
    if end < begin:
        raise FileFormatError(f"{where}: data_offsets {offs} are out of order (end before begin)")
    numel = math.prod(shape)
    bits = _element_bits(where, code)
    if numel * bits != (end - begin) * 8:
        need = f"{numel * bits / 8:g}"
        raise FileFormatError(
            f"{where}: data_offsets {offs} hold {end - begin} bytes but "
            f"{code}{shape} needs {need} bytes (shape x dtype size)"
        )
    return HeaderEntry(name, code, tuple(shape), begin, end)


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


# -- dtype codes -----------------------------------------------------------------------------------
#: Bytes per element of each code, as the safetensors format defines them (``Dtype::bitsize``).
_ITEMSIZE = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E4M3FNUZ": 1,
    "F8_E5M2FNUZ": 1,
    "F8_E8M0": 1,
    "C64": 8,
}


@cache
def _dtype_facts(code: str) -> tuple[str, int, int] | None:
    """(torch dtype name, itemsize, bits per element) of a code; None if unknown.

    Packed sub-byte codes have no torch dtype: name "" and itemsize 0.
    """
    if code in _SUB_BYTE_BITS:
        return ("", 0, _SUB_BYTE_BITS[code])
    name = SAFETENSORS_DTYPES.get(code)
    if name is None:
        return None
    itemsize = _ITEMSIZE[code]
    return (name, itemsize, itemsize * 8)


def _element_bits(where: str, code: Any) -> int:
    facts = _dtype_facts(code) if isinstance(code, str) else None
    if facts is None:
        known = ", ".join(SAFETENSORS_DTYPES)
        raise FileFormatError(f"{where}: unknown dtype {short(code)}; known codes: {known}")
    return facts[2]


# -- the data section --------------------------------------------------------------------------------
def _check_offsets(path: str, entries: list[HeaderEntry], data_len: int) -> list[str]:
    """Errors for bytes outside the data section or shared by two tensors; notes for gaps."""
    problems: list[str] = []
    prev: HeaderEntry | None = None
    tiled = 0  # safetensors requires tensors (sorted by offset) to tile the data exactly
    for e in entries:
        if e.end > data_len:
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] end past the data "
                f"section, which holds {data_len} bytes; the file is truncated or the header is wrong"
            )
        if e.begin == e.end:
            continue
        if prev is not None and e.begin < prev.end:
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] overlap tensor "
                f"{prev.name!r} [{prev.begin}, {prev.end}]; each tensor needs its own bytes"
            )
        if e.begin > tiled:
            after = f"after {prev.name!r}" if prev else "at the start of the data section"
            problems.append(
                f"{os.path.basename(path)}: {e.begin - tiled} bytes {after} belong to no "
                f"tensor (safetensors.safe_open refuses files with gaps)"
            )
        tiled, prev = e.end, e
    if tiled < data_len:
        problems.append(
            f"{os.path.basename(path)}: the last {data_len - tiled} bytes belong to no "
            f"tensor (safetensors.safe_open refuses a file not fully covered)"
        )
    return problems


@lru_cache(maxsize=4096)
def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
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
    for e in header.entries:
        dtype, itemsize, bits = _dtype_facts(e.code)
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
                _contiguous_stride(e.shape),
                e.begin // itemsize,
                ds + e.begin,
            )
        )
    part.meta["header"] = {header.path: (0, ds)}
    if header.metadata:
        part.meta["__metadata__"] = {header.path: dict(header.metadata)}
    part.problems.extend(header.problems)
    return part
