"""Module tree and print(layout) cost, as ratios to the exact answer in the same run.

The synthetic 100k-tensor state dict of ``bench_analyze.py`` (40,000 names reading bytes
counted under another name, 28,000 shared groups) is the hard case: every shared group's byte
attribution is computed. Run: ``.venv/bin/python bench/bench_tree.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import exact, synthetic_state_dict  # noqa: E402

import tensorviz as tv  # noqa: E402


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    sd = synthetic_state_dict(100_000)
    base = best(lambda: exact(sd))
    tree = best(lambda: tv.analyze(sd).tree())
    text = best(lambda: str(tv.analyze(sd)))
    print(f"100k tensors: exact answer {base:.3f} s (peer)")
    print(f"  layout.tree()  {tree:.3f} s = {tree / base:.1f}x the exact answer")
    print(f"  str(layout)    {text:.3f} s = {text / base:.1f}x the exact answer")


if __name__ == "__main__":
    main()
