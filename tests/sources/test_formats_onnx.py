"""ONNX initializers without loading data: every view checked against ``onnx.load``'s own
``external_data`` entries (offset, length, location) and against the bytes ``onnx.load`` reads
(``numpy_helper.to_array``); ties, gaps, inline raw and packed data, refusals by name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorviz as tv
from tensorviz.core.errors import FileFormatError
from tensorviz.core.text import shown_shared

ARRAYS = {
    "W": np.arange(64, dtype=np.float32).reshape(8, 8),
    "B": np.ones(8, np.float16),
    "E": np.arange(40, dtype=np.int64).reshape(5, 8),
    "D": np.arange(6, dtype=np.float64).reshape(2, 3),
}


def model(initializers: list[TensorProto]) -> onnx.ModelProto:
    node = helper.make_node("MatMul", ["x", "W"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    return helper.make_model(helper.make_graph([node], "g", [x], [y], initializer=initializers))


def save_external(path: str, arrays=ARRAYS, threshold: int = 0) -> None:
    inits = [numpy_helper.from_array(a, k) for k, a in arrays.items()]
    onnx.save_model(model(inits), path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.data", size_threshold=threshold)  # fmt: skip


def file_bytes(path, start, stop) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(stop - start)


def check_against_onnx(path: str, layout) -> None:
    """Every initializer's view where onnx's external_data says, with the bytes onnx.load reads."""
    meta = onnx.load(path, load_external_data=False)
    full = onnx.load(path)
    folder = os.path.dirname(path)
    for t, loaded in zip(meta.graph.initializer, full.graph.initializer):
        v = layout[t.name]
        data = numpy_helper.to_array(loaded).tobytes()
        if t.data_location == TensorProto.EXTERNAL:
            ext = {e.key: e.value for e in t.external_data}
            assert v.storage == ("file", os.path.join(folder, ext["location"]))
            assert (v.start, v.stop) == (int(ext["offset"]), int(ext["offset"]) + int(ext["length"]))
        else:
            assert v.storage == ("file", path)
        assert file_bytes(v.storage[1], v.start, v.stop) == data
        assert v.shape == tuple(t.dims)


def test_external_initializers_are_views_of_their_data_file(tmp_path):
    path = str(tmp_path / "m.onnx")
    save_external(path)
    layout = tv.analyze(path)
    check_against_onnx(path, layout)
    assert [v.name for v in layout.views] == list(ARRAYS)
    (st,) = layout.storages  # every initializer external: the .onnx file holds none
    assert st.key == ("file", str(tmp_path / "weights.data")) and st.nbytes == os.path.getsize(st.key[1])
    assert layout.metadata["format"] == "onnx" and st.unreferenced_nbytes == 0


def test_shared_initializers_are_one_memory_and_gaps_unreferenced(tmp_path):
    path = str(tmp_path / "m.onnx")
    save_external(path)
    m = onnx.load(path, load_external_data=False)
    tied = TensorProto()
    tied.CopyFrom(m.graph.initializer[0])  # the same location, offset and length as W
    tied.name = "W_tied"
    m.graph.initializer.append(tied)
    dropped = m.graph.initializer[2]  # E: its bytes stay in the data file, named by nobody
    gap = int({e.key: e.value for e in dropped.external_data}["length"])
    m.graph.initializer.remove(dropped)
    onnx.save_model(m, path)
    layout = tv.analyze(path)
    check_against_onnx(path, layout)
    assert layout.relation("W", "W_tied") == "identical"
    groups, _ = shown_shared(layout)
    assert [g.names for g in groups] == [("W", "W_tied")]
    (st,) = layout.storages
    assert st.unreferenced_nbytes == gap == ARRAYS["E"].nbytes
    assert "E" not in layout.names


def test_inline_initializers_are_views_of_the_onnx_file(tmp_path):
    path = str(tmp_path / "inline.onnx")
    floats = helper.make_tensor("F", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])  # packed float_data
    int4 = helper.make_tensor("Q", TensorProto.INT4, [3, 3], bytes([220, 254, 16, 50, 4]), raw=True)  # nibbles
    varints = helper.make_tensor("I", TensorProto.INT64, [2], [7, 8])  # int64_data: varints
    inits = [numpy_helper.from_array(a, k) for k, a in ARRAYS.items()] + [floats, int4, varints]
    onnx.save_model(model(inits), path)
    layout = tv.analyze(path)
    for k in ARRAYS:
        assert file_bytes(path, layout[k].start, layout[k].stop) == ARRAYS[k].tobytes()
    assert file_bytes(path, layout["F"].start, layout["F"].stop) == np.array([1, 2, 3, 4], np.float32).tobytes()
    q = layout["Q"]
    assert (q.dtype, q.shape, q.logical.dtype, q.logical.shape) == ("uint8", (5,), "INT4", (3, 3))
    assert (q.logical.block, q.logical.block_nbytes) == (2, 1)
    raw = onnx.load(path).graph.initializer[len(ARRAYS) + 1].raw_data
    assert file_bytes(path, q.start, q.stop) == raw
    assert [s.name for s in layout.skipped] == ["I"] and "int64_data" in layout.skipped[0].reason
    assert [s.key for s in layout.storages] == [("file", path)]


def test_onnx_is_never_imported_and_any_name_opens(tmp_path):
    path = str(tmp_path / "m.bin")
    save_external(path)
    code = textwrap.dedent(f"""
        import sys, tensorviz as tv
        layout = tv.analyze({path!r}); layout.storages; str(layout)
        print(layout.metadata["format"], sorted(m for m in ("torch", "onnx", "google.protobuf") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "onnx []"


def _edit(path: str, **changes: str) -> None:
    m = onnx.load(path, load_external_data=False)
    t = m.graph.initializer[0]
    for e in t.external_data:
        if e.key in changes:
            e.value = changes[e.key]
    onnx.save_model(m, path)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        (
            {"location": "../outside.data"},
            "external data location '../outside.data' is not a file inside the model's folder",
        ),  # noqa: E501
        ({"location": "/etc/passwd"}, "external data location '/etc/passwd' is not a file inside"),
        ({"location": "missing.data"}, "its external data file 'missing.data' does not exist next to the model"),
        ({"length": "252"}, "external data length 252 but its type and dims need 256 bytes"),
        ({"offset": "400"}, "bytes [400, 656) of 'weights.data' run past its end"),
        ({"offset": "x"}, "are not integers"),
    ],
)
def test_bad_external_data_is_named(tmp_path, changes, fragment):
    path = str(tmp_path / "m.onnx")
    save_external(path)
    _edit(path, **changes)
    with pytest.raises(FileFormatError) as err:
        tv.analyze(path)
    assert fragment in str(err.value) and "initializer 'W'" in str(err.value)


