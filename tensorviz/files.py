"""Open checkpoints without loading them: safetensors headers, sharded indexes, torch checkpoints.

``analyze_path`` never reads tensor data and never allocates by a size a file claims.

* **safetensors** (``*.safetensors``): only the 8-byte little-endian header length and the JSON
  header are read, with the standard library (no mmap, no data). The storage is the file itself
  (``device == "file"``, key ``("file", path)``, ``nbytes`` = file size) and every tensor's span
  ``[start, stop)`` is its absolute byte range, ``8 + header_len + data_offsets``. Because a file
  view's byte position is absolute, its ``offset`` has a file-specific meaning: the element index
  of the tensor's first element counted from the start of the *data section* (``data_offsets[0]
  // itemsize``; a note flags a tensor whose data offset is not a multiple of its itemsize). The
  header region and any gap are bytes no view reads, so they show as unreferenced; the header's
  span is also in ``layout.metadata["header"]`` so diagrams can label it.
* **sharded checkpoints** (``*.index.json``, or a model folder): every shard is a storage; the
  ``weight_map`` is checked against the shards' headers and missing, extra, misplaced and
  duplicated names are reported in ``layout.metadata["problems"]`` (and as skipped entries).
* **torch checkpoints** (``.pt``/``.pth``/``.bin``): ``torch.load(path, weights_only=True,
  mmap=True, map_location=<keep storage>)``. We checked both data-free options on torch 2.13:
  ``map_location="meta"`` reads no data but gives every tensor its own meta storage (a slice
  ``w[10:20]`` of a saved ``w`` comes back on a separate storage), so ties and slices of one
  storage are lost; ``mmap=True`` maps the file without touching it (no ``read`` of tensor bytes,
  resident memory unchanged for a 128 MiB checkpoint) and keeps every view on its saved storage
  with its offset. So tensorviz uses ``mmap=True``; it reads only metadata (offset, shape,
  stride, dtype, storage identity) and drops the mapping before returning. Each saved storage
  (zip record ``data/N``) is one storage of the layout, key ``("file", "path:data/N")``. Names
  keep the path inside the checkpoint (``state_dict.fc.weight``, ``optimizer.state.0.exp_avg``);
  non-tensor values go to ``metadata["values"]``. A pickle that ``weights_only`` refuses raises
  :class:`~tensorviz.errors.UnsafeCheckpointError`: tensorviz never runs code from a file.

Every malformed or hostile file raises :class:`~tensorviz.errors.FileFormatError` naming the
file, the tensor and what is wrong.

Layout metadata keys (all JSON-friendly): ``format`` ("safetensors", "safetensors-index",
"folder", "torch", "torch-index"), ``header`` ({file path: (0, 8 + header_len)}),
``__metadata__`` ({file path: the file's ``__metadata__``}), ``dropped`` ({dropped name: kept
name}, from ``safetensors.torch.save_model``), ``problems`` (list of sentences), ``index``,
``contents``, ``values``, ``record_offsets`` ({storage identity: byte offset of the record}),
``saved_on`` ({storage identity: device it was saved from}, only for non-CPU storages), ``ignored_files``.
"""

from __future__ import annotations

import gc
import json
import math
import os
import struct
import sys
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from operator import itemgetter
from typing import Any, Iterable, Mapping, NamedTuple

import torch

from .errors import FileFormatError, UnsafeCheckpointError
from .footprint import span
from .layout import Layout, Rows, Skipped, StorageInfo

__all__ = ["analyze_path", "read_safetensors_header", "SafetensorsHeader", "HeaderEntry",
           "MAX_HEADER_BYTES", "SAFETENSORS_DTYPES"]

#: Largest JSON header (or index file, or checkpoint pickle) accepted; safetensors' own limit.
MAX_HEADER_BYTES = 100_000_000
_MAX_LEAVES = 2_000_000
_MAX_VALUES = 50
_TORCH_EXTS = (".pt", ".pth", ".bin", ".ckpt")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")

#: safetensors dtype code -> torch dtype attribute name (byte sizes always come from torch).
SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
    "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu", "C64": "complex64",
}
# Packed sub-byte codes: elements are not byte-addressable, so no strided view exists. Their
# bit width is part of the safetensors format (torch has no per-element dtype to ask).
_SUB_BYTE_BITS = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


