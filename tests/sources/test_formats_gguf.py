"""GGUF, header only: every view checked against ``gguf.GGUFReader`` (ggml's own Python
reader) on files ``gguf.GGUFWriter`` wrote, and against the bytes themselves; and each rule of
ggml's reader refused by name."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import tensorviz as tv
from tensorviz.core.errors import FileFormatError
from tensorviz.sources.formats.gguf import GGML_TYPES, read_gguf_header
from tests.helpers.formats_files import ARR, STR, U32, gguf_raw, gstr, kv, quant_bytes, tinfo, write_gguf

MIXED = [
    ("token_embd.weight", np.arange(64, dtype=np.float32).reshape(8, 8), None),
    ("blk.0.attn_q.weight", quant_bytes(Q.Q4_K, 3, 512, 1), Q.Q4_K),
    ("blk.0.attn_k.weight", quant_bytes(Q.Q8_0, 5, 64, 2), Q.Q8_0),
    ("blk.0.attn_v.weight", np.arange(12, dtype=np.float16).reshape(3, 4), None),
    ("blk.0.ffn_up.weight", quant_bytes(Q.IQ2_XXS, 2, 256, 3), Q.IQ2_XXS),
    ("blk.0.ffn_down.weight", quant_bytes(Q.Q6_K, 1, 768, 4), Q.Q6_K),
    ("blk.0.ffn_gate.weight", quant_bytes(Q.IQ4_NL, 4, 32, 5), Q.IQ4_NL),
    ("blk.0.attn_norm.weight", np.ones(7, dtype=np.float32), None),
    ("blk.0.bf16.weight", quant_bytes(Q.BF16, 2, 6, 6), Q.BF16),
    ("blk.0.mxfp4.weight", quant_bytes(Q.MXFP4, 2, 64, 7), Q.MXFP4),
    ("blk.0.count", np.arange(3, dtype=np.int32), None),
]


def read_bytes(path: str, start: int, stop: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(stop - start)


@pytest.mark.parametrize("alignment", [None, 64])
def test_every_view_is_where_gguf_reader_puts_it(tmp_path, alignment):
    path = str(tmp_path / "mixed.gguf")
    write_gguf(path, MIXED, alignment=alignment, vocab=40, context=2048)
    layout = tv.analyze(path)
    reader = gguf.GGUFReader(path)
    assert [v.name for v in layout.views] == [t.name for t in reader.tensors]
    for t in reader.tensors:
        v = layout[t.name]
        assert (v.start, v.stop) == (t.data_offset, t.data_offset + t.n_bytes), t.name
        assert v.start % (alignment or 32) == 0
        assert read_bytes(path, v.start, v.stop) == t.data.tobytes()  # the bytes themselves
        shape = tuple(int(n) for n in reversed(t.shape))
        name = t.tensor_type.name
        if GGML_TYPES[int(t.tensor_type)][3]:  # a float or integer type: a view of its elements
            assert v.logical is None and v.shape == shape and v.dtype == GGML_TYPES[int(t.tensor_type)][3]
            assert v.itemsize == gguf.GGML_QUANT_SIZES[t.tensor_type][1] and v.is_contiguous
        else:
            assert (v.dtype, v.shape, v.stride) == ("uint8", (t.n_bytes,), (1,))
            assert v.logical.dtype == name and v.logical.shape == shape
            assert (v.logical.block, v.logical.block_nbytes) == gguf.GGML_QUANT_SIZES[t.tensor_type]
    assert layout["blk.0.attn_q.weight"].logical.shape == (3, 512)
    (st,) = layout.storages
    assert st.nbytes == os.path.getsize(path)
    assert st.covered_nbytes == sum(int(t.n_bytes) for t in reader.tensors)
    md = layout.metadata
    assert md["format"] == "gguf" and md["header"] == {path: (0, md["header"][path][1])}
    un = md["unreferenced"]
    assert st.header_nbytes == md["header"][path][1]  # the header is the header, not unreferenced
    assert (
        un["header bytes"] + un["alignment padding bytes"] + un["trailing bytes"]
        == st.unreferenced_nbytes + st.header_nbytes
    )
    assert (
        un["header bytes"] + un["alignment padding bytes"] - md["header"][path][1] < (alignment or 32) * len(MIXED) + 64
    )
    assert md["gguf"]["architecture"] == "llama" and md["gguf"]["context_length"] == 2048
    assert md["gguf"]["vocabulary"] == 40 and md["gguf"]["alignment"] == (alignment or 32)
    assert reader.data_offset == md["header"][path][1] + -md["header"][path][1] % (alignment or 32)


def test_the_block_table_is_ggmls():
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        name, b, s, _ = GGML_TYPES[int(qtype)]
        assert (name, b, s) == (qtype.name, block, size)
    assert set(GGML_TYPES) == {int(q) for q in gguf.GGML_QUANT_SIZES}


def test_tied_output_is_said_and_text_shows_quant_types(tmp_path):
    path = str(tmp_path / "m.gguf")
    write_gguf(path, MIXED[:3])
    layout = tv.analyze(path)
    assert layout.metadata["dropped"] == {"output.weight": "token_embd.weight"}
    text = str(layout)
    assert "dropped: output.weight -> kept token_embd.weight" in text
    assert "tied: llama.cpp reads the absent output.weight from token_embd.weight" in text
    assert "uint8[864] holding Q4_K[3×512, 256-element blocks of 144 B]" in text
    write_gguf(path, [*MIXED[:2], ("output.weight", np.zeros((8, 8), np.float32), None)])
    assert "dropped" not in tv.analyze(path).metadata


def test_renamed_gguf_and_safetensors_named_bin_open_by_their_magic(tmp_path):
    from safetensors.numpy import save_file

    write_gguf(str(tmp_path / "model.dat"), MIXED[:2])
    assert tv.analyze(str(tmp_path / "model.dat")).metadata["format"] == "gguf"
    save_file({"w": np.zeros(3, np.float32)}, str(tmp_path / "pytorch_model.bin"))
    layout = tv.analyze(str(tmp_path / "pytorch_model.bin"))
    assert layout.metadata["format"] == "safetensors" and layout["w"].start == 8 + raw_len(
        tmp_path / "pytorch_model.bin"
    )


def raw_len(path) -> int:
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def test_an_unknown_file_says_what_was_looked_for(tmp_path):
    p = tmp_path / "weights.dat"
    p.write_bytes(b"hello, this is not a model\n" * 4)
    with pytest.raises(FileFormatError) as err:
        tv.analyze(str(p))
    msg = str(err.value)
    assert "weights.dat: not a file tensorviz knows (108 bytes)" in msg
    for what in ("gguf: the magic 'GGUF'", "safetensors: an 8-byte little-endian header length", "zip archive"):
        assert what in msg
    assert "hello" not in msg  # the file's bytes are not quoted


def test_header_only_gguf_never_imports_torch_or_gguf(tmp_path):
    path = str(tmp_path / "m.gguf")
    write_gguf(path, MIXED)
    code = textwrap.dedent(f"""
        import sys, tensorviz as tv
        layout = tv.analyze({path!r}); layout.storages; str(layout)
        print(sorted(m for m in ("torch", "gguf", "matplotlib", "onnx") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- ggml's rules, one by one -------------------------------------------------------------------------
GOOD_KV = [kv("general.architecture", STR, gstr("llama"))]


def one(name="w", ne=(32, 2), type_id=8, offset=0):
    return tinfo(name, ne, type_id, offset)


CASES = {
    "tensor count lies": (gguf_raw(GOOD_KV, [one()], bytes(68), n_tensors=2**62), "the header claims 4611686018427387904 tensors"),
    "kv count lies": (gguf_raw(GOOD_KV, [], n_kv=10**12), "the header claims 1000000000000 key/value pairs"),
    "string of 2^63 bytes": (gguf_raw([kv("k", STR, gstr(b"x", 2**63))], []), "the value of key 'k' (9223372036854775808 bytes) at byte"),
    "key of 2^63 bytes": (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**63) + bytes(20), "needs 9223372036854775808 bytes, but the file ends"),
    "array length lies": (gguf_raw([kv("a", ARR, struct.pack("<IQ", STR, 2**40))], []), "the 1099511627776 strings of array key 'a'"),
    "unknown value type": (gguf_raw([kv("k", 13, b"\0" * 8)], []), "key 'k' has value type 13, which GGUF does not define"),
    "array of arrays": (gguf_raw([kv("a", ARR, struct.pack("<IQ", ARR, 1))], []), "key 'a' is an array of arrays"),
    "duplicate key": (gguf_raw(GOOD_KV * 2, []), "gives key 'general.architecture' twice"),
    "unknown ggml type": (gguf_raw(GOOD_KV, [one(type_id=77)], bytes(68)), "tensor 'w': ggml type 77 is unknown or removed"),
    "removed ggml type": (gguf_raw(GOOD_KV, [one(type_id=4)], bytes(68)), "tensor 'w': ggml type 4 is unknown or removed"),
    "row not a block multiple": (gguf_raw(GOOD_KV, [one(ne=(31, 2))], bytes(68)), "rows of 31 elements are not a multiple of Q8_0's block of 32"),
    "five dimensions": (gguf_raw(GOOD_KV, [one(ne=(32, 1, 1, 1, 1))], bytes(68)), "tensor 'w': 5 dimensions; ggml allows at most 4"),
    "dimension over int64": (gguf_raw(GOOD_KV, [one(ne=(32, 2**63))], bytes(68)), "dimension 1 is 9223372036854775808, over ggml's int64 range"),
    "element count overflow": (gguf_raw(GOOD_KV, [one(ne=(2**32, 2**32))], bytes(68)), "hold more than 2^63 elements"),
    "name of 64 bytes": (gguf_raw(GOOD_KV, [one(name="n" * 64)], bytes(68)), "tensor 0's name is 64 bytes; ggml allows at most 63"),
    "duplicate tensor": (gguf_raw(GOOD_KV, [one(), one(offset=96)], bytes(160)), "tensor 'w': named twice"),
    "overlapping tensors": (gguf_raw(GOOD_KV, [one(), one("v", offset=32)], bytes(160)), "tensor 'v' has offset 32, expected 96 (it overlaps the tensor before it)"),
    "gap between tensors": (gguf_raw(GOOD_KV, [one(), one("v", offset=128)], bytes(200)), "tensor 'v' has offset 128, expected 96 (it leaves a gap"),
    "offset of 2^64-1": (gguf_raw(GOOD_KV, [one(offset=2**64 - 1)], bytes(68)), "tensor 'w' has offset 18446744073709551615, expected 0"),
    "truncated data": (gguf_raw(GOOD_KV, [one()], bytes(60)), "tensor 'w' ends at byte"),
    "alignment not a power of two": (gguf_raw([kv("general.alignment", U32, struct.pack("<I", 48))], []), "general.alignment is 48, not a power of two"),
    "alignment of another type": (gguf_raw([kv("general.alignment", 10, struct.pack("<Q", 32))], []), "general.alignment has type UINT64; ggml requires UINT32"),
    "version 1": (gguf_raw([], [], version=1), "GGUF version 1 is no longer supported"),
    "version 4": (gguf_raw([], [], version=4), "GGUF version 4; ggml reads versions 2 and 3"),
    "big-endian": (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "a big-endian GGUF file"),
    "magic only": (b"GGUF", "the version at byte 4 needs 4 bytes, but the file ends at byte 4"),
    "key not utf-8": (gguf_raw([kv("k", STR, gstr(b"\xff\xfe"))], []), "the value of key 'k' is not UTF-8 text"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_ggml_rules_are_named(tmp_path, case):
    data, fragment = CASES[case]
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(FileFormatError) as err:
        read_gguf_header(str(path))
    assert fragment in str(err.value)
    assert str(path) in str(err.value)


def test_a_raw_valid_file_matches_gguf_reader(tmp_path):
    """The hand-written builder agrees with GGUFReader (so the cases above differ from a valid
    file only by the field they break)."""
    path = tmp_path / "ok.gguf"
    data = gguf_raw(GOOD_KV, [one(), one("v", offset=96)], bytes(96 + 68))
    path.write_bytes(data)
    r = gguf.GGUFReader(str(path))
    layout = tv.analyze(str(path))
    assert [(layout[t.name].start, layout[t.name].stop) for t in r.tensors] == [
        (int(t.data_offset), int(t.data_offset) + int(t.n_bytes)) for t in r.tensors
    ]


def test_model_map_and_json_show_quant_types_by_their_logical_elements(tmp_path):
    from tensorviz.cli import layout_to_json

    path = str(tmp_path / "m.gguf")
    write_gguf(path, MIXED[:3])  # F32 8x8, Q4_K 3x512, Q8_0 5x64
    layout = tv.analyze(path)
    tree = layout.tree()
    assert tree.root.numel == 64 + 3 * 512 + 5 * 64  # elements, not bytes
    assert tree.root.nbytes == 256 + 3 * 2 * 144 + 5 * 2 * 34
    text = tree.to_text()
    assert "Q4_K[3, 512]" in text and "Q8_0[5, 64]" in text and "float32[8, 8]" in text
    views = {v["name"]: v for v in layout_to_json(layout)["views"]}
    assert views["blk.0.attn_q.weight"]["logical"] == {
        "dtype": "Q4_K",
        "shape": (3, 512),
        "block": 256,
        "block_nbytes": 144,
    }  # noqa: E501
    assert views["token_embd.weight"]["logical"] is None


NUMPY_TYPES = {
    Q.F32: np.float32,
    Q.F16: np.float16,
    Q.F64: np.float64,
    Q.I8: np.int8,
    Q.I16: np.int16,
    Q.I32: np.int32,
    Q.I64: np.int64,
}  # noqa: E501


@pytest.mark.parametrize("seed", range(6))
def test_random_files_match_gguf_reader(tmp_path, seed):
    """Random tensor lists (every ggml type GGUFWriter writes, 1-4 dims, odd sizes, alignments
    8-256): every view where GGUFReader puts it, with its bytes."""
    rng = np.random.default_rng(seed)
    tensors = []
    for i in range(int(rng.integers(1, 25))):
        qtype = list(gguf.GGML_QUANT_SIZES)[int(rng.integers(len(gguf.GGML_QUANT_SIZES)))]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        outer = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(0, 3))))
        row = block * int(rng.integers(1, 4))
        if qtype in NUMPY_TYPES:
            tensors.append((f"t{i}", rng.integers(0, 100, size=(*outer, row)).astype(NUMPY_TYPES[qtype]), None))
        else:
            tensors.append((f"t{i}", rng.integers(0, 256, size=(*outer, row // block * size), dtype=np.uint8), qtype))
    path = str(tmp_path / "r.gguf")
    alignment = int(2 ** rng.integers(3, 9))
    write_gguf(path, tensors, alignment=alignment)
    layout = tv.analyze(path)
    for t in gguf.GGUFReader(path).tensors:
        v = layout[t.name]
        assert (v.start, v.stop) == (t.data_offset, t.data_offset + t.n_bytes)
        assert read_bytes(path, v.start, v.stop) == t.data.tobytes()
        assert (v.logical.shape if v.logical else v.shape) == tuple(int(n) for n in reversed(t.shape))
    assert layout.metadata["gguf"]["alignment"] == alignment


def test_metadata_values_match_gguf_reader(tmp_path):
    path = str(tmp_path / "kv.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("a.u8", 200)
    w.add_int8("a.i8", -5)
    w.add_uint16("a.u16", 60000)
    w.add_int16("a.i16", -300)
    w.add_uint32("a.u32", 4_000_000_000)
    w.add_int32("a.i32", -7)
    w.add_float32("a.f32", 0.5)
    w.add_uint64("a.u64", 2**63)
    w.add_int64("a.i64", -(2**40))
    w.add_float64("a.f64", 1.25)
    w.add_bool("a.bool", True)
    w.add_string("a.short", "hello")
    w.add_string("a.long", "x" * 500)
    w.add_array("a.ints", [1, 2, 3])
    w.add_array("a.strs", ["p", "qq"])
    w.add_tensor("w", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    h = read_gguf_header(path)
    fields = gguf.GGUFReader(path).fields
    for key in (
        "a.u8",
        "a.i8",
        "a.u16",
        "a.i16",
        "a.u32",
        "a.i32",
        "a.f32",
        "a.u64",
        "a.i64",
        "a.f64",
        "a.bool",
        "a.short",
    ):
        assert h.metadata[key] == fields[key].contents(), key
    assert h.metadata["a.long"] == {"type": "STRING", "length": 500}  # long strings are summarised
    assert h.metadata["a.ints"] == {"type": "ARRAY[INT32]", "length": 3}
    assert h.metadata["a.strs"] == {"type": "ARRAY[STRING]", "length": 2}
    assert h.data_start == gguf.GGUFReader(path).data_offset


def test_a_folder_of_one_gguf_or_of_split_gguf_shards(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    write_gguf(str(one / "model-Q4_K_M.gguf"), MIXED[:3])
    assert tv.analyze(str(one)).names == tuple(n for n, _, _ in MIXED[:3])
    write_gguf(str(one / "model-Q8_0.gguf"), MIXED[:3])
    with pytest.raises(FileFormatError, match="holds 2 weight files of other formats .*; pass the one to analyse"):
        tv.analyze(str(one))
    split = tmp_path / "split"
    split.mkdir()
    write_gguf(str(split / "m-00001-of-00002.gguf"), MIXED[:3])
    write_gguf(str(split / "m-00002-of-00002.gguf"), MIXED[3:6])
    layout = tv.analyze(str(split))
    assert layout.names == tuple(n for n, _, _ in MIXED[:6]) and len(layout.storages) == 2
    for shard in ("m-00001-of-00002.gguf", "m-00002-of-00002.gguf"):
        for t in gguf.GGUFReader(str(split / shard)).tensors:
            v = layout[t.name]
            assert v.storage == ("file", str(split / shard))
            assert (v.start, v.stop) == (t.data_offset, t.data_offset + t.n_bytes)


def test_a_split_shard_does_not_claim_a_tie(tmp_path):
    """In a shard of a split model output.weight may sit in another shard: no tie is claimed."""
    emb = tinfo("token_embd.weight", (32, 2), 8, 0)
    path = tmp_path / "s.gguf"
    path.write_bytes(gguf_raw([*GOOD_KV, kv("split.count", 2, struct.pack("<H", 2))], [emb], bytes(68)))
    assert "dropped" not in tv.analyze(str(path)).metadata
    path.write_bytes(gguf_raw(GOOD_KV, [emb], bytes(68)))
    assert tv.analyze(str(path)).metadata["dropped"] == {"output.weight": "token_embd.weight"}
