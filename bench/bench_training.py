"""How fast is ``tv.analyze(model, optimizer=opt)`` next to ``tv.analyze(model)``, on a
9,005-tensor model?

The model is bench_savecheck's GPT-2 (750 blocks of 8-wide layers: 9,005 names, one tie) after
one Adam step, gradients set to None: the optimizer holds ``step``, ``exp_avg`` and
``exp_avg_sq`` for each of its 9,004 parameters, so the layout has 4x the model's tensors
(3x in bytes: ``step`` is a 4-byte scalar). Prints, in one run (best CPU time of ``--repeat``
interleaved runs each):

* analyze          -- ``tv.analyze(model)``, then ``layout.storages`` (the views' storages built);
* analyze+optim    -- ``tv.analyze(model, optimizer=opt)``, then ``layout.storages``;
* +grads           -- the same after a backward pass (gradients kept): 5x the tensors;

and the ratios. Target (issue 27): analyze+optim <= 3.5x analyze.

    .venv/bin/python bench/bench_training.py [--layers 750] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_savecheck import best_of, model  # noqa: E402

import tensorviz as tv  # noqa: E402


def trained(layers: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    m = model(layers)
    opt = torch.optim.Adam(m.parameters())
    m(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    opt.step()
    return m, opt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=750)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    m, opt = trained(args.layers)
    with_grads = tv.analyze(m, optimizer=opt)
    opt.zero_grad(set_to_none=True)
    plain, full = tv.analyze(m), tv.analyze(m, optimizer=opt)
    _ = (plain.storages, full.storages)  # imports and first-call caches out of the timing
    rows = [
        ("analyze", lambda: tv.analyze(m).storages),
        ("analyze+optim", lambda: tv.analyze(m, optimizer=opt).storages),
    ]
    t = best_of(rows, args.repeat)
    m(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    t.update(best_of([("+grads", lambda: tv.analyze(m, optimizer=opt).storages)], args.repeat))
    print(
        f"GPT-2, {args.layers} blocks: {len(plain):,} tensors; with Adam's state {len(full):,}; "
        f"with gradients too {len(with_grads):,} (best CPU time of {args.repeat})"
    )
    for label, s in t.items():
        print(f"  {label:<14} {s:7.3f} s")
    ratio = t["analyze+optim"] / t["analyze"]
    print(f"  analyze+optim / analyze {ratio:5.2f}x for {len(full) / len(plain):.1f}x the tensors")
    print(
        f"  +grads / analyze        {t['+grads'] / t['analyze']:5.2f}x for {len(with_grads) / len(plain):.1f}x the tensors"
    )
    print(f"  target: analyze+optim <= 3.5x analyze: {'met' if ratio <= 3.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
