"""Differential fuzz: tensorviz accepts a safetensors file exactly when ``safetensors.safe_open`` does.

Hypothesis writes valid headers (1-4 tensors tiling the data, optional ``__metadata__``), then
mutates them field by field and byte by byte: dimensions and offsets (``-0``, ``2.0``, 2^64,
overflowing products), dtype codes, entries as lists, extra keys (deep nesting, ``NaN``,
``1e400``, 320-digit numbers, lone surrogate escapes), metadata values, gaps, overlaps,
zero-size tensors inside other tensors, trailing bytes, BOM, UTF-16, raw surrogates, the length
field -- and repeats keys at every nesting level: a tensor name twice (both valid, a junk or
mutated copy first or last), ``__metadata__`` twice, a key twice inside ``__metadata__`` (string
or not), ``dtype``/``shape``/``data_offsets`` twice in an entry, extra fields twice, objects with
repeated keys nested in extra values. The oracle is the installed safetensors itself (serde:
the last copy of a map key kept, every copy type-checked, a repeated struct field refused).
"""

from __future__ import annotations

import json
import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from tensorviz.core.errors import FileFormatError
from tensorviz.sources.formats.safetensors import read_safetensors_header, safetensors_part

safetensors = pytest.importorskip("safetensors")

pytestmark = pytest.mark.timeout(300)

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "F16": 16, "BF16": 16,
        "F32": 32, "I32": 32, "U32": 32, "F64": 64, "I64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6}  # fmt: skip


class Raw(str):
    """JSON text written as is (NaN, -0, 1e400, an escape json.dumps would not write)."""


class Pairs(list):
    """A JSON object as (key, value) pairs: a key may be written twice."""


def dump(x) -> str:
    """JSON text of ``x``; ``Raw`` strings are written verbatim, dict keys may be Raw too."""
    if isinstance(x, Raw):
        return str(x)
    if isinstance(x, Pairs):
        return "{" + ",".join(f"{k if isinstance(k, Raw) else json.dumps(k)}:{dump(v)}" for k, v in x) + "}"
    if isinstance(x, dict):
        return "{" + ",".join(f"{k if isinstance(k, Raw) else json.dumps(k)}:{dump(v)}" for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ",".join(dump(v) for v in x) + "]"
    return json.dumps(x, ensure_ascii=False)


NAMES = hs.text(alphabet="abcwé.:_0日", min_size=1, max_size=6)
DIMS = hs.lists(hs.integers(0, 5), max_size=3)


@hs.composite
def valid_header(draw):
    """(header dict in file order, data length): tensors tile the data exactly."""
    names = draw(hs.lists(NAMES, min_size=1, max_size=4, unique=True).filter(lambda ns: "__metadata__" not in ns))
    header, at = {}, 0
    for name in names:
        code = draw(hs.sampled_from(sorted(BITS)))
        shape = draw(DIMS)
        numel = 1
        for d in shape:
            numel *= d
        if numel * BITS[code] % 8:
            shape = [*shape, 2] if numel % 2 == 0 or BITS[code] == 4 else [*shape, 4]
            numel = numel * shape[-1]
            if numel * BITS[code] % 8:
                code = "U8"
        size = numel * BITS[code] // 8
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [at, at + size]}
        at += size
    if draw(hs.booleans()):
        header = {"__metadata__": draw(hs.dictionaries(NAMES, NAMES, max_size=2)), **header}
    return header, at


DIM_VALUES = [Raw("-0"), Raw("2.0"), Raw("1e2"), Raw("-1"), Raw(str(2**64)), Raw(str(2**64 - 1)),
              Raw(str(2**63)), Raw(str(2**32)), Raw("true"), Raw("null"), Raw('"2"'), 0, 1, 3]  # fmt: skip
EXTRA_VALUES = [Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e400"), Raw("1e-400"), Raw("-0"),
                Raw("1" + "0" * 320), Raw("1" + "0" * 307), Raw('"\\ud800"'), Raw('"\\udc00x"'),
                Raw('"\\ud83d\\ude00"'), Raw("[" * 124 + "]" * 124), Raw("[" * 125 + "]" * 125),
                Raw("[" * 126 + "]" * 126), Raw('{"a":' * 125 + "1" + "}" * 125), Raw("1.5"), "text", None]  # fmt: skip


