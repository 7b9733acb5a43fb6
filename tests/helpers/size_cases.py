"""Checkpoints whose size needs explaining (tests/savecheck/test_why_size.py), built the same way in the
test and in tests/helpers/size_fix_runner.py's subprocess."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _tied_model() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Embedding(50, 8), nn.LayerNorm(8), nn.Linear(8, 50))
    m[2].weight = m[0].weight
    return m


def training() -> dict[str, Any]:
    """Model, Adam, an EMA copy and a 3-row slice of a 1000-row tensor."""
    m = _tied_model()
    opt = torch.optim.Adam(m.named_parameters())
    m(torch.tensor([1, 2, 3])).square().sum().backward()
    opt.step()
    big = torch.randn(1000, 10)
    return {
        "model": m.state_dict(),
        "optimizer": opt.state_dict(),
        "ema": {k: v.clone() for k, v in m.state_dict().items()},
        "extra": {"piece": big[:3]},
        "epoch": 3,
    }


def bf16_masters() -> dict[str, Any]:
    """bf16 weights with fp32 master copies beside them, and SGD momentum."""
    m = _tied_model().to(torch.bfloat16)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(torch.tensor([1, 2])).float().square().sum().backward()
    opt.step()
    return {
        "model": m.state_dict(),
        "master_params": {k: v.float() for k, v in m.state_dict().items()},
        "optimizer": opt.state_dict(),
    }


def two_slices() -> dict[str, Any]:
    """Two rows of one 64 KiB tensor, saved as if they were small."""
    big = torch.arange(16384, dtype=torch.float32).reshape(128, 128)
    return {"a": big[2], "b": big[100:102]}


def fused_qkv() -> dict[str, Any]:
    """q, k, v as views of one fused weight that they cover together: nothing is wasted."""
    w = torch.randn(12, 4)
    return {"q": w[:4], "k": w[4:8], "v": w[8:]}


CASES = {"training": training, "bf16_masters": bf16_masters, "two_slices": two_slices, "fused_qkv": fused_qkv}
