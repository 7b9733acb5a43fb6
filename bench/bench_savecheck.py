"""How fast is ``tv.save_check`` next to ``tv.analyze``, on a 9,005-tensor model?

The model is a GPT-2 with 750 blocks of 8-wide layers (12 tensors a block + 5 = 9,005 names,
one tie), built from a config on the CPU: the same name count as the model the issue timed
(issue 10: 4.2 s for the save check against 0.07 s for ``analyze``). Prints, in one run (best
CPU time of ``--repeat`` interleaved runs each):

* analyze     -- ``tv.analyze(model)``;
* save_check  -- ``tv.save_check(model)``: all six savers, ties, fixes;
* torch.save  -- the floor the check cannot go under: ``torch.save`` of the state dict under
                 ``torch.serialization.skip_data()`` into a sink (the check runs exactly this);

and the ratios. Target (issue 10): the save check within 1 s for this model.

    .venv/bin/python bench/bench_savecheck.py [--layers 750] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import io
import time
import warnings

import torch

import tensorviz as tv


def model(layers: int) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    with warnings.catch_warnings():  # a bench script: transformers' remarks on the tiny config
        warnings.simplefilter("ignore")
        cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=8, n_layer=layers, n_head=2)
        torch.manual_seed(0)
        return GPT2LMHeadModel(cfg)


def dry_torch_save(m: torch.nn.Module) -> None:
    with torch.serialization.skip_data():
        torch.save(m.state_dict(), io.BytesIO())


def best_of(rows, repeat: int) -> dict[str, float]:
    """Best CPU time of each ``(label, fn)``, runs interleaved so machine load hits all alike."""
    times: dict[str, list[float]] = {label: [] for label, _ in rows}
    for _ in range(repeat):
        for label, fn in rows:
            gc.collect()
            t0 = time.process_time()
            fn()
            times[label].append(time.process_time() - t0)
    return {label: min(ts) for label, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=750)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    m = model(args.layers)
    n = len(m.state_dict())
    tv.save_check(m)  # imports and first-call caches out of the timing
    t = best_of(
        [
            ("analyze", lambda: tv.analyze(m)),
            ("save_check", lambda: tv.save_check(m)),
            ("torch.save", lambda: dry_torch_save(m)),
        ],
        args.repeat,
    )
    print(f"GPT-2, {args.layers} blocks: {n:,} tensors (best CPU time of {args.repeat})")
    for label, s in t.items():
        print(f"  {label:<11} {s:7.3f} s")
    print(f"  save_check / analyze    {t['save_check'] / t['analyze']:5.1f}x")
    print(f"  save_check / torch.save {t['save_check'] / t['torch.save']:5.1f}x (its own dry run is part of the check)")
    print(f"  target: save_check <= 1 s: {'met' if t['save_check'] <= 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