def analyze_path(path: str | os.PathLike) -> Layout:
    """Lay out the tensors of a file or model folder from metadata only.

    Args:
        path: a ``.safetensors`` file, a ``*.index.json`` of shards, a model folder, or a torch
            checkpoint (``.pt``/``.pth``/``.bin``).

    Returns:
        A :class:`~tensorviz.layout.Layout`; ``layout.metadata`` holds what the file says
        besides tensors (see the module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        FileFormatError: the file is malformed or hostile (the message names file and tensor).
        UnsafeCheckpointError: a pickle needs code to load; tensorviz only uses weights_only.

    >>> import tensorviz as tv
    >>> layout = tv.analyze("model.safetensors")            # doctest: +SKIP
    >>> layout["lm_head.weight"].start, layout.metadata["header"]   # doctest: +SKIP
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file or folder: {p!r}")
    with _gc_paused():
        if os.path.isdir(p):
            return _analyze_folder(p)
        kind = _sniff(p)
        if kind == "index":
            return _analyze_index(p)
        return _analyze_files([p], "torch" if kind == "torch" else "safetensors", source=p)


@contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while headers are parsed.

    A big header makes hundreds of thousands of small acyclic objects; each of the collections
    they trigger scans every object alive (~300k once torch is imported), which doubled the
    time of a 20,000-tensor analysis. Nothing here creates cycles, so nothing is lost.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _sniff(path: str) -> str:
    """'safetensors', 'index' or 'torch' from the name, else from the first bytes."""
    low = path.lower()
    if low.endswith(".json"):
        return "index"
    if low.endswith(".safetensors"):
        return "safetensors"
    with open(path, "rb") as f:
        head = f.read(16)
    if head[:4] in _ZIP_MAGIC or head[:1] == b"\x80" or low.endswith(_TORCH_EXTS):
        return "torch"
    if len(head) > 8 and head[8:9] == b"{":
        return "safetensors"
    raise FileFormatError(
        f"{path}: not a file tensorviz knows (starts with {head[:8]!r}); expected a .safetensors "
        f"file, a *.index.json, a model folder or a torch zip checkpoint (.pt/.pth/.bin)")


# -- safetensors headers -----------------------------------------------------------------------
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
        raise FileFormatError(f"{p}: the header must be a JSON object of tensors, got a JSON "
                              f"{type(obj).__name__}; this is not a safetensors file")
    metadata = _file_metadata(p, obj.pop("__metadata__", None))
    entries = [_entry(p, name, info) for name, info in obj.items()]
    entries.sort(key=itemgetter(3, 4))  # (begin, end)
    problems = _check_offsets(p, entries, size - 8 - n)
    return SafetensorsHeader(p, size, 8 + n, tuple(entries), metadata, tuple(problems))


def _header_length(path: str, first8: bytes, size: int) -> int:
    if size == 0:
        raise FileFormatError(f"{path}: the file is empty (0 bytes); a safetensors file starts "
                              f"with an 8-byte header length")
    if len(first8) < 8:
        raise FileFormatError(f"{path}: the file is {size} bytes, too short for the 8-byte header "
                              f"length a safetensors file starts with (truncated download?)")
    n = struct.unpack("<Q", first8)[0]
    if n > MAX_HEADER_BYTES:
        raise FileFormatError(f"{path}: the header claims {n} bytes, over the {MAX_HEADER_BYTES}-byte "
                              f"limit safetensors itself enforces; the file is corrupt or not safetensors")
    if n > size - 8:
        raise FileFormatError(f"{path}: the header claims {n} bytes but only {size - 8} follow the "
                              f"length field; the file is truncated or not safetensors")
    return n


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def _parse_header_json(path: str, raw: bytes) -> Any:
    """Parse a header; look for duplicate names only when a cheap count says there may be one.

    Each entry has one "dtype", "shape" and "data_offsets" key, so if the raw text holds exactly
    as many of each as the parsed object has entries, no entry was overwritten by a later copy.
    (A key string can't contain an unescaped quote, so the counts can't be fooled into missing
    one.) Otherwise parse again with the slower duplicate-detecting hook, which names it.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return _parse_json(path, raw, "header")  # the same failure, with a precise message
    if isinstance(obj, dict):
        n = len(obj) - ("__metadata__" in obj)
        if any(raw.count(k) != n for k in (b'"data_offsets"', b'"dtype"', b'"shape"')):
            obj = _parse_json(path, raw, "header")
    return obj


