"""Remote sources: hf://, http(s):// and fsspec URLs read header-only, against real servers on
127.0.0.1 (tests/helpers/remote_servers.py). Every remote layout must equal the local layout of the same
files, view for view; what each look cost is counted by the server itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import save_file, save_model

import tensorviz as tv
from tensorviz.core.errors import FileFormatError, RemoteError, TooLargeError
from tests.helpers.remote_servers import FakeHub, FileServer

SHA1, SHA2 = "1" * 40, "2" * 40


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test has its own header cache (never the user's ~/.cache)."""
    monkeypatch.setenv("TENSORVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def hub_endpoint(monkeypatch):
    """Point huggingface_hub's endpoint setting at a fake Hub (restored after the test)."""
    from huggingface_hub import constants

    def point(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)

    return point


def _tied_model() -> torch.nn.Module:
    m = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16))
    m[1].weight = m[0].weight
    return m


def _sharded(folder, n_shards: int = 3, per_shard: int = 4) -> dict[str, torch.Tensor]:
    """A sharded safetensors folder with an index, as save_pretrained writes one."""
    os.makedirs(folder, exist_ok=True)
    weight_map, tensors = {}, {}
    for s in range(n_shards):
        name = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        shard = {f"layers.{s}.w{i}": torch.full((4 + i, 3), float(s)) for i in range(per_shard)}
        save_file(shard, os.path.join(folder, name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, name))
        tensors.update(shard)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return tensors


def _same_views(remote: tv.Layout, local: tv.Layout, url_of) -> None:
    """View for view equal, storages mapped from local paths to the URLs that serve them."""
    assert [v.name for v in remote.views] == [v.name for v in local.views]
    for r, here in zip(remote.views, local.views):
        assert (r.dtype, r.shape, r.stride, r.offset, r.itemsize, r.start, r.stop, r.device) == (
            here.dtype,
            here.shape,
            here.stride,
            here.offset,
            here.itemsize,
            here.start,
            here.stop,
            here.device,
        ), r.name
        assert r.storage == ("file", url_of(here.storage[1])), r.name
    assert [(s.nbytes, s.names, s.covered_nbytes) for s in remote.storages] == [
        (s.nbytes, s.names, s.covered_nbytes) for s in local.storages
    ]
    assert [g.names for g in remote.groups(by="span")] == [g.names for g in local.groups(by="span")]
    assert remote.skipped == local.skipped
    assert remote.metadata.get("problems") == local.metadata.get("problems")


# -- the same layout, wherever the bytes are ---------------------------------------------------------
def test_https_file_equals_local_file_in_one_request(tmp_path):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    local = tv.analyze(str(tmp_path / "model.safetensors"))
    with FileServer(str(tmp_path)) as srv:
        remote = tv.analyze(f"{srv.url}/model.safetensors")
        assert srv.stats.requests == [("GET", "/model.safetensors", "bytes=0-99999")]
        size = os.path.getsize(tmp_path / "model.safetensors")
        assert srv.stats.bytes == size == remote.metadata["remote"]["bytes"]  # a small file is all header + data
    _same_views(remote, local, lambda p: f"{srv.url}/model.safetensors")
    assert remote.metadata["__metadata__"] == {f"{srv.url}/model.safetensors": {"1.weight": "0.weight"}}
    assert remote.metadata["dropped"] == local.metadata["dropped"] == {"1.weight": "0.weight"}
    assert remote.metadata["remote"]["requests"] == 1
    assert f"  read from {srv.url}/model.safetensors: 1 request, {size:,} B received" in str(remote)


