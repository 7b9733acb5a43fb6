"""``torch.distributed.checkpoint.load``, replayed: DCP's own load with a reader that plans but
does not read.

``dcp.load(state_dict, checkpoint_id=folder)`` reads the folder's ``.metadata``, lets
``DefaultLoadPlanner`` match every target tensor to the saved chunks it overlaps (resharding:
several chunks per tensor, each from its ``.distcp`` file), then reads and copies. The replay
calls ``dcp.load`` itself on a twin of the state dict (fake tensors: shapes, dtypes and devices
without storage; a DTensor keeps its mesh and placements over a fake local tensor), with a ``FileSystemReader`` whose ``read_data`` records
the plan it is handed and reads nothing. So DCP's own checks raise what they raise (a key the
checkpoint lacks, a size mismatch), and each rank learns the chunks it would read. With a
process group this is a collective, as the real load is: every rank calls it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tensorviz.loadcheck.report import ChunkRead

__all__ = ["predict_dcp_load"]


def _twin_value(value: Any, mode: Any) -> Any:
    """A data-free copy: each tensor a FakeTensor of the same shape, stride, dtype and device
    (no storage is allocated; DCP would allocate a meta tensor's full size on its default device),
    a DTensor the same mesh and placements over a fake local tensor."""
    import torch
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        local = value.to_local()
        with mode:
            fake = torch.empty_strided(local.shape, local.stride(), dtype=local.dtype, device=_device(local))
        return DTensor.from_local(
            fake, value.device_mesh, value.placements, run_check=False, shape=value.shape, stride=value.stride()
        )
    if isinstance(value, torch.Tensor):
        with mode:
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=_device(value))
    if isinstance(value, Mapping):
        return {k: _twin_value(v, mode) for k, v in value.items()}
    return value


def _device(t: Any) -> Any:
    """The twin's device: the tensor's, but CPU for a meta tensor (DCP would allocate a meta
    target on its default device; a model built on meta is loaded after ``to_empty``)."""
    return "cpu" if t.device.type == "meta" else t.device


def _reader(folder: str) -> Any:
    """A FileSystemReader that records each plan handed to ``read_data`` and reads nothing."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.futures import Future

    class PlanOnly(FileSystemReader):
        plans: list = []

        def read_data(self, plan: Any, planner: Any) -> Future:
            self.plans.append(plan)
            done: Future = Future()
            done.set_result(None)
            return done

    reader = PlanOnly(folder)
    reader.plans = []
    return reader


def predict_dcp_load(model: Any, folder: str, strict: bool, kwargs: Mapping[str, Any]) -> dict:
    """The load report's facts for ``dcp.load(model.state_dict(), checkpoint_id=folder)`` (or of a
    state dict; ``state_dict_key=K`` for ``dcp.load({K: ...})``); ``strict=False`` is
    ``DefaultLoadPlanner(allow_partial_load=True)``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import DefaultLoadPlanner
    from torch.distributed.checkpoint.api import CheckpointException

    target = model.state_dict() if hasattr(model, "state_dict") and not isinstance(model, Mapping) else model
    key = kwargs.get("state_dict_key")
    from torch._subclasses.fake_tensor import FakeTensorMode

    twin = _twin_value({key: target} if key else dict(target), FakeTensorMode())
    reader = _reader(folder)
    metadata = reader.read_metadata()
    error = None
    try:
        dcp.load(twin, storage_reader=reader, planner=DefaultLoadPlanner(allow_partial_load=not strict))
    except (Exception, CheckpointException) as err:  # noqa: BLE001 -- what DCP raises is the prediction
        error = f"{type(err).__name__}: {err}"  # (CheckpointException is a BaseException)
    flat = _flat(twin)
    reads = [] if error else _reads(reader, metadata)
    return dict(
        raises=error is not None,
        error=error,
        missing=tuple(k for k in flat if k not in metadata.state_dict_metadata),
        unexpected=tuple(k for k in metadata.state_dict_metadata if k not in flat),
        mismatched=tuple(_mismatched(flat, metadata)),
        cast=tuple(_casts(flat, metadata)),
        conflicts=(),
        untouched=tuple(k for k in flat if not error and k not in {r.name for r in reads}),
        reads=tuple(reads),
        uncovered=tuple(_uncovered(flat, reads)) if not error else (),
    )


def _flat(twin: Mapping, prefix: str = "") -> dict[str, Any]:
    """The state dict's tensors under DCP's flattened names (``outer.inner``)."""
    import torch

    out: dict[str, Any] = {}
    for k, v in twin.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            out[f"{prefix}{k}"] = v
    return out


def _reads(reader: Any, metadata: Any) -> list[ChunkRead]:
    out = []
    for plan in reader.plans:
        for item in plan.items:
            info = metadata.storage_data[item.storage_index]
            out.append(
                ChunkRead(
                    name=item.dest_index.fqn,
                    saved_offsets=tuple(item.storage_index.offset or ()),
                    dest_offsets=tuple(item.dest_offsets),
                    lengths=tuple(item.lengths),
                    file=str(info.relative_path),
                    offset=int(info.offset),
                    length=int(info.length),
                )
            )
    return out


def _mismatched(flat: Mapping, metadata: Any) -> list[tuple]:
    out = []
    for k, t in flat.items():
        md = metadata.state_dict_metadata.get(k)
        if md is not None and hasattr(md, "size") and tuple(md.size) != tuple(t.shape):
            out.append((k, tuple(t.shape), tuple(md.size)))
    return out


def _casts(flat: Mapping, metadata: Any) -> list[tuple[str, str, str]]:
    out = []
    for k, t in flat.items():
        md = metadata.state_dict_metadata.get(k)
        saved = getattr(getattr(md, "properties", None), "dtype", None)
        if saved is not None and saved != t.dtype:
            out.append((k, str(saved).removeprefix("torch."), str(t.dtype).removeprefix("torch.")))
    return out


def _uncovered(flat: Mapping, reads: list[ChunkRead]) -> list[tuple[str, int]]:
    """Target tensors (this rank's part) that the planned reads do not fill, by elements."""
    from torch.distributed.tensor import DTensor

    filled: dict[str, int] = {}
    for r in reads:
        filled[r.name] = filled.get(r.name, 0) + math.prod(r.lengths)
    out = []
    for k, t in flat.items():
        local = t.to_local() if isinstance(t, DTensor) else t
        if k in filled and filled[k] < local.numel():
            out.append((k, local.numel() - filled[k]))
    return out
