"""tv.show's static picture: the PNG and the inline SVG of its HTML (issue 25, item 2) against
the peer it replaced, the PNG alone (``render.mpl.to_png``), in the same run.

Cases: the seed tensors, a tiny GPT-2 (tied embedding), a Llama-70B-sized model on ``meta``
(723 tensors). Prints per case the median of 5 runs, the ratio to the PNG alone, and the sizes
of the PNG, the SVG and the HTML output.

    PYTHONPATH=. python bench/bench_static_picture.py
"""

from __future__ import annotations

import statistics
import time

import torch

import tensorviz as tv
from tensorviz.plan.diagram import diagram
from tensorviz.render.mpl import to_png
from tensorviz.render.show import static_picture


def cases() -> dict[str, object]:
    from _models import llama_70b_on_meta  # puts the repository root on sys.path: tests.helpers

    from tests.helpers.zoo import transformers_model

    x = torch.rand(8, 10, 50)
    llama = llama_70b_on_meta(torch.float32)
    return {"seed": {"a": x, "b": x[2:4], "c": x[:, ::2]}, "gpt2": transformers_model("gpt2"), "llama-70b meta": llama}


def median(f, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    for name, obj in cases().items():
        layout = tv.analyze(obj)
        d = diagram(layout)
        png_only = median(lambda d=d: to_png(d))
        both = median(lambda d=d, layout=layout: static_picture(layout, d))
        shown = static_picture(layout, d)
        print(
            f"{name:16s} PNG alone {1000 * png_only:7.1f} ms · PNG + SVG {1000 * both:7.1f} ms "
            f"({both / png_only:4.2f}x) · PNG {len(shown.png) / 1024:6.1f} KiB · SVG {len(shown.svg) / 1024:6.1f} KiB "
            f"· HTML {len(shown.to_html()) / 1024:6.1f} KiB"
        )


if __name__ == "__main__":
    main()
