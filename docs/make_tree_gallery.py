"""Regenerate the model-map pictures of docs/gallery: the module tree and the memory view of a
70B-sized Llama on ``meta`` (no data, nothing downloads), and ``tv.explain`` on a 4096×4096 weight.

Run: ``.venv/bin/python docs/make_tree_gallery.py [OUT_DIR]``. The HTML pictures are screenshots
taken by headless Chromium (``make browser-deps`` installs it); without it only the HTML is written.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import tensorviz as tv
from tensorviz.explorer.tree import memory_html
from tensorviz.render.html.tree import tree_html
from tensorviz.render.mpl import png_bytes

HERE = Path(__file__).resolve().parent


def llama_70b() -> torch.nn.Module:
    """Llama-3-70B's shapes (80 layers, 8192 wide, grouped-query attention) on meta, bf16."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from _models import llama_70b_on_meta

    return llama_70b_on_meta(torch.bfloat16)


def tied_lm() -> torch.nn.Module:
    """A small LM whose head is tied to its embedding: the memory view hatches the tie."""
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=64, n_head=4, vocab_size=2000, n_positions=64))


def screenshot(html_text: str, out: Path, size: str) -> None:
    page = f'<html><body style="margin:8px;background:white">{html_text}</body></html>'
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "page.html"
        src.write_text(page, encoding="utf-8")
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if browser is None:
            out.with_suffix(".html").write_text(page, encoding="utf-8")
            print(f"no chromium: wrote {out.with_suffix('.html')} instead")
            return
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--screenshot={out}", f"--window-size={size}", src.as_uri()],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    print(f"wrote {out}")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tree = tv.analyze(llama_70b()).tree()
    screenshot(tree_html(tree, open_depth=3), out / "tree_llama70b.png", "1180,230")
    layer = tree.find("model.layers.0")
    memory = memory_html(tree.root.children[0], tree.total_nbytes) + "<br/>" + memory_html(layer, tree.total_nbytes)
    screenshot(memory, out / "memory_llama70b.png", "900,260")
    small = tv.analyze(tied_lm()).tree()
    screenshot(
        memory_html(small.find("transformer"), small.total_nbytes)
        + "<br/>"
        + memory_html(small.root, small.total_nbytes),
        out / "memory_tied.png",
        "900,250",
    )
    w = torch.empty(4096, 4096, device="meta")
    fig = tv.explain(w, w.t(), names=["w", "w.t()"])
    (out / "explain_corner.png").write_bytes(png_bytes(fig, dpi=70))
    print(f"wrote {out / 'explain_corner.png'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "gallery")
