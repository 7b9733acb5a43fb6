"""Traceable tensor subclasses laid out by their inner tensors, checked against the oracle.

torchao's real quantizers (Int8, Float8, Intx, NF4 on CPU), torch's own ``TwoTensor`` and a
hand-written ``__torch_dispatch__`` wrapper: every inner tensor becomes a view named
``<name>.<inner>``; spans, footprints, relations and storage groups are compared with the
brute-force oracle over the inner tensors' absolute byte addresses (``data_ptr``).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._pytree import tree_map_only

import tensorviz as tv
from tensorviz.core.records import Piece
from tests.core.test_oracle import oracle_bytes, oracle_relation, runs_of

torchao_q = pytest.importorskip("torchao.quantization")


class Packed(torch.Tensor):
    """A user's own wrapper: values in ``data``, per-row scales in ``scale`` (both traceable)."""

    @staticmethod
    def __new__(cls, data: torch.Tensor, scale: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=torch.float32, device=data.device)

    def __init__(self, data: torch.Tensor, scale: torch.Tensor) -> None:
        self.data_, self.scale = data, scale

    def __tensor_flatten__(self):
        return ["data_", "scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, ctx, size, stride):
        return Packed(inner["data_"], inner["scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        args = tree_map_only(Packed, lambda p: p.data_.float() * p.scale, args)
        return func(*args, **(kwargs or {}))


class Opaque(torch.Tensor):
    """Overrides __torch_dispatch__ with no __tensor_flatten__: not traceable."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class Broken(Packed):
    def __tensor_flatten__(self):
        raise RuntimeError("no inner tensors today")


# -- the oracle over absolute addresses -----------------------------------------------------
def absolute_facts(name: str, t: torch.Tensor, memories: list[tuple[int, int]]) -> dict:
    base, itemsize = t.untyped_storage().data_ptr(), t.element_size()
    addrs = {base + b for b in oracle_bytes(t.storage_offset(), tuple(t.shape), t.stride(), itemsize)}
    first = base + t.storage_offset() * itemsize
    lo, hi = (min(addrs), max(addrs) + 1) if addrs else (first, first)
    st = t.untyped_storage()
    memory = next(i for i, (a, b) in enumerate(memories) if a < st.data_ptr() + st.nbytes() and st.data_ptr() < b)
    shape, stride = tuple(t.shape), t.stride()
    return {"name": name, "storage": memory, "bytes": addrs, "start": lo, "stop": hi, "shape": shape,
            "stride": stride, "dtype": t.dtype}  # fmt: skip


def memories_of(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    """Storages whose address ranges overlap are one memory (the oracle's union, by brute force)."""
    ranges = sorted(
        {
            (t.untyped_storage().data_ptr(), t.untyped_storage().data_ptr() + t.untyped_storage().nbytes())
            for t in tensors
        }
    )
    merged: list[list[int]] = []
    for a, b in ranges:
        if merged and a < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [tuple(m) for m in merged]


def check_against_oracle(layout: tv.Layout, inner: dict[str, torch.Tensor], subset: bool = False) -> None:
    """Every inner tensor is a view whose bytes, relations and storage groups are the oracle's
    (``subset``: the layout may hold other views too, on other storages)."""
    assert set(inner) <= set(layout.names) if subset else set(layout.names) == set(inner)
    memories = memories_of(list(inner.values()))
    facts = {n: absolute_facts(n, t, memories) for n, t in inner.items()}
    for n, f in facts.items():
        v = layout[n]
        assert (v.dtype, v.shape, v.stride, v.offset) == (
            str(f["dtype"]).removeprefix("torch."),
            f["shape"],
            f["stride"],
            inner[n].storage_offset(),
        )
        assert v.footprint_nbytes == len(f["bytes"]) and v.stop - v.start == f["stop"] - f["start"]
        shift = f["start"] - v.start
        assert (v.footprint_runs() + shift).tolist() == runs_of(f["bytes"]), n
    for a, b in itertools.product(facts.values(), repeat=2):
        assert layout.relation(a["name"], b["name"]) == oracle_relation(a, b), (a["name"], b["name"])
    by_memory: dict[int, list[str]] = {}
    for n in (n for n in layout.names if n in inner):
        by_memory.setdefault(facts[n]["storage"], []).append(n)
    keys = {layout[n].storage for n in inner}
    assert sorted(tuple(v.name for v in layout.storage_views(k)) for k in keys) == sorted(
        map(tuple, by_memory.values())
    )


def inner_of(name: str, t: torch.Tensor) -> dict[str, torch.Tensor]:
    names = t.__tensor_flatten__()[0]
    return {f"{name}.{a}": getattr(t, a) for a in names}


# -- torchao --------------------------------------------------------------------------------
def test_torchao_int8_weights_are_their_inner_tensors():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 32))
    torchao_q.quantize_(m, torchao_q.Int8WeightOnlyConfig())
    layout = tv.analyze(m)
    assert layout.names == (
        "0.weight.qdata", "0.weight.scale", "0.weight.zero_point", "0.bias",
        "1.weight.qdata", "1.weight.scale", "1.weight.zero_point", "1.bias",
    )  # fmt: skip
    assert layout.skipped == ()
    assert layout["0.weight.qdata"].piece == Piece("0.weight", "qdata", "Int8Tensor", "float32", (64, 64))
    assert layout["1.weight.scale"].piece == Piece("1.weight", "scale", "Int8Tensor", "float32", (32, 64))
    assert layout["0.bias"].piece is None
    assert (layout["0.weight.qdata"].dtype, layout["0.weight.qdata"].nbytes) == ("int8", 4096)
    assert layout.categories == ("weights",) * 8
    inner = {
        **inner_of("0.weight", m[0].weight),
        "0.bias": m[0].bias,
        **inner_of("1.weight", m[1].weight),
        "1.bias": m[1].bias,
    }
    check_against_oracle(layout, inner)
    assert layout.unique_nbytes == sum(t.untyped_storage().nbytes() for t in inner.values())


@pytest.mark.parametrize(
    ("config", "kind", "parts"),
    [
        ("Float8WeightOnlyConfig", "Float8Tensor", ("qdata", "scale")),
        ("IntxWeightOnlyConfig", "IntxUnpackedToInt8Tensor", ("qdata", "scale", "zero_point")),
        ("Int8DynamicActivationInt8WeightConfig", "Int8Tensor", ("qdata", "scale", "zero_point")),
    ],
)
def test_other_torchao_configs_that_run_on_cpu(config, kind, parts):
    m = torch.nn.Sequential(torch.nn.Linear(128, 64, bias=False))
    torchao_q.quantize_(m, getattr(torchao_q, config)())
    layout = tv.analyze(m)
    assert layout.names == tuple(f"0.weight.{p}" for p in parts)
    assert {v.piece for v in layout.views} == {Piece("0.weight", p, kind, "float32", (64, 128)) for p in parts}
    check_against_oracle(layout, inner_of("0.weight", m[0].weight))


def test_torchao_int4_on_cpu_is_int4_opaque_tensor():
    """torchao 0.18's int4 on CPU: Int4WeightOnlyConfig's packing formats all need mslk, CUDA,
    XPU or NPU (plain/preshuffled: "Requires mslk >= 1.0.0"; plain_int32: "Int4PlainInt32Tensor
    does not support device 'cpu' yet"; tile_packed_to_4d: CUDA); the CPU path is the prototype
    PrototypeInt4WeightOnlyConfig, an Int4OpaqueTensor: qdata, two int4 values a byte (N, K/2),
    preshuffled for the CPU tinygemm kernel, and scale_and_zero (K/group, N, 2)."""
    from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 128, bias=False)).to(torch.bfloat16)
    torchao_q.quantize_(m, PrototypeInt4WeightOnlyConfig(group_size=128))
    assert m(torch.randn(2, 256, dtype=torch.bfloat16)).shape == (2, 128)  # it runs on CPU
    layout = tv.analyze(m)
    assert layout.names == ("0.weight.qdata", "0.weight.scale_and_zero")
    q, sz = layout["0.weight.qdata"], layout["0.weight.scale_and_zero"]
    assert q.piece == Piece("0.weight", "qdata", "Int4OpaqueTensor", "bfloat16", (128, 256))
    assert (q.dtype, q.shape, sz.dtype, sz.shape) == ("uint8", (128, 128), "bfloat16", (2, 128, 2))
    assert layout.unique_nbytes == 128 * 256 // 2 + (256 // 128) * 128 * 2 * 2
    check_against_oracle(layout, inner_of("0.weight", m[0].weight))


