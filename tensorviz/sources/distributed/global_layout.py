"""The global layout of a sharded model from the exchanged descriptions: pure, the same on every rank.

:mod:`tensorviz.sources.distributed.collective` gathers every rank's description over torch.distributed;
this module turns them into a :class:`~tensorviz.core.layout.Layout` (see that module's
docstring for what the layout holds) and reads and writes the exchanged record as JSON, so a
layout computed in a job can be rebuilt elsewhere (a notebook) exactly. No torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorviz.core.errors import TensorvizError
from tensorviz.core.layout import Layout
from tensorviz.core.records import Skipped
from tensorviz.core.rows import Field, Rows, gc_paused
from tensorviz.sources.distributed.fsdp_facts import fsdp_record
from tensorviz.sources.distributed.placements import (
    contiguous_strides,
    coordinate,
    placement_text,
    shard_ranges,
    shard_views,
)

__all__ = ["build_layout", "layout_from_record", "global_label"]


def layout_from_record(record: dict, *, ranks: Any = None) -> Layout:
    """The layout of an exchange record (:func:`tensorviz.sources.distributed.gather`), also
    after a round trip through JSON (lists back to tuples, rank keys back to ints).

    >>> import json                                                    # doctest: +SKIP
    >>> layout = layout_from_record(json.load(open("exchange.json")))  # doctest: +SKIP
    """
    try:
        shared = [([int(r) for r in rk], _description(d)) for rk, d in record["shared"]]
        per_rank = {int(r): f for r, f in record["per_rank"].items()}
        stats, source = dict(record.get("stats") or {}), str(record.get("source", ""))
    except (KeyError, TypeError, ValueError) as err:
        raise TensorvizError(
            f"not an exchange record ({type(err).__name__}: {err}); it needs 'shared' and 'per_rank' "
            f"as written by tensorviz.sources.distributed.gather"
        ) from None
    with gc_paused():
        return build_layout(shared, per_rank, source, stats, ranks=ranks)


def _description(d: dict) -> dict:
    meshes = [(tuple(m[0]), tuple(m[1]), tuple(m[2])) for m in d["meshes"]]
    entries: list[tuple] = []
    for e in d["entries"]:
        if e[0] == "d":
            placements = tuple(tuple(p) for p in e[6])
            entries.append(("d", tuple(e[1]), e[2], int(e[3]), tuple(e[4]), int(e[5]), placements))
        elif e[0] == "t":
            entries.append(("t", tuple(e[1]), e[2], int(e[3]), tuple(e[4])))
        else:
            entries.append(tuple(e))
    out = {"meshes": meshes, "entries": entries}
    if d.get("fsdp"):
        out["fsdp"] = d["fsdp"]
    return out


def build_layout(
    shared: list[tuple[list[int], dict]], per_rank: dict, source: str, stats: dict, *, ranks: Any = None
) -> Layout:
    """The Layout from every description and the ranks holding it (pure; the same on every rank)."""
    b = _Builder(None if ranks is None else {int(r) for r in ranks})
    for members, desc in shared:
        b.add(members, desc)
    return b.layout(per_rank, source, stats, _fsdp(shared, per_rank))


def _fsdp(shared: list[tuple[list[int], dict]], per_rank: dict) -> dict | None:
    """``metadata["fsdp"]``: FSDP2's units per description, each rank's totals (:mod:`tensorviz.core.fsdp`)."""
    shard_bytes = {r: f.get("fsdp_shard_bytes", 0) for r, f in per_rank.items()}
    unavailable = {r: f["fsdp_unavailable"] for r, f in per_rank.items() if f.get("fsdp_unavailable")}
    return fsdp_record([(members, d.get("fsdp") or []) for members, d in shared], shard_bytes, unavailable)


class _Builder:
    def __init__(self, keep: set[int] | None = None) -> None:
        self.keep = keep
        self.rows = Rows()
        self.skipped: list[Skipped] = []
        self.problems: list[str] = []
        self.rows.unique = False  # "a@rank0" could also be a tensor's own name: a repeat is skipped
        self.meshes: list[tuple] = []
        self.tensors: dict[str, dict] = {}
        self.shards: dict[str, dict] = {}
        self.done: set[tuple] = set()
        self.skipped_names: set[str] = set()
        self.places: dict[tuple, tuple] = {}
        self.globals: dict[tuple, tuple] = {}
        self.order: dict[str, int] = {}  # first appearance of each global tensor
        self.pending: list[tuple] = []  # (tensor order, rank, row, note, shard metadata)

    def add(self, ranks: list[int], desc: dict) -> None:
        meshes = [self._mesh(m) for m in desc["meshes"]]
        for e in desc["entries"]:
            if e[0] == "x":
                if e[1] not in self.skipped_names:
                    self.skipped_names.add(e[1])
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
        ranks: Sequence[int],
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
        place = (shape, placements, mesh, rank)
        found = self.places.get(place)
        if found is None:
            found = self.places[place] = _place(shape, placements, mesh, rank)
        views, coord, note = found
        order = self.order.setdefault(names[0], len(self.order))
        for n in names:
            for k, (shp, strd, off) in enumerate(views):
                vname = f"{n}@rank{rank}" + (f"#{k}" if len(views) > 1 else "")
                row = (vname, key, "global", numel * itemsize, (dtype, itemsize), shp, strd, off, None)
                shard = {"tensor": names[0], "rank": rank, "mesh": mesh_index, "coord": coord}
                self.pending.append((order, rank, row, note, shard))

    def _rows(self) -> None:
        """Rows in tensor order, then rank order (descriptions arrive grouped by rank set)."""
        self.pending.sort(key=lambda p: (p[0], p[1]))  # stable: names and pieces keep their order
        for _, _, row, note, shard in self.pending:
            if note:
                self.rows.notes[len(self.rows.rows)] = note
            self.rows.rows.append(row)
            self.shards[row[Field.NAME]] = shard

    def layout(self, per_rank: dict, source: str, stats: dict, fsdp: dict | None = None) -> Layout:
        self._rows()
        for info in self.tensors.values():
            info["ranks"].sort()
        problems = [p for r in sorted(per_rank) for p in per_rank[r]["problems"]]
        meta = {
            "format": "distributed",
            "world_size": stats.get("world_size", len(per_rank)),
            **({"fsdp": fsdp} if fsdp else {}),  # before the long entries: the compact summary shows it
            "meshes": [{"shape": list(s), "ranks": list(r), "dim_names": list(d)} for s, r, d in self.meshes],
            "tensors": self.tensors,
            "shards": self.shards,
            "ranks": {r: {k: v for k, v in f.items() if k in _RANK_FACTS} for r, f in sorted(per_rank.items())},
            "problems": problems,
            "exchange": stats,
        }
        used = {row[Field.TOKEN] for row in self.rows.rows}  # a global tensor with no shard shown stays a storage
        self.rows.extra = [g for key, g in self.globals.items() if key not in used]
        return Layout._from_rows(self.rows, self.skipped, source=f"{source} over {len(per_rank)} ranks", metadata=meta)


_RANK_FACTS = ("local_bytes", "storage_bytes")  # per rank in metadata["ranks"]; FSDP2's in metadata["fsdp"]


def _place(shape: tuple, placements: tuple | None, mesh: tuple | None, rank: int) -> tuple:
    """(views, mesh coordinate, note) of one rank's shard."""
    if placements is None or mesh is None:
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
