"""Save-check verdicts on quantized models, each checked by a real save and reload (issue 26).

torchao's tensor subclasses (``Int8Tensor``, ``Float8Tensor``, ``NF4Tensor``), torch's
``TwoTensor`` and a hand-written wrapper have no storage of their own: safetensors and
accelerate ask its address and raise, with the message predicted exactly; ``torch.save``
pickles each with its inner tensors, writing every inner storage once, whole -- the predicted
bytes are the archive's storage records and the predicted size the file's. bitsandbytes'
``Params4bit`` and ``Int8Params`` hold their packed data in their own storage: every saver
writes them, and the file holds exactly the predicted names, bit-exact, at the predicted size.
"""

from __future__ import annotations

import os
import zipfile

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import tensorviz as tv
from tests.savecheck.test_saving_roundtrip import _really_save
from tests.sources.test_subclasses import Packed

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]
torchao_q = pytest.importorskip("torchao.quantization")

SAFETENSORS_SAVERS = ("safetensors.save_file", "safetensors.save_model", "accelerate.save", "Accelerator.save_model")
NO_STORAGE = "Attempted to access the data pointer on an invalid python storage."


def _torchao(config: str):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 32))
    torchao_q.quantize_(m, getattr(torchao_q, config)())
    return m


def _nf4():
    from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4

    torch.manual_seed(0)
    return {"a": to_nf4(torch.randn(128, 128)), "b": torch.randn(3)}


def _wrapper():
    buf = torch.arange(8 * 16 + 8 * 4, dtype=torch.uint8)
    return {"w": Packed(buf[: 8 * 16].view(8, 16), buf[8 * 16 :].view(torch.float32).view(8, 1)), "b": torch.ones(2)}


def _int4_cpu():
    from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 64)).to(torch.bfloat16)
    torchao_q.quantize_(m, PrototypeInt4WeightOnlyConfig(group_size=128))
    return m


SUBCLASS_CASES = {
    "int8": lambda: _torchao("Int8WeightOnlyConfig"),
    "int4_cpu": _int4_cpu,
    "float8": lambda: _torchao("Float8WeightOnlyConfig"),
    "int8_tied": lambda: (lambda m: {"e.weight": m[0].weight, "h.weight": m[0].weight, "h.bias": m[0].bias})(
        _torchao("Int8WeightOnlyConfig")
    ),
    "nf4": _nf4,
    "two_tensor": lambda: {"t": TwoTensor(torch.randn(3, 4), torch.randn(3, 4)), "u": torch.zeros(5)},
    "wrapper": _wrapper,
}


def _state(obj):
    return obj.state_dict() if isinstance(obj, torch.nn.Module) else obj


def _payload(path: str) -> int:
    with zipfile.ZipFile(path) as zf:
        return sum(i.file_size for i in zf.infolist() if "/data/" in i.filename and "/.data/" not in i.filename)


def _inner(t: torch.Tensor) -> dict[str, torch.Tensor]:
    if type(t) in (torch.Tensor, torch.nn.Parameter):
        return {"": t}
    return {k: v for a in t.__tensor_flatten__()[0] for k, v in _prefixed(a, _inner(getattr(t, a))).items()}


