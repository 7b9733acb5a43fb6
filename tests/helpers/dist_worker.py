"""Spawned by tests/distributed/test_distributed.py: real FSDP2, tensor parallelism and DTensors on CPU (gloo).

``python tests/helpers/dist_worker.py WORLD OUT`` runs WORLD processes. Every rank builds the same models
with every parameter set to ``arange(numel)`` before sharding, so a value *is* its flat index in
the global tensor: ``to_local()`` then tells exactly which global elements the rank holds, and
``full_tensor()`` must give back ``arange``. Each rank calls ``tv.analyze(obj, group=True)``
and checks every one of *its own* shard views against that truth; it writes
``OUT/<scenario>.rank<R>.json`` (the layout's JSON and its failures), and the ranks save each
model with ``dcp.save`` to ``OUT/<scenario>_dcp`` for tests/sources/test_dcp.py.
"""

from __future__ import annotations

import io
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from tests.helpers import free_port

VOCAB, DIM, HIDDEN = 11, 6, 10  # 11 and 10 rows do not divide by 2 or 4: uneven shards


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(h)).chunk(3, dim=-1)
        h = h + self.proj(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)
        return h + self.down(torch.relu(self.up(h)))


class TinyLM(nn.Module):
    """Embedding tied to the output head, two blocks, a plain buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("positions", torch.arange(5, dtype=torch.float32))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


def arange_params(m: nn.Module) -> None:
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.arange(p.numel(), dtype=p.dtype).view(p.shape))


def view_indices(v: dict) -> np.ndarray:
    """Flat global indices a layout view (JSON) addresses, in its own row-major order."""
    idx = np.array(v["offset"], dtype=np.int64)
    for n, s in zip(v["shape"], v["stride"]):
        idx = idx[..., None] + np.arange(n, dtype=np.int64) * s
    return idx.reshape(-1)


def check(obj: nn.Module | dict, doc: dict, rank: int) -> tuple[int, list[str]]:
    """Every DTensor and plain tensor of ``obj`` against this rank's views in ``doc``."""
    from torch.distributed.tensor import DTensor

    views = {v["name"]: v for v in doc["views"]}
    items = obj.state_dict(keep_vars=True).items() if isinstance(obj, nn.Module) else obj.items()
    n, bad = 0, []
    for name, t in items:
        if isinstance(t, DTensor):
            full = t.full_tensor()
            local = t.to_local()
            partial = any(p.is_partial() for p in t.placements)
        else:
            full = local = t
            partial = False
        if not partial and not torch.equal(full.reshape(-1), torch.arange(full.numel(), dtype=full.dtype)):
            bad.append(f"{name}: full_tensor() is not arange (test set-up broken)")
        pieces = sorted(k for k in views if k == f"{name}@rank{rank}" or k.startswith(f"{name}@rank{rank}#"))
        if not pieces:
            bad.append(f"{name}: no view for rank {rank}")
            continue
        got = np.concatenate([view_indices(views[k]) for k in pieces])
        if partial:  # a partial value has the global shape: the view must be the whole tensor
            want = np.arange(full.numel())
        else:
            want = local.detach().reshape(-1).to(torch.int64).numpy()
        if len(pieces) > 1:
            got, want = np.sort(got), np.sort(want)
        if not np.array_equal(got, want):
            bad.append(f"{name}@rank{rank}: view addresses {got.tolist()}, to_local() holds {want.tolist()}")
        storage = doc["storages"][views[pieces[0]]["storage_index"]]
        shape = "×".join(map(str, full.shape)) or "scalar"
        if storage["nbytes"] != full.numel() * full.element_size() or not storage["label"].endswith(f" {shape}"):
            bad.append(
                f"{name}: global tensor {storage['label']}, {storage['nbytes']} bytes vs full_tensor() [{shape}]"
            )
        n += 1
    return n, bad


def scenario(name: str, obj, out: str, rank: int, save: bool = True) -> None:
    import torch.distributed.checkpoint as dcp

    import tensorviz as tv
    from tensorviz.cli import layout_to_json
    from tensorviz.sources.distributed.collective import gather

    layout = tv.analyze(obj, group=True)
    doc = layout_to_json(layout)
    record = gather(obj)  # the same exchange again, kept as JSON (rebuilt by the test)
    if rank == 0:
        with open(os.path.join(out, f"{name}.exchange.json"), "w") as f:
            json.dump(record, f)
    n, bad = check(obj, doc, rank)
    with open(os.path.join(out, f"{name}.rank{rank}.json"), "w") as f:
        json.dump({"checked": n, "failures": bad, "layout": doc}, f)
    if save:
        dcp.save(
            obj.state_dict() if isinstance(obj, nn.Module) else obj, checkpoint_id=os.path.join(out, f"{name}_dcp")
        )
    dist.barrier()


def fsdp_model(world: int, **options) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    m = TinyLM()
    arange_params(m)
    for b in m.blocks:
        fully_shard(b, mesh=mesh, **options)
    fully_shard(m, mesh=mesh, **options)
    return m


