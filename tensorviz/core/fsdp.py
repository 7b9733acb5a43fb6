"""FSDP2's physical side of a distributed layout: per rank and unit, what stays, what is re-gathered.

``tv.analyze(model, group=...)`` on an FSDP2 model puts ``layout.facts.fsdp`` (built by
:func:`tensorviz.sources.distributed.fsdp_facts.fsdp_record`, JSON-friendly) next to the global layout:

- ``units``: ``[{"ranks": [...], "units": [unit, ...]}]``, one entry per distinct list of units
  (usually one: every rank of an FSDP2 job has the same units and padded sizes). A unit is one
  FSDP2 parameter group: ``module``, ``state`` ("sharded", "unsharded", "sharded post forward"),
  ``reshard_after_forward`` (True: freed after forward and re-gathered in backward; False: kept
  gathered until backward; an int: kept as a 1/k shard), ``world`` (the all-gather's size),
  ``storages`` (each sharded parameter storage's padded bytes) and ``params`` (``names``, the
  ``storage`` and byte ``offset`` its local shard starts at, ``padded`` shard bytes, ``gathered``:
  the padded bytes its all-gather output holds, ``now``: what that output holds now -- None
  before the first all-gather, 0 when freed -- and the all-gather ``dtype``).
- ``ranks``: per rank, the totals of :func:`rank_totals` (bytes), including ``peak_bytes``,
  estimated by the rule in ``peak_rule`` (:data:`PEAK_RULE`).
- ``unavailable``: ``{reason: [ranks]}`` where torch's FSDP2 internals could not be read.

:func:`tensorviz.sources.distributed.fsdp_facts.rank_record` spells one rank out: every sharded storage with the byte range each local
shard occupies in it, and every unsharded (all-gather output) storage with its state. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensorviz.core.units import format_bytes

__all__ = [
    "PEAK_RULE",
    "RANK_COLUMNS",
    "unit_totals",
    "rank_totals",
    "fsdp_lines",
    "rank_rows",
]

#: What ``peak_bytes`` computes, word for word.
PEAK_RULE = (
    "peak ≈ every unit's sharded storages (always resident) + the units kept gathered after forward "
    "(reshard_after_forward=False: all their all-gathered bytes; =k: 1/k of them) + the two largest units "
    "freed after forward (re-gathered in backward: one in use, one prefetched); parameters only "
    "(no gradients, optimizer state, activations or the all-gather's own staging buffers)"
)


def unit_totals(unit: Mapping[str, Any]) -> dict[str, int]:
    """One unit's bytes on a rank: ``sharded`` (padded storages), ``gathered`` (what the
    all-gather re-gathers, padded), ``now`` (its outputs' bytes now), ``freed`` (gathered bytes
    of outputs now 0 bytes) with their count ``freed_storages``, and ``kept`` after forward."""
    params = unit["params"]
    gathered = sum(p["gathered"] for p in params)
    freed = [p["gathered"] for p in params if p["now"] == 0 and p["gathered"]]
    raf = unit["reshard_after_forward"]
    kept = gathered if raf is False else 0 if raf is True else gathered // int(raf)
    return {
        "sharded": sum(unit["storages"]),
        "gathered": gathered,
        "now": sum(p["now"] or 0 for p in params),
        "freed": sum(freed),
        "freed_storages": len(freed),
        "kept": kept,
    }


def rank_totals(units: Sequence[Mapping[str, Any]], local: Sequence[int]) -> dict[str, int]:
    """A rank's totals over its units (``local``: its local shard bytes per unit); see :data:`PEAK_RULE`.

    >>> u = lambda raf, g: {"params": [{"gathered": g, "now": 0}], "storages": [g // 2],
    ...                     "reshard_after_forward": raf}
    >>> t = rank_totals([u(False, 40), u(True, 80), u(True, 60), u(True, 20)], [20, 40, 30, 8])
    >>> t["sharded_bytes"], t["padding_bytes"], t["peak_bytes"]      # 100 + 40 + 80 + 60
    (100, 2, 280)
    """
    totals = [unit_totals(u) for u in units]
    sharded = sum(t["sharded"] for t in totals)
    refetched = sorted(t["gathered"] for t, u in zip(totals, units) if u["reshard_after_forward"] is not False)
    return {
        "units": len(units),
        "sharded_bytes": sharded,
        "shard_bytes": sum(local),
        "padding_bytes": sharded - sum(local),
        "unsharded_bytes": sum(t["gathered"] for t in totals),
        "gathered_now_bytes": sum(t["now"] for t in totals),
        "freed_bytes": sum(t["freed"] for t in totals),
        "freed_storages": sum(t["freed_storages"] for t in totals),
        "peak_bytes": sharded + sum(t["kept"] for t in totals) + sum(refetched[-2:]),
    }


# -- words ---------------------------------------------------------------------------------------
def fsdp_lines(record: Mapping[str, Any], most_ranks: int = 4) -> list[str]:
    """The text summary's lines: per-rank totals first (ranks with equal totals merged), then
    each unit, then the peak rule."""
    merged = _merged(record.get("ranks", {}))
    lines = [f"FSDP2 {_ranks_text(ranks)}: " + _totals_text(t) for ranks, t in merged[:most_ranks]]
    if len(merged) > most_ranks:
        lines.append(f"… {len(merged) - most_ranks} more FSDP2 rank totals")
    for reason, ranks in (record.get("unavailable") or {}).items():
        lines.append(f"FSDP2 {_ranks_text(ranks)}: {reason}")
    for entry in record.get("units", ()):
        lines += _unit_lines(entry)
    if record.get("ranks"):
        lines.append(str(record.get("peak_rule", PEAK_RULE)))
    return lines


def _unit_lines(entry: Mapping[str, Any]) -> list[str]:
    units = entry["units"]
    out = [f"FSDP2 units on {_ranks_text(entry['ranks'])}: {len(units)}"]
    for u in units:
        t = unit_totals(u)
        n = len(u["params"])
        freed = t["freed_storages"]
        line = (
            f"unit {u['module'] or '(root)'}: {_count(n, 'param')} in {_count(len(u['storages']), 'sharded storage')} "
            f"({format_bytes(t['sharded'])} a rank, padded), "
            f"all-gather {format_bytes(t['gathered'])} over {u['world']} ranks, {_after_forward(u)}; "
            f"now {u['state']}" + (f", {_count(freed, 'unsharded storage')} freed" if freed else "")
        )
        out.append(line + (f" ({u['note']})" if u.get("note") else ""))
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _after_forward(unit: Mapping[str, Any]) -> str:
    raf = unit["reshard_after_forward"]
    if raf is True:
        return "freed after forward (re-gathered in backward)"
    if raf is False:
        return "kept gathered after forward"
    return f"kept as a 1/{raf} shard after forward (re-gathered in backward)"


def _totals_text(t: Mapping[str, int]) -> str:
    b = format_bytes
    return (
        f"sharded storages {b(t['sharded_bytes'])} (shards {b(t['shard_bytes'])} + padding "
        f"{b(t['padding_bytes'])}) · all-gathers {b(t['unsharded_bytes'])} · gathered now "
        f"{b(t['gathered_now_bytes'])} · freed {b(t['freed_bytes'])} ({_count(t['freed_storages'], 'storage')}) · "
        f"peak ≈ {b(t['peak_bytes'])}"
    )


def _merged(ranks: Mapping) -> list[tuple[list[int], Mapping]]:
    """Ranks with equal totals, in rank order of their first member."""
    groups: dict[tuple, list] = {}
    for r, t in sorted(ranks.items(), key=lambda kv: int(kv[0])):
        groups.setdefault(tuple(sorted(t.items())), [[], t])[0].append(int(r))
    return [(m, t) for m, t in groups.values()]


def _ranks_text(ranks: Sequence[int]) -> str:
    """``rank 3``, ``ranks 0-3``, ``ranks 0, 2``."""
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks[:8])) + (f", … ({len(ranks)})" if len(ranks) > 8 else "")


#: Headings of :func:`rank_rows`.
RANK_COLUMNS = ("rank", "sharded (padded)", "padding", "all-gathers", "gathered now", "freed", "peak ≈")


def rank_rows(record: Mapping[str, Any], limit: int = 64) -> list[tuple[str, ...]]:
    """One row of strings per rank (the first ``limit``), columns :data:`RANK_COLUMNS`."""
    b = format_bytes
    rows = []
    for r, t in sorted(record.get("ranks", {}).items(), key=lambda kv: int(kv[0]))[:limit]:
        freed = f"{b(t['freed_bytes'])} ({t['freed_storages']})"
        cells = (t["sharded_bytes"], t["padding_bytes"], t["unsharded_bytes"], t["gathered_now_bytes"])
        rows.append((str(r), *map(b, cells), freed, b(t["peak_bytes"])))
    return rows