def _prefixed(a: str, d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{a}.{k}" if k else a: v for k, v in d.items()}


#: A mapping's save_model verdict is for "a module whose state_dict() is this mapping"; the test
#: builds one with buffers, which cannot hold dotted names, and whose state_dict() detaches each
#: buffer -- the wrapper's own __torch_dispatch__ dequantises on detach(), so no such module exists.
NO_MODULE_FOR = {"int8_tied", "wrapper"}


@pytest.mark.parametrize("case", SUBCLASS_CASES)
@pytest.mark.parametrize("saver", SAFETENSORS_SAVERS)
def test_safetensors_savers_refuse_a_subclass_with_the_librarys_own_error(case, saver, tmp_path):
    obj = SUBCLASS_CASES[case]()
    is_module = isinstance(obj, torch.nn.Module)
    if saver == "Accelerator.save_model" and not is_module or saver.endswith("save_model") and case in NO_MODULE_FOR:
        return
    v = tv.save_check(obj)[saver]
    with pytest.raises(RuntimeError) as real:
        _really_save(saver, obj, tmp_path)
    assert (v.outcome, v.error_type, v.message) == ("raises", "RuntimeError", str(real.value))
    assert v.message == NO_STORAGE
    assert any("is a tensor subclass" in n and "has no storage" in n for n in v.notes), v.notes


#: torch.save's outcome per case: NF4's quantization_factor is a 4-byte slice of a 1 KiB storage
#: (written whole); the wrapper's two inner tensors view one buffer as uint8 and float32.
TORCH_SAVE_OUTCOME = {"nf4": "writes unreferenced bytes", "wrapper": "raises"}


@pytest.mark.parametrize("case", SUBCLASS_CASES)
def test_torch_save_writes_every_inner_storage_once_whole(case, tmp_path):
    obj = SUBCLASS_CASES[case]()
    sd = _state(obj)
    layout = tv.analyze(obj)
    v = tv.save_check(obj)["torch.save"]
    path = str(tmp_path / "archive.pt")
    assert v.outcome == TORCH_SAVE_OUTCOME.get(case, "ok")
    if v.outcome == "raises":
        with pytest.raises(RuntimeError) as real:
            torch.save(sd, path)
        assert (v.error_type, v.message) == ("RuntimeError", str(real.value))
        return
    torch.save(sd, path)
    assert not any("bytes written unknown" in n for n in v.notes)
    assert v.written_nbytes == _payload(path) == layout.storage_nbytes
    assert v.unreferenced_nbytes == layout.storage_nbytes - layout.unique_nbytes
    assert v.file_nbytes == os.path.getsize(path)
    assert v.kept == tuple(sd)
    back = torch.load(path, weights_only=False)
    assert list(back) == list(sd)
    for name, t in sd.items():
        assert type(back[name]) is type(t)
        got, want = _inner(back[name]), _inner(t)
        assert list(got) == list(want)
        for part in want:
            assert torch.equal(got[part], want[part]), (name, part)
            assert f"{name}.{part}" in layout or not part, (name, part)


def test_tied_quantized_weight_is_written_once_by_torch_save(tmp_path):
    sd = SUBCLASS_CASES["int8_tied"]()
    v = tv.save_check(sd)["torch.save"]
    torch.save(sd, tmp_path / "archive.pt")
    assert v.written_nbytes == _payload(str(tmp_path / "archive.pt")) == 64 * 64 + 64 * 4 + 64 + 64 * 4
    back = torch.load(tmp_path / "archive.pt", weights_only=False)
    assert back["e.weight"].qdata.untyped_storage().data_ptr() == back["h.weight"].qdata.untyped_storage().data_ptr()


# -- bitsandbytes: packed data in the parameter's own storage ------------------------------------
def _bnb4():
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        bnb.nn.Linear4bit(64, 64, quant_type="nf4", compress_statistics=True),
        bnb.nn.Linear4bit(64, 32, quant_type="fp4", compress_statistics=False),
    )
    return m.to("cpu")  # quantizes on the move (bitsandbytes 0.50 runs on CPU)


def _bnb8():
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear8bitLt(64, 32, has_fp16_weights=False))
    return m.to("cpu")


BNB_CASES = {"params4bit": _bnb4, "int8params": _bnb8}


@pytest.mark.parametrize("case", BNB_CASES)
@pytest.mark.parametrize("saver", (*SAFETENSORS_SAVERS, "torch.save"))
def test_bitsandbytes_models_are_saved_as_predicted(case, saver, tmp_path):
    m = BNB_CASES[case]()
    sd = m.state_dict()
    v = tv.save_check(m)[saver]
    assert v.outcome == "ok", v.message
    fmt, files = _really_save(saver, m, tmp_path)
    if fmt == "torch":
        (path,) = files
        assert v.written_nbytes == _payload(path) == tv.analyze(m).storage_nbytes
        loaded = torch.load(path, weights_only=False)
    else:
        from safetensors.torch import load_file

        loaded = {k: t for f in files for k, t in load_file(f).items()}
        assert v.written_nbytes == sum(t.numel() * t.element_size() for t in loaded.values())
    assert v.file_nbytes == sum(os.path.getsize(f) for f in files)
    assert sorted(loaded) == sorted(v.kept) == sorted(sd)
    for name, t in loaded.items():
        assert t.dtype == sd[name].dtype and torch.equal(
            t.view(-1).view(torch.uint8), sd[name].view(-1).view(torch.uint8)
        )


