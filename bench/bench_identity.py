"""What memory identity costs: ``tv.analyze`` + the storages of 100k tensors, each its own
storage (the usual case), next to 100k ``torch.from_numpy`` storage objects over one array
(every storage object joins one memory: the most work :mod:`tensorviz.sources.memory` does).

Prints best-of-``--repeat`` CPU seconds and the ratio to the usual case in the same run.

    .venv/bin/python bench/bench_identity.py [--n 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import torch

import tensorviz as tv


def best(make, repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        make()
        out = min(out, time.process_time() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.n
    arr = np.zeros(n + 8, dtype=np.uint8)
    cases = {
        "own storages (torch.zeros each)": {f"t{i}": torch.zeros(8, dtype=torch.uint8) for i in range(n)},
        "one memory (from_numpy of overlapping slices)": {f"t{i}": torch.from_numpy(arr[i : i + 8]) for i in range(n)},
    }
    base = None
    print(f"{n} tensors; best of {args.repeat}, CPU s        analyze   + storages   x own storages")
    for name, sd in cases.items():
        a = best(lambda sd=sd: tv.analyze(sd), args.repeat)
        e = best(lambda sd=sd: tv.analyze(sd).storages, args.repeat)
        base = base or e
        print(f"{name:48s} {a:8.3f} {e:11.3f} {e / base:11.2f}")
    layout = tv.analyze(cases["one memory (from_numpy of overlapping slices)"])
    assert len(layout.storages) == 1 and layout.storages[0].nbytes == n + 7


if __name__ == "__main__":
    main()
