"""The hostile-file corpus: builders of each file, and a runner that opens each one in a child
process with an address-space limit and a timeout, recording time and peak memory.

``build(folder)`` writes every case and returns ``{case id: path}``; ``python
tests/helpers/hostile_corpus.py FOLDER`` (what the test and ``bench/bench_hostile.py`` start) imports
tensorviz once, then forks one child per case: the child sets ``RLIMIT_AS`` and an alarm, runs
``tv.analyze`` and reports one JSON line (outcome, seconds, peak RSS above the parent's).
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import socket
import struct
import sys
import time
import zipfile

#: Time and memory a case may take (the child is killed past them).
TIMEOUT_S = 20
AS_HEADROOM = 2 << 30  # address space allowed above the runner's own when it forks

F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


# -- builders --------------------------------------------------------------------------------------
def check_case(got: dict, kind: str, want) -> None:
    """One corpus case judged: ``kind`` "ok" with ``want`` the summary fields it must have, or the
    error class it must end in with ``want`` a part of its one-line message; within the memory
    budget (300 MB above the child's start) either way."""
    if kind == "ok":
        assert got["ok"], got
        for field, value in want.items():
            assert got[field] == value, (field, got)
    else:
        assert not got["ok"] and got["error"] == kind, got
        assert want in got["message"], got["message"]
        assert "\n" not in got["message"]
    assert got["rss_mb"] <= 300, got


def run_built(build, runner: str, folder: str, label: str) -> dict[str, dict]:
    """Build a corpus into ``folder`` with ``build``, run the helper module ``runner`` (this one,
    or another corpus's that uses :func:`run_case`) over it in a child process, and return each
    case's result by name; print the worst time and memory seen."""
    import subprocess

    from tests.helpers import env, script

    with open(os.path.join(folder, "cases.json"), "w") as f:
        json.dump(build(folder), f)
    run = subprocess.run([*script(runner), folder], capture_output=True, text=True, timeout=500, env=env())
    assert run.returncode == 0, run.stderr[-3000:]
    out = {d["case"]: d for d in map(json.loads, run.stdout.splitlines())}
    worst_t = max(out.values(), key=lambda d: d["seconds"] or 0)
    worst_m = max(out.values(), key=lambda d: d["rss_mb"] or 0)
    print(
        f"\n{label}: {len(out)} files; worst time {worst_t['seconds']:.2f} s ({worst_t['case']}), "
        f"worst RSS +{worst_m['rss_mb']} MB ({worst_m['case']})"
    )
    return out


def st_bytes(text: bytes | str, data: int = 8, length: int | None = None) -> bytes:
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if length is None else length) + raw + bytes(data)


def hdr(**entries: str) -> str:
    """A header's JSON text from entries written as raw JSON text."""
    return "{" + ",".join(f'"{k}":{v}' for k, v in entries.items()) + "}"


def _entry(extra: str = "", shape: str = "[2]", offsets: str = "[0,8]", dtype: str = "F32") -> str:
    return f'{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}{extra}}}'


def _save(obj) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _small_ckpt() -> bytes:
    import torch

    return _save({"w": torch.arange(4.0)})


