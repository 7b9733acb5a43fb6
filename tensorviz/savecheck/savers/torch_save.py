"""What ``torch.save`` would do: torch itself, into a sink that keeps no bytes.

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import torch

from tensorviz.savecheck.savers.common import Run, _err, _guard
from tensorviz.savecheck.standin import StandIn

__all__ = ["evaluate_torch_save"]

# -- torch.save ----------------------------------------------------------------------------------
_TORCH_DTYPE_MESSAGE = "Cannot save multiple tensors or storages that view the same data as different types"


class _NullSink(io.RawIOBase):
    """A writable, seekable stream that keeps nothing but its length."""

    def __init__(self) -> None:
        self.pos = self.size = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, b) -> int:
        n = len(memoryview(b))
        self.pos += n
        self.size = max(self.size, self.pos)
        return n

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else (self.pos + offset if whence == 1 else self.size + offset)
        self.size = max(self.size, self.pos)
        return self.pos

    def tell(self) -> int:
        return self.pos


def evaluate_torch_save(sd: dict[str, Any], real: Any | None) -> Run:
    """``torch.save(state_dict, path)``: every storage once, whole, keyed by the storage.

    With the real state dict (``real``) torch itself runs into a sink that keeps no bytes: under
    ``torch.serialization.skip_data()`` (a thread-local switch), or as it is when every tensor is
    on meta (nothing to read; torch warns about meta tensors under skip_data). That gives torch's
    own checks and its exact file size (for a file named ``archive.pt``). Without it (a Layout),
    with meta and real tensors mixed, or with tensors skip_data refuses (quantized, nested), the
    same rules are applied to the stand-ins and the size is left unknown.
    """
    run = Run(tuple(sd))
    devices = _tensor_devices(real) if real is not None and hasattr(torch.serialization, "skip_data") else None
    if devices and devices == {"meta"}:
        _torch_dry_run(run, real, skip_data=False)
    elif devices is not None and "meta" not in devices:
        _torch_dry_run(run, real, skip_data=True)
    if run.file_nbytes is None and run.error is None:
        _torch_rule(run, sd)
        if devices is not None and "meta" in devices and len(devices) > 1:
            run.notes.append("file size not computed: meta and real tensors are mixed (torch cannot dry-run both)")
    if run.error is None:
        run.written.update(sd)
    return run


_SKIP_DATA_REFUSES = "under skip_data context manager"


def _torch_dry_run(run: Run, real: Any, skip_data: bool) -> None:
    sink = _NullSink()
    try:
        with torch.serialization.skip_data() if skip_data else contextlib.nullcontext():
            torch.save(real, sink)  # type: ignore[arg-type]  # a write-only file object torch accepts
        run.file_nbytes = sink.size
    except Exception as e:  # noqa: BLE001 - torch's own refusal is the finding
        if _SKIP_DATA_REFUSES in str(e):
            run.notes.append(
                f"file size not computed: torch's dry run refuses these tensors ({e}); a real torch.save writes them"
            )
            return
        _guard(e)
        run.error = _err(e)


def _tensor_devices(real: Any) -> set[str]:
    """Device types of every tensor in ``real``, walked without recursion (a dict may nest
    thousands deep); "?" for a tensor whose ``device`` raises (its ``__torch_function__``)."""
    from collections.abc import Mapping

    out: set[str] = set()
    stack, seen = [real], set()
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            try:
                out.add(obj.device.type)
            except Exception:  # noqa: BLE001 - torch.save meets the same failure and reports it
                out.add("?")
        elif isinstance(obj, (Mapping, list, tuple)) and id(obj) not in seen:
            seen.add(id(obj))
            stack.extend(obj.values() if isinstance(obj, Mapping) else obj)
    return out


def _torch_rule(run: Run, sd: dict[str, Any]) -> None:
    """torch.save's one check that needs no data: one storage read as two dtypes."""
    dtypes: dict[int, torch.dtype] = {}
    for v in sd.values():
        if not isinstance(v, StandIn):
            continue
        st = v.untyped_storage()
        if v.device.type != "meta" and st.data_ptr() != 0:
            if dtypes.setdefault(st.data_ptr(), v.dtype) != v.dtype:
                run.error = ("RuntimeError", _TORCH_DTYPE_MESSAGE)
                return