def _parse_json(path: str, raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except _DuplicateKey as dup:
        raise FileFormatError(f"{path}: the {what} names {dup.key!r} twice; a JSON object may hold "
                              f"each name once (which copy would a loader use?)") from None
    except UnicodeDecodeError as err:
        raise FileFormatError(f"{path}: the {what} is not UTF-8 text (byte {err.start}); "
                              f"the file is corrupt or not in this format") from None
    except RecursionError:
        raise FileFormatError(f"{path}: the {what} JSON is nested too deeply to parse; "
                              f"a real {what} is flat") from None
    except ValueError as err:  # json.JSONDecodeError, int too large, ...
        raise FileFormatError(f"{path}: the {what} is not valid JSON: {_one_line(err)}") from None


def _file_metadata(path: str, md: Any) -> dict[str, str]:
    if md is None:
        return {}
    if not isinstance(md, dict) or not all(isinstance(v, str) for v in md.values()):
        raise FileFormatError(f"{path}: __metadata__ must map strings to strings, got "
                              f"{_short(md)}; safetensors refuses such a file")
    return md


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
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
        raise FileFormatError(f"{where}: expected an object with dtype, shape and data_offsets, "
                              f"got {_short(info)}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise FileFormatError(f"{where}: missing {', '.join(missing)}")
    code, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(_is_count(s) for s in shape):
        raise FileFormatError(f"{where}: shape must be a list of non-negative integers, got {_short(shape)}")
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_count(o) for o in offs)):
        raise FileFormatError(f"{where}: data_offsets must be [begin, end] with non-negative "
                              f"integers, got {_short(offs)}")
    begin, end = offs
    if end < begin:
        raise FileFormatError(f"{where}: data_offsets {offs} are out of order (end before begin)")
    numel = 1
    for s in shape:
        numel *= s
    bits = _element_bits(where, code)
    if numel * bits != (end - begin) * 8:
        need = f"{numel * bits / 8:g}"
        raise FileFormatError(f"{where}: data_offsets {offs} hold {end - begin} bytes but "
                              f"{code}{shape} needs {need} bytes (shape x dtype size)")
    return HeaderEntry(name, code, tuple(shape), begin, end)


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


@lru_cache(maxsize=None)
def torch_dtype(code: str) -> torch.dtype | None:
    """The torch dtype of a safetensors dtype code, or None when this torch lacks it."""
    name = SAFETENSORS_DTYPES.get(code)
    return getattr(torch, name, None) if name else None


@lru_cache(maxsize=None)
def _dtype_facts(code: str) -> tuple[str, int, int] | None:
    """(torch dtype name, itemsize, bits per element) of a code, sizes asked of torch; None if unknown.

    Packed sub-byte codes have no torch dtype: name "" and itemsize 0.
    """
    if code in _SUB_BYTE_BITS:
        return ("", 0, _SUB_BYTE_BITS[code])
    dtype = torch_dtype(code)
    if dtype is None:
        return None
    itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
    return (str(dtype).removeprefix("torch."), itemsize, itemsize * 8)


def _element_bits(where: str, code: Any) -> int:
    facts = _dtype_facts(code) if isinstance(code, str) else None
    if facts is None:
        known = ", ".join(SAFETENSORS_DTYPES)
        extra = (f" (this torch {torch.__version__} has no torch.{SAFETENSORS_DTYPES[code]})"
                 if isinstance(code, str) and code in SAFETENSORS_DTYPES else "")
        raise FileFormatError(f"{where}: unknown dtype {_short(code)}{extra}; known codes: {known}")
    return facts[2]


def _check_offsets(path: str, entries: list[HeaderEntry], data_len: int) -> list[str]:
    """Errors for bytes outside the data section or shared by two tensors; notes for gaps."""
    problems: list[str] = []
    prev: HeaderEntry | None = None
    tiled = 0  # safetensors requires tensors (sorted by offset) to tile the data exactly
    for e in entries:
        if e.end > data_len:
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] end past the data "
                f"section, which holds {data_len} bytes; the file is truncated or the header is wrong")
        if e.begin == e.end:
            continue
        if prev is not None and e.begin < prev.end:
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] overlap tensor "
                f"{prev.name!r} [{prev.begin}, {prev.end}]; each tensor needs its own bytes")
        if e.begin > tiled:
            after = f"after {prev.name!r}" if prev else "at the start of the data section"
            problems.append(f"{os.path.basename(path)}: {e.begin - tiled} bytes {after} belong to no "
                            f"tensor (safetensors.safe_open refuses files with gaps)")
        tiled, prev = e.end, e
    if tiled < data_len:
        problems.append(f"{os.path.basename(path)}: the last {data_len - tiled} bytes belong to no "
                        f"tensor (safetensors.safe_open refuses a file not fully covered)")
    return problems


@lru_cache(maxsize=4096)
def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(stride))