def _rezip(data: bytes, replace: dict[str, bytes], deflate: tuple[str, ...] = ()) -> bytes:
    """The same archive with some records replaced (by suffix), optionally compressed."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            suffix = info.filename.split("/", 1)[1]
            kind = zipfile.ZIP_DEFLATED if suffix in deflate else zipfile.ZIP_STORED
            dst.writestr(info.filename, replace.get(suffix, src.read(info)), compress_type=kind)
    return out.getvalue()


def _pickle_of(data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


def _wrapped(before: bytes, after: bytes) -> bytes:
    """A checkpoint whose pickle is ``{"w": tensor}`` with ``before``/``after`` opcodes around it."""
    base = _small_ckpt()
    pkl = _pickle_of(base)
    assert pkl[:2] == b"\x80\x02" and pkl[-1:] == b"."
    return _rezip(base, {"data.pkl": b"\x80\x02" + before + pkl[2:-1] + after + b"."})


def _patched(obj, old: bytes, new: bytes) -> bytes:
    data = _save(obj)
    pkl = _pickle_of(data)
    assert old in pkl and len(old) == len(new)
    return _rezip(data, {"data.pkl": pkl.replace(old, new)})


def _with_tensor(body: bytes) -> bytes:
    """A checkpoint whose pickle is a list: ``{"w": tensor}`` first, then what ``body``
    appends (``T`` in ``body`` reads the tensor from its memo slot)."""
    base = _small_ckpt()
    pkl = _pickle_of(base)
    assert pkl[-5:-3] == b"Rq", pkl[-8:]  # ... REDUCE BINPUT <tensor> SETITEM STOP
    get = b"h" + pkl[-3:-2]  # BINGET of the tensor's memo slot
    return _rezip(base, {"data.pkl": b"\x80\x02]" + pkl[2:-1] + b"a" + body.replace(b"T", get) + b"."})


def _deep_with_tensor_each_level(depth: int) -> bytes:
    """Lists ``depth`` deep, each also holding the tensor (names grow with depth)."""
    return _with_tensor(b"]Ta" * depth + b"a" * depth)


def _many_refs(n: int) -> bytes:
    """One tensor referenced ``n`` times from one list (2 bytes a reference)."""
    return _with_tensor((b"(" + b"T" * 1000 + b"e") * (n // 1000))


def _memo_key_dicts(key_len: int, copies: int) -> bytes:
    """One ``key_len``-character key (memoized once) in ``copies`` dicts, each with the tensor."""
    first = b"}X" + struct.pack("<I", key_len) + b"k" * key_len + b"r\x00\x00\x01\x00Ts"
    again = b"}j\x00\x00\x01\x00Ts"
    return _with_tensor(b"(" + first + again * (copies - 1) + b"e")


def _many_empty_lists(n: int) -> bytes:
    base = _small_ckpt()
    inner = _pickle_of(base)[2:-1]
    return _rezip(base, {"data.pkl": b"\x80\x02]" + b"]a" * n + inner + b"a."})


def _fifo(path: str) -> None:
    os.mkfifo(path)


def _socket(path: str) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()


def _index(folder: str, name: str, wm: dict[str, str]) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump({"weight_map": wm}, f)
    return path


def build(folder: str) -> dict[str, str]:  # noqa: PLR0915 - one line per case reads best
    """Write every case into ``folder``; returns {case id: path to analyse}."""
    import torch

    cases: dict[str, str] = {}

    def put(case: str, name: str, data: bytes) -> None:
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        cases[case] = path

    def special(case: str, name: str, make) -> None:
        path = os.path.join(folder, name)
        make(path)
        cases[case] = path

    # 1. only regular files
    special("fifo-safetensors", "fifo.safetensors", _fifo)
    special("fifo-pt", "fifo.pt", _fifo)
    special("fifo-index", "fifo.index.json", _fifo)
    special("fifo-no-extension", "fifo", _fifo)
    special("socket", "sock.safetensors", _socket)
    special("dev-zero-index", "zero.index.json", lambda p: os.symlink("/dev/zero", p))
    special("dev-zero-safetensors", "zero.safetensors", lambda p: os.symlink("/dev/zero", p))
    special("link-loop", "loop.safetensors", lambda p: os.symlink(os.path.basename(p), p))
    special("dangling-link", "gone.pt", lambda p: os.symlink("nowhere.pt", p))
    os.mkdir(os.path.join(folder, "dcp"))
    special("dcp-metadata-fifo", os.path.join("dcp", ".metadata"), _fifo)
    shards = os.path.join(folder, "shards")
    os.mkdir(shards)
    with open(os.path.join(shards, "s1.safetensors"), "wb") as f:
        f.write(st_bytes(hdr(w=_entry())))
    with open(os.path.join(shards, "s2.safetensors"), "wb") as f:
        f.write(st_bytes(hdr(v=_entry())))
    os.mkfifo(os.path.join(shards, "pipe.safetensors"))
    os.symlink("l1.safetensors", os.path.join(shards, "l1.safetensors"))
    os.symlink("/dev/zero", os.path.join(shards, "zero.safetensors"))
    os.symlink("/etc/passwd", os.path.join(shards, "passwd.safetensors"))
    cases["shard-fifo"] = _index(shards, "a.index.json", {"w": "pipe.safetensors"})
    cases["shard-link-loop"] = _index(shards, "b.index.json", {"w": "l1.safetensors"})
    cases["shard-device"] = _index(shards, "c.index.json", {"w": "zero.safetensors"})
    cases["shard-leaves-folder"] = _index(shards, "d.index.json", {"w": "passwd.safetensors"})
    cases["shard-two-spellings"] = _index(shards, "e.index.json", {"w": "s1.safetensors", "v": "./s2.safetensors"})
    cases["shard-same-file-twice"] = _index(shards, "f.index.json", {"w": "./s1.safetensors", "w2": "s1.safetensors"})
    with open("/etc/passwd", "rb") as f:
        put("text-file-as-safetensors", "passwd.safetensors", f.read(4096))

    # 3. exactly as strict as safetensors
    put("bom", "bom.safetensors", st_bytes(b"\xef\xbb\xbf" + (hdr(w=_entry())).encode()))
    put("utf16", "utf16.safetensors", st_bytes((hdr(w=_entry())).encode("utf-16")))
    put("raw-surrogate", "rawsur.safetensors", st_bytes(b'{"w\xed\xa0\x80":' + _entry().encode() + b"}"))
    put("lone-surrogate-escape", "lonesur.safetensors", st_bytes(hdr(**{"w\\ud800": _entry()})))
    put("nan-extra", "nan.safetensors", st_bytes(hdr(w=_entry(',"x":NaN'))))
    put("number-out-of-range", "big.safetensors", st_bytes(hdr(w=_entry(',"x":1e400'))))
    put("dim-2-64", "dim64.safetensors", st_bytes(hdr(w=_entry(shape=f"[{2**64},0]", offsets="[0,0]")), 0))
    put("shape-overflow", "ovf.safetensors", st_bytes(hdr(w=_entry(shape="[4294967296,4294967296,0]", offsets="[0,0]")), 0))  # fmt: skip
    put("zero-size-inside", "zin.safetensors", st_bytes(hdr(a=_entry(), z=_entry(shape="[0]", offsets="[4,4]"))))  # fmt: skip
    put("gap", "gap.safetensors", st_bytes(hdr(w=_entry(offsets="[4,12]")), 12))
    put("trailing-bytes", "trail.safetensors", st_bytes(hdr(w=_entry()), 9))
    put("minus-zero-offset", "m0.safetensors", st_bytes(hdr(w=_entry(offsets="[-0,8]"))))
    put("nesting-128", "deep.safetensors", st_bytes(hdr(w=_entry(',"x":' + "[" * 126 + "]" * 126))))
    put("f4-mid-byte", "f4.safetensors", st_bytes(hdr(q=_entry(dtype="F4", shape="[3]", offsets="[0,2]")), 2))
    put("list-form-entry", "list.safetensors", st_bytes('{"w":["F32",[2],[0,8]]}'))
    put("dim-2-64-minus-1", "dimmax.safetensors", st_bytes(hdr(w=_entry(shape=f"[{2**64 - 1},0]", offsets="[0,0]")), 0))  # fmt: skip

    big = {f"model.layers.{i // 10}.attn.q_proj.weight.{i}": [2 * i, 2 * i + 2] for i in range(80_000)}
    text = "{" + ",".join(f'"{k}":{_entry(shape="[1]", offsets=str(o), dtype="F16")}' for k, o in big.items()) + "}"
    put("valid-9MB-header-80k-tensors", "big80k.safetensors", st_bytes(text.replace(" ", ""), 160_000))
    # issue 21 class 13: a valid header of 100k zero-size tensors, analysed and printed (to_text:
    # the module tree); it cost 3.96 s to analyse, 19.4 s to print and +246 MB
    zeros = "{" + ",".join(f'"t{i}":' + _entry(shape="[0]", offsets="[0,0]") for i in range(100_000)) + "}"
    put("valid-100k-zero-size-tensors", "zeros100k.safetensors", st_bytes(zeros, 0))
    # ... and past the header_tensors budget (list-form entries, counted before the JSON is parsed)
    listed = "{" + ",".join(f'"t{i}":["F32",[0],[0,0]]' for i in range(200_001)) + "}"
    put("header-200001-tensors", "zeros200k.safetensors", st_bytes(listed, 0))

    # 2. pickles: linear time and memory
    put("pt-deep-20000", "deep.pt", _wrapped(b"]" * 20_000, b"a" * 20_000))
    put("pt-deep-tensor-each-level", "deeptensors.pt", _deep_with_tensor_each_level(20_000))
    put("pt-memo-key-10MB-x300", "memokey.pt", _memo_key_dicts(10_000_000, 300))
    put("pt-2M-refs", "refs2m.pt", _many_refs(2_000_000))
    put("pt-200k-refs", "refs200k.pt", _many_refs(200_000))
    put("pt-5M-empty-lists", "lists.pt", _many_empty_lists(5_000_000))
    put("pt-990k-objects-under-cap", "undercap.pt", _with_tensor(b"(" + b"]" * 990_000 + b"e"))
    put("pt-huge-int-key", "intkey.pt", _save({10**300: torch.zeros(2), "ok": torch.zeros(1)}))
    put("pt-tensor-key", "tkey.pt", _save({torch.zeros(1): torch.zeros(2)}))
    put("pt-10MB-string-value", "strval.pt", _save({"w": torch.zeros(2), "note": "x" * 10_000_000}))
    put("pt-300k-top-values", "vals.pt", _save({"w": torch.zeros(2), **{f"v{i}": i for i in range(300_000)}}))
    put("pt-control-names", "ctrl.pt", _save({"e\x1b[2J": torch.zeros(2), "n\nstorage #9": torch.zeros(1)}))
    put("pt-zip-bomb-pickle", "bomb.pt", _rezip(_small_ckpt(), {"data.pkl": bytes(60_000_000)}, deflate=("data.pkl",)))
    # 6. pickled tensor attributes
    t = torch.zeros(4)
    t.Untyped_storage = 5
    put("pt-attr-untyped-storage", "attr1.pt", _patched({"w": t}, b"Untyped_storage", b"untyped_storage"))
    t = torch.zeros(4)
    t.Element_size = 0
    put("pt-attr-element-size", "attr2.pt", _patched({"w": t}, b"Element_size", b"element_size"))
    t = torch.zeros(4)
    t.harmless = 1
    put("pt-attr-harmless", "attr3.pt", _save({"w": t}))
    # 8. big-endian
    put("pt-big-endian", "be.pt", _rezip(_small_ckpt(), {"byteorder": b"big"}))
    be = _small_ckpt()
    i = be.find(b"little")
    put("pt-big-endian-bad-crc", "be2.pt", be[:i] + b"big\x00\x00\x00" + be[i + 6 :])
    cases.update(build_round3(folder, put, special))
    cases.update({name: f"object:{name}" for name in OBJECTS})
    return cases


# -- round 3 (issue 21) ----------------------------------------------------------------------------
def _op_int(n: int) -> bytes:
    """A pickle opcode pushing ``n`` (BININT for 32 bits, else LONG1)."""
    if 0 <= n < 1 << 31:
        return b"J" + n.to_bytes(4, "little")
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def _op_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return b"X" + len(raw).to_bytes(4, "little") + raw


_T = b"<<tensor>>"


def _listed(body: bytes) -> bytes:
    """As :func:`_with_tensor`, the tensor read where ``body`` holds :data:`_T` (nothing else
    in ``body`` is rewritten: it may hold any byte)."""
    base = _small_ckpt()
    pkl = _pickle_of(base)
    get = b"h" + pkl[-3:-2]
    return _rezip(base, {"data.pkl": b"\x80\x02]" + pkl[2:-1] + b"a" + body.replace(_T, get) + b"."})


def _call(glob: str, *args: bytes) -> bytes:
    """GLOBAL ``module.name`` called (REDUCE) on the pushed ``args``."""
    module, name = glob.rsplit(".", 1)
    return b"c" + f"{module}\n{name}\n".encode() + b"(" + b"".join(args) + b"tR"


def _meta_huge(n_tensors: int, numel: int) -> bytes:
    """``n_tensors`` meta float64 tensors of ``numel`` elements each (no storage, any size)."""
    import torch

    data = _save({f"m{i}": torch.empty(4, device="meta", dtype=torch.float64) for i in range(n_tensors)})
    pkl = _pickle_of(data)
    assert pkl.count(b"K\x04\x85") == n_tensors
    return _rezip(data, {"data.pkl": pkl.replace(b"K\x04\x85", _op_int(numel) + b"\x85")})


def _shared_ops(depth: int) -> bytes:
    """Pickle opcodes pushing a tuple of shared references ``depth`` deep (2**depth leaves as
    text; each level two memo gets), in memo slots no pickler uses."""
    slot = 1 << 30
    out = _op_str("x") + b"r" + slot.to_bytes(4, "little")
    for k in range(depth):
        get = b"j" + (slot + k).to_bytes(4, "little")
        out += get + get + b"\x86r" + (slot + k + 1).to_bytes(4, "little")
    return out


def _dcp(folder: str, name: str, *, fqn: bytes = b"", path: bytes = b"") -> str:
    """A DCP folder (one tensor "w", one chunk, one file) whose MetadataIndex fqn or file name is
    replaced by the given pickle opcodes."""
    import pickle

    import torch
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        Metadata,
        MetadataIndex,
        TensorProperties,
        TensorStorageMetadata,
    )

    chunk = ChunkStorageMetadata(offsets=torch.Size([0]), sizes=torch.Size([2]))
    tsm = TensorStorageMetadata(properties=TensorProperties(dtype=torch.float32), size=torch.Size([2]), chunks=[chunk])
    info = _StorageInfo(relative_path="PATHPLACEHOLDER", offset=0, length=8)
    index = MetadataIndex(fqn="FQNPLACEHOLDER0", offset=torch.Size([0]))
    data = pickle.dumps(Metadata(state_dict_metadata={"w": tsm}, storage_data={index: info}), protocol=2)
    for text, ops in (("FQNPLACEHOLDER0", fqn), ("PATHPLACEHOLDER", path)):
        if ops:
            data = data.replace(_op_str(text), ops)
    d = os.path.join(folder, name)
    os.mkdir(d)
    with open(os.path.join(d, ".metadata"), "wb") as f:
        f.write(data)
    with open(os.path.join(d, "__0_0.distcp"), "wb") as f:
        f.write(bytes(8))
    return d


def _dcp_many_ops(folder: str, n: int) -> str:
    """A DCP .metadata pickle of ``n`` small ints in a list (each one opcode)."""
    d = os.path.join(folder, "dcp-ops")
    os.mkdir(d)
    with open(os.path.join(d, ".metadata"), "wb") as f:
        f.write(b"\x80\x04]" + b"(" + b"K\x01" * n + b"e.")
    return d


def _zip_records(n: int, pickle_ops: int) -> bytes:
    """A checkpoint with ``n`` empty, unused ``data/N`` records and ``pickle_ops`` empty lists."""
    base = _small_ckpt()
    out = io.BytesIO()
    inner = _pickle_of(base)[2:-1]
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/data.pkl"):
                data = b"\x80\x02]" + b"]a" * pickle_ops + inner + b"a."
            dst.writestr(info.filename, data)
        for i in range(n):
            dst.writestr(f"archive/data/{1000 + i}", b"")
    return out.getvalue()


def build_round3(folder: str, put, special) -> dict[str, str]:  # noqa: PLR0915 - one line per case
    """Issue 21's classes 1-5 and 10; returns the DCP folders (cases that are folders)."""
    import torch

    cases: dict[str, str] = {}
    # 1. allowed globals that compute or allocate
    put("r3-bytearray-600MB", "ba.pt", _listed(_call("__builtin__.bytearray", _op_int(600_000_000)) + b"a"))
    put("r3-bytearray-2GB", "ba2.pt", _listed(_call("builtins.bytearray", _op_int(2_000_000_000)) + b"a"))
    punycode = _call("_codecs.encode", _op_str("ä" * 12_500), _op_str("punycode"))
    put("r3-codecs-punycode", "puny.pt", _listed(punycode + b"a"))
    put("r3-codecs-utf7", "utf7.pt", _listed(_call("_codecs.encode", _op_str("ä" * 12_500), _op_str("utf-7")) + b"a"))
    put("r3-untyped-storage-N", "us.pt", _listed(_call("torch.storage.UntypedStorage", _op_int(1 << 40)) + b"a"))
    put("r3-float-tensor-N", "ft.pt", _listed(_call("torch.FloatTensor", _op_int(1 << 30)) + b"a"))
    new_tensor = b"ctorch\nTensor\n" + _op_int(1 << 30) + b"\x85\x81"
    put("r3-tensor-newobj-N", "tn.pt", _listed(new_tensor + b"a"))
    wrapped = _call("torch._tensor._rebuild_from_type_v2", b"c__builtin__\nbytearray\n", b"ctorch\nTensor\n",
                    _op_int(1 << 31) + b"\x85", b"}")  # fmt: skip
    put("r3-from-type-v2-bytearray", "ftv2.pt", _listed(wrapped + b"a"))
    put("r3-device-from-cpu", "dev.pt", _listed(_call("torch._utils._rebuild_device_tensor_from_cpu_tensor",
                                                           _T, b"ctorch\nfloat64\n", _op_str("cpu"), b"\x89") + b"a"))  # fmt: skip
    put(
        "r3-bytes-values-ok",
        "bytesok.pt",
        _save({"w": torch.zeros(2), "b": b"\x00hi", "ba": bytearray(b"xyz"), "s": {1, 2}}),
    )
    # 2. records inflated before they are checked
    bomb = bytes(64_000_000)
    put("r3-deflated-byteorder", "bo.pt", _rezip(_small_ckpt(), {"byteorder": bomb}, deflate=("byteorder",)))
    put(
        "r3-deflated-format-version",
        "fv.pt",
        _rezip(_small_ckpt(), {".format_version": bomb}, deflate=(".format_version",)),
    )
    put("r3-deflated-version", "ver.pt", _rezip(_small_ckpt(), {"version": bomb}, deflate=("version",)))
    put("r3-deflated-data-record", "dr.pt", _rezip(_small_ckpt(), {}, deflate=("data/0",)))
    put("r3-deflated-pickle-ok", "dp.pt", _rezip(_small_ckpt(), {}, deflate=("data.pkl",)))
    # 3. budgets the file cannot raise
    put("r3-30k-empty-records-3M-ops", "recs.pt", _zip_records(30_000, 3_000_000))
    put("r3-1.2M-ops", "ops12.pt", _many_empty_lists(1_200_000))
    w = torch.zeros(10_000)
    put(
        "r3-10k-refs-1M-ints",
        "refsints.pt",
        _save({"v": [w[i : i + 1] for i in range(10_000)], "n": list(range(1_000_000))}),
    )
    put("r3-10k-views", "views10k.pt", _save({f"v{i}": w[i : i + 1] for i in range(10_000)}))
    cases["r3-dcp-3M-ops"] = _dcp_many_ops(folder, 3_000_000)
    wm = {f"t{i}": "s.safetensors" for i in range(600_000)}
    put("r3-index-600k-names", "big.index.json", json.dumps({"weight_map": wm}).encode())
    # 4. memo-shared structures
    cases["r3-dcp-shared-tuple-fqn"] = _dcp(folder, "dcp-tuple", fqn=_shared_ops(60))
    posix = b"cpathlib\nPosixPath\n" + _shared_ops(60) + b"\x85R"
    cases["r3-dcp-shared-tuple-path"] = _dcp(folder, "dcp-path", fqn=_op_str("w"), path=posix)
    cases["r3-dcp-shared-tuple-path-19"] = _dcp(
        folder, "dcp-path19", fqn=_op_str("w"), path=b"cpathlib\nPosixPath\n" + _shared_ops(19) + b"\x85R"
    )
    cases["r3-dcp-long-fqn"] = _dcp(folder, "dcp-long", fqn=_op_str("w" * 100_000))
    cases["r3-dcp-ok"] = _dcp(folder, "dcp-ok", fqn=_op_str("w"), path=_op_str("__0_0.distcp"))
    shared_key = b"}" + _shared_ops(60) + _op_int(1) + b"s"
    put("r3-pt-shared-tuple-dict-key", "skey.pt", _listed(shared_key + b"a"))
    # 5. int64 overflow
    put("r3-meta-2^62-bytes", "m62.pt", _meta_huge(1, 1 << 59))
    put("r3-three-meta-2^61-bytes", "m61.pt", _meta_huge(3, 1 << 58))
    put("r3-three-meta-near-2^62-bytes", "m62x3.pt", _meta_huge(3, (1 << 59) - 1))
    put("r3-meta-2^70-elements", "m70.pt", _meta_huge(1, 1 << 70))
    put("r3-meta-2^57-bytes-ok", "m57.pt", _meta_huge(1, 1 << 54))
    # 10. hostile data never cached
    put("r3-60MB-dtype", "dtype.safetensors", st_bytes(hdr(w=_entry(dtype="F" * 60_000_000))))
    return cases


