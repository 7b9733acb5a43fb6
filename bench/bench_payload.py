"""Payload bytes per drawn bar of the explorer's canvas, kernel side (no browser needed).

For each model the explorer plans its first state as it does on screen (every lane, the overview
when it would show one) and ships it to a :class:`~tensorviz.explorer.canvas.DiagramCanvas`; the
bytes put on the wire (binary columns, front-coded names, lists) are divided by the bars drawn.
The overview's own columns are reported apart (bytes per storage it shows and per cell), and so
is the matplotlib PNG of the same state, per bar *it* draws (its lane budget draws fewer).

Models: the browser tests' tiny tied/fused model; bench_analyze's 1,000-tensor synthetic state
dict; a Llama-70B-sized model on ``meta`` (transformers); 100,000 storages of bench_scale's
``many_small`` shape (tied pairs, fused qkv slices, simple weights: an overview and a summary
row); 100,000 slices of one flat storage (one lane per view).

Run: ``.venv/bin/python bench/bench_payload.py`` (add ``--quick`` to skip the two 100k models), or
``bench/bench_explorer.py --payload``.

Measured here (2 cores, 2026-11-30), before the overview and the past-end layer were drawn on the
canvas, then after (the overview sent; view geometry as shared heads + varints; names sharing
both a prefix and a suffix with the previous one)::

    model                       bars      before     after   (overview bytes)
    tiny tied + fused              6   74.0 B/bar  65.3 B/bar  (none: 8 storages)
    1k synthetic                 680   59.7 B/bar  58.5 B/bar  (3,840 B = 6.4 B/storage)
    Llama-70B-sized, meta        725   60.6 B/bar  44.5 B/bar  (4,935 B = 6.8 B/storage)
    100k storages (many_small) 50,000  55.3 B/bar  61.3 B/bar  (636,363 B = 6.4 B/storage, 4.2 B/cell)
    100k slices, one storage  100,001  33.8 B/bar  28.1 B/bar  (none: one storage)

(the tiny model's 6 bars carry the fixed cost of palettes and lists; every model with more than
a handful of bars stays under the 64 B/bar budget). The PNG costs 1-8.5 KB per bar it draws.

2026-12-01, one payload trait (the columns framed into one buffer, codes named once by the constant
``vocab`` trait) instead of 50 traits, before (68a3b48) and after in one session: the columns
above are unchanged (65.3 / 58.5 / 44.5 B/bar for tiny / 1k / Llama-70B), and the whole message
(ipywidgets' JSON state + buffer paths + buffers of every trait a redraw writes) went from 200.5 /
64.7 / 50.5 to 127.8 / 64.1 / 49.9 B/bar (one buffer path instead of 40).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_analyze import synthetic_state_dict  # noqa: E402
from bench_scale import many_small  # noqa: E402

import tensorviz as tv  # noqa: E402

OVERVIEW_KEYS = ("ov_",)


def tiny() -> dict[str, torch.Tensor]:
    w, qkv = torch.zeros(64, 16), torch.zeros(48, 16)
    sd = {"wte.weight": w, "lm_head.weight": w, "qkv.weight": qkv}
    sd.update({f"{p}.weight": qkv[16 * i : 16 * (i + 1)] for i, p in enumerate("qkv")})
    sd.update({f"ln.{k}": torch.zeros(16) for k in ("weight", "bias")})
    return sd


def llama70b():
    from _models import llama_70b_on_meta

    return llama_70b_on_meta(torch.float32)


def one_flat(n: int) -> dict[str, torch.Tensor]:
    flat = torch.zeros(4 * n)
    return {"flat": flat, **{f"v{i}": flat[4 * i : 4 * i + 4] for i in range(n)}}


def measure(label: str, obj) -> None:
    t0 = time.perf_counter()
    ex = tv.explore(obj, snapshot=False)
    ms = 1000 * (time.perf_counter() - t0)
    c, d = ex.canvas, ex.diagram
    bars = max(len(d.bars), 1)
    total = ex.payload_nbytes
    sent = {**c.payload, **c.columns}  # the payload trait: its JSON values and framed columns
    ov = {k: v for k, v in sent.items() if k.startswith(OVERVIEW_KEYS)}
    ov_bytes = sum(len(v) if isinstance(v, bytes) else len(repr(v)) for v in ov.values())
    line = f"{label:<26} {len(d.bars):>8,} bars {total:>12,} B = {total / bars:6.1f} B/bar"
    if d.overview is not None:
        n, cells = d.overview.storage.size, d.overview.cells_total
        line += (
            f"   overview {ov_bytes:,} B = {ov_bytes / n:.1f} B/storage, {ov_bytes / cells:.2f} B/cell"
            f" ({n:,} storages, {cells:,} cells)"
        )
    else:
        line += "   no overview"
    capped, png = ex._renderer.picture(ex.state)
    line += f"   | PNG {len(png) / max(len(capped.bars), 1):,.0f} B/bar drawn ({len(capped.bars):,})"
    print(line + f"   [explore {ms:.0f} ms]", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the two 100k models")
    args = ap.parse_args(argv)
    measure("tiny tied + fused", tiny())
    measure("1k synthetic", synthetic_state_dict(1000))
    measure("Llama-70B-sized, meta", llama70b())
    if not args.quick:
        measure("100k storages (many_small)", many_small(125_000))
        measure("100k slices, one storage", one_flat(100_000))


if __name__ == "__main__":
    main()
