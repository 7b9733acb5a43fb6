"""Builders of GGUF, NumPy and ONNX files for the format tests and the hostile formats corpus.

Valid files are written by each format's own writer (``gguf.GGUFWriter``, ``np.save``,
``onnx.save_model``); :func:`gguf_raw` writes a GGUF header byte by byte, so a test can make
every field lie.
"""

from __future__ import annotations

import struct

import numpy as np

# GGUF value type ids
U32, I32, F32_V, STR, ARR, U64 = 4, 5, 6, 8, 9, 10


def gstr(text: str | bytes, length: int | None = None) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if length is None else length) + raw


def kv(key: str, type_id: int, payload: bytes) -> bytes:
    """One key/value pair: the key, the value type, the value's bytes as given."""
    return gstr(key) + struct.pack("<I", type_id) + payload


def tinfo(name: str | bytes, ne: tuple[int, ...], type_id: int, offset: int, n_dims: int | None = None) -> bytes:
    dims = len(ne) if n_dims is None else n_dims
    return gstr(name) + struct.pack("<I", dims) + b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", type_id, offset)  # fmt: skip


def gguf_raw(
    kvs: list[bytes],
    infos: list[bytes],
    data: bytes = b"",
    *,
    version: int = 3,
    n_tensors: int | None = None,
    n_kv: int | None = None,
    alignment: int = 32,
) -> bytes:
    """A GGUF file: preamble, the given key/values and tensor infos, padding, then ``data``."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv)  # fmt: skip
    head += b"".join(kvs) + b"".join(infos)
    return head + bytes(-len(head) % alignment) + data


def write_gguf(path: str, tensors: list[tuple[str, object, object]], *, arch: str = "llama", alignment: int | None = None,
               vocab: int = 0, context: int | None = None) -> None:  # fmt: skip
    """A GGUF file written by ``gguf.GGUFWriter``: ``(name, numpy array, ggml type or None)``;
    a block-quantized tensor's array holds its bytes (uint8, one row per tensor row)."""
    import gguf

    w = gguf.GGUFWriter(path, arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    if context is not None:
        w.add_context_length(context)
    if vocab:
        w.add_tokenizer_model("llama")
        w.add_token_list([f"tok{i}" for i in range(vocab)])
    for name, array, qtype in tensors:
        w.add_tensor(name, array, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quant_bytes(qtype, rows: int, row_elems: int, seed: int = 0) -> np.ndarray:
    """Random bytes of a ``rows x row_elems`` tensor of a block-quantized ggml type."""
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(rows, row_elems // block * size), dtype=np.uint8)
