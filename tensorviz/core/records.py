"""The frozen records of a layout: :class:`TensorView`, :class:`Storage`, :class:`Group`,
:class:`Skipped`, and :class:`StorageInfo` (what a source knows about a storage).

Pure Python + numpy. Records for 100k views are common, so :func:`record` fills a frozen
dataclass's ``__dict__`` in one step instead of calling its generated ``__init__``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple, Protocol, TypeGuard, TypeVar

import numpy as np

from tensorviz.core import footprint as fp
from tensorviz.core.facts import GgufFacts, OnnxFacts, QuantizationFacts, RemoteFacts, SourceRecord, TrainingFacts
from tensorviz.core.units import format_bytes

__all__ = [
    "CONJ_NOTE",
    "LayoutLike",
    "SourceFacts",
    "SOURCE_KEYS",
    "TensorView",
    "Storage",
    "StorageInfo",
    "Group",
    "Skipped",
    "GroupBy",
    "is_grouping",
    "RELATIONS",
    "StorageKey",
    "StorageStats",
    "ViewSpans",
    "CATEGORIES",
    "Logical",
    "Piece",
]

#: The note on a conjugate view (``z.conj()`` of a complex tensor: the conj bit set, no copy);
#: the live walk writes it, ``tv.diff`` compares it as the field "conjugate".
CONJ_NOTE = "conjugate view: its bytes hold the values unconjugated (torch conjugates on read; raw bytes do not)"

GroupBy = Literal["storage", "span", "overlap"]
GROUPINGS: tuple[GroupBy, ...] = ("storage", "span", "overlap")


def is_grouping(by: object) -> TypeGuard[GroupBy]:
    """Whether ``by`` names one of the three groupings of :data:`GROUPINGS`."""
    return isinstance(by, str) and by in GROUPINGS


RELATIONS = ("identical", "same-bytes", "contains", "within", "overlaps", "disjoint", "unrelated")

StorageKey = tuple  # (device: str, identity: int | str)

#: What a view is in training state (:attr:`TensorView.category`); "" when the source cannot tell.
#: ``copies`` are further copies of the weights (EMA, fp32 masters); ``other`` is anything else a
#: training checkpoint holds (an LR scheduler's, a grad scaler's, a sampler's tensors).
CATEGORIES = ("weights", "buffers", "gradients", "optimizer", "copies", "other")


@dataclass(frozen=True)
class Logical:
    """What a view of packed or block-quantized bytes means: the tensor the bytes encode.

    A GGUF ``Q4_K`` tensor of logical shape ``(4096, 4096)`` is stored as blocks of 256
    elements in 144 bytes each; no strided view of elements exists, so its view reads the
    bytes (``uint8``, one dimension) and this record says what they hold: ``dtype`` is the
    format's own type name ("Q4_K", "IQ2_XXS", ...), ``shape`` the logical shape (outermost
    first), ``block`` the elements per block and ``block_nbytes`` the bytes per block.
    """

    dtype: str
    shape: tuple[int, ...]
    block: int = 1
    block_nbytes: int = 0

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Piece:
    """One stored piece of a logical tensor whose bytes live in several tensors.

    A torchao ``Int8Tensor`` weight ``0.weight`` (float32, 64 × 64) holds its values in three
    plain tensors; each is a view of its own storage, named ``0.weight.qdata``,
    ``0.weight.scale``, ``0.weight.zero_point``, and each carries this record: ``of`` is the
    logical tensor's name ("0.weight"), ``part`` the inner attribute path ("qdata"; nested
    subclasses join with ".": "a.qdata"), ``kind`` the subclass's type name ("Int8Tensor") or
    the packing format ("GPTQ"), ``dtype`` and ``shape`` the logical tensor's. ``bits`` and
    ``group`` are the packing's bits per value and group (block) shape where a format states
    them (0 and () for a tensor subclass, whose own code knows them).
    """

    of: str
    part: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    bits: int = 0
    group: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        return Logical(self.dtype, self.shape).numel  # one product of a shape, Logical's


@dataclass(frozen=True)
class TensorView:
    """One named tensor reading a storage through (offset, shape, stride, dtype).

    ``start``/``stop`` is the span in bytes (from the start of the storage; for a safetensors
    file, from the start of the file). ``nbytes`` counts logical elements (numel * itemsize);
    ``footprint_nbytes`` counts the distinct bytes read (smaller for expanded views). ``exact``
    is False when the footprint has more blocks than :data:`tensorviz.core.footprint.RUN_BUDGET`:
    then the span stands in for it (an upper bound) and ``footprint_nbytes`` is the span size.
    ``category`` is one of :data:`CATEGORIES` (weights, gradients, optimizer state...) when the
    source knows it, else "". ``logical`` says what a view of block-quantized bytes encodes
    (a GGUF ``Q4_K`` tensor: its ggml type and logical shape; see :class:`Logical`), else None.
    ``piece`` says which logical tensor this view is one stored piece of (a tensor subclass's
    inner tensor, a packed checkpoint's ``qweight``; see :class:`Piece`), else None.
    """

    name: str
    storage: StorageKey
    device: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    itemsize: int
    start: int
    stop: int
    nbytes: int
    footprint_nbytes: int
    is_contiguous: bool
    exact: bool = True
    note: str = ""
    category: str = ""
    logical: Logical | None = None
    piece: Piece | None = None

    @property
    def numel(self) -> int:
        return self.nbytes // self.itemsize if self.itemsize else 0

    @property
    def is_empty(self) -> bool:
        return self.start == self.stop

    @property
    def is_dense(self) -> bool:
        """The footprint is the whole span: one gap-free block of bytes (and known exactly)."""
        return self.exact and not self.is_empty and self.footprint_nbytes == self.stop - self.start

    @property
    def is_expanded(self) -> bool:
        """Some element is read through more than one index (stride 0 or overlapping strides)."""
        return self.footprint_nbytes < self.nbytes

    def footprint(self) -> fp.Footprint:
        """The exact bytes this view reads (see :func:`tensorviz.core.footprint.footprint`)."""
        if self.is_dense:
            return fp.Footprint(single(self.start, self.stop))
        return fp.footprint(self.start, self.shape, self.stride, self.itemsize)

    def footprint_runs(self) -> np.ndarray:
        """Sorted, merged, disjoint byte runs ``[[a0, b0], [a1, b1], ...]`` (int64, read-only)."""
        return self.footprint().runs

    def __repr__(self) -> str:
        shape = ", ".join(map(str, self.shape))
        flags = "" if self.is_contiguous else " non-contiguous"
        return (
            f"TensorView({self.name!r}, {self.dtype}[{shape}], stride={self.stride}, "
            f"offset={self.offset}, bytes=[{self.start}, {self.stop}){flags}, "
            f"storage={key_text(self.storage)})"
        )


def single(a: int, b: int) -> np.ndarray:
    runs = np.array([[a, b]], dtype=np.int64)
    runs.flags.writeable = False
    return runs


def key_text(key: StorageKey) -> str:
    device, ident = key
    return f"{device}:{ident:#x}" if isinstance(ident, int) else f"{device}:{ident}"


@dataclass(frozen=True, slots=True)
class StorageInfo:
    """What a collector knows about a storage before layout: its key, device, size and label."""

    key: StorageKey
    device: str
    nbytes: int
    label: str = ""


@dataclass(frozen=True)
class Storage:
    """One storage and how its bytes are used by the views on it.

    ``covered_nbytes`` counts bytes read by at least one view, ``header_nbytes`` a whole file's
    header (a safetensors file's 8 + N bytes: the format's own, read by no view),
    ``unreferenced_nbytes`` the rest (``torch.save`` writes them anyway; a file's gaps and
    padding), ``complete_names`` the views that read every byte.
    ``exact`` is False when a view's footprint was over the run budget (coverage is then an
    upper bound).
    """

    key: StorageKey
    index: int
    device: str
    nbytes: int
    names: tuple[str, ...]
    covered_nbytes: int
    unreferenced_nbytes: int
    complete_names: tuple[str, ...]
    label: str = ""
    exact: bool = True
    whole_file: bool = False  # the storage is a whole file read header-only (a .safetensors file)
    header_nbytes: int = 0  # a whole file's header: neither read by a view nor unreferenced

    def __repr__(self) -> str:
        header = f", header={format_bytes(self.header_nbytes)}" if self.header_nbytes else ""
        return (
            f"Storage(#{self.index} {self.label or self.device}, {format_bytes(self.nbytes)}, "
            f"{len(self.names)} view{'s' * (len(self.names) != 1)}{header}, "
            f"unreferenced={format_bytes(self.unreferenced_nbytes)})"
        )


class LayoutLike(Protocol):
    """What the modules that read a :class:`~tensorviz.core.layout.Layout` (its text, module tree,
    categories, kept-alive storages) ask of it. The Layout satisfies it; naming the reads here,
    below ``layout.py``, keeps those modules below the Layout that calls them, so the module
    graph has no cycle.
    """

    @property
    def views(self) -> tuple[TensorView, ...]: ...
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def storages(self) -> tuple[Storage, ...]: ...
    @property
    def skipped(self) -> tuple[Skipped, ...]: ...
    @property
    def source(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...
    @property
    def facts(self) -> SourceFacts: ...
    @property
    def categories(self) -> tuple[str, ...]: ...
    @property
    def naive_nbytes(self) -> int: ...
    @property
    def unique_nbytes(self) -> int: ...
    @property
    def storage_nbytes(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, name: str) -> TensorView: ...
    def shared(self, by: GroupBy = "storage") -> tuple[Group, ...]: ...
    def relation(self, a: str, b: str) -> str: ...
    def footprint_runs(self, name: str) -> np.ndarray: ...
    def footprint_piece(self, name: str) -> Any: ...
    def union_nbytes(self, names: Iterable[str]) -> int: ...
    def storage(self, which: str | StorageKey | int) -> Storage: ...
    def storage_views(self, which: str | StorageKey | int) -> tuple[TensorView, ...]: ...
    def storage_stats(self) -> StorageStats: ...


@dataclass(frozen=True)
class SourceFacts:
    """What a source knew besides the tensors: one typed field per fact, for every layer to read.

    Sources hand these in as a plain mapping (``Layout(..., metadata=...)``), keyed by the names
    of :data:`SOURCE_KEYS`; a key no field names stays in :attr:`other` (and, like every fact,
    in ``layout.metadata``, the same facts as a plain dict for JSON and older callers).

    >>> import tensorviz as tv, torch
    >>> tv.analyze(torch.nn.Linear(2, 2)).facts.modules["classes"]
    {'': 'Linear'}
    """

    #: "safetensors", "index", "folder", "checkpoint", "dcp", "distributed"; "" for live objects
    format: str = ""
    #: safetensors: file -> the header's bytes [0, data start)
    header: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: safetensors: file -> its __metadata__
    file_metadata: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: __metadata__ renames the files do not hold ("dropped: a -> kept b")
    dropped: Mapping[str, str] = field(default_factory=dict)
    #: what a reader found wrong (duplicates, freed storages, disagreeing ranks)
    problems: Sequence[str] = ()
    #: a folder's other weight-file variants (tensorviz.sources.variants)
    variants: Mapping[str, Any] = field(default_factory=dict)
    #: checkpoints and DCP: non-tensor values, by name
    values: Mapping[str, Any] = field(default_factory=dict)
    #: values past the cap of ``values``
    values_omitted: int = 0
    #: live modules: {"classes", "buffers", "not_saved"} (tensorviz.sources.modules)
    modules: Mapping[str, Any] = field(default_factory=dict)
    #: a memory's storage objects
    storage_objects: Mapping[StorageKey, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    #: FSDP2's units and per-rank totals (tensorviz.core.fsdp)
    fsdp: Mapping[str, Any] | None = None
    #: optimizer state and gradients (tensorviz.sources.training, ckpt_training, dcp_training)
    training: TrainingFacts | None = None
    #: a GGUF file's metadata in brief (tensorviz.sources.formats.gguf)
    gguf: GgufFacts | None = None
    #: GGUF: the bytes no tensor reads, by kind ("header bytes", "padding bytes", ...)
    unreferenced: Mapping[str, int] = field(default_factory=dict)
    #: GGUF: why a tensor absent from the file is read from another (tied embeddings), or ""
    tied: str = ""
    #: .npz: each deflated or skipped member, where it is stored (in words)
    npz: Mapping[str, str] = field(default_factory=dict)
    #: ONNX: the initializers and their external data files (tensorviz.sources.formats.onnx_files)
    onnx: OnnxFacts | None = None
    #: a remote source: where it was read, what the reads cost (tensorviz.sources.remote)
    remote: RemoteFacts | None = None
    #: packed (quantized) weights found in files (tensorviz.sources.packed)
    quantization: QuantizationFacts | None = None
    #: distributed: device meshes (shape, ranks, dim_names)
    meshes: Sequence[Mapping[str, Any]] = ()
    #: distributed: shard view -> its rank and mesh
    shards: Mapping[str, Any] = field(default_factory=dict)
    #: DCP: chunk view -> its file and offsets
    chunks: Mapping[str, Any] = field(default_factory=dict)
    #: a model folder: the weight variant read ("default" when others exist; "" for no choice)
    variant: str = ""
    #: a model folder: its files left out (another variant, a second format, training state)
    ignored_files: Sequence[str] = ()
    #: a torch checkpoint: its top-level entries that are not tensors, each described briefly
    contents: Mapping[str, str] = field(default_factory=dict)
    #: a torch checkpoint: storage key -> the byte where its record's data starts in the archive
    record_offsets: Mapping[str, int] = field(default_factory=dict)
    #: a torch checkpoint: storage key -> the device it was saved from, when not the CPU
    saved_on: Mapping[str, str] = field(default_factory=dict)
    #: a DCP folder: data file -> its size in bytes
    files: Mapping[str, int] = field(default_factory=dict)
    #: a distributed layout: the ranks that took part
    world_size: int = 0
    #: a distributed layout: global tensor -> its placements, mesh and ranks
    tensors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: a distributed layout: rank -> what that rank reported about itself
    ranks: Mapping[Any, Mapping[str, Any]] = field(default_factory=dict)
    #: a distributed layout: what the exchange between ranks cost (description bytes, leaders)
    exchange: Mapping[str, Any] = field(default_factory=dict)
    #: facts of a source no field above names yet
    other: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> SourceFacts:
        """The facts of a source's mapping (see :data:`SOURCE_KEYS`)."""
        known = {name: metadata[key] for key, name in SOURCE_KEYS.items() if key in metadata}
        other = {k: v for k, v in metadata.items() if k not in SOURCE_KEYS}
        for name, kind in SOURCE_RECORDS.items():
            if isinstance(known.get(name), (kind, Mapping)):  # a record, or its dict form (layout.metadata)
                known[name] = kind.of(known[name])
            elif name in known:  # not a fact of this kind: kept as it came
                other[name] = known.pop(name)
        return cls(**known, other=other) if other else cls(**known)

    @property
    def whole_files(self) -> frozenset[StorageKey]:
        """Keys of the storages that are whole files read header-only (``("file", path)``)."""
        return frozenset(("file", path) for path in self.header)


