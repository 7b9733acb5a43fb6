"""The model-first explorer (issue 25, item 3): the model map leads, the diagram first draws the
storages that matter with the rest one click away, and the overview only where it tells
storages apart. Widgets driven in-process through their traits; the browser side is
``test_browser_model_first.py`` and ``tests/js/treemap.test.mjs``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tensorviz as tv
from tests.helpers.models import TiedLM

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

from tensorviz.explorer.modelmap import CHILD_CAP, MAP_CELLS, ModelMap, map_cells  # noqa: E402
from tensorviz.explorer.state import KEY_LARGEST, ExplorerState, key_storages, normalise  # noqa: E402


class Stack(nn.Module):
    """``n`` blocks of two linears (the second tied to block 0's first in block 1), a norm."""

    def __init__(self, n: int = 3, dim: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, dim, bias=False), nn.Linear(dim, 2 * dim)) for _ in range(n)
        )
        self.norm = nn.LayerNorm(dim)
        self.blocks[1][0].weight = self.blocks[0][0].weight


def test_map_cells_open_whole_levels_and_count_bytes_once():
    lay = tv.analyze(Stack())
    cells = map_cells(lay.tree())
    paths = [c[0] for c in cells]
    assert paths[:3] == ["", "blocks", "norm"]
    assert cells[0][3] == lay.unique_nbytes  # the root's own bytes: every byte counted once
    by_path = {c[0]: c for c in cells}
    # block 1's first weight reads block 0's bytes: counted there, hatched here
    assert by_path["blocks.1.0.weight"][3:5] == [0, 64]
    assert by_path["blocks.0.0.weight"][3:5] == [64, 0]
    for k, c in enumerate(cells):  # children's own bytes add up to their parent's
        kids = [d for d in cells if d[2] == k]
        if kids:
            assert sum(d[3] for d in kids) == c[3], c[0]
    assert {c[6] for c in cells} == {0, 1, 2, 3, 4}  # every level opened: 21 leaves fit


def test_map_cells_stop_before_a_level_that_does_not_fit():
    lay = tv.analyze({f"layers.{i}.{p}.weight": torch.zeros(4, device="meta") for i in range(50) for p in "qkv"})
    cells = map_cells(lay.tree())
    assert [c[0] for c in cells[:3]] == ["", "layers", "layers.0"]
    assert len(cells) == 2 + 50  # 150 leaves would pass MAP_CELLS: the layers stay closed
    assert 50 <= MAP_CELLS < 50 * 3
    assert [c[0] for c in map_cells(lay.tree(), "layers.7")] == ["layers.7", *(f"layers.7.{p}" for p in "qkv"),
                                                                 *(f"layers.7.{p}.weight" for p in "qkv")]  # fmt: skip


def test_map_cells_sum_the_children_past_the_cap():
    lay = tv.analyze({f"t.w{i}": torch.zeros(1 + i, device="meta") for i in range(CHILD_CAP + 10)})
    cells = map_cells(lay.tree())
    kids = [c for c in cells if c[2] == 1]
    assert len(kids) == CHILD_CAP and kids[-1][:2] == ["", "… 11 more"]
    assert kids[0][0] == f"t.w{CHILD_CAP + 9}"  # largest first
    assert kids[-1][3] == sum(4 * (1 + i) for i in range(11))  # the 11 smallest, summed


def test_the_model_map_leads_and_opens_where_it_is_clicked():
    ex = tv.explore(Stack(), snapshot=False)
    assert ex.children[1] is ex.model_map and ex.children[2] is ex.modules_pane
    assert ex.modules_pane.selected_index is None  # the list and search folded under the map
    ex.model_map.picked = ["blocks.1", 1]  # a click on block 1's cell in the browser
    assert ex.tree_panel.selected == "blocks.1" and ex.state.names == r"^blocks\.1(\.|$)"
    assert [c[0] for c in ex.model_map.cells][:3] == ["blocks.1", "blocks.1.1", "blocks.1.0"]
    assert ex.canvas.caption == "1 of 11 tensors shown (+ 2 simple storages, 160 B, folded into one row)"
    assert "model map: blocks.1 ·" in ex.model_map.caption
    ex.model_map.picked = ["", 2]  # "whole model"
    assert ex.state.names == "" and ex.model_map.cells[0][0] == "" and ex.last_error is None


