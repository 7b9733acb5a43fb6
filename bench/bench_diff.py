"""How fast is ``tv.diff``, next to its peers in the same run?

Prints (best CPU time of ``--repeat`` interleaved runs each, seconds and ratios):

* state dicts -- ``tv.diff(a, b)`` of two synthetic state dicts of ``--n`` tensors (and of
  ``--big`` tensors), next to ``tv.analyze(a)`` of one side (goal: diff <= 2.5x one analyze,
  linear in tensors), and ``print`` of each (the words a user reads). Side b is side a with 1 %
  of the tensors cast to float16, 1 % of the ties broken (cloned) and every name under a
  ``module.`` prefix: all of the diff's work is done.
  b holds most of a's tensor objects (as a wrapped model does), so ``tv.diff`` reads those once
  (``tensorviz.sources.shared``); a third row gives b as fresh (detached) tensors, where nothing is
  shared. Also: ``analyze(a)`` with its table built (the work ``analyze`` defers and any answer does),
  the comparison alone (``diff_layouts`` of two tabled layouts), and the *floor* of a diff of two
  sides that share no tensor objects (:func:`floor_diff`: the least any diff of live tensors in
  Python does -- no ties, sharing, totals or modules), which shows how much of the goal reading
  two sides alone takes;
* indexes -- ``tv.diff`` of two 100-shard ``*.safetensors.index.json`` checkpoints (the same
  tensors sharded two ways), header-only, next to ``tv.analyze`` of one index;
* content -- ``tv.diff(..., content=True)`` of two safetensors files of ``--mib`` MiB each,
  next to reading the same files with ``readinto`` and hashing every byte with BLAKE2b
  ("cat-speed hashing"), and plain reading alone (goal: >= 0.8x of cat-speed hashing).

    .venv/bin/python bench/bench_diff.py [--n 100000] [--big 1000000] [--repeat 3] [--mib 256]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import operator
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from bench_analyze import synthetic_state_dict
from bench_savecheck import best_of

import tensorviz as tv
from tensorviz.core.diff import diff_layouts


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Best CPU time of ``repeat`` runs of ``fn``."""
    return best_of([("fn", fn)], repeat)["fn"]


def other_side(sd: dict[str, torch.Tensor], prefix: str = "module.") -> dict[str, torch.Tensor]:
    """Side b: 1 % of the tensors cast to float16, 1 % of the ties cloned, names under ``prefix``."""
    out = {}
    for i, (name, t) in enumerate(sd.items()):
        if i % 100 == 7:
            t = t.half()
        elif i % 100 == 5 and name.endswith("head"):
            t = t.clone()
        out[prefix + name] = t
    return out


def read_side(sd: dict[str, torch.Tensor]) -> tuple[list[str], list[Any]]:
    """One side's facts in one bare loop: the fields a diff compares (device, storage size,
    dtype, shape, stride, offset) and the storage id and address that sharing is found by; the
    storages numbered by id (numpy's sort). No name is checked, nothing is skipped."""
    names, sid, dev, size, ptr, dtype, shape, stride, offset = ([] for _ in range(9))
    for name, t in sd.items():
        st = t.untyped_storage()
        names.append(name)
        sid.append(st._cdata)
        dev.append(st.device)
        size.append(st.nbytes())
        ptr.append(st.data_ptr())
        dtype.append(t.dtype)
        shape.append(t.shape)
        stride.append(t.stride())
        offset.append(t.storage_offset())
    k = len(names)
    ints = [np.fromiter(col, np.int64, k) for col in (sid, size, ptr, offset)]
    storages = np.unique(ints[0], return_inverse=True)[1]
    return names, [dev, ints[1], dtype, shape, stride, ints[3], ints[2], storages]


def floor_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], prefix: str = "module.") -> int:
    """The floor of a diff of two sides that share no tensor objects: read both sides
    (:func:`read_side`), match names (exact, else under ``prefix``) with a dict, and count the
    matched pairs' differing fields (numpy for numbers, one C-level ``map`` for the rest).
    The collector is paused, as ``tv.analyze`` and ``tv.diff`` pause it."""
    was = gc.isenabled()
    gc.disable()
    try:
        names_a, cols_a = read_side(a)
        names_b, cols_b = read_side(b)
        where = dict(zip(names_b, range(len(names_b))))
        pos = np.fromiter((where.get(k, where.get(prefix + k, -1)) for k in names_a), np.int64, len(names_a))
        ia = np.flatnonzero(pos >= 0)
        ib = pos[ia]
        changed = 0
        for x, y in zip(cols_a[:6], cols_b[:6]):
            if isinstance(x, np.ndarray):
                changed += int(np.count_nonzero(x[ia] != y[ib]))
            else:
                xs = np.fromiter(x, object, len(x))[ia].tolist()
                ys = np.fromiter(y, object, len(y))[ib].tolist()
                changed += sum(map(operator.ne, xs, ys))
        return changed
    finally:
        if was:
            gc.enable()


