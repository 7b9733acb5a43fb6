"""torch checkpoints (``.pt``/``.pth``/``.bin``), read from metadata through a memory map.

``torch.load(path, weights_only=True, mmap=True, map_location=<keep storage>)`` maps the file
without reading it and keeps every view on its saved storage (``map_location="meta"`` would give
each tensor a storage of its own; see :mod:`tensorviz.sources.files`). The zip directory says where each
``data/N`` record lies, so each saved storage becomes one storage keyed by its record.
"""

from __future__ import annotations

import os
import struct
import sys
import zipfile
from collections.abc import Mapping
from typing import Any

import torch

from tensorviz.core.errors import FileFormatError, UnsafeCheckpointError
from tensorviz.core.layout import Layout
from tensorviz.core.records import StorageInfo
from tensorviz.sources.parts import MAX_HEADER_BYTES, ZIP_MAGIC, Part, one_line, short

_MAX_LEAVES = 2_000_000
_MAX_VALUES = 50

#: {byte offset of a record's data in the file: (record name, size)}
Records = dict[int, tuple[str, int]]


def torch_part(path: str) -> Part:
    """The views of a torch zip checkpoint, keyed by the records that hold their storages."""
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


# -- the zip archive -------------------------------------------------------------------------------
def _zip_records(path: str) -> Records:
    """{byte offset of the record's data: (record name, size)} for every ``data/N`` record."""
    with open(path, "rb") as f:
        head = f.read(8)
        if not head:
            raise FileFormatError(f"{path}: the file is empty (0 bytes); not a torch checkpoint")
        if head[:1] == b"\x80":
            raise FileFormatError(
                f"{path}: a legacy (pre-1.6, non-zip) torch checkpoint; loading one reads every "
                f"tensor, so tensorviz does not. Re-save it with torch.save(obj, path) (zip format)"
            )
        if head[:4] not in ZIP_MAGIC:
            raise FileFormatError(
                f"{path}: not a torch zip checkpoint (starts with {head!r}); expected a file written by torch.save"
            )
        try:
            with zipfile.ZipFile(f) as zf:
                return _scan_zip(path, f, zf)
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            OSError,
            ValueError,
            EOFError,
            NotImplementedError,
            RuntimeError,
            struct.error,
        ) as err:
            raise FileFormatError(
                f"{path}: a damaged zip archive ({one_line(err)}); the checkpoint is truncated or corrupt"
            ) from None


def _scan_zip(path: str, f: Any, zf: zipfile.ZipFile) -> Records:
    records: Records = {}
    for info in zf.infolist():
        parts = info.filename.split("/")
        if len(parts) >= 2 and parts[1] in ("constants.pkl", "code"):
            raise UnsafeCheckpointError(_unsafe_reason(path, "TorchScript"))
        if parts[-1] == "data.pkl" and len(parts) == 2 and info.file_size > MAX_HEADER_BYTES:
            raise FileFormatError(
                f"{path}: its pickle claims {info.file_size} bytes, over the "
                f"{MAX_HEADER_BYTES}-byte limit tensorviz reads"
            )
        if parts[-1] == "byteorder" and len(parts) == 2 and info.file_size <= 16:
            order = zf.read(info).decode("ascii", "replace")
            if order != sys.byteorder:
                raise FileFormatError(
                    f"{path}: saved {order}-endian; loading would byte-swap (read) "
                    f"every tensor on this {sys.byteorder}-endian machine"
                )
        if len(parts) == 3 and parts[1] == "data":
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            records[info.header_offset + 30 + name_len + extra_len] = ("data/" + parts[2], info.file_size)
    return records


# -- loading, safely -------------------------------------------------------------------------------
def _torch_load(path: str, keep_storage: Any) -> Any:
    try:
        return torch.load(path, weights_only=True, mmap=True, map_location=keep_storage)
    except Exception as err:  # noqa: BLE001 - torch reports every problem differently
        text = str(err)
        if "Weights only load failed" in text or "TorchScript" in text or "weights_only" in text:
            raise UnsafeCheckpointError(_unsafe_reason(path, text)) from None
        raise FileFormatError(f"{path}: torch.load(weights_only=True) failed: {one_line(err)}") from None


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
            what = f"torch's weights-only unpickler refused it ({short(detail, 120)[1:-1]})"
    return (
        f"{path}: {what}{hint}. tensorviz loads checkpoints only with torch.load(weights_only=True) "
        f"and never runs code from a file, because unpickling can execute anything. If you trust "
        f"the file, load it yourself and pass the result: "
        f"tv.analyze(torch.load(path, weights_only=False, mmap=True))"
    )


