"""The words about files (issue 25, item 8): a safetensors file's header is counted as its
header, not as unreferenced bytes (checked against the file's own first 8 bytes: 8 + N), and
the storages of a sharded checkpoint are numbered in file order (storage #0 is the first shard,
shard 2 before shard 10), checked on real files written by safetensors."""

from __future__ import annotations

import json
import os
import struct

import torch
from safetensors.torch import save_file

import tensorviz as tv
from tensorviz.cli import layout_to_json


def header_length(path) -> int:
    """8 + N, read as the format says: the first 8 bytes are N, little-endian."""
    with open(path, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


def test_the_header_of_a_safetensors_file_is_its_header(tmp_path):
    path = tmp_path / "one.safetensors"
    save_file({"a": torch.zeros(4, 4), "b": torch.zeros(10)}, path)
    head, size = header_length(path), os.path.getsize(path)
    layout = tv.analyze(path)
    (s,) = layout.storages
    assert (s.header_nbytes, s.unreferenced_nbytes, s.covered_nbytes, s.nbytes) == (head, 0, size - head, size)
    assert layout.header_run(0) == (0, head) and layout.unreferenced_runs(0).tolist() == []
    line = f"storage #0 one.safetensors {size} B: 2 views, {size - head} B read, {head} B header"
    assert line in layout.to_text().splitlines()
    assert "unreferenced" not in layout.to_text()
    doc = layout_to_json(layout)["storages"][0]
    assert (doc["header_nbytes"], doc["unreferenced_nbytes"]) == (head, 0)
    why = str(tv.why_size(path)).splitlines()
    assert why[1] == f"  storages {size - head} B · header {head} B"
    assert why[3].split() == ["unclassified", str(size - head), "B", str(size - head), "B", "0", "B"]
    assert "no name reads" not in "\n".join(why) and not tv.why_size(path).fixes


def _shards(folder, files: dict[str, list[str]], index: bool) -> None:
    os.makedirs(folder, exist_ok=True)
    wm = {}
    for file, names in files.items():
        save_file({n: torch.zeros(3) for n in names}, os.path.join(folder, file))
        wm.update(dict.fromkeys(names, file))
    if index:  # names sorted, as transformers writes them: the first name lives in shard 2
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": dict(sorted(wm.items()))}, f)


def test_storages_are_numbered_in_file_order(tmp_path):
    files = {
        f"model-{i:05d}-of-00004.safetensors": names for i, names in enumerate([["z"], ["a", "c"], ["m"], ["b"]], 1)
    }
    _shards(tmp_path / "m", files, index=True)
    for source in (tmp_path / "m", tmp_path / "m" / "model.safetensors.index.json"):
        layout = tv.analyze(source)
        assert [s.label for s in layout.storages] == list(files)
        assert layout.names == ("z", "a", "c", "m", "b")  # each file's tensors in file order
        assert [s.header_nbytes for s in layout.storages] == [header_length(tmp_path / "m" / f) for f in files]
        assert layout.metadata["index"]["shards"] == list(files)
        assert layout.to_text().splitlines()[3].startswith("storage #0 model-00001-of-00004.safetensors")


def test_unpadded_shard_numbers_sort_by_value(tmp_path):
    files = {f"part-{i}.safetensors": [f"w{i}"] for i in (10, 2, 1)}
    _shards(tmp_path / "p", files, index=False)
    layout = tv.analyze(tmp_path / "p")
    assert [s.label for s in layout.storages] == ["part-1.safetensors", "part-2.safetensors", "part-10.safetensors"]
