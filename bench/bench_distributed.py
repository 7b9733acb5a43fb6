"""``tv.analyze(state_dict, group=True)`` for 10,000 DTensor parameters on 2 and 4 ranks (gloo, CPU).

Each rank builds the same FSDP-style state dict: ``--n`` DTensors (``Shard(0)`` over all ranks,
made with ``DTensor.from_local``: no data moves) of small mixed shapes. Timed on every rank,
best of ``--repeat``; rank 0 prints the slowest rank's time per step, in milliseconds:

* describe      -- this rank's description (placements, meshes, shapes; checks its own shards);
* exchange      -- the collectives: all_gather of a digest, one broadcast per distinct description;
* build         -- the global Layout from the descriptions (the same on every rank);
* analyze       -- ``tv.analyze(sd, group=True)``: all three;
* peer: all_gather_object -- every rank all-gathers every rank's full description (the naive
                   exchange: each rank receives world x description bytes);
* peer: local analyze     -- ``tv.analyze(sd)`` of this rank's local shards alone (no exchange).

Also printed: bytes of one description, bytes each rank sends and receives, views in the layout.

    .venv/bin/python bench/bench_distributed.py [--n 10000] [--worlds 2 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorviz as tv  # noqa: E402
from tensorviz.sources.distributed.collective import build_layout, describe, exchange  # noqa: E402

SHAPES = ((64, 32), (32,), (128, 64), (7, 5))  # (7, 5) is uneven on 2 and 4 ranks


def state_dict(n: int, world: int, rank: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    sd = {}
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)]
        rows = -(-shape[0] // world)
        start = min(rank * rows, shape[0])
        local = torch.zeros((min(start + rows, shape[0]) - start, *shape[1:]))
        sd[f"layers.{i // 10}.w{i % 10}"] = DTensor.from_local(
            local, mesh, [Shard(0)], run_check=False, shape=torch.Size(shape), stride=torch.empty(shape).stride()
        )
    return sd


def timed(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        dist.barrier()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


@contextlib.contextmanager
def process_group(rank: int, world: int, port: int):
    """A gloo process group on this machine, for the body of one spawned rank."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def slowest(t: dict[str, float], world: int) -> dict[str, float]:
    """Each step's time on the slowest rank (a collective: every rank calls it)."""
    everyone = [None] * world
    dist.all_gather_object(everyone, t)
    return {k: max(e[k] for e in everyone) for k in t}


def time_lines(times: dict[str, float], width: int) -> list[str]:
    """One line per step: milliseconds and the ratio to ``analyze``."""
    return [f"{k:{width}s} {v * 1e3:9.1f} ms  ({v / times['analyze']:.2f}x analyze)" for k, v in times.items()]


def run(rank: int, world: int, port: int, n: int, repeat: int, out: str) -> None:
    with process_group(rank, world, port):
        sd = state_dict(n, world, rank)
        t = {}
        t["describe"], (desc, facts) = timed(lambda: describe(sd), repeat)
        t["exchange"], (shared, per_rank, stats) = timed(lambda: exchange(desc, facts, None), repeat)
        t["build"], layout = timed(lambda: build_layout(shared, per_rank, "dict", stats), repeat)
        t["analyze"], _ = timed(lambda: tv.analyze(sd, group=True), repeat)
        gathered = [None] * world
        t["peer: all_gather_object"], _ = timed(lambda: dist.all_gather_object(gathered, desc), repeat)
        t["peer: local analyze"], _ = timed(lambda: tv.analyze(sd), repeat)
        times = slowest(t, world)
        if rank == 0:
            nbytes = len(pickle.dumps(desc, protocol=pickle.HIGHEST_PROTOCOL))
            report = [f"== {world} ranks, {n:,} DTensors, {len(layout):,} views in the layout"]
            report.append(f"description: {nbytes:,} bytes ({nbytes / n:.0f} per parameter)")
            report += time_lines(times, 26)
            with open(out, "w") as f:
                f.write("\n".join(report) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    run_worlds(run, args.worlds, args.n, args.repeat)


def run_worlds(run, worlds: list[int], *args) -> None:
    """Spawn ``run(rank, world, port, *args, out)`` on each world size; print rank 0's report."""
    for world in worlds:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.txt")
            mp.spawn(run, args=(world, free_port(), *args, out), nprocs=world)
            with open(out) as f:
                print(f.read(), end="")


if __name__ == "__main__":
    main()
