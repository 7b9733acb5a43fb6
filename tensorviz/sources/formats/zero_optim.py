"""DeepSpeed ZeRO per-rank optimizer partitions (``*_optim_states.pt``), read without running them.

``engine.save_checkpoint`` writes, per data-parallel rank, ``zero_pp_rank_R_mp_rank_00_optim_states.pt``
(``bf16_`` first for the bf16 optimizer): ``{"optimizer_state_dict": {...}, "ds_config", "ds_version"}``
where ``optimizer_state_dict`` holds each parameter group's flat fp32 partition
(``single_partition_of_fp32_groups``), the base optimizer's state over those flat partitions
(``base_optimizer_state``: Adam's ``exp_avg``/``exp_avg_sq`` as long as the partition, padding
included) and, per group, where each parameter's piece lies in this rank's partition
(``param_slice_mappings``: ``{name: fragment_address(numel, start)}``).

The pickle needs four DeepSpeed globals torch's weights-only unpickler refuses, all data-only
records: ``ZeroStageEnum`` (an ``int`` enum, built from its value), ``fragment_address`` (a
dataclass of two ints), ``LossScaler``/``DynamicLossScaler`` (attributes set from a dict).
Allowing them in torch would change its process-wide safe-globals list, so this module unpickles
with its own restricted :class:`pickle.Unpickler`: exactly those globals become inert stand-ins
(:class:`Record`), tensors become :class:`TensorRef` (record, dtype, offset, shape, stride) and
anything else is refused. Nothing from DeepSpeed or torch is imported; the pickle is scanned
first (:func:`~tensorviz.sources.formats.pickle_scan.scan_pickle`) for its size and calls.

Each flat partition becomes views named after their parameters: ``optimizer.<param>.fp32`` (the
fp32 master piece, category "copies"), ``optimizer.<param>.exp_avg`` … (category "optimizer"),
1-D views at the exact element offsets of ``param_slice_mappings``; the padding is left unnamed.
A ZeRO-3 partition (``fp32_flat_groups``) names nothing: its pieces follow the ``param_shapes`` of
the model states file beside it, each parameter split in equal pieces across the ranks.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tensorviz.core.errors import FileFormatError, UnsafeCheckpointError
from tensorviz.core.facts import OptimizerMapping, TrainingFacts
from tensorviz.core.records import StorageInfo
from tensorviz.sources.formats.pickle_scan import unsafe_message
from tensorviz.sources.parts import Part, short

__all__ = ["DEEPSPEED_RECORDS", "is_zero_optim", "zero_optim_part", "Record", "TensorRef", "ZERO_FILE"]

#: The DeepSpeed globals a ZeRO optimizer partition pickles: data-only records, never called.
DEEPSPEED_RECORDS = frozenset(
    {
        "deepspeed.runtime.zero.config.ZeroStageEnum",
        "deepspeed.utils.tensor_fragment.fragment_address",
        "deepspeed.runtime.fp16.loss_scaler.LossScaler",
        "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    }
)
#: ``[bf16_]zero_pp_rank_<R>_mp_rank_<MP>_optim_states.pt``
ZERO_FILE = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$", re.ASCII)

#: torch's legacy storage classes (how ``torch.save`` names a storage's dtype): (dtype, itemsize)
_STORAGES = {
    "FloatStorage": ("float32", 4),
    "DoubleStorage": ("float64", 8),
    "HalfStorage": ("float16", 2),
    "BFloat16Storage": ("bfloat16", 2),
    "LongStorage": ("int64", 8),
    "IntStorage": ("int32", 4),
    "ShortStorage": ("int16", 2),
    "CharStorage": ("int8", 1),
    "ByteStorage": ("uint8", 1),
    "BoolStorage": ("bool", 1),
}


class Record:
    """An inert stand-in for a DeepSpeed object: its class name, constructor args and state."""

    name = "?"
    args: tuple = ()  # NEWOBJ makes a record without calling __init__
    state: Any = None

    def __init__(self, *args: Any) -> None:
        self.args = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def field(self, key: str) -> Any:
        """A field of the record's state (a dataclass's or an object's ``__dict__``)."""
        state = self.state[1] if isinstance(self.state, tuple) and len(self.state) == 2 else self.state
        if isinstance(state, Mapping) and key in state:
            return state[key]
        raise KeyError(key)

    def __repr__(self) -> str:
        return f"{self.name}{self.args or ''}"


_RECORD_CLASSES = {name: type(name.rsplit(".", 1)[1], (Record,), {"name": name}) for name in DEEPSPEED_RECORDS}


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: tuple[str, int]
    numel: int


