"""Read a ``torch.distributed.checkpoint`` (DCP) folder from its ``.metadata`` alone.

``.metadata`` is a pickle. torch's own ``FileSystemReader.read_metadata()`` unpickles it freely
(any global the file names is imported and called); tensorviz never does. A restricted
unpickler maps exactly DCP's own metadata classes (``Metadata``, ``TensorStorageMetadata``,
``BytesStorageMetadata``, ``ChunkStorageMetadata``, ``TensorProperties``, ``MetadataIndex``,
``StorageMeta``, ``_MEM_FORMAT_ENCODING``, the file system's ``_StorageInfo``), ``torch.Size``,
torch dtypes, ``torch.serialization._get_layout``, ``pathlib`` paths and ``collections.OrderedDict``
to plain stand-ins defined here -- nothing is imported or run from torch or the file -- and
refuses every other global with :class:`~tensorviz.core.errors.UnsafeCheckpointError`.
No torch import; no ``.distcp`` byte is read.

The layout: every saved tensor is a global tensor (a storage, device ``"global"``, key
``("global", fqn)``, ``nbytes`` = numel * itemsize), and every saved chunk a view of it named
``fqn[a:b, c:d]`` at its offsets. Each chunk is also a view of the ``.distcp`` file holding it
(a storage, device ``"file"``), named ``<file>:fqn[a:b, c:d]``, a ``uint8`` run at the chunk's
byte range (DCP writes a serialized tensor record there, so the range is longer than the data).
Non-tensor entries (``BytesStorageMetadata``: pickled values) go to ``layout.metadata["values"]``
with their file and byte range, and are views ``<file>:fqn`` of their file too.

``layout.metadata`` (JSON-friendly): ``format`` ("dcp"), ``chunks`` ({chunk view name: offsets,
sizes, file, offset, length}), ``values`` ({fqn: file, offset, length}), ``files`` ({file: size}),
``problems`` (chunks no file holds, missing files, ranges past a file's end).
"""

from __future__ import annotations

import io
import os
import pickle
from typing import Any

from tensorviz.core import limits
from tensorviz.core.errors import FileFormatError, UnsafeCheckpointError
from tensorviz.core.layout import Layout
from tensorviz.core.records import Skipped
from tensorviz.core.rows import Rows, gc_paused
from tensorviz.sources.dcp_training import dcp_categories
from tensorviz.sources.formats.pickle_scan import scan_pickle
from tensorviz.sources.parts import one_line, open_regular, read_exactly, short

__all__ = ["analyze_dcp", "read_dcp_metadata", "is_dcp_folder", "MAX_METADATA_BYTES"]

#: Largest size, offset or byte count accepted from ``.metadata`` (256 TiB): byte spans stay in int64.
_LIMIT = 1 << 48

#: A ``.metadata`` larger than this is refused before reading (about 200 bytes a chunk: 128 MiB
#: is past the ``dcp_entries`` budget of :mod:`tensorviz.core.limits` anyway).
MAX_METADATA_BYTES = 1 << 27
#: Longest fqn or file name accepted (a name is text a person reads; DCP writes module paths).
MAX_NAME_CHARS = 65_536

_ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
}


class _Record:
    """A stand-in for one of DCP's metadata dataclasses: attributes only, no behaviour. Its kind
    is its class's (``type(r).kind``): a state in the file cannot rename it. Each instance counts
    against the ``dcp_entries`` budget of the read that made it (``budget``, per read)."""

    kind = ""
    fields: tuple[str, ...] = ()  # names of a tuple state's items (TensorProperties pickles a tuple)
    budget: list[int] = [0]

    def __new__(cls, *args: Any, **kwargs: Any):
        cls.budget[0] -= 1
        if cls.budget[0] < 0:
            raise _OverBudget
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and self.fields:
            self.__dict__.update(zip(self.fields, state))
        elif isinstance(state, tuple):  # (dict state, slots state)
            for part in state:
                if isinstance(part, dict):
                    self.__dict__.update(part)
        elif isinstance(state, dict):
            self.__dict__.update(state)


