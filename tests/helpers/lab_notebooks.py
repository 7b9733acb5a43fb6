"""The notebooks the real-browser tests and the explorer bench open (cell sources as strings)."""

from __future__ import annotations

from tests.helpers.models import LLAMA_70B_CONFIG

__all__ = ["TINY", "BIG", "LLAMA", "FREED", "SEED", "GPT2", "LLAMA_TIED", "EXPLAIN"]

TINY = '''\
import torch
from torch import nn
import tensorviz as tv


class TinyLM(nn.Module):
    """A tied embedding/lm_head pair and q, k, v weights that view one fused qkv weight."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(64, 16)
        self.qkv = nn.Linear(16, 48)
        self.q, self.k, self.v = (nn.Linear(16, 16) for _ in range(3))
        for i, lin in enumerate((self.q, self.k, self.v)):
            lin.weight = nn.Parameter(self.qkv.weight[16 * i:16 * (i + 1)])
        self.ln = nn.LayerNorm(16)
        self.lm_head = nn.Linear(16, 64, bias=False)
        self.lm_head.weight = self.wte.weight


torch.manual_seed(0)
model = TinyLM()
ex = tv.explore(model)
ex'''

BIG = """\
import torch
import tensorviz as tv

flat = torch.zeros(4 * 100_000)
views = {"flat": flat, **{f"v{i}": flat[4 * i : 4 * i + 4] for i in range(100_000)}}
big = tv.explore(views, snapshot=False)
big"""

LLAMA = """\
import torch
import tensorviz as tv
from transformers import LlamaConfig, LlamaForCausalLM

cfg = LlamaConfig({LLAMA_70B_CONFIG})
with torch.device("meta"):
    llama = LlamaForCausalLM(cfg)
ex70 = tv.explore(llama, snapshot=False)
ex70""".replace("{LLAMA_70B_CONFIG}", LLAMA_70B_CONFIG)

FREED = """\
import torch
import tensorviz as tv


class Tensors(dict):
    '''A dict whose repr reads no tensor data (a freed tensor's values cannot be printed).'''

    def __repr__(self):
        return f"Tensors({list(self)})"


w = torch.zeros(64, 16)  # 4 KiB, then freed as FSDP does between steps: its views point past the end
v = w[8:40]
w.untyped_storage().resize_(0)
exf = tv.explore(Tensors(w=w, v=v, other=torch.ones(8)), snapshot=False)
exf"""

SEED = """\
import torch
import tensorviz as tv

a = torch.rand(8, 10, 50)
ex = tv.explore({"a": a, "b": a[2:4], "c": a[4:6]}, snapshot=False)
ex"""

GPT2 = """\
import torch
import tensorviz as tv
from transformers import GPT2Config, GPT2LMHeadModel

cfg = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=2, tie_word_embeddings=True,
                 bos_token_id=0, eos_token_id=0)
with torch.device("meta"):
    gpt2 = GPT2LMHeadModel(cfg)
ex = tv.explore(gpt2, snapshot=False)
ex"""

LLAMA_TIED = """\
import torch
import tensorviz as tv
from transformers import LlamaConfig, LlamaForCausalLM

cfg = LlamaConfig({LLAMA_70B_CONFIG}, tie_word_embeddings=True)
with torch.device("meta"):
    llama = LlamaForCausalLM(cfg)
ex70 = tv.explore(llama, snapshot=False, all_storages=True, expand_simple=True)
ex70""".replace("{LLAMA_70B_CONFIG}", LLAMA_70B_CONFIG)

EXPLAIN = """\
import torch
import tensorviz as tv

x = torch.arange(14.0)[2:].view(3, 4)
ex = tv.explore({"x": x, "x.t()": x.t(), "x[:, ::2]": x[:, ::2]}, snapshot=False)
ex"""
