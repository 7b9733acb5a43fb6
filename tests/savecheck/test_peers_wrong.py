"""Where tensorviz is right and a peer is wrong (README, "The hard cases"): each case predicted by
``tv.analyze``/``tv.save_check``, then run through the peer's real code and a real save."""

from __future__ import annotations

import collections
import os
import warnings

import pytest
import torch

import tensorviz as tv


def _verdict(report, saver):
    return next(v for v in report.verdicts if v.saver == saver)


class _Fused(torch.nn.Module):
    """A fused qkv weight with q, k and v registered as its row views."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Parameter(torch.randn(12, 4))
        self.q = torch.nn.Parameter(self.qkv.data[0:4])
        self.k = torch.nn.Parameter(self.qkv.data[4:8])
        self.v = torch.nn.Parameter(self.qkv.data[8:12])


def test_safetensors_keeps_the_last_end_seen_so_save_model_refuses_a_fused_qkv(tmp_path):
    from safetensors.torch import _find_shared_tensors, save_model
    from transformers.modeling_utils import _find_disjoint

    m = _Fused()
    layout = tv.analyze(m)
    assert [layout.relation(n, "qkv") for n in "qkv"] == ["within"] * 3
    assert [g.names for g in layout.shared("overlap")] == [("qkv", "q", "k", "v")]
    # safetensors: after k it remembers k's end, not qkv's, so v starts "past" the group
    assert sorted(map(sorted, _find_shared_tensors(m.state_dict()))) == [["k", "q", "qkv"], ["v"]]
    shared, _ = _find_disjoint([{"qkv", "q", "k", "v"}], m.state_dict())  # transformers' copy: max end
    assert [sorted(s) for s in shared] == [["k", "q", "qkv", "v"]]
    v = _verdict(tv.save_check(m), "safetensors.save_model")
    with pytest.raises(RuntimeError) as real:
        save_model(m, str(tmp_path / "m.safetensors"))
    assert v.outcome == "raises" and v.message == str(real.value)
    missed = [f for f in v.misfires if f.names == ("qkv", "v")]
    assert missed and "does not see them share memory" in missed[0].library
    assert "v within qkv, 64 B in common" in missed[0].tensorviz


def test_safetensors_refuses_a_flat_buffer_and_its_views(tmp_path):
    from safetensors.torch import save_model

    m = torch.nn.Module()
    m.flat = torch.nn.Parameter(torch.randn(96))
    for i in range(3):
        m.register_parameter(f"p{i}", torch.nn.Parameter(m.flat.data[i * 32 : (i + 1) * 32]))
    v = _verdict(tv.save_check(m), "safetensors.save_model")
    with pytest.raises(RuntimeError) as real:
        save_model(m, str(tmp_path / "m.safetensors"))
    assert v.outcome == "raises" and v.message == str(real.value)
    assert ("flat", "p2") in [f.names for f in v.misfires]
    assert [g.names for g in tv.analyze(m).shared("overlap")] == [("flat", "p0", "p1", "p2")]


def test_safetensors_writes_a_conjugate_views_bytes_unconjugated(tmp_path):
    """save_file of z.conj() writes z's bytes and loads them as plain values: it comes back as
    z, silently. tv.save_check says so (48 B lost, a note), torch.save keeps the conj bit, and
    the suggested fix (a copy) comes back as z.conj()'s values."""
    from safetensors.torch import load_file, save_file

    z = torch.complex(torch.randn(6), torch.randn(6))
    sd = {"kernel": z.conj(), "w": torch.randn(3)}
    report = tv.save_check(sd)
    v = _verdict(report, "safetensors.save_file")
    assert (v.outcome, v.lost_nbytes, v.kept) == ("drops data", 48, ("kernel", "w"))
    assert any(n.startswith("kernel: a conjugate view (z.conj()): the file gets its storage's bytes") for n in v.notes)
    save_file(sd, str(tmp_path / "raw.safetensors"))
    back = load_file(str(tmp_path / "raw.safetensors"))
    assert torch.equal(back["kernel"], z) and not torch.equal(back["kernel"], sd["kernel"])  # reality: z
    t = _verdict(report, "torch.save")
    assert (t.outcome, t.lost_nbytes) == ("ok", 0)
    torch.save(sd, tmp_path / "a.pt")
    assert torch.equal(torch.load(tmp_path / "a.pt", weights_only=True)["kernel"], sd["kernel"])
    (fix,) = v.fixes
    assert "fixed['kernel'] = fixed['kernel'].clone()  # a conjugate view: a copy holds its values" in fix.code("p")
    ns: dict = {"state_dict": sd}
    exec(fix.code(str(tmp_path / "fixed.safetensors")), ns)  # noqa: S102 - the suggested fix, run
    loaded: dict = {"path": str(tmp_path / "fixed.safetensors")}
    exec(fix.load_code, loaded)  # noqa: S102
    assert torch.equal(loaded["state_dict"]["kernel"], sd["kernel"].resolve_conj())