def test_params4bit_reloads_to_the_same_dequantized_weight(tmp_path):
    """The safetensors file holds everything the weight needs: bitsandbytes' own
    ``Params4bit.from_prequantized`` rebuilds each weight from the file's pieces, and its
    ``dequantize_4bit`` gives back the very same values."""
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
    from safetensors.torch import load_file

    m = _bnb4()
    v = tv.save_check(m)["safetensors.save_file"]
    _really_save("safetensors.save_file", m, tmp_path)
    loaded = load_file(tmp_path / "a.safetensors")
    assert sorted(loaded) == sorted(v.kept)
    for i, layer in enumerate(m):
        stats = {k[len(f"{i}.weight.") :]: t for k, t in loaded.items() if k.startswith(f"{i}.weight.")}
        back = bnb.nn.Params4bit.from_prequantized(loaded[f"{i}.weight"], stats, device="cpu")
        want = F.dequantize_4bit(layer.weight.data, layer.weight.quant_state)
        assert torch.equal(F.dequantize_4bit(back.data, back.quant_state), want)


# -- transformers save_pretrained of a torchao-quantized model -------------------------------------
def _quantized_llama(tmp_path, config, hidden: int = 32):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "fp")
    return LlamaForCausalLM.from_pretrained(tmp_path / "fp", quantization_config=config, device_map="cpu")


def test_save_pretrained_writes_torchaos_flattened_inner_tensors(tmp_path):
    """transformers asks its torchao quantizer for the state dict: torchao's
    flatten_tensor_state_dict, each inner tensor cloned as ``<module>._weight_<inner>`` and the
    subclass described in the metadata. Names, bytes and file size as predicted; from_pretrained
    of the folder gives back every inner tensor bit-exact."""
    from safetensors import safe_open
    from transformers import LlamaForCausalLM, TorchAoConfig

    m = _quantized_llama(tmp_path, TorchAoConfig(torchao_q.Int8WeightOnlyConfig()))
    v = tv.save_check(m)["transformers.save_pretrained"]
    assert v.outcome == "ok", v.message
    m.save_pretrained(tmp_path / "q")
    path = str(tmp_path / "q" / "model.safetensors")
    with safe_open(path, "pt") as f:
        names, meta = sorted(f.keys()), f.metadata()
        written = sum(f.get_tensor(k).nbytes for k in names)
    assert names == sorted(v.kept)
    assert "model.layers.0.mlp.up_proj._weight_qdata" in names and "model.layers.0.mlp.up_proj.weight" not in names
    assert v.dropped == ("lm_head.weight",)  # tied to the embedding, declared: from_pretrained re-ties it
    assert ("model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj._weight_scale") in v.renamed
    assert set(v.cloned) == {n for n in names if "._weight_" in n}
    assert (v.written_nbytes, v.file_nbytes) == (written, os.path.getsize(path))
    assert v.lost_nbytes == 0 and '"_type": "Int8Tensor"' in meta["model.layers.0.mlp.up_proj.weight"]
    back = LlamaForCausalLM.from_pretrained(tmp_path / "q", device_map="cpu")
    for name, t in m.state_dict().items():
        got, want = _inner(back.state_dict()[name]), _inner(t)
        assert list(got) == list(want) and all(torch.equal(got[p], want[p]) for p in want), name


def test_save_pretrained_of_a_bitsandbytes_model_writes_its_own_state_dict(tmp_path):
    """bitsandbytes' quantizer keeps the base answer (the model's own state dict): the packed
    weights and their quant-state pieces, under their own names, at the predicted size."""
    pytest.importorskip("bitsandbytes")
    from safetensors.torch import load_file
    from transformers import BitsAndBytesConfig, LlamaForCausalLM

    m = _quantized_llama(tmp_path, BitsAndBytesConfig(load_in_4bit=True), hidden=64)
    v = tv.save_check(m)["transformers.save_pretrained"]
    assert v.outcome == "ok", v.message
    m.save_pretrained(tmp_path / "q")
    path = str(tmp_path / "q" / "model.safetensors")
    loaded = load_file(path)
    assert sorted(loaded) == sorted(v.kept) and "model.layers.0.mlp.up_proj.weight.absmax" in loaded
    assert (v.written_nbytes, v.file_nbytes) == (sum(t.nbytes for t in loaded.values()), os.path.getsize(path))
    back = LlamaForCausalLM.from_pretrained(tmp_path / "q", device_map="cpu").state_dict()
    for name, t in m.state_dict().items():
        assert torch.equal(back[name].view(-1).view(torch.uint8), t.view(-1).view(torch.uint8)), name
