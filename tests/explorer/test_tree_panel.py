"""The explorer's model map panel, driven through its widgets' traits (no browser)."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import tensorviz as tv
from tests.helpers.models import TiedLM

pytest.importorskip("ipywidgets")
from tensorviz.explorer.tree import MAX_BARS, TreePanel, memory_html  # noqa: E402


def plain(options) -> list[str]:
    return [label.replace("\u00a0", " ") for label, _ in options]


def test_rows_start_folded_largest_first_and_open_on_choice():
    panel = TreePanel(tv.analyze(TiedLM(vocab=50, dim=16)))
    assert plain(panel.rows.options) == [
        "▾ (model)  TiedLM  3.2 KiB · 100.0%",
        "  ▸ wte  Embedding  3.1 KiB · 96.2%",
        "  ▸ ln  LayerNorm  128 B · 3.8%",
        "  ▸ lm_head  Linear  0 B · 0.0%",
    ]
    panel.rows.value = "lm_head"  # a click
    assert panel.selected == "lm_head" and panel.name_pattern() == r"^lm_head(\.|$)"
    assert plain(panel.rows.options)[-1] == "    · weight  float32[50, 16]  0 B · 0.0%  ↔ tied to wte.weight"
    assert (panel.toggle_button.description, panel.toggle_button.icon) == ("collapse", "minus")
    panel.toggle_button.click()
    assert len(panel.rows.options) == 4 and panel.selected == "lm_head"


def test_partner_jump_and_whole_model():
    panel = TreePanel(tv.analyze(TiedLM()))
    panel.select("lm_head.weight")
    assert not panel.partner_button.disabled
    panel.partner_button.click()
    assert panel.selected == "wte.weight" and panel.rows.value == "wte.weight"
    panel.partner_button.click()  # and back: wte.weight shares with lm_head.weight
    assert panel.selected == "lm_head.weight"
    panel.whole_button.click()
    assert panel.selected == "" and panel.name_pattern() == ""
    with pytest.raises(KeyError, match="no module or tensor 'nope'"):
        panel.select("nope")


def test_search_lists_full_paths():
    panel = TreePanel(tv.analyze(TiedLM()))
    panel.search.value = "WEIGHT"
    assert [v for _, v in panel.rows.options] == ["wte.weight", "ln.weight", "lm_head.weight"]
    panel.search.value = "zzz"
    assert plain(panel.rows.options) == ["no module or tensor name contains 'zzz'"]
    panel.rows.value = "\0none"  # the message row is no choice
    assert panel.selected == ""


def test_memory_view_bars_are_shares_of_the_module():
    layout = tv.analyze(TiedLM(vocab=50, dim=16))
    html_text = TreePanel(layout).memory.value
    # wte 3200 of 3328 bytes; lm_head owns nothing and reads wte's 3200 bytes (hatched)
    assert '<i style="width:96.15%"></i>' in html_text
    assert '<i style="width:0.00%"></i><i class="sh" style="width:96.15%"></i>' in html_text
    many = tv.analyze(nn.Sequential(*[nn.Linear(2, 2) for _ in range(20)]))
    text = memory_html(many.tree().root, many.tree().total_nbytes)
    assert text.count('class="row"') == MAX_BARS and "… 9 more" in text
    hostile = tv.analyze({"<b>x</b>.w": torch.zeros(2)})
    assert "&lt;b&gt;x&lt;/b&gt;" in TreePanel(hostile).memory.value


def test_name_pattern_matches_only_the_module():
    panel = TreePanel(tv.analyze({"a.w": torch.zeros(1), "ab.w": torch.zeros(1), "a": torch.zeros(1)}))
    panel.select("a")
    rx = re.compile(panel.name_pattern())
    assert [n for n in ("a", "a.w", "ab.w") if rx.search(n)] == ["a", "a.w"]


def test_choosing_a_module_filters_the_explorers_diagram():
    ex = tv.explore(TiedLM())
    assert ex.tree_panel is not None and ex.modules_pane.children == (ex.tree_panel,)
    assert ex.children[1] is ex.model_map  # the model map leads, under the title
    before = ex.tensor_list.options
    ex.tree_panel.rows.value = "ln"  # a click on the ln row
    assert ex.name_filter.value == r"^ln(\.|$)" and ex.state.names == r"^ln(\.|$)"
    assert sorted(ex.tensor_list.options) == ["ln.bias", "ln.weight"] and ex.last_error is None
    ex.tree_panel.whole_button.click()
    assert ex.name_filter.value == "" and ex.tensor_list.options == before
    flat = tv.explore({"w": torch.zeros(2)})
    assert flat.tree_panel is None and flat.model_map is None and flat.panel.layout.display == "none"
