"""Files on disk: safetensors headers, sharded indexes, model folders, torch checkpoints.

Every file is written here by the real savers (safetensors.torch.save_file / save_model,
torch.save); spans are checked against the header offsets parsed independently below, and
against the bytes in the file.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core.errors import FileFormatError
from tensorviz.sources.files import SAFETENSORS_DTYPES, read_safetensors_header

safetensors_torch = pytest.importorskip("safetensors.torch")
save_file, save_model = safetensors_torch.save_file, safetensors_torch.save_model


def raw_header(path) -> tuple[int, dict]:
    """(8 + n, header) parsed by hand: the oracle the analysis is checked against."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def file_bytes(path, start: int, stop: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(stop - start)


def tensor_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()


# -- single safetensors file ---------------------------------------------------------------------
def test_save_file_spans_equal_header_offsets(tmp_path):
    a = torch.rand(8, 10, 50)
    tensors = {"a": a, "h": torch.ones(2, 3, dtype=torch.float16), "x": torch.tensor([True, False, True])}
    path = tmp_path / "model.safetensors"
    save_file(tensors, path, metadata={"format": "pt", "note": "hi"})
    data_start, header = raw_header(path)

    layout = tv.analyze(str(path))

    size = os.path.getsize(path)
    (storage,) = layout.storages
    assert storage.key == ("file", str(path)) and storage.device == "file"
    assert (storage.nbytes, storage.label) == (size, "model.safetensors")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        v = layout[name]
        begin, end = info["data_offsets"]
        assert (v.start, v.stop) == (data_start + begin, data_start + end)
        assert (v.shape, v.itemsize, v.offset) == (
            tuple(info["shape"]),
            tensors[name].element_size(),
            begin // tensors[name].element_size(),
        )
        assert v.dtype == str(tensors[name].dtype).removeprefix("torch.")
        assert v.is_contiguous and v.nbytes == v.footprint_nbytes == end - begin
        assert v.stride == tensors[name].stride()
        assert file_bytes(path, v.start, v.stop) == tensor_bytes(tensors[name])
    # File order: views sorted by data offset.
    assert layout.names == tuple(sorted(layout.names, key=lambda n: header[n]["data_offsets"]))
    # The header (8 + N bytes, as the file says) is the header, not unreferenced; metadata names its span.
    assert layout.unreferenced_runs(storage.key).tolist() == []
    assert (storage.header_nbytes, storage.unreferenced_nbytes, storage.covered_nbytes) == (
        data_start,
        0,
        size - data_start,
    )
    assert layout.header_run(storage.key) == (0, data_start)
    assert layout.metadata["header"] == {str(path): (0, data_start)}
    assert layout.metadata["__metadata__"] == {str(path): {"format": "pt", "note": "hi"}}
    assert layout.metadata["format"] == "safetensors" and "problems" not in layout.metadata
    text = layout.to_text()
    assert f"header: bytes [0, {data_start}) of model.safetensors" in text
    in_file_order = ", ".join(f"{k}={v}" for k, v in header["__metadata__"].items())
    assert f"__metadata__ of model.safetensors: {in_file_order}" in text


def test_every_safetensors_dtype_code_maps_to_torch(tmp_path):
    dtypes = [
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
        torch.uint16,
        torch.uint32,
        torch.uint64,
    ]
    tensors = {str(d).removeprefix("torch."): torch.zeros(3, 2, dtype=d) for d in dtypes}
    path = tmp_path / "dtypes.safetensors"
    save_file(tensors, path)
    data_start, header = raw_header(path)
    layout = tv.analyze(path)  # a PathLike works too
    for name, t in tensors.items():
        v = layout[name]
        assert v.dtype == name and v.itemsize == t.element_size()
        assert getattr(torch, SAFETENSORS_DTYPES[header[name]["dtype"]]) == t.dtype
        assert (v.start, v.stop) == tuple(data_start + o for o in header[name]["data_offsets"])


