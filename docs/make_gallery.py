"""Regenerate docs/gallery/*.png: the pictures the README shows.

Run: ``.venv/bin/python docs/make_gallery.py [OUT_DIR]``. Everything is built here from tiny
configs or meta tensors; nothing downloads.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import tensorviz as tv
from tensorviz.render.mpl import to_png

HERE = Path(__file__).resolve().parent


def seed_model() -> dict[str, torch.Tensor]:
    a = torch.rand(8, 10, 50)
    return {"a": a, "b": a[2:4], "c": a[4:6]}


def tied_gpt2() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=2, tie_word_embeddings=True)
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
        views[name] = flat[at: at + size].view(-1, 64)
        at += size
    return views


def write(out: Path, name: str, png: bytes) -> None:
    path = out / name
    path.write_bytes(png)
    print(f"wrote {path} ({len(png) / 1024:.0f} KiB)")


def explain_png(*tensors: torch.Tensor, names: list[str]) -> bytes:
    import io

    fig = tv.explain(*tensors, names=names)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write(out, "seed.png", to_png(tv.diagram(seed_model())))
    gpt2 = tv.analyze(tied_gpt2())
    write(out, "gpt2_tied.png", to_png(tv.diagram(gpt2, by="span")))
    write(out, "gpt2_tied_storage.png", to_png(tv.diagram(gpt2)))
    flat = tv.analyze(flat_buffer())
    write(out, "flat_5000_views.png", to_png(tv.diagram(flat, by="overlap")))
    write(out, "flat_5000_views_zoom.png", to_png(tv.diagram(flat, by="overlap", byte_range=(0, 16384))))
    x = torch.arange(12.0).reshape(3, 4)
    write(out, "explain_transpose.png", explain_png(x, x.t(), x[:, ::2], names=["x", "x.t()", "x[:, ::2]"]))
    b = torch.arange(3.0)
    write(out, "explain_expand.png", explain_png(b, b.expand(4, 3), names=["b", "b.expand(4, 3)"]))
    s = torch.arange(10.0)
    write(out, "explain_as_strided.png", explain_png(
        s[1:], torch.as_strided(s, (4, 3), (2, 1), 1), names=["s[1:]", "s.as_strided((4, 3), (2, 1), 1)"]))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "gallery")
