"""GGUF files (llama.cpp, Ollama, LM Studio), header only, with a bounded reader of our own.

A GGUF file is a little-endian header -- the magic ``GGUF``, a version, the tensor and key
counts, the key/value metadata, then one *tensor info* per tensor (name, dimensions, ggml
type, offset) -- followed, at the next multiple of the alignment (``general.alignment``,
default 32), by the data section. This module reads the header with the standard library (no
mmap, no numpy, no torch, no ``gguf`` package) and never reads tensor data.

Each tensor becomes a view of the file (``device == "file"``) at its absolute byte range,
``data start + offset``, of the size the format's block table gives (``ne[0] / block *
type_size`` per row). Float and integer types (F32, F16, BF16, F64, I8..I64) are views of
their own dtype and shape (outermost dimension first, the reverse of GGUF's ``ne``);
block-quantized types (Q4_K, Q8_0, IQ2_XXS, ...) have no element view, so their view reads the
bytes (``uint8``) and :class:`~tensorviz.core.records.Logical` on the record names the ggml type
and the logical shape. The header and the alignment padding after each tensor are bytes no view
reads: they show as unreferenced, and the layout's ``gguf`` metadata counts them.

Refused exactly where ggml's own reader (``gguf_init_from_file_impl`` in ``ggml/src/gguf.cpp``)
refuses, each with a :class:`~tensorviz.core.errors.FileFormatError` that names the rule: a
version other than 2 or 3 (big-endian files included), a count, length or dimension that
claims more bytes than the file holds, an unknown value or ggml type (or one ggml removed), an
array of arrays, a key or tensor name given twice, a tensor name of 64 bytes or more, more
than 4 dimensions, a row not a multiple of its type's block, an alignment that is not a power
of two, and a tensor whose offset is not where the previous one ended, padded to the alignment
(so no gaps, overlaps or reordering). A tensor whose bytes run past the end of the file is
refused as llama.cpp's loader refuses it. Work is bounded: at most :data:`MAX_HEADER_BYTES` of
header, :data:`MAX_TENSORS` tensors and :data:`MAX_ARRAY_STRINGS` strings in arrays (a
:class:`~tensorviz.core.errors.TooLargeError` past them).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from tensorviz.core.errors import FileFormatError, TooLargeError
from tensorviz.core.facts import GgufFacts
from tensorviz.core.layout import Layout
from tensorviz.core.records import Logical, StorageInfo
from tensorviz.sources.formats.bounded import Reader, ReadSeek
from tensorviz.sources.formats.gguf_types import GGML_TYPES, SCALAR, VALUE_TYPES
from tensorviz.sources.formats.safetensors import _contiguous_stride
from tensorviz.sources.parts import Part, merge, open_regular

__all__ = ["GGML_TYPES", "GGUFHeader", "GGUFTensor", "analyze_gguf", "gguf_part", "read_gguf_header"]

MAGIC = b"GGUF"
#: Most header bytes read (tokenizer vocabularies of 262k tokens take a few MB).
MAX_HEADER_BYTES = 256 << 20
MAX_TENSORS = 1_000_000
#: Most strings in metadata arrays, all arrays together (vocabulary + merges of real models: < 1M).
MAX_ARRAY_STRINGS = 4_000_000
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_KEY = 1 << 16  # a metadata key is a dotted name: "llama.context_length"
MAX_NAME = 64  # GGML_MAX_NAME: a tensor name has at most 63 bytes
DEFAULT_ALIGNMENT = 32

_STRING, _ARRAY = 8, 9
_SHORT_TEXT = 120  # metadata strings longer than this are summarised by their length


class GGUFTensor(NamedTuple):
    """One tensor info of a GGUF header: name, ``ne`` (GGUF order, innermost first), ggml type
    id, offset in the data section and size in bytes (from the block table). A NamedTuple: a
    header may hold 100,000 of them."""

    name: str
    ne: tuple[int, ...]
    type_id: int
    offset: int
    nbytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape, outermost dimension first (numpy and torch order)."""
        return tuple(reversed(self.ne))