# -- live objects (class 11 and 3): built in the child, then analysed ------------------------------
def _self_child():
    import torch

    m = torch.nn.Linear(2, 2)
    m.add_module("me", m)
    return m


def _two_cycle():
    import torch

    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    a.add_module("b", b)
    b.add_module("a", a)
    return a


def _shared_dag(depth: int = 40):
    import torch

    root = cur = torch.nn.Module()
    for i in range(depth):
        nxt = torch.nn.Linear(1, 1) if i == depth - 1 else torch.nn.Module()
        cur.add_module("a", nxt)
        cur.add_module("b", nxt)
        cur = nxt
    return root


def _state_dict_module(kind: str):
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2))

        def state_dict(self, *args, **kwargs):
            if kind == "raises":
                raise RuntimeError("broken\x1b[31m state_dict")
            return ((k, v) for k, v in [("w", self.w)])

    return M()


def _odd_values():
    import torch

    class NoAttrs:
        def __getattribute__(self, name):
            raise ValueError("no attributes")

    class BadStr:
        def __str__(self):
            raise ValueError("no text")

        def __hash__(self):
            return 1

    deep: tuple = ()
    for _ in range(100_000):
        deep = (deep,)
    return {"x": NoAttrs(), BadStr(): torch.zeros(2), deep: torch.zeros(3), "w": torch.zeros(4)}


