"""Colour by rank or by mesh coordinate: the "by rank" and "by mesh dimension" diagram groupings.

Pure; reads only ``layout.facts``. A distributed layout (``tv.analyze(obj, group=...)``)
lists every shard view's rank and mesh coordinate in ``metadata["shards"]``; a DCP folder names
the rank that saved each chunk in its file name (``__R_0.distcp``). The diagram then keeps its
storage lanes (one block per global tensor or file) and gives every bar the colour of its
rank, or of its coordinate along one mesh dimension (``by="mesh:dp"``: the shards that differ
only in other dimensions share a colour): rank or coordinate ``r`` is palette colour ``r``
(:func:`tensorviz.plan.colors.palette_colour`) in every diagram. Names still carry the rank (``@rankR``), so colour
never carries the meaning alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tensorviz.core.layout import Layout
from tensorviz.plan.model import DiagramOptionError

__all__ = ["SHARD_BYS", "is_sharded", "mesh_dims", "shard_grouping", "shard_ordinals"]

#: Groupings that colour shards (besides ``"mesh:<dimension name>"``).
SHARD_BYS = ("rank",)

_SAVER = re.compile(r"^__(\d+)_\d+\.distcp$", re.ASCII)


def is_sharded(layout: Layout) -> bool:
    """Whether ``layout`` is a gathered sharded model or a DCP checkpoint folder (has shards)."""
    return layout.facts.format in ("distributed", "dcp")


def mesh_dims(layout: Layout) -> list[str]:
    """The mesh dimension names of a sharded layout, sorted (none for a DCP folder's record)."""
    return sorted({d for m in layout.facts.meshes for d in m.get("dim_names", ())})


def shard_grouping(layout: Layout, by: str) -> str:
    """Check that ``by`` ("rank" or "mesh:<dim>") applies to ``layout``; return it.

    Raises:
        DiagramOptionError: not a sharded layout, or no mesh dimension of that name.
    """
    fmt = layout.facts.format
    if not is_sharded(layout):
        raise DiagramOptionError(
            f"by={by!r} colours the shards of a sharded model (tv.analyze(obj, group=...)) or of a DCP "
            f"checkpoint folder; this layout is {fmt or 'not sharded'}: use by='storage', 'span' or 'overlap'"
        )
    if by == "rank":
        return by
    dims = mesh_dims(layout)
    if fmt == "dcp" or by.removeprefix("mesh:") not in dims:
        have = ", ".join(f"'mesh:{d}'" for d in dims) or "none: a DCP folder records no mesh"
        raise DiagramOptionError(f"by={by!r}: no mesh dimension of that name; this layout has {have}")
    return by


def shard_ordinals(layout: Layout, by: str) -> dict[str, int]:
    """``{view name: colour ordinal}`` for every view with a rank or coordinate: its rank
    (``by="rank"``; for a DCP folder, the rank that saved the chunk), or its coordinate along
    one mesh dimension (``by="mesh:dp"``). Views absent keep their span group's colour."""
    facts = layout.facts
    if facts.format == "dcp":
        return _saver_ranks(facts.chunks)
    shards = facts.shards
    if by == "rank":
        return {name: int(s["rank"]) for name, s in shards.items()}
    dim = by.removeprefix("mesh:")
    meshes = facts.meshes
    out = {}
    for name, s in shards.items():
        mesh = meshes[s["mesh"]] if s.get("mesh") is not None else None
        if mesh is not None and dim in mesh["dim_names"]:
            out[name] = int(s["coord"][mesh["dim_names"].index(dim)])
    return out


def _saver_ranks(chunks: Mapping[str, Any]) -> dict[str, int]:
    """A DCP chunk's colour ordinal: the rank in its file's name (chunk views and file views)."""
    out = {}
    for name, chunk in chunks.items():
        m = _SAVER.match(str(chunk.get("file") or ""))
        if m:
            out[name] = out[f"{chunk['file']}:{name}"] = int(m.group(1))
    return out
