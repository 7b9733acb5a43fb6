"""Header-only analysis of a sharded safetensors checkpoint with 20,000 tensors, next to peers.

Generates (in a temporary folder) a 4-shard checkpoint with ``--n`` tensors and an index, then
prints, in one run (best of ``--repeat`` runs each, milliseconds and ratios to safe_open):

* safe_open keys   -- ``safetensors.safe_open`` on every shard, listing its keys (the peer);
* safe_open meta   -- the same plus each tensor's shape and dtype (``get_slice``), the metadata
                      tensorviz reports;
* json floor       -- read the 8-byte length + header of every shard and ``json.loads`` it;
* analyze          -- ``tv.analyze(index)``: parse, validate, check the weight map, build the layout;
* analyze+exact    -- also ``layout.storages`` (coverage) and ``layout.groups("overlap")``;
* text             -- ``layout.to_text()`` on top.

    .venv/bin/python bench/bench_files.py [--n 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import struct
import tempfile
import time

import torch
from safetensors import safe_open
from safetensors.torch import save_file

import tensorviz as tv


def write_checkpoint(folder: str, n: int, shards: int = 4) -> str:
    """``n`` small tensors of mixed dtypes and ranks over ``shards`` files, plus the index."""
    dtypes = (torch.float32, torch.bfloat16, torch.float16, torch.int64)
    weight_map: dict[str, str] = {}
    total = 0
    per = -(-n // shards)
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {}
        for i in range(s * per, min(n, (s + 1) * per)):
            layer, kind = divmod(i, 10)
            shape = (4,) if kind % 3 == 0 else (2, 3) if kind % 3 == 1 else (2, 1, 2)
            tensors[f"model.layers.{layer}.w{kind}"] = torch.zeros(shape, dtype=dtypes[kind % 4])
        save_file(tensors, os.path.join(folder, name), metadata={"format": "pt"})
        total += sum(t.nbytes for t in tensors.values())
        weight_map.update(dict.fromkeys(tensors, name))
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return index


def best(fn, repeat: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        index = write_checkpoint(folder, args.n)
        shards = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors"))

        def safe_keys():
            keys = []
            for p in shards:
                with safe_open(p, "pt") as f:
                    keys.extend(f.keys())
            return keys

        def safe_meta():
            out = []
            for p in shards:
                with safe_open(p, "pt") as f:
                    for k in f.keys():
                        sl = f.get_slice(k)
                        out.append((k, sl.get_shape(), sl.get_dtype()))
            return out

        def json_floor():
            heads = []
            for p in shards:
                with open(p, "rb") as f:
                    n = struct.unpack("<Q", f.read(8))[0]
                    heads.append(json.loads(f.read(n)))
            return heads

        def exact():
            layout = tv.analyze(index)
            layout.storages, layout.groups("overlap")
            return layout

        rows = [
            ("safe_open keys", safe_keys),
            ("safe_open meta", safe_meta),
            ("json floor", json_floor),
            ("analyze", lambda: tv.analyze(index)),
            ("analyze+exact", exact),
            ("text", lambda: exact().to_text()),
        ]
        results = {name: best(fn, args.repeat) for name, fn in rows}
        keys = results["safe_open keys"][1]
        layout = results["analyze"][1]
        assert sorted(keys) == sorted(layout.names), "tensorviz and safe_open disagree on the keys"
        size = sum(os.path.getsize(p) for p in shards)
        print(f"{args.n} tensors in {len(shards)} shards ({size / 2**20:.1f} MiB), best of {args.repeat}:")
        base = results["safe_open keys"][0]
        for name, (seconds, _) in results.items():
            print(f"  {name:<15} {seconds * 1e3:8.1f} ms   {seconds / base:5.2f}x safe_open keys")
        print(
            f"  layout: {len(layout)} views on {len(layout.storages)} storages, "
            f"{len(layout.skipped)} skipped, problems: {len(layout.metadata.get('problems', []))}"
        )


if __name__ == "__main__":
    main()
