"""How fast is ``tv.analyze`` next to its peers, on one synthetic 100k-tensor state dict?

Prints, in one run (best of ``--repeat`` runs each, seconds and ratios):

* floor      -- a bare loop reading each tensor's storage id, offset, shape, stride and dtype;
* analyze    -- ``tv.analyze(state_dict)``;
* exact      -- ``tv.analyze`` + ``layout.groups("overlap")`` + ``layout.storages`` (coverage):
                the full exact answer;
* safetensors -- ``safetensors.torch._find_shared_tensors`` (storage-level sharing only). It
                raises on shared non-contiguous tensors (it calls ``view(-1)``), so it is timed on
                the contiguous tensors only, next to ``tv.analyze`` on that same subset;

then two footprint cases: a column slice of a 50k x 4096 float32 matrix (50k runs) and overlap
grouping of 4096 interleaved column views of one matrix. ``--stages`` also splits the exact
answer on the whole dict into its steps (where the time goes).

Target (issue 2): analyze within 2x of the floor and no slower than safetensors.

    .venv/bin/python bench/bench_analyze.py [--n 100000] [--repeat 5] [--stages]
"""

from __future__ import annotations

import argparse
import gc
import time

import torch

import tensorviz as tv
from tensorviz.core import footprint as fp


def synthetic_state_dict(n: int) -> dict[str, torch.Tensor]:
    """About ``n`` named tensors, tiny storages (metadata is what is measured, not bytes).

    Per block of 10 names: 4 independent params, a tied pair (2 names, one tensor), a fused qkv
    weight with q/k row slices (3 names), and a transpose of an independent param (1 name); every
    fifth block swaps the transpose for a column slice.
    """
    sd: dict[str, torch.Tensor] = {}
    i = 0
    while len(sd) < n:
        p = f"layers.{i}."
        for j in range(4):
            sd[p + f"p{j}"] = torch.empty(4, 4)
        tied = torch.empty(8, 4)
        sd[p + "emb"] = tied
        sd[p + "head"] = tied
        qkv = torch.empty(12, 4)
        sd[p + "qkv"] = qkv
        sd[p + "q"] = qkv[:4]
        sd[p + "k"] = qkv[4:8]
        sd[p + ("t" if i % 5 else "col")] = sd[p + "p0"].t() if i % 5 else qkv[:, 1:3]
        i += 1
    return dict(list(sd.items())[:n])


def floor(sd: dict[str, torch.Tensor]) -> list:
    sid = torch._C._storage_id
    return [(sid(t), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype) for t in sd.values()]


def exact(sd: dict[str, torch.Tensor]) -> tv.Layout:
    layout = tv.analyze(sd)
    layout.groups("overlap")
    _ = layout.storages
    return layout


def best_of(rows: list[tuple[str, object, object]], repeat: int) -> dict[str, float]:
    """Best CPU time of each ``(label, fn, arg)``; CPU time and interleaved runs, so other
    processes on a busy machine disturb the ratios as little as possible."""
    times: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for _ in range(repeat):
        for label, fn, arg in rows:
            gc.collect()
            t0 = time.process_time()
            fn(arg)
            times[label].append(time.process_time() - t0)
    return {label: min(ts) for label, ts in times.items()}


def safetensors_accepts(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors ``_find_shared_tensors`` can handle: it calls ``view(-1)`` on shared ones."""
    return {k: t for k, t in sd.items() if t.is_contiguous()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--stages", action="store_true", help="split the exact answer into its steps")
    args = ap.parse_args()
    from safetensors.torch import _find_shared_tensors

    sd = synthetic_state_dict(args.n)
    layout = tv.analyze(sd)
    print(
        f"{len(sd)} tensors, {len(layout.storages)} storages, "
        f"{len(layout.shared('storage'))} shared storages, {len(layout.shared('overlap'))} overlap groups"
    )
    try:
        _find_shared_tensors(sd)
        print("safetensors _find_shared_tensors accepts the whole dict")
    except RuntimeError as err:
        print(f"safetensors _find_shared_tensors raises on the whole dict: {str(err).splitlines()[0][:60]}...")
    contiguous = safetensors_accepts(sd)
    rows = [
        ("floor: storage id, offset, shape, stride, dtype", floor, sd),
        ("tv.analyze", tv.analyze, sd),
        ("tv.analyze + groups('overlap') + storages", exact, sd),
        (f"tv.analyze, {len(contiguous)} contiguous only", tv.analyze, contiguous),
        (f"tv.analyze + groups + storages, {len(contiguous)} contiguous", exact, contiguous),
        (f"safetensors, {len(contiguous)} contiguous only", _find_shared_tensors, contiguous),
    ]
    times = best_of(rows, args.repeat)
    base, safe = times[rows[0][0]], times[rows[-1][0]]
    print(f"{'best of ' + str(args.repeat):50s} {'CPU s':>8s} {'x floor':>8s} {'x safetensors':>14s}")
    for name, t in times.items():
        print(f"{name:50s} {t:8.3f} {t / base:8.2f} {t / safe:14.2f}")

    if args.stages:
        print_stages(sd, args.repeat)

    big = torch.empty(50_000, 4096, device="meta")
    col = big[:, 100:200]
    col_args = (col.storage_offset() * 4, tuple(col.shape), col.stride(), 4)
    f = fp.footprint(*col_args)
    ms = best_ms(lambda: fp.footprint(*col_args), args.repeat)
    print(
        f"footprint of a column slice of a 50k x 4096 float32 matrix: {len(f.runs)} runs, exact={f.exact}, {ms:.1f} ms"
    )

    m = torch.empty(64, 4096, device="meta")
    cols = {f"c{j}": m[:, j] for j in range(4096)}
    for label, views in (
        ("4096 interleaved column views of a 64 x 4096 matrix", cols),
        ("the same plus the matrix itself", {"m": m, **cols}),
    ):
        groups = tv.analyze(views).groups("overlap")
        ms = best_ms(
            lambda views=views: (lambda lay: (lay.groups("overlap"), lay.storages))(tv.analyze(views)), args.repeat
        )
        print(f"analyze + overlap groups + coverage of {label}: {len(groups)} groups, {ms:.1f} ms")


def stages(sd: dict[str, torch.Tensor]) -> dict[str, float]:
    """CPU seconds of each step of the exact answer, in the order ``exact`` runs them (private
    steps of Layout), each with the garbage collector's pass over what it made (that pass
    would run anyway at the next allocation; here it is charged to the step that caused it)."""
    gc.collect()
    steps = {}
    t0 = time.process_time()
    layout = tv.analyze(sd)
    for label, step in (
        ("analyze (collect rows)", None),
        ("columns (_table)", lambda: layout._table),
        ("sweep + grouping + names", lambda: layout._group_columns("overlap")),
        ("Group records", lambda: layout.groups("overlap")),
        ("coverage columns", lambda: layout._storage_columns()),
        ("Storage records", lambda: layout.storages),
    ):
        if step is not None:
            step()
        gc.collect(0)
        t1 = time.process_time()
        steps[label], t0 = t1 - t0, t1
    return steps


def print_stages(sd: dict[str, torch.Tensor], repeat: int) -> None:
    runs = [stages(sd) for _ in range(repeat)]
    print(f"steps of the exact answer on all {len(sd)} tensors (best of {repeat}, CPU ms):")
    for label in runs[0]:
        print(f"  {label:30s} {min(r[label] for r in runs) * 1e3:8.1f}")


def best_ms(fn, repeat: int) -> float:
    """Best CPU time of ``fn()`` in milliseconds."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times) * 1e3


if __name__ == "__main__":
    main()