def test_save_model_dropped_names_are_shown(tmp_path):
    from tests.helpers.models import TiedLM

    path = tmp_path / "tied.safetensors"
    save_model(TiedLM(), str(path))
    layout = tv.analyze(path)
    dropped_name = "lm_head.weight" if "wte.weight" in layout else "wte.weight"
    kept = "wte.weight" if dropped_name == "lm_head.weight" else "lm_head.weight"
    assert dropped_name not in layout
    assert layout.metadata["dropped"] == {dropped_name: kept}
    assert f"dropped: {dropped_name} -> kept {kept}" in layout.to_text()
    # The dropped record is not repeated as ordinary __metadata__ text.
    assert "__metadata__ of" not in layout.to_text()


def test_empty_and_scalar_tensors(tmp_path):
    path = tmp_path / "odd.safetensors"
    save_file({"empty": torch.zeros(0, 4), "scalar": torch.tensor(3.0), "w": torch.ones(2)}, path)
    data_start, header = raw_header(path)
    layout = tv.analyze(path)
    e, s = layout["empty"], layout["scalar"]
    assert e.is_empty and e.start == e.stop == data_start + header["empty"]["data_offsets"][0]
    assert e.shape == (0, 4) and e.nbytes == 0
    assert s.shape == () and s.stride == () and s.stop - s.start == 4


def write_raw(path, header: dict, data_len: int, pad: bytes = b"") -> int:
    """A hand-made safetensors file; returns the data start (8 + header length)."""
    h = json.dumps(header).encode() + pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(data_len))
    return 8 + len(h)


@pytest.mark.parametrize(
    "offsets, data_len, fragment",
    [
        ({"a": [2, 8], "b": [8, 16]}, 16, "tensor 'a': 2 bytes at the start of the data section belong to no tensor"),
        ({"a": [0, 6], "b": [14, 22]}, 22, "tensor 'b': 8 bytes after 'a' belong to no tensor"),
        ({"a": [0, 6], "b": [6, 14]}, 22, "the last 8 bytes belong to no tensor"),
    ],
    ids=["gap-at-start", "gap-between", "trailing-bytes"],
)
def test_gaps_and_trailing_bytes_are_refused_as_safetensors_does(tmp_path, offsets, data_len, fragment):
    """safe_open refuses a data section its tensors do not tile exactly; so does tensorviz."""
    path = tmp_path / "gappy.safetensors"
    shapes = {"a": ("I16", [3]), "b": ("F32", [2])}
    hdr = {k: {"dtype": shapes[k][0], "shape": shapes[k][1], "data_offsets": v} for k, v in offsets.items()}
    write_raw(path, hdr, data_len, pad=b"    ")
    with pytest.raises(FileFormatError, match="safetensors refuses") as info:
        tv.analyze(path)
    assert str(info.value).startswith(f"{path}: ") and fragment in str(info.value)


def test_unaligned_offset_is_noted_and_sub_byte_dtype_skipped(tmp_path):
    path = tmp_path / "odd.safetensors"
    hdr = {
        "flag": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]},
        "w": {"dtype": "F32", "shape": [1], "data_offsets": [1, 5]},
        "q": {"dtype": "F4", "shape": [6], "data_offsets": [5, 8]},
    }
    ds = write_raw(path, hdr, 8)
    layout = tv.analyze(path)
    w = layout["w"]
    assert (w.start, w.offset, w.note) == (ds + 1, 0, "data offset 1 is not a multiple of itemsize 4")
    assert "q" not in layout
    (sk,) = layout.skipped
    assert sk.name == "q" and f"packed 4-bit dtype F4[6] at bytes [{ds + 5}, {ds + 8})" in sk.reason


def test_read_safetensors_header_returns_validated_entries(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"b": torch.zeros(2), "a": torch.zeros(3)}, path, metadata={"k": "v"})
    h = read_safetensors_header(path)
    data_start, header = raw_header(path)
    assert h.data_start == data_start and h.file_nbytes == os.path.getsize(path)
    assert [(e.name, e.begin, e.end) for e in h.entries] == sorted(
        ((k, *v["data_offsets"]) for k, v in header.items() if k != "__metadata__"), key=lambda x: x[1]
    )
    assert dict(h.metadata) == {"k": "v"} and h.problems == ()


