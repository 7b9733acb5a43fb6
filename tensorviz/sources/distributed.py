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
from tensorviz.core.records import Skipped
from tensorviz.core.rows import Rows, gc_paused
from tensorviz.sources.live import iter_named_values
from tensorviz.sources.placements import (
    contiguous_strides,
    coordinate,
    placement_text,
    shard_ranges,
    shard_views,
)

__all__ = ["analyze_group", "describe", "exchange", "build_layout"]


# -- 1. what this rank holds -------------------------------------------------------------------
def describe(obj: Any) -> tuple[dict, dict]:
    """This rank's description (the same on ranks that hold the same tensors) and its own facts.

    The description is ``{"meshes": [(shape, ranks, dim names)], "entries": [...]}``; an entry
    is ``("d", names, dtype, itemsize, shape, mesh index, placements)`` for a DTensor,
    ``("t", names, dtype, itemsize, shape)`` for a plain tensor, ``("x", name, reason)`` for a
    value that is not analysable. Facts: local bytes, local storage bytes, problems.
    """
    d = _Describer()
    for name, value in iter_named_values(obj):
        d.add(name, value)
    return d.result()


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
        self.local_bytes, self.storages, self.problems = 0, {}, []

    def add(self, name: str, value: Any) -> None:
        if not isinstance(value, torch.Tensor):
            self.entries.append(["x", name, f"not a tensor ({type(value).__qualname__})"])
            return
        entry = self.by_id.get(id(value))
        if entry is not None:  # a tie: one global tensor under several names
            entry[1].append(name)
            return
        local = getattr(value, "_local_tensor", value) if _is_dtensor(value) else value
        entry = self.by_id[id(value)] = self._entry(name, value, local)
        self.entries.append(entry)
        self.local_bytes += local.numel() * local.element_size()
        st = local.untyped_storage()
        self.storages[st._cdata] = st.nbytes()

    def _entry(self, name: str, t: torch.Tensor, local: torch.Tensor) -> list:
        dtype, itemsize = str(t.dtype).removeprefix("torch."), t.element_size()
        shape = tuple(int(n) for n in t.shape)
        if local is t:
            return ["t", [name], dtype, itemsize, shape]
        mesh = self._mesh(t.device_mesh)
        raw = tuple(t.placements)
        placements = self.placements.get(raw)
        if placements is None:
            placements = self.placements[raw] = tuple(_placement(p) for p in raw)
        self._check(name, shape, placements, mesh, tuple(local.shape))
        return ["d", [name], dtype, itemsize, shape, self.meshes[mesh], placements]

    def _mesh(self, mesh: Any) -> tuple:
        key = self.mesh_keys.get(id(mesh))
        if key is None:
            ranks = tuple(int(r) for r in mesh.mesh.flatten().tolist())
            key = self.mesh_keys[id(mesh)] = (tuple(mesh.shape), ranks, tuple(mesh.mesh_dim_names or ()))
            self.meshes.setdefault(key, len(self.meshes))
        return key

    def _check(self, name: str, shape: tuple, placements: tuple, mesh: tuple, got: tuple) -> None:
        """This rank's local shape must be what its placements give it."""
        k = (shape, placements, mesh)
        if k not in self.expected:
            self.expected[k] = None
            if self.rank in mesh[1]:
                ranges = shard_ranges(shape, placements, mesh[0], coordinate(mesh[1], mesh[0], self.rank))
                self.expected[k] = tuple(sum(b - a for a, b in r) for r in ranges)
        expected = self.expected[k]
        if expected is not None and got != expected:
            self.problems.append(
                f"{name}@rank{self.rank}: to_local() has shape {got}, but its placements "
                f"{[placement_text(p) for p in placements]} give {expected}"
            )

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


def _placement(p: Any) -> tuple:
    kind = type(p).__name__
    if kind == "_StridedShard":
        return ("SS", int(p.dim), int(p.split_factor))
    if kind == "Shard":
        return ("S", int(p.dim))
    if kind == "Replicate":
        return ("R",)
    if kind == "Partial" or p.is_partial():
        return ("P", str(getattr(p, "reduce_op", "sum")))
    raise TensorvizError(
        f"unknown DTensor placement {p!r}: tensorviz knows Shard, _StridedShard, Replicate and Partial"
    )


