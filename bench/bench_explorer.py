"""How long does one explorer control change take on a 1,000-tensor model?

For each control (grouping, name filter, only shared, unreferenced bytes, expand simple,
storage, byte-range zoom) the bench sets the control's value the way a browser click does
(``widget.value = ...``; the redraw runs synchronously in the observer) and times until the new
PNG is in the ``ipywidgets.Image``. The render cache is cleared before each change, so every
measured change draws; cache hits are measured separately. Prints median and p95 in milliseconds
per control, then the "group by" changes done naively in the same run: re-analyse the model,
plan the diagram, draw it on a fresh pyplot figure, save the PNG and close the figure.

Two models, both ~1,000 named tensors, metadata only (meta device / tiny storages):

* ``gpt2-meta``   -- a transformers GPT-2 on the meta device, 83 blocks, tied embeddings;
* ``synthetic``   -- bench_analyze's state dict: blocks of 4 plain params, a tied pair, a fused
                     qkv with q/k row views, a transpose (or a column slice) -- sharing everywhere.

Target (issue 4): a control change produces the new image in well under 300 ms.

    .venv/bin/python bench/bench_explorer.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402
from bench_analyze import synthetic_state_dict  # noqa: E402  (bench/ is on sys.path when run)

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.widget import explore  # noqa: E402


def gpt2_meta(n_layer: int = 83):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    cfg = GPT2Config(
        vocab_size=512, n_positions=64, n_embd=64, n_layer=n_layer, n_head=4, bos_token_id=0, eos_token_id=0
    )
    with torch.device("meta"):
        return GPT2LMHeadModel(cfg)


def changes(ex, repeat: int) -> dict[str, list[Callable[[], None]]]:
    """Per control, ``repeat`` value changes (the cache is cleared before each: all are misses)."""
    lay = ex.tensor_layout
    shared = [s.index for s in lay.storages if len(s.names) > 1]
    if len(shared) < repeat + 1:
        shared = [s.index for s in lay.storages]

    def set_value(widget, value):
        return lambda: setattr(widget, "value", value)

    def flip(widget):
        return lambda: setattr(widget, "value", not widget.value)

    bys = ("span", "overlap", "storage")
    plans = {
        "group by": [set_value(ex.by_toggle, bys[k % 3]) for k in range(repeat)],
        "name filter": [set_value(ex.name_filter, rf"\.{k}\.|layers\.{k}\b") for k in range(repeat)],
        "only shared": [flip(ex.only_shared_box) for _ in range(repeat)],
        "unreferenced": [flip(ex.unreferenced_box) for _ in range(repeat)],
        "expand simple": [flip(ex.expand_box) for _ in range(repeat)],
        "storage": [set_value(ex.storage_picker, shared[k % len(shared)]) for k in range(1, repeat + 1)],
        "zoom": [lambda k=k: _zoom(ex, k) for k in range(repeat)],
    }
    return plans


def _zoom(ex, k: int) -> None:
    n = len(ex.zoom.options)
    ex.zoom.index = (k % (n // 3), n - 2 - (k % (n // 3)))


def time_changes(ex, plan: list[Callable[[], None]]) -> list[float]:
    out = []
    for act in plan:
        ex.clear_cache()
        before = ex.png
        t0 = time.perf_counter()
        act()
        out.append(1000 * (time.perf_counter() - t0))
        assert ex.last_error is None, ex.last_traceback
        assert ex.png is not before, "no redraw happened"
    return out


def breakdown(ex, repeat: int = 5) -> str:
    """Median ms of the three steps of one redraw: plan the diagram, draw it, encode the PNG
    (with :func:`png_bytes` at ``compress_level=1``, as the explorer does)."""
    from matplotlib.figure import Figure

    from tensorviz.render.mpl import png_bytes, render

    fig, steps = Figure(), {"plan": [], "draw": [], "png": []}
    for _ in range(repeat):
        t0 = time.perf_counter()
        d = tv.diagram(ex.tensor_layout, by="storage")
        t1 = time.perf_counter()
        render(d, figure=fig)
        t2 = time.perf_counter()
        png_bytes(fig, dpi=100, compress_level=1)
        t3 = time.perf_counter()
        for k, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2)):
            steps[k].append(1000 * dt)
    return (
        ", ".join(f"{k} {statistics.median(v):.0f} ms" for k, v in steps.items())
        + f" ({len(d.lanes)} lanes, {len(d.bars)} bars)"
    )


def naive(obj: Any, options: dict[str, Any]) -> bytes:
    """What a first-try callback does: analyse again, new pyplot figure, save, close."""
    import matplotlib.pyplot as plt

    from tensorviz.render.mpl import render

    d = tv.diagram(tv.analyze(obj), **options)
    fig = plt.figure()
    render(d, figure=fig)  # sized to the diagram
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def stats(ms: list[float]) -> str:
    s = sorted(ms)
    p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
    return f"median {statistics.median(s):6.1f} ms   p95 {p95:6.1f} ms   (n={len(s)})"


def bench(name: str, obj: Any, repeat: int) -> None:
    t0 = time.perf_counter()
    ex = explore(obj, snapshot=False)
    first = 1000 * (time.perf_counter() - t0)
    lay = ex.tensor_layout
    print(
        f"\n== {name}: {len(lay)} tensors on {len(lay.storages)} storages; "
        f"tv.explore() incl. analyze + first render {first:.0f} ms"
    )
    every: list[float] = []
    per: dict[str, list[float]] = {}
    for control, plan in changes(ex, repeat).items():
        per[control] = ms = time_changes(ex, plan)
        every += ms
        print(f"  {control:<14} {stats(ms)}")
        if control == "name filter":
            ex.name_filter.value = ""  # the next controls act on the whole model again
    print(f"  {'ALL CHANGES':<14} {stats(every)}")
    print("  where the time goes (whole model, by storage): " + breakdown(ex))
    hits = []
    for by in ("storage", "span", "overlap") * repeat:  # states seen before: cache hits
        ex.name_filter.value = ""
        t0 = time.perf_counter()
        ex.by_toggle.value = by
        hits.append(1000 * (time.perf_counter() - t0))
    print(f"  {'cached state':<14} {stats(hits)}")
    naive_ms = []
    for k in range(max(3, repeat // 2)):  # the "group by" changes above, done naively
        t0 = time.perf_counter()
        naive(obj, dict(by=("span", "overlap", "storage")[k % 3]))
        naive_ms.append(1000 * (time.perf_counter() - t0))
    print(f"  {'naive group by':<14} {stats(naive_ms)}  (re-analyse + plan + new pyplot figure + PNG)")
    mine = statistics.median(per["group by"])
    print(
        f"  group by: explorer {mine:.0f} ms vs naive {statistics.median(naive_ms):.0f} ms "
        f"({statistics.median(naive_ms) / mine:.1f}x); a cached state is "
        f"{statistics.median(naive_ms) / statistics.median(hits):.0f}x faster than naive"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="changes timed per control")
    args = ap.parse_args()
    torch.manual_seed(0)
    bench("gpt2-meta", gpt2_meta(), args.repeat)
    gc.collect()
    bench("synthetic", synthetic_state_dict(1000), args.repeat)


if __name__ == "__main__":
    main()