def state_dicts(n: int, repeat: int) -> None:
    a = synthetic_state_dict(n)
    b = other_side(a)
    la, lb = tv.analyze(a), tv.analyze(b)
    la._table, lb._table  # noqa: B018 -- tabled once: "compare" below is the comparison alone
    same_names = other_side(a, prefix="")
    fresh = {name: t.detach() for name, t in b.items()}  # b's tensors as new objects (a state_dict())
    rows = [
        ("diff", lambda: tv.diff(a, b)),
        ("diff, same names", lambda: tv.diff(a, same_names)),
        ("diff, fresh objects", lambda: tv.diff(a, fresh)),
        ("floor", lambda: floor_diff(a, fresh)),
        ("analyze", lambda: tv.analyze(a)),
        ("analyze+table", lambda: tv.analyze(a)._table),
        ("compare", lambda: diff_layouts(la, lb)),
        ("print diff", lambda: str(tv.diff(a, b))),
        ("print analyze", lambda: str(tv.analyze(a))),
    ]
    t = best_of(rows, repeat)
    d = tv.diff(a, b)
    print(
        f"state dicts, {n:>9,} tensors (CPU s): diff {t['diff']:6.3f}   analyze(a) {t['analyze']:6.3f}   "
        f"ratio {t['diff'] / t['analyze']:5.2f}x   analyze(a) + its table {t['analyze+table']:6.3f} "
        f"({t['diff'] / t['analyze+table']:4.2f}x)   comparing two tabled layouts {t['compare']:6.3f}"
    )
    print(
        f"    {len(d.renamed):,} renamed, {len(d.changed):,} changes, {len(d.ties_lost):,} ties lost; "
        f"with the names unchanged (no renames): diff {t['diff, same names']:6.3f} "
        f"({t['diff, same names'] / t['analyze']:5.2f}x analyze)"
    )
    print(
        f"    with b's tensors fresh objects (detached: nothing read once for both sides): "
        f"diff {t['diff, fresh objects']:6.3f} ({t['diff, fresh objects'] / t['analyze']:5.2f}x analyze); "
        f"the floor of any such diff {t['floor']:6.3f} ({t['floor'] / t['analyze']:5.2f}x analyze)"
    )
    print(
        f"    print(tv.diff(a, b)) {t['print diff']:6.3f} ({t['print diff'] / t['print analyze']:4.2f}x "
        f"print(tv.analyze(a)) {t['print analyze']:6.3f})"
    )


def write_index(folder: str, tensors: dict[str, torch.Tensor], shards: int) -> str:
    from safetensors.torch import save_file

    names = list(tensors)
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file({k: tensors[k] for k in part}, os.path.join(folder, fname))
        weight_map.update(dict.fromkeys(part, fname))
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return index


def indexes(repeat: int, per_shard: int = 100) -> None:
    torch.manual_seed(0)
    tensors = {f"model.layers.{i // 10}.w{i % 10}": torch.zeros(4, 4) for i in range(100 * per_shard)}
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "a"))
        os.mkdir(os.path.join(root, "b"))
        ia = write_index(os.path.join(root, "a"), tensors, 100)
        shuffled = dict(reversed(list(tensors.items())))
        ib = write_index(os.path.join(root, "b"), shuffled, 100)
        t_analyze = best(lambda: tv.analyze(ia), repeat)
        t_diff = best(lambda: tv.diff(ia, ib), repeat)
        moved = len(tv.diff(ia, ib).moved)
    print(
        f"two 100-shard indexes, {len(tensors):,} tensors: diff {t_diff:6.3f} s   analyze(index) {t_analyze:6.3f} s   "
        f"ratio {t_diff / t_analyze:4.2f}x   ({moved:,} tensors in another shard)"
    )


def hash_files(paths: list[str], chunk: int = 8 << 20, digest: bool = True) -> None:
    buf = bytearray(chunk)
    view = memoryview(buf)
    for path in paths:
        h = hashlib.blake2b(digest_size=16)
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view):
                if digest:
                    h.update(view[:n])


def content(mib: int, repeat: int) -> None:
    from safetensors.torch import save_file

    n = max(1, mib * (1 << 20) // (4 * 4096 * 256))  # 4 MiB tensors; at least one (a --mib under 4 made none)
    torch.manual_seed(0)
    tensors = {f"layers.{i}.w": torch.randn(4096, 256) for i in range(n)}
    with tempfile.TemporaryDirectory() as root:
        pa, pb = os.path.join(root, "a.safetensors"), os.path.join(root, "b.safetensors")
        save_file(tensors, pa)
        tensors["layers.0.w"][0, 0] += 1
        save_file(tensors, pb)
        size = os.path.getsize(pa) + os.path.getsize(pb)
        hash_files([pa, pb])  # warm the page cache for every contender alike
        t_read = best(lambda: hash_files([pa, pb], digest=False), repeat)
        t_hash = best(lambda: hash_files([pa, pb]), repeat)
        t_diff = best(lambda: tv.diff(pa, pb, content=True, progress=False), repeat)
        different = tv.diff(pa, pb, content=True, progress=False).content.different
    gib = size / (1 << 30)
    print(
        f"content=True, 2 x {size / 2 / (1 << 20):.0f} MiB: diff {t_diff:6.3f} s ({gib / t_diff:5.2f} GiB/s)   read+BLAKE2b {t_hash:6.3f} s "
        f"({gib / t_hash:5.2f} GiB/s)   read only {t_read:6.3f} s ({gib / t_read:5.2f} GiB/s)   "
        f"diff / cat-speed hashing: {t_hash / t_diff:4.2f}x   differ: {list(different)}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--big", type=int, default=1_000_000, help="0 to skip")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--mib", type=int, default=256)
    args = p.parse_args()
    state_dicts(args.n, args.repeat)
    if args.big:
        with tv.limits(live_names=2 * args.big):  # over the default budget for untrusted input, deliberately
            state_dicts(args.big, max(1, args.repeat - 1))
    indexes(args.repeat)
    content(args.mib, args.repeat)


if __name__ == "__main__":
    main()
