"""ONNX models, initializers only, with a bounded protobuf walk of our own (no ``onnx`` import).

An ONNX file is a protobuf ``ModelProto``; its ``graph`` (field 7) lists ``initializer``
tensors (field 5), each a ``TensorProto``: ``dims``, ``data_type``, ``name`` and the data,
either inline (``raw_data``, or packed ``float_data``/``double_data``) or in another file
(``data_location = EXTERNAL`` with ``external_data`` entries ``location``, ``offset``,
``length``). This module walks only those messages; every other field (the nodes, the
docstrings) and every tensor's bytes are skipped with a seek, never read.

Each initializer is a view of the file its bytes are in, at their absolute byte range: an
inline one of the ``.onnx`` file where its ``raw_data`` (or packed float field) sits, an
external one of its data file at ``offset`` (``offset + length``; without ``length``, to the end
of the file, as ``onnx.load`` reads it). Two initializers naming the same bytes are two views of
one storage (a tie); bytes of a data file no initializer names are unreferenced. Sub-byte types
(INT4, UINT4, FLOAT4E2M1, ...) are ``uint8`` views of their packed bytes with
:class:`~tensorviz.core.records.Logical` on the record. Initializers stored as varints
(``int32_data``, ``int64_data``, ...) or strings have no byte view and are skipped, saying so,
as are sparse initializers; initializers of subgraphs (``If``/``Loop`` bodies) and ``Constant``
nodes are not read.

Refused with a named :class:`~tensorviz.core.errors.FileFormatError`: a length or varint that
runs past its message or the file, an unknown data type, a negative dimension, a data location
outside the model's folder (``onnx.load`` refuses those too), a missing data file, a range past
the end of its data file, or a ``length`` that is not the tensor's size.
"""

from __future__ import annotations

import math
import os
from typing import Any

from tensorviz.core.errors import FileFormatError, TooLargeError
from tensorviz.core.facts import OnnxFacts
from tensorviz.core.records import Logical, Skipped, StorageInfo
from tensorviz.core.rows import Field
from tensorviz.sources.formats.bounded import Reader
from tensorviz.sources.parts import Part, check_regular, open_regular

__all__ = ["ONNX_TYPES", "onnx_part"]

MAX_INITIALIZERS = 1_000_000
MAX_DIMS = 64  # torch's own limit; ONNX sets none
MAX_TEXT = 1 << 16  # a name, an external_data key or location
#: protobuf refuses messages over 2 GiB; no ONNX model proto is larger.
MAX_PROTO_BYTES = 2 << 30
_LEN, _VARINT, _I64, _I32 = 2, 0, 1, 5

#: ONNX data type -> (name, bits per element, torch dtype name or "" for packed sub-byte types).
ONNX_TYPES: dict[int, tuple[str, int, str]] = {
    1: ("FLOAT", 32, "float32"), 2: ("UINT8", 8, "uint8"), 3: ("INT8", 8, "int8"), 4: ("UINT16", 16, "uint16"),
    5: ("INT16", 16, "int16"), 6: ("INT32", 32, "int32"), 7: ("INT64", 64, "int64"), 8: ("STRING", 0, ""),
    9: ("BOOL", 8, "bool"), 10: ("FLOAT16", 16, "float16"), 11: ("DOUBLE", 64, "float64"),
    12: ("UINT32", 32, "uint32"), 13: ("UINT64", 64, "uint64"), 14: ("COMPLEX64", 64, "complex64"),
    15: ("COMPLEX128", 128, "complex128"), 16: ("BFLOAT16", 16, "bfloat16"),
    17: ("FLOAT8E4M3FN", 8, "float8_e4m3fn"), 18: ("FLOAT8E4M3FNUZ", 8, "float8_e4m3fnuz"),
    19: ("FLOAT8E5M2", 8, "float8_e5m2"), 20: ("FLOAT8E5M2FNUZ", 8, "float8_e5m2fnuz"),
    21: ("UINT4", 4, ""), 22: ("INT4", 4, ""), 23: ("FLOAT4E2M1", 4, ""), 24: ("FLOAT8E8M0", 8, "float8_e8m0fnu"),
    25: ("UINT2", 2, ""), 26: ("INT2", 2, ""), 27: ("FLOAT6E2M3", 6, ""), 28: ("FLOAT6E3M2", 6, ""),
}  # fmt: skip


# -- protobuf wire format ----------------------------------------------------------------------------
def _varint(r: Reader, what: str) -> int:
    buf, i = r.buf, r.i
    if i < len(buf) and buf[i] < 0x80:  # most tags and lengths: one byte
        r.i = i + 1
        return buf[i]
    shift = value = 0
    for _ in range(10):
        r.need(1, what)
        b = r.buf[r.i]
        r.i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7
    raise FileFormatError(f"{r.path}: a varint in {what} at byte {r.at} is more than 10 bytes long; not protobuf")


