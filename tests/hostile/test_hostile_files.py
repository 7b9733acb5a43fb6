"""A corpus of broken and hostile files, generated here. Each must raise a FileFormatError (or
UnsafeCheckpointError) whose one-line message names the file, the tensor and what is wrong --
never crash, hang, or allocate by a size the file claims.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import tensorviz as tv
from tensorviz.core.errors import FileFormatError, TensorvizError, UnsafeCheckpointError

# A hang guard, not a timing assertion: every case finishes in well under a second.
pytestmark = pytest.mark.timeout(20)

F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def st(header, data: bytes | int = 8, *, raw: bytes | None = None, length: int | None = None) -> bytes:
    """Bytes of a safetensors file: 8-byte length, header JSON (or raw bytes), data."""
    h = raw if raw is not None else json.dumps(header).encode()
    data = bytes(data) if isinstance(data, int) else data
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def entry(**over):
    return {**F32_2, **over}


# (case id, file name, file bytes, expected message fragments)
SAFETENSORS_CASES = [
    ("empty", "e.safetensors", b"", ["e.safetensors", "the file is empty (0 bytes)"]),
    ("shorter-than-length", "s.safetensors", b"\x05\x00\x00", ["s.safetensors", "is 3 bytes, too short"]),
    (
        "length-past-end",
        "p.safetensors",
        st({"w": F32_2}, 8, length=4096),
        ["p.safetensors", "header claims 4096 bytes but only", "truncated"],
    ),
    (
        "length-over-100MB",
        "big.safetensors",
        st({}, 0, length=2**62),
        ["big.safetensors", "first 8 bytes are not a safetensors header length", "100000000-byte limit"],
    ),
    (
        "invalid-json",
        "j.safetensors",
        st(None, 0, raw=b'{"w": {"dtype": "F32",'),
        ["j.safetensors", "the header is not valid JSON"],
    ),
    ("not-utf8", "u.safetensors", st(None, 0, raw=b'{"\xff": 1}'), ["u.safetensors", "not UTF-8"]),
    ("json-list", "l.safetensors", st([1, 2, 3], 0), ["l.safetensors", "got a JSON list"]),
    (
        "json-deep",
        "d.safetensors",
        st(None, 0, raw=b"[" * 200_000 + b"]" * 200_000),
        ["d.safetensors", "nested too deeply"],
    ),
    (
        "duplicate-name",
        "dup.safetensors",
        st(
            None,
            8,
            raw=b'{"w": %s, "w": %s}'
            % (json.dumps(F32_2).encode(), json.dumps({**F32_2, "shape": [1], "data_offsets": [0, 4]}).encode()),
        ),
        ["dup.safetensors", "the last 4 bytes belong to no tensor"],  # serde keeps the last copy
    ),
    # The first copy has none of the entry keys, so counting them cannot reveal the second name.
    (
        "duplicate-name-junk-first",
        "dup2.safetensors",
        st(None, 8, raw=b'{"w": 1, "w": %s}' % (json.dumps(F32_2).encode())),
        ["dup2.safetensors", "tensor 'w' (a copy repeated later in the header): expected an object", "got 1"],
    ),
    (
        "duplicate-metadata",
        "dup3.safetensors",
        st(None, 8, raw=b'{"__metadata__": {}, "__metadata__": {}, "w": %s}' % json.dumps(F32_2).encode()),
        ["dup3.safetensors", "the header has two __metadata__ fields; safetensors refuses it (duplicate field)"],
    ),
    (
        "duplicate-name-escaped-colon",
        "dup4.safetensors",
        st(None, 8, raw=b'{"w\\u003a": 1, "w\\u003a": %s}' % (json.dumps(F32_2).encode())),
        ["dup4.safetensors", "tensor 'w:' (a copy repeated later in the header)"],
    ),
    (
        "duplicate-name-spaced",
        "dup5.safetensors",
        st(None, 8, raw=b'{"w" :\n1, "w"\t: %s}' % (json.dumps(F32_2).encode())),
        ["dup5.safetensors", "tensor 'w' (a copy repeated later in the header)"],
    ),
    (
        "metadata-not-strings",
        "m.safetensors",
        st({"__metadata__": {"epoch": 3}, "w": F32_2}),
        ["m.safetensors", "__metadata__ must map strings to strings", "{'epoch': 3}"],
    ),
    ("entry-not-object", "n.safetensors", st({"w": 7}), ["n.safetensors", "tensor 'w'", "got 7"]),
    (
        "entry-short-list",
        "n2.safetensors",
        st({"w": [1, 2]}),
        ["n2.safetensors", "tensor 'w'", "must be [dtype, shape, data_offsets], got 2 items"],
    ),
    (
        "missing-offsets",
        "o.safetensors",
        st({"w": {"dtype": "F32", "shape": [2]}}),
        ["o.safetensors", "tensor 'w'", "missing data_offsets"],
    ),
    (
        "unknown-dtype",
        "x.safetensors",
        st({"w": entry(dtype="F128")}),
        ["x.safetensors", "tensor 'w'", "unknown dtype 'F128'", "known codes: BOOL, U8, I8"],
    ),
    ("dtype-not-string", "x2.safetensors", st({"w": entry(dtype=7)}), ["tensor 'w'", "unknown dtype 7"]),
    (
        "negative-shape",
        "neg.safetensors",
        st({"w": entry(shape=[-2])}),
        ["neg.safetensors", "tensor 'w'", "shape must be a list of non-negative integers, got [-2]"],
    ),
    ("float-shape", "f.safetensors", st({"w": entry(shape=[2.0])}), ["tensor 'w'", "got [2.0]"]),
    ("bool-shape", "b.safetensors", st({"w": entry(shape=[True, 2])}), ["tensor 'w'", "got [True, 2]"]),
    ("shape-not-list", "s2.safetensors", st({"w": entry(shape="2")}), ["tensor 'w'", "got '2'"]),
    (
        "offsets-three",
        "o3.safetensors",
        st({"w": entry(data_offsets=[0, 4, 8])}),
        ["tensor 'w'", "data_offsets must be [begin, end]", "got [0, 4, 8]"],
    ),
    (
        "offsets-out-of-order",
        "ooo.safetensors",
        st({"w": entry(data_offsets=[8, 0])}),
        ["ooo.safetensors", "tensor 'w'", "data_offsets [8, 0] are out of order"],
    ),
    (
        "offsets-outside-data",
        "out.safetensors",
        st({"w": entry(shape=[4], data_offsets=[0, 16])}, 8),
        ["out.safetensors", "tensor 'w'", "end past the data section, which holds 8 bytes"],
    ),
    (
        "overlap",
        "ov.safetensors",
        st({"a": entry(shape=[2], data_offsets=[0, 8]), "b": entry(shape=[2], data_offsets=[4, 12])}, 12),
        ["ov.safetensors", "tensor 'b'", "overlap tensor 'a' [0, 8]"],
    ),
    (
        "shape-times-dtype",
        "sz.safetensors",
        st({"w": entry(shape=[3])}),
        ["sz.safetensors", "tensor 'w'", "hold 8 bytes but F32[3] needs 12 bytes"],
    ),
    (
        "huge-claimed-shape",
        "hs.safetensors",
        st({"w": entry(shape=[2**62, 2**62])}),
        ["hs.safetensors", "tensor 'w'", "element count of shape", "overflows 64 bits"],
    ),
    (
        "truncated-data",
        "t.safetensors",
        st({"a": entry(shape=[2], data_offsets=[0, 8]), "b": entry(shape=[2], data_offsets=[8, 16])}, 12),
        ["t.safetensors", "tensor 'b'", "end past the data section, which holds 12 bytes", "truncated"],
    ),
    (
        "sub-byte-length",
        "f4.safetensors",
        st({"q": entry(dtype="F4", shape=[3], data_offsets=[0, 1])}, 1),
        ["f4.safetensors", "tensor 'q'", "needs 1.5 bytes"],
    ),
]


@pytest.mark.parametrize(
    "name, data, fragments", [c[1:] for c in SAFETENSORS_CASES], ids=[c[0] for c in SAFETENSORS_CASES]
)
def test_hostile_safetensors(tmp_path, name, data, fragments):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(FileFormatError) as info:
        tv.analyze(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


EMPTY_F32 = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=hs.lists(hs.text(alphabet='w:"\\é', max_size=3), min_size=1, max_size=5),
    values=hs.lists(hs.sampled_from([EMPTY_F32, 1, {}, "a:b", {"x:": "y"}]), min_size=5, max_size=5),
    metadata=hs.none() | hs.dictionaries(hs.text(alphabet="k:", max_size=2), hs.text(alphabet="v:", max_size=2)),
    ascii_only=hs.booleans(),
    space=hs.sampled_from(["", " ", "\n\t"]),
)
def test_a_repeated_name_is_read_as_safe_open_reads_it(tmp_path, names, values, metadata, ascii_only, space):
    """Oracle: ``safetensors.safe_open`` itself. A name written twice (escaped, spaced, junk
    first or last) is accepted or refused exactly as safetensors' serde reads it."""
    safetensors = pytest.importorskip("safetensors")
    items = [(n, v) for n, v in zip(names, values)]
    if metadata is not None:
        items.insert(0, ("__metadata__", metadata))
    raw = (
        "{"
        + ", ".join(
            json.dumps(k, ensure_ascii=ascii_only) + space + ":" + space + json.dumps(v, ensure_ascii=ascii_only)
            for k, v in items
        )
        + "}"
    )
    path = tmp_path / "p.safetensors"
    path.write_bytes(st(None, 0, raw=raw.encode()))
    try:
        with safetensors.safe_open(str(path), "numpy") as f:
            f.keys()
        expected = True
    except Exception:  # noqa: BLE001 - every refusal is a SafetensorError
        expected = False
    try:
        tv.analyze(path)
        got = True
    except FileFormatError:
        got = False
    assert got == expected, raw


