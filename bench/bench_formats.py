"""Opening a 1,000-tensor GGUF header-only, next to ``gguf.GGUFReader`` on the same file.

Generates (in a temporary folder) a GGUF file written by ``gguf.GGUFWriter``: ``--n`` tensors of
mixed types (F32, F16, Q8_0, Q4_K, Q6_K) like a small llama, a 32,000-token vocabulary with
scores and token types, then prints in one run (best of ``--repeat``, milliseconds, and the
peak memory of one call in a fresh forked child: RSS above the child's start, and Python's own
allocations by tracemalloc):

* GGUFReader       -- ``gguf.GGUFReader(path)`` (the peer: ggml's own Python reader);
* header           -- ``tensorviz.sources.formats.gguf.read_gguf_header(path)``: the validated header;
* analyze          -- ``tv.analyze(path)``: header, views and the Layout;
* analyze+storages -- also ``layout.storages`` (coverage of the file).

Then the same for an ONNX model with ``--n`` initializers in one external data file, next to
``onnx.load(path, load_external_data=False)`` (the peer: it parses the whole model proto).

    .venv/bin/python bench/bench_formats.py [--n 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc

import gguf
import numpy as np

import tensorviz as tv
from tensorviz.sources.formats.gguf import read_gguf_header

Q = gguf.GGMLQuantizationType


def write_model(path: str, n: int) -> None:
    """``n`` tensors as a llama's blocks would hold them, plus a 32k vocabulary."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(4096)
    w.add_embedding_length(256)
    w.add_block_count(n // 10)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"tok{i}" for i in range(32_000)])
    w.add_token_scores([0.0] * 32_000)
    w.add_token_types([1] * 32_000)
    kinds = ((None, np.float32), (None, np.float16), (Q.Q8_0, 34), (Q.Q4_K, 144), (Q.Q6_K, 210))
    for i in range(n):
        qtype, what = kinds[i % len(kinds)]
        name = f"blk.{i // 10}.w{i % 10}.weight"
        if qtype is None:
            w.add_tensor(name, np.zeros((4, 256), dtype=what))
        else:
            block = gguf.GGML_QUANT_SIZES[qtype][0]
            w.add_tensor(name, np.zeros((4, 256 // block * what), dtype=np.uint8), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_onnx(path: str, n: int) -> None:
    import onnx
    from onnx import helper, numpy_helper

    inits = [numpy_helper.from_array(np.zeros((4, 64), np.float32), f"blk.{i // 10}.w{i % 10}") for i in range(n)]
    m = helper.make_model(helper.make_graph([], "g", [], [], initializer=inits))
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.data", size_threshold=0)  # fmt: skip


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def _hwm_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def memory(fn) -> tuple[float, float]:
    """(peak RSS above the start, tracemalloc peak) of one call, in MiB, in a forked child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        rss0 = _rss_kib()
        tracemalloc.start()
        keep = fn()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out = json.dumps([(_hwm_kib() - rss0) / 1024, peak / 2**20, keep is not None])
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096)
    os.waitpid(pid, 0)
    rss, traced, _ = json.loads(data)
    return rss, traced


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.gguf")
        write_model(path, args.n)
        size = os.path.getsize(path)
        reader = gguf.GGUFReader(path)
        layout = tv.analyze(path)
        assert [(t.name, int(t.data_offset), int(t.n_bytes)) for t in reader.tensors] == [
            (v.name, v.start, v.stop - v.start) for v in layout.views
        ]
        del reader, layout
        runs = {
            "GGUFReader": lambda: gguf.GGUFReader(path),
            "header": lambda: read_gguf_header(path),
            "analyze": lambda: tv.analyze(path),
            "analyze+storages": lambda: (lambda lay: (lay.storages, lay)[1])(tv.analyze(path)),
        }
        print(
            f"{args.n} tensors, 32,000-token vocabulary, {size / 2**20:.1f} MiB file; python {sys.version.split()[0]}"
        )
        table(runs, args.repeat)
        import onnx

        onnx_path = os.path.join(d, "model.onnx")
        write_onnx(onnx_path, args.n)
        print(f"\nONNX: {args.n} external initializers in one data file")
        table(
            {
                "onnx.load": lambda: onnx.load(onnx_path, load_external_data=False),
                "analyze": lambda: tv.analyze(onnx_path),
            },
            args.repeat,
        )


def table(runs: dict, repeat: int) -> None:
    """Time and memory of each run; the first is the peer the others are compared with."""
    print(f"{'':18} {'ms (best)':>10} {'x peer':>7} {'RSS MiB':>8} {'x peer':>7} {'traced MiB':>11} {'x peer':>7}")
    peer = None
    for name, fn in runs.items():
        ms = best(fn, repeat)
        rss, traced = memory(fn)
        peer = peer or (ms, max(rss, 1e-9), max(traced, 1e-9))
        print(
            f"{name:18} {ms:10.1f} {ms / peer[0]:7.2f} {rss:8.1f} {rss / peer[1]:7.2f} "
            f"{traced:11.2f} {traced / peer[2]:7.2f}"
        )


if __name__ == "__main__":
    main()
