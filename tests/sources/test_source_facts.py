"""Typed source facts (issue 20, item 2): the GGUF, ONNX, remote, packed-weight and training readers
hand the Layout frozen records (``layout.facts.gguf``, ``.quantization``, ``.training``...), and
``layout.metadata`` shows each as the same plain dict as before the records existed."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import tensorviz as tv
from tensorviz.core.facts import GgufFacts, OptimizerMapping, QuantizationFacts, RemoteFacts, TrainingFacts
from tensorviz.core.records import SourceFacts
from tests.helpers.formats_files import write_gguf


def _frozen(record) -> None:
    field = dataclasses.fields(record)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, None)


def test_gguf_facts_are_a_record_and_the_metadata_dict_is_unchanged(tmp_path):
    path = str(tmp_path / "m.gguf")
    emb = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    write_gguf(path, [("token_embd.weight", emb, None)], alignment=64, context=128, vocab=5)
    layout = tv.analyze(path)
    g = layout.facts.gguf
    assert isinstance(g, GgufFacts)
    _frozen(g)
    assert (g.architecture, g.context_length, g.vocabulary, g.alignment, g.tokenizer) == ("llama", 128, 5, 64, "llama")
    assert layout.metadata["gguf"] == {
        "architecture": "llama", "context_length": 128, "tokenizer": "llama", "vocabulary": 5,
        "version": 3, "alignment": 64, "keys": g.keys,
    }  # fmt: skip
    assert list(layout.metadata["gguf"]) == [
        "architecture",
        "context_length",
        "tokenizer",
        "vocabulary",
        "version",
        "alignment",
        "keys",
    ]
    assert layout.facts.tied == layout.metadata["tied"] and "tied embeddings" in layout.facts.tied
    assert layout.facts.unreferenced == layout.metadata["unreferenced"]
    assert layout.facts.unreferenced["header bytes"] == layout.facts.header[path][1]
    json.dumps(layout.metadata)  # the dict view stays JSON


def test_quantization_facts_from_a_gptq_folder(tmp_path):
    t = {
        "l.qweight": torch.zeros(16, 64, dtype=torch.int32),
        "l.scales": torch.zeros(2, 64, dtype=torch.float16),
        "l.qzeros": torch.zeros(2, 8, dtype=torch.int32),
        "l.g_idx": torch.zeros(128, dtype=torch.int32),
    }
    save_file(t, str(tmp_path / "model.safetensors"))
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False, "sym": True}
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "float16", "quantization_config": qc}))
    layout = tv.analyze(str(tmp_path))
    q = layout.facts.quantization
    assert q == QuantizationFacts(
        ("GPTQ",), 1, "config.json quantization_config", bits=4, group_size=64, desc_act=False, sym=True
    )
    assert layout.metadata["quantization"] == {
        "formats": ["GPTQ"], "weights": 1, "from": "config.json quantization_config",
        "bits": 4, "group_size": 64, "desc_act": False, "sym": True,
    }  # fmt: skip


def test_live_and_saved_training_facts(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    live = tv.analyze(model, optimizer=opt)
    assert live.facts.training == TrainingFacts(optimizer="Adam", wrapper="", notes=())
    assert live.metadata["training"] == {"optimizer": "Adam", "wrapper": "", "notes": ()}
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    saved = tv.analyze(str(path))
    mapping = saved.facts.training.optimizers["optimizer"]
    assert mapping == OptimizerMapping("model order", "", "model") or mapping.mapped_by == "param_names"
    assert saved.metadata["training"]["optimizers"]["optimizer"] == dataclasses.asdict(mapping)


def test_facts_of_the_dict_view_are_the_records():
    """A Layout made from another's ``metadata`` (dicts) gets the same typed facts."""
    remote = RemoteFacts("hf://org/m", "abc", ("model.safetensors",), 2, 4096)
    training = TrainingFacts(notes=("n",), optimizers={"optim": OptimizerMapping("param_names")})
    facts = SourceFacts.of({"remote": remote.as_dict(), "training": training.as_dict()})
    assert facts.remote == remote and facts.training == training
    assert SourceFacts.of({"remote": remote}).remote is remote
    assert SourceFacts.of({"training": "not facts"}).other == {"training": "not facts"}
    assert training.merged(TrainingFacts(optimizers={})) == TrainingFacts(notes=("n",), optimizers={})


def _sources(tmp_path) -> dict[str, object]:
    w = torch.arange(12.0).reshape(3, 4)
    save_file({"w": w, "b": torch.zeros(4)}, str(tmp_path / "one.safetensors"))
    folder = tmp_path / "folder"
    folder.mkdir()
    save_file({"w": w}, str(folder / "model.safetensors"))
    save_file({"w": w.half()}, str(folder / "model.fp16.safetensors"))
    torch.save({"w": w}, folder / "pytorch_model.bin")
    torch.save({"model": {"w": w, "v": w[1]}, "step": 3, "note": "x"}, tmp_path / "ckpt.pt")
    np.savez(tmp_path / "arrays.npz", a=np.zeros(3, dtype=np.float32))
    import torch.distributed.checkpoint as dcp

    dcp.save({"w": w, "step": 4}, checkpoint_id=str(tmp_path / "dcp"))
    return {
        "safetensors": tmp_path / "one.safetensors",
        "folder": folder,
        "checkpoint": tmp_path / "ckpt.pt",
        "npz": tmp_path / "arrays.npz",
        "dcp": tmp_path / "dcp",
        "module": torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)),
    }


def test_every_fact_of_these_sources_is_a_typed_field(tmp_path):
    """No source's fact is left in ``facts.other`` (the untyped rest): each has a field, and
    the field holds what ``layout.metadata`` shows under its key."""
    for kind, source in _sources(tmp_path).items():
        layout = tv.analyze(source)
        facts = layout.facts
        assert facts.other == {}, (kind, sorted(facts.other))
        for key, value in layout.metadata.items():
            name = "file_metadata" if key == "__metadata__" else key
            got = getattr(facts, name)
            got = got.as_dict() if hasattr(got, "as_dict") else got
            assert json.loads(json.dumps(got, default=list)) == json.loads(json.dumps(value, default=list)), (kind, key)


def test_folder_and_checkpoint_facts_read_typed(tmp_path):
    s = _sources(tmp_path)
    folder = tv.analyze(s["folder"]).facts
    assert (folder.variant, list(folder.ignored_files)) == ("default", ["pytorch_model.bin"])
    ckpt = tv.analyze(s["checkpoint"])
    assert dict(ckpt.facts.contents) == {"model": "2 tensors", "step": "3", "note": "'x'"}
    (ident,) = ckpt.facts.record_offsets  # one storage: v is a row of w
    data = (s["checkpoint"]).read_bytes()
    at = ckpt.facts.record_offsets[ident]
    assert data[at : at + 48] == torch.arange(12.0).numpy().tobytes()