def _safetensors_part(header: SafetensorsHeader) -> "_Part":
    key = ("file", header.path)
    part = _Part(storages=[StorageInfo(key, "file", header.file_nbytes, os.path.basename(header.path))])
    ds = header.data_start
    for e in header.entries:
        dtype, itemsize, bits = _dtype_facts(e.code)
        if not itemsize:
            part.skipped.append(Skipped(e.name, (
                f"packed {bits}-bit dtype {e.code}{list(e.shape)} at bytes [{ds + e.begin}, {ds + e.end}): "
                f"elements are not byte-addressable, so there is no strided view to lay out")))
            continue
        if e.begin % itemsize:
            part.notes[e.name] = f"data offset {e.begin} is not a multiple of itemsize {itemsize}"
        part.rows.append((e.name, key, "file", header.file_nbytes, (dtype, itemsize), e.shape,
                          _contiguous_stride(e.shape), e.begin // itemsize, ds + e.begin))
    part.meta["header"] = {header.path: (0, ds)}
    if header.metadata:
        part.meta["__metadata__"] = {header.path: dict(header.metadata)}
    part.problems.extend(header.problems)
    return part


# -- assembling parts into one Layout -----------------------------------------------------------
# A row is the compact form a collector hands to Layout (see tensorviz.layout.Rows): (name,
# storage key, device, storage nbytes, (dtype, itemsize), shape, stride, offset, start in bytes).
# 20,000 rows cost far less than 20,000 TensorView records, which Layout derives on first use.
def _row_span(row: tuple) -> tuple[int, int]:
    return span(row[8], row[5], row[6], row[4][1])


def _row_nbytes(row: tuple) -> int:
    return math.prod(row[5]) * row[4][1]


@dataclass
class _Part:
    """What one file contributes: view rows (with notes by name), storages, skips, metadata."""

    rows: list[tuple] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    storages: list[StorageInfo] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _merge(parts: Iterable[_Part], fmt: str, source: str, extra: Mapping[str, Any] | None = None) -> Layout:
    """One Layout from several files; a name seen in an earlier file is skipped and reported."""
    rows = Rows()
    storages: list[StorageInfo] = []
    skipped: list[Skipped] = []
    problems: list[str] = []
    meta: dict[str, Any] = {"format": fmt}
    owner: dict[str, str] = {}
    for part in parts:
        storages.extend(part.storages)
        label = part.storages[0].label if part.storages else "?"
        for row in part.rows:
            name = row[0]
            if name in owner:
                a, b = _row_span(row)
                skipped.append(Skipped(f"{name} [{label}]", f"duplicate: {owner[name]} already holds a "
                                       f"tensor of this name; this copy (bytes [{a}, {b})) is hidden"))
                problems.append(f"duplicated: {name!r} is in {owner[name]} and {label}")
                continue
            owner[name] = label
            if name in part.notes:
                rows.notes[len(rows.rows)] = part.notes[name]
            rows.rows.append(row)
        skipped.extend(part.skipped)
        problems.extend(part.problems)
        for k, v in part.meta.items():
            if isinstance(v, dict) and isinstance(meta.get(k), dict):
                meta[k].update(v)
            else:
                meta[k] = dict(v) if isinstance(v, dict) else v
    meta.update(extra or {})
    dropped = _dropped(meta.get("__metadata__", {}), owner)
    if dropped:
        meta["dropped"] = dropped
    if problems:
        meta["problems"] = problems
    used = {row[1] for row in rows.rows}
    rows.labels = {s.key: s.label for s in storages if s.label}
    rows.extra = [(s.key, s.device, s.nbytes, s.label) for s in storages if s.key not in used]
    return Layout._from_rows(rows, skipped, source=source, metadata=meta)


def _dropped(file_meta: Mapping[str, Mapping[str, str]], names: Mapping[str, str]) -> dict[str, str]:
    """safetensors' save_model stores {dropped name: kept name} for each removed shared tensor."""
    out: dict[str, str] = {}
    for md in file_meta.values():
        for k, v in md.items():
            if v in names and k not in names:
                out[k] = v
    return out


def _analyze_files(paths: list[str], fmt: str, source: str, extra: Mapping[str, Any] | None = None) -> Layout:
    return _merge((_read_part(p) for p in paths), fmt, source, extra)


def _read_part(path: str) -> _Part:
    if _sniff(path) == "torch":
        return _torch_part(path)
    return _safetensors_part(read_safetensors_header(path))


# -- sharded indexes and folders ----------------------------------------------------------------
def _analyze_index(path: str, source: str | None = None, extra: Mapping[str, Any] | None = None) -> Layout:
    size = os.path.getsize(path)
    if size > MAX_HEADER_BYTES:
        raise FileFormatError(f"{path}: {size} bytes is over the {MAX_HEADER_BYTES}-byte limit for an index")
    with open(path, "rb") as f:
        obj = _parse_json(path, f.read(), "index")
    wm = obj.get("weight_map") if isinstance(obj, dict) else None
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise FileFormatError(f"{path}: an index must be a JSON object with a \"weight_map\" of "
                              f"tensor name -> shard file name; got {_short(obj)}")
    folder = os.path.dirname(path)
    names_in: dict[str, list[str]] = {}
    for name, shard in wm.items():
        names_in.setdefault(shard, []).append(name)
    shards = list(names_in)
    paths = [_shard_path(path, folder, s, names_in[s]) for s in shards]
    parts = [_read_part(p) for p in paths]
    problems, skipped, duplicated = _check_weight_map(wm, shards, parts)
    info = obj.get("metadata")
    total = info.get("total_size") if isinstance(info, dict) else None
    mapped = sum(_row_nbytes(r) for shard, part in zip(shards, parts) for r in part.rows if wm.get(r[0]) == shard)
    if type(total) is int and total != mapped:
        problems.append(f"total_size: the index says {total} bytes, but the tensors it maps "
                        f"hold {mapped} bytes")
    fmt = "torch-index" if paths and _sniff(paths[0]) == "torch" else "safetensors-index"
    if duplicated:
        parts = _prefer_mapped(parts, wm, shards)
    parts.append(_Part(skipped=skipped, problems=problems))
    meta = {"index": {"path": path, "shards": shards, "total_size": total}, **(extra or {})}
    return _merge(parts, fmt, source=source or path, extra=meta)


def _shard_path(index: str, folder: str, shard: str, names: list[str]) -> str:
    if os.path.isabs(shard) or ".." in shard.replace("\\", "/").split("/"):
        raise FileFormatError(f"{index}: weight_map puts {names[0]!r} in {shard!r}, a path outside the "
                              f"index's folder; shards must sit next to the index")
    p = os.path.join(folder, shard)
    if not os.path.isfile(p):
        raise FileFormatError(f"{index}: weight_map puts {len(names)} tensors (e.g. {names[0]!r}) in shard "
                              f"{shard!r}, but {p} does not exist; download the missing shard")
    return p


def _check_weight_map(wm: Mapping[str, str], shards: list[str], parts: list[_Part]) -> tuple[list[str], list[Skipped], bool]:
    """Compare the weight_map with what each shard's header really holds.

    Returns the problems, a Skipped entry per missing name, and whether any name is in two shards.
    """
    where: dict[str, str] = {}
    also: dict[str, list[str]] = {}  # names found in more than one shard (rare)
    for shard, part in zip(shards, parts):
        for row in part.rows:
            first = where.setdefault(row[0], shard)
            if first != shard:
                also.setdefault(row[0], []).append(shard)
    problems: list[str] = []
    skipped: list[Skipped] = []
    for name, shard in wm.items():
        found = where.get(name)
        if found is None:
            skipped.append(Skipped(name, f"weight_map puts it in {shard}, but no shard's header has it"))
            problems.append(f"missing: weight_map lists {name!r} in {shard}, but that shard has no such tensor")
        elif found != shard and shard not in also.get(name, ()):
            problems.append(f"misplaced: weight_map puts {name!r} in {shard}, but it is in {found}")
    if len(where) != len(wm) or skipped:
        for name, found in where.items():
            if name not in wm:
                problems.append(f"extra: {name!r} is in {found} but not in the weight_map; "
                                f"loaders that follow the index never load it")
    return problems, skipped, bool(also)


def _prefer_mapped(parts: list[_Part], wm: Mapping[str, str], shards: list[str]) -> list[_Part]:
    """Keep one copy of each name: the one in the shard the weight_map names, else the first."""
    chosen: dict[str, int] = {}
    for i, (shard, part) in enumerate(zip(shards, parts)):
        chosen.update((r[0], i) for r in part.rows if wm.get(r[0]) == shard)
    for i, part in enumerate(parts[: len(shards)]):
        for r in part.rows:
            chosen.setdefault(r[0], i)
    out = []
    for i, part in enumerate(parts):
        dup = [r for r in part.rows if i < len(shards) and chosen[r[0]] != i]
        if not dup:
            out.append(part)
            continue
        skipped = [Skipped(f"{r[0]} [{shards[i]}]", f"duplicate: also in {shards[chosen[r[0]]]}, which the "
                           f"weight_map names; this copy (bytes [{_row_span(r)[0]}, {_row_span(r)[1]})) is "
                           f"never loaded") for r in dup]
        problems = [f"duplicated: {r[0]!r} is in {shards[chosen[r[0]]]} and {shards[i]}" for r in dup]
        keep = [r for r in part.rows if chosen[r[0]] == i]
        out.append(replace(part, rows=keep, skipped=part.skipped + skipped, problems=part.problems + problems))
    return out


def _analyze_folder(path: str) -> Layout:
    """A model folder: its safetensors index, else its safetensors files, else torch files."""
    entries = sorted(os.listdir(path))
    files = [e for e in entries if os.path.isfile(os.path.join(path, e))]
    pickles = [e for e in files if e.lower().endswith(_TORCH_EXTS)]
    groups = (
        ("index", [e for e in files if e.endswith(".safetensors.index.json")]),
        ("files", [e for e in files if e.endswith(".safetensors")]),
        ("index", [e for e in files if e.endswith((".bin.index.json", ".pt.index.json", ".pth.index.json"))]),
        # Trainer folders also hold pickles that are not weights (training_args.bin, rng_state.pth):
        # used only when nothing else is there.
        ("files", [e for e in pickles if not e.startswith(_NOT_WEIGHTS)] or pickles),
    )
    weights = [e for _, group in groups for e in group]
    for kind, group in groups:
        if not group:
            continue
        if kind == "index" and len(group) > 1:
            if "model.safetensors.index.json" not in group:
                raise FileFormatError(f"{path}: several indexes ({', '.join(group)}); pass the one to analyse")
            group = ["model.safetensors.index.json"]
        used = set(group) | set(_index_shards(os.path.join(path, group[0])) if kind == "index" else ())
        ignored = [e for e in weights if e not in used]
        extra = {"ignored_files": ignored} if ignored else {}
        if kind == "index":
            return _analyze_index(os.path.join(path, group[0]), source=path, extra=extra)
        return _analyze_files([os.path.join(path, g) for g in group], "folder", source=path, extra=extra)
    shown = ", ".join(entries[:8]) + (f", … ({len(entries)} entries)" if len(entries) > 8 else "")
    raise FileFormatError(f"{path}: no weights found: expected *.safetensors, *.safetensors.index.json, "
                          f"pytorch_model.bin.index.json or .bin/.pt/.pth files; the folder holds: "
                          f"{shown or 'nothing'}")


_NOT_WEIGHTS = ("training_args", "rng_state", "scheduler", "optimizer")


def _index_shards(index: str) -> list[str]:
    """The shard names an index lists (empty when it cannot be read; analysis then reports why)."""
    try:
        with open(index, "rb") as f:
            wm = json.loads(f.read(MAX_HEADER_BYTES)).get("weight_map", {})
        return [v for v in wm.values() if isinstance(v, str)]
    except (ValueError, AttributeError, RecursionError):
        return []


# -- torch checkpoints --------------------------------------------------------------------------
def _torch_part(path: str) -> _Part:
    records = _zip_records(path)
    saved_on: dict[int, str] = {}

    def keep_storage(storage: Any, location: str) -> Any:
        saved_on[storage._cdata] = location  # where it was saved from; we keep the mapped bytes
        return storage

    obj = _torch_load(path, keep_storage)
    try:
        tensors, values, contents = _walk_checkpoint(path, obj)
        return _torch_views(path, tensors, values, contents, records, saved_on)
    finally:
        del obj  # drops the last reference to the mapping


def _zip_records(path: str) -> dict[int, tuple[str, int]]:
    """{byte offset of the record's data: (record name, size)} for every ``data/N`` record."""
    with open(path, "rb") as f:
        head = f.read(8)
        if not head:
            raise FileFormatError(f"{path}: the file is empty (0 bytes); not a torch checkpoint")
        if head[:1] == b"\x80":
            raise FileFormatError(
                f"{path}: a legacy (pre-1.6, non-zip) torch checkpoint; loading one reads every "
                f"tensor, so tensorviz does not. Re-save it with torch.save(obj, path) (zip format)")
        if head[:4] not in _ZIP_MAGIC:
            raise FileFormatError(f"{path}: not a torch zip checkpoint (starts with {head!r}); "
                                  f"expected a file written by torch.save")
        try:
            with zipfile.ZipFile(f) as zf:
                return _scan_zip(path, f, zf)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError,
                NotImplementedError, RuntimeError, struct.error) as err:
            raise FileFormatError(f"{path}: a damaged zip archive ({_one_line(err)}); "
                                  f"the checkpoint is truncated or corrupt") from None


def _scan_zip(path: str, f: Any, zf: zipfile.ZipFile) -> dict[int, tuple[str, int]]:
    records: dict[int, tuple[str, int]] = {}
    for info in zf.infolist():
        parts = info.filename.split("/")
        if len(parts) >= 2 and parts[1] in ("constants.pkl", "code"):
            raise UnsafeCheckpointError(_unsafe_reason(path, "TorchScript"))
        if parts[-1] == "data.pkl" and len(parts) == 2 and info.file_size > MAX_HEADER_BYTES:
            raise FileFormatError(f"{path}: its pickle claims {info.file_size} bytes, over the "
                                  f"{MAX_HEADER_BYTES}-byte limit tensorviz reads")
        if parts[-1] == "byteorder" and len(parts) == 2 and info.file_size <= 16:
            order = zf.read(info).decode("ascii", "replace")
            if order != sys.byteorder:
                raise FileFormatError(f"{path}: saved {order}-endian; loading would byte-swap (read) "
                                      f"every tensor on this {sys.byteorder}-endian machine")
        if len(parts) == 3 and parts[1] == "data":
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            records[info.header_offset + 30 + name_len + extra_len] = ("data/" + parts[2], info.file_size)
    return records


def _torch_load(path: str, keep_storage: Any) -> Any:
    try:
        return torch.load(path, weights_only=True, mmap=True, map_location=keep_storage)
    except Exception as err:  # noqa: BLE001 - torch reports every problem differently
        text = str(err)
        if "Weights only load failed" in text or "TorchScript" in text or "weights_only" in text:
            raise UnsafeCheckpointError(_unsafe_reason(path, text)) from None
        raise FileFormatError(f"{path}: torch.load(weights_only=True) failed: {_one_line(err)}") from None


def _unsafe_reason(path: str, text: str) -> str:
    what, hint = "the pickle needs code to rebuild its objects", ""
    if "TorchScript" in text:
        what = "it is a TorchScript archive (it contains code)"
    if "WeightsUnpickler error:" in text:
        detail = text.split("WeightsUnpickler error:", 1)[1].split("Check the documentation")[0]
        detail = " ".join(detail.split()).split(" was not an allowed")[0]
        name = detail.removeprefix("Unsupported global:").strip().removeprefix("GLOBAL ").strip()
        if detail.startswith("Unsupported global"):
            what = f"the pickle needs {name}"
            if name.startswith("torch.nn.modules."):
                hint = " (a whole nn.Module was saved; saving model.state_dict() avoids this)"
        else:
            what = f"torch's weights-only unpickler refused it ({_short(detail, 120)[1:-1]})"
    return (f"{path}: {what}{hint}. tensorviz loads checkpoints only with torch.load(weights_only=True) "
            f"and never runs code from a file, because unpickling can execute anything. If you trust "
            f"the file, load it yourself and pass the result: "
            f"tv.analyze(torch.load(path, weights_only=False, mmap=True))")


def _walk_checkpoint(path: str, obj: Any) -> tuple[list[tuple[str, torch.Tensor]], dict[str, str], dict[str, str]]:
    """Tensors (with their path names), other values (as short text), and a top-level summary."""
    tensors: list[tuple[str, torch.Tensor]] = []
    values: dict[str, str] = {}
    seen: dict[int, str] = {}
    stack: list[tuple[str, Any]] = [("", obj)]
    leaves = 0
    while stack:
        name, value = stack.pop()
        leaves += 1
        if leaves > _MAX_LEAVES:
            raise FileFormatError(f"{path}: more than {_MAX_LEAVES} values in the checkpoint; "
                                  f"refusing to walk it (hostile or not a state dict)")
        if isinstance(value, torch.Tensor):
            tensors.append((name or "tensor", value))
            continue
        children = _children(value)
        if children is None:
            values[name or "value"] = _short(value)
            continue
        if id(value) in seen:
            values[name] = f"<same object as {seen[id(value)] or 'the root'}>"
            continue
        seen[id(value)] = name
        stack.extend(reversed([(f"{name}.{k}" if name else str(k), v) for k, v in children]))
    contents = _contents(obj, tensors)
    return tensors, values, contents


def _children(value: Any) -> list[tuple[Any, Any]] | None:
    """The items to descend into, or None for a leaf (a number, string, list of numbers...)."""
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.Tensor, Mapping, list, tuple)) for v in value):
        return list(enumerate(value))
    return None