@dataclass(frozen=True)
class GGUFHeader:
    """A validated GGUF header: tensors in file order and what the metadata says, summarised.

    ``data_start`` is the absolute position of the data section (header end rounded up to
    ``alignment``); ``metadata`` keeps numbers, booleans and short strings, and says of a long
    string or an array only its type and length (a vocabulary is not copied).
    """

    path: str
    file_nbytes: int
    version: int
    alignment: int
    header_nbytes: int
    data_start: int
    tensors: tuple[GGUFTensor, ...]
    metadata: dict[str, Any]


def read_gguf_header(path: str | os.PathLike) -> GGUFHeader:
    """Read and validate a GGUF header without touching tensor data.

    Args:
        path: the ``.gguf`` file (any name: the magic decides).

    Returns:
        A :class:`GGUFHeader`.

    Raises:
        FileFormatError: anything ggml's reader refuses (see the module docstring).
        TooLargeError: a header past the work limits.

    >>> h = read_gguf_header("model.gguf")                       # doctest: +SKIP
    >>> h.data_start, h.tensors[0].name, h.metadata["general.architecture"]   # doctest: +SKIP
    """
    p = os.fspath(path)
    with open_regular(p) as f:
        return gguf_header_from(p, f, os.fstat(f.fileno()).st_size)


