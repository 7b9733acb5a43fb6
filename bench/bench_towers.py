"""What do footprints too long to list cost: ``tv.analyze`` and ``tv.save_check`` next to ``torch.save``.

Two views of one buffer whose footprints are 2**24 runs or more each (issue 22, wrong answer 1:
"the memory cliff at exactly the budget, two 32 MiB views: 4.1 GB peak, 20 s save check"). Each
case runs in a fresh interpreter so its peak memory is its own; prints per case the CPU seconds
of ``tv.analyze``, of ``tv.save_check`` (every saver, ties, fixes) and of the peer, a real
``torch.save`` of the same dict into memory (it writes the whole buffer), their ratio, the peak
RSS of the analysis and the check above the process after building the tensors, and whether every figure was exact:

* evenodd -- ``x[::2]``, ``x[1::2]`` of 32 MiB (one strided level);
* rows    -- ``x[:, :2**23:2]``, ``x[:, 1:2**23:2]`` of a 4 x 2**24 uint8 matrix (two levels);
* pair    -- ``as_strided((2, 2**24), (3, 2))`` and the first 8 bytes (an interleaving level);
* sumset  -- ``as_strided((4096, 4096), (2, 3))`` (interleaving, many copies and many slices).

``--src DIR`` runs another checkout's tensorviz (the numbers before a change).

    .venv/bin/python bench/bench_towers.py [--src DIR] [--cases rows,pair]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CASES = ("evenodd", "rows", "pair", "sumset")

CHILD = r"""
import io, json, resource, sys, time
import torch
import tensorviz as tv

case = sys.argv[1]
n = 1 << 24
if case == "evenodd":
    x = torch.zeros(2 * n, dtype=torch.uint8)
    views = {"even": x[::2], "odd": x[1::2]}
elif case == "rows":
    x = torch.zeros(4, n, dtype=torch.uint8)
    views = {"a": x[:, : n // 2 : 2], "b": x[:, 1 : n // 2 : 2]}
elif case == "pair":
    x = torch.zeros(2 * n + 8, dtype=torch.uint8)
    views = {"pair": x.as_strided((2, n), (3, 2)), "head": x[:8]}
else:
    x = torch.zeros(2 * 4096 + 3 * 4096, dtype=torch.uint8)
    views = {"sumset": x.as_strided((4096, 4096), (2, 3))}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.process_time()
layout = tv.analyze(views)
t1 = time.process_time()
report = tv.save_check(views)
t2 = time.process_time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
torch.save(views, io.BytesIO())
t3 = time.process_time()
print(json.dumps({
    "case": case,
    "analyze_s": t1 - t0,
    "save_check_s": t2 - t1,
    "torch_save_s": t3 - t2,
    "peak_mb": (peak - base) / 1024,
    "exact": all(s.exact for s in layout.storages),
    "footprints": {k: layout[k].footprint_nbytes for k in views},
    "outcome": report["torch.save"].outcome,
}))
"""


def run(case: str, src: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case], env=env, cwd=src, capture_output=True, text=True, check=True
    )  # cwd: -c puts it first on sys.path
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"tensorviz from {args.src}")
    print(
        f"{'case':8} {'analyze':>8} {'save_check':>10} {'torch.save':>10} {'check/save':>10} {'peak MB':>8}  exact  torch.save verdict"
    )
    for case in args.cases.split(","):
        r = run(case, args.src)
        ratio = r["save_check_s"] / max(r["torch_save_s"], 1e-9)
        print(
            f"{case:8} {r['analyze_s']:8.2f} {r['save_check_s']:10.2f} {r['torch_save_s']:10.2f} {ratio:10.1f}"
            f" {r['peak_mb']:8.0f}  {str(r['exact']):5}  {r['outcome']}  {r['footprints']}"
        )


if __name__ == "__main__":
    main()
