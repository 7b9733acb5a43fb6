"""Turn torch objects into :class:`~tensorviz.layout.TensorView` records, reading metadata only.

The only module that touches torch internals. It never reads tensor data, never copies, never
calls ``.cpu()``, and keeps no reference to a tensor once the records are built.

Storage identity is the storage object itself, keyed ``(device, torch._C._storage_id(t))`` -- not
``data_ptr()``, which is 0 for every meta and fake tensor and can repeat across storages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Iterator

import torch

from .footprint import dense_run, footprint, span
from .layout import Layout, Skipped, StorageInfo, TensorView

__all__ = ["collect", "analyze_object", "iter_named_values", "ACCEPTED"]

ACCEPTED = ("an nn.Module", "a Mapping[str, Tensor] such as a state dict (nested mappings are "
            "flattened with '.')", "a Tensor", "a list or tuple of tensors",
            "a path to a .safetensors file, a *.safetensors.index.json, a model folder or a torch "
            "checkpoint (.pt/.pth/.bin)")

_SUB_BYTE = re.compile(r"^(u?int[1-7]|quint4x2|quint2x4|bits\d+.*|float4_.*)$")
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)


def iter_named_values(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(name, value)`` for every leaf of a module, mapping, sequence or tensor.

    Modules give ``state_dict(keep_vars=True)`` names (tied parameters under every name), then
    their non-persistent buffers. Mappings and sequences nest with ``.``.
    """
    if isinstance(obj, torch.nn.Module):
        yield from _module_items(obj, prefix)
    elif isinstance(obj, torch.Tensor):
        yield (prefix or "tensor"), obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, (Mapping, list, tuple, torch.nn.Module)):
                yield from iter_named_values(value, name)
            else:
                yield name, value
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            name = f"{prefix}.{i}" if prefix else str(i)
            if isinstance(value, (Mapping, list, tuple, torch.nn.Module)):
                yield from iter_named_values(value, name)
            else:
                yield name, value
    else:
        yield (prefix or type(obj).__name__), obj


def _module_items(module: torch.nn.Module, prefix: str) -> Iterator[tuple[str, Any]]:
    pre = f"{prefix}." if prefix else ""
    state = module.state_dict(keep_vars=True)
    for name, value in state.items():
        yield pre + name, value
    for name, buf in module.named_buffers(remove_duplicate=False):
        if name not in state and buf is not None:
            yield pre + name, buf


def _is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """torch's row-major contiguity rule, from metadata alone (size-1 dims ignored)."""
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size == 0:
            return True
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def why_not_analysable(t: Any) -> str | None:
    """A reason a person understands when ``t`` cannot be analysed as a strided view, else None."""
    if not isinstance(t, torch.Tensor):
        return f"not a tensor ({type(t).__module__}.{type(t).__qualname__}); tensorviz only lays out tensors"
    if t.is_nested:
        return ("nested (jagged) tensor: its components live in a packed buffer plus offsets; "
                "analyse t.values() and t.offsets() instead")
    if t.layout != torch.strided:
        kind = str(t.layout).removeprefix("torch.")
        return (f"{kind} tensor: its values and indices live in separate storages with no strided "
                f"view; analyse its parts (e.g. t.coalesce().values(), t.indices() or t.crow_indices())")
    if t.is_quantized:
        return (f"quantized tensor ({str(t.dtype).removeprefix('torch.')}): bytes plus scale/zero-point "
                f"state held outside the storage; analyse t.int_repr() for the raw layout")
    dtype = str(t.dtype).removeprefix("torch.")
    if _SUB_BYTE.match(dtype):
        return (f"packed sub-byte dtype {dtype}: element_size() reports {t.element_size()} byte(s) but "
                f"elements are packed below a byte, so byte offsets would be wrong; view it as uint8 first")
    return None