def test_nf4_weights_and_the_codebook_they_share():
    from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4

    a, b = to_nf4(torch.randn(128, 128)), to_nf4(torch.randn(128, 128))
    layout = tv.analyze({"a": a, "b": b})
    assert layout["a.quantized_data"].piece == Piece("a", "quantized_data", "NF4Tensor", "float32", (128, 128))
    assert layout["a.quantized_data"].shape == (8192,)  # two 4-bit values per byte
    check_against_oracle(layout, {**inner_of("a", a), **inner_of("b", b)})


# -- ties and views through subclasses ------------------------------------------------------
def test_two_names_for_one_quantized_parameter_are_one_memory():
    m = torch.nn.Sequential(torch.nn.Linear(32, 32))
    torchao_q.quantize_(m, torchao_q.Int8WeightOnlyConfig())
    w = m[0].weight
    layout = tv.analyze({"embed.weight": w, "lm_head.weight": w})
    assert [g.names for g in layout.shared()] == [
        ("embed.weight.qdata", "lm_head.weight.qdata"),
        ("embed.weight.scale", "lm_head.weight.scale"),
        ("embed.weight.zero_point", "lm_head.weight.zero_point"),
    ]
    assert layout.relation("embed.weight.qdata", "lm_head.weight.qdata") == "identical"
    assert layout.unique_nbytes == 32 * 32 + 32 * 4 + 32
    check_against_oracle(layout, {**inner_of("embed.weight", w), **inner_of("lm_head.weight", w)})