def _fields(r: Reader, end: int, what: str):
    """(field number, wire type, payload) of each field of a message ending at byte ``end``:
    the payload is the varint's value, or for a length-delimited field its (start, stop)."""
    while r.base + r.i < end:
        tag = _varint(r, what)  # messages name ``what`` only when a read fails
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            yield number, wire, _varint(r, what)
        elif wire == _LEN:
            n = _varint(r, what)
            start = r.base + r.i
            if n > end - start:
                raise FileFormatError(
                    f"{r.path}: field {number} of {what} at byte {start} claims {n} bytes, but its message "
                    f"ends at byte {end}; the file is corrupt or not ONNX"
                )
            yield number, wire, (start, start + n)
            at = r.base + r.i
            if at < start + n:  # the consumer did not read it: skip it, unread
                r.skip(start + n - at, what)
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            r.skip(size, what)
            yield number, wire, None
        else:
            raise FileFormatError(f"{r.path}: {what} has wire type {wire} at byte {r.at}; not protobuf (ONNX)")
    if r.at != end:
        raise FileFormatError(f"{r.path}: a field of {what} runs past its message's end (byte {end})")


def _text(r: Reader, span: tuple[int, int], what: str) -> str:
    n = span[1] - span[0]
    if n > MAX_TEXT:
        raise TooLargeError(f"{r.path}: {what} is {n:,} bytes; tensorviz reads names and locations of up to {MAX_TEXT:,}")  # fmt: skip
    r.need(n, what)
    raw = r.buf[r.i : r.i + n]
    r.i += n
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FileFormatError(f"{r.path}: {what} is not UTF-8 text") from None


# -- the model, the graph, the initializers ----------------------------------------------------------
def _initializers(r: Reader) -> list[dict[str, Any]]:
    """Every initializer of the main graph, as parsed fields (no data read)."""
    out: list[dict[str, Any]] = []
    for number, wire, value in _fields(r, r.size, "the model"):
        if number == 7 and wire == _LEN:
            for n2, w2, v2 in _fields(r, value[1], "the graph"):
                if n2 in (5, 15) and w2 == _LEN:
                    t = _tensor(r, v2, len(out)) if n2 == 5 else {"sparse": True, "span": v2}
                    out.append(t)
                    if len(out) > MAX_INITIALIZERS:
                        raise TooLargeError(f"{r.path}: more than {MAX_INITIALIZERS:,} initializers")
    return out


def _tensor(r: Reader, span: tuple[int, int], k: int) -> dict[str, Any]:
    t: dict[str, Any] = {"dims": [], "type": 0, "name": f"<initializer {k}>", "external": {}, "location": 0}
    what = f"initializer {k}"
    for number, wire, value in _fields(r, span[1], what):
        if number == 1:  # dims: packed or one varint each
            if wire == _LEN:
                while r.at < value[1] and len(t["dims"]) <= MAX_DIMS:
                    t["dims"].append(_varint(r, what))
            else:
                t["dims"].append(value)
            if len(t["dims"]) > MAX_DIMS:
                raise FileFormatError(f"{r.path}: {what} has more than {MAX_DIMS} dims; no tensor has that many")
        elif number == 2 and wire == _VARINT:
            t["type"] = value
        elif number == 8 and wire == _LEN:
            t["name"] = _text(r, value, f"the name of {what}")
            what = f"initializer {t['name']!r}"
        elif number in (9, 4, 10) and wire == _LEN:  # raw_data, packed float_data, packed double_data
            t["inline"] = (number, *value)
        elif number in (4, 5, 6, 7, 10, 11):
            t["other"] = number
        elif number == 13 and wire == _LEN:
            key = val = None
            for n3, w3, v3 in _fields(r, value[1], f"an external_data entry of {what}"):
                if w3 == _LEN and n3 in (1, 2):
                    text = _text(r, v3, f"an external_data entry of {what}")
                    key, val = (text, val) if n3 == 1 else (key, text)
            if key is not None:
                t["external"][key] = val or ""
        elif number == 14 and wire == _VARINT:
            t["location"] = value
    return t


