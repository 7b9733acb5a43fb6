"""The model zoo, predicted vs real: ``tv.save_check`` against real saves and reloads.

For every zoo model (tests/helpers/zoo.py: 30 tiny transformers architectures, 4 timm/torchvision-style and 4 construct
modules, 5 diffusers models) and every saver the report has, the test really saves with that library, loads back
the way the library documents (``load_file`` + ``load_state_dict``, ``load_model``,
``torch.load``, ``from_pretrained``) into a fresh model, and asserts that the prediction is what
happened: raises or not (type and message), the exact names written, the file size, and the
bytes lost -- counted by a brute-force oracle over the byte addresses each original name reads,
against the names whose values came back bit-exact.
"""

from __future__ import annotations

import collections
import os
import warnings
from typing import Any

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.savecheck.outcomes import SAVERS
from tests.helpers import zoo

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
    pytest.mark.slow,
]

_MODELS: dict[str, Any] = {}
_REPORTS: dict[str, Any] = {}


def _model(name: str):
    if name not in _MODELS:
        _MODELS[name] = zoo.build(name)
    return _MODELS[name]


def _report(name: str):
    if name not in _REPORTS:
        _REPORTS[name] = tv.save_check(_model(name))
    return _REPORTS[name]


def _cells() -> list[tuple[str, str]]:
    hf = set(zoo.ARCHITECTURES) | set(zoo.PRETRAINED)
    savers = [s for s in SAVERS if s != "peft.save_pretrained"]  # PeftModels: tests/savecheck/test_savecheck_peft.py
    return [(m, s) for m in zoo.ZOO for s in savers if s != "transformers.save_pretrained" or m in hf]


# -- really saving, and loading back into a fresh model ----------------------------------------------
def _files(folder) -> list[str]:
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors"))


def _save(saver: str, model, tmp) -> list[str]:
    from safetensors.torch import save_file, save_model

    if saver == "safetensors.save_file":
        save_file(model.state_dict(), tmp / "a.safetensors")
        return [str(tmp / "a.safetensors")]
    if saver == "safetensors.save_model":
        save_model(model, tmp / "b.safetensors")
        return [str(tmp / "b.safetensors")]
    if saver == "torch.save":
        torch.save(model.state_dict(), tmp / "archive.pt")
        return [str(tmp / "archive.pt")]
    if saver == "accelerate.save":
        from accelerate.utils import save

        save(model.state_dict(), tmp / "d.safetensors", safe_serialization=True)
        return [str(tmp / "d.safetensors")]
    if saver == "Accelerator.save_model":
        from accelerate import Accelerator

        Accelerator(cpu=True).save_model(model, tmp / "acc")
        return _files(tmp / "acc")
    model.save_pretrained(tmp / "hf")
    return _files(tmp / "hf")


def _names_in(saver: str, files: list[str]) -> list[str]:
    if saver == "torch.save":
        return list(torch.load(files[0], weights_only=True))
    from safetensors import safe_open

    names = []
    for f in files:
        with safe_open(f, "pt") as fh:
            names += list(fh.keys())
    return names


def _reload(name: str, saver: str, files: list[str], tmp) -> dict[str, torch.Tensor]:
    """The state dict a user gets back, loaded into a fresh model (other weights than the saved)."""
    if saver == "transformers.save_pretrained":
        model = type(_model(name)).from_pretrained(tmp / "hf")
        return model.state_dict()
    fresh = zoo.build(name, seed=1)
    if saver == "safetensors.save_model":
        from safetensors.torch import load_model

        load_model(fresh, files[0])
    elif saver == "torch.save":
        fresh.load_state_dict(torch.load(files[0], weights_only=True), strict=False)
    else:
        from safetensors.torch import load_file

        loaded = {}
        for f in files:
            loaded.update(load_file(f))
        fresh.load_state_dict(loaded, strict=False)
    return fresh.state_dict()