def test_header_length_claim_is_never_allocated(tmp_path, monkeypatch):
    """A claimed length the file cannot hold is refused before any read of that size."""
    import tensorviz.sources.formats.safetensors as files
    from tensorviz.sources.parts import open_regular

    sizes: list[int] = []

    class Spy:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            sizes.append(n)
            return self.f.read(n)

        def fileno(self):
            return self.f.fileno()

    @contextlib.contextmanager
    def spied(p):
        with open_regular(p) as f:
            yield Spy(f)

    path = tmp_path / "claim.safetensors"
    path.write_bytes(st({}, 0, length=99_999_999))
    monkeypatch.setattr(files, "open_regular", spied)
    with pytest.raises(FileFormatError, match="claims 99999999 bytes but only 2 follow"):
        tv.analyze(path)
    assert sizes == [9]  # the length field and one byte (a "{" lets the message quote the claim)


def test_empty_directory_and_directory_without_weights(tmp_path):
    with pytest.raises(FileFormatError, match=r"no weights found: .* the folder holds: nothing"):
        tv.analyze(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    with pytest.raises(FileFormatError) as info:
        tv.analyze(tmp_path)
    assert str(tmp_path) in str(info.value) and "the folder holds: config.json, sub" in str(info.value)


# -- indexes ------------------------------------------------------------------------------------
def good_shard(folder, name="s1.safetensors"):
    (folder / name).write_bytes(st({"w": F32_2}))


INDEX_CASES = [
    (
        "missing-shard",
        {"weight_map": {"w": "s1.safetensors", "v": "gone.safetensors"}},
        ["i.index.json", "puts 1 tensors (e.g. 'v') in shard 'gone.safetensors'", "does not exist"],
    ),
    ("no-weight-map", {"metadata": {}}, ["i.index.json", 'with a "weight_map"']),
    ("weight-map-values", {"weight_map": {"w": 3}}, ["i.index.json", "tensor name -> shard file name"]),
    (
        "escaping-shard",
        {"weight_map": {"w": "../s1.safetensors"}},
        ["i.index.json", "puts 'w' in '../s1.safetensors', a path outside the index's folder"],
    ),
    ("absolute-shard", {"weight_map": {"w": "/etc/passwd"}}, ["a path outside the index's folder"]),
    ("bad-shard", {"weight_map": {"w": "bad.safetensors"}}, ["bad.safetensors", "tensor 'w'", "unknown dtype 'X'"]),
]


@pytest.mark.parametrize("index, fragments", [c[1:] for c in INDEX_CASES], ids=[c[0] for c in INDEX_CASES])
def test_hostile_index(tmp_path, index, fragments):
    good_shard(tmp_path)
    (tmp_path / "bad.safetensors").write_bytes(st({"w": entry(dtype="X")}))
    path = tmp_path / "i.index.json"
    path.write_text(json.dumps(index))
    with pytest.raises(FileFormatError) as info:
        tv.analyze(path)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_index_with_a_shard_per_name_fails_fast_on_the_first_missing_one(tmp_path):
    good_shard(tmp_path)
    wm = {"w": "s1.safetensors", **{f"t{i}": f"missing-{i}.safetensors" for i in range(50_000)}}
    path = tmp_path / "i.index.json"
    path.write_text(json.dumps({"weight_map": wm}))
    with pytest.raises(FileFormatError, match=r"puts 1 tensors \(e.g. 't0'\) in shard 'missing-0.safetensors'"):
        tv.analyze(path)


def test_index_invalid_json_and_duplicate_names(tmp_path):
    path = tmp_path / "i.safetensors.index.json"
    path.write_text('{"weight_map": {"w": "s1.safetensors",')
    with pytest.raises(FileFormatError, match="i.safetensors.index.json: the index is not valid JSON"):
        tv.analyze(path)
    path.write_text('{"weight_map": {"w": "s1.safetensors", "w": "s2.safetensors"}}')
    with pytest.raises(FileFormatError, match="the index names 'w' twice"):
        tv.analyze(path)


# -- torch checkpoints --------------------------------------------------------------------------
def small_ckpt() -> bytes:
    buf = io.BytesIO()
    torch.save({"w": torch.arange(4.0)}, buf)
    return buf.getvalue()


def rezip(data: bytes, replace: dict[str, bytes]) -> bytes:
    """The same archive with some records' contents replaced (by record suffix)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            suffix = info.filename.split("/", 1)[1]
            dst.writestr(info.filename, replace.get(suffix, src.read(info)))
    return out.getvalue()


def legacy_ckpt() -> bytes:
    buf = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, buf, _use_new_zipfile_serialization=False)
    return buf.getvalue()


TORCH_CASES = [
    ("empty", lambda: b"", FileFormatError, ["x.pt", "the file is empty (0 bytes)"]),
    (
        "junk",
        lambda: b"not a checkpoint at all",
        FileFormatError,
        ["x.pt", "not a torch zip checkpoint (it does not start like a zip archive)"],
    ),
    ("truncated", lambda: small_ckpt()[:700], FileFormatError, ["x.pt", "damaged zip archive", "truncated"]),
    ("legacy", legacy_ckpt, FileFormatError, ["x.pt", "legacy (pre-1.6, non-zip)", "Re-save it"]),
    (
        "big-endian",
        lambda: rezip(small_ckpt(), {"byteorder": b"big"}),
        FileFormatError,
        ["x.pt", "saved big-endian, not supported", "byte-swap"],
    ),
    (
        "bad-pickle",
        lambda: rezip(small_ckpt(), {"data.pkl": b"\x80\x02garbage"}),
        UnsafeCheckpointError,
        ["x.pt", "torch's weights-only unpickler refused it (Unsupported operand 103)"],
    ),
    (
        "record-too-short",
        lambda: rezip(small_ckpt(), {"data/0": b"\x00" * 4}),
        FileFormatError,
        ["x.pt", "tensor 'w': its storage claims 16 bytes but record data/0 holds 4"],
    ),
]


@pytest.mark.parametrize("make, error, fragments", [c[1:] for c in TORCH_CASES], ids=[c[0] for c in TORCH_CASES])
def test_hostile_torch(tmp_path, make, error, fragments):
    path = tmp_path / "x.pt"
    path.write_bytes(make())
    with pytest.raises(error) as info:
        tv.analyze(path)
    assert "\n" not in str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_pickle_that_needs_code_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "module.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(UnsafeCheckpointError) as info:
        tv.analyze(path)
    message = str(info.value)
    assert message.startswith(
        f"{path}: the pickle needs torch.nn.modules.linear.Linear (a whole nn.Module was "
        f"saved; saving model.state_dict() avoids this)."
    )
    assert "never runs code from a file" in message and "weights_only=False, mmap=True" in message
    assert isinstance(info.value, TensorvizError) and "\n" not in message


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > should_not_exist",))


def test_malicious_reduce_is_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(1), "x": _Evil()}, path)
    with pytest.raises(UnsafeCheckpointError, match="the pickle needs posix.system|the pickle needs"):
        tv.analyze(path)
    assert not (tmp_path / "should_not_exist").exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(UnsafeCheckpointError, match="it is a TorchScript archive"):
        tv.analyze(path)


def test_unknown_file_kind(tmp_path):
    path = tmp_path / "weights.dat"
    path.write_bytes(b"\x00" * 32)
    with pytest.raises(FileFormatError, match=r"weights.dat: not a file tensorviz knows"):
        tv.analyze(path)


# -- containment: links out of a model folder ----------------------------------------------------
def test_hugging_face_cache_links_into_blobs_are_followed(tmp_path):
    """A hub cache snapshot links each file to ../../blobs/<hash>: that is not leaving the folder."""
    repo = tmp_path / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (repo / "blobs" / "h1").write_bytes(st({"w": F32_2}))
    (repo / "blobs" / "h2").write_text(json.dumps({"weight_map": {"w": "model-1.safetensors"}}))
    os.symlink("../../blobs/h1", snap / "model-1.safetensors")
    os.symlink("../../blobs/h2", snap / "model.safetensors.index.json")
    layout = tv.analyze(snap)
    assert layout.names == ("w",) and "problems" not in layout.metadata
    assert tv.analyze(snap / "model.safetensors.index.json").names == ("w",)


def test_folder_weights_linking_out_of_the_folder_are_refused(tmp_path):
    outside = tmp_path / "elsewhere.safetensors"
    outside.write_bytes(st({"w": F32_2}))
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(outside, folder / "model.safetensors")
    with pytest.raises(FileFormatError) as info:
        tv.analyze(folder)
    assert "model.safetensors is a symbolic link that leads out of its folder" in str(info.value)
    assert repr(str(outside)) in str(info.value)
    os.unlink(folder / "model.safetensors")
    os.symlink("../elsewhere.safetensors", folder / "model.safetensors")  # relative: the same
    with pytest.raises(FileFormatError, match="leads out of its folder"):
        tv.analyze(folder)


def test_links_inside_the_folder_are_followed_and_one_file_is_one_shard(tmp_path):
    (tmp_path / "real.safetensors").write_bytes(st({"w": F32_2}))
    os.symlink("real.safetensors", tmp_path / "alias.safetensors")
    path = tmp_path / "i.index.json"
    path.write_text(json.dumps({"weight_map": {"w": "./alias.safetensors", "v": "alias.safetensors"}}))
    layout = tv.analyze(path)
    assert layout.names == ("w",) and len(layout.storages) == 1
    assert layout.metadata["index"]["shards"] == ["alias.safetensors"]
    assert [s.name for s in layout.skipped] == ["v"]
