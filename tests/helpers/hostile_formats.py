"""The hostile corpus of the GGUF, NumPy and ONNX readers and of sniffing by content.

``build(folder)`` writes every case and returns ``{case id: path}``; ``python
tests/helpers/hostile_formats.py FOLDER`` runs each in a forked child with the limits of
``tests/helpers/hostile_corpus.py`` (its ``run_case``: address-space limit, alarm, peak RSS) and prints
one JSON line per case. Nothing here imports torch: these readers never need it.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import zipfile
import zlib

import numpy as np

from tests.helpers.formats_files import ARR, STR, gguf_raw, gstr, kv, tinfo
from tests.helpers.hostile_corpus import run_case

GOOD_KV = [kv("general.architecture", STR, gstr("llama"))]


def _npy_header(descr: str, shape: tuple) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _vocab(n: int) -> bytes:
    """A GGUF with an ``n``-string token array (4-byte tokens) and one small tensor."""
    items = b"".join(struct.pack("<Q", 4) + b"tok" + bytes([i % 256]) for i in range(n))
    return gguf_raw([*GOOD_KV, kv("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, n) + items)],
                    [tinfo("w", (32, 2), 8, 0)], bytes(68))  # fmt: skip


def _many_tensors(n: int) -> bytes:
    """``n`` F32 tensors of 8 elements (32 bytes: no padding between them)."""
    infos = [tinfo(f"blk.{i // 10}.w{i % 10}", (8,), 0, 32 * i) for i in range(n)]
    return gguf_raw(GOOD_KV, infos, bytes(32 * n))


def _sparse(path: str, head: bytes, size: int) -> None:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def _npz_bomb(path: str, n: int) -> None:
    """An .npz whose one deflated member inflates to ``n`` zero bytes of float64 (a few hundred KB)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("bomb.npy", "w", force_zip64=True) as m:
        m.write(_npy_header("<f8", (n // 8,)))
        zeros = bytes(1 << 20)
        for _ in range(n >> 20):
            m.write(zeros)


def _npz_count_lies(count: int) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.arange(3))
    data = buf.getvalue()
    i = data.rfind(b"PK\x05\x06")
    return data[: i + 8] + struct.pack("<HH", 0xFFFF if count > 0xFFFF else count, 0xFFFF) + data[i + 12 :]


def _len(n: int) -> bytes:
    """A protobuf varint."""
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + _len(len(payload)) + payload


def _model_of_initializer(tensor: bytes) -> bytes:
    """A ModelProto: ir_version 7, a graph holding one initializer with the given fields."""
    return b"\x08\x07" + _field(0x3A, _field(0x2A, tensor))


def _onnx(folder: str, name: str, ext: dict[str, str] | None = None, n: int = 1) -> str:
    import onnx
    from onnx import helper, numpy_helper

    path = os.path.join(folder, name)
    inits = [numpy_helper.from_array(np.arange(4, dtype=np.float32), f"w{i}") for i in range(n)]
    g = helper.make_graph([], "g", [], [], initializer=inits)
    m = helper.make_model(g)
    if ext is not None:
        t = m.graph.initializer[0]
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in ext.items():
            e = t.external_data.add()
            e.key, e.value = k, v
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def build(folder: str) -> dict[str, str]:
    """Write every case into ``folder``; returns {case id: path to analyse}."""
    cases: dict[str, str] = {}

    def put(case: str, name: str, data: bytes) -> None:
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        cases[case] = path

    # GGUF: counts, lengths and offsets that lie; unknown types; sizes at the limits
    put("gguf-tensor-count-2^63", "tc.gguf", gguf_raw(GOOD_KV, [], n_tensors=2**63))
    put("gguf-kv-count-2^64-1", "kc.gguf", gguf_raw(GOOD_KV, [], n_kv=2**64 - 1))
    put("gguf-string-2^63", "s63.gguf", gguf_raw([kv("k", STR, gstr(b"x", 2**63))], []))
    put("gguf-array-2^60-strings", "arr.gguf", gguf_raw([kv("a", ARR, struct.pack("<IQ", STR, 2**60))], []))
    put("gguf-array-2^61-u64", "arr64.gguf", gguf_raw([kv("a", ARR, struct.pack("<IQ", 10, 2**61))], []))
    put("gguf-5M-strings", "v5m.gguf", _vocab(5_000_000))
    put("gguf-vocab-1M-tokens", "v1m.gguf", _vocab(1_000_000))
    put("gguf-100k-tensors", "t100k.gguf", _many_tensors(100_000))
    put("gguf-unknown-value-type", "vt.gguf", gguf_raw([kv("k", 200, bytes(8))], []))
    put("gguf-unknown-ggml-type", "gt.gguf", gguf_raw(GOOD_KV, [tinfo("w", (32,), 99, 0)], bytes(64)))
    put("gguf-overlapping-tensors", "ov.gguf", gguf_raw(GOOD_KV, [tinfo("a", (16,), 0, 0), tinfo("b", (16,), 0, 32)], bytes(128)))  # fmt: skip
    put("gguf-offset-2^64-1", "off.gguf", gguf_raw(GOOD_KV, [tinfo("w", (8,), 0, 2**64 - 1)], bytes(32)))
    put("gguf-dims-overflow", "dims.gguf", gguf_raw(GOOD_KV, [tinfo("w", (2**40, 2**40), 0, 0)], bytes(32)))
    put("gguf-n-dims-2^32-1", "nd.gguf", gguf_raw(GOOD_KV, [tinfo("w", (8,), 0, 0, n_dims=2**32 - 1)], bytes(32)))
    put("gguf-truncated-data", "trunc.gguf", gguf_raw(GOOD_KV, [tinfo("w", (1024,), 0, 0)], bytes(100)))
    _sparse(os.path.join(folder, "sparse8g.gguf"), gguf_raw(GOOD_KV, [tinfo("w", (1 << 31,), 0, 0)]), 9 << 30)
    cases["gguf-sparse-8GiB-tensor"] = os.path.join(folder, "sparse8g.gguf")
    put("gguf-renamed-bin", "model.bin", _many_tensors(3))
    put("gguf-key-of-100MB", "key.gguf", gguf_raw([kv("k" * 100_000_000, STR, gstr("v"))], []))

    # NumPy
    put("npy-object-array", "obj.npy", _npy_header("|O", (2,)) + b"\x80\x04\x95cos\nsystem\n.")
    put("npy-header-2^31", "h31.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{")
    put("npy-shape-2^40-truncated", "big.npy", _npy_header("<f8", (2**40,)))
    put("npy-dims-overflow", "ovf.npy", _npy_header("<f8", (2**40, 2**40, 2**40)))
    put("npy-deep-literal", "deep.npy", b"\x93NUMPY\x01\x00\x10\x27" + b"(" * 9999 + b"\n")
    _npz_bomb(os.path.join(folder, "bomb.npz"), 256 << 20)
    cases["npz-deflated-256MiB"] = os.path.join(folder, "bomb.npz")
    put("npz-count-lies-65535", "count.npz", _npz_count_lies(10**6))

    # ONNX
    os.symlink("/etc/passwd", os.path.join(folder, "passwd.data"))
    os.mkfifo(os.path.join(folder, "pipe.data"))
    with open(os.path.join(folder, "small.data"), "wb") as f:
        f.write(bytes(16))
    cases["onnx-location-escapes"] = _onnx(folder, "esc.onnx", {"location": "../../etc/passwd", "length": "16"})
    cases["onnx-location-link-out"] = _onnx(folder, "link.onnx", {"location": "passwd.data", "length": "16"})
    cases["onnx-location-fifo"] = _onnx(folder, "fifo.onnx", {"location": "pipe.data", "length": "16"})
    cases["onnx-length-2^63"] = _onnx(folder, "len.onnx", {"location": "small.data", "length": str(2**63)})
    cases["onnx-offset-negative"] = _onnx(folder, "neg.onnx", {"location": "small.data", "offset": "-16"})
    cases["onnx-20k-initializers"] = _onnx(folder, "many.onnx", None, 20_000)
    put("onnx-field-claims-2^62", "field.onnx", b"\x08\x07\x3a" + b"\x80\x80\x80\x80\x80\x80\x80\x80\x40" + bytes(16))
    put("onnx-name-of-50MB", "name.onnx", _model_of_initializer(_field(0x42, b"n" * 50_000_000)))
    put("onnx-1M-packed-dims", "dims.onnx", _model_of_initializer(_field(0x0A, b"\x01" * 1_000_000)))
    put("onnx-truncated", "cut.onnx", open(_onnx(folder, "whole.onnx", None, 2), "rb").read()[:-10])

    # sniffing
    put("unknown-binary", "blob", bytes(range(256)) * 4)
    put("zlib-stream-named-npz", "z.npz", zlib.compress(bytes(1000)))
    return cases


def main(folder: str) -> None:
    import tensorviz as tv

    with open(os.path.join(folder, "cases.json")) as f:
        cases = json.load(f)
    tv.analyze(cases["gguf-renamed-bin"])  # import what every case needs, once
    for case, path in cases.items():
        out = run_case(path)
        out["case"] = case
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