def test_sparse_8_gib_file_is_analysed_without_reading_data(tmp_path):
    """The data section is an unbacked hole: reading it would show in rchar."""
    path = tmp_path / "huge.safetensors"
    numel = 2**31  # 8 GiB of float32
    ds = write_raw(path, {"w": {"dtype": "F32", "shape": [2**16, 2**15], "data_offsets": [0, 4 * numel]}}, 0)
    with open(path, "r+b") as f:
        f.truncate(ds + 4 * numel)

    def rchar() -> int:
        with open("/proc/self/io") as f:
            return int(dict(line.split(": ") for line in f.read().splitlines())["rchar"])

    before = rchar()
    layout = tv.analyze(path)
    read = rchar() - before
    assert (layout["w"].start, layout["w"].stop) == (ds, ds + 8 * 2**30)
    assert layout.storages[0].nbytes == ds + 8 * 2**30
    assert read < 256 * 1024, f"read {read} bytes to analyse an 8 GiB file"


# -- sharded checkpoints and folders -----------------------------------------------------------
def write_sharded(folder, shards: dict[str, dict[str, torch.Tensor]], weight_map=None, total=None):
    folder.mkdir(exist_ok=True)
    for shard, tensors in shards.items():
        save_file(tensors, folder / shard, metadata={"format": "pt"})
    if weight_map is None:
        weight_map = {name: shard for shard, ts in shards.items() for name in ts}
    index = {
        "metadata": {
            "total_size": total if total is not None else sum(t.nbytes for ts in shards.values() for t in ts.values())
        },
        "weight_map": weight_map,
    }
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps(index))
    return path


def two_shards():
    return {
        "model-00001-of-00002.safetensors": {"embed.weight": torch.rand(10, 4), "ln.bias": torch.rand(4)},
        "model-00002-of-00002.safetensors": {"head.weight": torch.rand(10, 4), "ln.weight": torch.rand(4)},
    }


def test_sharded_index_each_shard_is_a_storage(tmp_path):
    shards = two_shards()
    index = write_sharded(tmp_path / "m", shards)
    layout = tv.analyze(index)
    assert layout.metadata["format"] == "safetensors-index"
    assert [s.label for s in layout.storages] == list(shards)
    for shard, tensors in shards.items():
        path = tmp_path / "m" / shard
        data_start, header = raw_header(path)
        storage = layout.storage(("file", str(path)))
        assert storage.nbytes == os.path.getsize(path)
        assert set(storage.names) == set(tensors)
        for name, t in tensors.items():
            v = layout[name]
            assert v.storage == ("file", str(path))
            assert (v.start, v.stop) == tuple(data_start + o for o in header[name]["data_offsets"])
            assert file_bytes(path, v.start, v.stop) == tensor_bytes(t)
        assert layout.metadata["header"][str(path)] == (0, data_start)
    assert layout.metadata["index"] == {"path": str(index), "shards": list(shards), "total_size": 352}
    assert "problems" not in layout.metadata and layout.skipped == ()
    assert layout.relation("embed.weight", "head.weight") == "unrelated"


def test_model_folder_uses_its_index_and_lists_ignored_files(tmp_path):
    shards = two_shards()
    write_sharded(tmp_path / "m", shards)
    torch.save({"w": torch.zeros(2)}, tmp_path / "m" / "pytorch_model.bin")
    torch.save({"state": {}}, tmp_path / "m" / "optimizer.pt")
    layout = tv.analyze(tmp_path / "m")
    assert layout.source == str(tmp_path / "m")
    assert set(layout.names) == {n for ts in shards.values() for n in ts}
    assert layout.metadata["ignored_files"] == ["pytorch_model.bin"]
    assert "ignored_files: pytorch_model.bin" in layout.to_text()