def test_save_pretrained_writes_a_conjugate_view_unconjugated_and_loads_it_silently(tmp_path):
    """transformers.save_pretrained of a model whose buffer is a lone conjugate view writes its
    storage's bytes, and from_pretrained brings back the values unconjugated, with no warning.
    tv.save_check predicts it (48 B lost, a note), as the zoo checks cell by cell."""
    from safetensors import safe_open

    from tests.helpers import zoo

    model = zoo.build("hf_complex_kernel")
    v = _verdict(tv.save_check(model), "transformers.save_pretrained")
    assert (v.outcome, v.lost_nbytes) == ("drops data", 48)
    assert any(n.startswith("kernel: a conjugate view (z.conj())") for n in v.notes)
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert torch.equal(f.get_tensor("kernel"), model.kernel.conj())  # the bytes, the conj bit dropped
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        back = type(model).from_pretrained(tmp_path)
    assert torch.equal(back.kernel, model.kernel.conj()) and not torch.equal(back.kernel, model.kernel)
    assert not [w for w in seen if "conj" in str(w.message).lower()]  # nothing says so


def test_id_tensor_storage_calls_two_empty_tensors_one_so_accelerate_drops_a_name(tmp_path):
    from accelerate.utils import save
    from safetensors.torch import load_file
    from transformers.pytorch_utils import id_tensor_storage

    sd = collections.OrderedDict(a=torch.empty(0), b=torch.empty(0))
    assert id_tensor_storage(sd["a"]) == id_tensor_storage(sd["b"])  # (cpu, 0, 0) for both
    assert tv.analyze(sd).relation("a", "b") == "unrelated"
    v = _verdict(tv.save_check(sd), "accelerate.save")
    save(collections.OrderedDict(sd), tmp_path / "e.safetensors", safe_serialization=True)
    back = load_file(tmp_path / "e.safetensors")
    assert v.kept == tuple(back) == ("a",) and v.dropped == ("b",)
    assert any(f.names == ("a", "b") and "share no byte" in f.tensorviz for f in v.misfires)


def test_find_tied_parameters_misses_overlapping_views_of_one_storage():
    from accelerate.utils import find_tied_parameters

    m = torch.nn.Module()
    base = torch.randn(16)
    m.a = torch.nn.Parameter(base[0:10])
    m.b = torch.nn.Parameter(base[6:16])
    assert find_tied_parameters(m) == []
    layout = tv.analyze(m)
    assert layout.relation("a", "b") == "overlaps" and layout.overlap_nbytes("a", "b") == 16
    m.a.data[7] = 123.0  # really one memory: a write through a shows in b
    assert m.b.data[1].item() == 123.0


