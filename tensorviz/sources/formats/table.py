"""The formats table: which reader opens a file, decided by its first bytes, not its name.

Each format is one :class:`Format` entry of :data:`FORMATS`: a name, what its first bytes look
like (in words, for the message about a file no entry matches), a test of those bytes, the
file extensions it is known by and the function that reads it (its module, and any optional
dependency, imported only when such a file is opened). :func:`sniff` tries the entries in order
on the file's first :data:`HEAD` bytes; only when no magic matches does the extension pick the
reader, so that reader names exactly what is wrong with the file (a ``.safetensors`` file whose
header length is nonsense). A ``.bin`` that is safetensors, or a GGUF file renamed ``.dat``,
opens as what it is.

To add a format: write its reader in its own module and add one entry here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from tensorviz.core.errors import FileFormatError
from tensorviz.sources.parts import MAX_HEADER_BYTES, TORCH_EXTS, ZIP_MAGIC, Part, open_regular

__all__ = ["FORMATS", "Format", "sniff"]

#: Bytes read to decide a file's format (a zip's first member name fits in them).
HEAD = 320


@dataclass(frozen=True)
class Format:
    """One file format: how to tell it from its first bytes and how to read it.

    ``part`` reads one file into a :class:`~tensorviz.sources.parts.Part` (what it contributes
    to a layout: several files, such as shards, merge); None for an index of other files.
    """

    name: str
    looks_for: str
    matches: Callable[[bytes, int], bool]
    extensions: tuple[str, ...]
    part: Callable[[str], Part] | None


# -- the tests on the first bytes ------------------------------------------------------------------
def _is_safetensors(head: bytes, size: int) -> bool:
    n = int.from_bytes(head[:8], "little") if len(head) >= 8 else -1
    return head[8:9] == b"{" and 0 < n <= min(MAX_HEADER_BYTES, size - 8)


def _first_member(head: bytes) -> bytes:
    """The name of a zip archive's first member (its local header starts the file)."""
    if head[:4] != ZIP_MAGIC[0] or len(head) < 30:
        return b""
    n = int.from_bytes(head[26:28], "little")
    return head[30 : 30 + n]


def _is_npz(head: bytes, size: int) -> bool:
    return _first_member(head).endswith(b".npy")


def _is_torch(head: bytes, size: int) -> bool:
    """A zip archive (torch.save), or a legacy (pre-1.6) pickle: the PROTO opcode, protocol 2-5."""
    return head[:4] in ZIP_MAGIC or (len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5)


def _is_onnx(head: bytes, size: int) -> bool:
    """An ONNX ModelProto as protobuf writes it: ``ir_version`` (field 1, a small varint) first,
    then a field of the model (producer name, domain, graph, opsets, ...)."""
    return len(head) >= 3 and head[0] == 0x08 and 1 <= head[1] <= 0x7F and head[2] in _MODEL_FIELDS


# Tags of ModelProto's fields 2-8 and 14, 20, 25, 26 (length-delimited) and 5 (model_version, varint).
_MODEL_FIELDS = frozenset((0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42, 0x72, 0xA2, 0xCA, 0xD2))


# -- the readers (each imports its module, and any optional dependency, when such a file is opened) --
def _safetensors_part(path: str) -> Part:
    from tensorviz.sources.formats.safetensors import read_safetensors_header, safetensors_part

    return safetensors_part(read_safetensors_header(path))


def _torch_part(path: str) -> Part:
    from tensorviz.sources.formats.checkpoint import torch_part  # torch is imported only for torch files

    return torch_part(path)


def _gguf_part(path: str) -> Part:
    from tensorviz.sources.formats.gguf import gguf_part, read_gguf_header

    return gguf_part(read_gguf_header(path))


def _npy_part(path: str) -> Part:
    from tensorviz.sources.formats.numpy_files import npy_part

    return npy_part(path)


def _npz_part(path: str) -> Part:
    from tensorviz.sources.formats.numpy_files import npz_part

    return npz_part(path)


def _onnx_part(path: str) -> Part:
    from tensorviz.sources.formats.onnx_files import onnx_part

    return onnx_part(path)


FORMATS: tuple[Format, ...] = (
    Format("safetensors", "an 8-byte little-endian header length followed by '{'", _is_safetensors,
           (".safetensors",), _safetensors_part),
    Format("gguf", "the magic 'GGUF'", lambda head, size: head[:4] == b"GGUF", (".gguf",), _gguf_part),
    Format("npy", "the magic '\\x93NUMPY'", lambda head, size: head[:6] == b"\x93NUMPY", (".npy",), _npy_part),
    Format("npz", "a zip archive whose first member is a .npy", _is_npz, (".npz",), _npz_part),
    Format("torch", "a zip archive (torch.save) or a pickle", _is_torch, TORCH_EXTS, _torch_part),
    Format("onnx", "an ONNX ModelProto (protobuf: ir_version, field 1, first)", _is_onnx, (".onnx",), _onnx_part),
    Format("index", "a JSON object (a *.index.json of shards)", lambda head, size: head.lstrip()[:1] == b"{",
           (".json",), None),
)  # fmt: skip


def sniff(path: str) -> Format:
    """The format of the file at ``path``, from its first bytes (its name only when they match
    no format).

    Raises:
        FileFormatError: no format matches; the message lists what was looked for.

    >>> sniff("weights.bin").name   # doctest: +SKIP
    'safetensors'
    """
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(HEAD)
    for fmt in FORMATS:
        if fmt.matches(head, size):
            return fmt
    low = path.lower()
    for fmt in FORMATS:
        if low.endswith(fmt.extensions):
            return fmt
    looked = "; ".join(f"{fmt.name}: {fmt.looks_for}" for fmt in FORMATS)
    raise FileFormatError(  # the bytes are not quoted: they are the contents of some other file
        f"{path}: not a file tensorviz knows ({size} bytes); it looked at the first bytes for {looked}"
    )
