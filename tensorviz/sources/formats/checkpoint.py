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
from typing import Any

import torch

from tensorviz.core import limits
from tensorviz.core.errors import FileFormatError, UnsafeCheckpointError
from tensorviz.core.layout import Layout
from tensorviz.core.records import StorageInfo
from tensorviz.sources.ckpt_training import checkpoint_training
from tensorviz.sources.formats.ckpt_walk import MAX_VALUES, walk
from tensorviz.sources.formats.pickle_scan import global_hint, scan_pickle, unsafe_message
from tensorviz.sources.formats.zero_optim import DEEPSPEED_RECORDS, is_zero_optim, zero_optim_part
from tensorviz.sources.parts import MAX_HEADER_BYTES, ZIP_MAGIC, Part, one_line, open_regular, short

#: {byte offset of a record's data in the file: (record name, size)}
Records = dict[int, tuple[str, int]]


def torch_part(path: str, beside: tuple | None = None) -> Part:
    """The views of a torch zip checkpoint, keyed by the records that hold their storages.
    ``beside``: a model in another file of its folder, for a file holding an optimizer's state
    alone (see :func:`tensorviz.sources.ckpt_training.checkpoint_training`)."""
    saved_on: dict[int, str] = {}

    def keep_storage(storage: Any, location: str) -> Any:
        saved_on[storage._cdata] = location  # where it was saved from; we keep the mapped bytes
        return storage

    with open_regular(path) as f:
        records, pickle = _zip_records(path, f)
        if is_zero_optim(path, pickle):  # DeepSpeed's records as stand-ins, by its own unpickler
            scan_pickle(path, pickle, records=DEEPSPEED_RECORDS)
            return zero_optim_part(path, pickle, records, lambda: _model_shapes(path))
        scan_pickle(path, pickle)
        del pickle
        # torch opens the file by name: name the one already open (and checked), not the path,
        # which may have been swapped for a FIFO since.
        by_fd = f"/proc/self/fd/{f.fileno()}"
        obj = _torch_load(path, by_fd if os.path.exists(by_fd) else path, keep_storage)
    try:
        tensors, values, contents, n_values = walk(path, obj)
        training = checkpoint_training(obj, tensors, beside)  # optimizer state named after parameters
        tensors = [(training.renames.get(n, n), t) for n, t in tensors] if training.renames else tensors
        part = _torch_views(path, tensors, values, n_values, contents, records, saved_on)
        part.categories = training.categories
        if training.optimizers or training.notes:
            part.meta["training"] = training.facts()
        return part
    finally:
        del obj  # drops the last reference to the mapping


def _model_shapes(path: str) -> list[dict[str, tuple[int, ...]]] | None:
    """The ``param_shapes`` of the model states file beside a ZeRO-3 optimizer partition
    (``[bf16_]zero_pp_rank_R_mp_rank_M_optim_states.pt`` -> ``zero_pp_rank_R_mp_rank_M_model_states.pt``),
    read the way every checkpoint is (scanned, then weights-only), or None."""
    name = os.path.basename(path).removeprefix("bf16_").replace("_optim_states.pt", "_model_states.pt")
    beside = os.path.join(os.path.dirname(path), name)
    if not os.path.isfile(beside):
        return None
    with open_regular(beside) as f:
        _, pickle = _zip_records(beside, f)
    scan_pickle(beside, pickle)
    obj = _torch_load(beside, beside, lambda storage, _: storage)
    shapes = obj.get("param_shapes") if isinstance(obj, dict) else None
    if not isinstance(shapes, list):
        return None
    return [{str(k): tuple(int(d) for d in v) for k, v in g.items()} for g in shapes if isinstance(g, dict)]


# -- the zip archive -------------------------------------------------------------------------------
def _zip_records(path: str, f: Any) -> tuple[Records, bytes]:
    """Every ``data/N`` record ({byte offset of its data: (record name, size)}), and the pickle."""
    head = f.read(8)
    if not head:
        raise FileFormatError(f"{path}: the file is empty (0 bytes); not a torch checkpoint")
    if head[:1] == b"\x80":
        raise FileFormatError(
            f"{path}: a legacy (pre-1.6, non-zip) torch checkpoint; loading one reads every "
            f"tensor, so tensorviz does not. Re-save it with torch.save(obj, path) (zip format)"
        )
    if head[:4] not in ZIP_MAGIC:  # its bytes are not quoted: they are some other file's contents
        raise FileFormatError(
            f"{path}: not a torch zip checkpoint (it does not start like a zip archive); "
            f"expected a file written by torch.save"
        )
    _check_record_count(path, f)
    try:
        with zipfile.ZipFile(f) as zf:
            _check_byteorder(path, f, zf)
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
        if isinstance(err, FileFormatError):
            raise
        raise FileFormatError(
            f"{path}: a damaged zip archive ({one_line(err)}); the checkpoint is truncated or corrupt"
        ) from None


