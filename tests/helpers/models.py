"""Small models and tensor sets shared by the tests (the issues' seed cases). Nothing downloads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


def seed_tensors() -> dict[str, torch.Tensor]:
    """The seed case: a = rand(8, 10, 50); b = a[2:4]; c = a[4:6]."""
    a = torch.rand(8, 10, 50)
    return {"a": a, "b": a[2:4], "c": a[4:6]}


class FusedQKV(nn.Module):
    """qkv = Linear(20, 30) whose q and v weights are Parameters viewing qkv.weight's rows."""

    def __init__(self, device: str | torch.device | None = None):
        super().__init__()
        self.qkv = nn.Linear(20, 30, device=device)
        self.q = nn.Linear(20, 10, device=device)
        self.v = nn.Linear(20, 10, device=device)
        self.q.weight = nn.Parameter(self.qkv.weight[:10])
        self.v.weight = nn.Parameter(self.qkv.weight[10:20])


class QVOnly(nn.Module):
    """Only q and v are registered; both view rows of one hidden (unregistered) storage."""

    def __init__(self):
        super().__init__()
        w = torch.randn(30, 20)
        self.q = nn.Linear(20, 10)
        self.v = nn.Linear(20, 10)
        self.q.weight = nn.Parameter(w[:10])
        self.v.weight = nn.Parameter(w[20:30])


class TiedLM(nn.Module):
    """Embedding and lm_head sharing one Parameter (a GPT-2-style tie)."""

    def __init__(self, vocab: int = 50, dim: int = 16, device: str | torch.device | None = None):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim, device=device)
        self.ln = nn.LayerNorm(dim, device=device)
        self.lm_head = nn.Linear(dim, vocab, bias=False, device=device)
        self.lm_head.weight = self.wte.weight


class MetaTiedPlusTwins(nn.Module):
    """One tied pair and two untied weights of identical shape (must not be grouped)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 8)
        self.head = nn.Linear(8, 40, bias=False)
        self.head.weight = self.emb.weight
        self.a = nn.Linear(8, 8, bias=False)
        self.b = nn.Linear(8, 8, bias=False)


def meta_model() -> nn.Module:
    with torch.device("meta"):
        return MetaTiedPlusTwins()


def tiny_gpt2(tied: bool = True, device: str | None = None):
    """A tiny transformers GPT-2 built from a config (no download)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=8, n_layer=2, n_head=2, tie_word_embeddings=tied)
    if device == "meta":
        with torch.device("meta"):
            return GPT2LMHeadModel(cfg)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


@contextmanager
def fake_sharded_tensor() -> Iterator[torch.Tensor]:
    """An 8x2 DTensor split in two rows-wise, seen from rank 0 of a fake two-rank group (no other
    process); the group is destroyed on exit. Skips the test where torch.distributed is absent."""
    import pytest

    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this build")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        mesh = init_device_mesh("cpu", (2,))
        yield distribute_tensor(torch.arange(16.0).reshape(8, 2), mesh, [Shard(0)])
    finally:
        dist.destroy_process_group()


#: The Llama-3-70B-sized config's keywords: the one definition (:func:`llama_70b_on_meta`, the
#: benchmarks and ``docs/make_tree_gallery.py`` through ``bench/_models.py``, and the cells the
#: browser tests type: :data:`LLAMA_70B_CONFIG`).
LLAMA_70B = {
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}
#: The same as the keywords a notebook cell passes to ``LlamaConfig(...)``.
LLAMA_70B_CONFIG = ", ".join(f"{k}={v}" for k, v in LLAMA_70B.items())


def llama_70b_on_meta(dtype: torch.dtype = torch.bfloat16) -> nn.Module:
    """A Llama-3-70B-sized ``LlamaForCausalLM`` on ``meta`` (no memory, nothing downloaded), in ``dtype``;
    skips the test where transformers is not installed (config: :data:`LLAMA_70B`)."""
    import pytest

    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(**LLAMA_70B)
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(cfg).to(dtype)