def gguf_header_from(p: str, f: ReadSeek, size: int) -> GGUFHeader:
    """The validated header of the ``size``-byte GGUF file open as ``f`` (a local file, or a
    remote one read by ranges: :mod:`.remote_files`), named ``p`` in messages."""
    r = Reader(p, f, size, MAX_HEADER_BYTES, "GGUF header")
    version, n_tensors, n_kv = _preamble(r)
    metadata = _read_kv(r, n_kv)
    alignment = _alignment(p, metadata)
    infos = _read_infos(r, n_tensors)
    header_end = r.at
    data_start = -(-header_end // alignment) * alignment
    tensors = _place(p, infos, alignment, data_start, r.size)
    summary = {k: v.value for k, v in metadata.items()}
    return GGUFHeader(p, r.size, version, alignment, header_end, data_start, tensors, summary)


# -- reading the header ------------------------------------------------------------------------------
def _preamble(r: Reader) -> tuple[int, int, int]:
    """(version, tensor count, key count), checked."""
    if r.size < 4:
        raise FileFormatError(f"{r.path}: the file is {r.size} bytes, too short for the GGUF magic")
    r.need(min(24, r.size), "the GGUF preamble")
    if r.buf[:4] != MAGIC:
        raise FileFormatError(f"{r.path}: not a GGUF file: it does not start with the magic bytes 'GGUF'")
    r.i = 4
    version = r.u32("the version")
    if version & 0xFFFF == 0 and version:
        raise FileFormatError(
            f"{r.path}: a big-endian GGUF file (its version reads {version:#x} little-endian); "
            f"ggml reads only little-endian GGUF"
        )
    if version == 1:
        raise FileFormatError(f"{r.path}: GGUF version 1 is no longer supported by ggml; convert the model again")
    if version not in (2, 3):
        raise FileFormatError(f"{r.path}: GGUF version {version}; ggml reads versions 2 and 3")
    n_tensors, n_kv = r.u64("the tensor count"), r.u64("the key/value count")
    left = r.size - r.at
    if n_tensors > left // 24:  # a tensor info takes at least 24 bytes
        raise FileFormatError(
            f"{r.path}: the header claims {n_tensors} tensors, but the {left} bytes after the counts "
            f"hold at most {left // 24} tensor infos of 24 bytes each; the count is corrupt"
        )
    if n_kv > left // 13:  # a key/value takes at least 13 bytes
        raise FileFormatError(
            f"{r.path}: the header claims {n_kv} key/value pairs, but the {left} bytes after the counts "
            f"hold at most {left // 13} of 13 bytes each; the count is corrupt"
        )
    if n_tensors > MAX_TENSORS:
        raise TooLargeError(f"{r.path}: {n_tensors:,} tensors; tensorviz reads GGUF files of up to {MAX_TENSORS:,}")
    return version, n_tensors, n_kv


@dataclass(frozen=True)
class _Value:
    type_id: int
    value: Any  # a number, bool, short string, or {"type": ..., "length": ...} for a long one


def _read_kv(r: Reader, n_kv: int) -> dict[str, _Value]:
    """Every key/value pair, values summarised; a repeated key is refused as ggml refuses it."""
    out: dict[str, _Value] = {}
    for k in range(n_kv):
        n, key = r.string(f"the key of key/value pair {k}", keep=MAX_KEY)
        if key is None:
            raise TooLargeError(f"{r.path}: key/value pair {k} has a key of {n:,} bytes; tensorviz reads keys of up to {MAX_KEY:,}")  # fmt: skip
        where = f"key {key!r}"
        t = r.u32(f"the value type of {where}")
        if key in out:
            raise FileFormatError(f"{r.path}: the header gives {where} twice; ggml refuses a duplicate key")
        out[key] = _Value(t, _read_value(r, t, where))
    return out


def _type_name(r: Reader, t: int, where: str) -> str:
    if t not in VALUE_TYPES:
        known = ", ".join(f"{i} {n}" for i, (n, _) in VALUE_TYPES.items())
        raise FileFormatError(f"{r.path}: {where} has value type {t}, which GGUF does not define (known: {known})")
    return VALUE_TYPES[t][0]


def _read_value(r: Reader, t: int, where: str) -> Any:
    name = _type_name(r, t, where)
    if t == _STRING:
        n, text = r.string(f"the value of {where}", keep=_SHORT_TEXT)
        return text if text is not None else {"type": "STRING", "length": n}
    if t != _ARRAY:
        return r.unpack(SCALAR[t], VALUE_TYPES[t][1], f"the {name} value of {where}")
    item = r.u32(f"the item type of array {where}")
    item_name = _type_name(r, item, f"array {where}")
    count = r.u64(f"the length of array {where}")
    if item == _ARRAY:
        raise FileFormatError(f"{r.path}: {where} is an array of arrays; ggml reads no nested arrays")
    if item == _STRING:
        if count > (r.size - r.at) // 8:
            r.need(count * 8, f"the {count} strings of array {where}")  # raises, naming the lie
        r.counted += count
        if r.counted > MAX_ARRAY_STRINGS:
            raise TooLargeError(
                f"{r.path}: array {where} makes more than {MAX_ARRAY_STRINGS:,} strings in metadata arrays; "
                f"tensorviz reads at most that many (a real vocabulary has well under a million)"
            )
        r.skip_strings(count, f"array {where}")
    else:
        r.skip(count * VALUE_TYPES[item][1], f"the {count} {item_name} items of array {where}")
    return {"type": f"ARRAY[{item_name}]", "length": count}


def _alignment(path: str, metadata: dict[str, _Value]) -> int:
    v = metadata.get("general.alignment")
    if v is None:
        return DEFAULT_ALIGNMENT
    if v.type_id != 4:
        raise FileFormatError(f"{path}: general.alignment has type {VALUE_TYPES[v.type_id][0]}; ggml requires UINT32")
    a = v.value
    if a == 0 or a & (a - 1):
        raise FileFormatError(f"{path}: general.alignment is {a}, not a power of two; ggml refuses it")
    return a


def _read_infos(r: Reader, n_tensors: int) -> list[GGUFTensor]:
    """Every tensor info, checked one by one (names, dimensions, types, row blocks)."""
    infos: list[GGUFTensor] = []
    seen: set[str] = set()
    for k in range(n_tensors):
        name, ne, type_id, offset = _fast_info(r) or _slow_info(r, k)
        if name in seen:
            raise FileFormatError(f"{r.path}: tensor {name!r}: named twice; ggml refuses duplicate tensor names")
        seen.add(name)
        infos.append(GGUFTensor(name, ne, type_id, offset, _nbytes(r.path, name, ne, type_id)))
    return infos


_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_TYPE_OFFSET = struct.Struct("<IQ").unpack_from
_DIMS = [struct.Struct(f"<{n}Q").unpack_from for n in range(MAX_DIMS + 1)]


def _fast_info(r: Reader) -> tuple[str, tuple[int, ...], int, int] | None:
    """A tensor info read straight from the buffer when it is all there and well formed; None
    otherwise (then :func:`_slow_info` reads it field by field and names what is wrong)."""
    buf, i = r.buf, r.i
    end = len(buf)
    if i + 8 > end:
        return None
    n = _U64(buf, i)[0]
    j = i + 8 + n
    if n >= MAX_NAME or j + 4 > end:
        return None
    n_dims = _U32(buf, j)[0]
    stop = j + 16 + 8 * n_dims
    if n_dims > MAX_DIMS or stop > end:
        return None
    try:
        name = buf[i + 8 : j].decode("utf-8")
    except UnicodeDecodeError:
        return None
    ne = _DIMS[n_dims](buf, j + 4)
    type_id, offset = _TYPE_OFFSET(buf, j + 4 + 8 * n_dims)
    r.i = stop
    return name, ne, type_id, offset


def _slow_info(r: Reader, k: int) -> tuple[str, tuple[int, ...], int, int]:
    n, name = r.string(f"the name of tensor {k}", keep=MAX_NAME - 1)
    if name is None:
        raise FileFormatError(
            f"{r.path}: tensor {k}'s name is {n} bytes; ggml allows at most {MAX_NAME - 1} (GGML_MAX_NAME)"
        )
    n_dims = r.u32(f"the dimension count of tensor {name!r}")
    if n_dims > MAX_DIMS:
        raise FileFormatError(f"{r.path}: tensor {name!r}: {n_dims} dimensions; ggml allows at most {MAX_DIMS}")
    ne = tuple(r.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims))
    type_id = r.u32(f"the type of tensor {name!r}")
    return name, ne, type_id, r.u64(f"the offset of tensor {name!r}")