@dataclass(frozen=True)
class TensorRef:
    """A tensor as the pickle describes it: its storage record, dtype and view (no data)."""

    record: str
    dtype: tuple[str, int]
    numel: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage: _Storage, offset: int, shape: Any, stride: Any, *_: Any) -> TensorRef:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor rebuilt from something that is not a saved storage")
    return TensorRef(storage.key, storage.dtype, storage.numel, int(offset), tuple(shape), tuple(stride))


class _TensorType:
    """``torch.Tensor`` named as a tensor's type (``_rebuild_from_type_v2``): never called."""


def _rebuild_from_type(func: Any, new_type: Any, args: Any, state: Any) -> TensorRef:
    """``torch._tensor._rebuild_from_type_v2`` for a plain tensor: only this module's rebuilder."""
    if func is not _rebuild_tensor or new_type is not _TensorType or not isinstance(args, tuple):
        raise pickle.UnpicklingError("a tensor rebuilt as a type other than torch.Tensor")
    return _rebuild_tensor(*args)


class _Unpickler(pickle.Unpickler):
    """Unpickles exactly the globals a ZeRO optimizer partition needs, as stand-ins."""

    def find_class(self, module: str, name: str) -> Any:
        full = f"{module}.{name}"
        if full in _RECORD_CLASSES:
            return _RECORD_CLASSES[full]
        if full == "torch._utils._rebuild_tensor_v2":
            return _rebuild_tensor
        if full == "torch._tensor._rebuild_from_type_v2":
            return _rebuild_from_type
        if full == "torch.Tensor":
            return _TensorType
        if full == "collections.OrderedDict":
            return OrderedDict
        if module == "torch" and name in _STORAGES:
            return _STORAGES[name]
        raise _Unknown(full)

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and pid[1] in _STORAGES.values()):
            raise pickle.UnpicklingError(f"an unexpected persistent id {short(pid, 80)}")
        return _Storage(str(pid[2]), pid[1], int(pid[4]))


class _Unknown(Exception):
    pass


def is_zero_optim(path: str, pickle_bytes: bytes) -> bool:
    """A ZeRO optimizer partition: its file name, and a pickle that names a DeepSpeed record."""
    return bool(ZERO_FILE.match(os.path.basename(path))) and b"deepspeed" in pickle_bytes


def load_zero(path: str, pickle_bytes: bytes) -> Any:
    """The pickle's objects with stand-ins (see the module docstring); refuses any other global."""
    try:
        return _Unpickler(io.BytesIO(pickle_bytes)).load()
    except _Unknown as err:
        raise UnsafeCheckpointError(
            unsafe_message(path, f"the pickle needs {short(err.args[0], 200)[1:-1]} (beyond the DeepSpeed records)")
        ) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as err:
        raise FileFormatError(
            f"{path}: not a readable DeepSpeed ZeRO optimizer partition ({short(err, 120)[1:-1]})"
        ) from None


#: ``param_shapes`` of the model states file beside a ZeRO-3 partition: per group, {name: shape}
Shapes = list[dict[str, tuple[int, ...]]]


def zero_optim_part(
    path: str, pickle_bytes: bytes, records: dict[int, tuple[str, int]], shapes: Callable[[], Shapes | None]
) -> Part:
    """The views of one ZeRO optimizer partition, named after their parameters (``shapes`` gives
    the model states' ``param_shapes``, which a ZeRO-3 partition needs: it holds no names)."""
    obj = load_zero(path, pickle_bytes)
    osd = obj.get("optimizer_state_dict") if isinstance(obj, Mapping) else None
    if not isinstance(osd, Mapping):
        raise FileFormatError(f"{path}: a DeepSpeed optimizer partition without 'optimizer_state_dict'")
    by_name = {name: (offset, size) for offset, (name, size) in records.items()}
    rows: list[tuple] = []
    categories: dict[str, str] = {}
    storages: dict[str, StorageInfo] = {}
    for name, ref, start, numel, category in _pieces(path, osd, shapes):
        rec = "data/" + ref.record
        if rec not in by_name:
            raise FileFormatError(f"{path}: tensor {name!r} names record {rec}, which the archive lacks")
        ident = f"{path}:{rec}"
        nbytes = ref.numel * ref.dtype[1]
        if nbytes > by_name[rec][1] or ref.offset + start + numel > ref.numel:
            raise FileFormatError(f"{path}: tensor {name!r} reaches past its record {rec}; the file is corrupt")
        storages.setdefault(ident, StorageInfo(("file", ident), "file", nbytes, f"{os.path.basename(path)}:{rec}"))
        at = ref.offset + start
        rows.append((name, ("file", ident), "file", nbytes, ref.dtype, (numel,), (1,), at, at * ref.dtype[1]))
        categories[name] = category
    stage = osd.get("zero_stage")
    stage_value = stage.args[0] if isinstance(stage, Record) and stage.args else "?"
    partitions = osd.get("partition_count")
    facts = TrainingFacts(
        notes=(
            f"DeepSpeed ZeRO stage {stage_value} optimizer partition (ds_version {obj.get('ds_version', '?')}), "
            f"{partitions if isinstance(partitions, list) else '?'} partition(s) per group: each flat fp32 "
            f"partition named after its parameters by param_slice_mappings",
        ),
        optimizers={"optimizer": OptimizerMapping("param_slice_mappings", "", "")},
    )
    offsets = {ident: off for off, (rec, _) in records.items() for ident in (f"{path}:{rec}",) if ident in storages}
    return Part(
        rows=rows,
        storages=list(storages.values()),
        meta={"training": facts, "record_offsets": offsets},
        label=os.path.basename(path),
        categories=categories,
    )


