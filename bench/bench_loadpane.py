"""What the load-check pane adds to ``tv.explore`` on the 9,005-tensor GPT-2 (bench_savecheck's).

Prints the best CPU time of ``--repeat`` interleaved runs of:

* explore       -- ``tv.explore(model, snapshot=False)`` (the peer);
* explore+load  -- ``tv.explore(model, load=source, snapshot=False)``: the same explorer plus the
                   pane (the first loader's ``tv.load_check``, its section, the canvas marks);
* explore+dict  -- the same with the source as a plain ``dict`` (not weakly referenceable: held
                   as its layout, the other loaders' reports computed when picked; before, all
                   three ``load_state_dict`` variants were checked up front);
* load_check    -- ``tv.load_check(model, source)`` alone, for scale;

and the pane's share: (explore+load - explore) / load_check (near 1: the pane costs little more
than the check it shows), for either source. The source is a state dict of independent copies (the tie fed twice).

    .venv/bin/python bench/bench_loadpane.py [--layers 750] [--repeat 3]
"""

from __future__ import annotations

import argparse
import collections

from bench_savecheck import best_of, model

import tensorviz as tv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=750)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    m = model(args.layers)
    source = collections.OrderedDict((k, v.clone()) for k, v in m.state_dict().items())
    plain = dict(source)
    tv.explore(m, load=source, snapshot=False)  # imports and first-call caches out of the timing
    runs = [
        ("explore", lambda: tv.explore(m, snapshot=False)),
        ("explore+load", lambda: tv.explore(m, load=source, snapshot=False)),
        ("explore+dict", lambda: tv.explore(m, load=plain, snapshot=False)),
        ("load_check", lambda: tv.load_check(m, source)),
    ]
    best = best_of(runs, args.repeat)
    for name, t in best.items():
        print(f"{name:<14} {t:8.3f} s")
    for run, kind in (("explore+load", "an OrderedDict"), ("explore+dict", "a plain dict")):
        extra = best[run] - best["explore"]
        print(f"the pane adds {extra:.3f} s to tv.explore for {kind} = {extra / best['load_check']:.2f}x one "
              f"tv.load_check ({len(m.state_dict()):,} names)")  # fmt: skip


if __name__ == "__main__":
    main()