@hs.composite
def mutated(draw):
    """Bytes of a safetensors file: a valid header, then zero or more mutations."""
    header, data_len = draw(valid_header())
    tensors = [k for k in header if k != "__metadata__"]
    for _ in range(draw(hs.integers(0, 3))):
        name = draw(hs.sampled_from(tensors))
        info = header[name]
        if not isinstance(info, dict):
            continue
        kind = draw(hs.sampled_from(["dim", "offset", "dtype", "extra", "list", "zero", "shift", "meta", "shape"]))
        if kind == "dim" and isinstance(info["shape"], list):
            shape = list(info["shape"]) or [1]
            shape[draw(hs.integers(0, len(shape) - 1))] = draw(hs.sampled_from(DIM_VALUES))
            info["shape"] = shape
        elif kind == "shape":
            info["shape"] = draw(hs.sampled_from([[2**32, 2**32, 0], [0, 2**32, 2**32], [2**61], [2**62, 4],
                                                  [2**64 - 1, 0], [Raw("-0")], [], None, "x"]))  # fmt: skip
        elif kind == "offset" and all(type(o) is int for o in info["data_offsets"]) and len(info["data_offsets"]) == 2:
            offs = list(info["data_offsets"])
            i = draw(hs.integers(0, 1))
            offs[i] = draw(hs.sampled_from([offs[i] + 1, max(offs[i] - 1, 0), Raw("-0"), Raw("2.0"), Raw(str(2**64))]))
            info["data_offsets"] = draw(hs.sampled_from([offs, offs[::-1], [*offs, 0], offs[:1]]))
        elif kind == "dtype":
            info["dtype"] = draw(hs.sampled_from(["f32", "F128", "F6_E3M2", "F8_E5M2FNUZ", "U64", 7, None]))
        elif kind == "extra":
            info[draw(hs.sampled_from(["x", "dtype2", "y"]))] = draw(hs.sampled_from(EXTRA_VALUES))
        elif kind == "list":
            header[name] = [info["dtype"], info["shape"], info["data_offsets"]] + draw(hs.sampled_from([[], [0]]))
        elif kind == "zero":
            at = draw(hs.integers(0, max(data_len, 0)))  # a "shift" may have made it -1
            extra = draw(NAMES.filter(lambda n: n not in header and n != "__metadata__"))
            header[extra] = {"dtype": "F32", "shape": [0], "data_offsets": [at, at]}
        elif kind == "shift":
            data_len += draw(hs.sampled_from([-1, 1, 8]))
        elif kind == "meta":
            header["__metadata__"] = draw(
                hs.sampled_from([{"a": 1}, {"a": None}, None, [], "s", {"a": Raw('"\\ud800"')}])
            )
    text = dump(draw(repeated(header))).encode("utf-8", "surrogatepass")
    raw = draw(hs.sampled_from(["", "", "", "bom", "utf16", "surrogate", "space", "junk", "length"]))
    length_delta = 0
    if raw == "bom":
        text = b"\xef\xbb\xbf" + text
    elif raw == "utf16":
        text = text.decode("utf-8").encode("utf-16")
    elif raw == "surrogate":
        text = text.replace(b'":', b'\xed\xa0\x80":', 1)
    elif raw == "space":
        text += b"   \n"
    elif raw == "junk":
        text += b"x"
    elif raw == "length":
        length_delta = draw(hs.sampled_from([-1, 1]))
    return struct.pack("<Q", max(len(text) + length_delta, 0)) + text + bytes(max(data_len, 0))


REPEATS = ["top-same", "top-junk", "top-other", "meta-twice", "meta-key", "meta-key-junk", "field",
           "field-other", "extra-twice", "extra-nested", "extra-list", "none"]  # fmt: skip
JUNK = [5, None, "x", [], ["F32", [2]], {"dtype": "F32"}, {"dtype": "X", "shape": [1], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [Raw("-0")], "data_offsets": [0, 4]}, {"dtype": "F32", "shape": [1], "data_offsets": [0]},
        {"dtype": "F32", "shape": [9], "data_offsets": [0, 4]}, ["F32", [1], [4, 8]]]  # fmt: skip


def _as_pairs(x):
    return Pairs((k, _as_pairs(v)) for k, v in x.items()) if isinstance(x, dict) else x


