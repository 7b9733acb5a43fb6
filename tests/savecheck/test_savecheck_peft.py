"""PeftModel.save_pretrained: the adapter only, predicted, then really saved and reloaded."""

from __future__ import annotations

import os

import pytest
import torch

import tensorviz as tv
from tests.helpers import zoo

peft = pytest.importorskip("peft")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _lora(seed: int):
    model = peft.get_peft_model(zoo.build("llama", seed), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # LoRA's B starts at zero: give every adapter weight its own values
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.rand(p.shape, generator=gen))
    return model


def test_adapter_only_verdict_is_what_save_pretrained_writes(tmp_path):
    model = _lora(0)
    v = tv.save_check(model)["peft.save_pretrained"]
    assert v.outcome == "ok" and v.library.startswith("peft ") and v.dropped == () and v.lost_nbytes == 0
    lora = [n for n in model.state_dict() if "lora_" in n]
    assert sorted(old for old, _ in v.renamed) == sorted(lora)
    assert sorted(v.kept) == sorted(n.replace(".default", "") for n in lora)
    assert set(v.ignored) == set(model.state_dict()) - set(lora)
    model.save_pretrained(tmp_path)
    from safetensors.torch import load_file

    assert sorted(load_file(tmp_path / "adapter_model.safetensors")) == sorted(v.kept)
    assert os.path.getsize(tmp_path / "adapter_model.safetensors") == v.file_nbytes
    back = peft.PeftModel.from_pretrained(zoo.build("llama", 0), tmp_path)
    for name in lora:
        assert torch.equal(back.state_dict()[name], model.state_dict()[name]), name


def test_prompt_learning_adapter_could_not_be_evaluated_with_the_reason():
    config = peft.PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=2)
    model = peft.get_peft_model(zoo.build("gpt2"), config)
    v = tv.save_check(model)["peft.save_pretrained"]
    assert v.outcome == "could not evaluate"
    assert "adapter 'default' is prompt learning: peft saves embeddings computed from data" in v.message


def test_a_second_adapter_file_is_sized_without_its_folder_prefix(tmp_path):
    model = _lora(0)
    model.add_adapter("second", peft.LoraConfig(r=2, target_modules=["q_proj"]))
    v = tv.save_check(model)["peft.save_pretrained"]
    model.save_pretrained(tmp_path)
    files = [tmp_path / "adapter_model.safetensors", tmp_path / "second" / "adapter_model.safetensors"]
    assert v.outcome == "ok" and v.file_nbytes == sum(os.path.getsize(f) for f in files)
    from safetensors.torch import load_file

    second = load_file(files[1])
    assert second and not any(k.startswith("second/") for k in second)
    assert sorted("second/" + k for k in second) == sorted(k for k in v.kept if k.startswith("second/"))