def test_hand_written_wrapper_with_inner_views_of_one_buffer():
    buf = torch.zeros(8 * 16 + 8 * 4, dtype=torch.uint8)
    data, scale = buf[: 8 * 16].view(8, 16), buf[8 * 16 :].view(torch.float32).view(8, 1)
    p = Packed(data, scale)
    assert torch.equal(p + 0, torch.zeros(8, 16))  # a working subclass, not a shell
    layout = tv.analyze({"w": p, "row": p[2]})
    # p[2] dispatches to a plain float tensor (the wrapper dequantises): its own storage.
    assert layout.names == ("w.data_", "w.scale", "row")
    assert [g.names for g in layout.shared()] == [("w.data_", "w.scale")]
    assert layout.relation("w.data_", "w.scale") == "disjoint"
    assert (layout["w.scale"].start, layout["w.scale"].stop) == (128, 160)
    layout = tv.analyze({"w": p})
    check_against_oracle(layout, {"w.data_": data, "w.scale": scale})


def test_nested_two_tensor_names_each_leaf_by_its_path():
    base = torch.arange(24, dtype=torch.float32)
    a, c = base[:12].view(3, 4), torch.ones(3, 4)
    b = a.view(3, 4)  # a second view of the same bytes inside the subclass
    t = TwoTensor(TwoTensor(a, b), c)
    layout = tv.analyze({"x": t})
    assert layout.names == ("x.a.a", "x.a.b", "x.b")
    assert layout["x.a.b"].piece == Piece("x", "a.b", "TwoTensor", "float32", (3, 4))
    assert layout.relation("x.a.a", "x.a.b") == "identical"
    assert (layout["x.a.b"].start, layout["x.a.b"].stop) == (0, 48)
    check_against_oracle(layout, {"x.a.a": a, "x.a.b": b, "x.b": c})


def test_non_traceable_and_broken_subclasses_keep_named_reasons():
    opaque = torch.zeros(4).as_subclass(Opaque)
    broken = Broken(torch.zeros(2, 2, dtype=torch.uint8), torch.ones(2, 1))
    layout = tv.analyze({"o": opaque, "b": broken, "plain": torch.zeros(2)})
    assert layout.names == ("plain",)
    reasons = {s.name: s.reason for s in layout.skipped}
    assert reasons["o"].startswith("tensor subclass Opaque overrides __torch_dispatch__")
    assert reasons["b"].startswith(
        "tensor subclass Broken: its __tensor_flatten__ failed (RuntimeError: no inner tensors today)"
    )


