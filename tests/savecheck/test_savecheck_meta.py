"""A meta model is checked as if materialised: one note at the top, then the verdicts a real
model with the same storage sharing gets -- checked against the same model built on CPU (whose
verdicts the zoo checks against real saves) and against real saves of the materialised model."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file, save_model

import tensorviz as tv
from tensorviz.savecheck.materialise import META_NOTE

transformers = pytest.importorskip("transformers")

FIELDS = ("outcome", "error_type", "kept", "dropped", "renamed", "ignored", "cloned", "written_nbytes", "lost_nbytes")


def _gpt2(device: str):
    cfg = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16, bos_token_id=0, eos_token_id=0
    )
    with torch.device(device):
        return transformers.GPT2LMHeadModel(cfg)


def test_meta_model_gets_one_note_and_the_verdicts_of_the_same_model_on_cpu():
    meta, cpu = tv.save_check(_gpt2("meta")), tv.save_check(_gpt2("cpu"))
    assert meta.notes[0] == META_NOTE and META_NOTE not in cpu.notes
    assert [v.saver for v in meta] == [v.saver for v in cpu]
    for m, c in zip(meta, cpu):
        assert {f: getattr(m, f) for f in FIELDS} == {f: getattr(c, f) for f in FIELDS}, m.saver
        assert "Cannot copy out of meta tensor" not in m.message
    assert meta.unique_nbytes == cpu.unique_nbytes == 116736
    assert meta["safetensors.save_file"].outcome == "raises"
    assert meta["safetensors.save_model"].dropped == ("transformer.wte.weight",)
    assert "meta tensors" in meta.to_text().splitlines()[1]


def test_meta_verdicts_match_real_saves_of_the_materialised_model(tmp_path):
    model = _gpt2("meta")
    report = tv.save_check(model)
    model.to_empty(device="cpu")
    assert model.lm_head.weight is not model.transformer.wte.weight  # torch 2.13: to_empty unties...
    model.tie_weights()  # ...and the model's own rule ties again: the sharing the check assumed
    assert model.lm_head.weight is model.transformer.wte.weight
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        save_file(model.state_dict(), tmp_path / "a.safetensors")
    assert report["safetensors.save_file"].error_type == "RuntimeError"
    save_model(model, tmp_path / "b.safetensors")
    written = set(load_file(tmp_path / "b.safetensors"))
    assert written == set(report["safetensors.save_model"].kept)
    assert set(model.state_dict()) - written == set(report["safetensors.save_model"].dropped)
    assert (tmp_path / "b.safetensors").stat().st_size == report["safetensors.save_model"].file_nbytes


def test_a_meta_state_dict_with_a_slice_keeps_its_sharing_as_if_materialised():
    with torch.device("meta"):
        w = torch.empty(8, 4)
    sd = {"w": w, "half": w[:4]}
    report = tv.save_check(sd)
    v = report["safetensors.save_file"]
    assert report.notes[0] == META_NOTE
    assert v.outcome == "raises" and v.error_type == "RuntimeError"  # shared memory, as on CPU
    real = tv.save_check({"w": (c := torch.zeros(8, 4)), "half": c[:4]})["safetensors.save_file"]
    assert (v.outcome, v.error_type, v.message) == (real.outcome, real.error_type, real.message)