def test_two_shared_maps_of_one_file_are_the_same_bytes(tmp_path):
    from safetensors.torch import _find_shared_tensors, save_file

    path = tmp_path / "w.bin"
    path.write_bytes(bytes(256))
    a = torch.UntypedStorage.from_file(str(path), True, 256)
    b = torch.UntypedStorage.from_file(str(path), True, 128)
    x = torch.empty(0).set_(a, 0, (64,), (1,))
    y = torch.empty(0).set_(b, 8, (16,), (1,))
    assert x.data_ptr() != y.data_ptr() and _find_shared_tensors({"x": x, "y": y}) == [{"x"}, {"y"}]
    layout = tv.analyze({"x": x, "y": y})
    assert layout.relation("y", "x") == "within" and layout.overlap_nbytes("x", "y") == 64
    (st,) = layout.storages
    assert (st.nbytes, layout["y"].start) == (256, 32)
    report = tv.save_check({"x": x, "y": y})
    v = _verdict(report, "safetensors.save_file")
    save_file({"x": x, "y": y}, str(tmp_path / "a.safetensors"))
    assert (v.outcome, v.duplicated_nbytes, v.file_nbytes) == (
        "duplicates bytes",
        64,
        os.path.getsize(tmp_path / "a.safetensors"),
    )
    t = _verdict(report, "torch.save")
    torch.save({"x": x, "y": y}, tmp_path / "a.pt")
    back = torch.load(tmp_path / "a.pt")
    assert back["x"].untyped_storage().data_ptr() != back["y"].untyped_storage().data_ptr()  # two storages written
    assert (t.written_nbytes, t.duplicated_nbytes) == (256 + 128, 128)
    y[0] = 5.0  # the truth: a write through one map shows in the other
    assert x[8].item() == 5.0


def test_a_private_map_of_a_file_is_memory_of_its_own(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(64))
    a = torch.UntypedStorage.from_file(str(path), False, 64)  # copy-on-write: writes stay private
    b = torch.UntypedStorage.from_file(str(path), True, 64)
    x, y = torch.empty(0).set_(a), torch.empty(0).set_(b)
    assert tv.analyze({"x": x, "y": y}).relation("x", "y") == "unrelated"
    x[0] = 1.0
    assert y[0].item() == 0.0


def _backslash_model(name: str):
    """A tiny transformers model with a submodule whose name holds a backslash."""
    from transformers import PretrainedConfig, PreTrainedModel

    class BackslashConfig(PretrainedConfig):
        model_type = "tensorviz_backslash"

    class Backslash(PreTrainedModel):
        config_class = BackslashConfig

        def __init__(self, config):
            super().__init__(config)
            self.blocks = torch.nn.ModuleDict({name: torch.nn.Linear(2, 2), "b": torch.nn.Linear(2, 2)})
            self.post_init()

        def _init_weights(self, module):
            pass

    return Backslash, BackslashConfig()


@pytest.mark.parametrize("name, message", [("a\\q", "bad escape \\q at position 15"), ("a\\b", None)])
def test_from_pretrained_reads_checkpoint_names_as_regular_expressions(tmp_path, name, message):
    """transformers 5.24 turns every checkpoint key into a WeightRenaming whose source is the key
    compiled as a regular expression (core_model_loading.py, ``re.compile("|".join(branches))``):
    a module name with a backslash before a letter that is no escape (``\\q``) raises re.error;
    one that is an escape (``\\b``, ``\\d``) loads, read as a pattern. tensorviz lays the names out
    as they are, save_pretrained writes them, and ``tv.load_check`` predicts the failure with its
    message before anything is loaded."""
    cls, config = _backslash_model(name)
    model = cls(config)
    assert tv.analyze(model).names[:2] == (f"blocks.{name}.weight", f"blocks.{name}.bias")
    assert _verdict(tv.save_check(model), "transformers.save_pretrained").outcome == "ok"
    model.save_pretrained(tmp_path)
    predicted = tv.load_check(cls(config), str(tmp_path), loader="from_pretrained")
    if message is None:
        assert not predicted.raises
        loaded = cls.from_pretrained(tmp_path)
        assert torch.equal(loaded.blocks[name].weight, model.blocks[name].weight)
        return
    import re

    with pytest.raises(re.error) as info:
        cls.from_pretrained(tmp_path)
    assert str(info.value) == message
    assert predicted.raises and message in predicted.error
