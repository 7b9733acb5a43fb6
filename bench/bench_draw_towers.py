"""What does drawing footprints too long to list cost: ``tv.show`` next to ``tv.analyze``.

The two cases of issue 22's drawing cliff (see ``bench_towers.py``): ``evenodd`` (``x[::2]``,
``x[1::2]`` of 32 MiB) and ``rows`` (``x[:, :2**23:2]``, ``x[:, 1:2**23:2]`` of a 4 x 2**24 uint8
matrix); and ``slices``: 800 slices of 1,000 floats of a 16 MB storage beside a 3-d strided view
of it (37 x 100 x 100, stride 100,003 / 997 / 3: drawn per cell, 10,000 runs a row), whose
overlap marks count bytes per cell (``RowRuns.below``). Each case runs in a fresh interpreter so its peak memory is its own; prints the CPU
seconds of ``tv.analyze`` (the peer) and of ``tv.show`` on that layout (plan, render, PNG, HTML),
their ratio, the peak RSS above the process after building the tensors, and the drawn runs of
the largest bar. ``--src DIR`` runs another checkout's tensorviz (the numbers before a change);
``--png DIR`` keeps each case's PNG.

    .venv/bin/python bench/bench_draw_towers.py [--src DIR] [--cases rows] [--png DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CASES = ("evenodd", "rows", "slices")

CHILD = r"""
import json, resource, sys, time
import torch
import tensorviz as tv

case, png = sys.argv[1], sys.argv[2]
n = 1 << 24
if case == "evenodd":
    x = torch.zeros(2 * n, dtype=torch.uint8)
    views = {"even": x[::2], "odd": x[1::2]}
elif case == "rows":
    x = torch.zeros(4, n, dtype=torch.uint8)
    views = {"a": x[:, : n // 2 : 2], "b": x[:, 1 : n // 2 : 2]}
else:
    x = torch.zeros(4_000_000)
    views = {f"s{i}": x[i * 1000 : (i + 1) * 1000] for i in range(800)}
    views["odd"] = x.as_strided((37, 100, 100), (100_003, 997, 3))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.process_time()
layout = tv.analyze(views)
t1 = time.process_time()
shown = tv.show(layout)
t2 = time.process_time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
d = tv.diagram(layout)
if png:
    open(png, "wb").write(shown.png)
print(json.dumps({
    "analyze_s": t1 - t0,
    "show_s": t2 - t1,
    "peak_mb": (peak - base) / 1024,
    "runs": max(len(b.runs) if b.runs is not None else 1 for b in d.bars),
}))
"""


def run(case: str, src: Path, png: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case, png], env=env, cwd=src, capture_output=True, text=True, check=True
    )  # cwd: -c puts it first on sys.path
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args()
    print(f"tensorviz from {args.src}")
    print(f"{'case':8} {'analyze':>8} {'show':>8} {'show/analyze':>12} {'peak MB':>8} {'drawn runs':>10}")
    for case in args.cases.split(","):
        png = str(args.png / f"draw_towers_{case}.png") if args.png else ""
        r = run(case, args.src, png)
        ratio = r["show_s"] / max(r["analyze_s"], 1e-9)
        print(f"{case:8} {r['analyze_s']:8.2f} {r['show_s']:8.2f} {ratio:12.1f} {r['peak_mb']:8.0f} {r['runs']:10,}")


if __name__ == "__main__":
    main()