def test_hostile_names_in_the_map_are_escaped_and_elided():
    lay = tv.analyze({"m\x1b[31m." + "x" * 500 + ".w": torch.zeros(2), "m.b": torch.zeros(1)})
    labels = [c[1] for c in ModelMap(lay.tree()).cells]
    assert all("\x1b" not in s and len(s) <= 120 for s in labels)
    assert any(s.startswith("xxx") and "…" in s for s in labels)


def _many(n: int = 20) -> dict[str, torch.Tensor]:
    w = torch.zeros(6, 4)
    out = {f"p{i}.w": torch.zeros(1 + i) for i in range(n)}  # storages 0..n-1, growing
    out.update({"tie.a": w, "tie.b": w, "tie.c": w[1:3]})  # storage n: shared
    freed = torch.zeros(8)
    out["freed.v"] = freed[2:6]
    freed.untyped_storage().resize_(0)  # storage n + 1: freed, its view reads past the end
    return out


def test_key_storages_are_the_shared_the_freed_and_the_largest():
    lay = tv.analyze(_many())
    # the tie's 96 B and the 7 largest of p0..p19 (4 to 80 B), and the freed one (0 B)
    assert key_storages(lay) == (*range(20 - KEY_LARGEST + 1, 20), 20, 21)
    assert key_storages(tv.analyze({f"p{i}.w": torch.zeros(1 + i) for i in range(KEY_LARGEST)})) is None
    st = normalise(ExplorerState(), lay)
    assert st.key == key_storages(lay) and st.diagram_options()["storages"] == list(st.key)
    assert normalise(ExplorerState(names="tie"), lay).key is None  # a filter draws what it matches
    assert normalise(ExplorerState(all_storages=True), lay).key is None
    assert normalise(ExplorerState(storage=3), lay).key is None


def test_the_diagram_draws_the_storages_that_matter_and_the_rest_on_a_click():
    ex = tv.explore(_many(), snapshot=False)
    assert sorted(b.storage for b in ex.diagram.blocks) == list(ex.state.key) and len(ex.state.key) == 9
    assert ex.focus_row.layout.display is None and ex.all_toggle.description == "show all 22 storages"
    assert "the 9 storages that matter of 22" in ex.focus_note.value
    ex.all_toggle.value = True
    assert ex.state.key is None and len(ex.diagram.blocks) + ex.diagram.collapsed.count == 22
    assert ex.all_toggle.description == "show only the 9 that matter"
    ex.all_toggle.value = False
    assert sorted(b.storage for b in ex.diagram.blocks) == list(ex.state.key)
    small = tv.explore(TiedLM(), snapshot=False)
    assert small.state.key is None and small.focus_row.layout.display == "none"


def test_very_long_names_are_elided_in_the_list_the_picker_and_the_details():
    """Issue 21 class 12, explorer side: a 5,000-character name is shown as the text outputs
    show it (start … end, escaped) and still selected by its whole self."""
    from tensorviz.core.names import shown

    long = "blocks." + "x" * 5000 + ".weight\x1b[2J"
    w = torch.zeros(4)
    ex = tv.explore({long: w, "b." + long: w, "c": torch.zeros(2)}, snapshot=False)
    labels = [label for label, _ in ex.tensor_list.options]
    assert labels[0] == "blocks." + "x" * 72 + "…" + "x" * 66 + ".weight\\x1b[2J" and len(labels[0]) == 160
    assert [value for _, value in ex.tensor_list.options] == [long, "b." + long]  # c: folded, simple
    assert max(len(label) for label, _ in ex.storage_picker.options) < 200
    ex.tensor_list.value = ("b." + long,)  # a click on the elided label selects the whole name
    assert ex.selected == ["b." + long]
    assert html_text(ex.details.value).count(shown("b." + long)) == 1 and len(ex.details.value) < 2000
    assert "\x1b" not in ex.details.value and ex.last_error is None


def html_text(value: str) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", value))