def _zero3_mappings(path: str, osd: Mapping, shapes: Shapes | None) -> list[dict[str, tuple[int, int]]] | None:
    """ZeRO-3: each parameter is split in ``partition_count`` pieces of ceil(numel / ranks)
    elements (the last padded), and a rank's flat group holds its piece of each parameter in
    ``param_shapes`` order (as ``zero_to_fp32.py`` reads it). Per group, {name: (start, numel)}."""
    match = ZERO_FILE.match(os.path.basename(path))
    world = osd.get("partition_count")
    if shapes is None or match is None or not isinstance(world, int) or world < 1:
        return None
    rank = int(match.group(1))
    out = []
    for group in shapes:
        at, mapping = 0, {}
        for name, shape in group.items():
            n = 1
            for d in shape:
                n *= d
            part = -(-n // world)
            mapping[name] = (at, max(0, min(part, n - rank * part)))
            at += part
        out.append(mapping)
    return out


def _pieces(path: str, osd: Mapping, shapes: Callable[[], Shapes | None]) -> list[tuple[str, TensorRef, int, int, str]]:
    """``(view name, flat tensor, start, numel, category)`` for every parameter's piece of every
    flat partition: the fp32 master and each optimizer state shaped like the partition."""
    if "fp32_flat_groups" in osd:
        maps: Any = _zero3_mappings(path, osd, shapes())
        fp32 = osd.get("fp32_flat_groups")
        base = osd.get("optimizer_state_dict")
        if maps is None:
            raise FileFormatError(
                f"{path}: a ZeRO-3 optimizer partition names no parameters; its parameter shapes are in "
                f"the model states file beside it (zero_pp_rank_<R>_mp_rank_<M>_model_states.pt), which is missing"
            )
    else:
        maps = osd.get("param_slice_mappings")
        fp32 = osd.get("single_partition_of_fp32_groups")
        base = osd.get("base_optimizer_state")
    if not isinstance(maps, Sequence) or not isinstance(fp32, Sequence) or len(maps) != len(fp32):
        raise FileFormatError(
            f"{path}: a DeepSpeed optimizer partition without param_slice_mappings beside its fp32 "
            f"groups (ZeRO stage 3 partitions, or DeepSpeed before 0.9); ds_to_universal.py converts it"
        )
    states = _group_states(base, len(fp32))
    out = []
    for g, (mapping, flat) in enumerate(zip(maps, fp32)):
        if not isinstance(mapping, Mapping) or not isinstance(flat, TensorRef):
            raise FileFormatError(f"{path}: group {g} of the optimizer partition is not a flat tensor with its mapping")
        tensors = [("fp32", flat, "copies")] + [
            (k, t, "optimizer")
            for k, t in states[g]
            if t.shape == flat.shape or (len(t.shape) == 1 and t.shape[0] >= flat.shape[0])
        ]
        for pname, frag in mapping.items():
            start, numel = frag if isinstance(frag, tuple) else (int(frag.field("start")), int(frag.field("numel")))
            if numel == 0:
                continue  # ZeRO-3: this rank holds only padding of a small parameter
            for key, t, category in tensors:
                out.append((f"optimizer.{pname}.{key}", t, start, numel, category))
    return out


def _group_states(base: Any, groups: int) -> list[list[tuple[str, TensorRef]]]:
    """Per parameter group, the base optimizer's flat state tensors ``(key, tensor)``: torch's
    ``{"state": {group: {...}}}`` (the bf16 optimizer) or a list of per-group states (ZeRO 1/2)."""
    out: list[list[tuple[str, TensorRef]]] = [[] for _ in range(groups)]
    if isinstance(base, Mapping) and isinstance(base.get("state"), Mapping):
        per = [base["state"].get(g, {}) for g in range(groups)]
    elif isinstance(base, Sequence):
        per = list(base)[:groups]
    else:
        per = []
    for g, state in enumerate(per):
        if isinstance(state, Mapping):
            out[g] = [(str(k), t) for k, t in state.items() if isinstance(t, TensorRef) and len(t.shape) == 1]
    return out
