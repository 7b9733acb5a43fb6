"""tv.show's static picture: the PNG and the inline SVG of its HTML (issue 25, item 2) against
the peer it replaced, the PNG alone (``render.mpl.to_png``), in the same run.

Cases: the seed tensors, a tiny GPT-2 (tied embedding), a Llama-70B-sized model on ``meta``
(723 tensors). Prints per case the median of 5 runs, the ratio to the PNG alone, and the sizes
of the PNG, the SVG and the HTML output.

    PYTHONPATH=. python bench/bench_static_picture.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tensorviz as tv  # noqa: E402
from tensorviz.plan.diagram import diagram  # noqa: E402
from tensorviz.render.mpl import to_png  # noqa: E402
from tensorviz.render.show import static_picture  # noqa: E402


def cases() -> dict[str, object]:
    from transformers import LlamaConfig, LlamaForCausalLM
    from zoo import transformers_model

    x = torch.rand(8, 10, 50)
    cfg = LlamaConfig(
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=128256,
    )
    with torch.device("meta"):
        llama = LlamaForCausalLM(cfg)
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