class _OverBudget(Exception):
    """More records than the ``dcp_entries`` budget."""


def _record_class(name: str, budget: list[int]) -> type:
    fields = ("dtype", "layout", "requires_grad", "memory_format", "pin_memory") if name == "TensorProperties" else ()
    return type(name, (_Record,), {"kind": name, "fields": fields, "budget": budget})


_DCP = "torch.distributed.checkpoint.metadata"
_NAMES = [
    (_DCP, n)
    for n in (
        "Metadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "MetadataIndex",
        "StorageMeta",
    )
] + [("torch.distributed.checkpoint.filesystem", "_StorageInfo")]


def _records(budget: list[int]) -> dict[tuple[str, str], type]:
    """The stand-in classes of one read, sharing its record budget."""
    return {key: _record_class(key[1], budget) for key in _NAMES}


def _kind(value: Any) -> str:
    """The DCP class a value stands for ("" for anything else), from its class, never its state."""
    return type(value).kind if isinstance(value, _Record) else ""


class _Dtype(str):
    """A torch dtype, by name."""


def _size(*args: Any) -> tuple:
    return tuple(args[0]) if args else ()


def _text(*args: Any) -> str:
    """A path or layout name from its parts, which must be short strings (never ``str()`` of a
    structure the file built: a tuple of shared references grows exponentially as text)."""
    if not all(type(a) is str for a in args) or sum(map(len, args)) > MAX_NAME_CHARS:
        raise FileFormatError(f"a path or name built from {short(args)}, not from short strings")
    return "/".join(args)


def _first(*args: Any) -> Any:
    return args[0] if args else None


_CALLABLES = {
    ("torch", "Size"): _size,
    ("torch.serialization", "_get_layout"): _text,
    (_DCP, "_MEM_FORMAT_ENCODING"): _first,
    ("collections", "OrderedDict"): dict,
    **{("pathlib", n): _text for n in ("PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path")},
}


class _MetadataUnpickler(pickle.Unpickler):
    """Allows DCP's metadata classes, torch dtypes and basic containers; refuses all else."""

    def find_class(self, module: str, name: str) -> Any:
        found = self.records.get((module, name)) or _CALLABLES.get((module, name))
        if found is not None:
            return found
        if module == "torch" and name in _ITEMSIZE:
            return _Dtype(name)
        raise UnsafeCheckpointError(
            f"{self.path}: the pickle names {short(module + '.' + name, 120)[1:-1]}, which is not part of DCP's checkpoint "
            f"metadata; tensorviz reads .metadata with a restricted unpickler and never imports or "
            f"runs code a file names. If you trust the file, load it with "
            f"torch.distributed.checkpoint.FileSystemReader(folder).read_metadata()"
        )

    path = ""
    records: dict[tuple[str, str], type] = {}


def is_dcp_folder(path: str) -> bool:
    """A folder with a ``.metadata`` file (what DCP's ``FileSystemWriter`` writes)."""
    return os.path.isfile(os.path.join(path, ".metadata"))


def read_dcp_metadata(folder: str) -> Any:
    """The unpickled ``.metadata`` of a DCP folder, as stand-in records (see the module docstring).

    Raises:
        UnsafeCheckpointError: the pickle names a global outside DCP's metadata classes.
        FileFormatError: the file is not a DCP metadata pickle.
    """
    path = os.path.join(folder, ".metadata")
    with open_regular(path) as f:  # never a FIFO or a device: those would block or never end
        size = os.fstat(f.fileno()).st_size
        if size > MAX_METADATA_BYTES:
            raise FileFormatError(
                f"{path}: {size} bytes is over the {MAX_METADATA_BYTES}-byte limit for a DCP .metadata file"
            )
        data = read_exactly(path, f, size, "metadata")
    scan_pickle(path, data, calls=False)  # its size in opcodes, and no tuple of shared references
    left = [limits.current().dcp_entries]
    unpickler = _MetadataUnpickler(io.BytesIO(data))
    unpickler.path, unpickler.records = path, _records(left)
    try:
        md = unpickler.load()
    except (UnsafeCheckpointError, FileFormatError):
        raise
    except _OverBudget:
        raise limits.exceeded(path, "dcp_entries", "records of DCP metadata") from None
    except Exception as err:  # noqa: BLE001 - any malformed pickle becomes one clear error
        raise FileFormatError(
            f"{path}: not a readable DCP metadata pickle ({type(err).__name__}: {one_line(err)})"
        ) from None
    if _kind(md) != "Metadata" or not isinstance(getattr(md, "state_dict_metadata", None), dict):
        raise FileFormatError(
            f"{path}: the pickle holds {type(md).__name__}, not DCP's Metadata; is this "
            f"a torch.distributed.checkpoint folder?"
        )
    return md


