"""NumPy ``.npy`` and ``.npz``, header only: every view checked against ``np.load(mmap_mode="r")``
(its offset), the zip directory and the bytes themselves; object arrays refused, never unpickled."""

from __future__ import annotations

import io
import os
import zipfile
import zlib

import numpy as np
import pytest

import tensorviz as tv
from tensorviz.core.errors import FileFormatError
from tensorviz.core.text import shown_shared

ARRAYS = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4)),
    "i8": np.arange(-5, 5, dtype=np.int8),
    "scalar": np.array(3.5, dtype=np.float16),
    "empty": np.zeros((0, 3), dtype=np.int32),
    "bool": np.array([True, False, True]),
    "c64": np.arange(4, dtype=np.complex64),
    "big_endian": np.arange(6, dtype=">i4"),
    "record": np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),
}


def file_bytes(path, start, stop) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(stop - start)


def raw(a: np.ndarray) -> bytes:
    return a.tobytes(order="F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C")


@pytest.mark.parametrize("key", sorted(ARRAYS))
def test_npy_view_matches_np_load_mmap(tmp_path, key):
    a = ARRAYS[key]
    path = str(tmp_path / f"{key}.npy")
    np.save(path, a)
    m = np.load(path, mmap_mode="r") if a.size else None
    v = tv.analyze(path)[key]
    assert v.shape == a.shape and v.itemsize == a.dtype.itemsize
    assert tuple(s * a.itemsize for s in v.stride) == a.strides or a.size <= 1
    if m is not None:
        assert v.start == m.offset and v.stop == m.offset + a.nbytes
        assert file_bytes(path, v.start, v.stop) == raw(a)
        assert v.is_contiguous == a.flags.c_contiguous
    else:
        assert v.start == v.stop
    assert v.dtype == (a.dtype.name if not a.dtype.names else f"record{a.itemsize * 8}")
    assert v.note == ("big-endian" if a.dtype.byteorder == ">" else "")
    (st,) = tv.analyze(path).storages
    assert st.nbytes == os.path.getsize(path)


def test_npy_under_any_name_and_its_header_metadata(tmp_path):
    path = str(tmp_path / "weights.bin")
    with open(path, "wb") as f:
        np.save(f, ARRAYS["f32"])
    layout = tv.analyze(path)
    assert layout.metadata["format"] == "npy"
    assert layout.metadata["header"] == {path: (0, 128)} and layout["weights.bin"].start == 128


def test_npz_stored_members_are_views_of_the_archive(tmp_path):
    path = str(tmp_path / "a.npz")
    np.savez(path, **ARRAYS)
    layout = tv.analyze(path)
    loaded = np.load(path)
    with zipfile.ZipFile(path) as zf:
        infos = {i.filename[:-4]: i for i in zf.infolist()}
    (archive,) = layout.storages
    assert archive.nbytes == os.path.getsize(path)
    for key, a in ARRAYS.items():
        v = layout[key]
        assert v.storage == ("file", path) and v.shape == a.shape
        info = infos[key]
        assert info.header_offset < v.start <= v.stop <= info.header_offset + 64 + len(info.filename) + info.file_size
        assert file_bytes(path, v.start, v.stop) == raw(loaded[key])
        with zipfile.ZipFile(path) as zf, zf.open(info) as member:  # the member's own .npy header ends where v starts
            head = member.read(v.stop - v.start + 200)
            assert head.endswith(raw(loaded[key])) or a.size == 0
    assert layout.metadata["format"] == "npz"
    assert shown_shared(layout) == ((), "by shared bytes within a file")  # packed in one archive, not shared


def test_npz_deflated_members_are_storages_with_both_sizes(tmp_path):
    path = str(tmp_path / "c.npz")
    arrays = {"x": np.arange(500), "y": np.ones((20, 30), np.float16)}
    np.savez_compressed(path, **arrays)
    layout = tv.analyze(path)
    with zipfile.ZipFile(path) as zf:
        infos = {i.filename[:-4]: i for i in zf.infolist()}
        for key, a in arrays.items():
            v, info = layout[key], infos[key]
            st = layout.storage(v.storage)
            assert st.key == ("file", f"{path}:{key}.npy") and st.nbytes == info.file_size
            assert st.label == f"{key}.npy (deflated)"
            inflated = zf.read(info)
            assert inflated[v.start : v.stop] == a.tobytes()  # the view's bytes, in the inflated member
            local = file_bytes(path, info.header_offset, info.header_offset + 30)  # the member's local header
            at = (
                info.header_offset
                + 30
                + int.from_bytes(local[26:28], "little")
                + int.from_bytes(local[28:30], "little")
            )
            assert layout.metadata["npz"][key] == (
                f"deflated: {info.compress_size} B at bytes [{at}, {at + info.compress_size}) of the archive, "
                f"{info.file_size} B inflated"
            )
            assert zlib.decompress(file_bytes(path, at, at + info.compress_size), -15) == inflated