# -- the text and the model map -------------------------------------------------------------
def int8_model() -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    torchao_q.quantize_(m, torchao_q.Int8WeightOnlyConfig())
    return m


def test_text_shows_each_logical_weight_beside_its_stored_pieces():
    layout = tv.analyze(int8_model())
    lines = str(layout).splitlines()
    start = lines.index("stored in pieces: 2 logical tensors")
    assert lines[start + 1 : start + 3] == [
        "  0.weight  Int8Tensor 64×64 (float32 logical) = qdata int8[64×64] + scale float32[64×1] + "
        "zero_point int8[64×1]: 4.3 KiB stored, 16.0 KiB as float32",
        "  2.weight  Int8Tensor 32×64 (float32 logical) = qdata int8[32×64] + scale float32[32×1] + "
        "zero_point int8[32×1]: 2.2 KiB stored, 8.0 KiB as float32",
    ]
    assert "  = 0.weight.scale  float32[64×1] stride=(1, 1) offset=0  bytes [0, 256)  (scale of 0.weight)" in lines


def test_model_map_counts_bytes_as_stored_and_as_the_logical_dtype():
    tree = tv.analyze(int8_model()).tree()
    weight, first = tree.find("0.weight"), tree.find("0")
    assert weight.piece == Piece("0.weight", "qdata", "Int8Tensor", "float32", (64, 64))
    assert (weight.nbytes, weight.unpacked) == (64 * 64 + 64 * 4 + 64, (64 * 64 * 4, ("float32",)))
    assert (first.nbytes, first.unpacked) == (64 * 64 + 64 * 4 + 64 + 256, (64 * 64 * 4 + 256, ("float32",)))
    assert tree.root.unpacked == ((64 * 64 + 32 * 64) * 4 + 256 + 128, ("float32",))
    assert tree.find("0.weight.qdata").unpacked == (0, ("float32",))  # counted at 0.weight
    assert tree.find("0.bias").unpacked == ()
    text = str(tree).splitlines()
    assert text[0] == "Sequential             6.8 KiB 100.0%  6.43K elements  stored; 24.4 KiB as float32"
    assert (
        text[2]
        == "│  ├─ weight           4.3 KiB  63.0%  4.22K  Int8Tensor float32[64, 64]  stored; 16.0 KiB as float32"
    )


def test_model_map_counts_a_tied_quantized_weight_once():
    m = torch.nn.Sequential(torch.nn.Linear(32, 32))
    torchao_q.quantize_(m, torchao_q.Int8WeightOnlyConfig())
    tree = tv.analyze({"embed.weight": m[0].weight, "lm_head.weight": m[0].weight}).tree()
    assert tree.find("embed.weight").unpacked == (32 * 32 * 4, ("float32",))
    assert tree.find("lm_head.weight").unpacked == (0, ("float32",))
    assert tree.root.unpacked == (32 * 32 * 4, ("float32",))
    assert tree.root.nbytes == 32 * 32 + 32 * 4 + 32


