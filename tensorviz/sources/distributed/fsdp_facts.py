"""FSDP2's record in a layout (``layout.facts.fsdp``): built from the units each rank described
(:mod:`tensorviz.sources.distributed.fsdp_units` reads them from torch), and read back per rank.

Pure Python (no torch): a gathered record rebuilt from JSON needs neither torch nor a process
group. The record's vocabulary -- totals, the peak rule, its words -- is
:mod:`tensorviz.core.fsdp`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tensorviz.core.fsdp import PEAK_RULE, rank_totals, unit_totals

if TYPE_CHECKING:
    from tensorviz.core.layout import Layout

__all__ = ["fsdp_record", "rank_record"]


def fsdp_record(
    described: Sequence[tuple[Sequence[int], Sequence[Mapping]]],
    shard_bytes: Mapping[int, int],
    unavailable: Mapping,
) -> dict | None:
    """``metadata["fsdp"]`` from each description's ranks and units, each rank's local shard bytes
    (all units together: one number a rank travels) and ``{rank: reason}`` where FSDP2's internals could not be read; None when no rank
    has an FSDP2 unit and none failed."""
    described = _same_units_once(described)
    if not described and not unavailable:
        return None
    ranks: dict[int, dict] = {}
    for members, units in described:
        base = rank_totals(units, [])  # O(parameters) once; a rank adds only its shard bytes (O(units))
        for r in members:
            shards = int(shard_bytes.get(r) or 0)
            ranks[r] = {**base, "shard_bytes": shards, "padding_bytes": base["sharded_bytes"] - shards}
    why: dict[str, list[int]] = {}
    for r, reason in sorted(unavailable.items()):
        why.setdefault(str(reason), []).append(int(r))
    record = {"units": [{"ranks": m, "units": u} for m, u in described], "ranks": dict(sorted(ranks.items()))}
    record["peak_rule"] = PEAK_RULE
    if why:
        record["unavailable"] = why
    return record


def _same_units_once(described: Sequence[tuple[Sequence[int], Sequence[Mapping]]]) -> list[tuple[list[int], list]]:
    """Descriptions that differ elsewhere (FSDP2 over tensor parallelism: each ``tp`` column has
    its own ``dp`` mesh) but hold the same units: one entry, their ranks merged."""
    merged: dict[str, tuple[list[int], list]] = {}
    for ranks, units in described:
        if units:
            key = json.dumps(units, sort_keys=True, default=str)
            merged.setdefault(key, ([], list(units)))[0].extend(int(r) for r in ranks)
    return [(sorted(ranks), units) for ranks, units in merged.values()]


def rank_record(layout: Layout, rank: int) -> list[dict]:
    """One rank's units in full: every sharded storage (``nbytes``, padded) with the byte range
    ``[start, stop)`` each local shard occupies in it (its length from the rank's shard views;
    None when the layout does not show that rank), and every all-gather output with its state.

    Raises:
        KeyError: the layout has no FSDP2 record, or no unit on ``rank``.
    """
    record = layout.facts.fsdp
    if not record:
        raise KeyError("this layout has no FSDP2 units (tv.analyze(model, group=...) of a fully_shard model has)")
    units = next((e["units"] for e in record["units"] if rank in e["ranks"]), None)
    if units is None:
        raise KeyError(f"rank {rank} holds no FSDP2 unit; ranks with units: {sorted(record['ranks'])}")
    return [_unit_record(u, layout, rank) for u in units]


def _unit_record(unit: Mapping, layout: Layout, rank: int) -> dict:
    storages = [{"nbytes": n, "shards": []} for n in unit["storages"]]
    unsharded = []
    for p in unit["params"]:
        length = _shard_nbytes(layout, p["names"][0], rank)
        stop = None if length is None else p["offset"] + length
        storages[p["storage"]]["shards"].append({"names": p["names"], "start": p["offset"], "stop": stop})
        unsharded.append({"names": p["names"], "nbytes": p["gathered"], "state": _state(p["now"], p["gathered"])})
    keys = ("module", "state", "reshard_after_forward", "note", "world")
    return {**{k: unit[k] for k in keys}, "storages": storages, "unsharded": unsharded, **unit_totals(unit)}


def _shard_nbytes(layout: Layout, name: str, rank: int) -> int | None:
    """Bytes of ``name``'s shard views on ``rank`` (one view, or pieces ``#0``, ``#1``...); in a
    one-process layout, of the view ``name`` itself (this rank's local shard)."""
    if layout.facts.format != "distributed":
        return layout[name].nbytes if name in layout else None
    whole = f"{name}@rank{rank}"
    if whole in layout:
        return layout[whole].nbytes
    pieces, k = 0, 0
    while f"{whole}#{k}" in layout:
        pieces += layout[f"{whole}#{k}"].nbytes
        k += 1
    return pieces if k else None


def _state(now: int | None, gathered: int) -> str:
    if now is None:
        return "not yet gathered"
    if now == 0 and gathered:
        return "freed"
    return "gathered" if now == gathered else f"{now} of {gathered} bytes"
