"""A 4-rank FSDP2 x tensor-parallel run on CPU (gloo) for notebook 05: ``python docs/sharded_run.py OUT``.

Four processes on a 2 x 2 mesh (``dp`` x ``tp``): a tiny language model whose embedding is tied to
its output head; the MLPs are tensor parallel (``ColwiseParallel`` up, ``RowwiseParallel`` down)
and everything is sharded with FSDP2 over ``dp``. Every rank runs one training step (forward and
backward: FSDP2 all-gathers each unit, then frees it again) and calls
``tv.analyze(model, group=True)``; the ranks compare their layouts (a digest of each one's JSON);
rank 0 writes ``OUT/exchange.json`` (the exchanged record, which rebuilds the layout anywhere)
and ``OUT/summary.json``; all ranks save the model with ``dcp.save`` to ``OUT/dcp``.
About 10 s on 2 cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(torch.relu(self.up(self.norm(h))))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 10, dim: int = 8, hidden: int = 12) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, hidden), Block(dim, hidden)])
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def build(mesh) -> nn.Module:
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = TinyLM()
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def run(rank: int, world: int, out: str, port: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.device_mesh import init_device_mesh

        import tensorviz as tv
        from tensorviz.cli import layout_to_json
        from tensorviz.sources.distributed.collective import gather

        model = build(init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")))
        model(torch.tensor([[1, 2, 3, 4]])).sum().backward()  # one step: units gathered, then freed
        layout = tv.analyze(model, group=True)
        digest = hashlib.sha256(json.dumps(layout_to_json(layout), sort_keys=True).encode()).hexdigest()
        digests = [None] * world
        dist.all_gather_object(digests, digest)
        record = gather(model)
        if rank == 0:
            with open(os.path.join(out, "exchange.json"), "w") as f:
                json.dump(record, f)
            summary = {"world_size": world, "ranks_agree": len(set(digests)) == 1, "views": len(layout)}
            with open(os.path.join(out, "summary.json"), "w") as f:
                json.dump(summary, f)
        dcp.save(model.state_dict(), checkpoint_id=os.path.join(out, "dcp"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(4, out, free_port()), nprocs=4)