def _endless_mapping():
    import itertools
    from collections.abc import Mapping

    import torch

    t = torch.zeros(1)

    class Endless(Mapping):
        def __getitem__(self, key):
            return t

        def __len__(self):
            return 1

        def __iter__(self):
            return (f"k{i}" for i in itertools.count())

    return Endless()


def _ten_million_names():
    import torch

    t = torch.zeros(1)
    return dict.fromkeys(map(str, range(3_000_000)), t)


OBJECTS = {
    "obj-module-own-child": _self_child,
    "obj-two-module-cycle": _two_cycle,
    "obj-shared-module-dag-2^40": _shared_dag,
    "obj-state-dict-raises": lambda: _state_dict_module("raises"),
    "obj-state-dict-generator": lambda: _state_dict_module("generator"),
    "obj-odd-values-and-keys": _odd_values,
    "obj-endless-mapping": _endless_mapping,
    "obj-3M-names": _ten_million_names,
    "obj-proc-self-mem": lambda: "/proc/self/mem",
}


# -- the runner ------------------------------------------------------------------------------------
def _vm_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


#: Cases whose child also prints the layout (``to_text()``: the module tree), timed and measured with it.
WITH_TEXT = frozenset({"valid-100k-zero-size-tensors"})


def _summary(layout, text: bool = False) -> dict:
    return {
        "text_lines": layout.to_text().count("\n") + 1 if text else 0,
        "ok": True,
        "views": len(layout.views),
        "storages": len(layout.storages),
        "skipped": len(layout.skipped),
        "names": list(layout.names[:4]),
        "max_name": max((len(n) for n in layout.names), default=0),
        "values": len(layout.metadata.get("values", {})),
        "reason0": layout.skipped[0].reason[:200] if layout.skipped else "",
    }