@pytest.mark.parametrize("module", ["tensorviz.core.pieces", "tensorviz.sources.subclasses"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed


@pytest.mark.parametrize("config", ["Int8WeightOnlyConfig", "Float8WeightOnlyConfig", "IntxWeightOnlyConfig"])
def test_torchao_names_read_without_the_hook_are_the_hooks_names(config):
    from tensorviz.sources.subclasses import _inner_names

    m = torch.nn.Sequential(torch.nn.Linear(128, 64))
    torchao_q.quantize_(m, getattr(torchao_q, config)())
    w = m[0].weight
    assert _inner_names(w) == list(w.__tensor_flatten__()[0])
    w.zero_point = None  # an optional inner tensor unset: the hook leaves it out, and so does tensorviz
    if "zero_point" in getattr(w, "optional_tensor_data_names", ()):
        assert _inner_names(w) == list(w.__tensor_flatten__()[0]) == ["qdata", "scale"]


# -- bitsandbytes ---------------------------------------------------------------------------
def test_bitsandbytes_params4bit_and_its_quant_state():
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear4bit(64, 32, quant_type="nf4", compress_statistics=True))
    w = bnb.nn.Params4bit(torch.randn(32, 64), requires_grad=False, quant_type="nf4", compress_statistics=True)
    m[0].weight = w = w._quantize("cpu")
    qs = w.quant_state
    layout = tv.analyze(m)
    assert layout.names == (
        "0.weight", "0.bias", "0.weight.absmax", "0.weight.quant_map", "0.weight.nested_absmax",
        "0.weight.nested_quant_map", "0.weight.quant_state.bitsandbytes__nf4",
    )  # fmt: skip
    piece = Piece("0.weight", "packed", "Params4bit nf4", "float32", (32, 64), 4, (64,))
    assert layout["0.weight"].piece == piece and layout["0.bias"].piece is None
    assert layout["0.weight.nested_absmax"].piece == Piece("0.weight", "nested_absmax", *list(vars(piece).values())[2:])
    assert (layout["0.weight"].dtype, layout["0.weight"].nbytes) == ("uint8", 32 * 64 // 2)
    real = {"0.weight": w, "0.weight.absmax": qs.absmax, "0.weight.quant_map": qs.code,
            "0.weight.nested_absmax": qs.state2.absmax, "0.weight.nested_quant_map": qs.state2.code}  # fmt: skip
    check_against_oracle(layout, real, subset=True)
    node = layout.tree().find("0.weight")
    assert node.unpacked == (32 * 64 * 4, ("float32",))
    assert layout.tree().find("0").unpacked == (32 * 64 * 4 + 32 * 4, ("float32",))


def test_bitsandbytes_int8params_is_its_cb_and_scb():
    """Linear8bitLt(has_fp16_weights=False) quantizes on .to("cpu") (bitsandbytes 0.50 runs on
    CPU): the weight's own storage is CB (int8, row by row), the module's SCB buffer each row's
    absmax. Checked against bitsandbytes' own tensors (data_ptr oracle) and its own dequantize."""
    bnb = pytest.importorskip("bitsandbytes")
    import bitsandbytes.functional as F

    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear8bitLt(64, 32, has_fp16_weights=False))
    original = m[0].weight.detach().clone()
    m = m.to("cpu")
    w = m[0].weight
    layout = tv.analyze(m)
    assert layout.names == ("0.weight", "0.bias", "0.SCB", "0.weight_format")
    piece = Piece("0.weight", "CB", "Int8Params", "float16", (32, 64), 8, (1, 64))
    assert layout["0.weight"].piece == piece and layout["0.bias"].piece is None
    assert layout["0.SCB"].piece == Piece("0.weight", "SCB", "Int8Params", "float16", (32, 64), 8, (1, 64))
    assert (layout["0.weight"].dtype, layout["0.SCB"].dtype, layout["0.SCB"].shape) == ("int8", "float32", (32,))
    check_against_oracle(layout, {"0.weight": w.CB, "0.SCB": w.SCB}, subset=True)  # bnb's own CB and SCB
    deq = F.int8_vectorwise_dequant(w.CB, w.SCB)  # bitsandbytes' own: what the pieces encode
    assert torch.allclose(deq, w.CB.float() * w.SCB[:, None] / 127)
    assert torch.allclose(deq, original, atol=float(w.SCB.max()) / 127)
    (group,) = tv.diagram(m).logical
    assert group.pieces == ("0.weight", "0.SCB", "0.weight_format") and group.lanes == (0, 2)


def test_model_map_html_shows_the_logical_weight_and_its_unquantized_size():
    from tensorviz.render.html.tree import tree_html

    page = tree_html(tv.analyze(int8_model()).tree(), open_depth=3)
    assert "int8[64, 64]" in page
    assert "Int8Tensor float32[64, 64]  stored; 16.0 KiB as float32" in page
    assert "  stored; 24.4 KiB as float32" in page  # the model's root
