"""How long does one explorer control change take on a 1,000-tensor model?

For each control (grouping, name filter, only shared, unreferenced bytes, expand simple,
storage, byte-range zoom) the bench sets the control's value the way a browser click does
(``widget.value = ...``; the redraw runs synchronously in the observer) and times until the new
PNG is in the ``ipywidgets.Image``. Every measured state is new (a cache miss); cache hits are
measured separately. Prints median and p95 in milliseconds per control, then the same change done
naively in the same run: re-analyse the model, plan the diagram, draw it on a fresh pyplot
figure, save the PNG and close the figure.

Two models, both ~1,000 named tensors, metadata only (meta device / tiny storages):

* ``gpt2-meta``   -- a transformers GPT-2 on the meta device, 83 blocks, tied embeddings;
* ``synthetic``   -- 100 blocks of: 4 plain params, a tied pair, a fused qkv with q/k row views,
                     a transpose (or a column slice) -- shared storages everywhere.

Target (issue 4): a control change produces the new image in well under 300 ms.

    .venv/bin/python bench/bench_explorer.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import time
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

import tensorviz as tv  # noqa: E402
from tensorviz.widgets import explore  # noqa: E402


def gpt2_meta(n_layer: int = 83):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    cfg = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=n_layer, n_head=4,
                     bos_token_id=0, eos_token_id=0)
    with torch.device("meta"):
        return GPT2LMHeadModel(cfg)


def synthetic(n: int = 1000) -> dict[str, torch.Tensor]:
    sd: dict[str, torch.Tensor] = {}
    i = 0
    while len(sd) < n:
        p = f"layers.{i}."
        for j in range(4):
            sd[p + f"p{j}"] = torch.empty(16, 16)
        tied = torch.empty(32, 16)
        sd[p + "emb"], sd[p + "head"] = tied, tied
        qkv = torch.empty(48, 16)
        sd[p + "qkv"], sd[p + "q"], sd[p + "k"] = qkv, qkv[:16], qkv[16:32]
        sd[p + ("t" if i % 5 else "col")] = sd[p + "p0"].t() if i % 5 else qkv[:, 1:3]
        i += 1
    return dict(list(sd.items())[:n])


def changes(ex, repeat: int) -> dict[str, list[Callable[[], None]]]:
    """Per control, ``repeat`` value changes that each lead to a state not seen before."""
    lay = ex.tensor_layout
    shared = [s.index for s in lay.storages if len(s.names) > 1]
    if len(shared) < repeat + 1:
        shared = [s.index for s in lay.storages]
    plans: dict[str, list[Callable[[], None]]] = {}

    def setter(widget, value):
        return lambda: setattr(widget, "value", value)

    bys = ["span", "overlap", "storage"]
    combos = [(by, sh, un) for sh in (False, True) for un in (True, False) for by in bys]
    plans["group by"] = []
    for k in range(repeat):  # toggle 'by' on top of changing other switches quietly
        by, sh, un = combos[k % len(combos)]
        plans["group by"].append(_quietly(ex, sh, un, by))
    plans["name filter"] = [setter(ex.name_filter, rf"\.{k}\.|layers\.{k}\b") for k in range(repeat)]
    plans["only shared"] = [_flip_with_filter(ex, ex.only_shared_box, rf"\.{k + 40}\.") for k in range(repeat)]
    plans["unreferenced"] = [_flip_with_filter(ex, ex.unreferenced_box, rf"\.{k + 60}\.") for k in range(repeat)]
    plans["expand simple"] = [_flip_with_filter(ex, ex.expand_box, rf"h\.{k + 20}\.|layers\.{k + 20}\.")
                              for k in range(repeat)]
    plans["storage"] = [setter(ex.storage_picker, shared[k % len(shared)]) for k in range(1, repeat + 1)]
    plans["zoom"] = [_zoom(ex, k) for k in range(repeat)]
    return plans


def _quietly(ex, only_shared: bool, unref: bool, by: str) -> Callable[[], None]:
    def prepare():
        ex._quiet = True
        ex.only_shared_box.value, ex.unreferenced_box.value = only_shared, unref
        ex.name_filter.value = f"^(?!zzz{time.perf_counter_ns()})"  # a new state every time
        ex._quiet = False

    def act():
        ex.by_toggle.value = by if ex.by_toggle.value != by else "span"

    act.prepare = prepare
    return act


def _flip_with_filter(ex, box, pattern: str) -> Callable[[], None]:
    def prepare():
        ex._quiet = True
        ex.name_filter.value = pattern
        ex._quiet = False

    def act():
        box.value = not box.value

    act.prepare = prepare
    return act


def _zoom(ex, k: int) -> Callable[[], None]:
    def prepare():
        if ex.storage_picker.value < 0:
            lay = ex.tensor_layout
            ex.storage_picker.value = max(lay.storages, key=lambda s: (len(s.names), s.nbytes)).index

    def act():
        n = len(ex.zoom.options)
        ex.zoom.index = (k % (n // 3), n - 1 - (k % (n // 3)) - 1)

    act.prepare = prepare
    return act


def time_changes(ex, plan: list[Callable[[], None]]) -> list[float]:
    out = []
    for act in plan:
        getattr(act, "prepare", lambda: None)()
        before, misses = ex.picture.value, ex._renderer.misses
        t0 = time.perf_counter()
        act()
        dt = 1000 * (time.perf_counter() - t0)
        assert ex.last_error is None, ex.last_traceback
        assert ex.picture.value != before or ex._renderer.misses > misses, "no redraw happened"
        out.append(dt)
    return out


def naive(obj: Any, options: dict[str, Any]) -> bytes:
    """What a first-try callback does: analyse again, new pyplot figure, save, close."""
    import matplotlib.pyplot as plt

    from tensorviz.render.mpl import figure_size, render

    d = tv.diagram(tv.analyze(obj), **options)
    w, h, _ = figure_size(d)
    fig, ax = plt.subplots(figsize=(w, h))
    render(d, ax=ax)
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
    print(f"\n== {name}: {len(lay)} tensors on {len(lay.storages)} storages; "
          f"tv.explore() incl. analyze + first render {first:.0f} ms")
    every: list[float] = []
    for control, plan in changes(ex, repeat).items():
        ms = time_changes(ex, plan)
        every += ms
        print(f"  {control:<14} {stats(ms)}")
    print(f"  {'ALL CHANGES':<14} {stats(every)}")
    hits = []
    for by in ("storage", "span", "overlap") * repeat:  # states seen before: cache hits
        ex.name_filter.value = ""
        t0 = time.perf_counter()
        ex.by_toggle.value = by
        hits.append(1000 * (time.perf_counter() - t0))
    print(f"  {'cached state':<14} {stats(hits)}")
    naive_ms = []
    for k in range(max(3, repeat // 3)):
        opts = dict(by=("span", "overlap", "storage")[k % 3], names=rf"\.{k}\.")
        t0 = time.perf_counter()
        naive(obj, opts)
        naive_ms.append(1000 * (time.perf_counter() - t0))
    print(f"  {'naive redo':<14} {stats(naive_ms)}")
    print(f"  explorer change vs naive redo: {statistics.median(naive_ms) / statistics.median(every):.1f}x "
          f"faster (median); cached state {statistics.median(naive_ms) / statistics.median(hits):.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="changes timed per control")
    args = ap.parse_args()
    torch.manual_seed(0)
    bench("gpt2-meta", gpt2_meta(), args.repeat)
    gc.collect()
    bench("synthetic", synthetic(), args.repeat)


if __name__ == "__main__":
    main()
