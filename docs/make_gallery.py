"""Regenerate docs/gallery/*.png: the pictures the README shows.

Run: ``.venv/bin/python docs/make_gallery.py [OUT_DIR]``. Everything is built here from tiny
configs, meta tensors or a small file written to a temporary folder; nothing downloads.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

import tensorviz as tv
from tensorviz.render.mpl import png_bytes, to_png

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from bench_render import many_storages  # noqa: E402  (the same 5,000 storages the bench times)
from bench_scale import flat_buffers, many_small  # noqa: E402  (the shapes of the scale curve)

HERE = Path(__file__).resolve().parent


def seed_model() -> dict[str, torch.Tensor]:
    a = torch.rand(8, 10, 50)
    return {"a": a, "b": a[2:4], "c": a[4:6]}


class FusedQKVTied(torch.nn.Module):
    """A fused qkv projection whose q and v weights are views of its rows, and a tied embedding."""

    def __init__(self, vocab: int = 96, dim: int = 32):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.q = torch.nn.Linear(dim, dim, bias=False)
        self.v = torch.nn.Linear(dim, dim, bias=False)
        self.q.weight = torch.nn.Parameter(self.qkv.weight[:dim])
        self.v.weight = torch.nn.Parameter(self.qkv.weight[2 * dim :])
        self.ln = torch.nn.LayerNorm(dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight


def tied_gpt2() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=512,
        n_positions=64,
        n_embd=64,
        n_layer=2,
        n_head=2,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
    )
    with torch.device("meta"):
        return GPT2LMHeadModel(cfg)


def flat_buffer(n: int = 5000) -> dict[str, torch.Tensor]:
    """A flat parameter buffer (as FSDP / DeepSpeed keep them) viewed as n named parameters,
    with a padded tail no parameter reads."""
    sizes = [(64 * (1 + i % 7)) for i in range(n)]
    flat = torch.empty(sum(sizes) + 4096, device="meta")
    views, at = {}, 0
    for i, size in enumerate(sizes):
        layer, kind = divmod(i, 4)
        name = f"layers.{layer}.{('q_proj', 'k_proj', 'v_proj', 'o_proj')[kind]}.weight"
        views[name] = flat[at : at + size].view(-1, 64)
        at += size
    return views


def interleaved_qkv(heads: int = 4, head_dim: int = 8, dim: int = 16) -> dict[str, torch.Tensor]:
    """A fused qkv weight laid out head by head ([q0 k0 v0 q1 k1 v1 ...], as GPT-NeoX stores
    it): q, k and v are strided views whose spans overlap although no byte is shared."""
    qkv = torch.zeros(heads * 3 * head_dim, dim)
    per_head = qkv.view(heads, 3, head_dim, dim)
    return {
        "qkv.weight": qkv,
        "q": per_head[:, 0],
        "k": per_head[:, 1],
        "v": per_head[:, 2],
        "q.head0": per_head[0, 0],
        "v.head3": per_head[3, 2],
    }


def safetensors_file(folder: Path) -> Path:
    """A small model saved with safetensors: its header, then the tensors in file order."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    tensors = {
        "embed.weight": torch.randn(16, 16),
        "norm.weight": torch.ones(16),
        "mlp.up.weight": torch.randn(16, 16),
        "mlp.up.bias": torch.zeros(16),
    }
    path = folder / "small_model.safetensors"
    save_file(tensors, str(path))
    return path


def write(out: Path, name: str, png: bytes) -> None:
    path = out / name
    path.write_bytes(png)
    print(f"wrote {path} ({len(png) / 1024:.0f} KiB)")


def explain_png(*tensors: torch.Tensor, names: list[str]) -> bytes:
    return png_bytes(tv.explain(*tensors, names=names))


def diagrams(out: Path) -> None:
    write(out, "seed.png", to_png(tv.diagram(seed_model())))
    write(out, "fused_qkv.png", to_png(tv.diagram(FusedQKVTied())))
    gpt2 = tv.analyze(tied_gpt2())
    write(out, "gpt2_tied.png", to_png(tv.diagram(gpt2, by="span")))
    write(out, "gpt2_tied_storage.png", to_png(tv.diagram(gpt2)))
    flat = tv.analyze(flat_buffer())
    write(out, "flat_5000_views.png", to_png(tv.diagram(flat, by="overlap")))
    write(out, "flat_5000_views_zoom.png", to_png(tv.diagram(flat, by="overlap", byte_range=(0, 16384))))
    write(out, "storages_5000.png", to_png(tv.diagram(many_storages())))
    overviews(out)
    write(out, "overlap_interleaved.png", to_png(tv.diagram(interleaved_qkv(), by="overlap")))
    with tempfile.TemporaryDirectory() as tmp:
        write(out, "safetensors_file.png", to_png(tv.diagram(tv.analyze(safetensors_file(Path(tmp))))))


def overviews(out: Path) -> None:
    """Pictures at the scale of large checkpoints: lanes for the first storages, and under
    them the overview of every storage (cells sized by bytes, coloured by sharing)."""
    big = tv.analyze(many_small(100_000))
    write(out, "overview_100k.png", to_png(tv.diagram(big)))
    write(out, "overview_100k_narrow.png", to_png(tv.diagram(big, max_lanes=12), width=6))
    write(out, "overview_flat_64k.png", to_png(tv.diagram(flat_buffers(64_000), max_lanes=16)))


def panels(out: Path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    write(out, "explain_transpose.png", explain_png(x, x.t(), x[:, ::2], names=["x", "x.t()", "x[:, ::2]"]))
    b = torch.arange(3.0)
    write(out, "explain_expand.png", explain_png(b, b.expand(4, 3), names=["b", "b.expand(4, 3)"]))
    s = torch.arange(10.0)
    write(
        out,
        "explain_as_strided.png",
        explain_png(s[1:], torch.as_strided(s, (4, 3), (2, 1), 1), names=["s[1:]", "s.as_strided((4, 3), (2, 1), 1)"]),
    )
    y = torch.arange(8.0).reshape(2, 4)  # mixed dtypes: cells are int16-sized, float32 elements span two
    write(
        out,
        "explain_view_dtype.png",
        explain_png(y, y.view(torch.int16), y[1], names=["y", "y.view(torch.int16)", "y[1]"]),
    )


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    diagrams(out)
    panels(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "gallery")