#: The fields of :class:`SourceFacts` that are records of one kind of source (:mod:`tensorviz.core.facts`).
SOURCE_RECORDS: dict[str, type[SourceRecord]] = {
    "training": TrainingFacts,
    "gguf": GgufFacts,
    "onnx": OnnxFacts,
    "remote": RemoteFacts,
    "quantization": QuantizationFacts,
}

#: The source mapping's key of each :class:`SourceFacts` field.
SOURCE_KEYS = {
    **{f: f for f in SourceFacts.__dataclass_fields__ if f not in ("file_metadata", "other")},
    "__metadata__": "file_metadata",
}


class StorageStats(NamedTuple):
    """Numpy columns per storage (index order), from :meth:`Layout.storage_stats`.

    ``nbytes`` (size), ``views`` (number of views), ``covered`` (bytes some footprint reads,
    as :attr:`Storage.covered_nbytes`), ``footprint_nbytes`` (sum of the views' footprints:
    larger than ``covered`` exactly when two views share a byte) and ``non_contiguous``
    (number of views that are not contiguous). All int64.
    """

    nbytes: np.ndarray
    views: np.ndarray
    covered: np.ndarray
    footprint_nbytes: np.ndarray
    non_contiguous: np.ndarray


class ViewSpans(NamedTuple):
    """Per view (source order), from :meth:`Layout.view_spans`: ``storage`` index, span
    ``start`` and ``stop`` in bytes (int64, read-only)."""

    storage: np.ndarray
    start: np.ndarray
    stop: np.ndarray


