"""torch.save of one memory read through several storage objects: each object is written whole
(so bytes are duplicated and the sharing is gone after loading). Predicted vs a real save."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
import torch

import tensorviz as tv


def _from_numpy_twice():
    a = np.arange(16, dtype=np.float32)
    return {"x": torch.from_numpy(a), "y": torch.from_numpy(a)}


def _numpy_slice():
    a = np.arange(16, dtype=np.float32)
    return {"x": torch.from_numpy(a), "y": torch.from_numpy(a[4:])}


def _frombuffer_twice():
    buf = bytearray(np.arange(8, dtype=np.float32).tobytes())
    return {"x": torch.frombuffer(buf, dtype=torch.float32), "y": torch.frombuffer(buf, dtype=torch.float32)}


def _set_on_a_slice():
    m = torch.arange(12.0)
    n = torch.empty(0).set_(m.untyped_storage()[16:], 0, (4,), (1,))  # safetensors' own test case
    return {"m": m, "n": n}


def _one_object():
    w = torch.arange(12.0)
    return {"w": w, "half": w[:6]}


CASES = {
    "from_numpy twice": (_from_numpy_twice, True),
    "numpy slice": (_numpy_slice, True),
    "frombuffer twice": (_frombuffer_twice, True),
    "set_ on a slice": (_set_on_a_slice, True),
    "one storage object": (_one_object, False),
}


@pytest.mark.parametrize("case", CASES)
def test_torch_save_prediction_equals_the_real_file(case):
    make, duplicated = CASES[case]
    sd = make()
    v = tv.save_check(sd, savers=["torch.save"])["torch.save"]
    buf = io.BytesIO()
    torch.save(sd, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        payload = sum(i.file_size for i in zf.infolist() if "/data/" in i.filename)
    assert v.written_nbytes == payload
    assert v.file_nbytes == len(buf.getvalue())
    buf.seek(0)
    back = torch.load(buf, weights_only=True)
    ptrs = {t.untyped_storage().data_ptr() for t in back.values()}
    if duplicated:
        assert v.outcome == "duplicates bytes" and v.duplicated_nbytes == payload - v.unique_nbytes > 0
        assert len(ptrs) == len(back)  # after loading, nothing shares memory any more
        assert any("several storage objects" in n for n in v.notes)
    else:
        assert v.outcome == "ok" and v.duplicated_nbytes == 0 and len(ptrs) == 1
    for name, t in back.items():
        assert torch.equal(t, sd[name])
