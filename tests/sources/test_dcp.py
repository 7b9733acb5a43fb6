"""tv.analyze("ckpt_dir/") on torch.distributed.checkpoint folders: metadata only, restricted unpickling.

Every chunk and byte range is checked against DCP's own reader (``FileSystemReader``; it
unpickles freely, which is fine on folders these tests wrote). The sharded folders come from
the spawned FSDP2 and tensor-parallel runs of tests/helpers/dist_worker.py (world sizes 2 and 4).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader

import tensorviz as tv
from tensorviz.cli import main as cli_main
from tensorviz.core.errors import FileFormatError, UnsafeCheckpointError
from tensorviz.plan.diagram import PALETTE
from tests.helpers.dist_runs import worker_run


def _chunk_name(fqn, offsets, sizes):
    return fqn + "[" + ", ".join(f"{o}:{o + n}" for o, n in zip(offsets, sizes)) + "]"


def _check_against_dcp(folder: str) -> int:
    """Every chunk of DCP's own metadata is a view at its place and a byte range of its file."""
    layout = tv.analyze(folder)
    md = FileSystemReader(folder).read_metadata()
    places = {(i.fqn, tuple(i.offset) if i.offset is not None else None): s for i, s in md.storage_data.items()}
    n = 0
    for fqn, meta in md.state_dict_metadata.items():
        if not hasattr(meta, "chunks"):
            place = places[(fqn, None)]
            assert layout.metadata["values"][fqn] == {
                "file": place.relative_path,
                "offset": place.offset,
                "length": place.length,
            }
            continue
        storage = ("global", fqn)
        itemsize = torch.empty(0, dtype=meta.properties.dtype).element_size()
        strides = torch.empty(tuple(meta.size)).stride() if len(meta.size) else ()
        for c in meta.chunks:
            name = _chunk_name(fqn, c.offsets, c.sizes)
            v = layout[name]
            assert v.storage == storage and v.shape == tuple(c.sizes) and v.stride == tuple(strides)
            assert v.offset == sum(o * s for o, s in zip(c.offsets, strides))
            assert v.dtype == str(meta.properties.dtype).removeprefix("torch.") and v.itemsize == itemsize
            place = places[(fqn, tuple(c.offsets))]
            f = layout[f"{place.relative_path}:{name}"]
            assert (f.start, f.stop) == (place.offset, place.offset + place.length)
            assert f.storage == ("file", os.path.join(folder, place.relative_path))
            assert layout.metadata["chunks"][name]["offsets"] == list(c.offsets)
            n += 1
        g = next(s for s in layout.storages if s.key == storage)
        assert g.nbytes == meta.size.numel() * itemsize
    for s in layout.storages:
        if s.device == "file":
            assert s.nbytes == os.path.getsize(s.key[1])
    assert layout.metadata["problems"] == []
    assert len(layout) == 2 * n + len(layout.metadata["values"])
    return n


@pytest.mark.spawn
@pytest.mark.parametrize(
    ("world", "scenario", "chunks"), [(2, "fsdp", 23 * 2 - 1), (4, "fsdp", 0), (4, "tp", 14), (4, "hsdp", 0)]
)
def test_sharded_runs_read_back_chunk_by_chunk(world, scenario, chunks):
    folder = os.path.join(worker_run(world), f"{scenario}_dcp")
    n = _check_against_dcp(folder)
    if chunks:
        assert n == chunks
    else:  # FSDP2 on 4 ranks: empty shards are not saved, so count what DCP says
        md = FileSystemReader(folder).read_metadata()
        assert n == sum(len(m.chunks) for m in md.state_dict_metadata.values())


@pytest.mark.spawn
def test_tp_checkpoint_places_chunks_of_the_strided_shard():
    layout = tv.analyze(os.path.join(worker_run(4), "tp_dcp"))
    # FSDP over TP: rows 4-7 of 0.weight are rank 2's, saved by rank 2 in its own file
    v = layout["0.weight[4:8, 0:8]"]
    assert (v.start, v.stop) == (128, 256)
    assert layout.metadata["chunks"]["0.weight[4:8, 0:8]"]["file"] == "__2_0.distcp"
    # 2.bias is replicated over tp: saved once per dp coordinate
    assert [n for n in layout.storages[3].names] == ["2.bias[0:4]", "2.bias[4:8]"]
    assert layout.relation("2.weight[0:4, 0:8]", "2.weight[0:4, 8:16]") == "disjoint"


