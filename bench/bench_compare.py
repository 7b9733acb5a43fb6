"""How much does the explorer's compare mode cost, next to the explorer alone in the same run?

Prints (best CPU time of ``--repeat`` interleaved runs each, seconds and ratios, and payload bytes):

The compare section alone (``section``: ``CompareRows(d).section().wire()`` of a ready diff: the
rows aligned and marked, the rows sent made and put on the wire) is timed too. For a
before/after of the same measures, run this script from a copy of each tree (``bench/_models.py``
puts the script's own repository first on ``sys.path``, ahead of ``PYTHONPATH``).

* llama70b -- a 70B-sized Llama on the meta device (725 tensors) against its state dict with
  layer 40 cast to bfloat16: ``tv.explore(model, compare=b)`` next to ``tv.explore(model)`` and
  ``tv.diff(model, b)``; the payload with the compare section next to the payload alone;
* synthetic -- ``--n`` tensors (bench_analyze's state dict) against bench_diff's other side (1 %
  cast, 1 % of the ties cloned, every name under ``module.``): the same rows; the section is
  bounded by ``ROW_BUDGET`` rows (marked rows first), so its bytes stay flat as ``--n`` grows.

    .venv/bin/python bench/bench_compare.py [--n 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch
from _models import llama_70b_on_meta
from bench_analyze import synthetic_state_dict
from bench_diff import other_side
from bench_savecheck import best_of

import tensorviz as tv
from tensorviz.explorer.compare import ROW_BUDGET, CompareRows


def llama70b() -> tuple[Any, dict[str, torch.Tensor]]:
    model = llama_70b_on_meta(torch.float32)
    b = {k: (v.to(torch.bfloat16) if k.startswith("model.layers.40.") else v) for k, v in model.state_dict().items()}
    return model, b


def row(label: str, a: Any, b: Any, repeat: int) -> dict[str, Any]:
    """Times and payload bytes of the explorer alone, with compare, and the diff, in one run."""
    d = tv.diff(a, b)
    times = best_of(
        [
            ("explore", lambda: tv.explore(a, snapshot=False)),
            ("explore_compare", lambda: tv.explore(a, compare=b, snapshot=False)),
            ("diff", lambda: tv.diff(a, b)),
            ("section", lambda: CompareRows(d).section().wire()),
        ],
        repeat,
    )
    plain, both = tv.explore(a, snapshot=False), tv.explore(a, compare=b, snapshot=False)
    section = both.canvas.payload["compare"]
    return {
        "case": label,
        **{f"{k}_s": round(v, 3) for k, v in times.items()},
        "compare_over_explore": round(times["explore_compare"] / times["explore"], 2),
        "payload_bytes": plain.payload_nbytes,
        "payload_bytes_compare": both.payload_nbytes,
        "rows_sent": section["total"] - section["left_out"],
        "rows": section["total"],
        "summary": section["summary"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    model, b = llama70b()
    print(json.dumps(row("llama70b", model, b, args.repeat)))
    sd = synthetic_state_dict(args.n)
    print(json.dumps(row(f"synthetic {args.n}", sd, other_side(sd), args.repeat)))
    print(f"(row budget {ROW_BUDGET:,})")


if __name__ == "__main__":
    main()
