"""How fast is ``tv.load_check`` next to the real ``load_state_dict``, on a 9,005-tensor GPT-2?

The model is bench_savecheck's GPT-2 (750 blocks of 8-wide layers, 9,005 names, one tie) and the
source a state dict of independent copies of its tensors (so the tie is fed twice: a conflict to
find). Prints the best CPU time of ``--repeat`` interleaved runs of:

* load_check       -- ``tv.load_check(model, source, strict=False)`` (twins, torch's own load on
                      them, the layouts' memory effects);
* load_state_dict  -- the real ``load_state_dict(source, strict=False)`` into a second model;
* analyze          -- ``tv.analyze(model)``, one of the check's steps;

and the ratio. Target (issue 24): the load check within 1 s for this model.

    .venv/bin/python bench/bench_loadcheck.py [--layers 750] [--repeat 3]
"""

from __future__ import annotations

import argparse

from bench_savecheck import best_of, model

import tensorviz as tv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=750)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    m, target = model(args.layers), model(args.layers)
    source = {k: v.clone() for k, v in m.state_dict().items()}
    rows = [
        ("load_check", lambda: tv.load_check(m, source, strict=False)),
        ("load_state_dict", lambda: target.load_state_dict(source, strict=False)),
        ("analyze", lambda: tv.analyze(m)),
    ]
    t = best_of(rows, args.repeat)
    r = tv.load_check(m, source, strict=False)
    print(
        f"{len(source):,} tensors (CPU s): load_check {t['load_check']:6.3f}   real load_state_dict "
        f"{t['load_state_dict']:6.3f}   ratio {t['load_check'] / t['load_state_dict']:5.2f}x   analyze {t['analyze']:6.3f}"
    )
    print(f"    conflicts: {[(c.names, c.winner) for c in r.conflicts]}, untouched: {len(r.untouched)}")


if __name__ == "__main__":
    main()