def test_a_long_header_takes_a_second_range_and_no_data(tmp_path):
    tensors = {
        f"block.{i}.a_rather_long_parameter_name_to_fill_the_header.weight": torch.zeros(64) for i in range(1500)
    }
    save_file(tensors, str(tmp_path / "big.safetensors"))
    with open(tmp_path / "big.safetensors", "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    assert n > 100_000
    local = tv.analyze(str(tmp_path / "big.safetensors"))
    with FileServer(str(tmp_path)) as srv:
        remote = tv.analyze(f"{srv.url}/big.safetensors")
        assert [r[2] for r in srv.stats.requests] == ["bytes=0-99999", f"bytes=100000-{8 + n - 1}"]
        assert srv.stats.bytes == 8 + n  # the header and not one byte of tensor data
    _same_views(remote, local, lambda p: f"{srv.url}/big.safetensors")


def test_index_reads_each_shard_header_with_one_small_range(tmp_path):
    _sharded(tmp_path / "m", n_shards=5)
    local = tv.analyze(str(tmp_path / "m" / "model.safetensors.index.json"))
    with FileServer(str(tmp_path)) as srv:
        remote = tv.analyze(f"{srv.url}/m/model.safetensors.index.json")
        reqs = srv.stats.requests
    assert reqs[0][:2] == ("GET", "/m/model.safetensors.index.json")
    assert sorted(r[1] for r in reqs[1:]) == [f"/m/model-{i:05d}-of-00005.safetensors" for i in range(1, 6)]
    headers = 0
    for i in range(1, 6):
        with open(tmp_path / "m" / f"model-{i:05d}-of-00005.safetensors", "rb") as f:
            headers += 8 + int.from_bytes(f.read(8), "little")
    index_bytes = os.path.getsize(tmp_path / "m" / "model.safetensors.index.json")
    # Each first range is sized from the index (names + a fixed allowance), never 100 KB.
    assert all(int(r[2].split("-")[1]) < 8_000 for r in reqs[1:])
    assert srv.stats.bytes <= index_bytes + 5 * 8_000
    assert srv.stats.bytes >= index_bytes + headers
    _same_views(remote, local, lambda p: f"{srv.url}/m/{os.path.basename(p)}")
    assert remote.metadata["index"]["shards"] == local.metadata["index"]["shards"]


def test_index_problems_are_the_local_ones(tmp_path):
    _sharded(tmp_path / "m", n_shards=2)
    idx = tmp_path / "m" / "model.safetensors.index.json"
    obj = json.loads(idx.read_text())
    obj["weight_map"]["layers.0.w0"] = "model-00002-of-00002.safetensors"  # misplaced
    obj["metadata"]["total_size"] += 4
    idx.write_text(json.dumps(obj))
    local = tv.analyze(str(idx))
    with FileServer(str(tmp_path)) as srv:
        remote = tv.analyze(f"{srv.url}/m/model.safetensors.index.json")
    assert remote.metadata["problems"] == local.metadata["problems"]
    assert any(p.startswith("misplaced:") for p in remote.metadata["problems"])
    assert any(p.startswith("total_size:") for p in remote.metadata["problems"])


def test_https_folder_url_asks_for_the_index_then_the_file(tmp_path):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    with FileServer(str(tmp_path)) as srv:
        remote = tv.analyze(f"{srv.url}/")
        assert [r[1] for r in srv.stats.requests] == ["/model.safetensors.index.json", "/model.safetensors"]
    assert [v.name for v in remote.views] == [v.name for v in tv.analyze(str(tmp_path)).views]


def test_hf_repo_at_main_equals_the_local_folder(tmp_path, hub_endpoint):
    _sharded(tmp_path / "snap", n_shards=3)
    (tmp_path / "snap" / "config.json").write_text("{}")
    local = tv.analyze(str(tmp_path / "snap"))
    with FakeHub({"org/m": {"commits": {SHA1: str(tmp_path / "snap")}, "refs": {"main": SHA1}}}) as hub:
        hub_endpoint(hub.url)
        remote = tv.analyze("hf://org/m")
        paths = [r[1] for r in hub.stats.requests]
    assert paths[0] == "/api/models/org/m/revision/main"
    assert paths[1] == f"/org/m/resolve/{SHA1}/model.safetensors.index.json"
    assert len(paths) == 2 + 3  # revision info, the index, one range per shard
    base = f"{hub.url}/org/m/resolve/{SHA1}/"
    _same_views(remote, local, lambda p: base + os.path.basename(p))
    assert remote.metadata["remote"]["revision"] == SHA1
    assert remote.source == "hf://org/m"


def test_hf_revision_and_subfolder(tmp_path, hub_endpoint):
    save_file({"old": torch.zeros(2)}, str(tmp_path / "v1.safetensors"))
    os.makedirs(tmp_path / "b" / "text_encoder")
    save_model(_tied_model(), str(tmp_path / "b" / "text_encoder" / "model.safetensors"))
    os.makedirs(tmp_path / "a")
    os.replace(tmp_path / "v1.safetensors", tmp_path / "a" / "model.safetensors")
    repos = {
        "org/m": {"commits": {SHA1: str(tmp_path / "a"), SHA2: str(tmp_path / "b")}, "refs": {"main": SHA1, "v2": SHA2}}
    }
    with FakeHub(repos) as hub:
        hub_endpoint(hub.url)
        at_main = tv.analyze("hf://org/m")
        sub = tv.analyze("hf://org/m@v2/text_encoder")
        one = tv.analyze("hf://org/m@v2/text_encoder/model.safetensors")
    assert [v.name for v in at_main.views] == ["old"]
    assert sub.metadata["remote"]["revision"] == SHA2
    local = tv.analyze(str(tmp_path / "b" / "text_encoder"))
    _same_views(sub, local, lambda p: f"{hub.url}/org/m/resolve/{SHA2}/text_encoder/model.safetensors")
    assert [v.name for v in one.views] == [v.name for v in local.views]
    assert local.metadata["dropped"] == sub.metadata["dropped"]  # save_model's alias metadata


def test_second_look_at_a_revision_costs_only_its_resolution(tmp_path, hub_endpoint):
    _sharded(tmp_path / "snap", n_shards=4)
    with FakeHub({"org/m": {"commits": {SHA1: str(tmp_path / "snap")}, "refs": {"main": SHA1}}}) as hub:
        hub_endpoint(hub.url)
        first = tv.analyze("hf://org/m")
        hub.stats.reset()
        again = tv.analyze("hf://org/m")
        assert [r[1] for r in hub.stats.requests] == ["/api/models/org/m/revision/main"]
        hub.stats.reset()
        pinned = tv.analyze(f"hf://org/m@{SHA1}")
        assert [r[1] for r in hub.stats.requests] == [f"/api/models/org/m/revision/{SHA1}"]
    assert [v.start for v in again.views] == [v.start for v in first.views] == [v.start for v in pinned.views]


def test_second_look_at_a_url_is_one_conditional_request_with_no_body(tmp_path):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    with FileServer(str(tmp_path)) as srv:
        tv.analyze(f"{srv.url}/model.safetensors")
        srv.stats.reset()
        again = tv.analyze(f"{srv.url}/model.safetensors")
        assert len(srv.stats.requests) == 1 and srv.stats.bytes == 0
        # The file changes: its ETag changes, the cache is not believed.
        save_file({"new": torch.zeros(3)}, str(tmp_path / "model.safetensors"))
        os.utime(tmp_path / "model.safetensors", ns=(1, time.time_ns() + 10**9))
        changed = tv.analyze(f"{srv.url}/model.safetensors")
    assert [v.name for v in again.views] == ["0.weight", "1.bias"]
    assert [v.name for v in changed.views] == ["new"]


def test_offline_mode_reads_only_cached_headers(tmp_path, hub_endpoint, monkeypatch):
    from huggingface_hub import constants

    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    with FakeHub({"org/m": {"commits": {SHA1: str(tmp_path)}, "refs": {"main": SHA1}}}) as hub:
        hub_endpoint(hub.url)
        with pytest.raises(RemoteError, match="offline mode .HF_HUB_OFFLINE. and no cached look"):
            monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
            tv.analyze("hf://org/m")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        online = tv.analyze("hf://org/m")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        hub.stats.reset()
        offline = tv.analyze("hf://org/m")
        assert hub.stats.requests == []
    assert [v.start for v in offline.views] == [v.start for v in online.views]
    assert offline.metadata["remote"]["revision"] == SHA1


def test_gated_repo_needs_the_users_token_and_shows_the_hubs_words(tmp_path, hub_endpoint, monkeypatch):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    repos = {"org/gated": {"commits": {SHA1: str(tmp_path)}, "refs": {"main": SHA1}, "token": "hf_secret"}}
    with FakeHub(repos) as hub:
        hub_endpoint(hub.url)
        with pytest.raises(RemoteError, match=r"answered 401 .*Access to model org/gated is restricted.*hf auth login"):
            tv.analyze("hf://org/gated")
        monkeypatch.setenv("HF_TOKEN", "hf_secret")
        layout = tv.analyze("hf://org/gated")
    assert [v.name for v in layout.views] == ["0.weight", "1.bias"]


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("hf://org/missing", r"answered 404 .*Repository not found.*check the repository"),
        ("hf://org/m@nope", r"answered 404 .*Invalid rev id: nope"),
        ("hf://org/m/no.safetensors", r"answered 404 .*Entry not found"),
    ],
)
def test_hub_errors_are_named(tmp_path, hub_endpoint, url, match):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    with FakeHub({"org/m": {"commits": {SHA1: str(tmp_path)}, "refs": {"main": SHA1}}}) as hub:
        hub_endpoint(hub.url)
        with pytest.raises(RemoteError, match=match):
            tv.analyze(url)


