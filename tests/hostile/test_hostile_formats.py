"""The hostile corpus of the GGUF, NumPy and ONNX readers and of sniffing (``tests/helpers/hostile_formats.py``):
each file is analysed in a forked child with the limits of ``tests/helpers/hostile_corpus.py`` and must end
in a named TensorvizError or the correct answer, within the 300 MB budget (times are printed)."""

from __future__ import annotations

import os

import pytest

from tests.helpers import hostile_formats
from tests.helpers.hostile_corpus import check_case, run_built

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "mkfifo"), reason="needs POSIX fork and FIFOs"),
]

FFE, TLE = "FileFormatError", "TooLargeError"
OUT = "is not a file inside the model's folder; onnx.load refuses such a path"

#: case -> (error class, message fragment) or ("ok", {summary field: value})
EXPECTED: dict[str, tuple[str, object]] = {
    "gguf-tensor-count-2^63": (FFE, "the header claims 9223372036854775808 tensors, but the 72 bytes after the counts hold at most 3"),  # noqa: E501
    "gguf-kv-count-2^64-1": (FFE, "the header claims 18446744073709551615 key/value pairs"),
    "gguf-string-2^63": (FFE, "the value of key 'k' (9223372036854775808 bytes) at byte 45 needs 9223372036854775808 bytes, but the file ends at byte 64"),  # noqa: E501
    "gguf-array-2^60-strings": (FFE, "the 1152921504606846976 strings of array key 'a' at byte 49 needs"),
    "gguf-array-2^61-u64": (FFE, "the 2305843009213693952 UINT64 items of array key 'a'"),
    "gguf-5M-strings": (TLE, "array key 'tokenizer.ggml.tokens' makes more than 4,000,000 strings in metadata arrays"),
    "gguf-vocab-1M-tokens": ("ok", {"views": 1, "names": ["w"]}),
    "gguf-100k-tensors": ("ok", {"views": 100_000, "storages": 1}),
    "gguf-unknown-value-type": (FFE, "key 'k' has value type 200, which GGUF does not define"),
    "gguf-unknown-ggml-type": (FFE, "tensor 'w': ggml type 99 is unknown or removed from ggml"),
    "gguf-overlapping-tensors": (FFE, "tensor 'b' has offset 32, expected 64 (it overlaps the tensor before it)"),
    "gguf-offset-2^64-1": (FFE, "tensor 'w' has offset 18446744073709551615, expected 0 (it leaves a gap"),
    "gguf-dims-overflow": (FFE, "tensor 'w': dimensions [1099511627776, 1099511627776] hold more than 2^63 elements"),
    "gguf-n-dims-2^32-1": (FFE, "tensor 'w': 4294967295 dimensions; ggml allows at most 4"),
    "gguf-truncated-data": (FFE, "tensor 'w' ends at byte 4224, past the end of the file (228 bytes)"),
    "gguf-sparse-8GiB-tensor": ("ok", {"views": 1, "names": ["w"]}),
    "gguf-renamed-bin": ("ok", {"views": 3, "storages": 1}),
    "gguf-key-of-100MB": (TLE, "key/value pair 0 has a key of 100,000,000 bytes; tensorviz reads keys of up to 65,536"),
    "npy-object-array": (FFE, "obj.npy: an object array (descr '|O'): its elements are pickled Python objects; tensorviz never unpickles"),  # noqa: E501
    "npy-header-2^31": (FFE, "the .npy header is 2147483648 bytes; np.load refuses headers over 10000 bytes"),
    "npy-shape-2^40-truncated": (FFE, "float64[1099511627776] needs 8796093022208 bytes after the 128-byte header, but the file is 128 bytes"),  # noqa: E501
    "npy-dims-overflow": (FFE, "but the file is 128 bytes; it is truncated"),
    "npy-deep-literal": (FFE, "the .npy header is not a Python literal: too many nested parentheses"),
    "npz-deflated-256MiB": ("ok", {"views": 1, "storages": 2, "names": ["bomb"]}),
    "npz-count-lies-65535": ("ok", {"views": 1, "names": ["x"]}),
    "onnx-location-escapes": (FFE, f"initializer 'w0': external data location '../../etc/passwd' {OUT}"),
    "onnx-location-link-out": (FFE, f"initializer 'w0': external data location 'passwd.data' {OUT}"),
    "onnx-location-fifo": (FFE, "pipe.data: is a FIFO (named pipe), not a regular file"),
    "onnx-length-2^63": (FFE, "initializer 'w0': bytes [0, 9223372036854775808) of 'small.data' run past its end (16 bytes)"),  # noqa: E501
    "onnx-offset-negative": (FFE, "initializer 'w0': bytes [-16, 16) of 'small.data' run past its end"),
    "onnx-20k-initializers": ("ok", {"views": 20_000, "storages": 1}),
    "onnx-field-claims-2^62": (FFE, "field 7 of the model at byte 12 claims 4611686018427387904 bytes, but its message ends at byte 28"),  # noqa: E501
    "onnx-name-of-50MB": (TLE, "the name of initializer 0 is 50,000,000 bytes; tensorviz reads names and locations of up to 65,536"),
    "onnx-1M-packed-dims": (FFE, "initializer 0 has more than 64 dims; no tensor has that many"),
    "onnx-truncated": (FFE, "field 7 of the model at byte 4 claims 59 bytes, but its message ends at byte 57"),
    "unknown-binary": (FFE, "blob: not a file tensorviz knows (1024 bytes); it looked at the first bytes for safetensors:"),  # noqa: E501
    "zlib-stream-named-npz": (FFE, "z.npz: not a zip archive (.npz): no end of central directory record"),
}  # fmt: skip


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("formats_corpus"))
    out = run_built(hostile_formats.build, "hostile_formats", folder, "hostile formats corpus")
    return folder, out


def test_every_built_case_has_an_expectation(results):
    _, out = results
    assert set(out) == set(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_hostile_format_case(results, case):
    _, out = results
    check_case(out[case], *EXPECTED[case])
