"""FSDP2's physical side: what reading it adds to ``tv.analyze(model, group=True)`` (gloo, CPU).

Each rank builds the same model of ``--blocks`` blocks (a ``Linear(16, 16)`` and a
``LayerNorm(16)``: 4 parameters each, so 2,500 blocks are 10,000 parameters), ``fully_shard``s
every block and the root, runs one forward and backward (so every unit's all-gather outputs
exist and are freed), and times, best of ``--repeat``, on the slowest rank:

* FSDP2 units   -- reading every unit's sharded and unsharded storages (``describe_units``);
* describe      -- this rank's whole description (the units included);
* exchange      -- the collectives (the units travel in the description, once per distinct one);
* build         -- the global layout and ``metadata["fsdp"]``;
* analyze       -- ``tv.analyze(model, group=True)``: all of it;
* peer: describe without FSDP2 -- the same description of the state dict alone (no units).

Also printed: bytes of the description with and without the units.

    .venv/bin/python bench/bench_fsdp.py [--blocks 2500] [--worlds 2 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorviz as tv  # noqa: E402
from tensorviz.sources.distributed.collective import build_layout, describe, exchange  # noqa: E402
from tensorviz.sources.distributed.fsdp_units import describe_units  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_distributed import process_group, run_worlds, slowest, time_lines, timed  # noqa: E402


def model(blocks: int, world: int) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    m = nn.Sequential(*(nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16)) for _ in range(blocks)))
    for block in m:
        fully_shard(block, mesh=mesh)
    fully_shard(m, mesh=mesh)
    m(torch.zeros(2, 16)).sum().backward()
    return m


def run(rank: int, world: int, port: int, blocks: int, repeat: int, out: str) -> None:
    with process_group(rank, world, port):
        m = model(blocks, world)
        sd = m.state_dict()
        t = {}
        t["FSDP2 units"], _ = timed(lambda: describe_units(m), repeat)
        t["describe"], (desc, facts) = timed(lambda: describe(m), repeat)
        t["exchange"], (shared, per_rank, stats) = timed(lambda: exchange(desc, facts, None), repeat)
        t["build"], layout = timed(lambda: build_layout(shared, per_rank, "m", stats), repeat)
        t["analyze"], _ = timed(lambda: tv.analyze(m, group=True), repeat)
        t["peer: describe without FSDP2"], (plain, _) = timed(lambda: describe(sd), repeat)
        times = slowest(t, world)
        if rank == 0:
            with_units = len(pickle.dumps(desc, protocol=pickle.HIGHEST_PROTOCOL))
            without = len(pickle.dumps(plain, protocol=pickle.HIGHEST_PROTOCOL))
            n = len(desc["entries"])
            totals = layout.metadata["fsdp"]["ranks"][0]
            report = [f"== {world} ranks, {n:,} parameters in {len(desc['fsdp']):,} FSDP2 units"]
            report.append(
                f"description: {with_units:,} bytes with the units, {without:,} without "
                f"({(with_units - without) / n:.0f} more per parameter)"
            )
            report.append(f"rank 0: {totals}")
            report += time_lines(times, 30)
            with open(out, "w") as f:
                f.write("\n".join(report) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=2_500)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    run_worlds(run, args.worlds, args.blocks, args.repeat)


if __name__ == "__main__":
    main()