def _subclass_reason(t: torch.Tensor) -> str | None:
    cls = type(t)
    if cls in _PLAIN_TYPES or _is_fake(t) or isinstance(t, torch.nn.Parameter):
        return None
    inner = getattr(t, "__tensor_flatten__", None)
    if inner is not None:
        try:
            attrs = ", ".join(inner()[0])
        except Exception:  # noqa: BLE001 - a subclass's own hook failing must not stop analysis
            attrs = "?"
        return (f"tensor subclass {cls.__qualname__} wraps other tensors ({attrs}); its own storage "
                f"is not where its data lives: analyse those inner tensors instead")
    if cls.__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        return (f"tensor subclass {cls.__qualname__} overrides __torch_dispatch__, so its storage may "
                f"not be where its data lives; analyse t.as_subclass(torch.Tensor) if it is a plain view")
    return None


def _is_fake(t: torch.Tensor) -> bool:
    mod = type(t).__module__
    return mod.startswith("torch._subclasses") or type(t).__name__ in ("FakeTensor", "FunctionalTensor")


def _dtensor_local(t: torch.Tensor) -> torch.Tensor | None:
    if type(t).__name__ != "DTensor":
        return None
    local = getattr(t, "_local_tensor", None)
    return local if isinstance(local, torch.Tensor) else None


class _Collector:
    """Accumulates views and storage facts; one pass, metadata only."""

    def __init__(self) -> None:
        self.views: list[TensorView] = []
        self.storages: dict[tuple, StorageInfo] = {}
        self.skipped: list[Skipped] = []
        self.seen: set[str] = set()
        self._devices: dict[object, str] = {}

    def add(self, name: str, value: Any) -> None:
        if name in self.seen:
            self.skipped.append(Skipped(name, "duplicate name: an earlier value already has this name"))
            return
        note = ""
        local = _dtensor_local(value) if isinstance(value, torch.Tensor) else None
        if local is not None:
            value, note = local, "DTensor: only this rank's local shard is shown"
        reason = why_not_analysable(value)
        if reason is None and local is None:
            reason = _subclass_reason(value)
        if reason is not None:
            self.skipped.append(Skipped(name, reason))
            return
        try:
            self._add_tensor(name, value, note)
        except (RuntimeError, NotImplementedError) as err:  # e.g. a storage-less functional tensor
            self.skipped.append(Skipped(name, f"its storage cannot be inspected: {err}".splitlines()[0]))

    def _add_tensor(self, name: str, t: torch.Tensor, note: str) -> None:
        dev = t.device
        device = self._devices.get(dev)
        if device is None:
            device = self._devices[dev] = str(dev)
        key = (device, torch._C._storage_id(t))
        if key not in self.storages:
            st = t.untyped_storage()
            self.storages[key] = StorageInfo(key, device, st.nbytes())
        shape = tuple(t.shape)
        stride = t.stride()
        itemsize = t.element_size()
        offset = t.storage_offset()
        start = offset * itemsize
        numel = 1
        for s in shape:
            numel *= s
        run = dense_run(start, shape, stride, itemsize)
        if run is not None:
            stop, fp_bytes, exact = run[1], run[1] - start, True
        else:
            stop = span(start, shape, stride, itemsize)[1]
            f = footprint(start, shape, stride, itemsize) if numel else None
            fp_bytes, exact = (f.nbytes, f.exact) if f is not None else (0, True)
        self.views.append(TensorView(
            name, key, device, str(t.dtype)[6:], shape, stride, offset, itemsize, start, stop,
            numel * itemsize, fp_bytes, _is_contiguous(shape, stride), exact, note))
        self.seen.add(name)

    def layout(self, source: str) -> Layout:
        return Layout(self.views, self.storages.values(), self.skipped, source=source)


def collect(items: Any, source: str = "") -> Layout:
    """Build a :class:`Layout` from ``(name, value)`` pairs."""
    c = _Collector()
    for name, value in items:
        c.add(name, value)
    return c.layout(source)


def analyze_object(obj: Any) -> Layout:
    """Analyse an in-memory object (module, mapping, tensor, sequence)."""
    if not isinstance(obj, (torch.nn.Module, Mapping, torch.Tensor, list, tuple)):
        raise TypeError(f"tensorviz.analyze cannot read a {type(obj).__module__}.{type(obj).__qualname__}; "
                        f"it accepts " + "; ".join(ACCEPTED))
    return collect(iter_named_values(obj), source=type(obj).__qualname__)