def step(name: str, world: int, out: str, rank: int, reshard: bool | int) -> None:
    """A real training step with reshard_after_forward=reshard; the layout (and, unless True, also
    between forward and backward), and the truth: every parameter's storage bytes as the forward
    saw them (a forward pre-hook runs after FSDP2's all-gather) and after the step."""
    import tensorviz as tv
    from tensorviz.cli import layout_to_json
    from tensorviz.sources.distributed.collective import gather
    from tensorviz.sources.distributed.fsdp_units import fsdp_mid_step_state

    m = fsdp_model(world, reshard_after_forward=reshard)
    seen: dict[str, torch.Tensor] = {}
    during: dict[str, int] = {}

    def gathered(module: nn.Module, args) -> None:
        prefix = next(n for n, x in m.named_modules() if x is module)
        for n, p in module.named_parameters(remove_duplicate=False):
            if not hasattr(p, "placements"):  # gathered by this unit (the root sees sharded blocks)
                name = f"{prefix}.{n}" if prefix else n
                seen.setdefault(name, p)
                during.setdefault(name, p.untyped_storage().nbytes())

    for module in (*m.blocks, m):
        module.register_forward_pre_hook(gathered)
    loss = m(torch.tensor([[1, 2, 3, 4, 5]])).sum()
    truth = {"during_forward": during}
    if reshard is not True:  # analysed mid-step, globally and on this rank alone: nothing may change
        before = _states(m)
        truth["mid_step"] = layout_to_json(tv.analyze(m, group=True))
        truth["local_mid_step"] = layout_to_json(tv.analyze(m))
        report = tv.save_check(m)
        truth["save_check_mid_step"] = {"notes": list(report.notes), "verdicts": [[v.saver, v.outcome] for v in report]}
        truth["save_check_torch_save_nbytes"] = report["torch.save"].file_nbytes
        buf = io.BytesIO()  # the real save of what the check judged (state_dict() would reshard)
        torch.save(fsdp_mid_step_state(m), buf)
        truth["torch_save_nbytes"] = buf.getbuffer().nbytes
        truth["states_kept"] = _states(m) == before
        truth["still_gathered"] = not hasattr(m.embed.weight, "placements")
    loss.backward()
    truth["after_step"] = {n: p.untyped_storage().nbytes() for n, p in seen.items()}
    truth["local"] = {n: p.to_local().untyped_storage().nbytes() for n, p in m.named_parameters()}
    doc = layout_to_json(tv.analyze(m, group=True))
    with open(os.path.join(out, f"{name}.rank{rank}.json"), "w") as f:
        json.dump({"truth": truth, "layout": doc}, f)
    record = gather(m)  # the same exchange again, kept as JSON (the test rebuilds the layout)
    if rank == 0:
        with open(os.path.join(out, f"{name}.exchange.json"), "w") as f:
            json.dump(record, f)
    dist.barrier()


def _states(m: nn.Module) -> list:
    """Each parameter object and its storage bytes, as the modules hold them now."""
    return [(id(p), p.untyped_storage().nbytes()) for p in m.parameters()]


def hsdp_model() -> nn.Module:
    """HSDP: FSDP2 on a 2-D mesh shards over "shard" and replicates over "replicate"."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    m = TinyLM()
    arange_params(m)
    fully_shard(m, mesh=mesh)
    return m


def tp_model() -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
    arange_params(m)
    parallelize_module(m, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(m, mesh=mesh["dp"])
    return m


def placements(world: int) -> dict:
    """Hand-made DTensors: uneven, empty, replicated, partial and interleaved shards."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard

    mesh = init_device_mesh("cpu", (world,))

    def ar(*shape: int) -> torch.Tensor:
        return torch.arange(int(np.prod(shape)), dtype=torch.float32).view(shape)

    out = {
        "rows7": distribute_tensor(ar(7, 3), mesh, [Shard(0)]),
        "cols3": distribute_tensor(ar(2, 3), mesh, [Shard(1)]),
        "repl": distribute_tensor(ar(4, 2), mesh, [Replicate()]),
        "strided": distribute_tensor(ar(8 * world, 2), mesh, [_StridedShard(0, split_factor=2)]),
        "partial": DTensor.from_local(ar(3, 2) / world, mesh, [Partial()]),
    }
    if world == 4:
        m2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))
        out["grid"] = distribute_tensor(ar(5, 6), m2, [Shard(0), Shard(1)])
        out["hsdp"] = distribute_tensor(ar(9, 2), m2, [Replicate(), Shard(0)])
        out["strided2d"] = distribute_tensor(ar(4, 12), m2, [_StridedShard(1, split_factor=2), Shard(1)])
    return out


def subgroup(out: str, rank: int) -> None:
    """tv.analyze(..., group=pg) over ranks 1 and 3 only: ranks 0 and 2 take no part."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    import tensorviz as tv
    from tensorviz.cli import layout_to_json

    dp = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))["dp"]  # [0, 2] or [1, 3]
    group = dist.new_group([1, 3])  # every rank creates it; only its members use it
    if rank in (1, 3):
        x = distribute_tensor(torch.arange(10.0).view(5, 2), dp, [Shard(0)])
        layout = tv.analyze({"buf": torch.zeros(3), "x": x}, group=group)
        with open(os.path.join(out, f"subgroup.rank{rank}.json"), "w") as f:
            json.dump(layout_to_json(layout), f)
    dist.barrier()


def run(rank: int, world: int, out: str, port: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        scenario("fsdp", fsdp_model(world), out, rank)
        scenario("placements", placements(world), out, rank, save=False)
        step("step_reshard", world, out, rank, True)
        step("step_keep", world, out, rank, False)
        if world == 4:
            scenario("tp", tp_model(), out, rank)
            scenario("hsdp", hsdp_model(), out, rank)
            step("step_partial", world, out, rank, 2)  # kept as a 1/2 shard after forward
            subgroup(out, rank)
        open(os.path.join(out, f"done.rank{rank}"), "w").close()  # all of this rank's results are written
        dist.barrier()  # no rank starts tearing gloo down while another still talks to it
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    world, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(world, out, free_port()), nprocs=world)
