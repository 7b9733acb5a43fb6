"""How drawing scales: ``tv.show`` and its steps from 1k to 1M tensors, beside ``tv.analyze``.

Two shapes of state dict, both of meta tensors (metadata only, no bytes):

* ``many``  -- many small storages: per 10 names, 6 independent weights, a tied pair and a
  weight with a row slice (8 storages per 10 names);
* ``flat``  -- few storages with thousands of views each: flat buffers (as FSDP1 keeps them) of
  2,000 views each, 1,999 disjoint slices and one view of the whole buffer.

For each size (doubling from ``--start`` to ``--max``) one run, CPU seconds (``process_time``,
best of ``--repeat`` below 100k): ``analyze`` (``tv.analyze``), ``exact`` (analyze + overlap
groups + storages: the full exact answer), ``plan`` (``tv.diagram`` of a fresh analyze),
``show`` (``tv.show`` on the state dict: analyze + plan + PNG) and ``bundle`` (show plus its
HTML and text, what Jupyter displays). Then the ratio per doubling of each column; the goal is
at most 2.2x, ``show`` of 100k tensors within 1 s and of 1M within 8 s.

``--explore N`` times ``tv.explore`` (no snapshot) of ``N`` tensors of both shapes next to
``tv.analyze`` of the same dict and the model tree it draws (``Layout.tree``), CPU seconds in
the same run, as a ratio to ``analyze`` (goal: explore at most 3x analyze at 100k).

``--memory`` also measures the exact answer's peak Python memory above the state dict
(tracemalloc, one run at the largest size), in bytes per view (goal: at most 400): with the
records left lazy (group and coverage columns) and with every Group and Storage record made.

    .venv/bin/python bench/bench_scale.py [--max 1024000] [--shape many|flat|both] [--memory] [--explore 100000]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import torch

import tensorviz as tv


def many_small(n: int) -> dict[str, torch.Tensor]:
    sd: dict[str, torch.Tensor] = {}
    i = 0
    while len(sd) < n:
        p = f"layers.{i}."
        for j in range(6):
            sd[p + f"w{j}"] = torch.empty(8 + (i * 7 + j) % 64, device="meta")
        tied = torch.empty(4, 16, device="meta")
        sd[p + "emb"] = tied
        sd[p + "head"] = tied
        qkv = torch.empty(12, 8, device="meta")
        sd[p + "qkv"] = qkv
        sd[p + "q"] = qkv[:4]
        i += 1
    return dict(list(sd.items())[:n]) if len(sd) > n else sd


def flat_buffers(n: int, per: int = 2000) -> dict[str, torch.Tensor]:
    sd: dict[str, torch.Tensor] = {}
    b = 0
    while len(sd) < n:
        k = min(per, n - len(sd))
        flat = torch.empty(64 * k, device="meta")
        sd[f"flat.{b}"] = flat
        for j in range(k - 1):
            sd[f"flat.{b}.p{j}"] = flat[64 * j : 64 * (j + 1)]
        b += 1
    return sd


SHAPES = {"many": many_small, "flat": flat_buffers}


def exact(sd) -> tv.Layout:
    layout = tv.analyze(sd)
    layout.groups("overlap")
    layout.storages  # noqa: B018  (computes coverage)
    return layout


def bundle(sd) -> dict:
    return tv.show(sd)._repr_mimebundle_()


STEPS = {
    "analyze": tv.analyze,
    "exact": exact,
    "plan": lambda sd: tv.diagram(tv.analyze(sd)),
    "show": tv.show,
    "bundle": bundle,
}


def cpu(fn, arg, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - t)
    return best


def sizes(start: int, stop: int) -> list[int]:
    out = [start]
    while out[-1] * 2 <= stop:
        out.append(out[-1] * 2)
    return out


def curve(shape: str, ns: list[int], repeat: int) -> None:
    print(f"\nshape {shape!r}: CPU seconds per step (ratio to the size before)")
    print(f"{'tensors':>9} {'storages':>9} " + " ".join(f"{s:>16}" for s in STEPS))
    prev: dict[str, float] = {}
    worst: dict[str, float] = {}
    for n in ns:
        sd = SHAPES[shape](n)
        storages = len(tv.analyze(sd).storages)
        times = {s: cpu(fn, sd, repeat if n < 100_000 else 1) for s, fn in STEPS.items()}
        cells = []
        for s, t in times.items():
            r = t / prev[s] if s in prev and prev[s] > 0.02 else None  # ratios of tiny times are noise
            if r is not None:
                worst[s] = max(worst.get(s, 0.0), r)
            cells.append(f"{t:8.3f}" + (f" (x{r:4.2f})" if r is not None else " " * 8))
        print(f"{n:>9,} {storages:>9,} " + " ".join(f"{c:>16}" for c in cells), flush=True)
        prev = times
        del sd
    print("worst ratio per doubling: " + ", ".join(f"{s} x{r:.2f}" for s, r in worst.items()) + "  (goal <= 2.2)")


def facts(sd) -> tv.Layout:
    """The exact answer with records left lazy: every view's overlap and span group, every
    storage's coverage, as the layout's numpy columns (records are made when asked for)."""
    layout = tv.analyze(sd)
    layout.group_members("overlap")
    layout.group_members("span")
    layout.storage_stats()
    return layout


def memory(shape: str, n: int) -> None:
    sd = SHAPES[shape](n)
    print(f"\nmemory, shape {shape!r}, {n:,} views, above the state dict (tracemalloc; goal <= 400 B per view):")
    for label, fn in (("records lazy", facts), ("with records", exact)):
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        layout = fn(sd)
        now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del layout
        print(
            f"  exact answer, {label}: peak {(peak - base) / 2**20:,.0f} MiB ({(peak - base) / n:,.0f} B per view), "
            f"kept {(now - base) / 2**20:,.0f} MiB ({(now - base) / n:,.0f} B per view)"
        )


def explore(n: int) -> None:
    """``tv.explore`` of ``n`` tensors beside ``tv.analyze`` of the same dict (CPU seconds)."""
    from bench_analyze import synthetic_state_dict

    print(f"\nexplore of {n:,} tensors, CPU seconds (ratio to analyze; goal: explore <= 3x)")
    for shape, make in (("many", many_small), ("synthetic", synthetic_state_dict)):
        sd = make(n)
        steps = {
            "analyze": tv.analyze,
            "tree": lambda sd: tv.analyze(sd).tree(),
            "explore": lambda sd: tv.explore(sd, snapshot=False),
        }
        times = {s: cpu(fn, sd, 1) for s, fn in steps.items()}
        cells = ", ".join(f"{s} {t:.3f} (x{t / times['analyze']:.1f})" for s, t in times.items())
        print(f"  {shape:>9}: {cells}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=1000)
    ap.add_argument("--max", type=int, default=128_000)
    ap.add_argument("--shape", choices=("many", "flat", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--explore", type=int, default=0, metavar="N", help="only tv.explore of N tensors vs analyze")
    args = ap.parse_args()
    tv.show({"warm": torch.zeros(4)})._repr_mimebundle_()  # fonts and imports, outside the timings
    if args.explore:
        tv.explore({"warm.w": torch.zeros(4)}, snapshot=False)
        return explore(args.explore)
    shapes = ("many", "flat") if args.shape == "both" else (args.shape,)
    for shape in shapes:
        curve(shape, sizes(args.start, args.max), args.repeat)
    if args.memory:
        for shape in shapes:
            memory(shape, sizes(args.start, args.max)[-1])


if __name__ == "__main__":
    main()
