"""Verdicts that follow what the libraries really do (issue 22): each predicted, then the real call."""

from __future__ import annotations

import warnings

import pytest
import torch

import tensorviz as tv


def _verdict(report, saver):
    return next(v for v in report.verdicts if v.saver == saver)


def _ao_model() -> torch.nn.Module:
    with warnings.catch_warnings():  # torch.ao's deprecation notice
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(torch.nn.Linear(4, 4)), {torch.nn.Linear}, dtype=torch.qint8
        )


def _real(saver: str, m: torch.nn.Module, tmp) -> None:
    if saver == "safetensors.save_model":
        from safetensors.torch import save_model

        save_model(m, str(tmp / "a.safetensors"))
    elif saver == "accelerate.save":
        from accelerate.utils import save

        save(m.state_dict(), tmp / "b.safetensors", safe_serialization=True)
    else:
        from accelerate import Accelerator

        Accelerator(cpu=True).save_model(m, tmp / "c")


@pytest.mark.parametrize("saver", ["safetensors.save_model", "accelerate.save", "Accelerator.save_model"])
def test_torch_ao_quantized_model_raises_with_the_librarys_message(saver, tmp_path):
    m = _ao_model()
    v = _verdict(tv.save_check(m), saver)
    with pytest.raises(AttributeError) as real:
        _real(saver, m, tmp_path)
    assert (v.outcome, v.error_type, v.message) == ("raises", "AttributeError", str(real.value))
    assert "'torch.dtype' object has no attribute" in v.message


def test_a_replay_broken_on_a_stand_in_is_still_could_not_evaluate():
    from tensorviz.savecheck.savers.common import Unavailable, _guard

    with pytest.raises(Unavailable):
        _guard(AttributeError("'StandIn' object has no attribute 'fancy'"))
    _guard(AttributeError("'tuple' object has no attribute 'device'"))  # the user's value: the library's error


def _quantized():
    return {"q": torch.quantize_per_tensor(torch.randn(4, 6), 0.1, 0, torch.qint8), "p": torch.zeros(2)}


def _two_tensor():
    from torch.testing._internal.two_tensor import TwoTensor

    return {"t": TwoTensor(torch.randn(3, 3), torch.randn(3, 3))}


def _torchao():
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    m = torch.nn.Sequential(torch.nn.Linear(16, 16))
    quantize_(m, Int8WeightOnlyConfig())
    return m.state_dict()


@pytest.mark.parametrize("make", [_quantized, _two_tensor, _torchao])
def test_torch_save_of_subclass_and_quantized_tensors_never_undercounts(make, tmp_path):
    """A torch quantized tensor is not laid out: its bytes are unknown, said so. A traceable
    subclass is laid out by its inner tensors: torch.save writes exactly their storages."""
    import zipfile

    sd = make()
    v = _verdict(tv.save_check(sd), "torch.save")
    torch.save(sd, tmp_path / "archive.pt")
    back = torch.load(tmp_path / "archive.pt", weights_only=False)
    assert set(back) == set(sd)
    assert v.outcome == "ok"
    if make is _quantized:
        assert v.written_nbytes is None and any("bytes written unknown" in n for n in v.notes)
        return
    with zipfile.ZipFile(tmp_path / "archive.pt") as zf:
        payload = sum(i.file_size for i in zf.infolist() if "/data/" in i.filename and "/.data/" not in i.filename)
    assert v.written_nbytes == payload == tv.analyze(sd).storage_nbytes


def test_torch_compile_of_a_pretrained_model_gets_a_save_pretrained_verdict(tmp_path):
    from safetensors.torch import load_file
    from transformers import GPT2Config, GPT2LMHeadModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = GPT2LMHeadModel(GPT2Config(vocab_size=16, n_positions=8, n_embd=8, n_layer=1, n_head=2))
        compiled = torch.compile(m)
        v = tv.save_check(compiled)["transformers.save_pretrained"]
        compiled.save_pretrained(tmp_path)
        back = GPT2LMHeadModel.from_pretrained(tmp_path)
    written = load_file(tmp_path / "model.safetensors")
    assert v.outcome == "ok" and sorted(v.kept) == sorted(written)  # no _orig_mod. prefix
    assert v.file_nbytes == (tmp_path / "model.safetensors").stat().st_size
    assert v.dropped == ("_orig_mod.lm_head.weight",) and v.lost_nbytes == 0  # tied: rebuilt on load
    assert ("_orig_mod.transformer.wte.weight", "transformer.wte.weight") in v.renamed
    assert all(torch.equal(back.state_dict()[k], t) for k, t in m.state_dict().items())


def _ignoring_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    class Ignoring(GPT2LMHeadModel):
        _keys_to_ignore_on_save = ["transformer.ln_f.weight", "calibration"]

        def __init__(self, config):
            super().__init__(config)
            self.register_buffer("calibration", torch.ones(5))  # persistent; __init__ makes ones

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = Ignoring(GPT2Config(vocab_size=16, n_positions=8, n_embd=15, n_layer=1, n_head=3))
    with torch.no_grad():  # "trained": neither is what from_pretrained would make
        m.transformer.ln_f.weight.fill_(0.5)
        m.calibration.fill_(2.0)
    return m


def test_keys_ignored_on_save_are_lost_unless_init_weights_rebuilds_them(tmp_path):
    m = _ignoring_gpt2()
    v = tv.save_check(m)["transformers.save_pretrained"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.save_pretrained(tmp_path)
        back = type(m).from_pretrained(tmp_path).state_dict()
    original = m.state_dict()
    lost = {k: t.nbytes for k, t in original.items() if not torch.equal(back[k], t)}
    assert lost == {"transformer.ln_f.weight": 60, "calibration": 20}
    assert v.outcome == "drops data" and v.lost_nbytes == sum(lost.values())
    assert set(lost) <= set(v.dropped) and v.ignored == ()
    notes = " ".join(v.notes)
    assert (
        "transformer.ln_f.weight: listed in _keys_to_ignore_on_save, and its _init_weights re-initialises it" in notes
    )
    assert (
        "calibration: listed in _keys_to_ignore_on_save, and its _init_weights leaves it as __init__ made it" in notes
    )