def test_object_arrays_are_refused_by_name_and_never_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    obj = np.array([Boom(), 1], dtype=object)
    path = str(tmp_path / "o.npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, obj, allow_pickle=True)
    with pytest.raises(FileFormatError, match=r"o.npy: an object array \(descr '\|O'\).*never unpickles"):
        tv.analyze(path)
    npz = str(tmp_path / "o.npz")
    with zipfile.ZipFile(npz, "w") as zf:
        zf.writestr("w.npy", _npy(np.arange(3.0)))
        with zf.open("o.npy", "w") as m:
            np.lib.format.write_array(m, obj, allow_pickle=True)
    layout = tv.analyze(npz)
    assert layout.names == ("w",)
    assert [s.name for s in layout.skipped] == ["o"] and "object array" in layout.skipped[0].reason
    assert not (tmp_path / "pwned").exists()
    assert b"posix" in open(path, "rb").read() or b"system" in open(path, "rb").read()  # the pickle is really there


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def v1(text: bytes) -> bytes:
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


NPY_CASES = {
    "header over 10000 bytes": (b"\x93NUMPY\x02\x00" + (20000).to_bytes(4, "little") + b" " * 20000, "np.load refuses headers over 10000 bytes"),  # noqa: E501
    "not a literal": (v1(b"{'descr': f(), }\n"), "not a Python literal"),
    "extra key": (v1(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n") + bytes(8), "exactly 'descr'"),  # noqa: E501
    "negative shape": (v1(b"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}\n"), "shape must be a tuple of non-negative integers"),  # noqa: E501
    "unknown descr": (v1(b"{'descr': '<q9', 'fortran_order': False, 'shape': (2,)}\n") + bytes(8), "descr '<q9' is not a numpy dtype"),  # noqa: E501
    "truncated data": (_npy(np.arange(10.0))[:-8], "needs 80 bytes after the 128-byte header, but the file is 200 bytes"),  # noqa: E501
    "version 9": (b"\x93NUMPY\x09\x00" + bytes(8), ".npy format version 9.0"),
    "header cut short": (b"\x93NUMPY\x01\x00\xff\x00{'descr'", "the .npy header claims 255 bytes but the file ends after 8"),  # noqa: E501
    "deep nesting": (b"\x93NUMPY\x01\x00\x10\x27" + b"[" * 9999 + b"\n", "not a Python literal"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(NPY_CASES))
def test_npy_headers_numpy_refuses_are_named(tmp_path, case):
    data, fragment = NPY_CASES[case]
    path = tmp_path / "bad.npy"
    path.write_bytes(data)
    with pytest.raises(FileFormatError) as err:
        tv.analyze(str(path))
    assert fragment in str(err.value) and str(path) in str(err.value)
    with pytest.raises(Exception):  # noqa: B017 - numpy refuses it too (its own error types vary)
        np.load(str(path), mmap_mode="r")[...].copy()


def test_a_torch_checkpoint_named_npz_and_an_npz_named_pt_open_as_what_they_are(tmp_path):
    import torch

    torch.save({"w": torch.arange(4.0)}, str(tmp_path / "ckpt.npz"))
    assert tv.analyze(str(tmp_path / "ckpt.npz")).metadata["format"] == "torch"
    np.savez(str(tmp_path / "arrays.npz"), x=np.arange(3))
    os.rename(tmp_path / "arrays.npz", tmp_path / "arrays.pt")
    layout = tv.analyze(str(tmp_path / "arrays.pt"))
    assert layout.metadata["format"] == "npz" and layout.names == ("x",)


def test_numpy_files_never_import_torch(tmp_path):
    import subprocess
    import sys
    import textwrap

    np.save(str(tmp_path / "a.npy"), ARRAYS["f32"])
    np.savez(str(tmp_path / "b.npz"), **ARRAYS)
    np.savez_compressed(str(tmp_path / "c.npz"), **ARRAYS)
    code = textwrap.dedent(f"""
        import sys, tensorviz as tv
        for name in ("a.npy", "b.npz", "c.npz"):
            layout = tv.analyze({str(tmp_path)!r} + "/" + name); layout.storages; str(layout)
        print(sorted(m for m in ("torch", "matplotlib") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
