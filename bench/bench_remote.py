"""Remote headers: a 72-shard index (BLOOM-sized: 846 tensors) on a fake Hub on 127.0.0.1.

tensorviz's ``tv.analyze("hf://org/bloom")`` against huggingface_hub's own
``HfApi.get_safetensors_metadata`` on the same fake Hub, in the same run: requests and body bytes
as the server counted them, and wall time (best of 3). Goal (issue 28): no more requests and
bytes than huggingface_hub, and at most 1.2x its time. Also: the second look (headers cached)
(The hostile-server cases are tests: tests/sources/test_remote_hostile.py, each a named error.)

Run: .venv/bin/python bench/bench_remote.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

HOME = tempfile.mkdtemp(prefix="tv-bench-remote-")
os.environ["HF_HOME"] = os.path.join(HOME, "hf")  # the peer's download cache, not the user's
os.environ["TENSORVIZ_CACHE"] = os.path.join(HOME, "tv")
os.environ.pop("HF_TOKEN", None)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # the repository root: tests.helpers

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from tests.helpers.remote_servers import FakeHub  # noqa: E402

SHA = "b" * 40
SHARDS, LAYERS = 72, 70
NAMES = (
    "input_layernorm.weight",
    "input_layernorm.bias",
    "self_attention.query_key_value.weight",
    "self_attention.query_key_value.bias",
    "self_attention.dense.weight",
    "self_attention.dense.bias",
    "post_attention_layernorm.weight",
    "post_attention_layernorm.bias",
    "mlp.dense_h_to_4h.weight",
    "mlp.dense_h_to_4h.bias",
    "mlp.dense_4h_to_h.weight",
    "mlp.dense_4h_to_h.bias",
)


def build(folder: str) -> int:
    """72 shards of BLOOM's names (70 layers of 12 tensors + embeddings), each shard ~0.5 MB so
    that a 100 KB first range holds tensor data, as real multi-GB shards do."""
    names = ["word_embeddings.weight", "word_embeddings_layernorm.weight", "word_embeddings_layernorm.bias"]
    names += [f"h.{i}.{n}" for i in range(LAYERS) for n in NAMES] + ["ln_f.weight", "ln_f.bias", "lm_head.weight"]
    weight_map = {}
    for s in range(SHARDS):
        chunk = names[s * len(names) // SHARDS : (s + 1) * len(names) // SHARDS]
        fname = f"model_{s + 1:05d}-of-{SHARDS:05d}.safetensors"
        size = max(1, 131072 // max(1, len(chunk)))
        save_file({n: torch.zeros(size) for n in chunk}, os.path.join(folder, fname), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(chunk, fname))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    return len(names)


def best(fn, hub, n=3):
    times, stats = [], None
    for _ in range(n):
        hub.stats.reset()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        stats = (len(hub.stats.requests), hub.stats.bytes)
    return min(times), stats


def main() -> None:
    folder = os.path.join(HOME, "bloom")
    os.makedirs(folder)
    n = build(folder)
    with FakeHub({"org/bloom": {"commits": {SHA: folder}, "refs": {"main": SHA}}}) as hub:
        os.environ["HF_ENDPOINT"] = hub.url  # huggingface_hub reads its endpoint setting on import
        from huggingface_hub import HfApi

        import tensorviz as tv

        api = HfApi(endpoint=hub.url)
        api.get_safetensors_metadata("org/bloom")  # warm: the peer's once-a-day registry request
        os.environ["TENSORVIZ_CACHE"] = "off"
        tv_t, (tv_req, tv_bytes) = best(lambda: tv.analyze("hf://org/bloom"), hub)
        peer_t, (peer_req, peer_bytes) = best(lambda: api.get_safetensors_metadata("org/bloom"), hub)
        os.environ["TENSORVIZ_CACHE"] = os.path.join(HOME, "tv")
        tv.analyze("hf://org/bloom")
        again_t, (again_req, again_bytes) = best(lambda: tv.analyze("hf://org/bloom"), hub)
        layout = tv.analyze("hf://org/bloom")
    assert len(layout.views) == n
    print(f"{SHARDS}-shard index, {n} tensors, fake Hub on 127.0.0.1 (best of 3)")
    print(
        f"  huggingface_hub get_safetensors_metadata: {peer_req:4d} requests {peer_bytes:>10,} B  {peer_t * 1e3:7.1f} ms"
    )
    print(
        f"  tensorviz analyze('hf://org/bloom'):       {tv_req:4d} requests {tv_bytes:>10,} B  {tv_t * 1e3:7.1f} ms"
        f"  ({tv_req / peer_req:.2f}x requests, {tv_bytes / peer_bytes:.3f}x bytes, {tv_t / peer_t:.2f}x time)"
    )
    print(
        f"  tensorviz, second look (headers cached):  {again_req:4d} requests {again_bytes:>10,} B  {again_t * 1e3:7.1f} ms"
    )


if __name__ == "__main__":
    main()