def test_weight_map_checked_against_shard_headers(tmp_path):
    shards = two_shards()
    shards["model-00002-of-00002.safetensors"]["embed.weight"] = torch.zeros(10, 4)  # a duplicate copy
    first, second = list(shards)
    wm = {
        "embed.weight": second,
        "ln.bias": first,
        "head.weight": second,
        "ghost.weight": first,
        "ln.weight": first,
    }  # ghost: missing; ln.weight: misplaced
    layout = tv.analyze(write_sharded(tmp_path / "m", shards, weight_map=wm))
    problems = layout.metadata["problems"]
    assert problems == [
        f"duplicated: 'embed.weight' is in {second} and {first}",
        f"missing: weight_map lists 'ghost.weight' in {first}, but that shard has no such tensor",
        f"misplaced: weight_map puts 'ln.weight' in {first}, but it is in {second}",
        "total_size: the index says 512 bytes, but the tensors it maps hold 336 bytes",
    ]
    # The copy the weight_map names is the one shown; the other is skipped.
    assert layout["embed.weight"].storage == ("file", str(tmp_path / "m" / second))
    skipped = {s.name: s.reason for s in layout.skipped}
    dup = layout.storage(("file", str(tmp_path / "m" / first)))
    data_start, header = raw_header(tmp_path / "m" / first)
    a, b = (data_start + o for o in header["embed.weight"]["data_offsets"])
    assert skipped[f"embed.weight [{first}]"] == (
        f"duplicate: also in {second}, which the weight_map names; this copy (bytes [{a}, {b})) is never loaded"
    )
    assert a == data_start  # the copy is first in its file: the header, then the unread copy
    assert layout.header_run(dup.key) == (0, data_start) and dup.header_nbytes == data_start
    assert layout.unreferenced_runs(dup.key).tolist() == [[a, b]]
    assert skipped["ghost.weight"] == f"weight_map puts it in {first}, but no shard's header has it"
    text = layout.to_text()
    assert "problem: missing: weight_map lists 'ghost.weight'" in text


def test_extra_tensor_not_in_weight_map_is_reported(tmp_path):
    shards = two_shards()
    first, second = list(shards)
    wm = {"embed.weight": first, "ln.bias": first, "head.weight": second}
    layout = tv.analyze(write_sharded(tmp_path / "m", shards, weight_map=wm, total=336))
    assert "ln.weight" in layout  # it is in the file, so it is shown
    assert layout.metadata["problems"] == [
        f"extra: 'ln.weight' is in {second} but not in the weight_map; loaders that follow the index never load it"
    ]


def test_folder_of_safetensors_files_without_index(tmp_path):
    save_file({"a": torch.zeros(2)}, tmp_path / "one.safetensors")
    save_file({"a": torch.ones(3), "b": torch.ones(1)}, tmp_path / "two.safetensors")
    layout = tv.analyze(tmp_path)
    assert layout.metadata["format"] == "folder"
    assert [s.label for s in layout.storages] == ["one.safetensors", "two.safetensors"]
    assert layout["a"].shape == (2,) and layout["b"].storage == ("file", str(tmp_path / "two.safetensors"))
    assert layout.metadata["problems"] == ["duplicated: 'a' is in one.safetensors and two.safetensors"]
    assert [s.name for s in layout.skipped] == ["a [two.safetensors]"]


