"""What a layout's colours cost: :func:`tensorviz.plan.colors.colour_ordinals`, beside its peers.

A colour is a property of the layout (one per span group, numbered in drawing order), made
once per layout on the first diagram and cached. This measures, on the two shapes of
``bench_scale.py`` (``many``: 8 storages per 10 names; ``flat``: buffers of 2,000 views), CPU
seconds of: ``analyze``; ``facts``, what the planner asks of any layout before colours (span
groups, storage stats, the drawing order of the storages); ``colours``, the ordinals on top of
those facts; ``plan``, a whole ``tv.diagram`` of a fresh layout (colours included); and
``plan again``, a second diagram of the same layout (colours cached). The colours should stay
a small fraction of ``plan`` at every size, and grow like it (about 2x per doubling). The
only Python loop is over the name patterns of at most 4,096 groups (the layer period), so it
does not grow with the layout.

Measured on the 2-core development machine (CPU seconds at 1,000,000 tensors): ``many``:
colours 0.057 (5.7 % of plan 1.00; x1.6 from 500k); ``flat``: colours 0.016 (2.1 % of plan
0.78; x2.05 from 500k).

    .venv/bin/python bench/bench_colours.py [--sizes 125000 250000 500000 1000000]
"""

from __future__ import annotations

import argparse
import gc
import time

from bench_scale import SHAPES

import tensorviz as tv
from tensorviz.plan.colors import colour_ordinals
from tensorviz.plan.select import drawing_order, file_headers


def cpu(fn) -> tuple[float, object]:
    gc.collect()
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def facts(layout: tv.Layout) -> None:
    layout.group_index("span")
    layout.group_members("storage")
    drawing_order(layout, frozenset(file_headers(layout)))


def row(shape: str, n: int) -> dict[str, float]:
    sd = SHAPES[shape](n)
    out: dict[str, float] = {}
    out["analyze"], layout = cpu(lambda: tv.analyze(sd))
    out["facts"], _ = cpu(lambda: facts(layout))
    out["colours"], _ = cpu(lambda: colour_ordinals(layout))
    fresh = tv.analyze(sd)
    out["plan"], _ = cpu(lambda: tv.diagram(fresh))
    out["plan again"], _ = cpu(lambda: tv.diagram(fresh))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[125_000, 250_000, 500_000, 1_000_000])
    ap.add_argument("--shape", choices=(*SHAPES, "both"), default="both")
    args = ap.parse_args()
    for shape in SHAPES if args.shape == "both" else (args.shape,):
        print(f"\nshape {shape!r}: CPU seconds (colours as a share of plan; ratio to the size before)")
        prev = None
        for n in args.sizes:
            t = row(shape, n)
            cells = " ".join(f"{k} {v:7.3f}" for k, v in t.items())
            grow = f"  colours x{t['colours'] / prev:4.2f}" if prev else ""
            print(f"{n:>9,} tensors: {cells}  colours/plan {t['colours'] / t['plan']:5.1%}{grow}", flush=True)
            prev = t["colours"]


if __name__ == "__main__":
    main()