def analyze_dcp(folder: str | os.PathLike) -> Layout:
    """Lay out a DCP checkpoint folder from ``.metadata``: global tensors, chunks, files.

    >>> import tensorviz as tv
    >>> layout = tv.analyze("ckpt/")                 # doctest: +SKIP
    >>> layout["0.weight[0:4, 0:8]"].start           # doctest: +SKIP
    """
    folder = os.fspath(folder)
    md = read_dcp_metadata(folder)
    with gc_paused():
        return _Builder(folder, md).layout()


class _Builder:
    def __init__(self, folder: str, md: Any) -> None:
        self.folder, self.md = folder, md
        self.rows = Rows()
        self.skipped: list[Skipped] = []
        self.problems: list[str] = []
        self.rows.unique = False  # a hostile file may repeat a chunk: the repeat is skipped
        self.path = os.path.join(folder, ".metadata")
        self.places = _places(self.path, md)
        self.chunks: dict[str, dict] = {}
        self.values: dict[str, dict] = {}
        self.files: dict[str, int] = {}  # file sizes on disk
        self.extent: dict[str, int] = {}  # the storage's size: the file's, or past it if truncated

    def layout(self) -> Layout:
        file_rows = []
        for fqn, meta in self.md.state_dict_metadata.items():
            fqn = _fqn(self.path, fqn)
            kind = _kind(meta)
            if kind == "TensorStorageMetadata":
                file_rows += self._tensor(fqn, meta)
            elif kind == "BytesStorageMetadata":
                place = self.places.get((fqn, None))
                self.values[fqn] = place or {"file": None}
                if place is not None:  # a pickled value: its bytes in the file, no global tensor
                    file_rows.append(self._file_row(fqn, place))
            else:
                self.skipped.append(Skipped(fqn, f"unknown DCP entry kind {type(meta).__name__}"))
        for name, key, rel, start, length in file_rows:  # file sizes are final now
            self.rows.rows.append((name, key, "file", self.extent[rel], ("uint8", 1), (length,), (1,), start, start))
        meta = {
            "format": "dcp",
            "chunks": self.chunks,
            "values": self.values,
            "files": self.files,
            "problems": self.problems,
        }
        training = dcp_categories(self.rows, self.files)  # torchtitan's optimizer state (issue 27)
        if training:
            meta["training"] = training
        return Layout._from_rows(self.rows, self.skipped, source=self.folder, metadata=meta)

    def _tensor(self, fqn: str, meta: Any) -> list[tuple]:
        dtype = str(getattr(getattr(meta, "properties", None), "dtype", ""))
        itemsize = _ITEMSIZE.get(dtype)
        if itemsize is None:
            self.skipped.append(Skipped(fqn, f"dtype {short(dtype, 40) if dtype else '?'} has no known item size"))
            return []
        shape = _ints(getattr(meta, "size", None), self.path, f"{_q(fqn)}: size")
        key = ("global", fqn)
        self.rows.labels[key] = f"{fqn} · global {'×'.join(map(str, shape)) or 'scalar'}"
        strides, nbytes = _contiguous(shape), _numel(shape) * itemsize
        if nbytes >= _LIMIT:
            raise FileFormatError(f"{self.path}: {_q(fqn)} has size {list(shape)}: {nbytes} bytes is over 2**48")
        out = []
        for c in getattr(meta, "chunks", None) or ():
            offs = _ints(getattr(c, "offsets", None), self.path, f"{_q(fqn)}: chunk offsets")
            sizes = _ints(getattr(c, "sizes", None), self.path, f"{_q(fqn)}: chunk sizes")
            name = fqn + "[" + ", ".join(f"{o}:{o + n}" for o, n in zip(offs, sizes)) + "]"
            if (
                len(offs) != len(shape)
                or len(sizes) != len(shape)
                or any(o + n > d for o, n, d in zip(offs, sizes, shape))
            ):
                raise FileFormatError(
                    f"{self.path}: chunk {name} of {_q(fqn)} lies outside its global size {list(shape)}"
                )
            off = sum(o * st for o, st in zip(offs, strides))
            self.rows.rows.append((name, key, "global", nbytes, (dtype, itemsize), sizes, strides, off, None))
            info = {"offsets": list(offs), "sizes": list(sizes)}
            place = self.places.get((fqn, offs))
            if place is None:
                self.problems.append(f"chunk {name} has no entry in storage_data: no file holds it")
            else:
                info.update(place)
                out.append(self._file_row(name, place))
            self.chunks[name] = info
        return out

    def _file_row(self, chunk: str, place: dict) -> tuple:
        rel = place["file"]
        path = os.path.join(self.folder, rel)
        if rel not in self.files:
            self.files[rel] = os.path.getsize(path) if os.path.isfile(path) else 0
            self.extent[rel] = self.files[rel]
            if not os.path.isfile(path):
                self.problems.append(f"{rel} is missing from the folder")
        key = ("file", path)
        self.rows.labels[key] = rel
        start, length = place["offset"], place["length"]
        if start + length > self.files[rel]:
            self.problems.append(
                f"{chunk}: bytes [{start}, {start + length}) lie past the end of {rel} ({self.files[rel]} bytes)"
            )
            self.extent[rel] = max(self.extent[rel], start + length)
        return (f"{rel}:{chunk}", key, rel, start, length)