# -- 2. the exchange ---------------------------------------------------------------------------
def exchange(desc: dict, facts: dict, group: Any) -> tuple[list[tuple[list[int], dict]], dict, dict]:
    """Every rank's description, as ``[(ranks holding it, description)]``, and facts by rank."""
    import torch.distributed as dist

    blob = pickle.dumps(desc, protocol=pickle.HIGHEST_PROTOCOL)
    digest = hashlib.sha256(blob).digest()
    world, rank = dist.get_world_size(group), dist.get_rank()
    gathered: list = [None] * world
    dist.all_gather_object(gathered, (digest, rank, facts), group=group)
    leaders: dict[bytes, list[int]] = {}
    for group_rank, (d, _, _) in enumerate(gathered):
        leaders.setdefault(d, []).append(group_rank)
    out, sizes = [], []
    me = dist.get_group_rank(group, rank) if group is not None else rank
    for members in leaders.values():
        box = [desc if me == members[0] else None]
        dist.broadcast_object_list(box, group_src=members[0], group=group)
        out.append(([gathered[m][1] for m in members], box[0]))
        sizes.append(len(blob) if me == members[0] else len(pickle.dumps(box[0], protocol=pickle.HIGHEST_PROTOCOL)))
    stats = {"description_bytes": sizes, "distinct_descriptions": len(leaders), "world_size": world}
    return out, {g[1]: g[2] for g in gathered}, stats


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
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise TensorvizError(
            "tv.analyze(obj, group=...) is a collective over torch.distributed, which is "
            "not initialised; call torch.distributed.init_process_group(...) first "
            "(or drop group= to analyse this process alone)"
        )
    desc, facts = describe(obj)
    shared, per_rank, stats = exchange(desc, facts, group)
    with gc_paused():
        return build_layout(shared, per_rank, type(obj).__name__, stats, ranks=ranks)


def build_layout(
    shared: list[tuple[list[int], dict]], per_rank: dict, source: str, stats: dict, *, ranks: Any = None
) -> Layout:
    """The Layout from every description and the ranks holding it (pure; the same on every rank)."""
    b = _Builder(None if ranks is None else {int(r) for r in ranks})
    for ranks, desc in shared:
        b.add(ranks, desc)
    return b.layout(per_rank, source, stats)


class _Builder:
    def __init__(self, keep: set[int] | None = None) -> None:
        self.keep = keep
        self.rows, self.skipped, self.problems = Rows(), [], []
        self.meshes: list[tuple] = []
        self.tensors: dict[str, dict] = {}
        self.shards: dict[str, dict] = {}
        self.done: set[tuple] = set()
        self.places: dict[tuple, tuple] = {}
        self.globals: dict[tuple, tuple] = {}

    def add(self, ranks: list[int], desc: dict) -> None:
        meshes = [self._mesh(m) for m in desc["meshes"]]
        for e in desc["entries"]:
            if e[0] == "x":
                if e[1] not in {s.name for s in self.skipped}:
                    self.skipped.append(Skipped(e[1], e[2]))
            elif e[0] == "d":
                mesh = self.meshes[meshes[e[5]]]
                self._tensor(e[1], e[2], e[3], e[4], e[6], meshes[e[5]], mesh[1], mesh)
            else:
                self._tensor(e[1], e[2], e[3], e[4], None, None, sorted(ranks), None)

    def _mesh(self, m: tuple) -> int:
        m = (tuple(m[0]), tuple(m[1]), tuple(m[2]))
        if m not in self.meshes:
            self.meshes.append(m)
        return self.meshes.index(m)

    def _tensor(
        self,
        names: tuple,
        dtype: str,
        itemsize: int,
        shape: tuple,
        placements: tuple | None,
        mesh_index: int | None,
        ranks: tuple,
        mesh: tuple | None,
    ) -> None:
        first = names[0]
        info = self.tensors.get(first)
        if info is None:
            info = self.tensors[first] = {
                "shape": list(shape),
                "dtype": dtype,
                "names": list(names),
                "placements": {},
                "ranks": [],
            }
            self._global(names, dtype, itemsize, shape)
        elif info["shape"] != list(shape) or info["dtype"] != dtype:
            raise TensorvizError(
                f"ranks disagree about {first!r}: {info['dtype']}{info['shape']} on some, "
                f"{dtype}{list(shape)} on ranks {list(ranks)}; every rank must hold the "
                f"same global tensor under one name"
            )
        if placements is not None:
            info["placements"][str(mesh_index)] = [placement_text(p) for p in placements]
        for r in ranks:
            if (first, r) in self.done or (self.keep is not None and r not in self.keep):
                continue
            self.done.add((first, r))
            info["ranks"].append(r)
            self._shard(names, dtype, itemsize, shape, placements, mesh, mesh_index, r)

    def _global(self, names: tuple, dtype: str, itemsize: int, shape: tuple) -> None:
        """The global tensor: a storage (no view of its own; tied names are its shards' names)."""
        key = ("global", names[0])
        numel = 1
        for n in shape:
            numel *= n
        self.rows.labels[key] = global_label(names, shape)
        self.globals[key] = (key, "global", numel * itemsize, self.rows.labels[key])

    def _shard(
        self,
        names: tuple,
        dtype: str,
        itemsize: int,
        shape: tuple,
        placements: tuple | None,
        mesh: tuple | None,
        mesh_index: int | None,
        rank: int,
    ) -> None:
        key = ("global", names[0])
        numel = 1
        for n in shape:
            numel *= n
        # Thousands of parameters share a few shapes: each (shape, placements, mesh, rank) once.
        k = (shape, placements, mesh, rank)
        found = self.places.get(k)
        if found is None:
            found = self.places[k] = _place(shape, placements, mesh, rank)
        views, coord, note = found
        for n in names:
            for k, (shp, strd, off) in enumerate(views):
                vname = f"{n}@rank{rank}" + (f"#{k}" if len(views) > 1 else "")
                if note:
                    self.rows.notes[len(self.rows.rows)] = note
                self.rows.rows.append((vname, key, "global", numel * itemsize, (dtype, itemsize), shp, strd, off, None))
                self.shards[vname] = {"tensor": names[0], "rank": rank, "mesh": mesh_index, "coord": coord}

    def layout(self, per_rank: dict, source: str, stats: dict) -> Layout:
        problems = [p for r in sorted(per_rank) for p in per_rank[r]["problems"]]
        meta = {
            "format": "distributed",
            "world_size": stats.get("world_size", len(per_rank)),
            "meshes": [{"shape": list(s), "ranks": list(r), "dim_names": list(d)} for s, r, d in self.meshes],
            "tensors": self.tensors,
            "shards": self.shards,
            "ranks": {r: {k: v for k, v in f.items() if k != "problems"} for r, f in sorted(per_rank.items())},
            "problems": problems,
            "exchange": stats,
        }
        used = {row[1] for row in self.rows.rows}  # a global tensor with no shard shown stays a storage
        self.rows.extra = [g for key, g in self.globals.items() if key not in used]
        return Layout._from_rows(self.rows, self.skipped, source=f"{source} over {len(per_rank)} ranks", metadata=meta)