def _child(path: str, w: int, as_limit: int, text: bool = False) -> None:
    import tensorviz as tv
    from tensorviz.core.errors import TensorvizError

    resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
    if path.startswith("object:"):  # a live object, built here (not timed)
        path = OBJECTS[path.removeprefix("object:")]()
    signal.alarm(TIMEOUT_S)
    rss0 = _vm_kib("VmRSS")
    t0 = time.perf_counter()
    try:
        out = _summary(tv.analyze(path), text)
    except TensorvizError as err:
        out = {"ok": False, "error": type(err).__name__, "message": str(err)[:2000]}
    except BaseException as err:  # noqa: BLE001 - a raw crash is what the corpus looks for
        out = {"ok": False, "error": "RAW " + type(err).__name__, "message": str(err)[:2000]}
    out["seconds"] = time.perf_counter() - t0
    out["rss_mb"] = round((_vm_kib("VmHWM") - rss0) / 1024, 1)  # peak above the child's start
    os.write(w, json.dumps(out).encode())


def run_case(path: str, text: bool = False) -> dict:
    """Analyse ``path`` (and print it, with ``text``) in a forked child (address-space limit,
    alarm); its outcome and costs."""
    as_limit = _vm_kib("VmSize") * 1024 + AS_HEADROOM
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            _child(path, w, as_limit, text)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {"ok": False, "error": f"KILLED (status {status}: timeout or memory)", "seconds": None, "rss_mb": None}
    return json.loads(b"".join(chunks))


def main(folder: str) -> None:
    import torch

    import tensorviz as tv

    torch.set_num_threads(1)  # no thread pool to inherit across fork
    tv.analyze({"warm": torch.zeros(2)})  # import what every case needs, once
    with open(os.path.join(folder, "cases.json")) as f:
        cases = json.load(f)
    for case, path in cases.items():
        out = run_case(path, case in WITH_TEXT)
        out["case"] = case
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
