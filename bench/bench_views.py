"""The save check and the module tree on one storage read by many views, against safetensors'
own sharing helper and ``tv.analyze`` in the same run.

Cases (issue 22), each at 2,000 / 8,000 / 100,000 views (``--sizes``):

* flat  -- a ZeRO/FSDP1-style flat buffer and its views (each view 32 floats, the buffer too);
* chain -- an overlap chain: view ``i`` reads floats ``[32 i, 32 i + 64)``, each overlapping the next;
* and once, 64 column slices of a 50,000 x 4,096 weight (meta), with the weight.

Columns (CPU seconds, best of ``--repeat`` interleaved runs each): ``helper`` = ``safetensors.torch._find_shared_tensors(sd)``;
``analyze`` = ``tv.analyze(sd)`` plus its overlap groups (the layout's exact answer);
``tree`` = ``layout.tree()`` on that layout; ``save_check`` = ``tv.save_check(sd)`` (six savers,
misfires, fixes). Goals: save_check <= 10x the helper at 100k views; tree <= 2x analyze.

    .venv/bin/python bench/bench_views.py [--sizes 2000 8000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import time

import torch

import tensorviz as tv


def flat(n: int) -> dict[str, torch.Tensor]:
    buf = torch.zeros(n * 32)
    return {"flat": buf, **{f"p{i}": buf[i * 32 : (i + 1) * 32].view(4, 8) for i in range(n)}}


def chain(n: int) -> dict[str, torch.Tensor]:
    buf = torch.zeros(n * 32 + 32)
    return {f"p{i}": buf[i * 32 : i * 32 + 64] for i in range(n)}


def sliced() -> dict[str, torch.Tensor]:
    w = torch.empty(50_000, 4096, device="meta")
    return {"w": w, **{f"s{k}": w[:, k * 64 : (k + 1) * 64] for k in range(64)}}


def timed(fn) -> float:
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def row(label: str, sd: dict, check: bool = True, repeat: int = 3) -> None:
    """One line: the best CPU time of ``repeat`` interleaved runs of each column."""
    from safetensors.torch import _find_shared_tensors

    best: dict[str, float] = {}

    def keep(key: str, seconds: float) -> None:
        best[key] = min(best.get(key, seconds), seconds)

    for _ in range(repeat):
        keep("helper", timed(lambda: _find_shared_tensors(sd)))
        box: dict = {}
        keep("analyze", timed(lambda box=box: box.setdefault("layout", tv.analyze(sd)).groups("overlap")))
        keep("tree", timed(lambda box=box: box["layout"].tree()))  # a fresh layout each run: no cached tree
        keep("save", timed(lambda: tv.save_check(sd)) if check else float("nan"))
    helper, analyze, tree, save = best["helper"], best["analyze"], best["tree"], best["save"]
    print(
        f"{label:<22} helper {helper:7.3f}  analyze {analyze:7.3f}  tree {tree:7.3f} ({tree / analyze:4.1f}x analyze)"
        f"  save_check {save:8.3f} ({save / max(helper, 1e-9):5.1f}x helper)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[2000, 8000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tv.save_check({"warm": torch.zeros(2)})  # imports out of the timing
    for n in args.sizes:
        row(f"flat buffer, {n:,} views", flat(n), repeat=args.repeat)
        row(f"overlap chain, {n:,}", chain(n), repeat=args.repeat)
    row("64 column slices (meta)", sliced(), check=False, repeat=args.repeat)


if __name__ == "__main__":
    main()