@dataclass(frozen=True)
class Group:
    """Views grouped by one rule; ``start``/``stop`` is the byte range their spans cover.

    ``exact`` is False for an overlap group joined through a footprint over the run budget
    (its span stood in for its bytes, so the group may be too large).
    """

    by: str
    names: tuple[str, ...]
    storage: StorageKey
    start: int
    stop: int
    exact: bool = True

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __repr__(self) -> str:
        flag = "" if self.exact else ", inexact"
        return f"Group(by={self.by!r}, names={self.names}, bytes=[{self.start}, {self.stop}){flag})"


@dataclass(frozen=True)
class Skipped:
    """A value that could not be analysed, and why, in words a person understands."""

    name: str
    reason: str

    def __repr__(self) -> str:
        return f"Skipped({self.name!r}: {self.reason})"


_FIELDS: dict[type, tuple[str, ...]] = {}
_R = TypeVar("_R")


def record(cls: type[_R], values: tuple) -> _R:
    """A frozen dataclass record built without its generated ``__init__``.

    That ``__init__`` calls ``object.__setattr__`` once per field, which is most of the cost of
    a layout of 100k views. This fills the instance ``__dict__`` in one step instead; ``values``
    must list every field in declaration order (the tests compare against ``cls(*values)``).
    """
    obj: _R = object.__new__(cls)
    obj.__dict__.update(zip(_FIELDS.get(cls) or _field_names(cls), values))
    return obj


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


def view_record(
    name: str,
    dtype: tuple[str, int],
    offset: int,
    key: StorageKey,
    device: str,
    geo: fp.Geometry,
    start: int,
    note: str,
    category: str = "",
    logical: Logical | None = None,
    piece: Piece | None = None,
) -> TensorView:
    """The TensorView of one view: its name, ``(dtype name, itemsize)``, offset, storage and Geometry."""
    dtype_name, itemsize = dtype
    return record(
        TensorView,
        (
            name,
            key,
            device,
            dtype_name,
            geo.shape,
            geo.stride,
            offset,
            itemsize,
            start,
            start + geo.reach * itemsize,
            geo.numel * itemsize,
            geo.footprint * itemsize,
            geo.contiguous,
            geo.exact,
            note,
            category,
            logical,
            piece,
        ),
    )


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the layout's own columns are handed out this way)."""
    out = a.view()
    out.flags.writeable = False
    return out