@hs.composite
def repeated(draw, header):
    """``header`` as pairs, with zero to two keys written twice at some nesting level."""
    top = _as_pairs(header)
    for kind in draw(hs.lists(hs.sampled_from(REPEATS), max_size=2)):
        at = draw(hs.integers(0, len(top)))
        entries = [i for i, (k, v) in enumerate(top) if k != "__metadata__"]
        metas = [i for i, (k, v) in enumerate(top) if k == "__metadata__" and isinstance(v, Pairs)]
        if kind.startswith("top") and entries:
            name, info = top[draw(hs.sampled_from(entries))]
            copy = info if kind == "top-same" else draw(hs.sampled_from(JUNK))
            if kind == "top-other" and isinstance(info, Pairs):
                copy = Pairs((k, v) for k, v in info if k != "data_offsets") + [("data_offsets", [0, 0])]
            top.insert(at, (name, _as_pairs(copy)))
        elif kind == "meta-twice":
            top.insert(at, ("__metadata__", draw(hs.sampled_from([Pairs([("a", "b")]), None, Pairs()]))))
        elif kind.startswith("meta-key") and metas:
            meta = top[metas[0]][1]
            value = draw(hs.sampled_from([1, None, []])) if kind == "meta-key-junk" else draw(NAMES)
            key = meta[0][0] if meta and draw(hs.booleans()) else draw(NAMES)
            meta.insert(draw(hs.integers(0, len(meta))), (key, value))
            meta.append((key, draw(NAMES)))
        elif entries and isinstance(top[entries[0]][1], Pairs):
            info = top[draw(hs.sampled_from(entries))][1]
            if not isinstance(info, Pairs):
                continue
            if kind.startswith("field"):
                field = draw(hs.sampled_from(["dtype", "shape", "data_offsets"]))
                value = dict(info).get(field) if kind == "field" else draw(hs.sampled_from(["F32", [2], [0, 8], "X"]))
                info.insert(draw(hs.integers(0, len(info))), (field, value))
            elif kind == "extra-twice":
                info.extend([("x", 1), ("x", draw(hs.sampled_from(EXTRA_VALUES[-3:] + [Pairs([("a", 1)])])))])
            elif kind == "extra-nested":
                info.append(("x", Pairs([("a", 1), ("a", Pairs([("dtype", 1), ("dtype", "F32")]))])))
            elif kind == "extra-list":
                info.append(("y", [Pairs([("k", 1), ("k", 2)]), Pairs([("__metadata__", 1), ("__metadata__", 2)])]))
    return top


def safe_open_accepts(path) -> bool:
    try:
        with safetensors.safe_open(str(path), "numpy") as f:
            f.keys()
    except Exception:  # noqa: BLE001 - every refusal is a SafetensorError or an OSError
        return False
    return True


def tensorviz_accepts(path) -> bool:
    try:
        safetensors_part(read_safetensors_header(path))
    except FileFormatError:
        return False
    return True


@settings(
    max_examples=4000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=mutated())
def test_tensorviz_accepts_exactly_what_safe_open_accepts(tmp_path, data):
    path = tmp_path / "fuzz.safetensors"
    path.write_bytes(data)
    expected = safe_open_accepts(path)
    assert tensorviz_accepts(path) == expected, (expected, data[8:400])


@pytest.mark.parametrize(
    "text, data_len",
    [
        (
            '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
            8,
        ),
        ('{"__metadata__":{"a":"b","a":"c"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),
        ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":{"a":1,"a":2},"x":[{"k":1,"k":2}]}}', 8),
        ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),
        ('{"w":["F32",[2],[0,8]]}', 8),
        ('{"w":{"dtype":"F32","shape":[18446744073709551615,0],"data_offsets":[0,0]}}', 0),
        ('{"w":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}', 0),
        ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":' + "[" * 125 + "]" * 125 + "}}", 8),
        ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":-0,"y":' + "9" * 30 + "}}", 8),
        ('{"w\\ud83d\\ude00":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),
        ('{"w\\\\ud800":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),  # an escaped backslash, then text
        (
            '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}',
            8,
        ),
        ("{}", 0),
    ],
)
def test_edge_headers_safe_open_accepts_are_accepted(tmp_path, text, data_len):
    path = tmp_path / "edge.safetensors"
    raw = text.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data_len))
    assert safe_open_accepts(path) and tensorviz_accepts(path)


_E = '{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"w":5,"w":' + _E + "}", "(a copy repeated later in the header): expected an object"),
        ('{"w":{"dtype":"X","shape":[2],"data_offsets":[0,8]},"w":' + _E + "}", "unknown dtype 'X'"),
        ('{"__metadata__":{},"__metadata__":{},"w":' + _E + "}", "two __metadata__ fields"),
        ('{"__metadata__":{"a":1,"a":"b"},"w":' + _E + "}", "__metadata__ must map strings to strings"),
        ('{"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "its entry gives dtype twice"),
        (
            '{"w":["F32",[2],[0,8]],"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
            "the last 4 bytes belong to no tensor",
        ),
        (  # found by the fuzz: the lone surrogate is in a value the repeated key replaces
            '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":"\\ud800","x":{"a":1}}}',
            "the header escapes a lone surrogate ('\\ud800'",
        ),
        ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":"\\udc00\\ud800"}}', "lone surrogate ('\\udc00'"),
    ],
)
def test_repeated_keys_safe_open_refuses_are_refused_by_name(tmp_path, text, words):
    path = tmp_path / "rep.safetensors"
    raw = text.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8))
    assert not safe_open_accepts(path)
    with pytest.raises(FileFormatError, match=re.escape(words)):
        safetensors_part(read_safetensors_header(path))