def test_fsspec_file_and_memory_urls_equal_local(tmp_path):
    import fsspec

    _sharded(tmp_path / "m", n_shards=2)
    local = tv.analyze(str(tmp_path / "m"))
    by_file = tv.analyze(f"file://{tmp_path / 'm'}")
    _same_views(by_file, local, lambda p: f"file://{p}")
    mem = fsspec.filesystem("memory")
    for name in os.listdir(tmp_path / "m"):
        mem.pipe_file(f"/tvtest/{name}", (tmp_path / "m" / name).read_bytes())
    try:
        by_memory = tv.analyze("memory://tvtest/model.safetensors.index.json")
    finally:
        mem.rm("/tvtest", recursive=True)
    assert [(v.name, v.start, v.stop) for v in by_memory.views] == [(v.name, v.start, v.stop) for v in local.views]


def test_unknown_fsspec_scheme_names_the_missing_package():
    with pytest.raises(ImportError, match="fsspec cannot open this scheme"):
        tv.analyze("nosuchscheme://bucket/model.safetensors")


# -- budgets ------------------------------------------------------------------------------------------
def test_remote_limits_are_named_and_can_be_raised(tmp_path):
    _sharded(tmp_path / "m", n_shards=4)
    url = None
    with FileServer(str(tmp_path)) as srv:
        url = f"{srv.url}/m/model.safetensors.index.json"
        with pytest.raises(TooLargeError, match=r"more than 3 requests.*remote_limits=\{'max_requests': N\}"):
            tv.analyze(url, remote_limits={"max_requests": 3})
        with pytest.raises(TooLargeError, match=r"more than 500 bytes.*'max_bytes'"):
            tv.analyze(url, remote_limits={"max_bytes": 500})
        assert len(tv.analyze(url, remote_limits={"max_requests": 5}).views) == 16
    with pytest.raises(TypeError, match="unknown limit 'timout'"):
        tv.analyze(url, remote_limits={"timout": 1})
    with pytest.raises(TypeError, match="remote_limits= bounds reading a URL"):
        tv.analyze(str(tmp_path / "m"), remote_limits={"timeout": 1})


