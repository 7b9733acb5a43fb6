"""Size and build time of ``tv.export_html``'s self-contained page, against the live canvas's
payload for the same model (the named peer: what a notebook's kernel sends for one grouping).

The page holds three groupings (storage, exact span, overlap), each as the same framed payload
base64 (x 4/3), plus the sparse relations of each view, the explorer's ES modules (once, as
text) and the static model map. Goal (issue 25 item 6): at most 2 MB for the 70B-sized model.

Models: the browser tests' tiny tied/fused model; a Llama-70B-sized model on ``meta``
(transformers); 100,000 slices of one flat storage (one lane per view; over RELATION_LIMIT, so
no relations are precomputed).

Run: ``PYTHONPATH=. .venv/bin/python bench/bench_export.py`` (``--quick``: without the 100k case).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.helpers


def _models(quick: bool):
    import torch

    from tests.helpers.models import TiedLM, llama_70b_on_meta

    yield "tiny tied", TiedLM()
    yield "Llama-70B-sized, meta", llama_70b_on_meta(torch.float32)
    if not quick:
        flat = torch.zeros(4 * 100_000)
        yield "100k slices, one storage", {"flat": flat, **{f"v{i}": flat[4 * i : 4 * i + 4] for i in range(100_000)}}


def main() -> None:
    import tensorviz as tv
    from tensorviz.explorer.payload import payload, payload_nbytes
    from tensorviz.explorer.render import Renderer
    from tensorviz.explorer.state import ExplorerState

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    quick = ap.parse_args().quick
    print(f"{'model':28} {'tensors':>8} {'page':>11} {'1 payload':>11} {'page/payload':>12} {'build s':>8}")
    for label, obj in _models(quick):
        layout = tv.analyze(obj)
        d = Renderer(layout, dpi=100, max_lanes=40, width=None).get(ExplorerState())[0].diagram
        live = payload_nbytes(payload(d, layout))
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            out = tv.export_html(layout, os.path.join(tmp, "page.html"))
            seconds = time.perf_counter() - t0
            size = out.stat().st_size
        print(f"{label:28} {len(layout):>8,} {size:>11,} {live:>11,} {size / live:>12.1f} {seconds:>8.2f}")


if __name__ == "__main__":
    main()