# -- the oracle: bytes lost, from byte addresses ------------------------------------------------------
def _addresses(t: torch.Tensor) -> np.ndarray:
    """Absolute byte addresses ``t`` reads (brute force, every byte listed)."""
    itemsize = t.element_size()
    index = torch.arange(t.untyped_storage().nbytes() // itemsize + 1, dtype=torch.int64)
    elems = index.as_strided(t.shape, t.stride(), t.storage_offset()).reshape(-1).numpy()
    base = t.untyped_storage().data_ptr()
    return (base + elems[:, None] * itemsize + np.arange(itemsize)[None, :]).reshape(-1)


def _lost_nbytes(original: dict[str, torch.Tensor], back: dict[str, torch.Tensor]) -> int:
    every, restored = set(), set()
    for n, t in original.items():
        addr = set(_addresses(t).tolist())
        every |= addr
        same = n in back and back[n].dtype == t.dtype and back[n].shape == t.shape
        if same and torch.equal(  # values (a conjugate view's resolved), bit for bit
            back[n].resolve_conj().contiguous().view(-1).view(torch.uint8),
            t.resolve_conj().contiguous().view(-1).view(torch.uint8),
        ):
            restored |= addr
    return len(every - restored)


@pytest.mark.parametrize("name,saver", _cells())
def test_prediction_is_reality(name, saver, tmp_path):
    model = _model(name)
    v = _report(name)[saver]
    assert v.outcome != "could not evaluate", v.message
    if v.error_type:
        with pytest.raises(Exception) as info:
            _save(saver, model, tmp_path)
        assert (type(info.value).__name__, str(info.value)) == (v.error_type, v.message)
        return
    with warnings.catch_warnings():  # test-only: the libraries' own chatter
        warnings.simplefilter("ignore")
        files = _save(saver, model, tmp_path)
        assert sorted(_names_in(saver, files)) == sorted(v.kept)
        assert sum(os.path.getsize(f) for f in files) == v.file_nbytes
        original = model.state_dict()
        back = _reload(name, saver, files, tmp_path)
    assert _lost_nbytes(original, back) == v.lost_nbytes


@pytest.mark.parametrize(
    "name,renamed",
    [
        ("gpt_neox", [("lm_head.weight", "embed_out.weight")]),
        ("vit", [("vit.layers.0.attention.q_proj.weight", "vit.encoder.layer.0.attention.attention.query.weight")]),
        ("mixtral", [("model.layers.0.mlp.gate.weight", "model.layers.0.block_sparse_moe.gate.weight")]),
    ],
)
def test_renames_are_reported_as_renames(name, renamed):
    v = _report(name)["transformers.save_pretrained"]
    assert v.outcome == "ok" and v.dropped == () and v.lost_nbytes == 0
    assert set(renamed) <= set(v.renamed)
    assert "renamed: " in _report(name).to_text() and "renamed to:" in _report(name).to_html()


def test_moe_experts_split_back_into_one_tensor_each():
    v = _report("mixtral")["transformers.save_pretrained"]
    split = sorted(new for old, new in v.renamed if old == "model.layers.0.mlp.experts.gate_up_proj")
    assert split == [f"model.layers.0.block_sparse_moe.experts.{e}.{w}.weight" for e in (0, 1) for w in ("w1", "w3")]


def test_marian_keys_ignored_on_save_are_not_lost():
    model = _model("marian")
    v = _report("marian")["transformers.save_pretrained"]
    assert v.ignored == tuple(k for k in model._keys_to_ignore_on_save if k in model.state_dict())
    assert v.ignored and v.outcome == "ok" and v.lost_nbytes == 0 and not set(v.ignored) & set(v.dropped)
    assert any("_keys_to_ignore_on_save" in n for n in v.notes)
    assert "ignored on save by the model's own rule: model." in _report("marian").to_text()


def test_zoo_covers_the_kinds_the_issue_asks_for():
    kinds = collections.Counter()
    for name in zoo.ARCHITECTURES:
        cfg = _model(name).config
        kinds["encoder-decoder" if cfg.is_encoder_decoder else "other"] += 1
        kinds["tied" if getattr(cfg, "tie_word_embeddings", False) else "untied"] += 1
    assert len(zoo.ARCHITECTURES) >= 25 and len(zoo.MODULES) >= 3
    assert kinds["encoder-decoder"] >= 3 and kinds["tied"] >= 5 and kinds["untied"] >= 5
    assert {"mixtral", "qwen2_moe", "vit", "convnext", "whisper", "wav2vec2"} <= set(zoo.ARCHITECTURES)
    assert len(_cells()) >= 150
    assert len(zoo.DIFFUSERS) >= 5 and all(type(_model(n)).__module__.startswith("diffusers.") for n in zoo.DIFFUSERS)
