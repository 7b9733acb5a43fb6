"""collect.py: what analyze accepts, what it skips (and why), and that it reads and keeps nothing."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import tensorviz as tv
from tensorviz.sources.live import ACCEPTED, collect, iter_named_values, why_not_analysable
from tests.helpers.models import FusedQKV, TiedLM, fake_sharded_tensor, seed_tensors


def skipped(layout: tv.Layout) -> dict[str, str]:
    return {s.name: s.reason for s in layout.skipped}


# -- what analyze accepts ----------------------------------------------------------------------
def test_module_gives_state_dict_names_tied_under_every_name_plus_non_persistent_buffers():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = TiedLM(vocab=10, dim=4)
            self.register_buffer("steps", torch.zeros(2, dtype=torch.int64))
            self.register_buffer("cache", torch.zeros(3), persistent=False)
            self.register_buffer("nothing", None)

    layout = tv.analyze(M())
    assert layout.names == ("steps", "lm.wte.weight", "lm.ln.weight", "lm.ln.bias", "lm.lm_head.weight", "cache")
    assert layout.relation("lm.wte.weight", "lm.lm_head.weight") == "identical"
    assert layout.source == "M" and layout.skipped == ()
    assert layout["steps"].dtype == "int64" and layout["steps"].itemsize == 8


def test_nested_mappings_sequences_and_modules_flatten_with_dots():
    a = torch.zeros(3)
    obj = {"opt": {"state": {0: {"exp_avg": a}}, "lr": 0.1}, "layers": [a[:1], (a[1:], None)], "model": FusedQKV()}
    layout = tv.analyze(obj)
    assert layout.names[:3] == ("opt.state.0.exp_avg", "layers.0", "layers.1.0")
    assert layout.names[3:] == (
        "model.qkv.weight",
        "model.qkv.bias",
        "model.q.weight",
        "model.q.bias",
        "model.v.weight",
        "model.v.bias",
    )
    assert skipped(layout) == {
        "opt.lr": "not a tensor (builtins.float); tensorviz only lays out tensors",
        "layers.1.1": "not a tensor (builtins.NoneType); tensorviz only lays out tensors",
    }
    assert names_of(tv.analyze([a, a[1:]])) == ("0", "1")
    assert names_of(tv.analyze((a,))) == ("0",)
    assert names_of(tv.analyze(a)) == ("tensor",)


def names_of(layout):
    return layout.names


def test_flattened_names_that_collide_keep_the_first():
    a, b = torch.zeros(1), torch.zeros(2)
    layout = tv.analyze({"x.y": a, "x": {"y": b}, 1: a, "1": b})
    assert layout.names == ("x.y", "1")
    assert layout["x.y"].nbytes == 4 and layout["1"].nbytes == 4
    assert skipped(layout) == {
        "x.y": "duplicate name: an earlier value already has this name",
        "1": "duplicate name: an earlier value already has this name",
    }
    assert [s.names for s in layout.storages] == [("x.y", "1")]


def test_a_container_that_holds_itself_is_reported_not_recursed():
    d: dict = {"w": torch.zeros(2)}
    d["self"] = d
    layout = tv.analyze(d)
    assert layout.names == ("w",)
    assert "reference cycle" in skipped(layout)["self"]


@pytest.mark.parametrize(
    "obj", [3, None, {1, 2}, iter([torch.zeros(1)]), np.zeros(3)], ids=["int", "None", "set", "iterator", "ndarray"]
)
def test_unknown_input_types_get_a_type_error_listing_what_is_accepted(obj):
    with pytest.raises(TypeError) as info:
        tv.analyze(obj)
    message = str(info.value)
    assert message.startswith(
        f"tensorviz.analyze cannot read a {type(obj).__module__}.{type(obj).__qualname__}; it accepts "
    )
    for kind in ACCEPTED:
        assert kind in message
    assert "nn.Module" in message and "Mapping[str, Tensor]" in message and ".safetensors" in message


def test_iter_named_values_survives_a_container_holding_itself():
    a = torch.zeros(2)
    cyclic = [a]
    cyclic.append(cyclic)
    assert [n for n, _ in iter_named_values(cyclic)] == ["0"]
    inner = [a]  # one container under two names is not a cycle: both names are listed
    assert [n for n, _ in iter_named_values({"x": inner, "y": {"z": inner}})] == ["x.0", "y.z.0"]


def test_collect_and_iter_named_values():
    a = torch.zeros(4)
    layout = collect([("x", a), ("y", a[2:]), ("z", "text"), ("x", a[1:])], source="pairs")
    assert layout.names == ("x", "y") and layout.source == "pairs"
    assert [s.name for s in layout.skipped] == ["z", "x"] and layout["x"].nbytes == 16
    assert layout.relation("x", "y") == "contains"
    assert [n for n, _ in iter_named_values({"m": {"k": a}, "l": [a]})] == ["m.k", "l.0"]
    assert [n for n, _ in iter_named_values(FusedQKV())][:2] == ["qkv.weight", "qkv.bias"]


def test_storage_identity_is_the_memory_keyed_by_its_first_storage():
    arr = np.zeros(6, dtype=np.float32)
    one, two = torch.from_numpy(arr), torch.from_numpy(arr)
    assert one.data_ptr() == two.data_ptr()
    layout = tv.analyze({"one": one, "two": two, "view": one[2:]})
    assert layout.relation("one", "two") == "identical"  # two storage objects, one memory
    assert layout.relation("one", "view") == "contains"
    assert len(layout.storages) == 1
    assert layout["two"].storage == ("cpu", one.untyped_storage()._cdata) == ("cpu", torch._C._storage_id(one))
    alone = torch.zeros(2)
    assert tv.analyze({"a": alone}).storages[0].key == ("cpu", torch._C._storage_id(alone))


def test_parameters_and_plain_subclasses_are_analysed():
    class Plain(torch.Tensor):  # no __torch_dispatch__, no wrapped tensors: its storage is real
        pass

    base = torch.zeros(4, 4)
    p = nn.Parameter(base)
    s = base[1:].as_subclass(Plain)
    layout = tv.analyze({"p": p, "s": s})
    assert layout.skipped == ()
    assert layout.relation("p", "s") == "contains"


# -- FakeTensor, meta, DTensor -----------------------------------------------------------------
def test_fake_tensors_work_like_real_ones():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(8, 10, 50)
        sd = {"a": a, "b": a[2:4], "c": a[4:6], "t": a.transpose(0, 1), "other": torch.empty(8, 10, 50)}
        model = FusedQKV()
    layout = tv.analyze(sd)
    assert layout.skipped == ()
    assert (layout["b"].start, layout["b"].stop, layout["c"].start) == (4000, 8000, 8000)
    assert layout.relation("b", "c") == "disjoint" and layout.relation("a", "t") == "same-bytes"
    assert layout.relation("a", "other") == "unrelated"  # data_ptr is 0 for both; storages differ
    assert layout["a"].device == "cpu" and layout.storages[0].nbytes == 16000
    qkv = tv.analyze(model)
    assert [g.names for g in qkv.shared("overlap")] == [("qkv.weight", "q.weight", "v.weight")]


def test_symbolic_fake_tensors_are_skipped_without_guarding():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    f = FakeTensorMode(shape_env=env, static_shapes=False).from_tensor(torch.zeros(4, 3))
    layout = tv.analyze({"f": f, "g": f[1:]})
    reasons = skipped(layout)
    assert list(reasons) == ["f", "g"] and layout.names == ()
    assert reasons["f"].startswith("symbolic sizes or strides (shape (s")
    assert reasons["f"].endswith(
        "byte offsets need concrete numbers; analyse real, meta or static-shape fake tensors instead"
    )
    assert len(env.guards) == 0  # analysis added no guard to the shape environment


def test_meta_tensors_share_storages_only_when_they_really_do():
    with torch.device("meta"):
        w = torch.empty(10, 4)
        layout = tv.analyze({"w": w, "w2": torch.empty(10, 4), "t": w.t(), "row": w[3]})
    assert layout.relation("w", "w2") == "unrelated"
    assert layout.relation("w", "t") == "same-bytes"
    assert (layout["row"].start, layout["row"].stop) == (48, 64)
    assert layout.storages[0].device == "meta" and layout.storages[0].nbytes == 160


def test_a_conjugate_view_is_noted():
    """``z.conj()`` reads z's bytes (one span group) but conjugates them on read: its note
    says so; a complex tensor without the conj bit has none (complex tensors go the careful way)."""
    from tensorviz.core.records import CONJ_NOTE

    z = torch.complex(torch.arange(4.0), torch.arange(4.0) + 1)
    m = torch.nn.Module()
    m.register_buffer("z", z)
    m.register_buffer("c", z.conj())
    m.register_buffer("k", torch.zeros(3, dtype=torch.complex128).conj())
    layout = tv.analyze(m)
    assert [(v.name, v.note, v.dtype) for v in layout.views] == [
        ("z", "", "complex64"),
        ("c", CONJ_NOTE, "complex64"),
        ("k", CONJ_NOTE, "complex128"),
    ]
    assert [sorted(g.names) for g in layout.groups("span")] == [["c", "z"], ["k"]]
    assert layout["c"].storage == layout["z"].storage and (layout["c"].start, layout["c"].stop) == (0, 32)


def test_dtensor_local_shard_is_analysed_and_noted():
    with fake_sharded_tensor() as d:
        layout = tv.analyze({"d": d, "plain": torch.zeros(2)})
        local = d.to_local()
    v = layout["d"]
    assert v.shape == (4, 2) and v.note == "DTensor: only this rank's local shard is shown"
    assert v.storage == ("cpu", local.untyped_storage()._cdata)
    assert "(DTensor: only this rank's local shard is shown)" in str(layout)


def test_dtensor_code_path_with_a_stand_in_without_a_local_shard():
    class DTensor(torch.Tensor):  # same class name, no _local_tensor: not analysable as a shard
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    t = torch.Tensor._make_subclass(DTensor, torch.zeros(2))
    reason = skipped(tv.analyze({"d": t}))["d"]
    assert reason.startswith("tensor subclass ") and "overrides __torch_dispatch__" in reason


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_keyed_by_device_and_storage():
    x = torch.zeros(4, 6, device="cuda")
    layout = tv.analyze({"x": x, "odd": x[:, 1::2], "cpu": torch.zeros(4, 6)})
    assert layout["x"].device == "cuda:0" and layout["x"].storage[0] == "cuda:0"
    assert layout.relation("x", "odd") == "contains" and layout.relation("x", "cpu") == "unrelated"


# -- what is skipped, and why ------------------------------------------------------------------
class Wrapper(torch.Tensor):
    """A minimal wrapper subclass (like TwoTensor): its data lives in an inner tensor."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    def __tensor_flatten__(self):
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return Wrapper(inner_tensors["inner"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_map

        unwrap = lambda x: x.inner if isinstance(x, Wrapper) else x  # noqa: E731
        wrap = lambda x: Wrapper(x) if isinstance(x, torch.Tensor) else x  # noqa: E731
        return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))