# -- torch checkpoints -------------------------------------------------------------------------
def torch_ckpt(tmp_path, obj, name="ckpt.pt"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


def test_torch_checkpoint_keeps_ties_slices_and_offsets(tmp_path):
    a = torch.rand(8, 10, 50)
    emb = torch.rand(20, 4)
    sd = {"a": a, "b": a[2:4], "c": a[4:6], "t": emb.t(), "emb": emb, "head": emb, "lone": torch.ones(3)}
    path = torch_ckpt(tmp_path, sd)
    layout = tv.analyze(path)
    assert layout.metadata["format"] == "torch"
    assert "contents" not in layout.metadata  # a flat state dict: nothing to unwrap
    assert layout.names == tuple(sd)
    b, c = layout["b"], layout["c"]
    assert (b.start, b.stop, b.offset, c.start, c.stop) == (4000, 8000, 1000, 8000, 12000)
    assert layout.relation("a", "b") == "contains" and layout.relation("b", "c") == "disjoint"
    assert layout.relation("emb", "head") == "identical" and layout.relation("emb", "t") == "same-bytes"
    assert layout.relation("a", "emb") == "unrelated"
    assert [g.names for g in layout.shared("storage")] == [("a", "b", "c"), ("t", "emb", "head")]
    assert [g.names for g in layout.shared("span")] == [("t", "emb", "head")]
    # Each saved storage is its zip record; its offset in the file is where its bytes are.
    offsets = layout.metadata["record_offsets"]
    for name in ("a", "emb", "lone"):
        s = layout.storage(name)
        assert s.device == "file" and s.key[1].startswith(f"{path}:data/")
        assert s.label == f"ckpt.pt:{s.key[1].rsplit(':', 1)[1]}"
        v = layout[name]
        at = offsets[s.key[1]]
        assert file_bytes(path, at + v.start, at + v.stop) == tensor_bytes(sd[name])
    assert layout.storage("a").nbytes == a.nbytes and layout.storage("emb").nbytes == emb.nbytes


def test_torch_wrappers_keep_their_path_in_names(tmp_path):
    from tests.helpers.models import TiedLM

    model = TiedLM(vocab=6, dim=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.wte.weight.grad = torch.ones_like(model.wte.weight)  # no autograd needed for one step
    opt.step()
    ckpt = {"state_dict": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7, "tag": "best"}
    layout = tv.analyze(torch_ckpt(tmp_path, ckpt, "train.pth"))
    assert (
        layout.names[:5]
        == (
            "state_dict.wte.weight",
            "state_dict.ln.weight",
            "state_dict.ln.bias",
            "state_dict.lm_head.weight",
            "optimizer.wte.weight.momentum_buffer",  # state 0, named by the model's order (tests/sources/test_training_checkpoints.py)
        )
    )
    assert layout.relation("state_dict.wte.weight", "state_dict.lm_head.weight") == "identical"
    md = layout.metadata
    # Only wte.weight (tied to lm_head.weight) got a gradient, so only param 0 has momentum.
    assert md["contents"] == {"state_dict": "4 tensors", "optimizer": "1 tensor", "epoch": "7", "tag": "'best'"}
    assert md["values"]["epoch"] == "7" and md["values"]["optimizer.param_groups.0.lr"] == "0.1"
    assert md["values"]["optimizer.param_groups.0.params"] == "[0, 1, 2]"
    assert "contents: state_dict=4 tensors, optimizer=1 tensor, epoch=7, tag='best'" in layout.to_text()
    assert layout.skipped == ()


def test_torch_checkpoint_of_one_tensor_and_of_a_list(tmp_path):
    t = torch.arange(6.0)
    layout = tv.analyze(torch_ckpt(tmp_path, t, "t.pt"))
    assert layout.names == ("tensor",) and layout["tensor"].shape == (6,)
    layout = tv.analyze(torch_ckpt(tmp_path, [t, t[1:3], {"x": t[4:]}], "l.pt"))
    assert layout.names == ("0", "1", "2.x")
    assert layout.metadata["contents"] == {"": "list with 3 tensors"}
    assert (layout["1"].start, layout["2.x"].start) == (4, 16)
    assert len(layout.storages) == 1


def test_torch_checkpoint_with_cycles_and_shared_containers_terminates(tmp_path):
    loop: list = [1]
    loop.append(loop)
    shared = {"w": torch.ones(2)}
    layout = tv.analyze(torch_ckpt(tmp_path, {"loop": loop, "x": shared, "y": shared}, "cyc.pt"))
    assert layout.names == ("x.w",)
    assert layout.metadata["values"] == {"loop.0": "1", "loop.1": "<same object as loop>", "y": "<same object as x>"}


def test_torch_meta_tensors_and_bin_index(tmp_path):
    layout = tv.analyze(torch_ckpt(tmp_path, {"m": torch.empty(4, device="meta")}, "meta.pt"))
    assert layout["m"].device == "meta" and layout.storages[0].device == "meta"
    assert layout.metadata["problems"] == [
        "meta.pt: holds meta tensors (no data); torch.load gives each its own storage, "
        "so any sharing between them is not shown"
    ]

    folder = tmp_path / "bin"
    folder.mkdir()
    torch.save({"a": torch.zeros(2), "b": torch.zeros(3)}, folder / "pytorch_model-00001-of-00002.bin")
    torch.save({"c": torch.zeros(4)}, folder / "pytorch_model-00002-of-00002.bin")
    wm = {
        "a": "pytorch_model-00001-of-00002.bin",
        "b": "pytorch_model-00001-of-00002.bin",
        "c": "pytorch_model-00002-of-00002.bin",
        "d": "pytorch_model-00002-of-00002.bin",
    }
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": wm}))
    layout = tv.analyze(folder)
    assert layout.metadata["format"] == "torch-index" and layout.names == ("a", "b", "c")
    assert layout.metadata["problems"] == [
        "missing: weight_map lists 'd' in pytorch_model-00002-of-00002.bin, but that shard has no such tensor"
    ]


def test_torch_checkpoint_reads_no_tensor_data(tmp_path):
    """A 96 MiB checkpoint: peak resident memory and bytes read stay far below its size."""
    path = tmp_path / "big.pt"
    w = torch.zeros(24 * 2**20)
    torch.save({"w": w, "half": w[: 12 * 2**20]}, path)
    del w
    script = textwrap.dedent(f"""
        import tensorviz as tv
        from tensorviz.sources.formats import checkpoint  # noqa: F401  (import torch before measuring)
        def status(key):
            for line in open("/proc/self/status"):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        def rchar():
            return int(dict(l.split(": ") for l in open("/proc/self/io").read().splitlines())["rchar"])
        hwm, r = status("VmHWM:"), rchar()
        layout = tv.analyze({str(path)!r})
        assert layout.relation("w", "half") == "contains", layout
        print(status("VmHWM:") - hwm, rchar() - r)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    grew, read = map(int, out.stdout.split())
    assert read < 2 * 2**20, f"read {read} bytes of a 96 MiB checkpoint"
    assert grew < 16 * 2**20, f"peak memory grew by {grew} bytes for a 96 MiB checkpoint"


def test_torch_mmap_loses_nothing_that_meta_would(tmp_path):
    """Why mmap=True: map_location='meta' puts a saved slice on a storage of its own."""
    a = torch.rand(30, 20)
    path = torch_ckpt(tmp_path, {"a": a, "q": a[:10], "v": a[10:20]})
    meta = torch.load(path, weights_only=True, map_location="meta")
    assert torch._C._storage_id(meta["q"]) != torch._C._storage_id(meta["a"])  # sharing lost
    layout = tv.analyze(path)
    assert layout.relation("a", "q") == "contains" and layout["v"].offset == 200


def test_analysis_keeps_no_file_open_or_mapped(tmp_path):
    path = torch_ckpt(tmp_path, {"w": torch.zeros(1000)})
    tv.analyze(path)
    with open("/proc/self/maps") as f:
        assert str(path) not in f.read()
    fds = os.listdir("/proc/self/fd")
    assert not any(os.path.realpath(f"/proc/self/fd/{fd}") == str(path) for fd in fds)


def test_folder_of_trainer_pickles_only(tmp_path):
    torch.save({"state": {0: {"exp_avg": torch.zeros(3)}}, "param_groups": []}, tmp_path / "optimizer.pt")
    layout = tv.analyze(tmp_path)
    assert layout.names == ("state.0.exp_avg",) and layout.metadata["format"] == "folder"


def test_not_a_directory_or_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        tv.analyze(tmp_path / "nope.safetensors")
    (tmp_path / "README.md").write_text("hi")
    with pytest.raises(FileFormatError, match=r"no weights found: .*the folder holds: README.md"):
        tv.analyze(tmp_path)


def test_record_offsets_are_not_in_the_text_but_in_metadata(tmp_path):
    path = torch_ckpt(tmp_path, {"w": torch.zeros(3)})
    layout = tv.analyze(path)
    assert "record_offsets:" not in layout.to_text()
    (at,) = layout.metadata["record_offsets"].values()
    assert at % 64 == 0 and np.frombuffer(file_bytes(path, at, at + 12), np.float32).tolist() == [0, 0, 0]


def test_folder_of_torch_files_names_the_file_of_a_duplicate(tmp_path):
    """A duplicate name is reported by file: naming the first record of a file is wrong for
    every tensor that is not in that record."""
    torch.save({"w": torch.zeros(2), "v": torch.ones(3)}, tmp_path / "a.pt")
    torch.save({"v": torch.ones(3)}, tmp_path / "b.pt")
    layout = tv.analyze(tmp_path)
    assert layout.metadata["problems"] == ["duplicated: 'v' is in a.pt and b.pt"]
    (skipped,) = layout.skipped
    assert skipped.name == "v [b.pt]"
    assert skipped.reason == "duplicate: a.pt already holds a tensor of this name; this copy (bytes [0, 12)) is hidden"


def test_torch_contents_count_tensors_under_dotted_and_shared_keys(tmp_path):
    shared = {"w": torch.ones(2)}
    ckpt = {"ema.model": {"w": torch.zeros(2), "b": torch.zeros(1)}, "x": shared, "y": shared, "step": 3}
    layout = tv.analyze(torch_ckpt(tmp_path, ckpt, "c.pt"))
    assert layout.names == ("ema.model.w", "ema.model.b", "x.w")
    assert layout.metadata["contents"] == {
        "ema.model": "2 tensors",
        "x": "1 tensor",
        "y": "<same object as x>",
        "step": "3",
    }


def test_index_counts_packed_tensors_as_present(tmp_path):
    """A packed sub-byte tensor has no view, but its shard holds it and total_size counts it."""
    folder = tmp_path / "m"
    folder.mkdir()
    ds = write_raw(
        folder / "s.safetensors",
        {
            "q": {"dtype": "F4", "shape": [6], "data_offsets": [0, 3]},
            "w": {"dtype": "F32", "shape": [1], "data_offsets": [3, 7]},
        },
        7,
    )
    wm = {"q": "s.safetensors", "w": "s.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 7}, "weight_map": wm}))
    layout = tv.analyze(folder)
    assert "problems" not in layout.metadata
    (sk,) = layout.skipped
    assert sk.name == "q" and sk.reason.startswith(f"packed 4-bit dtype F4[6] at bytes [{ds}, {ds + 3})")
    del wm["q"]
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 4}, "weight_map": wm}))
    assert tv.analyze(folder).metadata["problems"] == [
        "extra: 'q' is in s.safetensors but not in the weight_map; loaders that follow the index never load it"
    ]


def test_a_real_optimizer_sized_checkpoint_is_not_refused(tmp_path):
    """20,000 tensors (~600k pickle opcodes, 30 a tensor) are read with the default budgets: each
    tensor reference brings 40 opcodes of budget (pickle_scan.PER_TENSOR_OPS), so a valid
    checkpoint's size in tensors is limited only by tensor_refs. Exactly as torch loads it."""
    n = 20_000
    path = tmp_path / "optimizer.pt"
    torch.save({"state": {i: {"exp_avg": torch.zeros(2), "step": torch.tensor(1.0)} for i in range(n // 2)}}, path)
    layout = tv.analyze(path)
    assert len(layout) == n and len(layout.storages) == n
    v = layout["state.9999.exp_avg"]
    assert (v.shape, v.stride, v.dtype, v.nbytes) == ((2,), (1,), "float32", 8)
    real = torch.load(path, weights_only=True, map_location="meta")["state"][9999]["step"]
    w = layout["state.9999.step"]
    assert (w.shape, w.stride, w.dtype) == (tuple(real.shape), real.stride(), "float32")


def test_opcodes_that_build_no_tensor_stay_within_the_fixed_budget(tmp_path):
    """600,000 opcodes of plain values beside two tensors: past the fixed pickle_ops budget
    (the two references add only 80), refused by name, saying how to raise it; raised
    deliberately for one block (tv.limits), the same file loads, exactly."""
    from tensorviz.core.errors import TooLargeError
    from tensorviz.sources.formats.pickle_scan import PER_TENSOR_OPS

    path = tmp_path / "values.pt"
    torch.save({"w": torch.zeros(3), "v": torch.ones(2), "steps": list(range(600_000))}, path)
    with pytest.raises(TooLargeError, match=r"more than 500,000 pickle ops .*tv.limits\(pickle_ops=2_000_000\)"):
        tv.analyze(path)
    assert PER_TENSOR_OPS == 40
    with tv.limits(pickle_ops=1_000_000):
        layout = tv.analyze(path)
    assert tv.limits().pickle_ops == 500_000  # the block's budget is gone with the block
    assert sorted(layout.names) == ["v", "w"]
    assert (layout["w"].nbytes, layout["v"].nbytes) == (12, 8)
