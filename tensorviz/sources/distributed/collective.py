"""One global layout of a sharded model, gathered over ``torch.distributed`` (a collective).

``analyze_group(obj, group)`` must be called by every rank of ``group``. Each rank describes
what it holds -- for a DTensor: global shape, dtype, placements and device mesh; for a plain
tensor: its shape and dtype -- and checks its own ``to_local()`` shape against the shard its
placements give it. Ranks that hold the same description (the usual case: FSDP2 and tensor
parallelism give every rank the same parameter names, meshes and placements) send it once:

1. ``all_gather_object`` of a 32-byte digest and a few per-rank totals (bytes per rank: ~100);
2. one ``broadcast_object_list`` per *distinct* description, from its lowest rank.

So every rank receives O(parameters x distinct descriptions) bytes, never O(parameters x
ranks), and builds the same :class:`~tensorviz.core.layout.Layout` locally: every shard's place
follows from placements and mesh coordinates (:mod:`.placements`), as DTensor computes it.

In the layout each DTensor (and each plain tensor) is a global tensor: a storage of device
``"global"``, key ``("global", NAME)``, ``nbytes`` = numel * itemsize, labelled with every tied
name. Each rank's local shard is a view ``NAME@rankR`` at its elements (row-major in the global
tensor), under every tied name; a shard of several blocks that no one strided view can address
is several views ``NAME@rankR#k``. ``Replicate`` gives identical views on several ranks;
``Partial`` is said in the view's note; a plain tensor is one whole view per rank that holds it.
``layout.metadata`` (JSON-friendly): ``format`` ("distributed"), ``world_size``, ``meshes``,
``tensors`` (per global tensor: shape, dtype, names, placements by mesh index, ranks shown),
``shards`` (per shard view: tensor, rank, mesh index, mesh coordinate), ``ranks`` (per rank:
local bytes and local storage bytes, which include FSDP2's padding), ``problems`` and
``exchange`` (description sizes, distinct descriptions, world size).
"""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

import torch

from tensorviz.core.errors import TensorvizError
from tensorviz.core.layout import Layout
from tensorviz.sources.distributed.fsdp_units import describe_units
from tensorviz.sources.distributed.global_layout import build_layout, layout_from_record
from tensorviz.sources.distributed.placements import coordinate, placement_text, shard_ranges
from tensorviz.sources.live import iter_named_values
from tensorviz.sources.objects import READ_ERRORS, first_line

__all__ = ["analyze_group", "gather", "describe", "exchange", "object_device", "build_layout", "layout_from_record"]


# -- 1. what this rank holds -------------------------------------------------------------------
def describe(obj: Any) -> tuple[dict, dict]:
    """This rank's description (the same on ranks that hold the same tensors) and its own facts.

    The description is ``{"meshes": [(shape, ranks, dim names)], "entries": [...]}``; an entry
    is ``("d", names, dtype, itemsize, shape, mesh index, placements)`` for a DTensor,
    ``("t", names, dtype, itemsize, shape)`` for a plain tensor, ``("x", name, reason)`` for a
    value that is not analysable; ``"fsdp"``: FSDP2's units (:mod:`.fsdp_units`; the same on
    every rank of one job). Facts: local bytes, local storage bytes, problems, and FSDP2's local
    shard bytes (``fsdp_shard_bytes``, one number: the all-gather stays small) or why its internals could not be read.
    """
    units, local, unavailable = describe_units(obj)
    d = _Describer()
    for name, value in iter_named_values(obj):
        d.add(name, value)
    desc, facts = d.result()
    if units:
        desc["fsdp"] = units
        facts["fsdp_shard_bytes"] = sum(local)
    if unavailable:
        facts["fsdp_unavailable"] = unavailable
    return desc, facts