@pytest.fixture
def single(tmp_path):
    folder = str(tmp_path / "ckpt")
    sd = {"w": torch.arange(6.0).view(2, 3), "b": torch.zeros(4, dtype=torch.bfloat16), "step": 7, "cfg": {"lr": 0.5}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no process group: saving from one process"
        dcp.save(sd, checkpoint_id=folder)
    return folder


def test_single_process_checkpoint_with_values(single):
    assert _check_against_dcp(single) == 2
    layout = tv.analyze(single)
    assert set(layout.metadata["values"]) == {"step", "cfg.lr"}
    assert layout["b[0:4]"].dtype == "bfloat16" and layout["b[0:4]"].nbytes == 8
    # the file is covered: pickled values first, then the two tensor records
    f = next(s for s in layout.storages if s.device == "file")
    assert f.unreferenced_nbytes == 0 and f.names[:2] == ("__0_0.distcp:w[0:2, 0:3]", "__0_0.distcp:b[0:4]")
    assert tv.analyze(os.path.join(single, ".metadata"))["w[0:2, 0:3]"].shape == (2, 3)


def test_cli_json_of_a_dcp_folder(single, tmp_path, capsys):
    out = tmp_path / "layout.json"
    assert cli_main([single, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["metadata"]["format"] == "dcp"
    assert [v["name"] for v in doc["views"] if v["device"] == "global"] == ["w[0:2, 0:3]", "b[0:4]"]
    assert "w[0:2, 0:3]" in capsys.readouterr().out
    png = tmp_path / "ranks.png"
    assert cli_main([single, "--by", "rank", "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "storage #0 w · global 2×3 24 B: 1 view" in capsys.readouterr().out
    assert cli_main([str(tmp_path), "--by", "rank"]) == 1  # not a checkpoint folder


def test_reading_imports_no_torch(single):
    code = (
        "import sys, tensorviz as tv; l = tv.analyze(sys.argv[1]); "
        "assert 'torch' not in sys.modules, 'torch imported'; print(len(l))"
    )
    proc = subprocess.run([sys.executable, "-c", code, single], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "6"  # 2 chunks, their 2 file ranges, 2 pickled values


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_foreign_globals_are_refused_and_never_run(tmp_path):
    folder = tmp_path / "evil"
    folder.mkdir()
    (folder / ".metadata").write_bytes(pickle.dumps({"x": _Boom()}))
    with pytest.raises(UnsafeCheckpointError, match=r"names posix\.system.*restricted unpickler"):
        tv.analyze(str(folder))
    assert not (folder / "PWNED").exists() and not os.path.exists("PWNED")


def test_malformed_metadata_is_a_clear_error(tmp_path, single):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / ".metadata").write_bytes(b"not a pickle at all")
    with pytest.raises(FileFormatError, match=r"bad/\.metadata: not a readable DCP metadata pickle"):
        tv.analyze(str(folder))
    (folder / ".metadata").write_bytes(pickle.dumps({"state_dict_metadata": {}}))
    with pytest.raises(FileFormatError, match="holds dict, not DCP's Metadata"):
        tv.analyze(str(folder))
    # a chunk outside its global tensor
    md = FileSystemReader(single).read_metadata()
    md.state_dict_metadata["w"].chunks[0].sizes = torch.Size([3, 3])
    (folder / ".metadata").write_bytes(pickle.dumps(md))
    with pytest.raises(FileFormatError, match=r"chunk w\[0:3, 0:3\] of 'w' lies outside its global size \[2, 3\]"):
        tv.analyze(str(folder))


def test_truncated_file_is_reported(single):
    md = FileSystemReader(single).read_metadata()
    path = os.path.join(single, "__0_0.distcp")
    with open(path, "r+b") as f:
        f.truncate(4000)
    expected = []
    for index, place in md.storage_data.items():
        if place.offset + place.length > 4000 and index.offset is not None:
            name = _chunk_name(index.fqn, index.offset, md.state_dict_metadata[index.fqn].size)
            end = place.offset + place.length
            expected.append(f"{name}: bytes [{place.offset}, {end}) lie past the end of __0_0.distcp (4000 bytes)")
    layout = tv.analyze(single)
    assert len(expected) == 2 and layout.metadata["problems"] == expected


@pytest.mark.spawn
def test_dcp_chunks_coloured_by_the_rank_that_saved_them():
    layout = tv.analyze(os.path.join(worker_run(4), "tp_dcp"))
    d = tv.diagram(layout, by="rank", max_lanes=100)
    colour = {bar.names[0]: bar.color for bar in d.bars}
    assert colour["0.weight[4:8, 0:8]"] == colour["__2_0.distcp:0.weight[4:8, 0:8]"] == colour["2.weight[4:8, 0:8]"]
    assert colour["0.weight[4:8, 0:8]"] != colour["0.weight[0:4, 0:8]"]
    saved = [colour[f"__{r}_0.distcp:0.weight[{a}:{a + 4}, 0:8]"] for r, a in ((0, 0), (1, 8), (2, 4), (3, 12))]
    assert saved == list(PALETTE[:4])  # rank r: palette colour r, in every diagram
    with pytest.raises(tv.TensorvizError, match="a DCP folder records no mesh"):
        tv.diagram(layout, by="mesh:dp")


def test_hostile_sizes_and_repeated_chunks(tmp_path, single):
    md = FileSystemReader(single).read_metadata()
    folder = tmp_path / "hostile"
    folder.mkdir()
    md.state_dict_metadata["w"].size = torch.Size([2**40, 2**20])
    (folder / ".metadata").write_bytes(pickle.dumps(md))
    with pytest.raises(FileFormatError, match=r"'w' has size \[1099511627776, 1048576\]: .* bytes is over 2\*\*48"):
        tv.analyze(str(folder))
    md = FileSystemReader(single).read_metadata()
    md.state_dict_metadata["w"].chunks[0].offsets = torch.Size([-1, 0])
    (folder / ".metadata").write_bytes(pickle.dumps(md))
    with pytest.raises(
        FileFormatError, match=r"'w': chunk offsets is \(-1, 0\), not a list of integers in \[0, 2\*\*48\)"
    ):
        tv.analyze(str(folder))
    md = FileSystemReader(single).read_metadata()
    chunks = md.state_dict_metadata["w"].chunks
    chunks.append(chunks[0])
    (folder / ".metadata").write_bytes(pickle.dumps(md))
    layout = tv.analyze(str(folder))
    assert [v.name for v in layout.views].count("w[0:2, 0:3]") == 1
    assert [s.name for s in layout.skipped] == ["w[0:2, 0:3]", "__0_0.distcp:w[0:2, 0:3]"]
