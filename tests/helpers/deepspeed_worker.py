"""Spawned by tests/sources/test_deepspeed_zero.py: real DeepSpeed ZeRO checkpoints, trained on CPU (gloo).

``python tests/helpers/deepspeed_worker.py OUT WORLD`` trains a tiny model two steps with DeepSpeed's
CPU accelerator on WORLD gloo ranks, for each scenario (ZeRO stage, bf16 or fp32), calls
``engine.save_checkpoint(OUT/<scenario>, tag="global_step2")`` and writes DeepSpeed's own view
of the same state beside it (rank 0):

- ``OUT/<scenario>/reference.pt``: ``{param: {"fp32": ..., "exp_avg": ..., "exp_avg_sq": ...}}``
  from ``deepspeed.utils.safe_get_full_fp32_param`` / ``safe_get_full_optimizer_state`` (the
  engine's live, gathered state);
- ``OUT/<scenario>/zero_to_fp32.pt``: ``get_fp32_state_dict_from_zero_checkpoint`` on the saved folder.

The shared-memory allreduce op DeepSpeed's CPU backend would JIT-compile (C++) is marked
unavailable, so gloo does the collectives and nothing is built.
"""

from __future__ import annotations

import os
import sys

os.environ["DS_ACCELERATOR"] = "cpu"

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

from tests.helpers import free_port  # noqa: E402

#: name: (ZeRO stage, bf16)
SCENARIOS = {"zero1_bf16": (1, True), "zero2_fp32": (2, False), "zero3_bf16": (3, True)}


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 4), nn.Linear(4, 3))


def scenario(out: str, stage: int, bf16: bool, rank: int) -> None:
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    m = model()
    cfg = {
        "train_micro_batch_size_per_gpu": 2,
        "bf16": {"enabled": bf16},
        "zero_optimization": {"stage": stage},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}},
    }
    engine, _, _, _ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
    torch.manual_seed(1 + rank)
    for _ in range(2):
        x = torch.randn(2, 6, dtype=torch.bfloat16 if bf16 else torch.float32)
        engine.backward(engine(x).float().square().sum())
        engine.step()
    engine.save_checkpoint(out, tag="global_step2")
    ref = {}
    for name, p in engine.module.named_parameters():  # collectives: every rank calls them
        ref[name] = {"fp32": safe_get_full_fp32_param(p)}
        for key in ("exp_avg", "exp_avg_sq"):
            ref[name][key] = safe_get_full_optimizer_state(p, key)
    torch.distributed.barrier()
    if rank == 0:
        torch.save(ref, os.path.join(out, "reference.pt"))
        fp32 = get_fp32_state_dict_from_zero_checkpoint(out, tag="global_step2")
        torch.save(dict(fp32), os.path.join(out, "zero_to_fp32.pt"))
    torch.distributed.barrier()


def run(rank: int, world: int, out: str, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_SIZE=str(world),
    )
    import deepspeed
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # no JIT C++ build; gloo allreduces
    deepspeed.init_distributed(dist_backend="gloo")
    try:
        for name, (stage, bf16) in SCENARIOS.items():
            scenario(os.path.join(out, name), stage, bf16, rank)
    finally:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    out, world = sys.argv[1], int(sys.argv[2])
    if world == 1:
        run(0, 1, out, free_port())
    else:
        mp.spawn(run, args=(world, out, free_port()), nprocs=world, join=True)