def _place(shape: tuple, placements: tuple | None, mesh: tuple | None, rank: int) -> tuple:
    """(views, mesh coordinate, note) of one rank's shard."""
    if placements is None:
        return [(shape, contiguous_strides(shape), 0)], [], "plain tensor (not a DTensor): this rank's own copy"
    coord = coordinate(mesh[1], mesh[0], rank)
    ranges = shard_ranges(shape, placements, mesh[0], coord)
    views = shard_views(shape, ranges)
    return views, list(coord), _shard_note(placements, mesh, coord, ranges, len(views))


def _shard_note(placements: tuple, mesh: tuple, coord: tuple, ranges: tuple, pieces: int) -> str:
    names = _dim_names(mesh)
    where = ", ".join(f"{n}={c}" for n, c in zip(names, coord))
    dims = " x ".join(f"{n}={s}" for n, s in zip(names, mesh[0]))
    parts = [f"({', '.join(placement_text(p) for p in placements)}) on mesh {dims}, at ({where})"]
    partial = [names[i] for i, p in enumerate(placements) if p[0] == "P"]
    if partial:
        op = next(p[1] for p in placements if p[0] == "P")
        parts.append(
            f"Partial({op}): holds a partial value; the global tensor is the {op} over mesh dim {', '.join(partial)}"
        )
    split = [d for d, r in enumerate(ranges) if len(r) > 1]
    if split:
        parts.append(
            f"interleaved: dim {split[0]} is {len(ranges[split[0]])} separate row ranges "
            f"{ranges[split[0]]}" + (f", shown as {pieces} views" if pieces > 1 else "")
        )
    return "; ".join(parts)


def global_label(names: tuple, shape: tuple) -> str:
    """A global tensor's storage label: its names and shape, short enough for a lane title."""
    return f"{' = '.join(names)} · global {'×'.join(map(str, shape)) or 'scalar'}"


def _dim_names(mesh: tuple) -> tuple[str, ...]:
    return tuple(mesh[2]) or tuple(f"dim{i}" for i in range(len(mesh[0])))
