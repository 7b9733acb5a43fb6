"""How fast is ``tv.analyze`` of an int8-quantized model next to the same model unquantized?

The model: ``--layers`` Linear(64, 64) layers (1,000 by default) in a Sequential. Quantized with
torchao's ``Int8WeightOnlyConfig`` each weight is an ``Int8Tensor`` laid out by its three inner
tensors (qdata, scale, zero_point), so the quantized layout has 4 views per layer where the
plain one has 2 (weight, bias). Prints, in one run (best CPU time of ``--repeat`` interleaved
runs each): ``tv.analyze(m).storages`` for both, time per layout tensor and per model tensor,
and the ratios. Goal (issue 26): quantized <= 1.5x plain per tensor.

    .venv/bin/python bench/bench_quantized.py [--layers 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_savecheck import best_of  # noqa: E402

import tensorviz as tv  # noqa: E402


def models(layers: int) -> tuple[torch.nn.Module, torch.nn.Module]:
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    torch.manual_seed(0)
    plain = torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(layers)))
    quantized = torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(layers)))
    quantize_(quantized, Int8WeightOnlyConfig())
    return plain, quantized


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    plain, quantized = models(args.layers)
    a, b = tv.analyze(plain), tv.analyze(quantized)
    _ = (a.storages, b.storages, str(b.tree()))  # imports and first-call caches out of the timing
    t = best_of(
        [("plain", lambda: tv.analyze(plain).storages), ("int8", lambda: tv.analyze(quantized).storages)],
        args.repeat,
    )
    tree = best_of(
        [("plain", lambda: tv.analyze(plain).tree()), ("int8", lambda: tv.analyze(quantized).tree())], args.repeat
    )
    n_model = 2 * args.layers
    print(
        f"{args.layers} Linear(64, 64) layers: {len(a):,} views plain, {len(b):,} int8 (best CPU time of {args.repeat})"
    )
    for label, n in (("plain", len(a)), ("int8", len(b))):
        print(
            f"  {label:6} analyze {t[label] * 1e3:7.1f} ms  {t[label] / n * 1e6:5.2f} us/view  "
            f"{t[label] / n_model * 1e6:5.2f} us/model tensor   +tree {tree[label] * 1e3:7.1f} ms"
        )
    per_view = (t["int8"] / len(b)) / (t["plain"] / len(a))
    print(
        f"  ratio int8/plain: {t['int8'] / t['plain']:.2f}x per model tensor, {per_view:.2f}x per view "
        f"(goal <= 1.5x per tensor); with tree {tree['int8'] / tree['plain']:.2f}x"
    )
    _later_steps(plain, quantized, a, b, args.repeat)


def _later_steps(plain, quantized, a, b, repeat: int) -> None:
    """The diagram of the layout (the int8 one groups each weight's pieces) and the save check of
    the model (the int8 one replays the savers on subclass stand-ins), same ratios."""
    d = best_of([("plain", lambda: tv.diagram(a)), ("int8", lambda: tv.diagram(b))], repeat)
    sc = best_of(
        [("plain", lambda: tv.save_check(plain)), ("int8", lambda: tv.save_check(quantized))], max(repeat // 2, 1)
    )
    for what, t in (("diagram", d), ("save_check", sc)):
        per_view = (t["int8"] / len(b)) / (t["plain"] / len(a))
        print(
            f"  {what:10} plain {t['plain'] * 1e3:7.1f} ms, int8 {t['int8'] * 1e3:7.1f} ms: "
            f"{t['int8'] / t['plain']:.2f}x per model tensor, {per_view:.2f}x per view"
        )


if __name__ == "__main__":
    main()