def _contents(obj: Any, tensors: list[tuple[str, torch.Tensor]]) -> dict[str, str]:
    """What the top level holds besides tensors: wrappers with their tensor counts, and values."""
    if not isinstance(obj, Mapping):
        return {} if isinstance(obj, torch.Tensor) else {"": f"{type(obj).__name__} with {len(tensors)} tensors"}
    counts: dict[str, int] = {}
    for name, _ in tensors:
        top = name.split(".", 1)[0]
        counts[top] = counts.get(top, 0) + 1
    out = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            continue  # a flat state dict: its tensors are the layout
        k = str(k)
        out[k] = (f"{counts[k]} tensor{'s' * (counts[k] != 1)}" if k in counts
                  else _short(v) if _children(v) is None else f"{type(v).__name__} without tensors")
    return out


def _torch_views(path: str, tensors: list[tuple[str, torch.Tensor]], values: dict[str, str],
                 contents: dict[str, str], records: dict[int, tuple[str, int]], saved_on: dict[int, str]) -> _Part:
    """Views from the loaded tensors, re-keyed from in-memory storages to the file's records."""
    from .collect import collect  # the one place that turns torch tensors into views

    layout = collect(tensors, source=path)
    by_name: dict[str, torch.Tensor] = {}
    for name, t in tensors:
        by_name.setdefault(name, t)
    names = _record_names([by_name[v.name] for v in layout.views], records)
    base = os.path.basename(path)
    new: dict[tuple, StorageInfo] = {}
    meta: dict[str, Any] = {"contents": contents} if contents else {}
    for v in layout.views:
        if v.storage in new:
            continue
        t = by_name[v.name]
        st, i = t.untyped_storage(), len(new)
        rec = names.get(v.storage[1])
        if rec and st.nbytes() > rec[1]:
            raise FileFormatError(f"{path}: tensor {v.name!r}: its storage claims {st.nbytes()} bytes but "
                                  f"record {rec[0]} holds {rec[1]}; the checkpoint is corrupt")
        if t.device.type == "meta":
            ident = f"{path}:meta#{i}"
            new[v.storage] = StorageInfo(("meta", ident), "meta", st.nbytes(), f"{base} meta storage #{i}")
        else:
            ident = f"{path}:{rec[0]}" if rec else f"{path}:storage#{i}"
            label = f"{base}:{rec[0]}" if rec else f"{base} storage #{i}"
            new[v.storage] = StorageInfo(("file", ident), "file", st.nbytes(), label)
            if rec:
                meta.setdefault("record_offsets", {})[ident] = rec[2]
        if saved_on.get(st._cdata, "cpu") != "cpu":
            meta.setdefault("saved_on", {})[ident] = saved_on[st._cdata]
    rows = [(v.name, new[v.storage].key, new[v.storage].device, new[v.storage].nbytes, (v.dtype, v.itemsize),
             v.shape, v.stride, v.offset, v.start) for v in layout.views]
    notes = {v.name: v.note for v in layout.views if v.note}
    if values:
        meta["values"] = dict(list(values.items())[:_MAX_VALUES])
        if len(values) > _MAX_VALUES:
            meta["values_omitted"] = len(values) - _MAX_VALUES
    problems = []
    if any(info.device == "meta" for info in new.values()):
        problems.append(f"{base}: holds meta tensors (no data); torch.load gives each its own storage, "
                        f"so any sharing between them is not shown")
    return _Part(rows=rows, notes=notes, storages=list(new.values()), skipped=list(layout.skipped),
                 meta=meta, problems=problems)


def _record_names(tensors: list[torch.Tensor], records: dict[int, tuple[str, int]]) -> dict[int, tuple[str, int, int]]:
    """{storage id: (record name, record size, file offset)} by matching addresses to record offsets.

    Every storage of an mmap-loaded checkpoint is a slice of one mapping of the whole file, so
    ``data_ptr - file_offset`` is the same base for all of them; we find that base and check it.
    """
    ptrs: dict[int, int] = {}
    for t in tensors:
        if t.device.type == "cpu":
            st = t.untyped_storage()
            if st.nbytes():
                ptrs[torch._C._storage_id(t)] = st.data_ptr()
    if not ptrs or not records:
        return {}
    offsets = sorted(records)
    lowest = min(ptrs.values())
    for off in offsets[:4]:
        base = lowest - off
        if all((p - base) in records for p in ptrs.values()):
            return {sid: (*records[p - base], p - base) for sid, p in ptrs.items()}
    return {}


# -- small text helpers -------------------------------------------------------------------------
def _short(x: Any, limit: int = 60) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:299] + "…"