class _Describer:
    """One pass over this rank's values; meshes, placements and expected shapes are cached."""

    def __init__(self) -> None:
        self.rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.meshes: dict[tuple, int] = {}
        self.mesh_keys: dict[int, tuple] = {}
        self.placements: dict[tuple, tuple] = {}
        self.expected: dict[tuple, tuple | None] = {}
        self.entries: list[list] = []
        self.by_id: dict[int, list] = {}
        self.local_bytes = 0
        self.storages: dict[int, int] = {}
        self.problems: list[str] = []

    def add(self, name: str, value: Any) -> None:
        if not isinstance(value, torch.Tensor):
            self.entries.append(["x", name, f"not a tensor ({type(value).__qualname__})"])
            return
        entry = self.by_id.get(id(value))
        if entry is not None:  # a tie: one global tensor under several names
            entry[1].append(name)
            return
        local = getattr(value, "_local_tensor", value) if _is_dtensor(value) else value
        try:
            entry = self._entry(name, value, local)
        except (TensorvizError, *READ_ERRORS) as err:  # garbage placements or mesh: not believed
            self.entries.append(["x", name, f"DTensor metadata cannot be laid out ({first_line(err)})"])
            return
        self.by_id[id(value)] = entry
        self.entries.append(entry)
        self.local_bytes += local.numel() * local.element_size()
        st = local.untyped_storage()
        self.storages[st._cdata] = st.nbytes()

    def _entry(self, name: str, t: torch.Tensor, local: torch.Tensor) -> list:
        dtype, itemsize = str(t.dtype).removeprefix("torch."), t.element_size()
        shape = tuple(int(n) for n in t.shape)
        if local is t:
            return ["t", [name], dtype, itemsize, shape]
        mesh = self._mesh(t.device_mesh)  # type: ignore[attr-defined]  # a DTensor (torch.Tensor in the stubs)
        raw = tuple(t.placements)  # type: ignore[attr-defined]
        placements = self.placements.get(raw)
        if placements is None:
            placements = self.placements[raw] = tuple(_placement(p) for p in raw)
        _check_placements(placements, shape, mesh[0])
        wrong = self._check(name, shape, placements, mesh, tuple(local.shape))
        if wrong:  # the local shard's shape is not what the placements give: believe neither
            raise TensorvizError(wrong)
        return ["d", [name], dtype, itemsize, shape, self.meshes[mesh], placements]

    def _mesh(self, mesh: Any) -> tuple:
        key = self.mesh_keys.get(id(mesh))
        if key is None:
            ranks = tuple(int(r) for r in mesh.mesh.flatten().tolist())
            key = self.mesh_keys[id(mesh)] = (tuple(mesh.shape), ranks, tuple(mesh.mesh_dim_names or ()))
            self.meshes.setdefault(key, len(self.meshes))
        return key

    def _check(self, name: str, shape: tuple, placements: tuple, mesh: tuple, got: tuple) -> str | None:
        """This rank's local shape must be what its placements give it."""
        k = (shape, placements, mesh)
        if k not in self.expected:
            self.expected[k] = None
            if self.rank in mesh[1]:
                ranges = shard_ranges(shape, placements, mesh[0], coordinate(mesh[1], mesh[0], self.rank))
                self.expected[k] = tuple(sum(b - a for a, b in r) for r in ranges)
        expected = self.expected[k]
        if expected is not None and got != expected:
            problem = (
                f"{name}@rank{self.rank}: to_local() has shape {got}, but its placements "
                f"{[placement_text(p) for p in placements]} give {expected}"
            )
            self.problems.append(problem)
            return problem
        return None

    def result(self) -> tuple[dict, dict]:
        desc = {
            "meshes": [m for m, _ in sorted(self.meshes.items(), key=lambda kv: kv[1])],
            "entries": [tuple(e) if e[0] == "x" else (e[0], tuple(e[1]), *e[2:]) for e in self.entries],
        }
        facts = {
            "local_bytes": self.local_bytes,
            "storage_bytes": sum(self.storages.values()),
            "problems": self.problems,
        }
        return desc, facts


def _is_dtensor(t: Any) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "placements") and hasattr(t, "device_mesh")


def _check_placements(placements: tuple, shape: tuple, mesh_shape: tuple) -> None:
    """One placement per mesh dimension, each sharding a dimension the tensor has."""
    if len(placements) != len(mesh_shape):
        raise TensorvizError(f"{len(placements)} placements on a {len(mesh_shape)}-dimensional mesh")
    for p in placements:
        if p[0] in ("S", "SS") and not 0 <= p[1] < max(len(shape), 1):
            raise TensorvizError(f"{placement_text(p)} shards dimension {p[1]} of a {len(shape)}-dimensional tensor")
        if p[0] == "SS" and p[2] < 1:
            raise TensorvizError(f"{placement_text(p)} has split factor {p[2]}")


def _placement(p: Any) -> tuple:
    kind = type(p).__name__
    if kind == "_StridedShard":
        return ("SS", int(p.dim), int(p.split_factor))
    if kind == "Shard":
        return ("S", int(p.dim))
    if kind == "Replicate":
        return ("R",)
    if kind == "Partial" or getattr(p, "is_partial", lambda: False)() is True:
        return ("P", str(getattr(p, "reduce_op", "sum")))
    raise TensorvizError(
        f"unknown DTensor placement {type(p).__name__}: tensorviz knows Shard, _StridedShard, Replicate and Partial"
    )


