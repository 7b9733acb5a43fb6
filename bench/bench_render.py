"""Time to PNG: tensorviz's PolyCollection renderer vs a naive ``ax.barh`` of the same bars.

Two cases, both built from meta tensors (no memory, no data):
  A. one flat storage read by 10,000 views (a flat parameter buffer);
  B. an overview of 5,000 storages (1,000 of them shared by a tied alias), every storage drawn.

For each: the Diagram plan, then render + PNG with tensorviz, then the same bars drawn with one
vectorised ``ax.barh`` call (one Rectangle per bar, the usual way) + PNG, in the same process.
Prints seconds and ratios; targets: tensorviz under 1 s per case and >= 10x faster than barh.
Times are the best CPU time (``time.process_time``) of ``--repeat`` runs: on a machine shared
with other jobs, wall time measures the neighbours as much as the code (drawing is
single-threaded, so CPU time is the work done).

Run: ``.venv/bin/python bench/bench_render.py [--repeat N]``
"""

from __future__ import annotations

import argparse
import gc
import io
import time

import torch
from matplotlib.figure import Figure

import tensorviz as tv
from tensorviz.render.mpl import figure_size, to_png


def flat_buffer(n: int = 10_000) -> dict[str, torch.Tensor]:
    sizes = [16 * (1 + i % 13) for i in range(n)]
    flat = torch.empty(sum(sizes), device="meta")
    views, at = {}, 0
    for i, size in enumerate(sizes):
        views[f"layers.{i // 8}.param{i % 8}.weight"] = flat[at : at + size]
        at += size
    return views


def many_storages(n: int = 5_000, shared: int = 1_000) -> dict[str, torch.Tensor]:
    views = {}
    for i in range(n):
        w = torch.empty(64 + (i * 37) % 4096, device="meta")
        views[f"blocks.{i}.weight"] = w
        if i < shared:
            views[f"blocks.{i}.alias"] = w[: w.numel() // 2]
    return views


def naive_png(d) -> bytes:
    """The same bars with one ``ax.barh`` call (one Rectangle artist per bar), then PNG."""
    w, h, *_ = figure_size(d)
    fig = Figure(figsize=(w, h))
    ax = fig.add_subplot()
    bars = [b for b in d.bars if not b.empty]
    ax.barh(
        [b.lane for b in bars],
        [b.stop - b.start for b in bars],
        left=[b.start for b in bars],
        height=0.72,
        color=[b.color for b in bars],
        edgecolor="#444444",
        linewidth=0.5,
    )
    ax.set_ylim(len(d.lanes) - 0.5, -0.5)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def best_of(fn, repeat: int) -> tuple[float, object]:
    """Best CPU seconds of ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


def run_case(name: str, layout, repeat: int, **options) -> None:
    plan_s, d = best_of(lambda: tv.diagram(layout, **options), repeat)
    ours_s, png = best_of(lambda: to_png(d), repeat)
    naive_s, _ = best_of(lambda: naive_png(d), max(1, repeat // 2))
    total = plan_s + ours_s
    print(f"{name}: {len(d.bars):,} bars on {len(d.lanes):,} lanes")
    print(
        f"  tensorviz  plan {plan_s:6.3f} s + render/PNG {ours_s:6.3f} s = {total:6.3f} s  "
        f"({len(png) / 1024:.0f} KiB PNG)  target < 1 s: {'yes' if total < 1 else 'NO'}"
    )
    print(f"  ax.barh    render/PNG {naive_s:6.3f} s")
    print(
        f"  ratio      barh / tensorviz render = {naive_s / ours_s:5.1f}x,  "
        f"barh / tensorviz plan+render = {naive_s / total:5.1f}x  (target >= 10x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    to_png(tv.diagram({"warm": torch.zeros(4)}))  # fonts and imports, outside the timings
    flat = tv.analyze(flat_buffer())
    many = tv.analyze(many_storages())
    run_case("A. one storage, 10,000 views (by storage, 40 lanes)", flat, args.repeat)
    run_case("A'. one storage, 10,000 views (by overlap, packed)", flat, args.repeat, by="overlap")
    run_case(
        "B. 5,000 storages, every one a lane (all drawn)",
        many,
        args.repeat,
        expand_simple=True,
        overview=False,
        max_lanes=1_000_000,
    )


if __name__ == "__main__":
    main()
