"""Model folders are read as ``from_pretrained`` reads them: one weight variant (issue 10, part 8),
and the explorer's "explain selected" on a safetensors file draws each tensor where it is."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import save_file

import tensorviz as tv
from tensorviz.core.errors import FileFormatError
from tensorviz.explorer.render import explain_png, sub_layout
from tensorviz.plan.explain import layout_plan
from tensorviz.sources.variants import variant_of

SD = {f"layers.{i}.weight": torch.zeros(4, 4) for i in range(3)}


def _sharded(folder, stem: str, index: str, sd: dict) -> None:
    """Two shards and their index, named as save_pretrained names them."""
    names = list(sd)
    shards = {f"{stem}-00001-of-00002.safetensors": names[:2], f"{stem}-00002-of-00002.safetensors": names[2:]}
    for shard, keys in shards.items():
        save_file({k: sd[k] for k in keys}, os.path.join(folder, shard))
    weight_map = {k: shard for shard, keys in shards.items() for k in keys}
    with open(os.path.join(folder, index), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


@pytest.fixture
def two_variants(tmp_path):
    save_file(SD, tmp_path / "model.safetensors")
    save_file({k: v.half() for k, v in SD.items()}, tmp_path / "model.fp16.safetensors")
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_the_default_variant_is_read_and_the_others_listed(two_variants):
    layout = tv.analyze(two_variants)
    assert layout.names == tuple(SD)
    assert {v.dtype for v in layout.views} == {"float32"}
    assert layout.skipped == () and "problems" not in layout.metadata
    assert layout.metadata["variant"] == "default"
    assert layout.metadata["variants"] == {"fp16": ["model.fp16.safetensors"]}
    assert [s.label for s in layout.storages] == ["model.safetensors"]
    text = layout.to_text()
    assert "also variant fp16: model.fp16.safetensors (variant='fp16' reads it)" in text
    assert "duplicated" not in text


def test_variant_picks_another(two_variants):
    layout = tv.analyze(two_variants, variant="fp16")
    assert layout.names == tuple(SD) and {v.dtype for v in layout.views} == {"float16"}
    assert layout.metadata["variant"] == "fp16"
    assert layout.metadata["variants"] == {"default": ["model.safetensors"]}
    assert tv.analyze(two_variants, variant="default").metadata["variant"] == "default"


def test_a_variant_that_is_not_there_says_which_are(two_variants):
    with pytest.raises(FileFormatError, match=r"no weights of variant 'bf16'; the folder holds: default, fp16"):
        tv.analyze(two_variants, variant="bf16")


def test_variant_needs_a_folder(two_variants):
    with pytest.raises(ValueError, match="variant= picks weights in a model folder"):
        tv.analyze(two_variants / "model.safetensors", variant="fp16")
    with pytest.raises(TypeError, match="variant= picks weights in a model folder; got a dict"):
        tv.analyze(SD, variant="fp16")


def test_sharded_variants_with_their_indexes(tmp_path):
    _sharded(tmp_path, "model", "model.safetensors.index.json", SD)
    _sharded(tmp_path, "model.fp16", "model.safetensors.index.fp16.json", {k: v.half() for k, v in SD.items()})
    layout = tv.analyze(tmp_path)
    assert layout.names == tuple(SD) and len(layout.storages) == 2
    assert [s.label for s in layout.storages] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert "problems" not in layout.metadata
    assert layout.metadata["variants"] == {
        "fp16": [
            "model.fp16-00001-of-00002.safetensors",
            "model.fp16-00002-of-00002.safetensors",
            "model.safetensors.index.fp16.json",
        ]
    }
    fp16 = tv.analyze(tmp_path, variant="fp16")
    assert {v.dtype for v in fp16.views} == {"float16"} and "problems" not in fp16.metadata
    assert [s.label for s in fp16.storages] == [
        "model.fp16-00001-of-00002.safetensors",
        "model.fp16-00002-of-00002.safetensors",
    ]


def test_variants_without_a_default_need_a_choice(tmp_path):
    save_file(SD, tmp_path / "model.fp32.safetensors")
    save_file({k: v.half() for k, v in SD.items()}, tmp_path / "model.fp16.safetensors")
    with pytest.raises(FileFormatError, match=r"variants fp16, fp32 and no default one; pass variant="):
        tv.analyze(tmp_path)
    assert {v.dtype for v in tv.analyze(tmp_path, variant="fp32").views} == {"float32"}


def test_one_variant_alone_is_read_as_it_is(tmp_path):
    save_file(SD, tmp_path / "diffusion_pytorch_model.fp16.safetensors")
    layout = tv.analyze(tmp_path)
    assert layout.names == tuple(SD) and "variant" not in layout.metadata


def test_torch_variants_and_numbered_parts(tmp_path):
    torch.save(SD, tmp_path / "pytorch_model.bin")
    torch.save({k: v.half() for k, v in SD.items()}, tmp_path / "pytorch_model.fp16.bin")
    layout = tv.analyze(tmp_path)
    assert {v.dtype for v in layout.views} == {"float32"}
    assert layout.metadata["variants"] == {"fp16": ["pytorch_model.fp16.bin"]}
    parts = tmp_path / "parts"
    parts.mkdir()
    torch.save({"a": torch.zeros(2)}, parts / "consolidated.00.pth")  # numbered parts, not variants
    torch.save({"b": torch.zeros(2)}, parts / "consolidated.01.pth")
    assert tv.analyze(parts).names == ("a", "b")


def test_cli_variant(two_variants, capsys):
    from tensorviz.cli import main

    assert main([str(two_variants), "--variant", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "float16[4×4]" in out and "also variant default: model.safetensors" in out
    assert main([str(two_variants / "model.safetensors"), "--variant", "fp16"]) == 1
    assert "variant= picks weights in a model folder" in capsys.readouterr().err


def test_variant_names():
    assert [variant_of(n) for n in ("model.safetensors.index.bf16.json", "adapter_model.safetensors")] == ["bf16", None]


# -- the explorer's "explain selected" on a safetensors file ---------------------------------------
def test_explain_selected_on_a_safetensors_file_draws_tensors_in_place(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"a": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(4, dtype=torch.float16)}, path)
    layout = tv.analyze(path)
    a, b = layout["a"], layout["b"]
    (strip,) = layout_plan(sub_layout(layout, ("a", "b"))).strips
    assert strip.cell_bytes == 2  # float16 and float32 share 2-byte cells
    va, vb = strip.views
    assert va.addresses.reshape(-1).tolist() == list(range(a.start // 2, a.stop // 2, 2))
    assert vb.addresses.reshape(-1).tolist() == list(range(b.start // 2, b.stop // 2))
    assert va.formula == f"addr = {a.start // 4} + 3·i + 1·j"
    ex = tv.explore(path)
    for names in (("a",), ("b",), ("a", "b")):
        ex.tensor_list.value = names
        ex._on_explain()
        assert ex.explain_message.value.startswith('<span class="tvz-muted">How each element of')
        assert ex.explain_picture.value[:4] == b"\x89PNG"
    message, png = explain_png(layout, ("a", "b"))
    assert png is not None and "a, b" in message
