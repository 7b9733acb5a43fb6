"""Save a DCP checkpoint from 2 ranks, or load it into N ranks, predicting each rank's load first.

``python tests/helpers/dcp_load_worker.py save 2 OUT`` writes ``OUT/ckpt`` from a state dict whose ``w``
and ``b`` are DTensors sharded by rows over 2 ranks (values ``arange``) and ``scale`` a plain
tensor. ``python tests/helpers/dcp_load_worker.py load 4 OUT`` builds the same names sharded over 4
ranks (``w`` by columns, so every rank reads a piece of each saved chunk; ``b`` in bfloat16, a
cast), calls ``tv.load_check(..., loader="dcp.load")`` on every rank (a collective), then the
real ``dcp.load`` through a reader that records what it is asked to read, and writes
``OUT/load<N>.rank<R>.json``: the prediction, the real reads, and whether every local element
now holds the saved value (cast).
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import tensorviz as tv
from tests.helpers import free_port


def full() -> dict[str, torch.Tensor]:
    return {
        "w": torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6),
        "b": torch.arange(8, dtype=torch.float32) / 8,
        "scale": torch.tensor([3.0, 5.0]),
    }


class Recording(FileSystemReader):
    """The real reader; it also notes each saved chunk it is asked to read."""

    def read_data(self, plan, planner):  # noqa: ANN001, ANN201
        self.seen = getattr(self, "seen", [])
        for item in plan.items:
            info = self.storage_data[item.storage_index]
            self.seen.append(
                [
                    item.dest_index.fqn,
                    list(item.dest_offsets),
                    list(item.lengths),
                    str(info.relative_path),
                    info.offset,
                    info.length,
                ]
            )
        return super().read_data(plan, planner)


def save(rank: int, world: int, out: str) -> None:
    mesh = init_device_mesh("cpu", (world,))
    values = full()
    sd = {
        "w": distribute_tensor(values["w"], mesh, [Shard(0)]),
        "b": distribute_tensor(values["b"], mesh, [Shard(0)]),
        "scale": values["scale"],
    }
    dcp.save(sd, checkpoint_id=os.path.join(out, "ckpt"))


def load(rank: int, world: int, out: str) -> None:
    mesh = init_device_mesh("cpu", (world,))
    values = full()
    nan = {k: torch.full_like(v, float("nan")) for k, v in values.items()}
    sd = {
        "w": distribute_tensor(nan["w"], mesh, [Shard(1)]) if world > 1 else nan["w"],
        "b": distribute_tensor(nan["b"].bfloat16(), mesh, [Shard(0)]),
        "scale": distribute_tensor(nan["scale"], mesh, [Replicate()]),
    }
    folder = os.path.join(out, "ckpt")
    r = tv.load_check(sd, folder, loader="dcp.load")
    reader = Recording(folder)
    dcp.load(sd, storage_reader=reader)
    ok = {}
    for k, t in sd.items():
        got = t.full_tensor() if hasattr(t, "full_tensor") else t
        ok[k] = bool(torch.equal(got, values[k].to(got.dtype)))
    predicted = [[c.name, list(c.dest_offsets), list(c.lengths), c.file, c.offset, c.length] for c in r.reads]
    doc = {
        "raises": r.raises,
        "cast": [list(c) for c in r.cast],
        "predicted": sorted(predicted),
        "real": sorted(reader.seen),
        "files_read": r.files_read,
        "ok": ok,
    }
    with open(os.path.join(out, f"load{world}.rank{rank}.json"), "w") as f:
        json.dump(doc, f)
    reports: list = [None] * world
    dist.all_gather_object(reports, r)  # the load plan: every rank's report, drawn by rank 0
    if rank == 0:
        write_plan(reports, os.path.join(out, f"plan{world}"))


def write_plan(reports: list, out: str) -> None:
    """``out.json``: the load plan's rows, strips and readers' words as drawn; ``out.png``."""
    from tensorviz.loadcheck.plan import load_plan
    from tensorviz.render.mpl import drawn_rects, layer, png_bytes, texts

    p = load_plan(reports)
    fig = p.figure()
    art = layer(fig, "load-plan")
    doc = {
        "rows": [[r.rank, list(r.files), r.nbytes, r.chunks] for r in p.rows()],
        "reads": sorted([r.rank, r.fqn, r.file, r.offset, r.length] for r in p.plan.reads),
        "strips": drawn_rects(fig, "load-plan").round(6).tolist(),
        "strip_ranks": art.tensorviz_rank.tolist(),
        "strip_names": [list(fig.tensorviz_diagram.bars[i].names) for i in art.tensorviz_owner],
        "readers": texts(fig, "load-plan-readers"),
        "text": str(p),
        "html": p._repr_html_(),
    }
    with open(out + ".json", "w") as f:
        json.dump(doc, f)
    with open(out + ".png", "wb") as f:
        f.write(png_bytes(fig))


def run(rank: int, world: int, out: str, port: int, what: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        (save if what == "save" else load)(rank, world, out)
        open(os.path.join(out, f"done.{what}{world}.rank{rank}"), "w").close()  # this rank's results are written
        dist.barrier()  # no rank starts tearing gloo down while another still talks to it
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    what, world, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(world, out, free_port(), what), nprocs=world)