class Logged(torch.Tensor):
    """A __torch_dispatch__ subclass over a real storage."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def odd_values() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantize_per_tensor and nested_tensor
        values = {
            "text": "hello",
            "number": 3,
            "none": None,
            "array": np.zeros(2),
            "coo": torch.eye(3).to_sparse(),
            "csr": torch.eye(3).to_sparse_csr(),
            "csc": torch.eye(3).to_sparse_csc(),
            "nested": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
            "jagged": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged),
            "quantized": torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8),
            "quint4x2": torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint4x2),
            "uint4": torch.empty(8, dtype=torch.uint4),
            "int2": torch.empty(8, dtype=torch.int2),
            "dispatch": torch.Tensor._make_subclass(Logged, torch.zeros(3)),
            "lazy": nn.LazyLinear(3).weight,
            "mkldnn": torch.zeros(2, 2).to_mkldnn(),
        }
    return values


REASONS = {
    "text": "not a tensor (builtins.str); tensorviz only lays out tensors",
    "number": "not a tensor (builtins.int); tensorviz only lays out tensors",
    "none": "not a tensor (builtins.NoneType); tensorviz only lays out tensors",
    "array": "not a tensor (numpy.ndarray); tensorviz only lays out tensors",
    "coo": "sparse_coo tensor: its values and indices live in separate storages with no strided view; "
    "analyse t.coalesce().values() and t.coalesce().indices() instead",
    "csr": "sparse_csr tensor: its values and compressed indices live in separate storages; analyse "
    "t.values(), t.crow_indices() and t.col_indices() instead",
    "csc": "sparse_csc tensor: its values and compressed indices live in separate storages; analyse "
    "t.values(), t.ccol_indices() and t.row_indices() instead",
    "nested": "nested tensor: its components live in a packed buffer plus offsets, with no single strided "
    "view; analyse its parts instead (t.values() and t.offsets() for a jagged one, t.unbind() "
    "for a strided one)",
    "quantized": "quantized tensor (quint8): its bytes are read through a scale and zero point held outside "
    "the storage; analyse t.int_repr() for the raw layout",
    "quint4x2": "quantized tensor (quint4x2): its bytes are read through a scale and zero point held outside "
    "the storage; analyse t.int_repr() for the raw layout",
    "uint4": "sub-byte dtype uint4: element_size() says 1 byte but each value is narrower, and how values "
    "are packed depends on the library that made it, so byte offsets from it may be wrong; "
    "analyse the packed uint8 tensor it came from",
    "dispatch": "tensor subclass Logged overrides __torch_dispatch__, so its storage may not be where its "
    "data lives; analyse t.as_subclass(torch.Tensor) if it is a plain view",
    "lazy": "UninitializedParameter: a lazy module's parameter has no shape or storage until its first "
    "forward; run one forward pass (or build the module with concrete sizes) first",
    "mkldnn": "_mkldnn tensor: an opaque MKL-DNN tensor has no storage tensorviz can read; analyse t.to_dense()",
}


def test_unanalysable_values_are_skipped_with_reasons_and_never_crash():
    values = odd_values()
    layout = tv.analyze({"ok": torch.zeros(2), **values, "ok2": torch.zeros(3)})
    assert layout.names == ("ok", "ok2")
    reasons = skipped(layout)
    assert list(reasons) == list(values)  # every odd value, in source order
    for name, reason in REASONS.items():
        assert reasons[name] == reason, name
    assert reasons["jagged"] == REASONS["nested"]
    assert reasons["int2"] == REASONS["uint4"].replace("uint4", "int2")
    text = str(layout)
    assert f"skipped: {len(values)}" in text and "  coo: sparse_coo tensor" in text


def test_traceable_wrappers_are_laid_out_by_their_inner_tensors():
    inner = torch.zeros(3)
    layout = tv.analyze({"wrapper": Wrapper(inner), "param_of_wrapper": nn.Parameter(Wrapper(inner))})
    assert layout.names == ("wrapper.inner", "param_of_wrapper.inner") and layout.skipped == ()
    assert layout.relation("wrapper.inner", "param_of_wrapper.inner") == "identical"
    assert layout["param_of_wrapper.inner"].piece.kind == "Wrapper"


def test_why_not_analysable_on_its_own():
    assert why_not_analysable(torch.zeros(2)) is None
    assert why_not_analysable(torch.zeros(2, dtype=torch.float8_e4m3fn)) is None
    assert why_not_analysable(torch.zeros(2, dtype=torch.float4_e2m1fn_x2)) is None  # a byte per element
    assert why_not_analysable(torch.eye(2).to_sparse()).startswith("sparse_coo tensor")


def test_metadata_that_cannot_be_read_is_a_skip_not_a_crash():
    class Broken(torch.Tensor):
        def stride(self, *args):
            raise RuntimeError("no strides here\nsecond line")

    t = torch.zeros(2).as_subclass(Broken)
    layout = tv.analyze({"broken": t, "ok": torch.zeros(1)})
    assert layout.names == ("ok",)
    assert skipped(layout) == {"broken": "its metadata cannot be read (RuntimeError: no strides here)"}
    assert [s.names for s in layout.storages] == [("ok",)]  # no half-registered storage


def test_odd_dtypes_get_their_size_from_torch():
    values = {
        "f8": torch.zeros(4, dtype=torch.float8_e5m2),
        "c64": torch.zeros(2, dtype=torch.complex64),
        "b": torch.zeros(3, dtype=torch.bool),
        "bf": torch.zeros(2, dtype=torch.bfloat16),
        "x2": torch.zeros(4, dtype=torch.float4_e2m1fn_x2),
    }
    layout = tv.analyze(values)
    assert {v.name: (v.dtype, v.itemsize, v.nbytes) for v in layout.views} == {
        "f8": ("float8_e5m2", 1, 4),
        "c64": ("complex64", 8, 16),
        "b": ("bool", 1, 3),
        "bf": ("bfloat16", 2, 4),
        "x2": ("float4_e2m1fn_x2", 1, 4),
    }


# -- analysis reads nothing, writes nothing, keeps nothing ---------------------------------
class RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_analysis_runs_no_aten_op_and_mutates_nothing():
    model = FusedQKV()
    x = torch.rand(4, 6)
    before = {n: (p.detach().clone(), p._version) for n, p in model.state_dict(keep_vars=True).items()}
    x_before, x_version = x.clone(), x._version
    sd = {"model": model, "x": x, "t": x.t(), "even": x[:, ::2], "b4": x[0].expand(3, 6), **odd_values()}
    with RecordOps() as rec:
        layout = tv.analyze(sd)
        layout.groups("overlap"), layout.groups("span"), layout.storages, layout.views
        str(layout), layout.relation("x", "even"), layout.footprint_runs("even")
        [layout.unreferenced_runs(s.key) for s in layout.storages]
    assert rec.ops == []  # not one aten op: no data read, no copy, no .cpu(), no write
    for name, p in model.state_dict(keep_vars=True).items():
        assert p._version == before[name][1]
        assert torch.equal(p.detach(), before[name][0])
        assert p.detach().view(torch.int32).tolist() == before[name][0].view(torch.int32).tolist()
    assert x._version == x_version and torch.equal(x, x_before)
    assert layout.relation("x", "even") == "contains"


def test_layout_keeps_no_reference_to_the_tensors():
    model = FusedQKV()
    x = torch.zeros(4, 6)
    refs = [weakref.ref(x), weakref.ref(model.qkv.weight), weakref.ref(model)]
    layout = tv.analyze({"m": model, "x": x, "t": x.t()})
    layout.groups("overlap"), layout.storages, layout.views, str(layout)
    del model, x
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert layout.relation("x", "t") == "same-bytes"  # the layout still answers
    assert len(layout.storages) == 5


def test_analysis_leaves_garbage_collection_as_it_found_it():
    assert gc.isenabled()
    tv.analyze(seed_tensors())
    assert gc.isenabled()
    gc.disable()
    try:
        tv.analyze(seed_tensors())
        assert not gc.isenabled()
    finally:
        gc.enable()