# -- walking what was loaded -----------------------------------------------------------------------
def _walk_checkpoint(path: str, obj: Any) -> tuple[list[tuple[str, torch.Tensor]], dict[str, str], dict[str, str]]:
    """Tensors (with their path names), other values (as short text), and a top-level summary."""
    tensors: list[tuple[str, torch.Tensor]] = []
    values: dict[str, str] = {}
    per_top: dict[str, int] = {}  # tensors under each top-level key (keys may contain dots)
    seen: dict[int, str] = {}
    stack: list[tuple[str, str, Any]] = [("", "", obj)]
    leaves = 0
    while stack:
        name, top, value = stack.pop()
        leaves += 1
        if leaves > _MAX_LEAVES:
            raise FileFormatError(
                f"{path}: more than {_MAX_LEAVES} values in the checkpoint; "
                f"refusing to walk it (hostile or not a state dict)"
            )
        if isinstance(value, torch.Tensor):
            tensors.append((name or "tensor", value))
            per_top[top] = per_top.get(top, 0) + 1
            continue
        children = _children(value)
        if children is None:
            values[name or "value"] = short(value)
        elif id(value) in seen:
            values[name] = f"<same object as {seen[id(value)] or 'the root'}>"
        else:
            seen[id(value)] = name
            stack.extend(reversed([(f"{name}.{k}" if name else str(k), top or str(k), v) for k, v in children]))
    return tensors, values, _contents(obj, len(tensors), per_top, values)


def _children(value: Any) -> list[tuple[Any, Any]] | None:
    """The items to descend into, or None for a leaf (a number, string, list of numbers...)."""
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.Tensor, Mapping, list, tuple)) for v in value):
        return list(enumerate(value))
    return None


def _contents(obj: Any, n_tensors: int, per_top: dict[str, int], values: dict[str, str]) -> dict[str, str]:
    """What the top level holds besides tensors: wrappers with their tensor counts, and values."""
    if not isinstance(obj, Mapping):
        return {} if isinstance(obj, torch.Tensor) else {"": f"{type(obj).__name__} with {n_tensors} tensors"}
    out = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            continue  # a flat state dict: its tensors are the layout
        k = str(k)
        n = per_top.get(k, 0)
        out[k] = f"{n} tensor{'s' * (n != 1)}" if n else values.get(k) or f"{type(v).__name__} without tensors"
    return out


# -- re-keying to the file's records ---------------------------------------------------------------
def _torch_views(
    path: str,
    tensors: list[tuple[str, torch.Tensor]],
    values: dict[str, str],
    contents: dict[str, str],
    records: Records,
    saved_on: dict[int, str],
) -> Part:
    """Views from the loaded tensors, re-keyed from in-memory storages to the file's records."""
    from tensorviz.sources.live import collect  # the one place that turns torch tensors into views

    layout = collect(tensors, source=path)
    by_name: dict[str, torch.Tensor] = {}
    for name, t in tensors:
        by_name.setdefault(name, t)
    meta: dict[str, Any] = {"contents": contents} if contents else {}
    infos = _file_storages(path, layout, by_name, records, saved_on, meta)
    rows = [
        (
            v.name,
            infos[v.storage].key,
            infos[v.storage].device,
            infos[v.storage].nbytes,
            (v.dtype, v.itemsize),
            v.shape,
            v.stride,
            v.offset,
            v.start,
        )
        for v in layout.views
    ]
    notes = {v.name: v.note for v in layout.views if v.note}
    meta.update(_values_meta(values))
    problems = []
    if any(info.device == "meta" for info in infos.values()):
        problems.append(
            f"{os.path.basename(path)}: holds meta tensors (no data); torch.load gives each "
            f"its own storage, so any sharing between them is not shown"
        )
    return Part(
        rows=rows,
        notes=notes,
        storages=list(infos.values()),
        skipped=list(layout.skipped),
        meta=meta,
        problems=problems,
        label=os.path.basename(path),
    )


def _file_storages(
    path: str,
    layout: Layout,
    by_name: dict[str, torch.Tensor],
    records: Records,
    saved_on: dict[int, str],
    meta: dict[str, Any],
) -> dict[tuple, StorageInfo]:
    """{in-memory storage key: the storage in the file}; adds record offsets and devices to ``meta``."""
    names = _record_names([by_name[v.name] for v in layout.views], records)
    base = os.path.basename(path)
    new: dict[tuple, StorageInfo] = {}
    for v in layout.views:
        if v.storage in new:
            continue
        t = by_name[v.name]
        st, i = t.untyped_storage(), len(new)
        rec = names.get(v.storage[1])
        if rec and st.nbytes() > rec[1]:
            raise FileFormatError(
                f"{path}: tensor {v.name!r}: its storage claims {st.nbytes()} bytes but "
                f"record {rec[0]} holds {rec[1]}; the checkpoint is corrupt"
            )
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
    return new


def _record_names(tensors: list[torch.Tensor], records: Records) -> dict[int, tuple[str, int, int]]:
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


def _values_meta(values: dict[str, str]) -> dict[str, Any]:
    """The first ``_MAX_VALUES`` non-tensor values, and how many more there were."""
    if not values:
        return {}
    meta: dict[str, Any] = {"values": dict(list(values.items())[:_MAX_VALUES])}
    if len(values) > _MAX_VALUES:
        meta["values_omitted"] = len(values) - _MAX_VALUES
    return meta
