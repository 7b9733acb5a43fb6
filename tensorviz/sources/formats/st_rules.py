"""The rules of safetensors' own header reader, applied exactly (no more lenient, no stricter).

safetensors reads a header with Rust's ``serde_json`` and then validates it
(``SafeTensors::read_metadata`` and ``Metadata::validate`` in ``safetensors/src/tensor.rs``).
Each rule below refuses what ``safetensors.safe_open`` refuses, with a
:class:`~tensorviz.core.errors.FileFormatError` that names it:

* the 8-byte little-endian header length is at most 100,000,000 and fits in the file;
* the header is UTF-8 (no byte-order mark, no UTF-16, no raw surrogates) and strict JSON: no
  ``NaN``/``Infinity``, no number beyond a 64-bit float, no lone ``\\uD800`` surrogate escape,
  at most 127 nested arrays and objects;
* the top level is an object; ``__metadata__`` is null or maps strings to strings;
* every other entry is ``{"dtype", "shape", "data_offsets"}`` (other keys ignored) or the list
  ``[dtype, shape, data_offsets]``; the dtype is one of the format's codes; every dimension and
  offset is an integer in ``[0, 2**64)`` (``-0`` and ``2.0`` are not); the element count and
  bit count fit in 64 bits; a packed dtype ends on a byte boundary; ``end - begin`` is exactly
  the tensor's bytes;
* sorted by ``(begin, end)``, each tensor starts where the previous one ended (no gap, no
  overlap, no zero-size tensor inside another's bytes) and the last one ends at the end of the
  file.

A key written twice is read as serde reads it: the last copy of a tensor name or of a
``__metadata__`` item is kept (every copy type-checked), a repeated ``__metadata__``, ``dtype``,
``shape`` or ``data_offsets`` field is refused, repeats inside ignored extra values are ignored.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from tensorviz.core.errors import FileFormatError
from tensorviz.sources.formats.st_serde import as_serde_reads
from tensorviz.sources.parts import MAX_HEADER_BYTES, parse_json, short

#: serde_json's recursion limit: 128 nested arrays and objects are refused, 127 are read.
MAX_DEPTH = 127
U64 = 2**64
# Text that needs the careful parse: serde_json reads ``-0`` as a float (not a count), and a
# long run of digits may not fit a 64-bit float (refused), which Python's int would accept.
# (Found with bytes.translate and a substring search: a regular expression costs 30x more.)
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_NUMBER = b"0" * 300


def _needs_care(raw: bytes) -> bool:
    return b"-0" in raw or _LONG_NUMBER in raw.translate(_DIGITS_AS_ZERO)


#: Bits per element of each code (``Dtype::bitsize``) and the torch dtype name (None: packed).
DTYPES: dict[str, tuple[int, str | None]] = {
    "BOOL": (8, "bool"), "U8": (8, "uint8"), "I8": (8, "int8"), "F8_E5M2": (8, "float8_e5m2"),
    "F8_E4M3": (8, "float8_e4m3fn"), "F8_E8M0": (8, "float8_e8m0fnu"),
    "F8_E4M3FNUZ": (8, "float8_e4m3fnuz"), "F8_E5M2FNUZ": (8, "float8_e5m2fnuz"),
    "I16": (16, "int16"), "U16": (16, "uint16"), "F16": (16, "float16"), "BF16": (16, "bfloat16"),
    "I32": (32, "int32"), "U32": (32, "uint32"), "F32": (32, "float32"), "C64": (64, "complex64"),
    "F64": (64, "float64"), "I64": (64, "int64"), "U64": (64, "uint64"),
    "F4": (4, None), "F6_E2M3": (6, None), "F6_E3M2": (6, None),
}  # fmt: skip


class HeaderEntry(NamedTuple):
    """One tensor of a safetensors header, validated: name, dtype code, shape, data offsets.

    A NamedTuple rather than a dataclass: a 20,000-tensor header makes 20,000 of them.
    """

    name: str
    code: str
    shape: tuple[int, ...]
    begin: int
    end: int


#: (torch dtype name, itemsize, bits per element) of each code, computed once from the table:
#: a lookup never caches what a file wrote (a 60 MB dtype string must not stay resident).
_FACTS: dict[str, tuple[str, int, int]] = {
    code: ((name, bits // 8, bits) if name else ("", 0, bits)) for code, (bits, name) in DTYPES.items()
}


def dtype_facts(code: str) -> tuple[str, int, int] | None:
    """(torch dtype name, itemsize, bits per element) of a code; None if unknown.

    Packed sub-byte codes have no torch dtype: name "" and itemsize 0.
    """
    return _FACTS.get(code) if type(code) is str else None


# -- the length field ------------------------------------------------------------------------------
def header_length(path: str, head: bytes, size: int) -> int:
    """The header length in the first 8 of ``head`` (the file's first 9 bytes), checked.

    A length that cannot be right is not echoed as a number unless the file looks like
    safetensors (a ``{`` follows): the 8 bytes of some other file are its contents.
    """
    if size == 0:
        raise FileFormatError(
            f"{path}: the file is empty (0 bytes); a safetensors file starts with an 8-byte header length"
        )
    if len(head) < 8:
        raise FileFormatError(
            f"{path}: the file is {size} bytes, too short for the 8-byte header "
            f"length a safetensors file starts with (truncated download?)"
        )
    n = int.from_bytes(head[:8], "little")
    looks_right = head[8:9] == b"{"
    if n > MAX_HEADER_BYTES or n > size - 8:
        if looks_right and n <= MAX_HEADER_BYTES:
            raise FileFormatError(
                f"{path}: the header claims {n} bytes but only {size - 8} follow the "
                f"length field; the file is truncated or not safetensors"
            )
        limit = f"the {MAX_HEADER_BYTES}-byte limit safetensors enforces" if n > MAX_HEADER_BYTES else "the file"
        raise FileFormatError(
            f"{path}: its first 8 bytes are not a safetensors header length (they claim more bytes "
            f"than {limit}); the file is {size} bytes, truncated, corrupt or not safetensors"
        )
    return n


# -- the JSON text ---------------------------------------------------------------------------------
class _Refused(ValueError):
    """A JSON value safetensors refuses (the message says which rule)."""


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON (safetensors refuses NaN and Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:30]}{'…' * (len(text) > 30)} is beyond a 64-bit float")
    return value


def _int(text: str) -> int | float:
    if text == "-0":
        return -0.0  # serde_json reads -0 as a float: refused as a count, fine elsewhere
    if len(text) >= 300:
        _finite(text)
    return int(text)


def _text(path: str, raw: bytes) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raise FileFormatError(
            f"{path}: the header starts with a UTF-8 byte-order mark; safetensors refuses it "
            f"(JSON text must not start with one)"
        )
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in raw[:4]:
        raise FileFormatError(f"{path}: the header is UTF-16 or UTF-32 text; safetensors reads only UTF-8")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        i = err.start
        what = "not UTF-8 text"
        if raw[i] == 0xED and len(raw) > i + 1 and raw[i + 1] >= 0xA0:
            what = "not UTF-8 text: it holds a raw UTF-16 surrogate, which UTF-8 forbids"
        raise FileFormatError(
            f"{path}: the header is {what} (byte {i}); the file is corrupt or not safetensors"
        ) from None


def loads(path: str, raw: bytes) -> dict:
    """The header's JSON object, refused wherever safetensors refuses the text.

    The C parser reads the common header; the careful hooks run only where the text needs them
    (``-0``, very long numbers), and the parser that names a repeated key only where one may be.
    """
    text = _text(path, raw)
    hooks: dict[str, Any] = {"parse_constant": _no_constant, "parse_float": _finite}
    if _needs_care(raw):
        hooks["parse_int"] = _int
    try:
        obj = json.loads(text, **hooks)
    except (ValueError, RecursionError):
        obj = parse_json(path, text, "header", **hooks)  # raises, naming the problem
    if type(obj) is dict and _may_repeat_a_name(raw, obj):
        obj = as_serde_reads(path, text, hooks, typed_entry)
    if type(obj) is not dict:
        raise FileFormatError(
            f"{path}: the header must be a JSON object of tensors, got a JSON "
            f"{type(obj).__name__}; this is not a safetensors file"
        )
    if b"\\u" in raw or b"\\U" in raw:
        _no_lone_surrogates(path, raw)
    return obj


def _no_lone_surrogates(path: str, raw: bytes) -> None:
    """Refuse a ``\\uD800``-``\\uDFFF`` escape that is not half of a pair, anywhere in the text:
    safetensors' parser refuses it also in a value a repeated key later replaces (so reading the
    parsed object, where that value is gone, is not enough)."""
    high = -1  # where the last unpaired high surrogate escape ended, with its code
    code_high = 0
    for m in _ESCAPE.finditer(raw):
        hexa = m.group(1)
        code = int(hexa, 16) if hexa else -1
        if high >= 0 and not (m.start() == high and 0xDC00 <= code <= 0xDFFF):
            _lone(path, code_high)
        if 0xD800 <= code <= 0xDBFF:
            high, code_high = m.end(), code
        elif 0xDC00 <= code <= 0xDFFF and high != m.start():
            _lone(path, code)
        else:
            high = -1
    if high >= 0:
        _lone(path, code_high)


#: A JSON string escape: ``\\uXXXX`` (its hex digits in group 1) or a backslash and one character.
_ESCAPE = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _lone(path: str, code: int) -> None:
    raise FileFormatError(
        f"{path}: the header escapes a lone surrogate ({chr(code)!r}: half of a "
        f"UTF-16 pair, not a character); safetensors refuses it"
    )


def typed_entry(path: str, name: str, info: Any) -> None:
    """serde's type checks of one TensorInfo (no size or tiling rule: those apply to the kept copy)."""
    where = f"{path}: tensor {short(name)} (a copy repeated later in the header)"
    code, shape, offs = _fields(where, info)
    if not isinstance(code, str) or dtype_facts(code) is None:
        raise FileFormatError(f"{where}: unknown dtype {short(code)}; known codes: {', '.join(DTYPES)}")
    _counts(where, "shape", shape, "shape must be a list of non-negative integers")
    rule = "data_offsets must be [begin, end] with non-negative integers"
    _counts(where, "data_offsets", offs if type(offs) is list and len(offs) == 2 else None, rule, offs)


def _may_repeat_a_name(raw: bytes, obj: dict) -> bool:
    """False only if no object in ``raw`` names a key twice, or the header is invalid anyway.

    Every key is followed by one colon; any other colon is inside a string. Without ``\\u``
    escapes each colon of a parsed name or ``__metadata__`` string is a colon of ``raw``, so
    ``raw.count(b":")`` minus those is at least the number of keys written. A plain header
    keeps, after parsing, one key per tensor and per metadata item, and three per tensor
    entry: if that equals the upper bound, no key was written twice (and overwritten).
    """
    md = obj.get("__metadata__", {})
    if not isinstance(md, dict) or b"\\u" in raw:
        return True
    n = len(obj) - ("__metadata__" in obj)
    kept = len(obj) + 3 * n + len(md)
    strings = "\0".join(obj) + "\0".join(md) + "\0".join(v for v in md.values() if isinstance(v, str))
    return raw.count(b":") - strings.count(":") != kept


def file_metadata(path: str, md: Any) -> dict[str, str]:
    """``__metadata__``: null or strings to strings."""
    if md is None:
        return {}
    if type(md) is not dict or not all(type(v) is str for v in md.values()):
        raise FileFormatError(
            f"{path}: __metadata__ must map strings to strings, got {short(md)}; safetensors refuses such a file"
        )
    return md


# -- one header entry ------------------------------------------------------------------------------
def entry(path: str, name: str, info: Any) -> HeaderEntry:
    """Validate one header entry: a fast path for the well-formed case, else the precise error."""
    if type(info) is dict and len(info) == 3:
        code, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        facts = dtype_facts(code) if type(code) is str else None
        if facts and type(shape) is list and type(offs) is list and len(offs) == 2:
            begin, end = offs
            if type(begin) is int and type(end) is int and 0 <= begin <= end < U64:
                numel = 1
                for size in shape:
                    if type(size) is not int or not 0 <= size < U64:
                        break
                    numel *= size
                    if numel >= U64:
                        break
                else:
                    bits = numel * facts[2]
                    if bits < U64 and bits == (end - begin) * 8:
                        return HeaderEntry(name, str(code), tuple(shape), begin, end)
    return _checked_entry(path, name, info)


def _checked_entry(path: str, name: str, info: Any) -> HeaderEntry:
    """The slow path of :func:`entry`: each rule in turn, raising the first that fails."""
    where = f"{path}: tensor {name!r}"
    code, shape, offs = _fields(where, info)
    if not isinstance(code, str) or dtype_facts(code) is None:
        raise FileFormatError(f"{where}: unknown dtype {short(code)}; known codes: {', '.join(DTYPES)}")
    _counts(where, "shape", shape, "shape must be a list of non-negative integers")
    offsets_rule = "data_offsets must be [begin, end] with non-negative integers"
    _counts(where, "data_offsets", offs if type(offs) is list and len(offs) == 2 else None, offsets_rule, offs)
    begin, end = offs
    if end < begin:
        raise FileFormatError(f"{where}: data_offsets {offs} are out of order (end before begin)")
    numel = 1
    for size in shape:
        numel *= size
        if numel >= U64:
            raise FileFormatError(
                f"{where}: the element count of shape {short(shape)} overflows 64 bits (safetensors refuses it)"
            )
    bits = numel * (dtype_facts(code) or ("", 0, 0))[2]  # the code was checked above
    if bits >= U64:
        raise FileFormatError(f"{where}: {code}{shape} holds more than 2^64 bits (safetensors refuses it)")
    if bits % 8:
        raise FileFormatError(
            f"{where}: {code}{shape} is {bits} bits, which does not end on a byte boundary; it needs "
            f"{bits / 8:g} bytes (safetensors refuses a packed tensor that ends mid-byte)"
        )
    if bits != (end - begin) * 8:
        raise FileFormatError(
            f"{where}: data_offsets {offs} hold {end - begin} bytes but "
            f"{code}{shape} needs {bits // 8} bytes (shape x dtype size)"
        )
    return HeaderEntry(name, code, tuple(shape), begin, end)


def _fields(where: str, info: Any) -> tuple[Any, Any, Any]:
    """(dtype, shape, data_offsets) of an entry written as an object or as a 3-item list."""
    if type(info) is list:
        if len(info) != 3:
            raise FileFormatError(
                f"{where}: an entry written as a list must be [dtype, shape, data_offsets], got {len(info)} items"
            )
        return info[0], info[1], info[2]
    if type(info) is not dict:
        raise FileFormatError(f"{where}: expected an object with dtype, shape and data_offsets, got {short(info)}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise FileFormatError(f"{where}: missing {', '.join(missing)}")
    extra = [v for k, v in info.items() if k not in ("dtype", "shape", "data_offsets")]
    if extra and 2 + _depth(extra) - 1 > MAX_DEPTH:  # the list wrapper is not in the file
        raise FileFormatError(
            f"{where}: an extra key nests arrays and objects more than {MAX_DEPTH} deep (safetensors refuses it)"
        )
    return info["dtype"], info["shape"], info["data_offsets"]


def _counts(where: str, field: str, values: Any, rule: str, shown: Any = None) -> None:
    if type(values) is not list or not all(type(v) is int and v >= 0 for v in values):
        raise FileFormatError(f"{where}: {rule}, got {short(values if shown is None else shown)}")
    big = next((v for v in values if v >= U64), None)
    if big is not None:
        raise FileFormatError(f"{where}: {field} holds {short(big, 30)}, 2^64 or more; safetensors reads 64-bit counts")


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if type(v) in (list, dict):
            deepest = max(deepest, d)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((c, d + 1) for c in (v.values() if type(v) is dict else v))
    return deepest


# -- the data section --------------------------------------------------------------------------------
def check_tiling(path: str, entries: Iterable[HeaderEntry], data_len: int) -> None:
    """Sorted by offsets, each tensor starts where the last ended; the last ends the file."""
    base = os.path.basename(path)
    at, prev = 0, None  # prev: the last tensor with bytes, for messages
    for e in entries:
        if e.end > data_len:
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] end past the data "
                f"section, which holds {data_len} bytes; the file is truncated or the header is wrong"
            )
        if e.begin < at:
            assert prev is not None  # at > 0: a tensor with bytes ends there
            what = "a zero-size tensor placed inside" if e.begin == e.end else "overlap"
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] {what} tensor "
                f"{prev.name!r} [{prev.begin}, {prev.end}]; each tensor needs its own bytes (safetensors refuses it)"
            )
        if e.begin > at:
            after = f"after {prev.name!r}" if prev else "at the start of the data section"
            raise FileFormatError(
                f"{path}: tensor {e.name!r}: {e.begin - at} bytes {after} belong to no tensor; "
                f"safetensors refuses a data section with gaps ({base})"
            )
        at = e.end
        if e.end > e.begin:
            prev = e
    if at < data_len:
        raise FileFormatError(
            f"{path}: the last {data_len - at} bytes belong to no tensor; safetensors refuses a file "
            f"its tensors do not fully cover (trailing bytes)"
        )