def _nbytes(path: str, name: str, ne: tuple[int, ...], type_id: int) -> int:
    """The tensor's bytes from the block table, refusing what ggml refuses."""
    where = f"{path}: tensor {name!r}"
    facts = GGML_TYPES.get(type_id)
    if facts is None:
        raise FileFormatError(
            f"{where}: ggml type {type_id} is unknown or removed from ggml (known: "
            f"{', '.join(f'{i} {t[0]}' for i, t in GGML_TYPES.items())})"
        )
    name, block, size, _ = facts
    numel = 1
    for d, n in enumerate(ne):
        if n >= 1 << 63:
            raise FileFormatError(f"{where}: dimension {d} is {n}, over ggml's int64 range")
        numel *= n
        if numel >= 1 << 63:
            raise FileFormatError(f"{where}: dimensions {list(ne)} hold more than 2^63 elements (ggml refuses)")
    if ne and ne[0] % block:
        raise FileFormatError(
            f"{where}: rows of {ne[0]} elements are not a multiple of {name}'s block of {block}; ggml refuses it"
        )
    return numel // block * size


def _place(path: str, infos: list[GGUFTensor], alignment: int, data_start: int, size: int) -> tuple[GGUFTensor, ...]:
    """Check that each tensor sits where ggml expects it: right after the previous one, padded."""
    expected = 0
    for t in infos:
        if t.offset != expected:
            what = "overlaps the tensor before it" if t.offset < expected else "leaves a gap after the tensor before it"
            raise FileFormatError(
                f"{path}: tensor {t.name!r} has offset {t.offset}, expected {expected} (it {what}); ggml "
                f"requires each tensor right after the previous one, padded to {alignment} bytes"
            )
        end = data_start + t.offset + t.nbytes
        if end > size:
            raise FileFormatError(
                f"{path}: tensor {t.name!r} ends at byte {end}, past the end of the file ({size} bytes); "
                f"the file is truncated (an incomplete download?)"
            )
        expected += -(-t.nbytes // alignment) * alignment
    return tuple(infos)


# -- the layout --------------------------------------------------------------------------------------
def gguf_part(h: GGUFHeader) -> Part:
    """The rows of a validated header: one storage (the file), one view per tensor."""
    key, base = ("file", h.path), os.path.basename(h.path)
    part = Part(storages=[StorageInfo(key, "file", h.file_nbytes, base)], label=base)
    for t in h.tensors:
        name, block, size, dtype = GGML_TYPES[t.type_id]
        start = h.data_start + t.offset
        if dtype:
            shape = t.shape
            part.rows.append((t.name, key, "file", h.file_nbytes, (dtype, size), shape, _contiguous_stride(shape), t.offset // size, start))  # fmt: skip
            continue
        part.rows.append((t.name, key, "file", h.file_nbytes, ("uint8", 1), (t.nbytes,), (1,), t.offset, start))
        part.logical[t.name] = Logical(name, t.shape, block, size)
    part.meta["header"] = {h.path: (0, h.header_nbytes)}
    part.meta["gguf"] = GgufFacts(**summary(h))
    part.meta["unreferenced"] = {f"{k} bytes": v for k, v in unreferenced(h).items()}
    names = {t.name for t in h.tensors}
    split = h.metadata.get("split.count")  # a shard of a split model cannot tell: output.weight may be in another
    if "token_embd.weight" in names and "output.weight" not in names and not (isinstance(split, int) and split > 1):
        part.meta["dropped"] = {"output.weight": "token_embd.weight"}
        part.meta["tied"] = "llama.cpp reads the absent output.weight from token_embd.weight (tied embeddings)"
    return part


def summary(h: GGUFHeader) -> dict[str, Any]:
    """What a reader wants from the metadata: architecture, context length, tokenizer and its
    size (not the vocabulary), the file type, the version and the alignment."""
    md = h.metadata
    arch = md.get("general.architecture")
    out: dict[str, Any] = {}
    if isinstance(arch, str):
        out["architecture"] = arch
    for key, field in _SUMMARY_KEYS:
        value = md.get(key.format(arch=arch))
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            out[field] = value
    tokens = md.get("tokenizer.ggml.tokens")
    if isinstance(tokens, dict):
        out["vocabulary"] = tokens["length"]
    out.update(version=h.version, alignment=h.alignment, keys=len(md))
    return out


_SUMMARY_KEYS = (
    ("general.name", "name"), ("{arch}.context_length", "context_length"),
    ("{arch}.embedding_length", "embedding_length"), ("{arch}.block_count", "block_count"),
    ("tokenizer.ggml.model", "tokenizer"), ("general.file_type", "file_type"),
)  # fmt: skip


def unreferenced(h: GGUFHeader) -> dict[str, int]:
    """The bytes no tensor reads: the header, alignment padding (before the data section and
    after each tensor) and trailing bytes after the last tensor."""
    used = sum(t.nbytes for t in h.tensors)
    end = h.data_start + (h.tensors[-1].offset + h.tensors[-1].nbytes if h.tensors else 0)
    padding = (h.data_start - h.header_nbytes) + (end - h.data_start - used)
    return {"header": h.header_nbytes, "alignment padding": padding, "trailing": h.file_nbytes - end}


def analyze_gguf(path: str) -> Layout:
    """The layout of a GGUF file, header only (see the module docstring)."""
    return merge([gguf_part(read_gguf_header(path))], "gguf", source=path)