# -- what only a URL can do: the CLI and imports ------------------------------------------------------
def test_cli_reads_a_url(tmp_path):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    with FileServer(str(tmp_path)) as srv:
        out = subprocess.run(
            [sys.executable, "-m", "tensorviz", f"{srv.url}/model.safetensors"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TENSORVIZ_CACHE": "off"},
        )
    assert out.returncode == 0, out.stderr
    assert f"2 tensors on 1 file ({srv.url}/model.safetensors)" in out.stdout


def test_local_reading_imports_neither_hub_nor_fsspec(tmp_path):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    code = (
        "import sys, tensorviz as tv; tv.analyze(sys.argv[1]); "
        "print(sorted(m for m in ('huggingface_hub', 'fsspec', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "model.safetensors")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_url_not_a_path_in_errors(tmp_path):
    with FileServer(str(tmp_path)) as srv:
        with pytest.raises(RemoteError, match=r"answered 404 Not Found: Entry not found"):
            tv.analyze(f"{srv.url}/absent.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{}}}}")
    with FileServer(str(tmp_path)) as srv, pytest.raises(FileFormatError) as remote_err:
        tv.analyze(f"{srv.url}/junk.safetensors")
    with pytest.raises(FileFormatError) as local_err:
        tv.analyze(str(tmp_path / "junk.safetensors"))
    assert str(remote_err.value).replace(f"{srv.url}/junk.safetensors", "F") == str(local_err.value).replace(
        str(tmp_path / "junk.safetensors"), "F"
    )


def test_diff_and_save_check_take_urls(tmp_path):
    save_model(_tied_model(), str(tmp_path / "model.safetensors"))
    with FileServer(str(tmp_path)) as srv:
        url = f"{srv.url}/model.safetensors"
        same = tv.diff(url, str(tmp_path / "model.safetensors"))
        against_model = tv.diff(_tied_model(), url)
        report = tv.save_check(url)
    assert same.same
    assert against_model.only_a == ("1.weight",)  # save_model dropped the tied alias
    assert [sorted(g) for g in against_model.ties_lost] == [["0.weight", "1.weight"]]
    assert report.to_text().startswith(f"Save check of {url}: ")


@pytest.mark.parametrize("vocab", [40, 60_000])
def test_gguf_at_a_url_equals_the_local_file(tmp_path, hub_endpoint, vocab):
    """A GGUF header read by ranges (a 60,000-token vocabulary makes it ~1 MB: a few doubling
    windows, never the tensor data) gives the local layout, view for view."""
    from gguf import GGMLQuantizationType as Q

    from tests.helpers.formats_files import quant_bytes, write_gguf

    tensors = [("token_embd.weight", torch.arange(64.0).reshape(8, 8).numpy(), None),
               ("blk.0.attn_q.weight", quant_bytes(Q.Q4_K, 64, 512, 1), Q.Q4_K)]  # fmt: skip
    path = str(tmp_path / "model-Q4_K_M.gguf")
    write_gguf(path, tensors, vocab=vocab, context=4096)
    local = tv.analyze(path)
    with FakeHub({"org/m-GGUF": {"commits": {SHA1: str(tmp_path)}, "refs": {"main": SHA1}}}) as hub:
        hub_endpoint(hub.url)
        remote = tv.analyze("hf://org/m-GGUF/model-Q4_K_M.gguf")
        sent = hub.stats.bytes
    url = f"{hub.url}/org/m-GGUF/resolve/{SHA1}/model-Q4_K_M.gguf"
    _same_views(remote, local, lambda p: url)
    assert remote["blk.0.attn_q.weight"].logical == local["blk.0.attn_q.weight"].logical
    assert remote.metadata["gguf"] == local.metadata["gguf"]
    assert remote.metadata["format"] == "gguf" and remote.metadata["dropped"] == {"output.weight": "token_embd.weight"}
    header = local.metadata["header"][path][1]
    # The first 100 KB, then windows of 256 KiB, 512 KiB, ... until the header is read: fewer
    # than twice the header's bytes (doubling), and never the tensor data past it.
    windows = 0
    while 100_000 + (1 << 18) * ((1 << windows) - 1) < header:
        windows += 1
    assert remote.metadata["remote"]["requests"] == 2 + windows
    assert sent < 2 * header + (1 << 18) + 4096


def test_packed_weights_at_a_url_read_the_config_beside_them(tmp_path, hub_endpoint):
    """A GPTQ folder on the Hub gets the same pieces, facts and text as on disk: its config.json is
    read (one more request) only because the headers hold packed weights."""
    from tests.sources.test_packed_files import GPTQ_CONFIG, folder, gptq_tensors

    os.makedirs(tmp_path / "gptq")
    d = folder(tmp_path / "gptq", gptq_tensors(), GPTQ_CONFIG)
    local = tv.analyze(str(d))
    save_model(_tied_model(), str(tmp_path / "plain.safetensors"))
    with FakeHub({"org/q": {"commits": {SHA1: str(d)}, "refs": {"main": SHA1}}}) as hub:
        hub_endpoint(hub.url)
        remote = tv.analyze("hf://org/q")
        paths = [r[1] for r in hub.stats.requests]
    assert paths[-1] == f"/org/q/resolve/{SHA1}/config.json"
    assert [v.piece for v in remote.views] == [v.piece for v in local.views]
    assert remote.metadata["quantization"] == local.metadata["quantization"]
    assert remote.metadata["remote"]["requests"] == len(paths) == 3  # revision, the file, config.json
    stored = [line for line in str(local).splitlines() if "GPTQ 128×256 int4" in line]
    assert stored and all(line in str(remote).splitlines() for line in stored)
    with FileServer(str(tmp_path)) as srv:  # no packed weight: config.json is never asked for
        tv.analyze(f"{srv.url}/plain.safetensors")
        assert [r[1] for r in srv.stats.requests] == ["/plain.safetensors"]