def test_corrupt_protos_are_named(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save_model(model([numpy_helper.from_array(ARRAYS["W"], "W")]), str(path))
    data = path.read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(FileFormatError, match="claims .* bytes, but its message ends at byte"):
        tv.analyze(str(cut))
    bad = tmp_path / "type.onnx"
    m = model([numpy_helper.from_array(ARRAYS["W"], "W")])
    m.graph.initializer[0].data_type = 99
    bad.write_bytes(m.SerializeToString())
    with pytest.raises(FileFormatError, match="initializer 'W': data type 99 is not an ONNX tensor type"):
        tv.analyze(str(bad))
    neg = tmp_path / "neg.onnx"
    m = model([numpy_helper.from_array(ARRAYS["W"], "W")])
    m.graph.initializer[0].dims[0] = -8
    neg.write_bytes(m.SerializeToString())
    with pytest.raises(FileFormatError, match=r"initializer 'W': dims \[-8, 8\] hold a negative size"):
        tv.analyze(str(neg))
    varint = tmp_path / "varint.onnx"
    varint.write_bytes(b"\x08\x07\x3a" + b"\xff" * 12)
    with pytest.raises(FileFormatError, match="a varint in the model at byte .* is more than 10 bytes long"):
        tv.analyze(str(varint))


def test_one_data_file_per_initializer_is_one_storage_each(tmp_path):
    path = str(tmp_path / "m.onnx")
    inits = [numpy_helper.from_array(a, k) for k, a in ARRAYS.items()]
    onnx.save_model(model(inits), path, save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0)
    layout = tv.analyze(path)
    check_against_onnx(path, layout)
    assert len(layout.storages) == len(ARRAYS)
    for st in layout.storages:
        assert len(st.names) == 1 and st.unreferenced_nbytes == 0 and st.nbytes == os.path.getsize(st.key[1])