def _check_record_count(path: str, f: Any) -> None:
    """Refuse an archive of more records than the ``zip_records`` budget before zipfile reads its
    directory (each record costs a ZipInfo object): the count is in the end-of-directory record."""
    size = f.seek(0, os.SEEK_END)
    tail_at = max(0, size - 65_557)  # the end record (22 bytes) and a comment of up to 65,535
    f.seek(tail_at)
    tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        return  # zipfile reports the damage
    count = struct.unpack_from("<H", tail, at + 10)[0]
    if count == 0xFFFF and at >= 20 and tail[at - 20 : at - 16] == b"PK\x06\x07":
        (z64,) = struct.unpack_from("<Q", tail, at - 12)
        f.seek(z64)
        rec = f.read(56)
        if rec[:4] == b"PK\x06\x06" and len(rec) == 56:
            count = struct.unpack_from("<Q", rec, 32)[0]
    f.seek(0)
    if count > limits.current().zip_records:
        raise limits.exceeded(path, "zip_records", f"its zip directory lists {count:,} records", needed=count)


def _record_bytes(f: Any, info: zipfile.ZipInfo, n: int) -> bytes:
    """The first ``n`` stored bytes of a record, read at its offset (no CRC check, no inflating)."""
    f.seek(info.header_offset + 26)
    name_len, extra_len = struct.unpack("<HH", f.read(4))
    f.seek(info.header_offset + 30 + name_len + extra_len)
    return f.read(min(n, info.compress_size))


def _check_byteorder(path: str, f: Any, zf: zipfile.ZipFile) -> None:
    """First of all: a checkpoint saved big-endian is refused as such (whatever else is wrong)."""
    for info in zf.infolist():
        parts = info.filename.split("/")
        if len(parts) == 2 and parts[1] == "byteorder" and info.compress_type == zipfile.ZIP_STORED:
            order = _record_bytes(f, info, 16).decode("ascii", "replace").strip("\x00\n ")
            if order in ("big", "little") and order != sys.byteorder:
                raise FileFormatError(
                    f"{path}: saved {order}-endian, not supported: loading it would byte-swap (read) "
                    f"every tensor on this {sys.byteorder}-endian machine"
                )


def _scan_zip(path: str, f: Any, zf: zipfile.ZipFile) -> tuple[Records, bytes]:
    records: Records = {}
    pickle = b""
    for info in zf.infolist():
        parts = info.filename.split("/")
        if len(parts) >= 2 and parts[1] in ("constants.pkl", "code"):
            raise UnsafeCheckpointError(_unsafe_reason(path, "TorchScript"))
        is_pickle = parts[-1] == "data.pkl" and len(parts) == 2
        if info.compress_type != zipfile.ZIP_STORED and not is_pickle:
            raise FileFormatError(
                f"{path}: record {short(info.filename, 80)} is compressed (method {info.compress_type}, "
                f"{info.compress_size:,} bytes claiming {info.file_size:,}); torch.save stores every record "
                f"uncompressed, and torch.load would inflate it in full before checking it"
            )
        if is_pickle:
            if info.file_size > MAX_HEADER_BYTES:
                raise FileFormatError(
                    f"{path}: its pickle claims {info.file_size} bytes, over the "
                    f"{MAX_HEADER_BYTES}-byte limit tensorviz reads"
                )
            pickle = _read_capped(zf, info)  # scanned before loading (see pickle_scan)
        if len(parts) == 3 and parts[1] == "data":
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            records[info.header_offset + 30 + name_len + extra_len] = ("data/" + parts[2], info.file_size)
    return records, pickle


def _read_capped(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A record's bytes, inflating at most the size it claims (already checked against the limit)."""
    with zf.open(info) as r:
        return r.read(info.file_size)


# -- loading, safely -------------------------------------------------------------------------------
def _torch_load(path: str, source: str, keep_storage: Any) -> Any:
    try:
        return torch.load(source, weights_only=True, mmap=True, map_location=keep_storage)
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
            hint = global_hint(name)
        else:
            what = f"torch's weights-only unpickler refused it ({short(detail, 120)[1:-1]})"
    return unsafe_message(path, what, hint)


# -- re-keying to the file's records ---------------------------------------------------------------
def _torch_views(
    path: str,
    tensors: list[tuple[str, torch.Tensor]],
    values: dict[str, str],
    n_values: int,
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
    meta.update(_values_meta(values, n_values))
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
    ``data_ptr - file_offset`` is the same base for all of them; we find that base and check it:
    every storage must land on a record that holds it (a record no walked tensor uses, say a
    tensor used as a dict key, must not shift the match).
    """
    ptrs: dict[int, tuple[int, int]] = {}
    for t in tensors:
        if t.device.type == "cpu":
            st = t.untyped_storage()
            if st.nbytes():
                ptrs[torch._C._storage_id(t)] = (st.data_ptr(), st.nbytes())  # type: ignore[attr-defined]  # torch's stubs omit it
    if not ptrs or not records:
        return {}
    offsets = sorted(records)
    lowest = min(p for p, _ in ptrs.values())
    for exact in (True, False):
        for off in offsets[:8]:
            base = lowest - off
            if all(_holds(records.get(p - base), n, exact) for p, n in ptrs.values()):
                return {sid: (*records[p - base], p - base) for sid, (p, _) in ptrs.items()}
    return {}


def _holds(record: tuple[str, int] | None, nbytes: int, exact: bool) -> bool:
    return record is not None and (record[1] == nbytes if exact else True)


def _values_meta(values: dict[str, str], n_values: int) -> dict[str, Any]:
    """The first ``MAX_VALUES`` non-tensor values, and how many more there were."""
    if not values:
        return {}
    meta: dict[str, Any] = {"values": values}
    if n_values > MAX_VALUES:
        meta["values_omitted"] = n_values - MAX_VALUES
    return meta