# -- views -------------------------------------------------------------------------------------------
def onnx_part(path: str) -> Part:
    """The initializers of an ONNX model: the .onnx file and each external data file are storages."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        r = Reader(path, f, size, MAX_PROTO_BYTES, "ONNX model")
        tensors = _initializers(r)
    key, base = ("file", path), os.path.basename(path)
    part = Part(storages=[StorageInfo(key, "file", size, base)], label=base)
    files: dict[str, int] = {}
    for t in tensors:
        _add(path, t, part, files)
    part.storages.extend(StorageInfo(("file", p), "file", n, os.path.basename(p)) for p, n in files.items())
    if not any(
        row[Field.TOKEN] == key for row in part.rows
    ):  # every initializer is external: the model file holds none
        del part.storages[0]
    part.meta["header"] = {path: (0, 0), **{p: (0, 0) for p in files}}  # each file is one storage of packed tensors
    part.meta["onnx"] = OnnxFacts(len(tensors), tuple(os.path.basename(p) for p in files))
    return part


def _add(path: str, t: dict[str, Any], part: Part, files: dict[str, int]) -> None:
    name = t["name"]
    if t.get("sparse"):
        part.skipped.append(Skipped(name, "a sparse initializer (values and indices): no dense byte view"))
        return
    where = f"{path}: initializer {name!r}"
    facts = ONNX_TYPES.get(t["type"])
    if facts is None:
        raise FileFormatError(f"{where}: data type {t['type']} is not an ONNX tensor type (known: 1-28)")
    tname, bits, dtype = facts
    dims = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in t["dims"])
    if any(d < 0 for d in dims):
        raise FileFormatError(f"{where}: dims {list(dims)} hold a negative size")
    nbytes = -(-math.prod(dims) * bits // 8)
    if t["location"] == 1 or t["external"]:
        key, start, fsize = _external(path, where, t["external"], nbytes, files)
    elif "inline" in t:
        field, start, stop = t["inline"]
        if field != 9 and tname != {4: "FLOAT", 10: "DOUBLE"}[field]:
            part.skipped.append(Skipped(name, f"{tname} data in field {field}: not its own type's bytes"))
            return
        if stop - start != nbytes:
            raise FileFormatError(f"{where}: its inline data holds {stop - start} bytes but {tname}{list(dims)} needs {nbytes}")  # fmt: skip
        key, fsize = part.storages[0].key, part.storages[0].nbytes
    else:
        how = {5: "int32_data", 6: "string_data", 7: "int64_data", 11: "uint64_data"}.get(
            t.get("other", 0), "no data field"
        )
        part.skipped.append(Skipped(name, f"{tname}{list(dims)} stored as {how} (varints or strings): no byte view"))
        return
    _view(part, name, key, fsize, (tname, bits, dtype), dims, start, nbytes)


def _view(part: Part, name: str, key: tuple, fsize: int, facts: tuple, dims: tuple, start: int, nbytes: int) -> None:
    tname, bits, dtype = facts
    if dtype:
        item = bits // 8
        stride = tuple(math.prod(dims[k + 1 :]) for k in range(len(dims)))
        part.rows.append((name, key, "file", fsize, (dtype, item), dims, stride, start // item, start))
        if start % item:
            part.notes[name] = f"byte offset {start} is not a multiple of itemsize {item}"
        return
    part.rows.append((name, key, "file", fsize, ("uint8", 1), (nbytes,), (1,), start, start))
    block = 8 // math.gcd(bits, 8)  # the fewest elements that fill whole bytes
    part.logical[name] = Logical(tname, dims, block, bits * block // 8)


def _external(path: str, where: str, info: dict[str, str], nbytes: int, files: dict[str, int]) -> tuple:
    """(storage key, start, data file size) of an external initializer, checked."""
    loc = info.get("location", "")
    folder = os.path.dirname(os.path.abspath(path))
    full = os.path.join(folder, loc)
    if full not in files:  # each data file is checked once
        real, root = os.path.realpath(full), os.path.realpath(folder)
        if not loc or os.path.isabs(loc) or not real.startswith(root.rstrip(os.sep) + os.sep):
            raise FileFormatError(
                f"{where}: external data location {loc!r} is not a file inside the model's folder; onnx.load "
                f"refuses such a path, and tensorviz reads no file outside the folder"
            )
        try:
            files[full] = check_regular(full).st_size
        except FileNotFoundError:
            raise FileFormatError(f"{where}: its external data file {loc!r} does not exist next to the model") from None
    fsize = files[full]
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else fsize - offset
    except ValueError:
        raise FileFormatError(f"{where}: external data offset/length {info.get('offset')!r}/{info.get('length')!r} are not integers") from None  # fmt: skip
    if offset < 0 or length < 0 or offset + length > fsize:
        raise FileFormatError(f"{where}: bytes [{offset}, {offset + length}) of {loc!r} run past its end ({fsize} bytes)")  # fmt: skip
    if length != nbytes:
        raise FileFormatError(f"{where}: external data length {length} but its type and dims need {nbytes} bytes")
    return ("file", full), offset, fsize
