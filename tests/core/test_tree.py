"""The module tree: per-prefix totals against hand-computed numbers (tied, shared slices,
partial overlaps, files, sharded checkpoints, buffers, skipped values) and the compact summary
that ``print(layout)`` writes for a large model."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

import tensorviz as tv
from tensorviz.core.text import layout_text
from tensorviz.core.tree import model_tree
from tests.helpers.models import FusedQKV, TiedLM, llama_70b_on_meta


def totals(tree, path):
    n = tree.find(path)
    return n.nbytes, n.shared_nbytes, n.numel, n.ntensors


def test_tied_weight_is_counted_once_under_the_first_name():
    layout = tv.analyze(TiedLM(vocab=50, dim=16))
    tree = layout.tree()
    emb, ln = 50 * 16 * 4, 2 * 16 * 4
    assert tree.root.nbytes == tree.total_nbytes == layout.unique_nbytes == emb + ln
    assert totals(tree, "wte") == (emb, 0, 800, 1)
    assert totals(tree, "lm_head") == (0, emb, 0, 1)
    assert totals(tree, "ln") == (ln, 0, 32, 2)
    head = tree.find("lm_head.weight")
    assert head.counted_in == ("identical", "wte.weight") and head.tied and head.partners == ("wte.weight",)
    assert tree.find("wte.weight").partners == ("lm_head.weight",) and not tree.find("wte.weight").tied
    assert [c.path for c in tree.root.children] == ["wte", "ln", "lm_head"]  # largest first
    assert tree.root.kind == "TiedLM" and tree.find("wte").kind == "Embedding"
    assert tree.find("wte.weight").kind == "parameter" and tree.root.nparams == 4
    assert tree.find("wte").fraction == pytest.approx(emb / (emb + ln))


def test_shared_slices_and_partial_overlap():
    x = torch.zeros(10, 4)  # 160 bytes
    y = torch.zeros(10)  # 40 bytes
    layout = tv.analyze({"a.w": x, "b.rows": x[2:6], "b.tail": x[8:], "c.p": y[:6], "d.q": y[4:]})
    tree = model_tree(layout)
    assert totals(tree, "a") == (160, 0, 40, 1)
    assert totals(tree, "b") == (0, 16 * 4 + 8 * 4, 0, 2)  # both slices are inside a.w
    assert tree.find("b.rows").counted_in == ("within", "a.w")
    # y[4:] overlaps y[:6] on elements 4 and 5: its 16 other bytes are its own.
    assert totals(tree, "c") == (24, 0, 6, 1)
    assert totals(tree, "d") == (16, 8, 4, 1)
    assert tree.find("d.q").counted_in == ("overlaps", "c.p")
    assert tree.root.nbytes == layout.unique_nbytes == 200
    assert tree.root.shared_nbytes == 0  # inside the whole model nothing is counted elsewhere


def test_fused_qkv_slices_are_shared_only_outside_the_fused_module():
    tree = tv.analyze(FusedQKV()).tree()
    assert totals(tree, "qkv") == (30 * 20 * 4 + 30 * 4, 0, 630, 2)
    assert totals(tree, "q") == (40, 800, 10, 2)
    assert tree.find("qkv.weight").partners == ("q.weight", "v.weight")
    assert tree.find("q.weight").partners == ("qkv.weight",)  # q and v rows do not intersect


def test_buffers_not_saved_buffers_and_classes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.register_buffer("scratch", torch.zeros(5), persistent=False)

    tree = tv.analyze(Net()).tree()
    assert (tree.root.nparams, tree.root.nbuffers) == (2, 4)
    assert tree.find("bn.num_batches_tracked").kind == "buffer"
    assert tree.find("scratch").kind == "buffer (not saved)"
    assert tree.find("bn").dtypes == ("float32", "int64") and tree.root.devices == ("cpu",)
    assert tree.root.nbytes == 4 * 3 * 4 + 8 + 5 * 4


def test_state_dict_has_no_module_facts_and_skipped_values_are_counted():
    tree = tv.analyze({"enc.w": torch.zeros(2, 2), "enc.step": 3, "dec.w": torch.zeros(3)}).tree()
    assert not tree.has_modules and tree.find("enc.w").kind == "tensor"
    enc = tree.find("enc")
    assert (enc.ntensors, enc.nskipped, enc.nbytes) == (1, 1, 16)
    assert tree.find("enc.step").kind == "skipped" and "not a tensor" in tree.find("enc.step").reason
    with pytest.raises(KeyError, match="'nope' is not under 'enc'"):
        tree.find("enc.nope")


def test_safetensors_file_tree(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"enc.w": torch.zeros(4, 4), "enc.b": torch.zeros(4, dtype=torch.float16), "dec.w": torch.zeros(2)}, path)
    layout = tv.analyze(path)
    tree = layout.tree()
    assert totals(tree, "enc") == (64 + 8, 0, 20, 2)
    assert totals(tree, "dec") == (8, 0, 2, 1)
    assert tree.find("enc").dtypes == ("float16", "float32") and tree.root.files == ("model.safetensors",)
    assert tree.root.nbytes == 80 and tree.storage_nbytes == path.stat().st_size  # file size with header


def test_sharded_checkpoint_tree_names_each_tensors_shard(tmp_path):
    shards = {
        "m-1.safetensors": {"embed.weight": torch.zeros(10, 4), "ln.bias": torch.zeros(4)},
        "m-2.safetensors": {"head.weight": torch.zeros(10, 4), "ln.weight": torch.zeros(4)},
    }
    for name, tensors in shards.items():
        save_file(tensors, tmp_path / name)
    weight_map = {n: shard for shard, ts in shards.items() for n in ts}
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 352}, "weight_map": weight_map}))
    tree = tv.analyze(index).tree()
    assert tree.find("ln").files == ("m-1.safetensors", "m-2.safetensors")
    assert tree.find("head.weight").files == ("m-2.safetensors",)
    assert totals(tree, "ln") == (32, 0, 8, 2) and tree.root.nbytes == 352


def test_torch_checkpoint_records_are_attributed_to_the_file(tmp_path):
    x = torch.zeros(4, 4)
    torch.save({"a.w": x, "b.row": x[1]}, tmp_path / "ck.pt")
    tree = tv.analyze(tmp_path / "ck.pt").tree()
    assert tree.root.files == ("ck.pt",)
    assert totals(tree, "b") == (0, 16, 0, 1) and tree.find("b.row").counted_in == ("within", "a.w")


def test_tree_text_marks_ties_and_collapses_alike_layers():
    layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])
    text = tv.analyze(layers).tree().to_text()
    assert "0 … 5  6 × Linear" in text and "(80 B each; one shown)" in text
    assert text.count("weight") == 1  # one layer stands for the six
    tied = tv.analyze(TiedLM()).tree().to_text()
    assert "↔ shared with lm_head.weight" in tied and "↔ tied to wte.weight (counted there)" in tied


def test_print_of_a_70b_model_fits_a_screen():
    layout = tv.analyze(llama_70b_on_meta())
    text = str(layout)
    lines = text.splitlines()
    assert len(lines) <= 60
    params = 128256 * 8192 * 2 + 8192 + 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192)
    assert layout.tree().root.numel == params + 2 * 64  # plus the two rotary buffers
    assert lines[2] == "723 parameters, 2 buffers · 70.6B elements (counted once) · bfloat16 · meta"
    assert "0 … 79  80 × LlamaDecoderLayer" in text and lines[-1].startswith("full listing: layout.to_text(full=True)")
    full = layout.to_text(full=True)
    assert len(full.splitlines()) > 725 and "lm_head.weight" in full


def test_small_layouts_print_in_full_and_full_true_lists_every_view():
    x = torch.zeros(20)
    layout = tv.analyze({f"v{i}": x[i:] for i in range(15)})
    assert str(layout) == layout_text(layout, max_views=12)  # it fits: listed as before
    assert "  … 3 more" in str(layout) and "- v14 " not in str(layout)  # 12 views a storage
    assert "- v14 " in layout.to_text(full=True)
    summary = layout.to_text(full=False)
    assert "names whose bytes are counted under another name: 14" in summary
    assert "  v1 inside v0\n" in summary and "  … 10 more" in summary


def test_tree_html_is_escaped_collapsible_and_scriptless():
    hostile = {"<img src=x onerror=alert(1)>.w": torch.zeros(3), "a.b&c": torch.zeros(2)}
    layout = tv.analyze(hostile)
    html_text = layout.tree()._repr_mimebundle_()["text/html"]
    assert "<img" not in html_text and "&lt;img src=x onerror=alert(1)&gt;" in html_text
    assert "b&amp;c" in html_text and "<script" not in html_text.lower()
    assert html_text.count('type="checkbox"') == 3  # the root and the two prefixes can fold
    bundle = layout._repr_mimebundle_()
    assert bundle["text/html"].endswith("</details>") and "module tree" in bundle["text/html"]
    flat = tv.analyze({"w": torch.zeros(2)})._repr_mimebundle_()["text/html"]
    assert "module tree" not in flat  # a flat list of names has no tree to show


def test_tree_html_rows_give_the_numbers_and_marks():
    from tensorviz.render.html.tree import tree_html

    html_text = tree_html(tv.analyze(TiedLM(vocab=50, dim=16)).tree())
    assert "3.1 KiB" in html_text and "96.2%" in html_text  # wte: 3200 of 3328 bytes
    assert "↔ tied to wte.weight (counted there)" in html_text
    assert 'class="tvt-shared" style="width:96.15%"' in html_text  # lm_head reads wte's bytes


def test_cli_tree_and_depth(tmp_path, capsys):
    from tensorviz.cli import main

    path = tmp_path / "m.safetensors"
    save_file({"enc.l0.w": torch.zeros(4, 4), "enc.l1.w": torch.zeros(2), "head.w": torch.zeros(3)}, path)
    assert main([str(path), "--tree", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "(model)       84 B 100.0%     21 elements",
        "├─ enc        72 B  85.7%     18",
        "└─ head       12 B  14.3%      3",
    ]
    assert main([str(path), "--depth", "1"]) == 1
    assert "--depth sets the levels of --tree; add --tree" in capsys.readouterr().err
    assert main([str(path), "--tree"]) == 0
    assert "│  ├─ l0         64 B  76.2%     16" in capsys.readouterr().out


def test_tree_html_folds_alike_layers_into_one_row():
    from tensorviz.render.html.tree import tree_html

    html_text = tree_html(tv.analyze(nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])).tree())
    assert "0 … 5 · 6 × Linear" in html_text and "80 B each; one shown" in html_text
    assert html_text.count(">weight<") == 1  # the first layer stands for all six
