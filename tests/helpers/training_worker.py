"""Spawned by tests/sources/test_training.py: optimizer state that lives on several ranks (gloo, CPU).

``python tests/helpers/training_worker.py OUT`` runs 2 ranks. Each rank trains two steps with
``ZeroRedundancyOptimizer`` over Adam (parameters as bucket views and not) and with FSDP2 +
Adam, calls ``tv.analyze(model, optimizer=opt)``, checks every optimizer state view against the
tensor it must be (the local optimizer's own ``param_groups`` order, the DTensor's local shard),
and writes ``OUT/<scenario>.rank<R>.json``: ``{"failures": [...], "names": [...], "facts": {...}}``.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from tests.helpers import free_port


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 4), nn.Linear(4, 3))


def first_names(m: nn.Module) -> dict[int, str]:
    out: dict[int, str] = {}
    for n, p in m.named_parameters(remove_duplicate=False):
        out.setdefault(id(p), n)
    return out


def check(layout, name: str, t: torch.Tensor, failures: list[str]) -> None:
    if name not in layout:
        failures.append(f"missing {name}")
        return
    v = layout[name]
    got = (v.shape, v.stride, v.offset, v.category)
    want = (tuple(t.shape), t.stride(), t.storage_offset(), v.category)
    if got != want or layout.storage(v.storage).nbytes != t.untyped_storage().nbytes():
        failures.append(f"{name}: {got} != {want}")


def train(m: nn.Module, opt) -> None:
    for _ in range(2):
        opt.zero_grad()
        m(torch.randn(4, 6)).square().sum().backward()
        opt.step()


def zero(bucket: bool, rank: int) -> dict:
    from torch.distributed.optim import ZeroRedundancyOptimizer

    import tensorviz as tv

    m = model()
    opt = ZeroRedundancyOptimizer(m.parameters(), optimizer_class=torch.optim.Adam, parameters_as_bucket_view=bucket)
    train(m, opt)
    layout = tv.analyze(m, optimizer=opt)
    failures: list[str] = []
    names = first_names(m)
    local = opt.optim  # this rank's partition: its own param_groups, in the order it numbers them
    want = [
        (f"optimizer.{names[id(p)]}.{k}", t)
        for g in local.param_groups
        for p in g["params"]
        for k, t in local.state[p].items()
    ]
    got = [v.name for v in layout.views if v.category == "optimizer"]
    if got != [n for n, _ in want]:
        failures.append(f"state names {got} != {[n for n, _ in want]}")
    for n, t in want:
        check(layout, n, t, failures)
    weights = [n for n, _ in m.named_parameters()]
    storages = {layout[n].storage for n in weights}
    return {
        "failures": failures,
        "names": got,
        "facts": {
            "notes": list(layout.metadata["training"]["notes"]),
            "wrapper": layout.metadata["training"]["wrapper"],
            "weight_storages": len(storages),
            "local_params": [names[id(p)] for g in local.param_groups for p in g["params"]],
        },
    }


def fsdp(rank: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import tensorviz as tv

    m = model()
    fully_shard(m, mesh=init_device_mesh("cpu", (2,)))
    opt = torch.optim.Adam(m.parameters())
    train(m, opt)
    layout = tv.analyze(m, optimizer=opt)
    failures: list[str] = []
    names = first_names(m)
    want = [
        (f"optimizer.{names[id(p)]}.{k}", t)
        for g in opt.param_groups
        for p in g["params"]
        for k, t in opt.state[p].items()
    ]
    for n, t in want:
        local = t.to_local() if hasattr(t, "to_local") else t
        check(layout, n, local, failures)
        if hasattr(t, "to_local") and "DTensor" not in layout[n].note:
            failures.append(f"{n}: no DTensor note ({layout[n].note!r})")
    for n, p in m.named_parameters():
        check(layout, f"{n}.grad", p.grad.to_local(), failures)
    return {
        "failures": failures,
        "names": [n for n, _ in want],
        "facts": {"exp_avg_shape": list(layout["optimizer.0.weight.exp_avg"].shape)},
    }


def run(rank: int, world: int, out: str, port: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for name, make in (
            ("zero", lambda: zero(False, rank)),
            ("zero_bucket", lambda: zero(True, rank)),
            ("fsdp", lambda: fsdp(rank)),
        ):
            with open(os.path.join(out, f"{name}.rank{rank}.json"), "w") as f:
                json.dump(make(), f)
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(2, sys.argv[1], free_port()), nprocs=2, join=True)