# -- 2. the exchange ---------------------------------------------------------------------------
def exchange(desc: dict, facts: dict, group: Any) -> tuple[list[tuple[list[int], dict]], dict, dict[str, Any]]:
    """Every rank's description, as ``[(ranks holding it, description)]``, and facts by rank."""
    import torch.distributed as dist

    blob = pickle.dumps(desc, protocol=pickle.HIGHEST_PROTOCOL)
    digest = hashlib.sha256(blob).digest()
    world, rank = dist.get_world_size(group), dist.get_rank()
    device = torch.device(_object_device(dist.get_backend(group)))
    gathered: list = [None] * world
    dist.all_gather_object(gathered, (digest, rank, facts), group=group)
    leaders: dict[bytes, list[int]] = {}
    for group_rank, (d, _, _) in enumerate(gathered):
        leaders.setdefault(d, []).append(group_rank)
    out: list[tuple[list[int], dict]] = []
    sizes: list[int] = []
    me = dist.get_group_rank(group, rank) if group is not None else rank
    for members in leaders.values():
        box: list[Any] = [desc if me == members[0] else None]
        dist.broadcast_object_list(box, group_src=members[0], group=group, device=device)
        out.append(([gathered[m][1] for m in members], box[0]))
        sizes.append(len(blob) if me == members[0] else len(pickle.dumps(box[0], protocol=pickle.HIGHEST_PROTOCOL)))
    stats = {"description_bytes": sizes, "distinct_descriptions": len(leaders), "world_size": world}
    return out, {g[1]: g[2] for g in gathered}, stats


_DEVICE_TYPES = {"nccl": "cuda", "xccl": "xpu", "hccl": "hpu"}


def object_device(backend: str, current: int = 0, count: int = 0, local_rank: str | None = None) -> str:
    """The device torch's object collectives use over a group of ``backend``, checked (pure).

    The messages travel as byte tensors on this device: ``cpu`` for gloo (and for a group of
    several backends when one is on cpu, as torch picks), ``cuda:<current>`` for NCCL (``xpu`` for xccl...). NCCL needs
    every rank on its own GPU: with several GPUs visible and ``LOCAL_RANK`` set, a current device
    that is not ``LOCAL_RANK`` (mod the GPUs) means ``torch.cuda.set_device`` was never called.

    >>> object_device("gloo"), object_device("nccl", 1, 2, "1"), object_device("cpu:gloo,cuda:nccl", 0, 8, "3")
    ('cpu', 'cuda:1', 'cpu')
    """
    pairs = [p.split(":") for p in str(backend).lower().split(",")]
    kinds = [p[0] if len(p) == 2 else _DEVICE_TYPES.get(p[0], "cpu") for p in pairs]
    kind = "cpu" if "cpu" in kinds or not kinds else kinds[0]
    if kind == "cpu":
        return "cpu"
    if kind == "cuda" and count > 1 and local_rank not in (None, "") and int(local_rank) % count != current:
        raise TensorvizError(
            f"tv.analyze(..., group=...) over {backend} sends its messages as CUDA tensors on the current "
            f"device, cuda:{current}, but LOCAL_RANK={local_rank} with {count} GPUs visible: ranks would share "
            f"one GPU. Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before analysing"
        )
    return f"cuda:{current}" if kind == "cuda" else kind  # another accelerator: torch's current one


def _object_device(backend: str) -> str:
    """:func:`object_device` with this process's current CUDA device and ``LOCAL_RANK``."""
    import os

    cuda = "nccl" in str(backend).lower() and torch.cuda.is_available()
    current, count = (torch.cuda.current_device(), torch.cuda.device_count()) if cuda else (0, 0)
    return object_device(backend, current, count, os.environ.get("LOCAL_RANK"))


# -- 3. the layout -----------------------------------------------------------------------------
def analyze_group(obj: Any, group: Any = None, *, ranks: Any = None) -> Layout:
    """The global layout of ``obj`` over the ranks of ``group`` (a collective: every rank calls it).

    Args:
        obj: this rank's ``nn.Module`` or state dict (DTensors, plain tensors).
        group: a ``ProcessGroup``, or None for the default group.
        ranks: the global ranks whose shards become views (default: all). The layout has
            parameters x ranks shard views; on a thousand ranks, pick the few you want to see
            (the exchange and the metadata still cover every rank).

    Returns:
        The same :class:`Layout` on every rank (see the module docstring).

    Raises:
        TensorvizError: ``torch.distributed`` is not initialised, or ranks disagree about a tensor.
    """
    return layout_from_record(gather(obj, group), ranks=ranks)


def gather(obj: Any, group: Any = None) -> dict:
    """The exchange record (a collective): every description, the ranks holding it, per-rank facts.

    JSON-friendly; :func:`~tensorviz.sources.distributed.global_layout.layout_from_record` turns it into the
    layout, here or later (``json.dump`` it from rank 0 to look at a job's layout in a notebook).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise TensorvizError(
            "tv.analyze(obj, group=...) is a collective over torch.distributed, which is "
            "not initialised; call torch.distributed.init_process_group(...) first "
            "(or drop group= to analyse this process alone)"
        )
    desc, facts = describe(obj)
    shared, per_rank, stats = exchange(desc, facts, group)
    return {"source": type(obj).__name__, "shared": shared, "per_rank": per_rank, "stats": stats}