def _places(path: str, md: Any) -> dict:
    """(fqn, chunk offsets or None) -> {file, offset, length}, from ``storage_data``."""
    out = {}
    data = getattr(md, "storage_data", None) or {}
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: storage_data is a {type(data).__name__}, not a mapping")
    for index, info in data.items():
        offs = getattr(index, "offset", None)
        fqn = _fqn(path, getattr(index, "fqn", ""))
        where = {
            "file": getattr(info, "relative_path", None),
            "offset": getattr(info, "offset", None),
            "length": getattr(info, "length", None),
        }
        if not isinstance(where["file"], str) or os.path.isabs(where["file"]) or ".." in where["file"].split("/"):
            raise FileFormatError(
                f"{path}: {_q(fqn)} is stored in {short(where['file'], 120)}, not a file inside the folder"
            )
        _ints((where["offset"], where["length"]), path, f"{_q(fqn)}: byte offset and length")
        out[(fqn, None if offs is None else _ints(offs, path, f"{_q(fqn)}: storage offsets"))] = where
    return out


def _ints(value: Any, path: str, what: str) -> tuple[int, ...]:
    """A tuple of non-negative ints from the metadata, or a FileFormatError naming it."""
    if not isinstance(value, (tuple, list)) or not all(type(x) is int and 0 <= x < _LIMIT for x in value):
        raise FileFormatError(f"{path}: {what} is {short(value, 200)}, not a list of integers in [0, 2**48)")
    return tuple(value)


def _q(fqn: str) -> str:
    """An fqn quoted for a message (cut to 120 characters)."""
    return short(fqn, 120)


def _fqn(path: str, fqn: Any) -> str:
    """An entry's fully qualified name: a string of bounded length (DCP writes module paths)."""
    if type(fqn) is not str or len(fqn) > MAX_NAME_CHARS:
        what = f"{len(fqn):,} characters" if type(fqn) is str else f"a {type(fqn).__name__}"
        raise FileFormatError(
            f"{path}: an entry's name (fqn) is {what}: {short(fqn, 80)}; DCP names entries by strings "
            f"of at most {MAX_NAME_CHARS:,} characters"
        )
    return fqn


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
