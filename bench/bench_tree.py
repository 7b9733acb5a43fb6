"""Module tree cost next to ``tv.analyze`` in the same run (issue 22: tree <= 2x analyze, whatever
the slicing).

Cases: ``bench_analyze``'s synthetic state dict at 2k, 8k and 100k names (per 10 names: 4
params, a tied pair, a fused qkv with q/k row slices, a transpose or a column slice -- 28% of
the names read bytes counted under another name), and 64 column slices of one 50k x 4,096
float32 weight on ``meta`` (3.2M byte runs) next to 64 row slices of it (one run each), alone
and with the weight itself (one overlap group of 65 names to attribute): the tree should not
care how a weight is sliced (core/sweep.py and core/attribution.py sweep column slices in
period space). Per case, best CPU time of ``--repeat`` interleaved
runs of:

* analyze  -- ``tv.analyze(x)``;
* tree     -- ``layout.tree()`` on a fresh layout (the overlap groups it needs included);
* groups   -- ``layout.shared("overlap")`` on a fresh layout: the part of the tree's cost that
              is the layout's overlap grouping (core/sweep.py), not the tree's own work;
* own      -- ``layout.tree()`` on a layout whose overlap groups are made: the tree's own work;
* print    -- ``str(layout)`` on a fresh layout;

and, at 100k, ``tv.explore(x, snapshot=False)`` (the widget built in the kernel, no browser).
Ratios are to analyze in the same run. Run: ``.venv/bin/python bench/bench_tree.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import synthetic_state_dict  # noqa: E402

import tensorviz as tv  # noqa: E402


def slices(by: str, rows: int = 50_000, cols: int = 4096, pieces: int = 64, whole: bool = False) -> dict:
    """``pieces`` column (``by="column"``) or row slices of one ``rows`` x ``cols`` float32
    weight on meta (with the weight itself first when ``whole``: one overlap group)."""
    import torch

    w = torch.empty(rows, cols, device="meta")
    first = {"w": w} if whole else {}
    if by == "row":
        height = rows // pieces
        return first | {f"s.{k}": w[k * height : (k + 1) * height] for k in range(pieces)}
    width = cols // pieces
    return first | {f"s.{k}": w[:, k * width : (k + 1) * width] for k in range(pieces)}


def grouped(x: object) -> tv.Layout:
    layout = tv.analyze(x)
    layout.shared("overlap")
    return layout


def cpu(fn: Callable[[], object], prepare: Callable[[], object] | None = None) -> float:
    """CPU seconds of ``fn(prepare())`` (``fn()`` without ``prepare``), prepare not counted."""
    arg = prepare() if prepare is not None else None
    gc.collect()
    t = time.process_time()
    fn() if prepare is None else fn(arg)  # type: ignore[call-arg]
    return time.process_time() - t


def measure(x: object, repeat: int, explore: bool) -> dict[str, float]:
    rows: dict[str, tuple[Callable, Callable | None]] = {
        "analyze": (lambda: tv.analyze(x), None),
        "tree": (lambda layout: layout.tree(), lambda: tv.analyze(x)),
        "groups": (lambda layout: layout.shared("overlap"), lambda: tv.analyze(x)),
        "own": (lambda layout: layout.tree(), lambda: grouped(x)),
        "print": (lambda layout: str(layout), lambda: tv.analyze(x)),
    }
    if explore:
        rows["explore"] = (lambda: tv.explore(x, snapshot=False), None)
    times: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(repeat):
        for label, (fn, prepare) in rows.items():
            times[label].append(cpu(fn, prepare))
    return {k: min(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cases = [(f"{n:,} names", synthetic_state_dict(n), n == 100_000) for n in (2_000, 8_000, 100_000)]
    cases += [(f"64 {by} slices of 50k x 4,096", slices(by), False) for by in ("row", "column")]
    cases += [(f"the weight + its 64 {by} slices", slices(by, whole=True), False) for by in ("row", "column")]
    head = "".join(f"{c:>9s}{'x':>7s}" for c in ("tree", "groups", "own", "print"))
    print(f"{'best of ' + str(args.repeat) + ', CPU s':34s} {'analyze':>8s}{head}")
    seen: dict[str, dict[str, float]] = {}
    for label, x, explore in cases:
        t = seen[label] = measure(x, args.repeat, explore)
        a = t["analyze"]
        line = f"{label:34s} {a:8.3f}" + "".join(
            f"{t[c]:9.3f}{t[c] / a:7.2f}" for c in ("tree", "groups", "own", "print")
        )
        if explore:
            line += f"   tv.explore {t['explore']:.3f} s = {t['explore'] / a:.2f}x analyze"
        print(line)
    for label in ("64 {} slices of 50k x 4,096", "the weight + its 64 {} slices"):
        row, col = seen[label.format("row")], seen[label.format("column")]
        print(
            f"{label.format('row/column'):34s} tree {col['tree']:.4f} s by columns vs {row['tree']:.4f} s by rows "
            f"({col['tree'] / row['tree']:.2f}x); analyze {col['analyze']:.4f} s / {row['analyze']:.4f} s"
        )
    drawing(args.repeat)


def drawing(repeat: int) -> None:
    """``tv.diagram`` (the plan of the picture: bars, overlap marks) of 64 row vs column slices
    of a 50k and a 100k x 4,096 weight, overlapping their neighbours (bars drawn per cell past
    ``DRAW_RUNS`` runs: the 100k case), next to ``analyze``."""
    import torch

    for rows in (50_000, 100_000):
        w = torch.empty(rows, 4096, device="meta")
        cases = {
            "row": {f"s.{k}": w[k * (rows // 64) : (k + 1) * (rows // 64) + 8] for k in range(64)},
            "column": {f"s.{k}": w[:, k * 64 : k * 64 + 96] for k in range(64)},
        }
        t = {}
        for by, x in cases.items():
            t[by] = min(cpu(tv.diagram, lambda x=x: grouped(x)) for _ in range(repeat))
        column = cases["column"]
        a = min(cpu(lambda column=column: tv.analyze(column)) for _ in range(repeat))
        print(
            f"tv.diagram, 64 overlapping slices of {rows // 1000}k x 4,096: by rows {t['row']:.3f} s, "
            f"by columns {t['column']:.3f} s ({t['column'] / t['row']:.1f}x; analyze {a:.4f} s)"
        )


if __name__ == "__main__":
    main()
