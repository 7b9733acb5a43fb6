"""Data-free stand-ins for tensors, so the savers' own checks can run on metadata alone.

safetensors, transformers and accelerate decide what to keep, drop or refuse with small
helper functions that only read tensor *metadata* (``data_ptr``, ``untyped_storage().nbytes()``,
``view(-1)``, ``is_contiguous``...). Some of those helpers also copy (``.contiguous()``,
``.clone()``) or are handed tensors whose data we must never touch. A :class:`StandIn` answers
every metadata question exactly as the real tensor would -- same device, storage address and
size, offset, shape, stride and dtype -- and turns ``.contiguous()`` / ``.clone()`` into a new
stand-in on a fresh pretend storage. Shape operations (``view``, indexing) are delegated to a
meta tensor twin, so torch itself decides whether ``view(-1)`` is possible and, when it is not,
raises its own exact message.

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch

from tensorviz.core.footprint import is_row_major

__all__ = [
    "StandIn",
    "StorageStandIn",
    "SubclassStandIn",
    "from_tensor",
    "from_view",
    "from_meta",
    "from_subclass",
    "fresh_ptr",
    "Opaque",
    "opaque",
]

# Pretend addresses for copies and for layouts without tensors: far above any real heap
# address on the supported platforms, 1 TiB apart, never 0 (0 means "no storage" to the savers).
_FRESH = itertools.count(1)
_FRESH_BASE = 1 << 56
_FRESH_STEP = 1 << 40


def fresh_ptr() -> int:
    """A new pretend storage address, distinct from every other one handed out."""
    return _FRESH_BASE + next(_FRESH) * _FRESH_STEP


class StorageStandIn:
    """What ``tensor.untyped_storage()`` answers: an address, a size and a device."""

    __slots__ = ("_ptr", "_nbytes", "device", "key")

    def __init__(self, ptr: int, nbytes: int, device: torch.device, key: Any):
        self._ptr, self._nbytes, self.device, self.key = ptr, nbytes, device, key

    def data_ptr(self) -> int:
        return self._ptr

    def nbytes(self) -> int:
        return self._nbytes

    def size(self) -> int:
        return self._nbytes

    def __repr__(self) -> str:
        return f"StorageStandIn(ptr={self._ptr:#x}, nbytes={self._nbytes}, device={self.device})"


class StandIn:
    """Tensor metadata without data. ``isinstance(s, torch.Tensor)`` is True on purpose, so the
    savers' own type checks accept it and go on to their real decisions.

    ``source`` is the name of the view it stands for, or ``"copy of NAME"`` after ``.contiguous()``
    / ``.clone()`` made a new storage.
    """

    __slots__ = (
        "dtype",
        "device",
        "shape",
        "_stride",
        "_offset",
        "_storage",
        "source",
        "requires_grad",
        "_reach",
        "_numel",
        "_elsize",
        "_contig",
        "_flat",
        "_last",
    )
    layout = torch.strided
    is_sparse = False
    is_quantized = False
    is_nested = False

    def __init__(
        self,
        dtype: torch.dtype,
        device: torch.device,
        shape: tuple[int, ...],
        stride: tuple[int, ...],
        offset: int,
        storage: StorageStandIn,
        source: str,
    ):
        self.dtype, self.device = dtype, device
        self.shape = shape if type(shape) is torch.Size else torch.Size(shape)
        self._stride, self._offset, self._storage = tuple(stride), int(offset), storage
        self.source = source
        self.requires_grad = False
        self._reach = -1
        self._numel = math.prod(self.shape)  # asked of every tensor by every saver: found once
        self._elsize = _itemsize(dtype)
        self._contig = -1  # row-major contiguity, found on first ask
        self._flat: StandIn | None = None  # view(-1), made once (each helper call asks again)
        self._last: StandIn | None = None  # [-1] of a 1-d stand-in, made once (as view(-1))

    @classmethod
    def _same(cls, like: StandIn, shape: torch.Size, stride: tuple[int, ...], offset: int, numel: int) -> StandIn:
        """A stand-in of ``like``'s dtype, device, storage and source with this geometry, made
        without the checks of ``__init__`` (the library's hot loops ask for a view per tensor)."""
        return cls._filled(
            like.dtype, like.device, shape, stride, offset, like._storage, like.source, numel, like._elsize
        )

    @classmethod
    def _filled(
        cls,
        dtype: torch.dtype,
        device: torch.device,
        shape: torch.Size,
        stride: tuple[int, ...],
        offset: int,
        storage: StorageStandIn,
        source: str,
        numel: int,
        elsize: int,
    ) -> StandIn:
        """Every field ``__init__`` sets, given as ``__init__`` would make it (a Size, a tuple of
        ints, the element count and size): the one place besides ``__init__`` that fills a stand-in."""
        out = object.__new__(cls)
        out.dtype, out.device, out.shape, out._stride, out._offset = dtype, device, shape, stride, offset
        out._storage, out.source, out.requires_grad, out._reach = storage, source, False, -1
        out._numel, out._elsize, out._contig, out._flat, out._last = numel, elsize, -1, None, None
        return out

    # isinstance(stand_in, torch.Tensor) -> True: the savers' type checks then treat it as a tensor.
    @property  # type: ignore[misc]
    def __class__(self):  # noqa: D401 - deliberately reports torch.Tensor
        return torch.Tensor

    # -- metadata the savers read -------------------------------------------------------
    def untyped_storage(self) -> StorageStandIn:
        return self._storage

    def storage_offset(self) -> int:
        return self._offset

    def stride(self, dim: int | None = None):
        return self._stride if dim is None else self._stride[dim]

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def element_size(self) -> int:
        return self._elsize

    def nelement(self) -> int:
        return self._numel

    numel = nelement

    @property
    def nbytes(self) -> int:
        return self.nelement() * self.element_size()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def data_ptr(self) -> int:
        if self._numel == 0:
            return 0  # as torch reports it for every empty tensor, whatever its offset
        return self._storage._ptr + self._offset * self._elsize

    def is_contiguous(self, memory_format: Any = None) -> bool:
        if memory_format not in (None, torch.contiguous_format):
            return self._twin().is_contiguous(memory_format=memory_format)
        if self._contig < 0:
            self._contig = is_row_major(tuple(self.shape), self._stride)
        return bool(self._contig)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    # -- shape operations: torch decides, on a meta twin -----------------------------------
    def _twin(self) -> torch.Tensor:
        reach = 1
        for size, st in zip(self.shape, self._stride):
            if size == 0:
                reach = 0
                break
            reach += (size - 1) * st
        base = torch.empty(self._offset + reach, dtype=self.dtype, device="meta")
        return base.as_strided(tuple(self.shape), self._stride, self._offset)

    def reach_nbytes(self) -> int:
        """One past the last byte of its storage this view can address (0 when empty)."""
        if self._reach < 0:
            if self.nelement() == 0:
                self._reach = 0
            else:
                last = self._offset
                for size, st in zip(self.shape, self._stride):  # a loop: no generator per stand-in
                    last += (size - 1) * st
                self._reach = (last + 1) * self.element_size()
        return self._reach

    def is_freed(self) -> bool:
        """Its storage no longer holds the bytes it reads (``resize_(0)``, as FSDP does)."""
        return self.reach_nbytes() > self._storage.nbytes()

    def meta_twin(self, storages: dict[int, torch.UntypedStorage]) -> torch.Tensor:
        """A real meta tensor with this geometry; stand-ins of one storage get one meta storage
        (``storages`` keeps them), so library code sees views and copies exactly as torch makes
        them, and nothing is allocated."""
        key = id(self._storage)
        st = storages.get(key)
        if st is None or st.nbytes() < self.reach_nbytes():
            st = storages[key] = torch.UntypedStorage(max(self._storage.nbytes(), self.reach_nbytes()), device="meta")
        return torch.empty(0, dtype=self.dtype, device="meta").set_(st, self._offset, self.shape, self._stride)

    def _derived(self, t: torch.Tensor) -> StandIn:
        return StandIn(
            t.dtype, self.device, tuple(t.shape), t.stride(), int(t.storage_offset()), self._storage, self.source
        )

    def view(self, *args: Any) -> StandIn:
        if self._flat is not None and args in _FLAT:  # made below, once: what every later call returns
            return self._flat
        n = self._numel
        if args in _FLAT and n > 1 and self.is_contiguous():  # torch's answer, no twin
            self._flat = StandIn._same(self, torch.Size((n,)), (1,), self._offset, n)  # immutable: serves every call
            return self._flat
        return self._derived(self._twin().view(*args))

    def reshape(self, *args: Any) -> StandIn:
        twin = self._twin()
        out = twin.reshape(*args)
        if out.untyped_storage()._cdata != twin.untyped_storage()._cdata:  # reshape copied
            return _copy_of(self, tuple(out.shape))
        return self._derived(out)

    def __getitem__(self, index: Any) -> StandIn:
        if type(index) is int and index == -1 and self._last is not None:  # made below, once
            return self._last
        if type(index) is int and len(self.shape) == 1 and -self.shape[0] <= index < self.shape[0]:
            at = self._offset + (index % self.shape[0]) * self._stride[0]  # one element, as torch picks it
            one = StandIn._same(self, _SCALAR, (), at, 1)
            if index == -1:  # safetensors' _end_ptr: view(-1)[-1], in each helper call
                self._last = one
            return one
        return self._derived(self._twin()[index])

    def detach(self) -> StandIn:
        return self

    # -- copies: a fresh pretend storage, never a byte read ----------------------------------
    def contiguous(self, memory_format: Any = None) -> StandIn:
        return self if self.is_contiguous() else _copy_of(self, tuple(self.shape))

    def clone(self, memory_format: Any = None) -> StandIn:
        return _copy_of(self, tuple(self.shape))

    def to(self, *args: Any, **kwargs: Any):
        raise _WouldReadData(f"{self.source}: .to() would copy tensor data")

    def cpu(self):
        raise _WouldReadData(f"{self.source}: .cpu() would copy tensor data")

    def __repr__(self) -> str:
        return (
            f"StandIn({self.source!r}, {str(self.dtype)[6:]}{list(self.shape)}, stride={self._stride}, "
            f"offset={self._offset}, {self._storage!r})"
        )


_SCALAR = torch.Size(())

#: ``view`` arguments that flatten (``view(-1)``, as safetensors' ``_end_ptr`` asks).
_FLAT = ((-1,), ((-1,),))

_ITEMSIZE: dict[torch.dtype, int] = {}


def _itemsize(dtype: torch.dtype) -> int:
    size = _ITEMSIZE.get(dtype)
    if size is None:
        size = _ITEMSIZE[dtype] = torch.empty((), dtype=dtype, device="meta").element_size()
    return size


class _WouldReadData(RuntimeError):
    """A saver went on to read tensor data: the metadata-only evaluation stops here."""


def _copy_of(s: StandIn, shape: tuple[int, ...]) -> StandIn:
    stride, acc = [], 1
    for size in reversed(shape):
        stride.append(acc)
        acc *= max(size, 1)
    nbytes = s.nelement() * s.element_size()
    ptr = fresh_ptr() if nbytes and s.device.type != "meta" else 0
    storage = StorageStandIn(ptr, nbytes, s.device, ("copy", s.source))
    name = s.source if s.source.startswith("copy of ") else f"copy of {s.source}"
    return StandIn(s.dtype, s.device, shape, tuple(reversed(stride)), 0, storage, name)


#: ``str(device)`` per device (equal devices print alike): asked for every tensor of a check.
_DEVICE_NAMES: dict[torch.device, str] = {}


def from_tensor(name: str, t: torch.Tensor, storages: dict) -> StandIn:
    """A stand-in answering like ``t`` (real addresses; nothing of ``t`` is kept).

    ``storages`` maps a storage identity to its :class:`StorageStandIn`, so two names on one
    storage share one stand-in storage, as they do in torch.
    """
    device = t.device
    where = _DEVICE_NAMES.get(device)
    if where is None:
        where = _DEVICE_NAMES[device] = str(device)
    key = (where, torch._C._storage_id(t))  # type: ignore[attr-defined]  # torch's stubs omit it
    st = storages.get(key)
    if st is None:
        raw = t.untyped_storage()
        st = storages[key] = StorageStandIn(raw.data_ptr(), raw.nbytes(), device, key)
    # a plain tensor's shape and stride are already what __init__ makes of them (a Size, a
    # tuple of ints): filled in directly (100k per check)
    dtype, shape = t.dtype, t.shape
    offset = int(t.storage_offset())
    return StandIn._filled(dtype, device, shape, t.stride(), offset, st, name, math.prod(shape), _itemsize(dtype))


def from_meta(t: torch.Tensor, storage: StorageStandIn | None, device: torch.device, source: str) -> StandIn:
    """The stand-in for a meta tensor a library returned: a view of ``storage`` when it reads
    one of the twins' storages, else a copy on a fresh pretend storage."""
    if storage is not None:
        return StandIn(t.dtype, device, tuple(t.shape), t.stride(), int(t.storage_offset()), storage, source)
    nbytes = t.nelement() * t.element_size()
    ptr = fresh_ptr() if nbytes and device.type != "meta" else 0
    fresh = StorageStandIn(ptr, nbytes, device, ("copy", source))
    return StandIn(t.dtype, device, tuple(t.shape), t.stride(), 0, fresh, f"copy of {source}")


class Opaque:
    """A tensor tensorviz does not replay (sparse, nested, quantized, a subclass, a DTensor...).

    Savers see it in place of the tensor, never the tensor itself: ``reason`` says why it is not
    replayed, ``layout`` is its sparse layout name ("" otherwise).
    """

    __slots__ = ("name", "reason", "layout")

    def __init__(self, name: str, reason: str, layout: str = ""):
        self.name, self.reason, self.layout = name, reason, layout

    def own_tensor(self) -> torch.Tensor:
        """A one-element tensor of the same layout, made here: library checks that only read the
        layout can run on it instead of on the user's tensor."""
        plain = torch.zeros(1, 1)
        if self.layout == "sparse_coo":
            return plain.to_sparse()
        if self.layout in ("sparse_csr", "sparse_csc"):
            return plain.to_sparse(layout=getattr(torch, self.layout))
        if self.layout in ("sparse_bsr", "sparse_bsc"):
            return plain.to_sparse(layout=getattr(torch, self.layout), blocksize=(1, 1))
        return plain

    def __repr__(self) -> str:
        return f"Opaque({self.name!r}: {self.reason})"


def opaque(name: str, t: Any) -> Opaque:
    """The :class:`Opaque` for a tensor that is not a plain strided one (every query guarded:
    a subclass's ``__torch_function__`` may raise on any of them)."""
    from tensorviz.sources.live import why_not_analysable

    try:
        reason = why_not_analysable(t) or f"a {type(t).__name__}, not a plain tensor"
        layout = str(t.layout).removeprefix("torch.")
    except Exception as e:  # noqa: BLE001 - the subclass's own failure is the reason
        return Opaque(name, f"a {type(t).__name__} whose __torch_function__ raises {type(e).__name__}: {e}")
    return Opaque(name, reason, "" if layout == "strided" else layout)


class _StorageAnswer:
    """What a tensor subclass's own ``untyped_storage()`` answered, replayed: its address and size,
    or the error asking for them raised (a wrapper subclass made by ``_make_wrapper_subclass``
    has no data of its own: "Attempted to access the data pointer on an invalid python storage").
    ``size()`` is what a ``TypedStorage`` over it answers (torch's ``Tensor.storage()`` wraps this
    very storage, and its ``data_ptr()`` asks it again)."""

    __slots__ = ("_ptr", "_nbytes", "_error", "device", "_itemsize")

    def __init__(self, ptr: int, nbytes: int, error: tuple[type, str] | None, device: torch.device, itemsize: int):
        self._ptr, self._nbytes, self._error, self.device, self._itemsize = ptr, nbytes, error, device, itemsize

    def _raise(self) -> None:
        if self._error is not None:
            cls, message = self._error
            raise cls(message)

    def data_ptr(self) -> int:
        self._raise()
        return self._ptr

    def nbytes(self) -> int:
        self._raise()
        return self._nbytes

    def size(self) -> int:
        self._raise()
        return self._nbytes // max(self._itemsize, 1)


class SubclassStandIn:
    """A traceable tensor subclass (torchao's ``Int8Tensor``, ``NF4Tensor``...) as the savers'
    metadata helpers see it: its logical dtype, shape and device, and its own storage's answers
    (recorded once from the tensor itself by :func:`from_subclass`; see :class:`_StorageAnswer`).
    Anything that would run the subclass's own code on data (``.contiguous()``, ``.to()``, a
    view) stops the evaluation. ``pieces`` are the layout's names of its inner tensors, ``inner``
    their stand-ins by attribute path (a saver that flattens the subclass writes those)."""

    __slots__ = ("name", "kind", "library", "dtype", "device", "shape", "_storage", "pieces", "_contiguous", "inner")
    layout = torch.strided
    is_sparse = False
    is_quantized = False
    is_nested = False

    def __init__(self, name: str, kind: str, meta: tuple, storage: _StorageAnswer, pieces: tuple[str, ...]):
        self.name, self.kind, self.pieces, self._storage = name, kind, pieces, storage
        self.library = ""  # the top-level package defining the subclass ("torchao")
        self.inner: dict[str, StandIn] = {}  # inner attribute path -> stand-in of that plain tensor
        self.dtype, self.device, self.shape, self._contiguous = meta

    @property  # type: ignore[misc]
    def __class__(self):  # noqa: D401 - deliberately reports torch.Tensor, as StandIn does
        return torch.Tensor

    def untyped_storage(self) -> _StorageAnswer:
        return self._storage

    def storage(self) -> _StorageAnswer:
        return self._storage

    def nelement(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    numel = nelement

    def element_size(self) -> int:
        return _itemsize(self.dtype)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return self._contiguous

    def _own_code(self, what: str) -> Any:
        raise _WouldReadData(f"{self.name}: {what} would run the {self.kind} subclass's own code on its data")

    def contiguous(self, memory_format: Any = None) -> Any:
        return self._own_code(".contiguous()")

    def clone(self, memory_format: Any = None) -> Any:
        return self._own_code(".clone()")

    def to(self, *args: Any, **kwargs: Any) -> Any:
        return self._own_code(".to()")

    def view(self, *args: Any) -> Any:
        return self._own_code(".view()")

    def __getitem__(self, index: Any) -> Any:
        return self._own_code("indexing")

    def data_ptr(self) -> int:
        return self._own_code(".data_ptr()")

    def __repr__(self) -> str:
        return f"SubclassStandIn({self.name!r}: {self.kind} {str(self.dtype)[6:]}{list(self.shape)})"


def from_subclass(name: str, t: torch.Tensor, pieces: tuple[str, ...]) -> SubclassStandIn:
    """The stand-in of a traceable subclass: its metadata, and what its own storage answers when
    a saver asks for its address and size (asked once, here, as the savers ask: through the
    subclass's ``__torch_function__``; nothing is read or kept)."""
    error: tuple[type, str] | None = None
    ptr = nbytes = 0
    try:
        st = t.untyped_storage()
        ptr, nbytes = st.data_ptr(), st.nbytes()
    except Exception as e:  # noqa: BLE001 - the subclass's own answer, replayed to the savers
        error = (type(e) if _rebuildable(type(e)) else RuntimeError, str(e))
    meta = (t.dtype, t.device, tuple(t.shape), bool(t.is_contiguous()))
    storage = _StorageAnswer(ptr, nbytes, error, t.device, t.element_size())
    out = SubclassStandIn(name, type(t).__qualname__, meta, storage, pieces)
    out.library = type(t).__module__.partition(".")[0]
    return out


def storage_error(v: Any) -> str:
    """The message a subclass stand-in's storage raises when asked its address ("" if none)."""
    st = v._storage if isinstance(v, SubclassStandIn) else None
    return st._error[1] if st is not None and st._error is not None else ""


def _rebuildable(cls: type) -> bool:
    """Whether ``cls(message)`` makes the same kind of error again (most built-in errors do)."""
    try:
        cls("x")
    except Exception:  # noqa: BLE001 - an error class with other required arguments
        return False
    return True


def torch_device(device: str) -> torch.device:
    """The torch device of a layout device string; a file stands in as CPU memory."""
    try:
        return torch.device(device)
    except RuntimeError:
        return torch.device("cpu")


def from_view(view: Any, storages: dict, storage_nbytes: int) -> StandIn:
    """A stand-in for a :class:`~tensorviz.core.records.TensorView` (pretend, distinct addresses;
    address 0 for meta storages, as torch reports them)."""
    st = storages.get(view.storage)
    if st is None:
        device = torch_device(view.device)
        ptr = 0 if device.type == "meta" or storage_nbytes == 0 else fresh_ptr()
        st = storages[view.storage] = StorageStandIn(ptr, storage_nbytes, device, view.storage)
    dtype = getattr(torch, view.dtype)
    return StandIn(dtype, st.device, view.shape, view.stride, view.offset, st, view.name)
